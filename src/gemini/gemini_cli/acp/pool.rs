//! The warm processes: one per (project root, mode, model), a few at most, reaped when idle;
//! the sessions they hold for our threads; a prompt sent in one and waited on.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    ContentBlock, LoadSessionRequest, NewSessionRequest, PromptRequest, SessionId, SessionModeId,
    SetSessionModeRequest, TextContent,
};
use tokio::sync::mpsc;

use super::rpc::acp_error;
use super::run::{Waited, Waiting, usage_of};
use super::process::Process;
use super::run::AgentRun;
use super::workspaces::Workspaces;
use super::{
    AcpSettings, Failure, Key, Kind, PLAIN_SESSIONS, Prompt, check_mode, lock, project_tools,
};
use crate::collector::Collector;
use crate::gemini::agent_mode::AgentMode;
use crate::gemini::gemini_cli::Cleanup;
use crate::gemini::gemini_cli::{render_prompt, system_prompt};
use crate::gemini::vocabulary::{
    CallContext, GeminiError, GenerateRequest, GenerateResponse, cli_error,
};

/// How long starting a process and its handshake may take.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The warm processes.
pub struct Pool {
    pub(super) settings: AcpSettings,
    /// Where the processes run (the first project root).
    pub(super) root: PathBuf,
    /// The roots and secret names the agent's permission requests are checked against; `None`:
    /// every request refused.
    pub(super) collector: Option<Arc<Collector>>,
    /// The agent's only way to read the project, started with its first process.
    pub(super) tools: tokio::sync::OnceCell<Arc<project_tools::ProjectTools>>,
    pub(super) processes: Mutex<HashMap<Key, Arc<Process>>>,
    /// Where each thread's session lives (for continuation after the process changed).
    pub(super) threads: Mutex<HashMap<String, (Key, String)>>,
    /// The thread continuing each caller's conversation in a workspace (the bridge's `gemini`).
    pub(super) workspaces: Workspaces,
    pub(super) reaper: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Pool {
    pub fn new(
        settings: AcpSettings,
        root: PathBuf,
        collector: Option<Arc<Collector>>,
    ) -> Arc<Pool> {
        Arc::new(Pool {
            settings,
            root,
            collector,
            tools: tokio::sync::OnceCell::new(),
            processes: Mutex::default(),
            threads: Mutex::default(),
            workspaces: Workspaces::default(),
            reaper: Mutex::default(),
        })
    }

    /// Refuses a mode that changes files or runs commands unless the operator allowed it
    /// (`GEMINI_MCP_ACP_ALLOW_MODES`).
    pub fn check_mode(&self, mode: AgentMode) -> Result<(), GeminiError> {
        check_mode(mode, &self.settings.allowed_modes)
    }

    /// Sends `prompt` and collects what the agent did until it stopped; each tool call is
    /// reported as a step; cancellation sends `session/cancel`, then kills the process if it
    /// does not stop.
    pub async fn prompt(
        self: &Arc<Self>,
        prompt: Prompt,
        ctx: &CallContext,
    ) -> Result<AgentRun, GeminiError> {
        self.check_mode(prompt.mode)?;
        let key = Key {
            root: self.root.clone(),
            model: prompt.model.clone(),
            kind: Kind::Agent(prompt.mode),
        };
        self.prompt_on(key, prompt, ctx).await
    }

    /// The CLI backend's call: Gemini answers `req` as a plain model, in a new session of a warm
    /// process (the whole conversation sent as one text, our thread being the source of truth).
    /// `Err(Unavailable)` when the process cannot be started at all.
    pub async fn answer(
        self: &Arc<Self>,
        req: &GenerateRequest,
        ctx: &CallContext,
    ) -> Result<GenerateResponse, Failure> {
        let key = Key {
            root: self.root.clone(),
            model: req.model.id.clone(),
            kind: Kind::Plain {
                web_search: req.web_search,
            },
        };
        let text = format!(
            "# Instructions\n\n{}\n\n# Conversation\n\n{}",
            system_prompt(req),
            render_prompt(&req.contents)
        );
        let prompt = Prompt {
            text,
            rebuilt: None,
            mode: AgentMode::Default,
            model: req.model.id.clone(),
            thread: None,
        };
        let process = self.process(&key).await.map_err(Failure::Unavailable)?;
        let run = self
            .prompt_in(key, process, prompt, ctx)
            .await
            .map_err(Failure::Failed)?;
        if run.messages.trim().is_empty() {
            return Err(Failure::Failed(cli_error(format!(
                "the Gemini CLI returned an empty answer ({}); retry, or rephrase the request",
                run.stop_reason
            ))));
        }
        let finish_reason = run.finish_reason();
        Ok(GenerateResponse {
            text: run.messages,
            model_version: Some(req.model.id.clone()),
            usage: run.usage.unwrap_or_default(),
            finish_reason: Some(finish_reason),
            ..Default::default()
        })
    }

    pub(super) async fn prompt_on(
        self: &Arc<Self>,
        key: Key,
        prompt: Prompt,
        ctx: &CallContext,
    ) -> Result<AgentRun, GeminiError> {
        let process = self.process(&key).await?;
        self.prompt_in(key, process, prompt, ctx).await
    }

    pub(super) async fn prompt_in(
        self: &Arc<Self>,
        key: Key,
        process: Arc<Process>,
        prompt: Prompt,
        ctx: &CallContext,
    ) -> Result<AgentRun, GeminiError> {
        let (busy, opened) = self.open(&key, process, prompt.thread.as_deref()).await?;
        self.run(&key, busy.process(), opened, prompt, ctx).await
    }

    pub(super) async fn run(
        &self,
        key: &Key,
        process: &Arc<Process>,
        (session_id, how): (String, &'static str),
        prompt: Prompt,
        ctx: &CallContext,
    ) -> Result<AgentRun, GeminiError> {
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&process.routes).insert(session_id.clone(), tx);
        let text = match (how, prompt.rebuilt) {
            ("new", Some(rebuilt)) => rebuilt,
            _ => prompt.text,
        };
        let request = PromptRequest::new(
            SessionId::new(session_id.clone()),
            vec![ContentBlock::Text(TextContent::new(text))],
        );
        let sent = process.cx.send_request(request);
        let run = AgentRun {
            session_id: session_id.clone(),
            session: how.into(),
            ..AgentRun::default()
        };
        // The wait runs in its own task, so that a call dropped mid-prompt (the MCP server drops
        // a cancelled call) still cancels the prompt and, failing that, kills the process.
        let stop = ctx.cancel.child_token();
        let guard = stop.clone().drop_guard();
        let waiting = Waiting {
            process: process.clone(),
            session_id: session_id.clone(),
            events: rx,
            ctx: ctx.clone(),
            stop,
            timeout: self.settings.timeout,
            collector: self.collector.clone(),
        };
        // The CLI's own record of the session goes once the prompt is over, in the same task (the
        // live session keeps the conversation in memory; our thread keeps it for good).
        let record = Cleanup::new(self.settings.cli_home.as_deref(), &process.cwd, &session_id);
        let (mut run, waited) = tokio::spawn(async move {
            let waited = waiting.wait(sent, run).await;
            record.run().await;
            waited
        })
        .await
        .map_err(|e| cli_error(format!("the wait for the Gemini CLI agent failed: {e}")))?;
        guard.disarm();
        let response = match waited {
            Waited::Answered(r) => r,
            Waited::Cancelled => return Err(GeminiError::Cancelled),
            Waited::TimedOut => {
                return Err(cli_error(format!(
                    "the Gemini CLI agent did not finish within {} s (GEMINI_TIMEOUT_SECS): ask for a narrower task, or raise the limit",
                    self.settings.timeout.as_secs()
                )));
            }
        };
        if ctx.cancel.is_cancelled() {
            return Err(GeminiError::Cancelled);
        }
        let response = match response {
            Ok(r) => r,
            Err(e) => {
                // A closed transport is the process going away: wait for it to be reaped.
                let mut closed = process.closed.clone();
                let gone = tokio::time::timeout(Duration::from_secs(2), closed.wait_for(|c| *c))
                    .await
                    .is_ok();
                if !gone {
                    return Err(acp_error(&e));
                }
                self.forget(key);
                tracing::warn!(
                    "the Gemini CLI (ACP) exited during a prompt; the next call starts it again"
                );
                return Err(cli_error(
                    "the Gemini CLI (ACP) exited while answering; the next call starts it again",
                ));
            }
        };
        run.stop_reason = serde_json::to_value(response.stop_reason)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "end_turn".into());
        run.usage = response
            .meta
            .as_ref()
            .and_then(|m| m.get("quota"))
            .and_then(|q| q.get("token_count"))
            .and_then(usage_of);
        if let Some(thread) = prompt.thread {
            lock(&process.sessions).insert(thread.clone(), session_id.clone());
            lock(&self.threads).insert(thread, (key.clone(), session_id));
        }
        Ok(run)
    }

    /// The session for `thread`: live in this process, loaded from the CLI's store, or new.
    pub(super) async fn session(
        &self,
        key: &Key,
        process: &Arc<Process>,
        thread: Option<&str>,
    ) -> Result<(String, &'static str), GeminiError> {
        let servers = match (key.kind, self.tools.get()) {
            (Kind::Agent(_), Some(tools)) => vec![tools.entry()],
            _ => Vec::new(),
        };
        // A session works in the process's private directory, not in the project (see `command`).
        let cwd = process.cwd.clone();
        let Kind::Agent(mode) = key.kind else {
            let created = process
                .cx
                .send_request(NewSessionRequest::new(cwd))
                .block_task()
                .await
                .map_err(|e| acp_error(&e))?;
            process
                .started
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            return Ok((created.session_id.0.to_string(), "new"));
        };
        if let Some(thread) = thread {
            if let Some(id) = lock(&process.sessions).get(thread).cloned() {
                tracing::info!(thread, session = %id, "ACP: continuing the live session");
                return Ok((id, "live"));
            }
            let known = lock(&self.threads).get(thread).cloned();
            if let Some((_, id)) = known
                && process.load_session
            {
                let load = LoadSessionRequest::new(SessionId::new(id.clone()), cwd.clone())
                    .mcp_servers(servers.clone());
                match process.cx.send_request(load).block_task().await {
                    Ok(_) => {
                        tracing::info!(thread, session = %id, "ACP: session loaded in a new process");
                        self.set_mode(process, &id, mode.session_mode()).await?;
                        return Ok((id, "loaded"));
                    }
                    Err(e) => {
                        tracing::info!(thread, session = %id, error = %e.message, "ACP: the session could not be loaded; starting a new one");
                    }
                }
            }
        }
        let created = process
            .cx
            .send_request(NewSessionRequest::new(cwd).mcp_servers(servers))
            .block_task()
            .await
            .map_err(|e| acp_error(&e))?;
        let id = created.session_id.0.to_string();
        process
            .started
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.set_mode(process, &id, mode.session_mode()).await?;
        Ok((id, "new"))
    }

    pub(super) async fn set_mode(
        &self,
        process: &Process,
        id: &str,
        mode: AgentMode,
    ) -> Result<(), GeminiError> {
        process
            .cx
            .send_request(SetSessionModeRequest::new(
                SessionId::new(id.to_string()),
                SessionModeId::new(mode.id()),
            ))
            .block_task()
            .await
            .map_err(|e| {
                cli_error(format!(
                    "the Gemini CLI refused approval mode `{}` ({}); update the Gemini CLI",
                    mode.id(),
                    e.message
                ))
            })?;
        Ok(())
    }

    pub(super) fn forget(&self, key: &Key) {
        lock(&self.processes).remove(key);
    }

    /// The agent sessions this pool holds for threads: (thread, session, model, root).
    pub fn sessions(&self) -> Vec<(String, String, String, PathBuf)> {
        let mut out: Vec<(String, String, String, PathBuf)> = lock(&self.threads)
            .iter()
            .map(|(thread, (key, session))| {
                (
                    thread.clone(),
                    session.clone(),
                    key.model.clone(),
                    key.root.clone(),
                )
            })
            .collect();
        out.sort();
        out
    }

    /// Forgets a thread's session (its thread was deleted).
    pub fn forget_thread(&self, thread: &str) {
        if let Some((key, _)) = lock(&self.threads).remove(thread)
            && let Some(p) = lock(&self.processes).get(&key)
        {
            lock(&p.sessions).remove(thread);
        }
    }

    /// Whether a process is running.
    pub fn running(&self) -> bool {
        lock(&self.processes).values().any(|p| p.alive())
    }

    /// How many processes are running (the metrics' warm ACP processes).
    pub fn alive(&self) -> usize {
        lock(&self.processes).values().filter(|p| p.alive()).count()
    }

    /// Kills every process (shutdown).
    pub fn shutdown(&self) {
        for (_, p) in lock(&self.processes).drain() {
            p.kill();
        }
        if let Some(r) = lock(&self.reaper).take() {
            r.abort();
        }
    }

    /// The live process for `key`, or a new one (the least recently used stopped past the cap).
    pub(super) async fn process(self: &Arc<Self>, key: &Key) -> Result<Arc<Process>, GeminiError> {
        {
            let mut processes = lock(&self.processes);
            let worn = |p: &Process| {
                matches!(key.kind, Kind::Plain { .. })
                    && p.started.load(std::sync::atomic::Ordering::SeqCst) >= PLAIN_SESSIONS
                    && p.in_flight.load(std::sync::atomic::Ordering::SeqCst) == 0
            };
            match processes.get(key) {
                Some(p) if p.alive() && !worn(p) => return Ok(p.clone()),
                Some(p) if p.alive() => {
                    tracing::info!(
                        "the Gemini CLI (ACP) served {PLAIN_SESSIONS} calls; replacing it"
                    );
                    p.kill();
                    processes.remove(key);
                }
                Some(_) => {
                    tracing::warn!(root = %key.root.display(), "the Gemini CLI (ACP) had exited; starting it again");
                    processes.remove(key);
                }
                None => {}
            }
        }
        let started = tokio::time::timeout(START_TIMEOUT, self.start(key))
            .await
            .map_err(|_| cli_error(format!(
                    "the Gemini CLI did not answer `initialize` within {} s over ACP: run `gemini --acp` by hand to see why",
                    START_TIMEOUT.as_secs()
                )))??;
        let process = Arc::new(started);
        let mut processes = lock(&self.processes);
        while processes.len() >= self.settings.max_processes.max(1) {
            let oldest = processes
                .iter()
                .filter(|(_, p)| p.in_flight.load(std::sync::atomic::Ordering::SeqCst) == 0)
                .min_by_key(|(_, p)| *lock(&p.last_used))
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => {
                    if let Some(p) = processes.remove(&k) {
                        p.kill();
                    }
                }
                None => break,
            }
        }
        processes.insert(key.clone(), process.clone());
        drop(processes);
        self.start_reaper();
        Ok(process)
    }

    pub(super) fn start_reaper(self: &Arc<Self>) {
        let mut reaper = lock(&self.reaper);
        if reaper.is_some() {
            return;
        }
        let pool = Arc::downgrade(self);
        let every = (self.settings.idle / 4).max(Duration::from_millis(100));
        *reaper = Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(pool) = pool.upgrade() else { return };
                let idle = pool.settings.idle;
                lock(&pool.processes).retain(|key, p| {
                    let busy = p.in_flight.load(std::sync::atomic::Ordering::SeqCst) > 0;
                    let keep = p.alive() && (busy || lock(&p.last_used).elapsed() < idle);
                    if !keep {
                        tracing::info!(root = %key.root.display(), "the Gemini CLI (ACP) was idle; stopping it");
                        p.kill();
                    }
                    keep
                });
            }
        }));
    }

    /// The agent's project tools, started once (none without a collector: nothing to read).
    pub(super) async fn project_tools(&self) -> Result<(), GeminiError> {
        let Some(collector) = &self.collector else {
            return Ok(());
        };
        self.tools
            .get_or_try_init(|| async {
                let explorer = Arc::new(
                    crate::explore::Explorer::new(collector.clone())
                        .with_result_chars(self.settings.result_chars),
                );
                project_tools::ProjectTools::start(explorer)
                    .await
                    .map(Arc::new)
            })
            .await?;
        Ok(())
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Pool {
    /// The bridge's conversations.
    pub fn workspaces(&self) -> &Workspaces {
        &self.workspaces
    }

    /// The model of the agent (not the plain backend) used last, while its process runs.
    pub fn current_model(&self) -> Option<String> {
        lock(&self.processes)
            .iter()
            .filter(|(key, p)| matches!(key.kind, Kind::Agent(_)) && p.alive())
            .max_by_key(|(_, p)| *lock(&p.last_used))
            .map(|(key, _)| key.model.clone())
    }
}

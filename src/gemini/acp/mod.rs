//! The Gemini CLI as a warm agent over the Agent Client Protocol (`gemini --acp`).
//!
//! One long-lived process per (project root, mode, model), a few at most, each serving many
//! sessions; the JSON-RPC is the `agent-client-protocol` crate's. What is ours:
//!
//! - **The policy.** Every `session/request_permission` is answered by [`policy::answer`] from
//!   the mode the server allowed, never by the caller alone.
//! - **Reads through the collector only.** The agent's own file, search, shell and fetch tools
//!   are denied; it reads through our explore functions, served to its sessions as an MCP server
//!   ([`project_tools`]); modes that change files or run commands are refused.
//! - **Process hygiene, as for the headless CLI.** The process is the leader of its own group,
//!   killed whole when it idles past its time, when the pool shuts down, or when a cancelled
//!   prompt does not stop after `session/cancel`; a crash fails the prompts in flight with an
//!   error saying so and the next call starts a new process (logged); a process found dead
//!   before a call reached it is replaced for that call (`restart.rs`).
//! - **Sessions are a cache.** A session maps to one of our threads; continuing reuses the live
//!   session, or loads it (`session/load`) in a new process.

pub mod policy;
pub mod project_tools;
mod restart;
mod workspaces;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, ContentBlock, FileSystemCapabilities,
    InitializeRequest, LoadSessionRequest, NewSessionRequest, PromptRequest, PromptResponse,
    RequestPermissionRequest, SessionId, SessionModeId, SessionNotification, SessionUpdate,
    SetSessionModeRequest, TextContent, ToolCallStatus, ToolKind,
};
use agent_client_protocol::{Agent, ByteStreams, Client};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::Serialize;
use tokio::process::Command;
use tokio::sync::{mpsc, oneshot};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use crate::collector::Collector;
use crate::gemini::{CallContext, GeminiError, Usage, cli_error};
pub use policy::{Decision, Mode};
pub use workspaces::Workspaces;

/// How long a cancelled prompt may take to stop after `session/cancel` before its process is
/// killed.
const CANCEL_GRACE: Duration = Duration::from_secs(3);
/// How long starting a process and its handshake may take.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// A server name no one uses: the MCP allow-list then admits no configured server.
const NO_MCP_SERVER: &str = "gemini-mcp-server-allows-none";

/// How the pool runs the CLI.
#[derive(Debug, Clone)]
pub struct AcpSettings {
    /// The `gemini` executable, already located.
    pub program: PathBuf,
    /// A process with no prompt for this long exits.
    pub idle: Duration,
    /// Most processes alive at once (the least recently used one is stopped past it).
    pub max_processes: usize,
    /// Modes that change files or run commands the configuration allows (`plan` and `default`
    /// always are).
    pub allowed_modes: Vec<Mode>,
    /// Deadline of one prompt.
    pub timeout: Duration,
    /// Longest result of one of the agent's project tools, in characters
    /// (`GEMINI_MCP_EXPLORE_RESULT_CHARS`).
    pub result_chars: usize,
    /// Where the CLI's working directories are kept (see `headless::workspace`); empty: the
    /// process's private directory.
    pub state_dir: PathBuf,
}

/// One tool call of the agent, as the reply shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentToolCall {
    pub id: String,
    pub title: String,
    /// `read`, `search`, `edit`, `execute`, …
    pub kind: String,
    /// The arguments as the agent reported them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<serde_json::Value>,
    /// `pending`, `in_progress`, `completed` or `failed`.
    pub status: String,
    /// Files it touched, as the agent named them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<String>,
}

/// One entry of the agent's plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanItem {
    pub content: String,
    pub priority: String,
    pub status: String,
}

/// What one prompt produced.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AgentRun {
    /// The agent's messages, all of them.
    pub messages: String,
    /// Its messages since its last tool call: the answer (what it said before a tool call is
    /// narration of what it is about to do).
    pub last_message: String,
    pub thought: String,
    pub tool_calls: Vec<AgentToolCall>,
    pub plan: Vec<PlanItem>,
    /// `end_turn`, `max_tokens`, `max_turn_requests`, `refusal` or `cancelled`.
    pub stop_reason: String,
    pub session_id: String,
    /// Every permission request and our answer.
    pub permissions: Vec<Decision>,
    /// How the session was reached: `new`, `live` or `loaded`.
    pub session: String,
    #[serde(skip)]
    pub usage: Option<Usage>,
}

/// Updates routed from the connection to the prompt waiting on a session.
enum Event {
    Update(Box<SessionUpdate>),
    Permission(Decision),
}

type Routes = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Event>>>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Which process serves a call.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    root: PathBuf,
    model: String,
    kind: Kind,
}

/// What a process is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    /// The CLI's own agent and tools, under this approval mode.
    Agent(Mode),
    /// The CLI backend: Gemini answers as a plain model, every CLI tool denied (Google Search
    /// allowed when asked for).
    Plain { web_search: bool },
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Agent(m) => m.id(),
            Kind::Plain { .. } => "plain",
        }
    }
}

/// Sessions a plain process serves before it is replaced (the CLI keeps every session's
/// history in memory).
const PLAIN_SESSIONS: usize = 64;

/// One running `gemini --acp`.
struct Process {
    cx: ConnectionTo<Agent>,
    routes: Routes,
    pgid: Option<Pid>,
    /// Sessions this process holds, by our thread id.
    sessions: Mutex<HashMap<String, String>>,
    last_used: Mutex<Instant>,
    in_flight: std::sync::atomic::AtomicUsize,
    /// Fires when the connection ends (exit, crash or kill).
    closed: tokio::sync::watch::Receiver<bool>,
    load_session: bool,
    /// Sessions started in this process.
    started: std::sync::atomic::AtomicUsize,
    /// The process's private directory (policy, settings, TMPDIR; a plain process's system
    /// prompt), removed when the process goes: held, never read.
    _files: Option<tempfile::TempDir>,
    /// Where the process and its sessions work: a stable private directory under our settings
    /// (`headless::workspace`), never the project.
    cwd: PathBuf,
}

impl Process {
    fn alive(&self) -> bool {
        !*self.closed.borrow()
    }

    fn kill(&self) {
        if let Some(pgid) = self.pgid {
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Why a plain call failed.
#[derive(Debug)]
pub enum Failure {
    /// No process could be started or greeted (the CLI lacks ACP, or exits at once): the
    /// caller may answer another way.
    Unavailable(GeminiError),
    /// The call failed in a working process.
    Failed(GeminiError),
}

/// The warm processes.
pub struct Pool {
    settings: AcpSettings,
    /// Where the processes run (the first project root).
    root: PathBuf,
    /// The roots and secret names the agent's permission requests are checked against; `None`:
    /// every request refused.
    collector: Option<Arc<Collector>>,
    /// The agent's only way to read the project, started with its first process.
    tools: tokio::sync::OnceCell<Arc<project_tools::ProjectTools>>,
    processes: Mutex<HashMap<Key, Arc<Process>>>,
    /// Where each thread's session lives (for continuation after the process changed).
    threads: Mutex<HashMap<String, (Key, String)>>,
    /// The thread continuing each caller's conversation in a workspace (the bridge's `gemini`).
    workspaces: Workspaces,
    reaper: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// What to ask the agent.
pub struct Prompt {
    /// The new request, for a session that already holds the conversation.
    pub text: String,
    /// The whole conversation, for a new session of a thread with earlier turns.
    pub rebuilt: Option<String>,
    pub mode: Mode,
    pub model: String,
    /// Our thread: continuing reuses its session.
    pub thread: Option<String>,
}

impl AgentRun {
    /// The agent's stop reason in Gemini's terms (`STOP`, `MAX_TOKENS`), for the reply's "answer
    /// cut" notice.
    pub fn finish_reason(&self) -> String {
        match self.stop_reason.as_str() {
            "end_turn" => "STOP".into(),
            "max_tokens" => "MAX_TOKENS".into(),
            other => other.into(),
        }
    }

    /// The answer: the agent's last message, or all it said when it said nothing after its
    /// last tool call.
    pub fn answer(&self) -> &str {
        if self.last_message.trim().is_empty() {
            &self.messages
        } else {
            &self.last_message
        }
    }
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

    /// Refuses a mode that changes files or runs commands, whatever the configuration allows:
    /// the CLI's edit and shell tools read files beside the collector (an edit sends the file's
    /// lines back to Gemini, the shell prints any file), so the agent runs read-only.
    pub fn check_mode(&self, mode: Mode) -> Result<(), GeminiError> {
        check_mode(mode)
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
        req: &crate::gemini::GenerateRequest,
        ctx: &CallContext,
    ) -> Result<crate::gemini::GenerateResponse, Failure> {
        let key = Key {
            root: self.root.clone(),
            model: req.model.id.clone(),
            kind: Kind::Plain {
                web_search: req.web_search,
            },
        };
        let text = format!(
            "# Instructions\n\n{}\n\n# Conversation\n\n{}",
            super::headless::system_prompt(req),
            super::headless::render_prompt(&req.contents)
        );
        let prompt = Prompt {
            text,
            rebuilt: None,
            mode: Mode::Default,
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
        Ok(crate::gemini::GenerateResponse {
            text: run.messages,
            model_version: Some(req.model.id.clone()),
            usage: run.usage.unwrap_or_default(),
            finish_reason: Some(finish_reason),
            ..Default::default()
        })
    }

    async fn prompt_on(
        self: &Arc<Self>,
        key: Key,
        prompt: Prompt,
        ctx: &CallContext,
    ) -> Result<AgentRun, GeminiError> {
        let process = self.process(&key).await?;
        self.prompt_in(key, process, prompt, ctx).await
    }

    async fn prompt_in(
        self: &Arc<Self>,
        key: Key,
        process: Arc<Process>,
        prompt: Prompt,
        ctx: &CallContext,
    ) -> Result<AgentRun, GeminiError> {
        let (busy, opened) = self.open(&key, process, prompt.thread.as_deref()).await?;
        self.run(&key, busy.process(), opened, prompt, ctx).await
    }

    async fn run(
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
        };
        let (mut run, waited) = tokio::spawn(waiting.wait(sent, run))
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
    async fn session(
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
                        self.set_mode(process, &id, mode).await?;
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
        self.set_mode(process, &id, mode).await?;
        Ok((id, "new"))
    }

    async fn set_mode(&self, process: &Process, id: &str, mode: Mode) -> Result<(), GeminiError> {
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

    fn forget(&self, key: &Key) {
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
    async fn process(self: &Arc<Self>, key: &Key) -> Result<Arc<Process>, GeminiError> {
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

    fn start_reaper(self: &Arc<Self>) {
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
    async fn project_tools(&self) -> Result<(), GeminiError> {
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

    /// Starts `gemini --acp` for `key` and completes the handshake.
    async fn start(&self, key: &Key) -> Result<Process, GeminiError> {
        let (files, kind, settings) = match key.kind {
            Kind::Plain { web_search } => (
                plain_files(web_search).await?,
                "plain",
                super::headless::system_settings(None),
            ),
            Kind::Agent(_) => {
                self.project_tools().await?;
                (
                    project_tools::agent_files().await?,
                    "agent",
                    project_tools::settings(),
                )
            }
        };
        let cwd = super::headless::workspace_or(
            self.settings.state_dir.clone(),
            kind,
            settings,
            files.path().to_path_buf(),
        )
        .await?;
        let mut child = self.command(key, &files, &cwd).spawn().map_err(|e| {
            cli_error(format!(
                "could not start the Gemini CLI ({}): {e}; set GEMINI_CLI_PATH to its executable",
                self.settings.program.display()
            ))
        })?;
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw);
        if let Some(stderr) = child.stderr.take() {
            tokio::spawn(log_stderr(stderr));
        }
        let routes: Routes = Arc::default();
        let (closed_tx, closed_rx) = tokio::sync::watch::channel(false);
        let policy = match (key.kind, &self.collector) {
            (Kind::Agent(mode), Some(c)) => Some((mode, c.clone())),
            _ => None,
        };
        let ready = connect(child, routes.clone(), policy, closed_tx);
        let program = self.settings.program.display();
        let (cx, load_session) = match ready.await {
            Ok(Ok(ready)) => ready,
            Ok(Err(message)) => {
                return Err(cli_error(format!(
                    "the Gemini CLI refused the ACP handshake ({}); check that `{program} --acp` runs and that you are signed in (GEMINI_API_KEY, Vertex AI or a Code Assist account)",
                    super::headless::scrub(&message),
                )));
            }
            Err(_) => {
                return Err(cli_error(format!(
                    "the Gemini CLI exited before the ACP handshake; check that `{program} --acp` runs (Gemini CLI 0.61 or later)"
                )));
            }
        };
        tracing::info!(root = %key.root.display(), kind = key.kind.name(), model = %key.model, "the Gemini CLI (ACP) started");
        Ok(Process {
            cx,
            routes,
            pgid,
            sessions: Mutex::default(),
            last_used: Mutex::new(Instant::now()),
            in_flight: Default::default(),
            closed: closed_rx,
            load_session,
            started: Default::default(),
            _files: Some(files),
            cwd,
        })
    }

    /// `gemini --acp` with the model, no extensions and no MCP servers but ours, in its private
    /// directory (`headless::confine`), no relaunch, as the leader of its own process group; its policy, settings and TMPDIR in its
    /// private directory (the CLI's error reports kept private).
    fn command(&self, key: &Key, dir: &tempfile::TempDir, cwd: &std::path::Path) -> Command {
        let mut cmd = Command::new(&self.settings.program);
        cmd.arg("--policy")
            .arg(dir.path().join("policy.toml"))
            .env("TMPDIR", dir.path());
        let allowed = match key.kind {
            // A plain model: every CLI tool denied, a neutral system prompt (each call's own
            // instructions lead its prompt).
            Kind::Plain { .. } => {
                cmd.env("GEMINI_SYSTEM_MD", dir.path().join("system.md"));
                NO_MCP_SERVER
            }
            // The agent: only our tools (it reads the project through them).
            Kind::Agent(_) => project_tools::SERVER_NAME,
        };
        // Both in the private directory, under our settings: no workspace tree, no context file.
        super::headless::confine(&mut cmd, cwd);
        cmd.arg("--acp")
            .arg("-m")
            .arg(&key.model)
            .arg("-e")
            .arg("none")
            .arg("--allowed-mcp-server-names")
            .arg(allowed)
            .env("GEMINI_CLI_NO_RELAUNCH", "true")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        cmd
    }
}

type Ready = oneshot::Receiver<Result<(ConnectionTo<Agent>, bool), String>>;

/// Serves the ACP connection over the child's pipes until it ends: session updates routed to
/// the prompt waiting on their session, permission requests answered by the policy. Resolves
/// the returned receiver once `initialize` is answered (with the connection and whether the
/// agent can load sessions); `closed` fires when the connection ends.
fn connect(
    mut child: tokio::process::Child,
    routes: Routes,
    policy: Option<(Mode, Arc<Collector>)>,
    closed: tokio::sync::watch::Sender<bool>,
) -> Ready {
    let (ready_tx, ready_rx) = oneshot::channel();
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = child.stdout.take().expect("piped stdout");
    let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
    let notify_routes = routes.clone();
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    tokio::spawn(async move {
        let ready_tx = Mutex::new(Some(ready_tx));
        let connection = Client
            .v1()
            .name("gemini-mcp-server")
            .on_receive_notification(
                async move |n: SessionNotification, _cx| {
                    let id = n.session_id.0.to_string();
                    if let Some(tx) = lock(&notify_routes).get(&id) {
                        let _ = tx.send(Event::Update(Box::new(n.update)));
                    }
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_request(
                async move |request: RequestPermissionRequest, responder, _cx| {
                    let (answer, decision) = match &policy {
                        // Paths are resolved on disk: off the runtime.
                        Some((mode, collector)) => {
                            let (mode, collector, req) = (*mode, collector.clone(), request.clone());
                            tokio::task::spawn_blocking(move || policy::answer(mode, &collector, &req))
                                .await
                                .unwrap_or_else(|_| policy::refuse(&request))
                        }
                        None => policy::refuse(&request),
                    };
                    tracing::info!(tool = %decision.tool, allowed = decision.allowed, reason = %decision.reason, "ACP permission");
                    let id = request.session_id.0.to_string();
                    if let Some(tx) = lock(&routes).get(&id) {
                        let _ = tx.send(Event::Permission(decision));
                    }
                    responder.respond(answer)
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
                let init = InitializeRequest::new(ProtocolVersion::V1).client_capabilities(
                    ClientCapabilities::new()
                        .fs(FileSystemCapabilities::new()
                            .read_text_file(false)
                            .write_text_file(false))
                        .terminal(false),
                );
                let reply = cx.send_request(init).block_task().await;
                let tx = lock(&ready_tx).take();
                match reply {
                    Ok(r) => {
                        if let Some(tx) = tx {
                            let _ = tx.send(Ok((cx.clone(), r.agent_capabilities.load_session)));
                        }
                        // Serve until the process ends.
                        std::future::pending::<()>().await;
                        Ok(())
                    }
                    Err(e) => {
                        if let Some(tx) = tx {
                            let _ = tx.send(Err(e.message.clone()));
                        }
                        Err(e)
                    }
                }
            });
        // The connection serves until the process exits (a crash, a kill); if the connection
        // ends first, the process goes too. Either way it is reaped here.
        tokio::select! {
            result = connection => {
                if let Err(e) = result {
                    tracing::debug!(error = %e.message, "ACP connection ended");
                }
            }
            status = child.wait() => {
                tracing::debug!(?status, "the Gemini CLI (ACP) exited");
            }
        }
        let _ = closed.send(true);
        if let Some(pgid) = pgid {
            let _ = killpg(pgid, Signal::SIGKILL);
        }
        let _ = child.wait().await;
    });
    ready_rx
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// How a prompt's wait ended.
enum Waited {
    Answered(Result<PromptResponse, agent_client_protocol::Error>),
    Cancelled,
    TimedOut,
}

/// Waits for one prompt's answer, folding its updates into the run.
struct Waiting {
    process: Arc<Process>,
    session_id: String,
    events: mpsc::UnboundedReceiver<Event>,
    ctx: CallContext,
    /// Cancelled when the call is (or its future is dropped).
    stop: tokio_util::sync::CancellationToken,
    timeout: Duration,
}

impl Waiting {
    /// On `stop` or the deadline: `session/cancel`; an agent that has not stopped
    /// [`CANCEL_GRACE`] later is killed with its process group.
    async fn wait(
        mut self,
        sent: agent_client_protocol::v1::SentRequest<PromptResponse>,
        mut run: AgentRun,
    ) -> (AgentRun, Waited) {
        let answer = sent.block_task();
        tokio::pin!(answer);
        let deadline = tokio::time::sleep(self.timeout);
        tokio::pin!(deadline);
        let grace = tokio::time::sleep(Duration::from_secs(86_400 * 365));
        tokio::pin!(grace);
        let mut stopping: Option<Waited> = None;
        let waited = loop {
            tokio::select! {
                r = &mut answer => break match stopping.take() {
                    Some(why) => why,
                    None => Waited::Answered(r),
                },
                Some(event) = self.events.recv() => absorb(&mut run, event, &self.ctx),
                _ = self.stop.cancelled(), if stopping.is_none() => {
                    stopping = Some(Waited::Cancelled);
                    self.cancel(grace.as_mut());
                }
                _ = &mut deadline, if stopping.is_none() => {
                    stopping = Some(Waited::TimedOut);
                    self.cancel(grace.as_mut());
                }
                _ = &mut grace => {
                    tracing::warn!("the Gemini CLI (ACP) did not stop after session/cancel; killing it");
                    self.process.kill();
                    break stopping.take().unwrap_or(Waited::Cancelled);
                }
            }
        };
        // Updates sent before the answer are already queued: the connection routes in order.
        while let Ok(event) = self.events.try_recv() {
            absorb(&mut run, event, &self.ctx);
        }
        lock(&self.process.routes).remove(&self.session_id);
        (run, waited)
    }

    fn cancel(&self, grace: std::pin::Pin<&mut tokio::time::Sleep>) {
        let _ = self
            .process
            .cx
            .send_notification(CancelNotification::new(SessionId::new(
                self.session_id.clone(),
            )));
        grace.reset(tokio::time::Instant::now() + CANCEL_GRACE);
    }
}

/// What a plain process is told once: each prompt leads with its own instructions.
const PLAIN_SYSTEM: &str = "You answer requests that gemini-mcp-server sends on behalf of a coding agent. Each request \
begins with its instructions under `# Instructions`: follow them exactly, as your system instructions for that request. \
The conversation to answer follows under `# Conversation`. You have no tools.";

/// Whether the agent may run in `mode`: the modes that write are refused.
fn check_mode(mode: Mode) -> Result<(), GeminiError> {
    if mode.writes() {
        return Err(cli_error(format!(
            "approval mode `{}` is refused: the Gemini CLI's own edit and shell tools read files beside \
             this server's sandbox and redaction (the shell prints any file, secret files included; an \
             edit sends the file's lines back to Gemini), so its agent runs read-only here whatever \
             GEMINI_MCP_ACP_ALLOW_MODES lists: use `plan` (the default) or `default`",
            mode.id()
        )));
    }
    Ok(())
}

/// The approval modes a caller can use: those [`Pool::check_mode`] accepts.
pub fn usable_modes() -> Vec<Mode> {
    Mode::ALL
        .iter()
        .copied()
        .filter(|m| check_mode(*m).is_ok())
        .collect()
}

/// The private directory of a plain process (its working directory): its system prompt, its
/// policy and its system settings.
async fn plain_files(web_search: bool) -> Result<tempfile::TempDir, GeminiError> {
    private_dir(vec![
        ("system.md", PLAIN_SYSTEM.to_string()),
        ("policy.toml", super::headless::policy(web_search)),
        (
            super::headless::SETTINGS,
            super::headless::system_settings(None),
        ),
    ])
    .await
}

/// A process's private directory (0700): `files`, and its TMPDIR.
async fn private_dir(files: Vec<(&'static str, String)>) -> Result<tempfile::TempDir, GeminiError> {
    let io = |e: std::io::Error| {
        cli_error(format!(
            "could not prepare the Gemini CLI's private directory: {e}"
        ))
    };
    tokio::task::spawn_blocking(move || {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("gemini-mcp-acp-")
            .tempdir()
            .map_err(io)?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).map_err(io)?;
        for (name, text) in files {
            let path = dir.path().join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(io)?;
            }
            std::fs::write(path, text).map_err(io)?;
        }
        Ok(dir)
    })
    .await
    .map_err(|e| {
        cli_error(format!(
            "could not prepare the Gemini CLI's private directory: {e}"
        ))
    })?
}

/// Folds one event into the run, reporting tool calls as steps.
fn absorb(run: &mut AgentRun, event: Event, ctx: &CallContext) {
    match event {
        Event::Permission(d) => {
            ctx.step(format!(
                "{} {}: {}",
                if d.allowed { "allowed" } else { "rejected" },
                d.tool,
                d.reason
            ));
            run.permissions.push(d);
        }
        Event::Update(update) => match *update {
            SessionUpdate::AgentMessageChunk(c) => {
                if let ContentBlock::Text(t) = c.content {
                    run.messages.push_str(&t.text);
                    run.last_message.push_str(&t.text);
                }
            }
            SessionUpdate::AgentThoughtChunk(c) => {
                if let ContentBlock::Text(t) = c.content {
                    run.thought.push_str(&t.text);
                }
            }
            SessionUpdate::ToolCall(call) => {
                let entry = AgentToolCall {
                    id: call.tool_call_id.0.to_string(),
                    title: call.title.clone(),
                    kind: kind_name(call.kind),
                    arguments: call.raw_input.clone(),
                    status: status_name(call.status),
                    locations: call
                        .locations
                        .iter()
                        .map(|l| l.path.display().to_string())
                        .collect(),
                };
                ctx.step(format!("{} {}", entry.kind, entry.title));
                run.last_message.clear();
                run.tool_calls.push(entry);
            }
            SessionUpdate::ToolCallUpdate(update) => {
                let id = update.tool_call_id.0.to_string();
                if let Some(entry) = run.tool_calls.iter_mut().find(|c| c.id == id) {
                    let f = update.fields;
                    if let Some(s) = f.status {
                        entry.status = status_name(s);
                    }
                    if let Some(t) = f.title {
                        entry.title = t;
                    }
                    if let Some(k) = f.kind {
                        entry.kind = kind_name(k);
                    }
                    if let Some(input) = f.raw_input {
                        entry.arguments = Some(input);
                    }
                }
            }
            SessionUpdate::Plan(plan) => {
                run.plan = plan
                    .entries
                    .into_iter()
                    .map(|e| PlanItem {
                        content: e.content,
                        priority: json_name(&e.priority),
                        status: json_name(&e.status),
                    })
                    .collect();
            }
            _ => {}
        },
    }
}

fn json_name(v: &impl Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn kind_name(k: ToolKind) -> String {
    json_name(&k)
}

fn status_name(s: ToolCallStatus) -> String {
    json_name(&s)
}

/// Usage from `{input_tokens, output_tokens, …}` (the CLI's `_meta.quota.token_count`) or
/// ACP's `{inputTokens, outputTokens, thoughtTokens, cachedReadTokens}`.
fn usage_of(v: &serde_json::Value) -> Option<Usage> {
    let n = |keys: &[&str]| keys.iter().find_map(|k| v.get(*k).and_then(|x| x.as_u64()));
    let input = n(&["input_tokens", "inputTokens"])?;
    Some(Usage {
        input,
        output: n(&["output_tokens", "outputTokens"]).unwrap_or(0),
        thinking: n(&["thought_tokens", "thoughtTokens"]).unwrap_or(0),
        cached: n(&["cached_tokens", "cachedReadTokens"]).unwrap_or(0),
    })
}

/// An ACP error as ours: 429 a capacity error, an unknown session said plainly.
fn acp_error(e: &agent_client_protocol::Error) -> GeminiError {
    let message = super::headless::scrub(&e.message);
    let code: i32 = e.code.into();
    match code {
        429 | 503 => GeminiError::Api {
            status: code as u16,
            code: if code == 429 {
                "RESOURCE_EXHAUSTED".into()
            } else {
                "UNAVAILABLE".into()
            },
            message,
            hint:
                "Gemini's quota or capacity is exhausted: wait and retry, or use a smaller model."
                    .into(),
        },
        _ => cli_error(format!(
            "the Gemini CLI agent failed: {message} (ACP error {code})"
        )),
    }
}

/// Logs the CLI's stderr at debug, scrubbed, a line at a time.
async fn log_stderr(stderr: tokio::process::ChildStderr) {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(target: "gemini_cli", "{}", super::headless::scrub(&line));
    }
}

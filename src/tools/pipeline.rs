//! The one pipeline every tool goes through:
//! plan → thread (load) → history, files or git diff within the budget → prompt → Gemini →
//! thread (save) → reply.
//!
//! Blocking work (reading files, git, token counting) runs in `spawn_blocking`; nothing here
//! blocks the runtime.

use std::sync::Arc;

use super::reply::{IncludedFile, Reply, ReviewBody, SavedTurn};
use super::review;
use super::spend::{Estimate, IMAGE_TOKENS, Meter};
use super::{Continuation, Output, Plan, ToolError};
use super::{history, investigation, prompt};
use crate::collector::{CollectRequest, Collected, Collector, ImageEntry, Skipped, tokens};
use crate::config::Config;
use crate::gemini::models::ModelInfo;
use crate::gemini::{CallContext, Gemini, GenerateRequest, GenerateResponse, Message, Part};
use crate::git::{DiffContext, DiffRequest};
use crate::threads::{FileRef, Owner, Thread, ThreadError, ThreadId, ThreadStore, Turn, now_ms};

/// Tokens kept free for per-message framing the local count cannot see.
const FRAMING_RESERVE: u64 = 1_024;
/// Tokens kept for the separators between files and the "Not included: …" note (up to 50
/// entries), which the collector's per-file counts do not include.
const NOTE_RESERVE: u64 = 1_500;
/// Share of the context budget history may take when files also need room.
const HISTORY_SHARE: f64 = 0.4;
/// Texts up to this size are counted or redacted where they are (well under a millisecond);
/// larger ones in `spawn_blocking`.
const INLINE_COUNT_BYTES: usize = 16 * 1024;

/// The server cannot start; the message says what to fix.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StartError(pub String);

/// Shared state of the tools: configuration, collector, executor, thread store.
pub struct Pipeline {
    /// Set once the model list has been asked for (on the first call, never at startup).
    refresh: tokio::sync::OnceCell<()>,
    config: Arc<Config>,
    collector: Arc<Collector>,
    gemini: Arc<Gemini>,
    store: Arc<dyn ThreadStore>,
    /// The daily caps' holds of the calls in flight.
    holds: Arc<super::spend::Holds>,
}

/// What Gemini did besides answering: an investigation with our tools, or the Gemini CLI's
/// agent with its own.
enum Explored {
    Investigation(investigation::Investigation),
    Agent(crate::gemini::acp::AgentRun, crate::gemini::acp::Mode),
}

impl Pipeline {
    pub fn new(
        config: Arc<Config>,
        collector: Arc<Collector>,
        gemini: Arc<Gemini>,
        store: Arc<dyn ThreadStore>,
    ) -> Pipeline {
        Pipeline {
            refresh: tokio::sync::OnceCell::new(),
            config,
            collector,
            gemini,
            store,
            holds: Arc::default(),
        }
    }

    /// Builds everything from the configuration: the collector, the executor, the thread store.
    pub async fn start(config: Arc<Config>) -> Result<Pipeline, StartError> {
        let collector =
            Arc::new(Collector::new(&config.collector()).map_err(|e| StartError(e.to_string()))?);
        let gemini =
            Gemini::from_config(&config.gemini()).map_err(|e| StartError(e.to_string()))?;
        let gemini = Arc::new(gemini.with_collector(collector.clone()));
        let store = crate::threads::open(&config.threads())
            .await
            .map_err(|e| StartError(e.to_string()))?;
        Ok(Pipeline::new(config, collector, gemini, store))
    }

    pub fn collector(&self) -> &Collector {
        &self.collector
    }

    pub fn config(&self) -> &Config {
        &self.config
    }
    pub fn gemini(&self) -> &Gemini {
        &self.gemini
    }
    pub fn store_kind(&self) -> &'static str {
        self.store.kind()
    }

    /// The thread store (for readiness checks).
    pub fn store(&self) -> &dyn ThreadStore {
        self.store.as_ref()
    }

    /// The project a thread belongs to: the canonical roots, one per line (with one root, its
    /// path, as stored before several roots were told apart).
    pub fn project(&self) -> String {
        let roots: Vec<String> = self
            .config
            .roots
            .iter()
            .map(|r| r.display().to_string())
            .collect();
        roots.join("\n")
    }

    /// Refreshes the model catalogue from the models endpoint, once per process. Not done at
    /// startup (it would cost the handshake a TLS setup); the first call starts it in the
    /// background, `listmodels` waits for it. A failure keeps the built-in catalogue.
    pub async fn refresh_models(&self, wait: bool) {
        let gemini = self.gemini.clone();
        let refresh = async move {
            match gemini.refresh_models().await {
                Ok(n) => tracing::debug!(models = n, "model catalogue refreshed"),
                Err(e) => {
                    tracing::warn!("could not refresh the model list (using the built-in one): {e}")
                }
            }
        };
        if wait {
            // The list is fetched once and cached by the client; a refresh in flight is joined.
            refresh.await;
        } else if self.refresh.set(()).is_ok() {
            tokio::spawn(refresh);
        }
    }

    /// Runs one tool call end to end: the call's text redacted, the model, the thread, the
    /// budget and history, the material (diff, files, images), the request, Gemini, the answer
    /// read, the turn saved, the reply.
    pub async fn run(&self, mut plan: Plan, ctx: &CallContext) -> Result<Reply, ToolError> {
        let text_redactions = redact_plan_text(&mut plan).await?;
        self.refresh_models(false).await;
        // The tokenizer loads on the first call, beside the work (an idle server stays small).
        self.collector.warm_up();
        let model = self.model_for(&plan)?;
        let (id, thread) = self.load_thread(plan.continuation, &plan.owner).await?;
        if let Some(t) = &thread
            && t.turns.len() as u32 >= self.config.max_turns
        {
            return Err(ThreadError::Full {
                id: id.to_string(),
                max: self.config.max_turns,
            }
            .into());
        }
        let system = prompt::system_instruction(&tool_prompt(&plan), plan.system_extra.as_deref());
        ctx.report("reading files");
        let earlier_cost = thread_cost(thread.as_ref());
        let (total, history) = self.budget(&plan, &model, &system, thread).await?;
        let material = match self
            .gather(&plan, total.saturating_sub(history.tokens), &history)
            .await?
        {
            Gathered::Material(m) => m,
            Gathered::NothingToReview(reply) => return Ok(reply),
        };
        let omitted_turns = history.omitted_turns;
        let (request, tail) = build_request(
            &plan,
            model,
            system,
            history.messages,
            omitted_turns,
            &material,
        );

        let meter = self.meter(&plan.owner);
        ctx.report("waiting for Gemini");
        let room = total
            .saturating_sub(history.tokens)
            .saturating_sub(material.tokens());
        let model_id = request.model.id.clone();
        let thread_key = id.to_string();
        let (answer, explored) = self
            .ask(&plan, request, room, &thread_key, &meter, ctx)
            .await?;
        let model_used = answer.model_version.clone().unwrap_or(model_id);
        let mut reply = read_answer(&plan, &answer.text, material.diff.as_ref())?;
        let tail = match &explored {
            Some(Explored::Investigation(inv)) => {
                format!("{tail}\n\n{}", investigation::steps_note(inv))
            }
            Some(Explored::Agent(run, _)) => format!("{tail}\n\n{}", agent_note(run)),
            None => tail,
        };
        self.save_turn(id, &plan, tail, &material, &answer, &model_used, &mut reply)
            .await?;
        let cost = crate::gemini::prices::estimate(
            &model_used,
            &answer.usage,
            crate::gemini::prices::today(),
        );
        finish_reply(&mut reply, model_used, &answer, &material, omitted_turns);
        if let Some(usage) = reply.meta.usage.as_mut() {
            usage.cost_usd = cost;
            usage.thread_cost_usd = cost.map(|c| c + earlier_cost);
            usage.tier = answer.service_tier.clone();
        }
        match explored {
            Some(Explored::Investigation(inv)) => reply.set_investigation(inv),
            Some(Explored::Agent(run, mode)) => reply.set_agent(&run, mode),
            None => {}
        }
        reply.meta.redactions += text_redactions;
        // Not rendered here: the edge finishes it, whole (the command line) or fitted to the
        // client's cap (MCP).
        Ok(reply)
    }

    /// Gemini's answer to `request`: one call, or an investigation (the loop of function calls
    /// over the read-only project tools) when the plan asks for one. `room` is what is left of
    /// the context budget for the investigation's tool results. The answer's usage is the
    /// loop's sum. Every request, whatever the engine, passes `meter` (the daily caps).
    async fn ask(
        &self,
        plan: &Plan,
        request: GenerateRequest,
        room: u64,
        thread: &str,
        meter: &Meter,
        ctx: &CallContext,
    ) -> Result<(GenerateResponse, Option<Explored>), ToolError> {
        if let Some(mode) = plan.agent {
            let (answer, run) = self.ask_agent(request, mode, thread, meter, ctx).await?;
            return Ok((answer, Some(Explored::Agent(run, mode))));
        }
        let Some(steps) = plan.explore else {
            return Ok((meter.generate(&self.gemini, request, ctx).await?, None));
        };
        let settings = self.config.explore;
        let limits = investigation::Limits {
            max_steps: steps.min(settings.max_steps),
            token_budget: settings.token_budget.min(room),
            deadline: settings.deadline,
        };
        let explorer = Arc::new(
            crate::explore::Explorer::new(self.collector.clone())
                .with_result_chars(settings.result_chars),
        );
        let (mut answer, inv) =
            investigation::run(&self.gemini, meter, explorer, request, limits, ctx).await?;
        answer.usage = inv.usage;
        Ok((answer, Some(Explored::Investigation(inv))))
    }

    /// The Gemini CLI's own agent answers `request` (its last user turn; the whole conversation
    /// when the agent's session has to be rebuilt), exploring with its own tools under `mode`.
    /// The agent's requests are its own: the caps are checked with the conversation it is handed
    /// before it starts, and its usage is counted when it ends.
    async fn ask_agent(
        &self,
        request: GenerateRequest,
        mode: crate::gemini::acp::Mode,
        thread: &str,
        meter: &Meter,
        ctx: &CallContext,
    ) -> Result<(GenerateResponse, crate::gemini::acp::AgentRun), ToolError> {
        let pool = self.gemini.agents()?;
        pool.check_mode(mode)?;
        let last = request
            .contents
            .last()
            .map(|m| crate::gemini::headless::render_prompt(std::slice::from_ref(m)))
            .unwrap_or_default();
        let rebuilt = (request.contents.len() > 1)
            .then(|| crate::gemini::headless::render_prompt(&request.contents));
        let prompt = crate::gemini::acp::Prompt {
            text: format!("{AGENT_INSTRUCTIONS}\n\n{last}"),
            rebuilt: rebuilt.map(|r| format!("{AGENT_INSTRUCTIONS}\n\n{r}")),
            mode,
            model: request.model.id.clone(),
            thread: Some(thread.to_string()),
        };
        let hold = if meter.is_on() {
            let (text, rebuilt) = (prompt.text.clone(), prompt.rebuilt.clone());
            let estimate =
                blocking(move || Estimate::of_agent_prompt(&text, rebuilt.as_deref())).await?;
            meter.admit(&estimate, &request.model).await?
        } else {
            super::spend::Hold::none()
        };
        let run = pool.prompt(prompt, ctx).await?;
        meter
            .record(hold, &request.model.id, &run.usage.unwrap_or_default())
            .await;
        let answer = GenerateResponse {
            text: run.answer().to_string(),
            usage: run.usage.unwrap_or_default(),
            finish_reason: Some(run.finish_reason()),
            ..GenerateResponse::default()
        };
        Ok((answer, run))
    }

    /// The Gemini CLI agent pool, if it was started.
    pub fn agents(&self) -> Option<&Arc<crate::gemini::acp::Pool>> {
        self.gemini.started_agents()
    }

    /// The daily caps' meter for a call of `owner` in this project.
    fn meter(&self, owner: &Owner) -> Meter {
        let caps = super::spend::Caps {
            daily_tokens: self.config.daily_tokens,
            daily_usd: self.config.daily_usd,
        };
        Meter::new(
            caps,
            self.store.clone(),
            self.holds.clone(),
            &self.project(),
            owner,
        )
    }

    /// The model the plan names (or the default), resolved in the catalogue.
    fn model_for(&self, plan: &Plan) -> Result<ModelInfo, ToolError> {
        let name = plan
            .model
            .clone()
            .unwrap_or_else(|| self.gemini.catalogue().default_name().to_string());
        self.gemini
            .catalogue()
            .resolve(&name)
            .map_err(|e| ToolError::invalid("model", e.to_string()))
    }

    /// The tokens left for history and material — the model's input window (capped by
    /// `MAX_CONTEXT_TOKENS`) minus the system prompt, the request and the reserves — and the
    /// thread's history rebuilt within its share. Counting (and, on the first call, loading the
    /// tokenizer) is blocking work.
    async fn budget(
        &self,
        plan: &Plan,
        model: &ModelInfo,
        system: &str,
        thread: Option<Thread>,
    ) -> Result<(u64, history::History), ToolError> {
        let margin = if model.tokenizer_measured() {
            0.95
        } else {
            0.90
        };
        let window = (model.input_limit as f64 * margin) as u64;
        let cap = self
            .config
            .max_context_tokens
            .map_or(window, |cap| cap.min(window));
        let images_cost = IMAGE_TOKENS * plan.images.len() as u64;
        let wants_material = !plan.files.is_empty() || plan.git.is_some();
        let collector = self.collector.clone();
        let (system, request) = (system.to_string(), plan.request.clone());
        blocking(move || {
            let fixed = tokens::count(&system)
                + tokens::count(&request)
                + FRAMING_RESERVE
                + NOTE_RESERVE
                + images_cost;
            let total = cap.saturating_sub(fixed);
            let history_budget = if wants_material {
                (total as f64 * HISTORY_SHARE) as u64
            } else {
                total
            };
            let history = match thread {
                Some(t) => history::rebuild(&t, &collector, history_budget),
                None => history::History::default(),
            };
            (total, history)
        })
        .await
    }

    /// What the call sends besides its text, within `budget`: the diff (for precommit), the
    /// files asked for plus the thread's files that changed since they were sent (their notes in
    /// the history point here), and the images.
    async fn gather(
        &self,
        plan: &Plan,
        mut budget: u64,
        history: &history::History,
    ) -> Result<Gathered, ToolError> {
        let mut diff: Option<DiffContext> = None;
        if let Some(g) = &plan.git {
            let req = DiffRequest {
                budget,
                ..g.clone()
            };
            let collector = self.collector.clone();
            let d = blocking(move || crate::git::read_changes(&collector, &req)).await??;
            if d.changed.is_empty() {
                return Ok(Gathered::NothingToReview(nothing_to_review(&g.path, &d)));
            }
            budget = budget.saturating_sub(d.tokens);
            diff = Some(d);
        }
        let mut paths = plan.files.clone();
        for p in &history.resend {
            if !paths.contains(p) {
                paths.push(p.clone());
            }
        }
        let collected = if paths.is_empty() {
            Collected::default()
        } else {
            let req = CollectRequest {
                paths,
                budget,
                already_sent: history.sent.clone(),
            };
            let collector = self.collector.clone();
            blocking(move || collector.collect(&req)).await??
        };
        let images = if plan.images.is_empty() {
            Vec::new()
        } else {
            let paths = plan.images.clone();
            let collector = self.collector.clone();
            blocking(move || collector.images(&paths)).await??
        };
        let mut skipped = collected.skipped.clone();
        if let Some(d) = &diff {
            skipped.extend(d.skipped.iter().cloned());
        }
        Ok(Gathered::Material(Material {
            diff,
            collected,
            images,
            skipped,
        }))
    }

    /// Stores the turn and tells the reply how to continue; a turn that cannot be stored is
    /// said in the reply, and the answer is still returned.
    #[allow(clippy::too_many_arguments)]
    async fn save_turn(
        &self,
        id: ThreadId,
        plan: &Plan,
        tail: String,
        material: &Material,
        answer: &GenerateResponse,
        model_used: &str,
        reply: &mut Reply,
    ) -> Result<(), ToolError> {
        // A diff makes the tail large: count it off the runtime's threads.
        let request_tokens = if tail.len() > INLINE_COUNT_BYTES {
            let t = tail.clone();
            blocking(move || tokens::count(&t)).await?
        } else {
            tokens::count(&tail)
        };
        let turn = Turn {
            tool: plan.tool.name().to_string(),
            request_tokens,
            response_tokens: if answer.usage.output > 0 {
                answer.usage.output
            } else {
                tokens::count(&answer.text)
            },
            request: tail,
            files: material
                .collected
                .files
                .iter()
                .map(|f| FileRef {
                    path: f.path.display().to_string(),
                    hash: f.hash.clone(),
                    tokens: f.tokens,
                })
                .collect(),
            response: answer.text.clone(),
            model: model_used.to_string(),
            usage: answer.usage.into(),
            at_ms: now_ms(),
        };
        match self
            .store
            .append(id, &self.project(), &plan.owner, &turn)
            .await
        {
            Ok(count) => {
                reply.saved = Some(SavedTurn {
                    continuation_id: id.to_string(),
                    remaining_turns: self.config.max_turns.saturating_sub(count),
                });
            }
            Err(e) => {
                // The answer is not lost: it is returned, with why it could not be kept.
                tracing::warn!(error = %e, "could not save the turn");
                reply.note(format!(
                    "This answer could not be saved to the conversation: {e}"
                ));
            }
        }
        Ok(())
    }

    /// The thread `continuation` names, if `owner` may continue it here: another client's thread
    /// is refused without saying whose, and one from another project unless
    /// `GEMINI_MCP_SHARE_THREADS_ACROSS_PROJECTS` allows it.
    async fn load_thread(
        &self,
        continuation: Option<Continuation>,
        owner: &Owner,
    ) -> Result<(ThreadId, Option<Thread>), ToolError> {
        let id = match continuation {
            None => return Ok((ThreadId::new(), None)),
            Some(Continuation::Thread(id)) => id,
            Some(Continuation::Latest) => self
                .store
                .latest(&self.project(), owner)
                .await?
                .ok_or(ThreadError::NoLatest)?,
        };
        let thread = self.store.load(id).await?;
        if thread.owner != *owner {
            return Err(ThreadError::Foreign { id: id.to_string() }.into());
        }
        if thread.project != self.project() && !self.config.share_threads_across_projects {
            return Err(ThreadError::OtherProject {
                id: id.to_string(),
                project: thread.project.replace('\n', ", "),
            }
            .into());
        }
        Ok((id, Some(thread)))
    }
}

/// The tool's system prompt, with what the project tools are for when the call may explore.
fn tool_prompt(plan: &Plan) -> String {
    let base = plan.tool.system_prompt();
    if plan.explore.is_some() && plan.tool != super::Tool::Investigate {
        format!("{}\n\n{}", base.trim_end(), prompt::EXPLORE.trim_end())
    } else {
        base.to_string()
    }
}

/// What a call sends besides its text.
struct Material {
    diff: Option<DiffContext>,
    collected: Collected,
    images: Vec<ImageEntry>,
    /// Files and diffs left out, with why.
    skipped: Vec<Skipped>,
}

impl Material {
    /// Tokens of the files and the diff.
    fn tokens(&self) -> u64 {
        self.collected.tokens + self.diff.as_ref().map_or(0, |d| d.tokens)
    }
}

// One value per call, moved once: the size difference costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
enum Gathered {
    Material(Material),
    /// Precommit found no pending change: the reply, without asking Gemini.
    NothingToReview(Reply),
}

fn nothing_to_review(path: &str, d: &DiffContext) -> Reply {
    Reply::nothing_to_review(format!(
        "Nothing to review: no pending changes in {path} (repositories: {}).",
        d.repos.join(", ")
    ))
}

/// The request to Gemini, and the turn's text after its files (what the thread keeps: history
/// re-renders the turn as its files, re-read, followed by exactly this text).
fn build_request(
    plan: &Plan,
    model: ModelInfo,
    system: String,
    mut contents: Vec<Message>,
    omitted_turns: usize,
    material: &Material,
) -> (GenerateRequest, String) {
    let tail = prompt::turn_tail(
        material.diff.as_ref().map(|d| d.text.as_str()),
        &material.skipped,
        &plan.request,
    );
    let mut text = prompt::user_turn(&material.collected.files, &tail);
    if contents.is_empty() && omitted_turns > 0 {
        text.insert_str(0, &history::omitted_note(omitted_turns));
    }
    let mut parts = vec![Part::Text(text)];
    parts.extend(material.images.iter().map(|i| Part::Image {
        mime: i.mime.clone(),
        data: i.data.clone(),
    }));
    contents.push(Message {
        role: crate::gemini::Role::User,
        parts,
    });
    let temperature = plan
        .temperature
        .or_else(|| (!model.is_level_family()).then(|| plan.tool.default_temperature()));
    let response_schema = match plan.output {
        Output::Review { verdict, .. } => Some(review::response_schema(verdict)),
        Output::Text => None,
    };
    let request = GenerateRequest {
        model,
        system_instruction: system,
        contents,
        thinking: plan.thinking,
        temperature,
        response_schema,
        web_search: plan.web_search,
        functions: None,
    };
    (request, tail)
}

/// The reply's body from Gemini's answer: the text, or a request for clarification, or (for
/// reviews) the parsed findings — secret files in the diff made critical findings, the severity
/// filter applied by us, the verdict kept where the tool gives one.
fn read_answer(plan: &Plan, text: &str, diff: Option<&DiffContext>) -> Result<Reply, ToolError> {
    let (min_severity, verdict) = match plan.output {
        Output::Text => {
            return Ok(match review::clarification_in_text(text) {
                Some(c) => Reply::clarification(clarification_text(&c), c),
                None => Reply::answer(text.to_string()),
            });
        }
        Output::Review {
            min_severity,
            verdict,
        } => (min_severity, verdict),
    };
    let mut parsed = review::parse(text).map_err(|e| {
        ToolError::Gemini(crate::gemini::GeminiError::Malformed {
            message: e.to_string(),
        })
    })?;
    if let Some(c) = parsed
        .clarification
        .take()
        .filter(|_| parsed.findings.is_empty())
    {
        return Ok(Reply::clarification(clarification_text(&c), c));
    }
    if let Some(d) = diff {
        secret_findings(&mut parsed, &d.secret_files);
    }
    let filtered = review::filter(&mut parsed, min_severity);
    Ok(Reply::review(ReviewBody {
        summary: parsed.summary,
        findings: parsed.findings,
        verdict: parsed.verdict.filter(|_| verdict),
        filtered_out: filtered,
        min: min_severity,
    }))
}

/// What the reply says besides the answer: the model, usage, fallback and sources, redactions,
/// the files included and left out, earlier turns left out, and a cut answer.
fn finish_reply(
    reply: &mut Reply,
    model_used: String,
    answer: &GenerateResponse,
    material: &Material,
    omitted_turns: usize,
) {
    let diff = material.diff.as_ref();
    let meta = &mut reply.meta;
    meta.model = Some(model_used);
    meta.usage = Some(answer.usage.into());
    meta.fallback = answer.fallback.clone().map(Into::into);
    meta.sources = answer.sources.iter().cloned().map(Into::into).collect();
    meta.redactions = material.collected.redactions + diff.map_or(0, |d| d.redactions);
    meta.files.included = material
        .collected
        .files
        .iter()
        .map(|f| IncludedFile {
            path: f.display.clone(),
            tokens: f.tokens,
        })
        .collect();
    if let Some(d) = diff {
        meta.changed_files = Some(d.changed.iter().cloned().map(Into::into).collect());
        meta.files
            .included
            .extend(d.context_files.iter().map(|(path, tokens)| IncludedFile {
                path: path.clone(),
                tokens: *tokens,
            }));
    }
    meta.files.skipped = material.skipped.iter().cloned().map(Into::into).collect();
    if omitted_turns > 0 {
        reply.note(format!(
            "{omitted_turns} earlier turn(s) were left out of the context to fit the budget."
        ));
    }
    if let Some(reason) = &answer.finish_reason {
        reply.set_finish_reason(reason);
    }
}

/// Redacts the call's own text in place: it leaves the machine (and is kept in the thread) like
/// a file does, so it is redacted like one — agents paste logs and configs into
/// `error_context` and `prompt`. One regex pass over text already capped in size. Returns how
/// many values were replaced.
async fn redact_plan_text(plan: &mut Plan) -> Result<usize, ToolError> {
    let texts = (std::mem::take(&mut plan.request), plan.system_extra.take());
    let size = texts.0.len() + texts.1.as_ref().map_or(0, String::len);
    let (request, system_extra, n) = if size > INLINE_COUNT_BYTES {
        blocking(move || redact_call_text(texts)).await?
    } else {
        redact_call_text(texts)
    };
    (plan.request, plan.system_extra) = (request, system_extra);
    Ok(n)
}

/// A changed file that looks like a secret is a critical finding whatever Gemini said: its
/// content was never sent, so this must not depend on the model noticing the warning.
fn secret_findings(review: &mut review::Review, secret_files: &[String]) {
    for path in secret_files.iter().rev() {
        if review
            .findings
            .iter()
            .any(|f| f.file == *path && f.severity == review::Severity::Critical)
        {
            continue;
        }
        review.findings.insert(
            0,
            review::Finding {
                severity: review::Severity::Critical,
                file: path.clone(),
                line: None,
                title: "A file that looks like a secret is part of the change".into(),
                detail: format!(
                    "{path} matches a secret file name pattern; its content was not sent for review. \
                     Committing it would expose it to everyone with access to the repository."
                ),
                fix: Some(format!(
                    "Keep it out of the commit: `git restore --staged {path}` and add it to .gitignore; \
                     rotate the secret if it was ever committed or pushed."
                )),
            },
        );
        review.verdict = Some(review::Verdict::DoNotCommit);
    }
}

fn clarification_text(c: &review::Clarification) -> String {
    let mut s = format!("Gemini needs more before it can answer: {}", c.question);
    if !c.files_needed.is_empty() {
        s.push_str(&format!(
            "\n\nFiles requested: {}",
            c.files_needed.join(", ")
        ));
    }
    s.push_str("\n\nCall again with the same continuation_id and the requested files or answers.");
    s
}

/// The call's own texts (request, caller's system addition) redacted, and how many values were.
fn redact_call_text((request, extra): (String, Option<String>)) -> (String, Option<String>, usize) {
    let (request, mut n) = crate::redact::redact(&request);
    let extra = extra.map(|e| {
        let (clean, m) = crate::redact::redact(&e);
        n += m;
        clean
    });
    (request, extra, n)
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ToolError::Internal(format!("a background task failed: {e}")))
}

/// The estimated cost of a thread's stored turns, at today's prices (turns of models without a
/// known price count nothing).
fn thread_cost(thread: Option<&Thread>) -> f64 {
    let today = crate::gemini::prices::today();
    thread.map_or(0.0, |t| {
        t.turns
            .iter()
            .filter_map(|turn| {
                crate::gemini::prices::estimate(&turn.model, &turn.usage.into(), today)
            })
            .sum()
    })
}

/// What the Gemini CLI's agent is told before the task.
const AGENT_INSTRUCTIONS: &str = "You are investigating this project for another engineer: read what you need (read-only; \
do not change files or run commands), then answer in Markdown, citing `path:line` for every claim about the code.";

/// The agent's work as the thread keeps it: one line per tool call.
fn agent_note(run: &crate::gemini::acp::AgentRun) -> String {
    let mut s = format!(
        "## Gemini CLI agent ({} tool calls, {})\n",
        run.tool_calls.len(),
        run.stop_reason
    );
    for c in &run.tool_calls {
        s.push_str(&format!("- {} {} ({})\n", c.kind, c.title, c.status));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_files_become_critical_findings_once() {
        let mut r = review::parse(
            r#"{"summary":"","verdict":"ready","findings":[{"severity":"critical","file":"deploy/id_rsa","title":"key","detail":"d"}]}"#,
        )
        .unwrap();
        secret_findings(&mut r, &[".env".into(), "deploy/id_rsa".into()]);
        let files: Vec<(&str, review::Severity)> = r
            .findings
            .iter()
            .map(|f| (f.file.as_str(), f.severity))
            .collect();
        assert_eq!(
            files,
            vec![
                (".env", review::Severity::Critical),
                ("deploy/id_rsa", review::Severity::Critical)
            ]
        );
        assert_eq!(r.verdict, Some(review::Verdict::DoNotCommit));
        let mut clean = review::parse(r#"{"summary":"","verdict":"ready","findings":[]}"#).unwrap();
        secret_findings(&mut clean, &[]);
        assert_eq!(clean.verdict, Some(review::Verdict::Ready));
        assert!(clean.findings.is_empty());
    }
}

//! The one pipeline every tool goes through:
//! plan → thread (load) → history, files or git diff within the budget → prompt → Gemini →
//! thread (save) → reply.
//!
//! Blocking work (reading files, git, token counting) runs in `spawn_blocking`; nothing here
//! blocks the runtime.

use std::sync::Arc;

use super::reply::{IncludedFile, Reply, ReviewView, Status};
use super::review;
use super::{Output, Plan, ToolError};
use super::{history, prompt};
use crate::collector::{CollectRequest, Collected, Collector, tokens};
use crate::config::Config;
use crate::gemini::{CallContext, Gemini, GenerateRequest, Message, Part};
use crate::git::{DiffContext, DiffRequest};
use crate::threads::{FileRef, Owner, Thread, ThreadError, ThreadId, ThreadStore, Turn, now_ms};

/// Tokens kept free for per-message framing the local count cannot see.
const FRAMING_RESERVE: u64 = 1_024;
/// Tokens kept for the separators between files and the "Not included: …" note (up to 50
/// entries), which the collector's per-file counts do not include.
const NOTE_RESERVE: u64 = 1_500;
/// What one inline image costs, as budgeted (Gemini's image tokens are not counted locally).
const IMAGE_TOKENS: u64 = 3_000;
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
        }
    }

    /// Builds everything from the configuration: the collector, the executor, the thread store.
    pub async fn start(config: Arc<Config>) -> Result<Pipeline, StartError> {
        let collector = Arc::new(Collector::new(&config).map_err(|e| StartError(e.to_string()))?);
        let gemini = Arc::new(Gemini::from_config(&config).map_err(|e| StartError(e.to_string()))?);
        let store = crate::threads::open(&config)
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
    fn project(&self) -> String {
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

    /// Runs one tool call end to end.
    pub async fn run(&self, mut plan: Plan, ctx: &CallContext) -> Result<Reply, ToolError> {
        // The call's own text leaves the machine (and is kept in the thread) like a file does,
        // so it is redacted like one: agents paste logs and configs into `error_context` and
        // `prompt`. One regex pass over text already capped in size.
        let texts = (std::mem::take(&mut plan.request), plan.system_extra.take());
        let size = texts.0.len() + texts.1.as_ref().map_or(0, String::len);
        let (request, system_extra, text_redactions) = if size > INLINE_COUNT_BYTES {
            blocking(move || redact_call_text(texts)).await?
        } else {
            redact_call_text(texts)
        };
        (plan.request, plan.system_extra) = (request, system_extra);
        self.refresh_models(false).await;
        // The tokenizer loads on the first call, beside the work (an idle server stays small).
        self.collector.warm_up();
        let model_name = plan
            .model
            .clone()
            .unwrap_or_else(|| self.gemini.catalogue().default_name().to_string());
        let model = self
            .gemini
            .catalogue()
            .resolve(&model_name)
            .map_err(|e| ToolError::invalid("model", e.to_string()))?;

        // Thread.
        let (id, thread) = self
            .load_thread(plan.continuation_id.as_deref(), &plan.owner)
            .await?;
        if let Some(t) = &thread
            && t.turns.len() as u32 >= self.config.max_turns
        {
            return Err(ThreadError::Full {
                id: id.to_string(),
                max: self.config.max_turns,
            }
            .into());
        }

        // Budget: the model's input window (capped by MAX_CONTEXT_TOKENS) minus what is fixed.
        // Counting (and, on the first call, loading the tokenizer) is blocking work.
        let system =
            prompt::system_instruction(plan.tool.system_prompt(), plan.system_extra.as_deref());
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
        let thread_for_history = thread.clone();
        let (sys_for_count, request_for_count) = (system.clone(), plan.request.clone());
        ctx.report("reading files");
        let (total, history) = blocking(move || {
            let fixed = tokens::count(&sys_for_count)
                + tokens::count(&request_for_count)
                + FRAMING_RESERVE
                + NOTE_RESERVE
                + images_cost;
            let total = cap.saturating_sub(fixed);
            let history_budget = if wants_material {
                (total as f64 * HISTORY_SHARE) as u64
            } else {
                total
            };
            let history = match thread_for_history {
                Some(t) => history::rebuild(&t, &collector, history_budget),
                None => history::History::default(),
            };
            (total, history)
        })
        .await?;
        let mut material_budget = total.saturating_sub(history.tokens);

        let mut diff: Option<DiffContext> = None;
        if let Some(g) = &plan.git {
            let req = DiffRequest {
                path: g.path.clone(),
                include_staged: g.include_staged,
                include_unstaged: g.include_unstaged,
                include_untracked: g.include_untracked,
                compare_to: g.compare_to.clone(),
                max_depth: g.max_depth,
                budget: material_budget,
                index_file: g.index_file.clone(),
            };
            let collector = self.collector.clone();
            let d = blocking(move || crate::git::read_changes(&collector, &req)).await??;
            if d.changed.is_empty() {
                let mut r = Reply::new(
                    Status::NothingToReview,
                    format!(
                        "Nothing to review: no pending changes in {} (repositories: {}).",
                        g.path,
                        d.repos.join(", ")
                    ),
                );
                r.changed_files = Some(Vec::new());
                return Ok(r);
            }
            material_budget = material_budget.saturating_sub(d.tokens);
            diff = Some(d);
        }

        // The files asked for, then the thread's files that changed since they were sent (their
        // notes in the history point here).
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
                budget: material_budget,
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

        // Prompt.
        let mut skipped = collected.skipped.clone();
        if let Some(d) = &diff {
            skipped.extend(d.skipped.iter().cloned());
        }
        // The turn's text after its files is what the thread keeps: history re-renders the turn
        // as its files (re-read) followed by exactly this text.
        let tail = prompt::turn_tail(
            diff.as_ref().map(|d| d.text.as_str()),
            &skipped,
            &plan.request,
        );
        let mut text = prompt::user_turn(&collected.files, &tail);
        if history.messages.is_empty() && history.omitted_turns > 0 {
            text.insert_str(0, &history::omitted_note(history.omitted_turns));
        }
        let mut contents = history.messages;
        let mut parts = vec![Part::Text(text)];
        parts.extend(images.iter().map(|i| Part::Image {
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
        };

        // Gemini.
        ctx.report("waiting for Gemini");
        let answer = self.gemini.generate(request.clone(), ctx).await?;
        let model_used = answer
            .model_version
            .clone()
            .unwrap_or_else(|| request.model.id.clone());

        // Reading the answer.
        let mut reply = Reply::new(Status::Success, String::new());
        match plan.output {
            Output::Text => match review::clarification_in_text(&answer.text) {
                Some(c) => {
                    reply.status = Status::RequiresClarification;
                    reply.answer = clarification_text(&c);
                    reply.clarification = Some(c);
                }
                None => reply.answer = answer.text.clone(),
            },
            Output::Review {
                min_severity,
                verdict,
            } => {
                let mut parsed = review::parse(&answer.text).map_err(|e| {
                    ToolError::Gemini(crate::gemini::GeminiError::Malformed {
                        message: e.to_string(),
                    })
                })?;
                if let Some(c) = parsed
                    .clarification
                    .take()
                    .filter(|_| parsed.findings.is_empty())
                {
                    reply.status = Status::RequiresClarification;
                    reply.answer = clarification_text(&c);
                    reply.clarification = Some(c);
                } else {
                    if let Some(d) = &diff {
                        secret_findings(&mut parsed, &d.secret_files);
                    }
                    let filtered = review::filter(&mut parsed, min_severity);
                    reply.review = Some(ReviewView {
                        filtered_out: filtered,
                        min: min_severity,
                    });
                    reply.summary = Some(parsed.summary);
                    reply.findings = Some(parsed.findings);
                    if verdict {
                        reply.verdict = parsed.verdict;
                    }
                }
            }
        }

        // Saving the turn. A diff makes the tail large: count it off the runtime's threads.
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
            files: collected
                .files
                .iter()
                .map(|f| FileRef {
                    path: f.path.display().to_string(),
                    hash: f.hash.clone(),
                    tokens: f.tokens,
                })
                .collect(),
            response: answer.text.clone(),
            model: model_used.clone(),
            usage: answer.usage,
            at_ms: now_ms(),
        };
        let saved = self
            .store
            .append(id, &self.project(), &plan.owner, &turn)
            .await;
        match saved {
            Ok(count) => {
                reply.continuation_id = Some(id.to_string());
                reply.remaining_turns = Some(self.config.max_turns.saturating_sub(count));
            }
            Err(e) => {
                // The answer is not lost: it is returned, with why it could not be kept.
                tracing::warn!(error = %e, "could not save the turn");
                reply.notes.push(format!(
                    "This answer could not be saved to the conversation: {e}"
                ));
            }
        }

        // Reply.
        reply.model = Some(model_used);
        reply.usage = Some(answer.usage);
        reply.fallback = answer.fallback.clone();
        reply.sources = answer.sources.clone();
        reply.redactions =
            collected.redactions + diff.as_ref().map_or(0, |d| d.redactions) + text_redactions;
        reply.files.included = collected
            .files
            .iter()
            .map(|f| IncludedFile {
                path: f.display.clone(),
                tokens: f.tokens,
            })
            .collect();
        if let Some(d) = &diff {
            reply.changed_files = Some(d.changed.clone());
            reply
                .files
                .included
                .extend(d.context_files.iter().map(|(path, tokens)| IncludedFile {
                    path: path.clone(),
                    tokens: *tokens,
                }));
        }
        reply.files.skipped = skipped;
        if history.omitted_turns > 0 {
            reply.notes.push(format!(
                "{} earlier turn(s) were left out of the context to fit the budget.",
                history.omitted_turns
            ));
        }
        if let Some(reason) = &answer.finish_reason {
            reply.set_finish_reason(reason);
        }
        // Whole here (the command line prints it all); the MCP edge fits it to the client's cap.
        reply.render();
        Ok(reply)
    }

    /// The thread `continuation` names, if `owner` may continue it here: another client's thread
    /// is refused without saying whose, and one from another project unless
    /// `GEMINI_MCP_SHARE_THREADS_ACROSS_PROJECTS` allows it.
    async fn load_thread(
        &self,
        continuation: Option<&str>,
        owner: &Owner,
    ) -> Result<(ThreadId, Option<Thread>), ToolError> {
        let Some(raw) = continuation else {
            return Ok((ThreadId::new(), None));
        };
        let id = if raw.eq_ignore_ascii_case("latest") {
            self.store
                .latest(&self.project(), owner)
                .await?
                .ok_or(ThreadError::NoLatest)?
        } else {
            raw.parse::<ThreadId>().map_err(|_| {
                ToolError::invalid("continuation_id", format!("`{raw}` is not a thread id; pass the continuation_id of an earlier reply, \"latest\", or leave it out to start a new thread"))
            })?
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
    let (request, mut n) = crate::collector::redact(&request);
    let extra = extra.map(|e| {
        let (clean, m) = crate::collector::redact(&e);
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

//! The reply every model-backed tool gives: Markdown for the agent to read, and the same facts as
//! structured content, each whole on its own (some clients hand their model only one of them).
//!
//! Clients hand their model only one of the two (Claude Code and Codex the structured content,
//! the Gemini CLI and opencode the text), so each is whole on its own: the answer (or a review's
//! summary and findings), the continuation id, the status and the notices. The answer is the one
//! thing paid for twice; everything else stays compact.
//!
//! A [`Reply`] is made of typed parts: its [`Body`] (an answer, a review, a request for
//! clarification, or what to do instead), its [`Meta`] (model, usage, files, sources…), the
//! [`SavedTurn`] (how to continue the thread), and what an investigation did ([`Exploration`]).
//! It has no text until [`Reply::finish`] consumes it: that is where the notices are gathered,
//! the Markdown is rendered, and the whole result (both parts counted) is fitted once under the
//! size cap — the least severe findings go first, then an investigation's steps, then the answer
//! is cut on a line boundary, and either way the reply says so and how to get the rest. The
//! [`Finished`] reply is what the edges print or send; its JSON is written in one place
//! (`wire.rs`), and each tool's `outputSchema` comes from its [`ReplyKind`] (`kind.rs`).

use schemars::JsonSchema;
use serde::Serialize;

use review::{Clarification, Finding, Severity, Verdict};

pub mod consensus;
mod finish;
pub mod investigation_report;
mod kind;
mod lists;
mod parts;
pub mod review;
mod structured;
pub use finish::Finished;
pub use kind::ReplyKind;
pub use lists::NotListed;
pub use parts::{
    AgentView, ChangedFileView, FallbackView, LeftOut, StepView, UsageView, WebSource,
};

/// What kind of answer this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Gemini answered.
    Success,
    /// Gemini needs more material (see `clarification`) before it can answer.
    RequiresClarification,
    /// An input was too large for the transport: save it to a file and pass it in `files`.
    ResendPrompt,
    /// Nothing to review (precommit with no changes); Gemini was not called.
    NothingToReview,
}

/// A file that was sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct IncludedFile {
    /// Path as shown to Gemini.
    pub path: String,
    /// Tokens it took.
    pub tokens: u64,
}

/// Files sent and left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct FilesReport {
    /// Files sent, with their token counts.
    pub included: Vec<IncludedFile>,
    /// Files left out, each with its reason.
    pub skipped: Vec<LeftOut>,
}

/// What the reply answers with; its status follows from it.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Gemini's answer in Markdown (status `success`).
    Answer(String),
    /// A review's summary and findings (codereview, precommit; status `success`).
    Review(ReviewBody),
    /// What Gemini needs before it can answer (status `requires_clarification`), with the
    /// request in words.
    Clarification {
        text: String,
        clarification: Clarification,
    },
    /// An input too large for the transport, and how to send it as a file (`resend_prompt`).
    ResendPrompt(String),
    /// Precommit found no pending change; Gemini was not called (`nothing_to_review`).
    NothingToReview(String),
}

impl Body {
    /// The status this body answers with.
    pub fn status(&self) -> Status {
        match self {
            Body::Answer(_) | Body::Review(_) => Status::Success,
            Body::Clarification { .. } => Status::RequiresClarification,
            Body::ResendPrompt(_) => Status::ResendPrompt,
            Body::NothingToReview(_) => Status::NothingToReview,
        }
    }

    /// The answer's text (`answer` in the structured content); empty for a review, whose text
    /// is its summary and findings.
    pub fn text(&self) -> &str {
        match self {
            Body::Answer(t)
            | Body::Clarification { text: t, .. }
            | Body::ResendPrompt(t)
            | Body::NothingToReview(t) => t,
            Body::Review(_) => "",
        }
    }

    /// The answer's text to cut, or `None` for a review.
    fn text_mut(&mut self) -> Option<&mut String> {
        match self {
            Body::Answer(t)
            | Body::Clarification { text: t, .. }
            | Body::ResendPrompt(t)
            | Body::NothingToReview(t) => Some(t),
            Body::Review(_) => None,
        }
    }

    fn review(&self) -> Option<&ReviewBody> {
        match self {
            Body::Review(r) => Some(r),
            _ => None,
        }
    }

    fn review_mut(&mut self) -> Option<&mut ReviewBody> {
        match self {
            Body::Review(r) => Some(r),
            _ => None,
        }
    }
}

/// A review as the reply shows it: most severe findings first, after `severity_filter`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewBody {
    /// The overall assessment.
    pub summary: String,
    /// The findings kept by the filter, most severe first.
    pub findings: Vec<Finding>,
    /// Whether the change can be committed (precommit only).
    pub verdict: Option<Verdict>,
    /// Findings below `min` that the filter left out, for the Markdown.
    pub filtered_out: usize,
    /// The least severity shown.
    pub min: Severity,
}

/// What the reply says besides its body: who answered, at what cost, with which files.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Meta {
    /// The model that answered, as the API reports it.
    pub model: Option<String>,
    /// Token usage of the call, with its cost.
    pub usage: Option<UsageView>,
    /// Files sent and left out.
    pub files: FilesReport,
    /// Secret-looking values replaced before sending.
    pub redactions: usize,
    /// Set when the fallback model answered after capacity errors.
    pub fallback: Option<FallbackView>,
    /// Web sources Gemini cited (use_websearch).
    pub sources: Vec<WebSource>,
    /// Changed files (precommit).
    pub changed_files: Option<Vec<ChangedFileView>>,
    /// The models of a consensus, each with its outcome and cost.
    pub consensus: Option<consensus::ConsensusView>,
}

/// The turn saved to its thread: how to continue the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedTurn {
    /// Pass back to continue this conversation with any tool.
    pub continuation_id: String,
    /// Calls left in this thread.
    pub remaining_turns: u32,
}

/// What an investigation did before answering.
#[derive(Debug, Clone, PartialEq)]
pub enum Exploration {
    /// Gemini's own loop over the project tools (`investigate`, or `explore: true`).
    Investigation {
        /// Its tool calls, in order.
        steps: Vec<StepView>,
        /// Files Gemini read.
        files_read: Vec<String>,
        /// answered, max_steps, token_budget or deadline.
        stop_reason: String,
    },
    /// The Gemini CLI's agent (`engine: "gemini-cli"`).
    Agent {
        /// Files the agent read.
        files_read: Vec<String>,
        /// The agent's own stop reason (end_turn, max_tokens, max_turn_requests, …).
        stop_reason: String,
        /// What it did.
        agent: AgentView,
    },
}

impl Exploration {
    /// Why the investigation ended.
    pub fn stop_reason(&self) -> &str {
        match self {
            Exploration::Investigation { stop_reason, .. }
            | Exploration::Agent { stop_reason, .. } => stop_reason,
        }
    }

    fn files_read(&self) -> &[String] {
        match self {
            Exploration::Investigation { files_read, .. }
            | Exploration::Agent { files_read, .. } => files_read,
        }
    }
}

/// An answer with what came with it, not yet rendered: [`Reply::finish`] makes its text and
/// structured content.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// What it answers with.
    pub body: Body,
    /// Model, usage, files, sources.
    pub meta: Meta,
    /// How to continue; `None` when the turn was not saved.
    pub saved: Option<SavedTurn>,
    /// What an investigation did, when there was one.
    pub exploration: Option<Exploration>,
    /// Gemini's finish reason when the answer is incomplete: the `cut` value and its notice.
    incomplete: Option<(String, String)>,
    /// Notes for `notices` (history left out, a turn not saved, a limit reached).
    notes: Vec<String>,
}

impl Reply {
    fn with(body: Body) -> Reply {
        Reply {
            body,
            meta: Meta::default(),
            saved: None,
            exploration: None,
            incomplete: None,
            notes: Vec::new(),
        }
    }

    /// Gemini's answer.
    pub fn answer(text: String) -> Reply {
        Reply::with(Body::Answer(text))
    }

    /// A review.
    pub fn review(review: ReviewBody) -> Reply {
        Reply::with(Body::Review(review))
    }

    /// Gemini asks for more before it can answer; `text` says so in words.
    pub fn clarification(text: String, clarification: Clarification) -> Reply {
        Reply::with(Body::Clarification {
            text,
            clarification,
        })
    }

    /// An input too large for the transport; `text` says how to send it as a file.
    pub fn resend_prompt(text: String) -> Reply {
        Reply::with(Body::ResendPrompt(text))
    }

    /// Precommit found no pending change: `text` says where it looked; the changed files are
    /// listed, empty.
    pub fn nothing_to_review(text: String) -> Reply {
        let mut r = Reply::with(Body::NothingToReview(text));
        r.meta.changed_files = Some(Vec::new());
        r
    }

    /// The status of the reply.
    pub fn status(&self) -> Status {
        self.body.status()
    }

    /// The answer's text; empty for a review.
    pub fn answer_text(&self) -> &str {
        self.body.text()
    }

    /// The thread to continue, when the turn was saved.
    pub fn continuation_id(&self) -> Option<&str> {
        self.saved.as_ref().map(|c| c.continuation_id.as_str())
    }

    /// Why the investigation ended, when there was one.
    pub fn stop_reason(&self) -> Option<&str> {
        self.exploration.as_ref().map(Exploration::stop_reason)
    }

    /// What the Gemini CLI's agent did, when it answered.
    pub fn agent(&self) -> Option<&AgentView> {
        match &self.exploration {
            Some(Exploration::Agent { agent, .. }) => Some(agent),
            _ => None,
        }
    }

    /// Adds a note for `notices`, after those already there.
    pub fn note(&mut self, note: String) {
        self.notes.push(note);
    }

    /// Records Gemini's finish reason (`STOP`, `MAX_TOKENS`, `SAFETY`, …): anything but a normal
    /// stop marks the answer incomplete, saying why.
    pub fn set_finish_reason(&mut self, reason: &str) {
        let reason = reason.trim();
        if reason.is_empty() || reason.eq_ignore_ascii_case("STOP") {
            return;
        }
        let why = match reason {
            "MAX_TOKENS" => {
                "it was cut by the output limit (MAX_TOKENS). Ask for the rest with this \
                continuation_id, or ask a narrower question"
                    .to_string()
            }
            "SAFETY" | "PROHIBITED_CONTENT" | "SPII" | "BLOCKLIST" | "IMAGE_SAFETY" => format!(
                "Gemini's safety filter stopped it ({reason}). Rephrase the request, or leave out \
                 the files or text that triggered it"
            ),
            "RECITATION" | "IMAGE_RECITATION" => format!(
                "it stopped rather than recite source material verbatim ({reason}). Ask for a \
                 summary or an explanation instead of a copy"
            ),
            other => format!(
                "it stopped early (finish reason {other}). Retry, or ask for the rest with this \
                 continuation_id"
            ),
        };
        self.incomplete = Some((
            reason.to_ascii_lowercase(),
            format!("Gemini's answer is incomplete: {why}."),
        ));
    }

    /// Records what an investigation did: its steps, the files read, why it ended (a limit is
    /// also a notice).
    pub fn set_investigation(&mut self, inv: investigation_report::Investigation) {
        use investigation_report::StopReason;
        let why = match inv.stop {
            StopReason::Answered => None,
            StopReason::MaxSteps => Some("its step limit (max_steps)"),
            StopReason::TokenBudget => Some("its token budget (GEMINI_MCP_EXPLORE_TOKENS)"),
            StopReason::Deadline => Some("its time limit (GEMINI_MCP_EXPLORE_TIMEOUT_SECS)"),
        };
        if let Some(why) = why {
            self.notes.push(format!(
                "The investigation stopped at {why}: Gemini answered from what it had read so far."
            ));
        }
        self.exploration = Some(Exploration::Investigation {
            steps: inv.steps.into_iter().map(Into::into).collect(),
            files_read: inv.files_read,
            stop_reason: inv.stop.as_str().to_string(),
        });
    }

    /// Records what the Gemini CLI's agent did: its tool calls, plan, thought, session, the
    /// permissions it asked for and the policy that answered, and the files it read.
    pub fn set_agent(&mut self, run: &crate::gemini::AgentRun, mode: crate::gemini::AgentMode) {
        let mut read: Vec<String> = Vec::new();
        for c in run.tool_calls.iter().filter(|c| c.kind == "read") {
            for f in c.files() {
                if !read.contains(&f) {
                    read.push(f);
                }
            }
        }
        if run.stop_reason == "max_turn_requests" || run.stop_reason == "max_tokens" {
            self.notes.push(format!(
                "The Gemini CLI's agent stopped early ({}): its answer may be partial.",
                run.stop_reason
            ));
        }
        self.exploration = Some(Exploration::Agent {
            files_read: read,
            stop_reason: run.stop_reason.clone(),
            agent: AgentView::new(run, mode),
        });
    }
}

//! The reply every model-backed tool gives: Markdown for the agent to read, and the same facts as
//! structured content (DESIGN §3).

use rmcp::schemars::{self, JsonSchema};
use serde::Serialize;

use super::review::{Clarification, Finding, Verdict};
use crate::collector::{SkipReason, Skipped};
use crate::gemini::{Fallback, Source, Usage};

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
    pub skipped: Vec<Skipped>,
}

/// The structured reply of chat, thinkdeep, analyze, codereview, debug and precommit.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Reply {
    /// success, requires_clarification, resend_prompt or nothing_to_review.
    pub status: Status,
    /// Pass back to continue this conversation with any tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub continuation_id: Option<String>,
    /// Calls left in this thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining_turns: Option<u32>,
    /// The model that answered, as the API reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Token usage of the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Files sent and left out.
    pub files: FilesReport,
    /// Secret-looking values replaced before sending.
    pub redactions: usize,
    /// Review findings (codereview, precommit), most severe first, after severity_filter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub findings: Option<Vec<Finding>>,
    /// Whether the change can be committed (precommit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// What Gemini needs before it can answer (status requires_clarification).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clarification: Option<Clarification>,
    /// Set when the fallback model answered after capacity errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Fallback>,
    /// Web sources Gemini cited (use_websearch).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<Source>,
    /// Changed files (precommit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed_files: Option<Vec<crate::git::ChangedFile>>,
    /// The Markdown text (the reply's content block).
    #[serde(skip)]
    pub text: String,
}

impl Reply {
    pub fn new(status: Status, text: String) -> Reply {
        Reply {
            status,
            continuation_id: None,
            remaining_turns: None,
            model: None,
            usage: None,
            files: FilesReport::default(),
            redactions: 0,
            findings: None,
            verdict: None,
            clarification: None,
            fallback: None,
            sources: Vec::new(),
            changed_files: None,
            text,
        }
    }

    /// The footer appended to the Markdown: continuation, what was left out, redactions.
    pub fn footer(&self) -> String {
        let mut lines = Vec::new();
        if let Some(f) = &self.fallback {
            lines.push(format!(
                "Answered by {} because {} was over capacity.",
                f.to, f.from
            ));
        }
        if !self.sources.is_empty() {
            let s: Vec<String> = self
                .sources
                .iter()
                .map(|s| format!("[{}]({})", s.title, s.uri))
                .collect();
            lines.push(format!("Sources: {}", s.join(" · ")));
        }
        if !self.files.skipped.is_empty() {
            let mut by_reason: Vec<(SkipReason, Vec<&str>)> = Vec::new();
            for s in &self.files.skipped {
                match by_reason.iter_mut().find(|(r, _)| *r == s.reason) {
                    Some((_, v)) => v.push(&s.path),
                    None => by_reason.push((s.reason, vec![&s.path])),
                }
            }
            let parts: Vec<String> = by_reason
                .iter()
                .map(|(r, paths)| {
                    let shown: Vec<&str> = paths.iter().take(5).copied().collect();
                    let more = if paths.len() > 5 {
                        format!(" and {} more", paths.len() - 5)
                    } else {
                        String::new()
                    };
                    format!(
                        "{} {} ({}{})",
                        paths.len(),
                        r.describe(),
                        shown.join(", "),
                        more
                    )
                })
                .collect();
            lines.push(format!("Left out: {}.", parts.join("; ")));
        }
        if self.redactions > 0 {
            lines.push(format!(
                "{} secret-looking value(s) were redacted before sending.",
                self.redactions
            ));
        }
        if let Some(id) = &self.continuation_id {
            let turns = self
                .remaining_turns
                .map(|n| format!(" ({n} turns left)"))
                .unwrap_or_default();
            lines.push(format!("continuation_id: {id}{turns}"));
        }
        if lines.is_empty() {
            return String::new();
        }
        format!("\n\n---\n{}", lines.join("\n"))
    }
}

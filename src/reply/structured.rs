//! The structured content as clients receive it: every field of every part, in the order they are
//! sent, each left out when it has nothing to say. Its schema is the one each tool's
//! `outputSchema` is cut from ([`super::ReplyKind`]).

use schemars::JsonSchema;
use serde::Serialize;

use super::lists::NotListed;
use super::parts::{AgentView, ChangedFileView, FallbackView, StepView, UsageView, WebSource};
use super::{FilesReport, Status};
use crate::reply::review::{Clarification, Finding, Verdict};

/// The structured reply of chat, thinkdeep, analyze, codereview, debug, precommit and
/// investigate, borrowed from a finished reply.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(super) struct Wire<'a> {
    /// success, requires_clarification, resend_prompt or nothing_to_review.
    pub status: Status,
    /// Gemini's answer in Markdown, or what to do next (reviews: `summary` and `findings`).
    #[serde(skip_serializing_if = "str::is_empty")]
    pub answer: &'a str,
    /// The review's overall assessment (codereview, precommit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<&'a str>,
    /// Review findings (codereview, precommit), most severe first, after severity_filter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub findings: Option<&'a [Finding]>,
    /// Findings left out to fit the result size limit (the least severe; see `notices`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub findings_left_out: Option<usize>,
    /// Whether the change can be committed (precommit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// What Gemini needs before it can answer (status requires_clarification).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clarification: Option<&'a Clarification>,
    /// Set when the answer is incomplete, to why: `max_tokens`, `safety`, `recitation`, … (as
    /// Gemini reported it) or `size_limit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<&'a str>,
    /// What the agent should know or act on: a cut answer, findings or files left out, the
    /// fallback model, a turn not saved.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub notices: &'a [String],
    /// Pass back to continue this conversation with any tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub continuation_id: Option<&'a str>,
    /// Calls left in this thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining_turns: Option<u32>,
    /// The model that answered, as the API reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<&'a str>,
    /// Token usage of the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<&'a UsageView>,
    /// Files sent and left out.
    pub files: &'a FilesReport,
    /// Secret-looking values replaced before sending.
    pub redactions: usize,
    /// Set when the fallback model answered after capacity errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<&'a FallbackView>,
    /// Web sources Gemini cited (use_websearch).
    #[serde(skip_serializing_if = "<[WebSource]>::is_empty")]
    pub sources: &'a [WebSource],
    /// Changed files (precommit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed_files: Option<&'a [ChangedFileView]>,
    /// Entries of `changed_files` and `files.skipped` past the first ones, counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_listed: Option<&'a NotListed>,
    /// The investigation's tool calls, in order (investigate, or explore).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<&'a [StepView]>,
    /// Files Gemini read while investigating.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files_read: Option<&'a [String]>,
    /// Why the investigation ended: answered, max_steps, token_budget or deadline; for the
    /// Gemini CLI's agent, its own stop reason (end_turn, max_tokens, max_turn_requests, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<&'a str>,
    /// What the Gemini CLI's agent did (`engine: "gemini-cli"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<&'a AgentView>,
    /// The models asked at once (`models`, `consensus`): each one's stance, outcome, answer and
    /// cost, and who wrote the synthesis.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consensus: Option<&'a super::consensus::ConsensusView>,
}

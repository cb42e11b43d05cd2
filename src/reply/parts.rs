//! The reply's own views of what the parts report: usage, web sources, the fallback, files left
//! out, changed files. The reply's JSON and its schema are made from these, so renaming a field
//! of a part (Gemini's usage) cannot change what clients receive without a change here; a file's
//! reason for being left out is the collector's closed `SkipReason` itself, one type whose
//! serialized names and schema the reply's snapshots hold.

use schemars::JsonSchema;
use serde::Serialize;

use crate::collector::{SkipReason, Skipped};
use crate::gemini::{Fallback, Source, Usage};
use crate::git::ChangedFile;

/// Token usage of the call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Usage")]
pub struct UsageView {
    /// Prompt tokens, cached ones included.
    pub input: u64,
    /// Answer tokens, thinking excluded.
    pub output: u64,
    /// Thinking tokens.
    pub thinking: u64,
    /// Prompt tokens served from Gemini's cache.
    pub cached: u64,
    /// This call's estimated cost in USD, at the model's listed prices (none for a model
    /// without a known price).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The whole thread's estimated cost in USD, this call included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_cost_usd: Option<f64>,
    /// The service tier that served the call, when the API said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// The tier the call asked for, if any: the text names the tier that served it when one was
    /// asked for or it is not standard (not on every call).
    #[serde(skip)]
    #[schemars(skip)]
    pub tier_asked: Option<String>,
}

impl From<Usage> for UsageView {
    fn from(u: Usage) -> Self {
        UsageView {
            input: u.input,
            output: u.output,
            thinking: u.thinking,
            cached: u.cached,
            ..UsageView::default()
        }
    }
}

/// A web source Gemini cited (Google Search grounding).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "Source")]
pub struct WebSource {
    /// Page title.
    pub title: String,
    /// Page address.
    pub uri: String,
}

impl From<Source> for WebSource {
    fn from(s: Source) -> Self {
        WebSource {
            title: s.title,
            uri: s.uri,
        }
    }
}

/// The answer was produced by another model: the fallback after capacity errors on the
/// requested one, or the replacement of a model the API no longer serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "Fallback")]
pub struct FallbackView {
    /// Whether the requested model was shut down (404) rather than over capacity.
    #[serde(skip)]
    pub shut_down: bool,
    /// The model that was requested.
    pub from: String,
    /// The model that answered.
    pub to: String,
    /// Why the requested model was given up.
    pub reason: String,
}

impl From<Fallback> for FallbackView {
    fn from(f: Fallback) -> Self {
        FallbackView {
            shut_down: f.cause == crate::gemini::FallbackCause::ShutDown,
            from: f.from,
            to: f.to,
            reason: f.reason,
        }
    }
}

/// A file left out, with why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "Skipped")]
pub struct LeftOut {
    /// The path as shown to the user.
    pub path: String,
    /// Why it was left out.
    pub reason: SkipReason,
    /// The reason in words, for the Markdown.
    #[serde(skip)]
    pub described: &'static str,
}

impl From<Skipped> for LeftOut {
    fn from(s: Skipped) -> Self {
        LeftOut {
            path: s.path,
            reason: s.reason,
            described: s.reason.describe(),
        }
    }
}

/// A changed file, as listed in the reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "ChangedFile")]
pub struct ChangedFileView {
    /// Repository (as shown) the file belongs to.
    pub repo: String,
    /// Path relative to its repository.
    pub path: String,
    /// added, modified, deleted, renamed, copied, untracked, mode_changed, submodule,
    /// type_changed, conflicted.
    pub status: String,
    /// The path before a rename or copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
}

impl From<ChangedFile> for ChangedFileView {
    fn from(c: ChangedFile) -> Self {
        ChangedFileView {
            repo: c.repo,
            path: c.path,
            status: c.status,
            old_path: c.old_path,
        }
    }
}

/// One tool call of an investigation.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Step")]
pub struct StepView {
    /// list_files, read_file, search_text or git_log.
    pub tool: String,
    /// The arguments Gemini gave.
    pub arguments: serde_json::Value,
    /// One line: what it found, or why it was refused.
    pub outcome: String,
    /// Tokens of the result sent to Gemini.
    pub tokens: u64,
}

impl From<crate::reply::investigation_report::Step> for StepView {
    fn from(s: crate::reply::investigation_report::Step) -> Self {
        StepView {
            tool: s.tool,
            arguments: s.arguments,
            outcome: s.outcome,
            tokens: s.tokens,
        }
    }
}

/// What the Gemini CLI's agent did (`investigate` with `engine: "gemini-cli"`).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Agent")]
pub struct AgentView {
    /// `gemini-cli`.
    pub engine: String,
    /// The agent's session (ACP), kept for this thread's next call.
    pub session_id: String,
    /// How the session was reached: `new`, `live` (kept in the running agent) or `loaded`.
    pub session: String,
    /// The approval policy that applied.
    pub approval_policy: String,
    /// The agent's thinking, when it showed it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub thought: String,
    /// Its tool calls, in order.
    pub tool_calls: Vec<AgentToolCallView>,
    /// Its plan, when it made one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<PlanEntryView>,
    /// Every permission it asked for and our answer.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub permissions: Vec<PermissionView>,
}

/// One tool call of the agent.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "AgentToolCall")]
pub struct AgentToolCallView {
    /// The agent's title for it.
    pub name: String,
    /// `read`, `search`, `edit`, `execute`, `think`, `fetch` or `other`.
    pub kind: String,
    /// What it reached, in one line: its files (relative to the root, `path:line`) and the
    /// pattern, query or command it was given.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub target: String,
    /// The arguments, as the agent reported them (paths relative to the root, secrets redacted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<serde_json::Value>,
    /// The files it touched, as the agent reported them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<AgentLocationView>,
    /// `pending`, `in_progress`, `completed` or `failed`.
    pub status: String,
}

/// A file one of the agent's tool calls touched.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "AgentLocation")]
pub struct AgentLocationView {
    /// Relative to the root (absolute with several roots, or outside them).
    pub path: String,
    /// 1-based, when the agent named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

/// One entry of the agent's plan.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "PlanEntry")]
pub struct PlanEntryView {
    pub content: String,
    pub priority: String,
    pub status: String,
}

/// A permission request and our answer.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Permission")]
pub struct PermissionView {
    pub tool: String,
    pub allowed: bool,
    pub reason: String,
}

impl AgentView {
    pub fn new(run: &crate::gemini::AgentRun, mode: crate::gemini::AgentMode) -> AgentView {
        AgentView {
            engine: "gemini-cli".into(),
            session_id: run.session_id.clone(),
            session: run.session.clone(),
            approval_policy: mode.describe().into(),
            thought: run.thought.clone(),
            tool_calls: run
                .tool_calls
                .iter()
                .map(|c| AgentToolCallView {
                    name: c.title.clone(),
                    kind: c.kind.clone(),
                    target: c.target.clone(),
                    arguments: c.arguments.clone(),
                    locations: c
                        .locations
                        .iter()
                        .map(|l| AgentLocationView {
                            path: l.path.clone(),
                            line: l.line,
                        })
                        .collect(),
                    status: c.status.clone(),
                })
                .collect(),
            plan: run
                .plan
                .iter()
                .map(|p| PlanEntryView {
                    content: p.content.clone(),
                    priority: p.priority.clone(),
                    status: p.status.clone(),
                })
                .collect(),
            permissions: run
                .permissions
                .iter()
                .map(|d| PermissionView {
                    tool: d.tool.clone(),
                    allowed: d.allowed,
                    reason: d.reason.clone(),
                })
                .collect(),
        }
    }
}

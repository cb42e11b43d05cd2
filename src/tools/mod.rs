//! The eight tools: what each one takes and what it asks of the pipeline.
//!
//! Each tool file holds its parameters and a pure `plan()` that turns them into a [`Plan`]; the
//! parameters are one body for both edges, the MCP input schema and the subcommand's flags
//! ([`params`]). The tool's other facts (name, descriptions, reply kind, prompt, defaults) are
//! its row of the table in [`spec`]. The pipeline (`crate::pipeline::run`, through
//! `app::App::run`) does the rest for every tool: thread → files or git diff → budget → prompt →
//! Gemini → thread → [`Reply`](crate::reply::Reply). Nothing here knows MCP or the pipeline; the server and the
//! command line both call the app.

pub mod analyze;
pub mod chat;
pub mod codereview;
pub mod consensus;
pub mod debug;
pub mod investigate;
pub mod listmodels;
pub mod params;
pub mod precommit;
pub mod research;
pub mod spec;
pub mod thinkdeep;

/// The portable JSON Schemas live in a part (`crate::schema`: explore's function declarations
/// are made with them too); tool definitions reach them here as before.
pub(crate) use crate::schema;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::collector::{CollectError, SandboxError};
use crate::gemini::{GeminiError, ThinkingMode};
use crate::git::{DiffRequest, GitError};
pub use crate::reply::Reply;
use crate::reply::review;
use crate::store::{Owner, ThreadError, ThreadId};
pub use spec::Tool;

/// The longest text field the transport carries reliably; larger inputs get `resend_prompt`.
pub const MAX_TEXT_FIELD_CHARS: usize = 50_000;

/// Parameters every model-backed tool takes.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema, clap::Args)]
pub struct Common {
    /// Model or alias (pro, flash, flash-lite); see listmodels.
    #[arg(
        long,
        short = 'm',
        value_name = "MODEL",
        help_heading = "Model",
        help = "Model or alias (pro, flash, flash-lite)"
    )]
    pub model: Option<String>,
    /// Reasoning depth.
    #[arg(
        long,
        value_name = "MODE",
        value_parser = params::choice::<ThinkingMode>(),
        help_heading = "Model"
    )]
    pub thinking_mode: Option<ThinkingMode>,
    /// 0 to 1; best unset on Gemini 3+.
    #[arg(
        long,
        value_name = "T",
        value_parser = params::temperature,
        help_heading = "Model",
        help = "Sampling temperature, 0 to 1 (best left unset on Gemini 3 and later)"
    )]
    pub temperature: Option<f64>,
    /// Thread to continue: a reply's id, or "latest".
    #[arg(
        long,
        value_name = "ID",
        help_heading = "Model",
        help = "Continue a conversation: the continuation_id of an earlier reply (from this command or from an MCP client), or \"latest\""
    )]
    pub continuation_id: Option<String>,
    /// Images (png, jpeg, webp, gif).
    #[arg(
        long = "image",
        value_name = "PATH",
        help_heading = "Model",
        help = "An image to include (png, jpeg, webp, gif); repeat for several"
    )]
    pub images: Option<Vec<String>>,
}

/// How the answer is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Free Markdown.
    Text,
    /// JSON mode against the review schema; findings filtered at `min_severity` and above
    /// (`None`: not given, so the repository's threshold, else every severity).
    Review {
        min_severity: Option<review::Severity>,
        verdict: bool,
    },
}

/// The thread a call continues, parsed once when the call is planned: a malformed id is refused
/// before the call costs anything (rate limit, model list, tokenizer, Gemini).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Continuation {
    /// The newest thread of this project and client (`"latest"`).
    Latest,
    Thread(ThreadId),
}

impl Continuation {
    /// `continuation_id` as given: blank or absent starts a new thread.
    pub fn parse(raw: Option<&str>) -> Result<Option<Continuation>, ToolError> {
        let Some(raw) = raw.map(str::trim).filter(|r| !r.is_empty()) else {
            return Ok(None);
        };
        if raw.eq_ignore_ascii_case("latest") {
            return Ok(Some(Continuation::Latest));
        }
        match raw.parse::<ThreadId>() {
            Ok(id) => Ok(Some(Continuation::Thread(id))),
            Err(_) => Err(ToolError::invalid(
                "continuation_id",
                format!(
                    "`{raw}` is not a thread id; pass the continuation_id of an earlier reply, \"latest\", or leave it out to start a new thread"
                ),
            )),
        }
    }
}

/// Everything the pipeline needs for one call, built by a tool's pure `plan()`.
#[derive(Debug, Clone)]
pub struct Plan {
    pub tool: Tool,
    /// This turn's request, rendered by the tool (sections; no file contents).
    pub request: String,
    pub files: Vec<String>,
    pub images: Vec<String>,
    /// For precommit: what to diff. Its `budget` is set by the pipeline once the history is
    /// counted.
    pub git: Option<DiffRequest>,
    pub model: Option<String>,
    pub thinking: ThinkingMode,
    pub temperature: Option<f32>,
    pub continuation: Option<Continuation>,
    /// Extra system instructions from the caller (chat's `system_prompt`).
    pub system_extra: Option<String>,
    pub output: Output,
    pub web_search: bool,
    /// Gemini may investigate the project with the read-only tools, for at most this many steps
    /// (`investigate`, or `explore: true`).
    pub explore: Option<u32>,
    /// The Gemini CLI's own agent investigates instead, in this approval mode
    /// (`engine: "gemini-cli"`).
    pub agent: Option<crate::gemini::AgentMode>,
    /// Who is calling, for the threads they may continue: `local` unless the transport says
    /// otherwise (HTTP sets the token's owner).
    pub owner: Owner,
    /// The per-call ceiling (`GEMINI_MCP_CALL_USD`) does not apply: the user, asked on a
    /// terminal, chose to go on. The daily caps still do.
    pub over_ceiling_ok: bool,
    /// The caller's trace this call continues (a W3C `traceparent` the MCP edge found), if any.
    pub trace_parent: Option<crate::traces::Parent>,
    /// The files a review's repository rules keep out (`ignore_patterns`): set by the pipeline
    /// once it has read them; no file they match is read or sent, by the collector, the diff or
    /// an investigation's tools.
    pub ignore: Option<std::sync::Arc<crate::rules::Ignore>>,
    /// Several models answer at once and one answer is made of theirs (`models`, `consensus`).
    pub consensus: Option<crate::seats::Seats>,
}

impl Plan {
    /// A plan with the common parameters applied (the tool's own defaults where they are unset)
    /// and the rest empty.
    pub fn new(tool: Tool, common: Common) -> Result<Plan, ToolError> {
        let temperature = match common.temperature {
            None => None,
            Some(t) if (0.0..=1.0).contains(&t) => Some(t as f32),
            Some(t) => {
                return Err(ToolError::invalid(
                    "temperature",
                    format!("{t} is out of range; use a number from 0 to 1"),
                ));
            }
        };
        let model = common
            .model
            .map(|m| m.trim().to_string())
            .filter(|m| !m.is_empty());
        let continuation = Continuation::parse(common.continuation_id.as_deref())?;
        Ok(Plan {
            tool,
            request: String::new(),
            files: Vec::new(),
            images: paths("images", common.images)?,
            git: None,
            model,
            thinking: common.thinking_mode.unwrap_or(tool.spec().thinking),
            temperature,
            continuation,
            system_extra: None,
            output: Output::Text,
            web_search: false,
            explore: None,
            agent: None,
            owner: Owner::local(),
            over_ceiling_ok: false,
            trace_parent: None,
            ignore: None,
            consensus: None,
        })
    }
}

/// Why a tool call failed, before it is mapped to MCP (`server::to_mcp`) or to an exit code.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// A bad argument: JSON-RPC -32602 naming the field.
    #[error("invalid `{field}`: {message}")]
    InvalidArgument { field: String, message: String },
    /// A text field too large for the transport: a `resend_prompt` reply, not an error.
    #[error("`{field}` is {chars} characters; the limit is {limit}")]
    TooLarge {
        field: String,
        chars: usize,
        limit: usize,
    },
    /// A path outside the sandbox: JSON-RPC -32001 naming the path and the root.
    #[error(transparent)]
    Sandbox(SandboxError),
    #[error(transparent)]
    Collect(CollectError),
    #[error(transparent)]
    Git(GitError),
    #[error(transparent)]
    Thread(#[from] ThreadError),
    #[error(transparent)]
    Gemini(#[from] GeminiError),
    #[error("internal error: {0}")]
    Internal(String),
    /// A daily spending cap would be passed: refused before Gemini is called.
    #[error("{0}")]
    SpendingCap(String),
    /// The call's estimate passes the per-call ceiling: refused before Gemini is called (a
    /// terminal user is asked instead).
    #[error("{message}")]
    OverCallCeiling { message: String, estimate_usd: f64 },
    /// The repository's review configuration (`.gemini/config.yaml`) cannot be applied.
    #[error("{0}")]
    Rules(#[from] crate::rules::ConfigError),
}

impl ToolError {
    /// A bad argument. What the message and field quote of the client's input is capped
    /// ([`crate::echo`]).
    pub fn invalid(field: &str, message: impl Into<String>) -> ToolError {
        let message = message.into();
        ToolError::InvalidArgument {
            field: crate::echo::echo(field).into_owned(),
            message: crate::echo::echo_quoted(&message).into_owned(),
        }
    }

    /// What kind of error this is, as one word for records (the audit log): never the message,
    /// which may quote the caller's input.
    pub fn kind(&self) -> &'static str {
        match self {
            ToolError::InvalidArgument { .. } => "invalid_argument",
            ToolError::TooLarge { .. } => "too_large",
            ToolError::Sandbox(_) => "sandbox",
            ToolError::Collect(_) => "collect",
            ToolError::Git(_) => "git",
            ToolError::Thread(_) => "thread",
            ToolError::Internal(_) => "internal",
            ToolError::SpendingCap(_) => "spending_cap",
            ToolError::OverCallCeiling { .. } => "over_call_ceiling",
            ToolError::Rules(_) => "rules",
            ToolError::Gemini(g) => g.kind(),
        }
    }

    /// The input field the caller must change, when the error is about one: the edges report
    /// it as a bad argument (JSON-RPC -32602 naming the field; a usage error naming the flag).
    /// Paths refused by the sandbox are not here: they have their own code.
    pub fn field(&self) -> Option<&str> {
        match self {
            ToolError::InvalidArgument { field, .. } | ToolError::TooLarge { field, .. } => {
                Some(field)
            }
            ToolError::Git(GitError::NotARepository { .. }) => Some("path"),
            ToolError::Git(GitError::BadRef { .. }) => Some("compare_to"),
            ToolError::Collect(CollectError::Image { .. }) => Some("images"),
            _ => None,
        }
    }
}

impl From<crate::caps::SpendError> for ToolError {
    fn from(e: crate::caps::SpendError) -> Self {
        match e {
            crate::caps::SpendError::Cap(message) => ToolError::SpendingCap(message),
            crate::caps::SpendError::OverCall {
                message,
                estimate_usd,
            } => ToolError::OverCallCeiling {
                message,
                estimate_usd,
            },
        }
    }
}

impl From<CollectError> for ToolError {
    fn from(e: CollectError) -> Self {
        match e {
            CollectError::Sandbox(s) => ToolError::Sandbox(s),
            other => ToolError::Collect(other),
        }
    }
}

impl From<GitError> for ToolError {
    fn from(e: GitError) -> Self {
        match e {
            GitError::Sandbox(s) => ToolError::Sandbox(s),
            other => ToolError::Git(other),
        }
    }
}

/// A required text field: present, not blank, not too large for the transport.
pub fn required_text(field: &str, value: String) -> Result<String, ToolError> {
    if value.trim().is_empty() {
        return Err(ToolError::invalid(field, "must not be empty"));
    }
    optional_text(field, Some(value)).map(|v| v.unwrap_or_default())
}

/// An optional text field: blank means absent; too large gets `resend_prompt`.
pub fn optional_text(field: &str, value: Option<String>) -> Result<Option<String>, ToolError> {
    match value {
        Some(v) if v.chars().count() > MAX_TEXT_FIELD_CHARS => Err(ToolError::TooLarge {
            field: field.to_string(),
            chars: v.chars().count(),
            limit: MAX_TEXT_FIELD_CHARS,
        }),
        Some(v) if v.trim().is_empty() => Ok(None),
        other => Ok(other),
    }
}

/// A list of paths: blank entries are refused, naming the field.
pub fn paths(field: &str, value: Option<Vec<String>>) -> Result<Vec<String>, ToolError> {
    let value = value.unwrap_or_default();
    for (i, p) in value.iter().enumerate() {
        if p.trim().is_empty() {
            return Err(ToolError::invalid(
                &format!("{field}[{i}]"),
                "is an empty path",
            ));
        }
    }
    Ok(value)
}

/// Appends a `## heading` section with `body` to `out` when `body` is present.
pub fn section(out: &mut String, heading: &str, body: Option<&str>) {
    if let Some(body) = body.map(str::trim).filter(|b| !b.is_empty()) {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str("## ");
        out.push_str(heading);
        out.push('\n');
        out.push_str(body);
    }
}

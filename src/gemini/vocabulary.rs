//! What a call to Gemini is made of, whichever backend answers it: the request
//! ([`GenerateRequest`], its [`Message`]s and [`Part`]s, the [`Functions`] Gemini may call), the
//! answer ([`GenerateResponse`], its [`Usage`], [`Source`]s and [`Fallback`]), the per-call
//! [`CallContext`] (cancellation, [`Progress`]) and the [`GeminiError`]s.
//!
//! The backends (`api`, `cli`) and the facade import these; nothing here knows a backend.

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::model_info::ModelInfo;
pub use super::model_info::ThinkingMode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Model,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    /// Raw bytes; the API backend base64-encodes them as `inlineData`.
    Image {
        mime: String,
        data: Arc<Vec<u8>>,
    },
    /// A part of a model turn exactly as Gemini sent it (a function call, a text delta, a thought
    /// signature), replayed unchanged: Gemini 3 rejects a function call whose signature is lost.
    Recorded(serde_json::Value),
    /// What one function call returned, in the user turn after the model's calls.
    FunctionResponse {
        /// The call's `id`, when Gemini gave one.
        id: Option<String>,
        name: String,
        /// `{"output": …}` or `{"error": …}`.
        response: serde_json::Value,
    },
}

/// A function Gemini asked us to call.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionCall {
    pub id: Option<String>,
    pub name: String,
    /// The arguments as Gemini sent them (an object, or `null` when absent).
    pub args: serde_json::Value,
}

/// The functions Gemini may call in a request.
#[derive(Debug, Clone, PartialEq)]
pub struct Functions {
    /// `functionDeclarations`, in the API's form.
    pub declarations: serde_json::Value,
    /// `false`: the declarations stay (the request keeps its prefix) but calling is off
    /// (`functionCallingConfig.mode: NONE`), so the answer is text.
    pub allow: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    pub parts: Vec<Part>,
}

impl Message {
    pub fn user(text: impl Into<String>) -> Message {
        Message {
            role: Role::User,
            parts: vec![Part::Text(text.into())],
        }
    }
    pub fn model(text: impl Into<String>) -> Message {
        Message {
            role: Role::Model,
            parts: vec![Part::Text(text.into())],
        }
    }
}

/// Everything a backend needs for one answer.
#[derive(Debug, Clone)]
pub struct GenerateRequest {
    /// The resolved model (alias already expanded).
    pub model: ModelInfo,
    pub system_instruction: String,
    /// Oldest first; the last message is the user's new request.
    pub contents: Vec<Message>,
    pub thinking: ThinkingMode,
    /// Only sent when the user asked for one (3.x models misbehave below their default).
    pub temperature: Option<f32>,
    /// JSON mode: the answer must match this JSON Schema (`responseJsonSchema`).
    pub response_schema: Option<serde_json::Value>,
    /// Turn on Google Search grounding (API backend only).
    pub web_search: bool,
    /// Functions Gemini may call (API backend only); `None`: none.
    pub functions: Option<Functions>,
    /// An explicit context cache holding the front of this request (API backend only); `None`:
    /// the request is sent whole.
    pub cache: Option<CacheUse>,
    /// The Interactions API keeps the request's first messages in a stored interaction's chain
    /// (`GEMINI_MCP_INTERACTIONS_STORE`); `None`: the whole history is sent.
    pub previous: Option<PreviousInteraction>,
    /// An agent of the Interactions API answers instead of the model (`research`): the request
    /// runs at Google in the background, polled by id; `model` is what its usage is priced at.
    pub agent: Option<Agent>,
}

/// An agent run asked for by a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// The agent's id (`deep-research-preview-04-2026`).
    pub id: String,
    /// What the run is held at against the caps before it starts, in tokens (its own reading of
    /// the web is not known ahead).
    pub hold_tokens: u64,
}

impl GenerateRequest {
    /// Hex SHA-256 of what a cache of this request's front holds: the system instruction and the
    /// first `covers` messages, part by part, each length-prefixed. Two requests with the same
    /// digest send those bytes alike, so a cache made from one serves the other.
    pub fn front_digest(&self, covers: usize) -> String {
        messages_digest(
            &self.system_instruction,
            &self.contents[..covers.min(self.contents.len())],
        )
    }
}

#[cfg(test)]
impl GenerateRequest {
    /// A request of `contents` to the built-in model `alias` (at the tests' date), with no
    /// system instruction, thinking low, and nothing else asked.
    pub(crate) fn for_tests(alias: &str, contents: Vec<Message>) -> GenerateRequest {
        let prices = super::prices::PriceList::at(crate::clock::Clock::on("2026-11-27").unwrap());
        GenerateRequest {
            model: super::models::Catalogue::builtin(alias, prices)
                .resolve(alias)
                .expect("a built-in alias"),
            system_instruction: String::new(),
            contents,
            thinking: ThinkingMode::Low,
            temperature: None,
            response_schema: None,
            web_search: false,
            cache: None,
            previous: None,
            agent: None,
            functions: None,
        }
    }
}

/// Hex SHA-256 of `system` and `messages`, part by part, each length-prefixed: equal digests,
/// equal bytes sent.
pub fn messages_digest(system: &str, messages: &[Message]) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(system.as_bytes());
    for m in messages {
        field(match m.role {
            Role::User => b"user",
            Role::Model => b"model",
        });
        for p in &m.parts {
            match p {
                Part::Text(t) => {
                    field(b"text");
                    field(t.as_bytes());
                }
                Part::Image { mime, data } => {
                    field(b"image");
                    field(mime.as_bytes());
                    field(data);
                }
                Part::Recorded(v) => {
                    field(b"recorded");
                    field(v.to_string().as_bytes());
                }
                Part::FunctionResponse { id, name, response } => {
                    field(b"function");
                    field(id.as_deref().unwrap_or_default().as_bytes());
                    field(name.as_bytes());
                    field(response.to_string().as_bytes());
                }
            }
        }
    }
    hex::encode(h.finalize())
}

/// An explicit context cache (`cachedContents`) a request is answered from: it holds the
/// request's system instruction, its tools (function declarations, web search) and its first
/// `covers` messages, which the request then does not send again (the API refuses
/// `systemInstruction`, `tools` and `toolConfig` beside `cachedContent`, so a request that must
/// change its `toolConfig` — an investigation's forced answer — is sent whole).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheUse {
    /// The cache's resource name (`cachedContents/…`, or Vertex AI's full name).
    pub name: String,
    /// How many of the request's first messages it holds.
    pub covers: usize,
}

/// A stored interaction whose chain holds a request's first `covers` messages: sent as
/// `previous_interaction_id`, with only the messages that follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviousInteraction {
    pub id: String,
    pub covers: usize,
}

/// Token usage as the API reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens, cached ones included.
    pub input: u64,
    /// Answer tokens, thinking excluded.
    pub output: u64,
    /// Thinking tokens.
    pub thinking: u64,
    /// Prompt tokens served from Gemini's cache.
    pub cached: u64,
}

impl std::ops::AddAssign for Usage {
    /// Several requests' usage summed (an investigation's, a consensus's, a call's).
    fn add_assign(&mut self, u: Usage) {
        self.input += u.input;
        self.output += u.output;
        self.thinking += u.thinking;
        self.cached += u.cached;
    }
}

/// A service tier of the Gemini API and Vertex AI: what a call is asked to run at
/// (`GEMINI_SERVICE_TIER`, `--tier`) and what the API reports it ran at, which may differ (a
/// priority call over its limit is served at standard). Calls are priced at the tier that
/// served them ([`crate::gemini::prices::PriceList::estimate`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ServiceTier {
    #[default]
    Standard,
    /// Half the standard price, best-effort latency.
    Flex,
    /// A premium over the standard price, served first.
    Priority,
}

impl ServiceTier {
    /// Every tier, in the order they are offered.
    pub const ALL: [ServiceTier; 3] = [
        ServiceTier::Standard,
        ServiceTier::Flex,
        ServiceTier::Priority,
    ];

    /// The tier's name as the Gemini API spells it (`serviceTier`, `x-gemini-service-tier`).
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceTier::Standard => "standard",
            ServiceTier::Flex => "flex",
            ServiceTier::Priority => "priority",
        }
    }

    /// `raw` as a tier, ignoring case and surrounding space; `None` for anything else.
    pub fn parse(raw: &str) -> Option<ServiceTier> {
        let raw = raw.trim();
        ServiceTier::ALL
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(raw))
    }
}

/// A web source Gemini cited (Google Search grounding).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// Page title.
    pub title: String,
    /// Page address.
    pub uri: String,
}

/// The answer was produced by the fallback model after capacity errors on the requested one.
/// Why the fallback model answered instead of the one asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FallbackCause {
    /// 429 quota or 503 overloaded: the configured fallback model answered.
    #[default]
    Capacity,
    /// 404 NOT_FOUND for a model with an announced replacement: the replacement answered.
    ShutDown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fallback {
    /// Why another model answered (records written before it was kept: capacity).
    #[serde(default)]
    pub cause: FallbackCause,
    /// The model that was requested.
    pub from: String,
    /// The model that answered.
    pub to: String,
    /// Why the requested model was given up.
    pub reason: String,
}

#[derive(Debug, Clone, Default)]
pub struct GenerateResponse {
    /// The answer's text (thought parts excluded).
    pub text: String,
    /// The model that actually served the request (`modelVersion`), when reported.
    pub model_version: Option<String>,
    pub usage: Usage,
    pub finish_reason: Option<String>,
    pub sources: Vec<Source>,
    pub fallback: Option<Fallback>,
    /// The functions Gemini asked to call, in order (empty for a text answer).
    pub calls: Vec<FunctionCall>,
    /// The model's turn as received, to replay before the function responses.
    pub turn: Vec<Part>,
    /// The service tier that served the call, when the API reported it (the Gemini API's
    /// `x-gemini-service-tier` header, Vertex AI's `usageMetadata.trafficType`).
    pub service_tier: Option<ServiceTier>,
    /// The tier the call is priced at: the one that served it, else the one asked for, else
    /// standard (the Gemini CLI's calls, and answers that did not say).
    pub billed_tier: ServiceTier,
    /// Hex SHA-256 of the request body exactly as sent (the REST backends; `None` for the
    /// Gemini CLI's, whose requests are the CLI's own).
    pub request_sha256: Option<String>,
    /// The request named a cache that was gone (expired or deleted at Google), and was sent
    /// whole instead: its record should be forgotten.
    pub cache_lost: bool,
    /// The interaction Google stored for this answer (the Interactions API with `store: true`),
    /// which a later turn may continue.
    pub interaction_id: Option<String>,
}

/// A progress update while waiting on Gemini.
#[derive(Debug, Clone)]
pub struct Progress {
    pub message: String,
    /// A finished step of an investigation (a terminal keeps these lines; other progress
    /// replaces the last message).
    pub step: bool,
}

pub type ProgressFn = Arc<dyn Fn(Progress) + Send + Sync>;

/// Per-call context: cancellation, an optional progress sink, and the background run at Google
/// the call started or takes up.
#[derive(Clone, Default)]
pub struct CallContext {
    pub cancel: CancellationToken,
    pub progress: Option<ProgressFn>,
    pub background: BackgroundRun,
}

/// The id of a background run at Google (`research`'s agent run), shared with the task the
/// call runs as: the task's record keeps it, so when the instance running the task stops,
/// another instance takes the task up and the call polls that run instead of starting another.
#[derive(Clone, Debug, Default)]
pub struct BackgroundRun(std::sync::Arc<std::sync::Mutex<Option<String>>>);

impl BackgroundRun {
    /// A call that takes up the run `id`.
    pub fn of(id: String) -> BackgroundRun {
        BackgroundRun(std::sync::Arc::new(std::sync::Mutex::new(Some(id))))
    }

    /// The run's id, once it was created (or when it is taken up).
    pub fn id(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Records the id of the run the call created.
    pub fn set(&self, id: &str) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(id.to_string());
    }
}

impl CallContext {
    pub fn report(&self, message: impl Into<String>) {
        if let Some(p) = &self.progress {
            p(Progress {
                message: message.into(),
                step: false,
            });
        }
    }

    /// Reports a finished step of an investigation.
    pub fn step(&self, message: impl Into<String>) {
        if let Some(p) = &self.progress {
            p(Progress {
                message: message.into(),
                step: true,
            });
        }
    }
}

/// Why a call to Gemini failed. `Display` gives the status, Gemini's message and what to do.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GeminiError {
    /// An HTTP error answer from the API (after retries where they apply).
    #[error("{status} {code}: {message}. {hint}")]
    Api {
        status: u16,
        /// Google's status string, e.g. `RESOURCE_EXHAUSTED`.
        code: String,
        message: String,
        hint: String,
    },
    #[error(
        "the prompt was blocked by Gemini ({reason}). Rephrase the request or leave out the files that triggered it."
    )]
    Blocked { reason: String },
    #[error(
        "the answer was cut off by the output limit (MAX_TOKENS) before any text: thinking used the whole budget. Lower `thinking_mode` or ask a narrower question."
    )]
    MaxTokens,
    #[error(
        "Gemini returned an empty answer (finish reason {finish_reason}). Retry, or rephrase the request."
    )]
    Empty { finish_reason: String },
    #[error(
        "no answer within {after:?}. Retry with a narrower request or lower `thinking_mode`, or raise GEMINI_TIMEOUT_SECS."
    )]
    Timeout { after: Duration },
    /// The stream went silent for longer than `GEMINI_IDLE_TIMEOUT_SECS`.
    #[error(
        "Gemini sent nothing for {after:?} while answering. Retry; for very long thinking raise GEMINI_IDLE_TIMEOUT_SECS."
    )]
    Stalled { after: Duration },
    /// The candidate stopped without text for a reason other than `STOP`/`MAX_TOKENS`
    /// (`SAFETY`, `RECITATION`, …); `hint` says what to do about that reason.
    #[error("Gemini stopped without an answer (finish reason {finish_reason}): {hint}")]
    Withheld { finish_reason: String, hint: String },
    #[error("the call was cancelled")]
    Cancelled,
    #[error("cannot reach Gemini: {message}. Check the network and GEMINI_BASE_URL.")]
    Transport { message: String },
    #[error("Gemini's answer could not be read: {message}. Retry; if it persists, report it.")]
    Malformed { message: String },
    #[error("{message}")]
    NotConfigured { message: String },
    #[error("unknown model `{}`. {hint}", crate::echo::echo(.name))]
    UnknownModel { name: String, hint: String },
    /// A failure of the Gemini CLI backend, already phrased with what to do.
    #[error("{message}")]
    Cli {
        exit_code: Option<i32>,
        message: String,
    },
}

/// A failure of the Gemini CLI with no exit code, phrased with what to do.
pub(crate) fn cli_error(message: impl Into<String>) -> GeminiError {
    GeminiError::cli(None, message)
}

impl GeminiError {
    /// What kind of error this is, as one word for records (the audit log, traces): never the
    /// message, which may quote the caller's input.
    pub fn kind(&self) -> &'static str {
        match self {
            GeminiError::Api { .. } => "gemini_api",
            GeminiError::Blocked { .. } => "gemini_blocked",
            GeminiError::MaxTokens => "gemini_max_tokens",
            GeminiError::Empty { .. } => "gemini_empty",
            GeminiError::Timeout { .. } => "gemini_timeout",
            GeminiError::Stalled { .. } => "gemini_stalled",
            GeminiError::Withheld { .. } => "gemini_withheld",
            GeminiError::Cancelled => "cancelled",
            GeminiError::Transport { .. } => "gemini_transport",
            GeminiError::Malformed { .. } => "gemini_malformed",
            GeminiError::NotConfigured { .. } => "gemini_not_configured",
            GeminiError::UnknownModel { .. } => "unknown_model",
            GeminiError::Cli { .. } => "gemini_cli",
        }
    }

    /// A failure of the Gemini CLI, phrased with what to do (a sentence: a final period is added
    /// when missing).
    pub(crate) fn cli(exit_code: Option<i32>, message: impl Into<String>) -> GeminiError {
        let mut message = message.into();
        if !message.ends_with('.') {
            message.push('.');
        }
        GeminiError::Cli { exit_code, message }
    }

    /// 404 NOT_FOUND: the model is unknown to the API or no longer served (or a stored
    /// interaction a request continues is gone).
    pub fn is_not_found(&self) -> bool {
        matches!(self, GeminiError::Api { status: 404, .. })
    }

    /// A refusal naming a context cache that is gone or unusable (expired, deleted, another
    /// project's, another model's): the request is then sent whole. Only a refusal that names
    /// the cache is one: a bad key or an exhausted quota would fail the whole request too.
    pub fn is_cache_gone(&self) -> bool {
        match self {
            GeminiError::Api {
                status, message, ..
            } => {
                let m = message.to_ascii_lowercase();
                matches!(status, 400 | 403 | 404)
                    && (m.contains("cachedcontent") || m.contains("cached content"))
            }
            _ => false,
        }
    }

    /// The error with `hint` in place of its own (an API error's; other errors unchanged).
    pub fn with_hint(self, hint: String) -> GeminiError {
        match self {
            GeminiError::Api {
                status,
                code,
                message,
                ..
            } => GeminiError::Api {
                status,
                code,
                message,
                hint,
            },
            other => other,
        }
    }

    /// Capacity errors after retries: the fallback model may answer instead.
    pub fn is_capacity(&self) -> bool {
        matches!(
            self,
            GeminiError::Api {
                status: 429 | 503,
                ..
            }
        )
    }
}

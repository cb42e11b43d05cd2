//! The Gemini executor: one request/response model for the pipeline, answered by the REST API
//! (`api`) or the Gemini CLI as a subprocess (`cli`), with the model catalogue (`models`).
//!
//! The pipeline builds a [`GenerateRequest`] from our own types; each backend turns it into its
//! wire format. Failures are [`GeminiError`]s whose `Display` says what happened and what to do;
//! the key never appears in them.

pub mod acp;
pub mod api;
pub mod headless;
pub mod models;
pub mod prices;
pub mod wire;

mod retry;
mod sse;

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

pub use models::{Catalogue, ModelInfo, ThinkingStyle};

/// How hard the model should think, from the tool's `thinking_mode` parameter.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingMode {
    Minimal,
    Low,
    Medium,
    High,
    Max,
}

impl ThinkingMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingMode::Minimal => "minimal",
            ThinkingMode::Low => "low",
            ThinkingMode::Medium => "medium",
            ThinkingMode::High => "high",
            ThinkingMode::Max => "max",
        }
    }
}

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

/// A web source Gemini cited (Google Search grounding).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// Page title.
    pub title: String,
    /// Page address.
    pub uri: String,
}

/// The answer was produced by the fallback model after capacity errors on the requested one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fallback {
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
    /// The service tier that served the call, when the API reported it.
    pub service_tier: Option<String>,
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

/// Per-call context: cancellation and an optional progress sink.
#[derive(Clone, Default)]
pub struct CallContext {
    pub cancel: CancellationToken,
    pub progress: Option<ProgressFn>,
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
    headless::cli_error(None, message)
}

impl GeminiError {
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

/// The configured backend.
pub enum Backend {
    Api(Box<api::ApiClient>),
    /// The Gemini CLI as a subprocess, for users logged in to it without an API key.
    Cli(headless::CliBackend),
    /// No backend could be set up; every call fails with this message (the server still starts,
    /// so clients can list the tools and the user can read what to fix).
    Unconfigured(String),
}

/// Which Gemini executor answers the calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// The REST API when a key is set, else the Gemini CLI when it is on PATH.
    Auto,
    Api,
    Cli,
}

/// What the executor is configured with: the backend and its key or executable, the models,
/// and the deadlines and retries of a call.
#[derive(Debug, Clone)]
pub struct Settings {
    pub backend: BackendChoice,
    pub api_key: Option<crate::secret::Secret>,
    /// Scheme, host and optional path prefix, without `/v1beta` and without a trailing slash.
    pub base_url: String,
    /// The Gemini CLI executable for the CLI backend.
    pub gemini_cli: std::path::PathBuf,
    /// The `PATH` value a bare `gemini_cli` name is looked up in.
    pub search_path: Option<String>,
    /// Where the Gemini CLI runs (the first project root).
    /// Where the Gemini CLI's working directories are kept (`<state dir>/gemini-cli/<kind>`);
    /// empty: each run works in its own private temporary directory.
    pub state_dir: std::path::PathBuf,
    pub workdir: std::path::PathBuf,
    /// Default model (name or alias) when a call names none.
    pub default_model: String,
    /// The faster model used after capacity errors.
    pub fallback_model: String,
    /// Deadline for one whole call, retries included.
    pub call_timeout: Duration,
    pub connect_timeout: Duration,
    /// Longest silence allowed between two chunks of a streamed answer.
    pub idle_timeout: Duration,
    /// Attempts per call, the first included.
    pub max_attempts: u32,
    /// First backoff delay; doubled per attempt, capped at `retry_max_delay`.
    pub retry_initial_delay: Duration,
    pub retry_max_delay: Duration,
    /// How the CLI backend reaches the Gemini CLI: a warm `gemini --acp`, or one process per call.
    pub cli_transport: CliTransport,
    /// Vertex AI instead of the Gemini API (`GOOGLE_GENAI_USE_VERTEXAI=true`).
    pub vertex: Option<VertexSettings>,
    /// The service tier asked for (`GEMINI_SERVICE_TIER`): `standard`, `flex` or `priority`.
    pub service_tier: Option<String>,
    /// A warm CLI process with no call for this long exits.
    pub acp_idle: Duration,
    /// Most warm CLI processes alive at once.
    pub acp_max_processes: usize,
}

/// Where and how Vertex AI is reached.
#[derive(Debug, Clone)]
pub struct VertexSettings {
    /// `GOOGLE_CLOUD_PROJECT`; `None` only in express mode (an API key).
    pub project: Option<String>,
    /// `GOOGLE_CLOUD_LOCATION`, default `global`.
    pub location: String,
    /// `GOOGLE_VERTEX_BASE_URL`: scheme and host (for proxies and tests); else Google's endpoint
    /// for the location.
    pub base_url: Option<String>,
    /// `GOOGLE_API_KEY`: Vertex AI express mode (no project, no Application Default Credentials).
    pub api_key: Option<crate::secret::Secret>,
    /// Labels sent with each request, for cost attribution.
    pub labels: Vec<(String, String)>,
}

impl VertexSettings {
    /// The endpoint: the base URL override, the global endpoint, or the location's.
    pub fn endpoint(&self) -> String {
        match &self.base_url {
            Some(b) => b.trim_end_matches('/').to_string(),
            None if self.location == "global" => "https://aiplatform.googleapis.com".into(),
            None => format!("https://{}-aiplatform.googleapis.com", self.location),
        }
    }

    /// The prefix every model path follows: `…/publishers/google`.
    pub fn publisher_base(&self) -> String {
        match &self.project {
            Some(p) if self.api_key.is_none() => format!(
                "{}/v1/projects/{p}/locations/{}/publishers/google",
                self.endpoint(),
                self.location
            ),
            _ => format!("{}/v1/publishers/google", self.endpoint()),
        }
    }
}

/// How the CLI backend runs the Gemini CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CliTransport {
    /// A warm `gemini --acp` process, one session per call; one process per call where ACP is
    /// unavailable.
    Acp,
    /// `gemini -o json` for every call.
    Headless,
}

/// The backend chosen, as `doctor` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendInfo {
    /// The REST API at this base URL (`…/v1beta`).
    Api { base_url: String },
    /// Vertex AI at this endpoint, for this project (none in express mode) and location.
    Vertex {
        endpoint: String,
        project: Option<String>,
        location: String,
        /// `Application Default Credentials` or `API key (express mode)`.
        auth: String,
    },
    /// The Gemini CLI, found at this path (an executable regular file).
    Cli { program: std::path::PathBuf },
    /// No backend can work; what to set.
    Unconfigured(String),
}

/// The executor the pipeline calls: a backend, the model catalogue and the fallback policy.
pub struct Gemini {
    backend: Backend,
    /// The CLI backend's warm `gemini --acp` processes (`GEMINI_CLI_TRANSPORT=acp`).
    warm: Option<Warm>,
    catalogue: Catalogue,
    fallback_model: String,
}

/// The CLI backend over ACP, with the per-call CLI as its fallback.
struct Warm {
    pool: std::sync::Arc<acp::Pool>,
    /// Set once ACP could not be started: every later call runs the CLI per call.
    unavailable: std::sync::atomic::AtomicBool,
}

impl Warm {
    async fn generate(
        &self,
        cli: &headless::CliBackend,
        req: &GenerateRequest,
        ctx: &CallContext,
    ) -> Result<GenerateResponse, GeminiError> {
        use std::sync::atomic::Ordering;
        let has_images = req
            .contents
            .iter()
            .any(|m| m.parts.iter().any(|p| matches!(p, Part::Image { .. })));
        // The per-call path refuses what the CLI cannot take, saying why.
        if self.unavailable.load(Ordering::Relaxed) || has_images || req.functions.is_some() {
            return cli.generate(req, ctx).await;
        }
        match self.pool.answer(req, ctx).await {
            Ok(answer) => Ok(answer),
            Err(acp::Failure::Failed(e)) => Err(e),
            Err(acp::Failure::Unavailable(e)) => {
                if !self.unavailable.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "the Gemini CLI over ACP is unavailable ({e}); running it once per call from now on \
                         (GEMINI_CLI_TRANSPORT=headless makes this the default)"
                    );
                }
                cli.generate(req, ctx).await
            }
        }
    }
}

impl Gemini {
    /// Picks the backend from the configuration. When none can work, calls fail saying what to set.
    pub fn from_config(config: &Settings) -> Result<Gemini, GeminiError> {
        Gemini::with_path(
            config,
            config.search_path.as_deref().map(std::ffi::OsStr::new),
        )
    }

    /// [`Gemini::from_config`] with the `PATH` value given, where a bare `GEMINI_CLI_PATH` name
    /// (default `gemini`) is looked up.
    pub fn with_path(
        config: &Settings,
        path: Option<&std::ffi::OsStr>,
    ) -> Result<Gemini, GeminiError> {
        let backend = match (&config.vertex, config.backend) {
            (Some(vertex), BackendChoice::Api | BackendChoice::Auto) => {
                let mut vertex = vertex.clone();
                // Express mode takes the key; with a project, Application Default Credentials.
                vertex.api_key = match vertex.project {
                    None => config.api_key.clone(),
                    Some(_) => None,
                };
                match api::ApiClient::vertex(config, &vertex) {
                    Ok(c) => Some(Backend::Api(Box::new(c))),
                    Err(e) => Some(Backend::Unconfigured(e.to_string())),
                }
            }
            _ => None,
        };
        let backend = match backend {
            Some(b) => b,
            None => Gemini::choose(config, path)?,
        };
        let warm = match (&backend, config.cli_transport) {
            (Backend::Cli(cli), CliTransport::Acp) => Some(Warm {
                pool: acp::Pool::new(
                    acp::AcpSettings {
                        program: cli.program().to_path_buf(),
                        idle: config.acp_idle,
                        max_processes: config.acp_max_processes,
                        allowed_modes: Vec::new(),
                        timeout: config.call_timeout,
                        // A plain process has no project tools.
                        result_chars: crate::explore::RESULT_CHARS,
                        state_dir: config.state_dir.clone(),
                    },
                    config.workdir.clone(),
                    None,
                ),
                unavailable: std::sync::atomic::AtomicBool::new(false),
            }),
            _ => None,
        };
        Ok(Gemini {
            backend,
            warm,
            catalogue: Catalogue::builtin(&config.default_model),
            fallback_model: config.fallback_model.clone(),
        })
    }

    /// The Gemini API with a key, or the Gemini CLI, as `GEMINI_BACKEND` and the key say.
    fn choose(config: &Settings, path: Option<&std::ffi::OsStr>) -> Result<Backend, GeminiError> {
        Ok(match (config.backend, &config.api_key) {
            (BackendChoice::Api | BackendChoice::Auto, Some(key)) => Backend::Api(Box::new(api::ApiClient::new(config, key.clone())?)),
            (BackendChoice::Api, None) => Backend::Unconfigured(
                "GEMINI_BACKEND=api needs a key: set GEMINI_API_KEY (get one at https://aistudio.google.com/apikey)".into(),
            ),
            (BackendChoice::Auto, None) => match headless::CliBackend::from_config(config, path) {
                Ok(cli) => Backend::Cli(cli),
                Err(_) => Backend::Unconfigured(
                    "no Gemini backend: set GEMINI_API_KEY (https://aistudio.google.com/apikey), or use the Gemini CLI's login: \
                     install it (`npm install -g @google/gemini-cli`), run `gemini` once to log in, and keep it on PATH \
                     or name it in GEMINI_CLI_PATH (GEMINI_BACKEND=cli selects it explicitly)"
                        .into(),
                ),
            },
            (BackendChoice::Cli, _) => match headless::CliBackend::from_config(config, path) {
                Ok(cli) => Backend::Cli(cli),
                Err(message) => Backend::Unconfigured(format!("GEMINI_BACKEND=cli: {message}")),
            },
        })
    }

    pub fn catalogue(&self) -> &Catalogue {
        &self.catalogue
    }

    /// Refreshes the catalogue from the backend's model list (the API's `GET /v1beta/models`,
    /// fetched once and cached by the client); returns how many models were listed. Backends
    /// without a model list leave the built-in table as it is.
    pub async fn refresh_models(&self) -> Result<usize, GeminiError> {
        match &self.backend {
            Backend::Api(c) => {
                let listed = c.models().await?;
                let n = listed.len();
                self.catalogue.refresh(listed);
                Ok(n)
            }
            _ => Ok(0),
        }
    }

    /// The configured backend (for readiness checks).
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// What the backend is, for `doctor`: where it sends calls, or why it cannot.
    pub fn backend_info(&self) -> BackendInfo {
        match &self.backend {
            Backend::Api(api) => match api.vertex_settings() {
                Some(v) => BackendInfo::Vertex {
                    endpoint: v.endpoint(),
                    project: v.project.clone(),
                    location: v.location.clone(),
                    auth: if v.api_key.is_some() {
                        "API key (express mode)".into()
                    } else {
                        "Application Default Credentials".into()
                    },
                },
                None => BackendInfo::Api {
                    base_url: api.base_url().to_string(),
                },
            },
            Backend::Cli(cli) => BackendInfo::Cli {
                program: cli.program().to_path_buf(),
            },
            Backend::Unconfigured(why) => BackendInfo::Unconfigured(why.clone()),
        }
    }

    pub fn backend_name(&self) -> &'static str {
        match &self.backend {
            Backend::Api(a) if a.vertex_settings().is_some() => "vertex",
            Backend::Api(_) => "api",
            Backend::Cli(_) => "cli",
            Backend::Unconfigured(_) => "none",
        }
    }

    /// Kills every Gemini CLI call in flight, synchronously (for a SIGINT/SIGTERM handler before
    /// exiting; see [`headless::CliBackend::abort_all`]). Nothing to do for the other backends.
    pub fn abort_running(&self) {
        if let Backend::Cli(c) = &self.backend {
            c.abort_all();
        }
        if let Some(warm) = &self.warm {
            warm.pool.shutdown();
        }
    }

    /// One answer, with retries inside the backend and the capacity fallback here.
    pub async fn generate(
        &self,
        req: GenerateRequest,
        ctx: &CallContext,
    ) -> Result<GenerateResponse, GeminiError> {
        let first = self.generate_once(&req, ctx).await;
        match first {
            Err(e) if e.is_capacity() => {
                let Ok(fallback) = self.catalogue.resolve(&self.fallback_model) else {
                    return Err(e);
                };
                if fallback.id == req.model.id {
                    return Err(e);
                }
                ctx.report(format!(
                    "{} is over capacity; asking {} instead",
                    req.model.id, fallback.id
                ));
                let from = req.model.id.clone();
                let mut req = req;
                req.model = fallback;
                let mut resp = self.generate_once(&req, ctx).await?;
                resp.fallback = Some(Fallback {
                    from,
                    to: req.model.id.clone(),
                    reason: e.to_string(),
                });
                Ok(resp)
            }
            other => other,
        }
    }

    async fn generate_once(
        &self,
        req: &GenerateRequest,
        ctx: &CallContext,
    ) -> Result<GenerateResponse, GeminiError> {
        match &self.backend {
            Backend::Api(c) => c.generate(req, ctx).await,
            Backend::Cli(c) => match &self.warm {
                Some(warm) => warm.generate(c, req, ctx).await,
                None => c.generate(req, ctx).await,
            },
            Backend::Unconfigured(message) => Err(GeminiError::NotConfigured {
                message: message.clone(),
            }),
        }
    }
}

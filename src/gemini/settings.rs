//! What the executor is configured with: which backend answers, its key or executable, the
//! models, and the deadlines and retries of a call.

use std::time::Duration;

use super::api::VertexSettings;
use super::cli::acp::Mode;

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
    /// The `Authorization` header a proxy at `base_url` takes (its URL's user info).
    pub base_authorization: Option<crate::secret::Secret>,
    /// The Gemini CLI executable for the CLI backend.
    pub gemini_cli: std::path::PathBuf,
    /// The `PATH` value a bare `gemini_cli` name is looked up in.
    pub search_path: Option<String>,
    /// The `PATHEXT` value: on Windows, the extensions `gemini_cli` is tried with.
    pub search_exts: Option<String>,
    /// Where the Gemini CLI's working directories are kept (`<state dir>/gemini-cli/<kind>`);
    /// empty: each run works in its own private temporary directory.
    pub state_dir: std::path::PathBuf,
    /// Where the Gemini CLI runs (the first project root).
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
    /// Agent modes that change files or run commands the configuration allows
    /// (`GEMINI_MCP_ACP_ALLOW_MODES`).
    pub acp_allowed_modes: Vec<Mode>,
    /// Longest result of one of the agent's project tools, in characters
    /// (`GEMINI_MCP_EXPLORE_RESULT_CHARS`).
    pub explore_result_chars: usize,
    /// The prices estimates are made at, and the day they are read at.
    pub prices: super::prices::PriceList,
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

//! What the executor is configured with: which backend answers, its key or executable, the
//! models, and the deadlines and retries of a call.

use std::time::Duration;

use super::agent_mode::AgentMode;
use crate::secret::Secret;

/// Which Gemini executor answers the calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// The REST API when a key is set, else the Gemini CLI when it is on PATH.
    #[default]
    Auto,
    Api,
    Cli,
}

/// Which of the REST API's two interfaces carries a call (`GEMINI_API_SURFACE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApiSurface {
    /// `generateContent` for what it has and the Interactions API lacks (explicit context
    /// caching, thinking budgets, Vertex AI), the Interactions API for what only it has.
    #[default]
    Auto,
    /// `models/{model}:streamGenerateContent` always.
    GenerateContent,
    /// `interactions` for every call it can carry (not Vertex AI, not a request naming a
    /// context cache).
    Interactions,
}

/// What the executor is configured with: the backend and its key or executable, the models,
/// and the deadlines and retries of a call. Read by `config`'s rows; `Default` is the neutral
/// value they start from.
#[derive(Debug, Clone, Default)]
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
    /// The Gemini CLI's home (`GEMINI_CLI_HOME`, else the user's): where it records its sessions,
    /// which are removed after each call (`cli::records`); `None`: unknown, left alone.
    pub cli_home: Option<std::path::PathBuf>,
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
    /// `GOOGLE_APPLICATION_CREDENTIALS` (read again by Google's auth library; kept for `doctor`).
    pub google_application_credentials: Option<std::path::PathBuf>,
    /// gcloud's application-default credentials file (`gcloud auth application-default login`).
    pub gcloud_adc_file: Option<std::path::PathBuf>,
    /// The service tier asked for (`GEMINI_SERVICE_TIER`): `standard`, `flex` or `priority`.
    pub service_tier: Option<super::ServiceTier>,
    /// Which REST interface carries the calls (`GEMINI_API_SURFACE`).
    pub api_surface: ApiSurface,
    /// Calls over the Interactions API are stored at Google and a thread continues its chain
    /// (`GEMINI_MCP_INTERACTIONS_STORE`); off: `store: false`, the whole history each call.
    pub interactions_store: bool,
    /// The Deep Research agent of the Interactions API (`GEMINI_MCP_DEEP_RESEARCH…`).
    pub research: ResearchSettings,
    /// A warm CLI process with no call for this long exits.
    pub acp_idle: Duration,
    /// Most warm CLI processes alive at once.
    pub acp_max_processes: usize,
    /// Agent modes that change files or run commands the configuration allows
    /// (`GEMINI_MCP_ACP_ALLOW_MODES`).
    pub acp_allowed_modes: Vec<AgentMode>,
    /// Longest result of one of the agent's project tools, in characters
    /// (`GEMINI_MCP_EXPLORE_RESULT_CHARS`).
    pub explore_result_chars: usize,
    /// The prices estimates are made at, and the day they are read at.
    pub prices: super::prices::PriceList,
}

/// The Deep Research agent (`research`): off unless turned on; it browses the web.
#[derive(Debug, Clone, Default)]
pub struct ResearchSettings {
    /// The `research` tool is listed and runs (`GEMINI_MCP_DEEP_RESEARCH=1`).
    pub enabled: bool,
    /// The agent asked (`GEMINI_MCP_DEEP_RESEARCH_AGENT`).
    pub agent: String,
    /// What one run is held at against the caps before it starts, in tokens: the agent reads
    /// the web on its own, so its input is not known ahead (`GEMINI_MCP_DEEP_RESEARCH_TOKENS`).
    pub hold_tokens: u64,
    /// The longest a run may take before it is cancelled at Google.
    pub timeout: Duration,
    /// How often a background run is polled.
    pub poll: Duration,
    /// Calls over the Interactions API that think at `high` or `max` run in the background
    /// (`GEMINI_MCP_INTERACTIONS_BACKGROUND`).
    pub thinking_in_background: bool,
}

/// How the CLI backend runs the Gemini CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CliTransport {
    /// A warm `gemini --acp` process, one session per call; one process per call where ACP is
    /// unavailable.
    #[default]
    Acp,
    /// `gemini -o json` for every call.
    Headless,
}

/// `GEMINI_BASE_URL` taken apart, so that no HTTP client is handed credentials in a URL (its
/// own log lines and errors print the URLs it is handed): the user info of
/// `https://user:password@proxy` becomes the `Authorization` header a proxy takes
/// ([`crate::secret::without_user_info`]), and a `?key=`, the Gemini API's own way to pass the
/// key, becomes the key (sent in its header).
#[derive(Debug)]
pub struct BaseUrl {
    /// Scheme, host and optional path prefix, without a trailing slash, user info or query.
    pub url: String,
    pub authorization: Option<Secret>,
    pub key: Option<Secret>,
}

impl BaseUrl {
    /// Parses the setting's value, beside the key set by `GEMINI_API_KEY` (`set`: a different
    /// `key` in the URL is refused). The error says what is wrong and never quotes the value (it
    /// may hold credentials).
    pub fn parse(raw: &str, set: Option<&Secret>) -> Result<BaseUrl, String> {
        let raw = raw.trim();
        if !(raw.starts_with("http://") || raw.starts_with("https://")) {
            return Err("must start with http:// or https:// (e.g. https://generativelanguage.googleapis.com)".into());
        }
        let split =
            crate::secret::without_user_info(raw).map_err(|e| format!("is not a URL ({e})"))?;
        let mut url = split.url;
        let mut key = None;
        for (name, value) in url.query_pairs() {
            if name != "key" {
                return Err("holds a query (`?…`) other than `key`: the server appends the API's paths to it; leave it out".into());
            }
            if set.is_some_and(|k| k.expose() != value.trim()) {
                return Err(
                    "holds a `key` that differs from GEMINI_API_KEY's: keep one (GEMINI_API_KEY)"
                        .into(),
                );
            }
            key = Some(Secret::new(value.trim()));
        }
        url.set_query(None);
        url.set_fragment(None);
        let url = url.as_str().trim_end_matches('/');
        if url.ends_with("/v1beta") {
            return Err("leave out `/v1beta`: the server adds it".into());
        }
        Ok(BaseUrl {
            url: url.to_string(),
            authorization: split.authorization,
            key,
        })
    }
}

/// The request header Vertex AI takes a Flex or Priority PayGo call in (it ignores the body's
/// `serviceTier`); Provisioned Throughput, where the project has it, is still used first.
const TIER_HEADER: &str = "X-Vertex-AI-LLM-Shared-Request-Type";

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
    pub api_key: Option<Secret>,
    /// Labels sent with each request, for cost attribution.
    pub labels: Vec<(String, String)>,
    /// The Application Default Credentials file Google's auth library will read, and the
    /// setting that names it (`GOOGLE_APPLICATION_CREDENTIALS`, or gcloud's file when it exists):
    /// checked to be a regular file of bounded size before the library reads it whole.
    pub credentials_file: Option<(&'static str, std::path::PathBuf)>,
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

    /// The header that asks Vertex AI for `tier`: Flex and Priority PayGo, on the global endpoint
    /// only (Vertex AI serves them nowhere else); `None` for standard (the default) and on a
    /// regional location, where the call runs at standard.
    pub fn tier_header(&self, tier: super::ServiceTier) -> Option<(&'static str, &'static str)> {
        (self.location == "global" && tier != super::ServiceTier::Standard)
            .then(|| (TIER_HEADER, tier.as_str()))
    }

    /// The prefix every model path follows: `…/publishers/google`.
    /// Where Vertex AI serves the Interactions API, as google-genai 3.3.0 reaches it
    /// (`_gaos/google_genai.py`: `/{api_version}/interactions` with the api version
    /// `v1beta1/projects/{project}/locations/{location}` with a project, `v1beta1` in express
    /// mode).
    pub fn interactions_url(&self) -> String {
        self.under_project("v1beta1", "interactions")
    }

    pub fn publisher_base(&self) -> String {
        self.under_project("v1", "publishers/google")
    }

    /// `{endpoint}/{version}/projects/{project}/locations/{location}/{tail}` with a project and
    /// Application Default Credentials; `{endpoint}/{version}/{tail}` in express mode.
    fn under_project(&self, version: &str, tail: &str) -> String {
        match &self.project {
            Some(p) if self.api_key.is_none() => format!(
                "{}/{version}/projects/{p}/locations/{}/{tail}",
                self.endpoint(),
                self.location
            ),
            _ => format!("{}/{version}/{tail}", self.endpoint()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_is_taken_apart() {
        let b = BaseUrl::parse(" https://gw:p%40ss@Proxy.example/gemini/?key=K3y ", None).unwrap();
        assert_eq!(b.url, "https://proxy.example/gemini");
        assert_eq!(b.key.as_ref().map(Secret::expose), Some("K3y"));
        assert_eq!(
            b.authorization.as_ref().map(Secret::expose),
            Some("Basic Z3c6cEBzcw==")
        );
        let plain = BaseUrl::parse("http://127.0.0.1:8080/", None).unwrap();
        let same = Secret::new("K3y");
        assert!(BaseUrl::parse("https://p/?key=K3y", Some(&same)).is_ok());
        assert_eq!(plain.url, "http://127.0.0.1:8080");
        assert!(plain.key.is_none() && plain.authorization.is_none());
        for (bad, says) in [
            ("localhost:8080", "must start with"),
            ("http://x/v1beta", "leave out `/v1beta`"),
            ("https://u:S3cret@proxy/?tenant=a", "other than `key`"),
            ("https://u:S3cret@[::1", "is not a URL"),
            ("https://p/?key=S3cret", "differs from GEMINI_API_KEY"),
        ] {
            let why = BaseUrl::parse(bad, Some(&same)).unwrap_err();
            assert!(
                why.contains(says) && !why.contains("S3cret"),
                "{bad}: {why}"
            );
        }
    }
}

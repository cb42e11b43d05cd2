//! Configuration: read once, at start, from the environment and an optional TOML file, into one
//! `Config` that is injected everywhere. No handler reads the environment or the current directory.
//!
//! Every setting has one name, used both as the environment variable and as the key in the TOML
//! file (`GEMINI_MCP_CONFIG=/path/to/config.toml`); the environment wins over the file. The table
//! in `SETTINGS` is the single source for the README's configuration table (a test keeps the two
//! in step).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::limits::RateLimits;

/// A value that must never reach a log, an error or a reply. `Debug` and `Display` print a
/// placeholder; the value is only reachable through [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }
    /// The raw value, for the one place that has to send it (an HTTP header, a Redis URL).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Which Gemini executor answers the calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// The REST API when a key is set, else the Gemini CLI when it is on PATH.
    Auto,
    Api,
    Cli,
}

/// Where conversation threads live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreChoice {
    /// Redis when `REDIS_URL` is set, else the embedded on-disk store.
    Auto,
    Redis,
    Embedded,
    Memory,
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Canonical sandbox roots. Every file the server reads lies inside one of them.
    pub roots: Vec<PathBuf>,
    pub api_key: Option<Secret>,
    /// Scheme, host and optional path prefix, without `/v1beta` and without a trailing slash.
    pub base_url: String,
    pub backend: BackendChoice,
    /// The Gemini CLI executable for the CLI backend.
    pub gemini_cli: PathBuf,
    /// The `PATH` value a bare `gemini_cli` name is looked up in (read here, at the edge, so no
    /// part reads the environment).
    pub search_path: Option<String>,
    /// Default model (name or alias) when a call names none.
    pub default_model: String,
    /// The faster model used after capacity errors.
    pub fallback_model: String,
    /// Deadline for one whole Gemini call, retries included.
    pub call_timeout: Duration,
    pub connect_timeout: Duration,
    /// Longest silence allowed between two chunks of a streamed answer.
    pub idle_timeout: Duration,
    /// Attempts per call, the first included.
    pub max_attempts: u32,
    /// First backoff delay; doubled per attempt, capped at `retry_max_delay`.
    pub retry_initial_delay: Duration,
    pub retry_max_delay: Duration,
    /// Optional cap on the tokens of context sent per call.
    pub max_context_tokens: Option<u64>,
    /// Cap on a whole MCP tool result, text and structured content together, in characters
    /// (clients fail, truncate or spill long tool output). The command line prints whole replies.
    pub max_reply_chars: usize,
    pub store: StoreChoice,
    pub redis_url: Option<Secret>,
    pub key_prefix: String,
    pub state_dir: PathBuf,
    pub thread_ttl: Duration,
    pub max_turns: u32,
    /// A thread started under other roots may be continued here.
    pub share_threads_across_projects: bool,
    pub disabled_tools: Vec<String>,
    /// Extra file-name globs treated as secrets (added to the built-in list).
    pub secret_globs: Vec<String>,
    /// When non-empty, directory walks keep only files matching one of these globs.
    pub include_globs: Vec<String>,
    pub exclude_globs: Vec<String>,
    /// Bearer tokens the HTTP transport accepts, one per client (empty: none configured).
    pub http_tokens: Vec<Secret>,
    /// Per-tool rate limits when set explicitly; `None`: the transport's default (HTTP: the
    /// built-in table, stdio: off).
    pub rate_limits: Option<RateLimits>,
    pub http: HttpSettings,
}

/// Settings of the Streamable HTTP transport only.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Extra `Host` values accepted besides the loopback names; `None`: any Host (`*`).
    pub allowed_hosts: Option<Vec<String>>,
    /// Extra browser origins accepted besides loopback ones; `None`: any Origin (`*`).
    pub allowed_origins: Option<Vec<String>>,
    pub max_body_bytes: usize,
    /// Tool calls in flight per client.
    pub client_concurrency: usize,
    /// Live legacy sessions per client on one instance.
    pub max_sessions_per_client: usize,
    /// How long in-flight calls may take to finish after SIGTERM.
    pub shutdown_grace: Duration,
}

/// One documented setting: its name, its default as shown to users, and what it does.
pub struct Setting {
    pub name: &'static str,
    pub default: &'static str,
    pub doc: &'static str,
}

/// Every setting the server reads. The README's configuration table is generated from (and
/// tested against) this list.
pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "PROJECT_ROOT",
        default: "working directory",
        doc: "Sandbox roots, separated by `:`; only files inside them are read.",
    },
    Setting {
        name: "GEMINI_API_KEY",
        default: "—",
        doc: "Key for the Gemini REST API (`GOOGLE_API_KEY` also accepted).",
    },
    Setting {
        name: "GEMINI_BASE_URL",
        default: "https://generativelanguage.googleapis.com",
        doc: "API base URL (scheme, host, optional path prefix; no `/v1beta`).",
    },
    Setting {
        name: "GEMINI_BACKEND",
        default: "auto",
        doc: "`api`, `cli` or `auto` (API when a key is set, else the Gemini CLI when found on PATH).",
    },
    Setting {
        name: "GEMINI_CLI_PATH",
        default: "gemini",
        doc: "The Gemini CLI executable for the `cli` backend.",
    },
    Setting {
        name: "GEMINI_MODEL",
        default: "pro",
        doc: "Default model, by name or alias (`pro`, `flash`, `flash-lite`).",
    },
    Setting {
        name: "GEMINI_FALLBACK_MODEL",
        default: "flash",
        doc: "Model used after capacity errors (429 quota, 503 overloaded).",
    },
    Setting {
        name: "GEMINI_TIMEOUT_SECS",
        default: "540",
        doc: "Deadline for one Gemini call, retries included.",
    },
    Setting {
        name: "GEMINI_CONNECT_TIMEOUT_SECS",
        default: "10",
        doc: "TCP/TLS connect timeout.",
    },
    Setting {
        name: "GEMINI_IDLE_TIMEOUT_SECS",
        default: "180",
        doc: "Longest silence between two chunks once Gemini has begun answering.",
    },
    Setting {
        name: "GEMINI_MAX_ATTEMPTS",
        default: "5",
        doc: "Attempts per call on 408/429/5xx, the first included (also bounds the Gemini CLI's own retries).",
    },
    Setting {
        name: "GEMINI_RETRY_INITIAL_MS",
        default: "2000",
        doc: "First retry delay; doubled per attempt (full jitter).",
    },
    Setting {
        name: "GEMINI_RETRY_MAX_MS",
        default: "30000",
        doc: "Cap on one retry delay.",
    },
    Setting {
        name: "MAX_CONTEXT_TOKENS",
        default: "model window",
        doc: "Cap on the tokens of context (files, diff, history) sent per call.",
    },
    Setting {
        name: "MAX_REPLY_CHARS",
        default: "48000",
        doc: "Cap on a whole MCP tool result, text and structured content together (at most 500000; also declared to Claude Code); past it the least severe findings are left out, then the answer is cut, saying so.",
    },
    Setting {
        name: "GEMINI_MCP_STORE",
        default: "auto",
        doc: "Thread store: `auto` (Redis if `REDIS_URL`, else embedded), `redis`, `embedded`, `memory`.",
    },
    Setting {
        name: "REDIS_URL",
        default: "—",
        doc: "Redis for threads shared across instances, e.g. `redis://127.0.0.1:6379/0`.",
    },
    Setting {
        name: "GEMINI_MCP_KEY_PREFIX",
        default: "gemini-mcp",
        doc: "Prefix of every Redis key, one per deployment.",
    },
    Setting {
        name: "GEMINI_MCP_STATE_DIR",
        default: "$XDG_STATE_HOME/gemini-mcp",
        doc: "Directory of the embedded thread store.",
    },
    Setting {
        name: "CONVERSATION_TIMEOUT_HOURS",
        default: "3",
        doc: "Thread lifetime after its last turn.",
    },
    Setting {
        name: "MAX_CONVERSATION_TURNS",
        default: "20",
        doc: "Turns (calls) per thread.",
    },
    Setting {
        name: "GEMINI_MCP_SHARE_THREADS_ACROSS_PROJECTS",
        default: "0",
        doc: "`1`: a thread started under other roots (`PROJECT_ROOT`) may be continued here; by default it is refused, naming its project.",
    },
    Setting {
        name: "DISABLED_TOOLS",
        default: "—",
        doc: "Comma-separated tools to hide, e.g. `thinkdeep,debug`.",
    },
    Setting {
        name: "GEMINI_MCP_SECRET_FILES",
        default: "—",
        doc: "Extra comma-separated globs (file name, or path below the root) of secret files: never read, in walks, requests and git changes.",
    },
    Setting {
        name: "GEMINI_MCP_INCLUDE",
        default: "—",
        doc: "Comma-separated globs; directory walks keep only matching files.",
    },
    Setting {
        name: "GEMINI_MCP_EXCLUDE",
        default: "—",
        doc: "Comma-separated globs skipped in directory walks.",
    },
    Setting {
        name: "GEMINI_MCP_HTTP_TOKEN",
        default: "—",
        doc: "Bearer token for the HTTP transport, required unless it listens on loopback; several (one per client) separated by commas. Or `GEMINI_MCP_HTTP_TOKEN_FILE`: a file with one per line.",
    },
    Setting {
        name: "GEMINI_MCP_HTTP_ALLOWED_HOSTS",
        default: "—",
        doc: "Public host names (or `host:port`) accepted in the `Host` header besides `localhost`, `127.0.0.1`, `::1`; `*` accepts any.",
    },
    Setting {
        name: "GEMINI_MCP_HTTP_ALLOWED_ORIGINS",
        default: "—",
        doc: "Browser origins (e.g. `https://app.example.com:443`) accepted besides loopback ones; requests without `Origin` pass; `*` accepts any.",
    },
    Setting {
        name: "GEMINI_MCP_HTTP_MAX_BODY_BYTES",
        default: "4194304",
        doc: "Largest HTTP request body; larger ones get 413.",
    },
    Setting {
        name: "GEMINI_MCP_HTTP_CLIENT_CONCURRENCY",
        default: "16",
        doc: "Tool calls in flight at once per client (per token, or per peer address without a token).",
    },
    Setting {
        name: "GEMINI_MCP_HTTP_MAX_SESSIONS_PER_CLIENT",
        default: "32",
        doc: "Live legacy (`Mcp-Session-Id`) sessions per client and instance; opening one more closes the client's least recently used.",
    },
    Setting {
        name: "GEMINI_MCP_RATE_LIMITS",
        default: "HTTP: `chat=10/min,analyze=5/min,thinkdeep=3/min,codereview=5/min,debug=5/min,precommit=3/min`; stdio: `off`",
        doc: "Per-tool rate limits per client and instance: `tool=N/unit` items (unit `s`, `min` or `h`), comma-separated, replacing the default; or `off`.",
    },
    Setting {
        name: "GEMINI_MCP_HTTP_SHUTDOWN_SECS",
        default: "30",
        doc: "On SIGTERM/SIGINT, how long calls in flight may take to finish before the server exits.",
    },
    Setting {
        name: "GEMINI_MCP_CONFIG",
        default: "—",
        doc: "A TOML file with any of these settings as keys; the environment wins.",
    },
];

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{name}: {message}")]
    Invalid { name: &'static str, message: String },
    #[error("GEMINI_MCP_CONFIG: cannot read {path}: {source}")]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("GEMINI_MCP_CONFIG: {path} is not valid TOML: {message}")]
    Toml { path: PathBuf, message: String },
}

fn invalid(name: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        name,
        message: message.into(),
    }
}

/// The raw settings: the TOML file's keys overlaid by the environment.
struct Source<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    file: BTreeMap<String, String>,
}

impl Source<'_> {
    fn get(&self, name: &str) -> Option<String> {
        (self.env)(name)
            .or_else(|| self.file.get(name).cloned())
            .filter(|v| !v.trim().is_empty())
    }

    fn parse<T: std::str::FromStr>(&self, name: &'static str, default: T) -> Result<T, ConfigError>
    where
        T::Err: fmt::Display,
    {
        match self.get(name) {
            None => Ok(default),
            Some(raw) => raw
                .trim()
                .parse()
                .map_err(|e| invalid(name, format!("`{raw}` is not valid: {e}"))),
        }
    }

    /// A switch: `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off` (unset: off).
    fn flag(&self, name: &'static str) -> Result<bool, ConfigError> {
        match self.get(name).map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(false),
            Some(v) if ["1", "true", "yes", "on"].contains(&v.as_str()) => Ok(true),
            Some(v) if ["0", "false", "no", "off"].contains(&v.as_str()) => Ok(false),
            Some(v) => Err(invalid(
                name,
                format!("`{v}` is not a switch; use 1 (on) or 0 (off)"),
            )),
        }
    }

    fn secs(&self, name: &'static str, default: u64) -> Result<Duration, ConfigError> {
        let v: f64 = self.parse(name, default as f64)?;
        if !(v.is_finite() && v > 0.0) {
            return Err(invalid(name, "must be a positive number of seconds"));
        }
        Ok(Duration::from_secs_f64(v))
    }

    fn list(&self, name: &str) -> Vec<String> {
        self.get(name)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn read_toml(path: &Path) -> Result<BTreeMap<String, String>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::File {
        path: path.to_owned(),
        source,
    })?;
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| ConfigError::Toml {
            path: path.to_owned(),
            message: e.message().to_string(),
        })?;
    let mut out = BTreeMap::new();
    for (key, value) in table {
        let text = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Array(items) => items
                .iter()
                .map(|i| match i {
                    toml::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(","),
            other => {
                return Err(ConfigError::Toml {
                    path: path.to_owned(),
                    message: format!(
                        "`{key}` must be a string, number, boolean or list, not {}",
                        other.type_str()
                    ),
                });
            }
        };
        if !SETTINGS.iter().any(|s| s.name == key) {
            return Err(ConfigError::Toml {
                path: path.to_owned(),
                message: format!("unknown setting `{key}` (see the README's configuration table)"),
            });
        }
        out.insert(key, text);
    }
    Ok(out)
}

impl Config {
    /// Reads the process environment. `cwd` is the default sandbox root.
    pub fn from_env() -> Result<Config, ConfigError> {
        let cwd = std::env::current_dir().map_err(|e| {
            invalid(
                "PROJECT_ROOT",
                format!("cannot read the working directory: {e}"),
            )
        })?;
        Config::load(&|k| std::env::var(k).ok(), &cwd)
    }

    /// Builds a configuration from any variable lookup (tests pass a map).
    pub fn load(env: &dyn Fn(&str) -> Option<String>, cwd: &Path) -> Result<Config, ConfigError> {
        let file = match env("GEMINI_MCP_CONFIG").filter(|p| !p.is_empty()) {
            Some(path) => read_toml(Path::new(&path))?,
            None => BTreeMap::new(),
        };
        let src = Source { env, file };

        let roots = match src.get("PROJECT_ROOT") {
            None => vec![canonical_root("PROJECT_ROOT", cwd)?],
            Some(list) => {
                let mut roots = Vec::new();
                for part in std::env::split_paths(&list).filter(|p| !p.as_os_str().is_empty()) {
                    let part = if part.is_relative() {
                        cwd.join(part)
                    } else {
                        part
                    };
                    roots.push(canonical_root("PROJECT_ROOT", &part)?);
                }
                if roots.is_empty() {
                    return Err(invalid("PROJECT_ROOT", "names no directory"));
                }
                roots
            }
        };

        let api_key = src
            .get("GEMINI_API_KEY")
            .or_else(|| env("GOOGLE_API_KEY").filter(|v| !v.trim().is_empty()))
            .map(|k| Secret::new(k.trim()));

        let base_url = src
            .get("GEMINI_BASE_URL")
            .unwrap_or_else(|| "https://generativelanguage.googleapis.com".into());
        let base_url = base_url.trim().trim_end_matches('/').to_string();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(invalid(
                "GEMINI_BASE_URL",
                format!("`{base_url}` must start with http:// or https://"),
            ));
        }
        if base_url.ends_with("/v1beta") {
            return Err(invalid(
                "GEMINI_BASE_URL",
                "leave out `/v1beta`: the server adds it",
            ));
        }

        let backend = match src.get("GEMINI_BACKEND").as_deref().map(str::trim) {
            None | Some("auto") => BackendChoice::Auto,
            Some("api") => BackendChoice::Api,
            Some("cli") => BackendChoice::Cli,
            Some(other) => {
                return Err(invalid(
                    "GEMINI_BACKEND",
                    format!("`{other}` is not one of api, cli, auto"),
                ));
            }
        };

        let store = match src.get("GEMINI_MCP_STORE").as_deref().map(str::trim) {
            None | Some("auto") => StoreChoice::Auto,
            Some("redis") => StoreChoice::Redis,
            Some("embedded") => StoreChoice::Embedded,
            Some("memory") => StoreChoice::Memory,
            Some(other) => {
                return Err(invalid(
                    "GEMINI_MCP_STORE",
                    format!("`{other}` is not one of auto, redis, embedded, memory"),
                ));
            }
        };
        let redis_url = src.get("REDIS_URL").map(|u| Secret::new(u.trim()));
        if store == StoreChoice::Redis && redis_url.is_none() {
            return Err(invalid(
                "REDIS_URL",
                "GEMINI_MCP_STORE=redis needs REDIS_URL (e.g. redis://127.0.0.1:6379/0)",
            ));
        }

        let state_dir = match src.get("GEMINI_MCP_STATE_DIR") {
            Some(dir) => cwd.join(dir),
            None => default_state_dir(env).ok_or_else(|| {
                invalid(
                    "GEMINI_MCP_STATE_DIR",
                    "no state or home directory is known; set GEMINI_MCP_STATE_DIR",
                )
            })?,
        };

        let max_context_tokens = match src.get("MAX_CONTEXT_TOKENS") {
            None => None,
            Some(raw) => match raw.trim().parse::<u64>() {
                Ok(n) if n >= 1_000 => Some(n),
                _ => {
                    return Err(invalid(
                        "MAX_CONTEXT_TOKENS",
                        format!("`{raw}` must be a whole number of tokens, at least 1000"),
                    ));
                }
            },
        };

        let max_turns: u32 = src.parse("MAX_CONVERSATION_TURNS", 20)?;
        if max_turns == 0 {
            return Err(invalid("MAX_CONVERSATION_TURNS", "must be at least 1"));
        }
        let ttl_hours: f64 = src.parse("CONVERSATION_TIMEOUT_HOURS", 3.0)?;
        if !(ttl_hours.is_finite() && ttl_hours > 0.0) {
            return Err(invalid(
                "CONVERSATION_TIMEOUT_HOURS",
                "must be a positive number of hours",
            ));
        }
        let max_attempts: u32 = src.parse("GEMINI_MAX_ATTEMPTS", 5)?;
        if max_attempts == 0 {
            return Err(invalid("GEMINI_MAX_ATTEMPTS", "must be at least 1"));
        }

        let share_threads_across_projects = src.flag("GEMINI_MCP_SHARE_THREADS_ACROSS_PROJECTS")?;
        let disabled_tools = src.list("DISABLED_TOOLS");
        for t in &disabled_tools {
            if !crate::tool::TOOL_NAMES.contains(&t.as_str()) {
                return Err(invalid(
                    "DISABLED_TOOLS",
                    format!(
                        "`{t}` is not a tool; tools are {}",
                        crate::tool::TOOL_NAMES.join(", ")
                    ),
                ));
            }
        }

        let http_tokens = match src.get("GEMINI_MCP_HTTP_TOKEN") {
            Some(t) => tokens("GEMINI_MCP_HTTP_TOKEN", &t, ',')?,
            None => match env("GEMINI_MCP_HTTP_TOKEN_FILE").filter(|p| !p.is_empty()) {
                Some(path) => {
                    let t = std::fs::read_to_string(&path).map_err(|e| {
                        invalid(
                            "GEMINI_MCP_HTTP_TOKEN_FILE",
                            format!("cannot read {path}: {e}"),
                        )
                    })?;
                    tokens("GEMINI_MCP_HTTP_TOKEN_FILE", &t, '\n')?
                }
                None => Vec::new(),
            },
        };

        let rate_limits = match src.get("GEMINI_MCP_RATE_LIMITS") {
            None => None,
            Some(raw) => Some(
                raw.parse::<RateLimits>()
                    .map_err(|e| invalid("GEMINI_MCP_RATE_LIMITS", e))?,
            ),
        };
        let any_or_list = |name: &str| {
            let list = src.list(name);
            if list.iter().any(|h| h == "*") {
                None
            } else {
                Some(list)
            }
        };
        let max_body_bytes: usize = src.parse("GEMINI_MCP_HTTP_MAX_BODY_BYTES", 4 * 1024 * 1024)?;
        if max_body_bytes < 1024 {
            return Err(invalid(
                "GEMINI_MCP_HTTP_MAX_BODY_BYTES",
                "must be at least 1024 bytes",
            ));
        }
        let client_concurrency: usize = src.parse("GEMINI_MCP_HTTP_CLIENT_CONCURRENCY", 16)?;
        if client_concurrency == 0 {
            return Err(invalid(
                "GEMINI_MCP_HTTP_CLIENT_CONCURRENCY",
                "must be at least 1",
            ));
        }
        let max_sessions_per_client: usize =
            src.parse("GEMINI_MCP_HTTP_MAX_SESSIONS_PER_CLIENT", 32)?;
        if max_sessions_per_client == 0 {
            return Err(invalid(
                "GEMINI_MCP_HTTP_MAX_SESSIONS_PER_CLIENT",
                "must be at least 1",
            ));
        }
        let http = HttpSettings {
            allowed_hosts: any_or_list("GEMINI_MCP_HTTP_ALLOWED_HOSTS"),
            allowed_origins: any_or_list("GEMINI_MCP_HTTP_ALLOWED_ORIGINS"),
            max_body_bytes,
            client_concurrency,
            max_sessions_per_client,
            shutdown_grace: src.secs("GEMINI_MCP_HTTP_SHUTDOWN_SECS", 30)?,
        };

        Ok(Config {
            roots,
            api_key,
            base_url,
            backend,
            search_path: env("PATH"),
            gemini_cli: PathBuf::from(
                src.get("GEMINI_CLI_PATH")
                    .unwrap_or_else(|| "gemini".into()),
            ),
            default_model: src
                .get("GEMINI_MODEL")
                .unwrap_or_else(|| "pro".into())
                .trim()
                .to_string(),
            fallback_model: src
                .get("GEMINI_FALLBACK_MODEL")
                .unwrap_or_else(|| "flash".into())
                .trim()
                .to_string(),
            call_timeout: src.secs("GEMINI_TIMEOUT_SECS", 540)?,
            connect_timeout: src.secs("GEMINI_CONNECT_TIMEOUT_SECS", 10)?,
            idle_timeout: src.secs("GEMINI_IDLE_TIMEOUT_SECS", 180)?,
            max_attempts,
            retry_initial_delay: Duration::from_millis(src.parse("GEMINI_RETRY_INITIAL_MS", 2000)?),
            retry_max_delay: Duration::from_millis(src.parse("GEMINI_RETRY_MAX_MS", 30_000)?),
            max_context_tokens,
            max_reply_chars: src.parse("MAX_REPLY_CHARS", 48_000)?,
            store,
            redis_url,
            key_prefix: src
                .get("GEMINI_MCP_KEY_PREFIX")
                .unwrap_or_else(|| "gemini-mcp".into())
                .trim()
                .to_string(),
            state_dir,
            thread_ttl: Duration::from_secs_f64(ttl_hours * 3600.0),
            max_turns,
            share_threads_across_projects,
            disabled_tools,
            secret_globs: src.list("GEMINI_MCP_SECRET_FILES"),
            include_globs: src.list("GEMINI_MCP_INCLUDE"),
            exclude_globs: src.list("GEMINI_MCP_EXCLUDE"),
            http_tokens,
            rate_limits,
            http,
        })
    }

    /// A configuration for tests: everything default, sandboxed to `root`, memory store.
    pub fn for_tests(root: &Path) -> Config {
        let root = root.to_string_lossy().into_owned();
        let mut c = Config::load(
            &|k| match k {
                "PROJECT_ROOT" => Some(root.clone()),
                "GEMINI_MCP_STORE" => Some("memory".into()),
                "GEMINI_MCP_STATE_DIR" => Some(std::env::temp_dir().to_string_lossy().into_owned()),
                _ => None,
            },
            Path::new("/"),
        )
        .expect("test configuration is valid");
        c.retry_initial_delay = Duration::from_millis(10);
        c.retry_max_delay = Duration::from_millis(50);
        c
    }
}

/// Splits a token setting on `sep` (blank entries ignored). A token must be printable ASCII
/// without spaces (it travels in an HTTP header); the error never shows the value.
fn tokens(name: &'static str, raw: &str, sep: char) -> Result<Vec<Secret>, ConfigError> {
    let mut out = Vec::new();
    for (i, t) in raw
        .split(sep)
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .enumerate()
    {
        if !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(invalid(
                name,
                format!(
                    "token #{} holds a space or a non-ASCII character; use printable ASCII (e.g. `openssl rand -hex 32`)",
                    i + 1
                ),
            ));
        }
        out.push(Secret::new(t));
    }
    Ok(out)
}

fn canonical_root(name: &'static str, path: &Path) -> Result<PathBuf, ConfigError> {
    let canon = std::fs::canonicalize(path)
        .map_err(|e| invalid(name, format!("{}: {e}", path.display())))?;
    if !canon.is_dir() {
        return Err(invalid(
            name,
            format!("{} is not a directory", canon.display()),
        ));
    }
    if canon.parent().is_none() {
        return Err(invalid(
            name,
            "the filesystem root `/` cannot be a project root; name the project's directory",
        ));
    }
    Ok(canon)
}

fn default_state_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(x) = env("XDG_STATE_HOME").filter(|v| v.starts_with('/')) {
        return Some(PathBuf::from(x).join("gemini-mcp"));
    }
    if let Some(home) = env("HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(home).join(".local/state/gemini-mcp"));
    }
    dirs::state_dir().map(|d| d.join("gemini-mcp"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn load(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut map = map;
        map.entry("HOME".into())
            .or_insert_with(|| dir.path().to_string_lossy().into_owned());
        Config::load(&|k| map.get(k).cloned(), dir.path())
    }

    #[test]
    fn defaults() {
        let c = load(&[]).unwrap();
        assert_eq!(c.default_model, "pro");
        assert_eq!(c.max_turns, 20);
        assert_eq!(c.thread_ttl, Duration::from_secs(3 * 3600));
        assert_eq!(c.base_url, "https://generativelanguage.googleapis.com");
        assert_eq!(c.backend, BackendChoice::Auto);
        assert!(c.api_key.is_none());
        assert_eq!(c.roots.len(), 1);
    }

    #[test]
    fn bad_values_name_the_setting() {
        for (vars, name) in [
            (vec![("GEMINI_BACKEND", "rest")], "GEMINI_BACKEND"),
            (
                vec![("MAX_CONVERSATION_TURNS", "many")],
                "MAX_CONVERSATION_TURNS",
            ),
            (vec![("MAX_CONTEXT_TOKENS", "12")], "MAX_CONTEXT_TOKENS"),
            (
                vec![("GEMINI_BASE_URL", "localhost:8080")],
                "GEMINI_BASE_URL",
            ),
            (
                vec![("GEMINI_BASE_URL", "http://x/v1beta")],
                "GEMINI_BASE_URL",
            ),
            (
                vec![("PROJECT_ROOT", "/definitely/not/here")],
                "PROJECT_ROOT",
            ),
            (vec![("PROJECT_ROOT", "/")], "PROJECT_ROOT"),
            (vec![("GEMINI_MCP_STORE", "redis")], "REDIS_URL"),
            (vec![("DISABLED_TOOLS", "chat,nope")], "DISABLED_TOOLS"),
            (vec![("GEMINI_TIMEOUT_SECS", "0")], "GEMINI_TIMEOUT_SECS"),
            (
                vec![("GEMINI_MCP_RATE_LIMITS", "chat=0/min")],
                "GEMINI_MCP_RATE_LIMITS",
            ),
            (
                vec![("GEMINI_MCP_HTTP_CLIENT_CONCURRENCY", "0")],
                "GEMINI_MCP_HTTP_CLIENT_CONCURRENCY",
            ),
            (
                vec![("GEMINI_MCP_HTTP_MAX_BODY_BYTES", "10")],
                "GEMINI_MCP_HTTP_MAX_BODY_BYTES",
            ),
            (
                vec![("GEMINI_MCP_HTTP_SHUTDOWN_SECS", "-1")],
                "GEMINI_MCP_HTTP_SHUTDOWN_SECS",
            ),
        ] {
            let err = load(&vars).unwrap_err().to_string();
            assert!(err.starts_with(name), "{vars:?}: {err}");
        }
    }

    #[test]
    fn secrets_never_print() {
        let c = load(&[
            ("GEMINI_API_KEY", "AIzaSyTESTKEY-never-printed"),
            ("REDIS_URL", "redis://:pw@h/0"),
        ])
        .unwrap();
        let dump = format!("{c:?}");
        assert!(!dump.contains("AIzaSyTESTKEY"), "{dump}");
        assert!(!dump.contains(":pw@"), "{dump}");
        assert_eq!(c.api_key.unwrap().expose(), "AIzaSyTESTKEY-never-printed");
    }

    #[test]
    fn http_tokens_one_per_client_from_env_or_file() {
        let c = load(&[("GEMINI_MCP_HTTP_TOKEN", " alpha , beta,")]).unwrap();
        let got: Vec<&str> = c.http_tokens.iter().map(Secret::expose).collect();
        assert_eq!(got, ["alpha", "beta"]);

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tokens");
        std::fs::write(&file, "first-token\n\nsecond-token\n").unwrap();
        let f = file.to_string_lossy().into_owned();
        let c = load(&[("GEMINI_MCP_HTTP_TOKEN_FILE", &f)]).unwrap();
        assert_eq!(c.http_tokens.len(), 2);
        assert_eq!(c.http_tokens[1].expose(), "second-token");

        let err = load(&[("GEMINI_MCP_HTTP_TOKEN", "ok,has space-SECRETPART")])
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("GEMINI_MCP_HTTP_TOKEN"), "{err}");
        assert!(err.contains("token #2"), "{err}");
        assert!(!err.contains("SECRETPART"), "{err}");
        assert!(!format!("{c:?}").contains("second-token"));
    }

    #[test]
    fn http_settings_and_rate_limits() {
        let c = load(&[]).unwrap();
        assert_eq!(c.rate_limits, None);
        assert_eq!(c.http.max_body_bytes, 4 * 1024 * 1024);
        assert_eq!(c.http.client_concurrency, 16);
        assert_eq!(c.http.shutdown_grace, Duration::from_secs(30));
        assert_eq!(c.http.allowed_hosts, Some(vec![]));
        let c = load(&[
            ("GEMINI_MCP_RATE_LIMITS", "off"),
            (
                "GEMINI_MCP_HTTP_ALLOWED_HOSTS",
                "mcp.example.com, mcp.internal:8080",
            ),
            ("GEMINI_MCP_HTTP_ALLOWED_ORIGINS", "*"),
        ])
        .unwrap();
        assert!(c.rate_limits.unwrap().is_off());
        assert_eq!(
            c.http.allowed_hosts,
            Some(vec!["mcp.example.com".into(), "mcp.internal:8080".into()])
        );
        assert_eq!(c.http.allowed_origins, None);
    }

    #[test]
    fn google_api_key_is_accepted() {
        let c = load(&[("GOOGLE_API_KEY", "k2")]).unwrap();
        assert_eq!(c.api_key.unwrap().expose(), "k2");
    }

    #[test]
    fn readme_configuration_table_matches_the_settings() {
        let readme = include_str!("../README.md");
        for s in SETTINGS {
            let row = format!("| `{}` | {} | {} |", s.name, s.default, s.doc);
            assert!(readme.contains(&row), "README.md lacks the row:\n{row}");
        }
        let section = readme
            .split("## Configuration")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .unwrap_or("");
        let rows = section.lines().filter(|l| l.starts_with("| `")).count();
        assert_eq!(
            rows,
            SETTINGS.len(),
            "README.md's configuration table has rows for unknown settings"
        );
    }

    #[test]
    fn toml_file_is_overridden_by_env() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(
            &file,
            "GEMINI_MODEL = \"flash\"\nMAX_CONVERSATION_TURNS = 7\nDISABLED_TOOLS = [\"debug\"]\n",
        )
        .unwrap();
        let f = file.to_string_lossy().into_owned();
        let c = load(&[("GEMINI_MCP_CONFIG", &f), ("GEMINI_MODEL", "pro")]).unwrap();
        assert_eq!(c.default_model, "pro");
        assert_eq!(c.max_turns, 7);
        assert_eq!(c.disabled_tools, vec!["debug"]);

        std::fs::write(&file, "GEMINI_MODLE = \"flash\"\n").unwrap();
        let err = load(&[("GEMINI_MCP_CONFIG", &f)]).unwrap_err().to_string();
        assert!(err.contains("unknown setting `GEMINI_MODLE`"), "{err}");
    }
}

//! Configuration: read once, at start, from the environment and an optional TOML file, into one
//! `Config` that is injected everywhere. No handler reads the environment or the current directory.
//!
//! Every setting has one name, used both as the environment variable and as the key in the TOML
//! file (`GEMINI_MCP_CONFIG=/path/to/config.toml`); the environment wins over the file. The table
//! in [`SETTINGS`] holds each setting once — name, default, description and how it is read — and
//! is the single source of docs/settings.md's reference (a test keeps the two in step, and holds
//! the loader to reading nothing the table does not name). Each row writes into the settings of
//! the part that uses it, which `Config` holds as they are: nothing is copied field by field.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::gemini::BackendChoice;
use crate::admission::RateLimits;
pub use crate::secret::Secret;
pub use crate::store::StoreChoice;

mod settings;
pub(crate) use settings::Var;
pub use settings::{Category, GROUPS, Group, SETTINGS, Setting, category_of, reference};

/// The configuration, by parts: each part's settings as its rows of [`SETTINGS`] read them
/// (ripgrep's `LowArgs`). A part gets its own through the accessor of the same name, which adds
/// what it shares with another part ([`Config::gemini`]).
#[derive(Debug, Clone)]
pub struct Config {
    /// The sandbox and the walks (`PROJECT_ROOT`: every file the server reads lies inside one of
    /// the canonical roots).
    pub collector: crate::collector::Settings,
    /// The Gemini client, as its rows read it; [`Config::gemini`] adds the state directory, the
    /// working directory and the investigation's result cap, which other parts own.
    pub gemini: crate::gemini::Settings,
    /// The thread store.
    pub threads: crate::store::Settings,
    /// The daily and per-call caps.
    pub caps: crate::caps::Caps,
    /// The audit log, when `GEMINI_MCP_AUDIT_LOG` names one.
    pub audit: Option<crate::audit::Settings>,
    /// The limits of an investigation (`investigate`, `explore: true`).
    pub explore: ExploreSettings,
    /// What a call may send and continue.
    pub calls: CallSettings,
    /// The tools the server offers and their replies.
    pub tools: ToolSettings,
    /// The Streamable HTTP transport.
    pub http: HttpSettings,
}

/// The limits of an investigation.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExploreSettings {
    /// The cap on `max_steps`.
    pub max_steps: u32,
    /// Tokens of tool results, all steps together.
    pub token_budget: u64,
    /// Longest single tool result, in characters.
    pub result_chars: usize,
    /// Time after which no new step starts.
    pub deadline: Duration,
}

/// What one call may send and which threads it may continue (the pipeline's).
#[derive(Debug, Clone)]
pub struct CallSettings {
    /// Optional cap on the tokens of context sent per call.
    pub max_context_tokens: Option<u64>,
    /// A thread started under other roots may be continued here.
    pub share_threads_across_projects: bool,
    /// Explicit context caching of continued threads (`pipeline::cache`).
    pub context_cache: bool,
    /// The longest a context cache is kept at Google (bounded by the thread's life).
    pub context_cache_ttl: std::time::Duration,
    /// The operator's review rules (`GEMINI_MCP_REVIEW_RULES`), read at each review.
    pub review_rules: Option<PathBuf>,
    /// The user's review rules file, read at each review when it exists.
    pub user_rules: Option<PathBuf>,
    /// The models `models: ["default"]` asks (`GEMINI_MCP_CONSENSUS_MODELS`), checked at start.
    pub consensus_models: Vec<crate::seats::Seat>,
}

impl Default for CallSettings {
    fn default() -> Self {
        CallSettings {
            max_context_tokens: None,
            share_threads_across_projects: false,
            context_cache: true,
            context_cache_ttl: std::time::Duration::from_secs(600),
            review_rules: None,
            user_rules: None,
            consensus_models: vec![
                crate::seats::Seat {
                    model: "pro".into(),
                    stance: None,
                },
                crate::seats::Seat {
                    model: "flash".into(),
                    stance: None,
                },
            ],
        }
    }
}

/// The tools the server offers, under which names, how long a reply and how often (the
/// server's).
#[derive(Debug, Clone, Default)]
pub struct ToolSettings {
    /// Tools hidden (`DISABLED_TOOLS`), as written: checked against the tools' table by
    /// `tools::spec::check_settings`.
    pub disabled: Vec<String>,
    /// Compatibility profiles: tools with the seed servers' names and shapes.
    pub compat: Vec<Compat>,
    /// Cap on a whole MCP tool result, text and structured content together, in characters
    /// (clients fail, truncate or spill long tool output). The command line prints whole replies.
    pub max_reply_chars: usize,
    /// Per-tool rate limits when set explicitly; `None`: the transport's default (HTTP: the
    /// built-in table, stdio: off).
    pub rate_limits: Option<RateLimits>,
}

/// A compatibility profile (`GEMINI_MCP_COMPAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compat {
    /// The Gemini CLI wrapper's `chat` (`systemPrompt`, `cwd`) and `chat-reply` (`sessionId`).
    CliWrapper,
    /// The ACP bridge's `gemini`, `list_models`, `list_sessions` and `reset_session`.
    AcpBridge,
}

/// Settings of the Streamable HTTP transport only.
#[derive(Debug, Clone, Default)]
pub struct HttpSettings {
    /// Bearer tokens the HTTP transport accepts, one per client (empty: none configured).
    pub tokens: Vec<Secret>,
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
    /// Tokens for `/metrics`; empty: the clients' tokens.
    pub metrics_tokens: Vec<Secret>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{name}: {message}")]
    Invalid { name: &'static str, message: String },
    /// A file a setting names cannot be read (it names the setting).
    #[error(transparent)]
    File(#[from] crate::setting_file::FileError),
    #[error("GEMINI_MCP_CONFIG: {path} is not valid TOML: {message}")]
    Toml { path: PathBuf, message: String },
    /// A key of the TOML file that names no setting (a misspelling, usually).
    #[error(
        "GEMINI_MCP_CONFIG: unknown setting `{key}` in {path}{}; the settings are the README's configuration table",
        .nearest.map(|n| format!(" (did you mean `{n}`?)")).unwrap_or_default()
    )]
    UnknownSetting {
        key: String,
        path: PathBuf,
        nearest: Option<&'static str>,
    },
    /// A value compiled from settings (a glob) is malformed; the message names the setting.
    #[error("{0}")]
    Derived(String),
}

/// `raw` as a service tier, as `GEMINI_SERVICE_TIER` and `--tier` take it (any case), or what
/// is wrong with it.
pub fn service_tier(raw: &str) -> Result<crate::gemini::ServiceTier, String> {
    crate::gemini::ServiceTier::parse(raw).ok_or_else(|| {
        let [a, b, c] = crate::gemini::ServiceTier::ALL.map(|t| t.as_str());
        format!("`{}` is not a tier; use {a}, {b} or {c}", raw.trim())
    })
}

pub(crate) fn invalid(name: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        name,
        message: message.into(),
    }
}

/// The raw settings: the TOML file's keys overlaid by the environment. Records every name read,
/// so a test can hold the loader to the table.
pub(crate) struct Source<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    file: BTreeMap<String, String>,
    /// The working directory: the default root, and what relative paths are relative to.
    pub(crate) cwd: &'a Path,
    read: std::cell::RefCell<std::collections::BTreeSet<String>>,
}

impl<'a> Source<'a> {
    fn new(
        env: &'a dyn Fn(&str) -> Option<String>,
        file: BTreeMap<String, String>,
        cwd: &'a Path,
    ) -> Source<'a> {
        Source {
            env,
            file,
            cwd,
            read: Default::default(),
        }
    }

    /// A setting's value (the environment, else the file); blank is unset.
    pub(crate) fn get(&self, name: &str) -> Option<String> {
        self.read.borrow_mut().insert(name.to_string());
        (self.env)(name)
            .or_else(|| self.file.get(name).cloned())
            .filter(|v| !v.trim().is_empty())
    }

    /// A variable of the environment alone (the file cannot set it): `HOME`, `PATH`, a
    /// documented alias.
    pub(crate) fn os(&self, name: &str) -> Option<String> {
        self.read.borrow_mut().insert(name.to_string());
        (self.env)(name).filter(|v| !v.trim().is_empty())
    }
}

fn read_toml(path: &Path) -> Result<BTreeMap<String, String>, ConfigError> {
    let text = crate::setting_file::read_text("GEMINI_MCP_CONFIG", path)?;
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
            return Err(ConfigError::UnknownSetting {
                nearest: nearest_setting(&key),
                key,
                path: path.to_owned(),
            });
        }
        out.insert(key, text);
    }
    Ok(out)
}

/// The setting whose name is closest to `key` (case aside), when it is close enough to be a
/// misspelling of it: at most a third of its letters differ.
fn nearest_setting(key: &str) -> Option<&'static str> {
    let key = key.to_ascii_uppercase();
    SETTINGS
        .iter()
        .map(|s| (edit_distance(&key, s.name), s.name))
        .min()
        .filter(|(d, name)| *d <= name.len() / 3)
        .map(|(_, name)| name)
}

/// Levenshtein distance over bytes (setting names are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.bytes().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
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

    /// Builds a configuration from any variable lookup (tests pass a map): the TOML file named
    /// by `GEMINI_MCP_CONFIG` overlaid by the variables, read by each item of [`SETTINGS`] in
    /// turn, then the values derived from several settings checked (globs compiled).
    pub fn load(env: &dyn Fn(&str) -> Option<String>, cwd: &Path) -> Result<Config, ConfigError> {
        let file = match env("GEMINI_MCP_CONFIG").filter(|p| !p.is_empty()) {
            Some(path) => read_toml(Path::new(&path))?,
            None => BTreeMap::new(),
        };
        let src = Source::new(env, file, cwd);
        Config::read(&src)
    }

    fn read(src: &Source<'_>) -> Result<Config, ConfigError> {
        let mut config = Config::unset();
        for setting in SETTINGS {
            setting.read(src, &mut config)?;
        }
        // Not settings: where a bare GEMINI_CLI_PATH is looked up, and under which names; the
        // Gemini CLI's own home, where it records its sessions (removed after each call).
        config.gemini.search_path = src.os("PATH");
        config.gemini.search_exts = src.os("PATHEXT");
        config.gemini.cli_home = src
            .os("GEMINI_CLI_HOME")
            .or_else(|| src.os(if cfg!(windows) { "USERPROFILE" } else { "HOME" }))
            .map(PathBuf::from);
        // Compiled here so that `doctor` reports a bad glob, not `serve` when it starts.
        config.collector.check().map_err(|e| match e {
            crate::collector::CollectError::Config(message) => ConfigError::Derived(message),
            other => ConfigError::Derived(other.to_string()),
        })?;
        Ok(config)
    }

    /// Every part at its neutral value, before the settings are read (each row sets its own).
    fn unset() -> Config {
        Config {
            collector: Default::default(),
            gemini: Default::default(),
            threads: Default::default(),
            caps: Default::default(),
            audit: None,
            explore: Default::default(),
            calls: Default::default(),
            tools: Default::default(),
            http: Default::default(),
        }
    }

    /// The Gemini client's settings, with what it shares with other parts: the state directory
    /// (the thread store's), where the Gemini CLI runs (the first root), and the longest result
    /// of an agent's project tool (the investigation's).
    pub fn gemini(&self) -> crate::gemini::Settings {
        crate::gemini::Settings {
            state_dir: self.threads.state_dir.clone(),
            workdir: self.roots().first().cloned().unwrap_or_else(|| "/".into()),
            explore_result_chars: self.explore.result_chars,
            ..self.gemini.clone()
        }
    }

    /// The thread store's settings.
    pub fn threads(&self) -> crate::store::Settings {
        self.threads.clone()
    }

    /// The audit log's settings, when there is one.
    pub fn audit(&self) -> Option<crate::audit::Settings> {
        self.audit.clone()
    }

    /// The collector's settings.
    pub fn collector(&self) -> crate::collector::Settings {
        self.collector.clone()
    }

    /// The sandbox's canonical roots.
    pub fn roots(&self) -> &[PathBuf] {
        &self.collector.roots
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
        c.gemini.retry_initial_delay = Duration::from_millis(10);
        c.gemini.retry_max_delay = Duration::from_millis(50);
        c
    }
}

/// Splits a token setting on `sep` (blank entries ignored). A token must be printable ASCII
/// without spaces (it travels in an HTTP header); the error never shows the value.
pub(crate) fn tokens(name: &'static str, raw: &str, sep: char) -> Result<Vec<Secret>, ConfigError> {
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

pub(crate) fn canonical_root(name: &'static str, path: &Path) -> Result<PathBuf, ConfigError> {
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

pub(crate) fn default_state_dir(src: &Var<'_>) -> Option<PathBuf> {
    state_dir_of(cfg!(windows), &|name| src.os(name))
}

/// The state directory the environment names: on Windows `%LOCALAPPDATA%\gemini-mcp` (the
/// user's own, not roamed: a database belongs to one machine), elsewhere the XDG state home.
fn state_dir_of(windows: bool, env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if windows {
        return env("LOCALAPPDATA")
            .map(PathBuf::from)
            .filter(|d| d.is_absolute() || looks_like_a_windows_absolute_path(d))
            .or_else(dirs::data_local_dir)
            .map(|d| d.join("gemini-mcp"));
    }
    if let Some(x) = env("XDG_STATE_HOME").filter(|v| v.starts_with('/')) {
        return Some(PathBuf::from(x).join("gemini-mcp"));
    }
    if let Some(home) = env("HOME") {
        return Some(PathBuf::from(home).join(".local/state/gemini-mcp"));
    }
    dirs::state_dir().map(|d| d.join("gemini-mcp"))
}

/// `C:\...` or `\\server\...`, also where the platform's `Path` does not parse it (the tests of
/// the Windows choice run everywhere).
fn looks_like_a_windows_absolute_path(p: &Path) -> bool {
    let s = p.to_string_lossy();
    let b = s.as_bytes();
    (b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && matches!(b[2], b'\\' | b'/'))
        || s.starts_with("\\\\")
}

#[cfg(test)]
mod tests;

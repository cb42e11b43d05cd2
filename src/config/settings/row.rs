//! A row of the settings' table and what its `read` is handed: the types every category's file
//! writes its rows with, apart from the table they make up (`mod.rs`), so the category files and
//! the table point one way.

use std::fmt;
use std::time::Duration;

use super::super::{
    CallSettings, Config, ConfigError, ExploreSettings, HttpSettings, Source, ToolSettings,
};

/// One setting: a row of the table.
#[derive(Clone, Copy)]
pub struct Setting {
    pub name: &'static str,
    /// The default, as docs/settings.md shows it: a value read as if it were set to it, `—`
    /// (unset), or, when `derived`, what it is worked out from.
    pub default: &'static str,
    /// The default is worked out when the setting is unset (from the working directory, the
    /// model, the clock…), and `default` says from what.
    pub derived: bool,
    pub doc: &'static str,
    /// Other environment variables this setting reads (an alias, a file variant, the OS's
    /// defaults), each named in `doc` or implied by the default.
    pub also_reads: &'static [&'static str],
    /// Reads the setting into its part's settings, or says what is wrong with it.
    pub(crate) read: Read,
}

/// What most rows leave as it is: no other variable read, a default that is a value (or `—`).
/// A row starts from it with `..ROW`.
pub(super) const ROW: Setting = Setting {
    name: "",
    default: "—",
    derived: false,
    doc: "",
    also_reads: &[],
    read: Read::First,
};

/// A row's reading of its value into the settings of part `P`.
pub(crate) type Reader<P> = fn(&Var<'_>, &mut P) -> Result<(), ConfigError>;

/// The part a row writes into, and how: a row is handed its own part's settings, and nothing
/// else of the configuration.
#[derive(Clone, Copy)]
pub(crate) enum Read {
    /// The sandbox and the walks (`collector`).
    Collector(Reader<crate::collector::Settings>),
    /// The Gemini client (`gemini`): backend, API, Vertex AI, the CLI, models, retries, prices.
    Gemini(Reader<crate::gemini::Settings>),
    /// The thread store (`store`).
    Threads(Reader<crate::store::Settings>),
    /// The daily and per-call caps (`caps`).
    Caps(Reader<crate::caps::Caps>),
    /// The audit log (`audit`), when there is one.
    Audit(Reader<Option<crate::audit::Settings>>),
    /// The limits of an investigation.
    Explore(Reader<ExploreSettings>),
    /// What a call may send and continue (the pipeline).
    Calls(Reader<CallSettings>),
    /// The tools the server offers and their replies (the server).
    Tools(Reader<ToolSettings>),
    /// The HTTP transport.
    Http(Reader<HttpSettings>),
    /// Read before the others, by `Config::load` (`GEMINI_MCP_CONFIG`).
    First,
}

impl Setting {
    /// Reads this setting from `src` into its part of `config`.
    pub(crate) fn read(&self, src: &Source<'_>, config: &mut Config) -> Result<(), ConfigError> {
        let var = Var { setting: self, src };
        match self.read {
            Read::Collector(read) => read(&var, &mut config.collector),
            Read::Gemini(read) => read(&var, &mut config.gemini),
            Read::Threads(read) => read(&var, &mut config.threads),
            Read::Caps(read) => read(&var, &mut config.caps),
            Read::Audit(read) => read(&var, &mut config.audit),
            Read::Explore(read) => read(&var, &mut config.explore),
            Read::Calls(read) => read(&var, &mut config.calls),
            Read::Tools(read) => read(&var, &mut config.tools),
            Read::Http(read) => read(&var, &mut config.http),
            Read::First => Ok(()),
        }
    }

    /// The default as a value the setting takes: `None` when it is unset (`—`) or worked out.
    pub fn default_value(&self) -> Option<&'static str> {
        (!self.derived && self.default != "—").then_some(self.default)
    }
}

/// What a group of settings is about: docs/settings.md gives each its own table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    Files,
    Gemini,
    VertexAi,
    Calls,
    GeminiCli,
    Investigations,
    Spending,
    Audit,
    Threads,
    Tools,
    Http,
    ConfigFile,
}

impl Category {
    /// The heading of the category's table in docs/settings.md.
    pub fn title(self) -> &'static str {
        match self {
            Category::Files => "Files",
            Category::Gemini => "Gemini: backend and API",
            Category::VertexAi => "Vertex AI",
            Category::Calls => "Models, deadlines and retries",
            Category::GeminiCli => "The Gemini CLI",
            Category::Investigations => "Investigations",
            Category::Spending => "Costs and caps",
            Category::Audit => "The audit log",
            Category::Threads => "Threads and their store",
            Category::Tools => "Tools and replies",
            Category::Http => "The HTTP transport",
            Category::ConfigFile => "The configuration file",
        }
    }
}

/// The rows of one category, in the order they are read (a row may check one read before it).
pub struct Group {
    pub category: Category,
    pub rows: &'static [Setting],
}

/// One setting as its row's `read` sees it: its value, its default, and errors that name it.
/// Each row is handed its own, so none writes its name or its default twice.
pub(crate) struct Var<'a> {
    setting: &'a Setting,
    src: &'a Source<'a>,
}

impl<'a> Var<'a> {
    /// The setting's name.
    pub(crate) fn name(&self) -> &'static str {
        self.setting.name
    }

    /// The value set (the environment, else the file); blank is unset. Not the default.
    pub(crate) fn get(&self) -> Option<String> {
        self.src.get(self.setting.name)
    }

    /// The value set, else the default when it is a value.
    pub(crate) fn value(&self) -> Option<String> {
        self.get()
            .or_else(|| self.setting.default_value().map(String::from))
    }

    /// The value from the environment alone, for a setting the file cannot set (another program
    /// reads it from the environment too).
    pub(crate) fn env(&self) -> Option<String> {
        self.src.os(self.setting.name)
    }

    /// Another variable of the environment this setting reads (its `also_reads`).
    pub(crate) fn os(&self, name: &str) -> Option<String> {
        self.src.os(name)
    }

    /// The working directory: the default root, and what relative paths are relative to.
    pub(crate) fn cwd(&self) -> &'a std::path::Path {
        self.src.cwd
    }

    /// The setting is wrong: `message` says how.
    pub(crate) fn invalid(&self, message: impl Into<String>) -> ConfigError {
        super::super::invalid(self.setting.name, message)
    }

    /// The value (or the default) parsed.
    pub(crate) fn parse<T: std::str::FromStr>(&self) -> Result<T, ConfigError>
    where
        T::Err: fmt::Display,
    {
        self.optional()?
            .ok_or_else(|| self.invalid("is unset and has no default"))
    }

    /// The value (or the default) parsed; `None` when unset without a default (`—`).
    pub(crate) fn optional<T: std::str::FromStr>(&self) -> Result<Option<T>, ConfigError>
    where
        T::Err: fmt::Display,
    {
        match self.value() {
            None => Ok(None),
            Some(raw) => raw
                .trim()
                .parse()
                .map(Some)
                .map_err(|e| self.invalid(format!("`{raw}` is not valid: {e}"))),
        }
    }

    /// A switch: `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off` (unset: the default).
    pub(crate) fn flag(&self) -> Result<bool, ConfigError> {
        match self.value().map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(false),
            Some(v) if ["1", "true", "yes", "on"].contains(&v.as_str()) => Ok(true),
            Some(v) if ["0", "false", "no", "off"].contains(&v.as_str()) => Ok(false),
            Some(v) => Err(self.invalid(format!("`{v}` is not a switch; use 1 (on) or 0 (off)"))),
        }
    }

    /// A positive number (of seconds, hours, megabytes: `unit`), or the default.
    pub(crate) fn positive(&self, unit: &str) -> Result<f64, ConfigError> {
        let v: f64 = self.parse()?;
        if !(v.is_finite() && v > 0.0) {
            return Err(self.invalid(format!("must be a positive number of {unit}")));
        }
        Ok(v)
    }

    /// A positive number of seconds, or the default.
    pub(crate) fn secs(&self) -> Result<Duration, ConfigError> {
        self.positive("seconds").map(Duration::from_secs_f64)
    }

    /// A whole number at least `min` (of `unit`, e.g. ` bytes`), or the default.
    pub(crate) fn at_least<T>(&self, min: T, unit: &str) -> Result<T, ConfigError>
    where
        T: std::str::FromStr + PartialOrd + fmt::Display,
        T::Err: fmt::Display,
    {
        let v: T = self.parse()?;
        if v < min {
            return Err(self.invalid(format!("must be at least {min}{unit}")));
        }
        Ok(v)
    }

    /// A comma-separated list (blank items dropped); unset: empty.
    pub(crate) fn list(&self) -> Vec<String> {
        self.value()
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

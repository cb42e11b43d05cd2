//! The tools, one row each: every fact about a tool that is not its parameters or its plan. The
//! MCP router (`server/tools.rs`), the server's instructions, the command line's subcommands, the
//! gate's default rate limits and the pipeline (system prompt, temperature) read them here, so a
//! tool's name is matched in one place ([`Tool::spec`]); mini-redis's `cmd/mod.rs` is the model.
//!
//! The parts below `tools` (`config`, `admission`) do not know the tools: the configuration keeps the
//! tool names it is given as written, and [`check_settings`] checks them against this table.

use std::num::NonZeroU32;

use crate::config::{Config, ConfigError};
use crate::gemini::ThinkingMode;
use crate::admission::{Per, Rate, RateLimits};

/// The tools that ask Gemini, as a closed type, in the order of [`SPECS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    CodeReview,
    Precommit,
    Debug,
    Analyze,
    ThinkDeep,
    Investigate,
    Chat,
    /// Listed and run only with `GEMINI_MCP_DEEP_RESEARCH=1`.
    Research,
}

/// What a tool's reply carries, hence its `outputSchema`.
pub use crate::reply::ReplyKind;

/// One tool's facts. Every tool is read-only; those of this table ask Gemini, so they reach out
/// of the machine (MCP's open-world hint).
#[derive(Debug)]
pub struct Spec {
    pub tool: Tool,
    /// The MCP tool name, which is also the subcommand's.
    pub name: &'static str,
    /// The title hosts show (MCP annotations).
    pub title: &'static str,
    /// The description in `tools/list`: what the calling model reads to choose the tool.
    pub description: &'static str,
    /// When to use it, as the server's instructions say after the tool's name.
    pub use_when: &'static str,
    pub reply: ReplyKind,
    /// The one line of `gemini-mcp --help` for the subcommand.
    pub about: &'static str,
    /// The system prompt, compiled in.
    pub system_prompt: &'static str,
    /// Sampling temperature sent to models that take one by default (2.5); 3.x and later get
    /// none unless the user asked.
    pub temperature: f32,
    /// Reasoning depth unless the call says otherwise.
    pub thinking: ThinkingMode,
    /// Calls per client the HTTP transport admits unless `GEMINI_MCP_RATE_LIMITS` says otherwise.
    pub rate_limit: Rate,
}

/// `n` calls a minute.
const fn per_minute(n: u32) -> Rate {
    match NonZeroU32::new(n) {
        Some(count) => Rate {
            count,
            per: Per::Minute,
        },
        None => panic!("a rate of 0 calls"),
    }
}

/// Every tool that asks Gemini, one row each, in the order the server's instructions name them.
pub static SPECS: [Spec; 8] = [
    Spec {
        tool: Tool::CodeReview,
        name: "codereview",
        title: "Code review by Gemini",
        description: "Gemini reviews files and returns findings (severity, file:line, fix) as structured data.",
        use_when: "for findings on files (severity, file:line, fix)",
        reply: ReplyKind::Review,
        about: "Review files: findings with severity, file:line and a fix",
        system_prompt: include_str!("../../prompts/codereview.md"),
        temperature: 0.2,
        thinking: ThinkingMode::Medium,
        rate_limit: per_minute(5),
    },
    Spec {
        tool: Tool::Precommit,
        name: "precommit",
        title: "Pre-commit review by Gemini",
        description: "Review pending git changes (staged, unstaged, untracked, or since a ref) before committing: findings and a verdict.",
        use_when: "before committing, on the pending git changes",
        reply: ReplyKind::ChangeReview,
        about: "Review the pending git changes (staged, unstaged, untracked; nested repositories too)",
        system_prompt: include_str!("../../prompts/precommit.md"),
        temperature: 0.2,
        thinking: ThinkingMode::Medium,
        rate_limit: per_minute(3),
    },
    Spec {
        tool: Tool::Debug,
        name: "debug",
        title: "Debug with Gemini",
        description: "Root-cause a bug: give the error, stack trace, likely files and what you tried; Gemini ranks hypotheses with evidence and fixes.",
        use_when: "for root-cause analysis of an error",
        reply: ReplyKind::Answer { sources: true },
        about: "Root-cause analysis of a bug",
        system_prompt: include_str!("../../prompts/debug.md"),
        temperature: 0.2,
        thinking: ThinkingMode::Medium,
        rate_limit: per_minute(5),
    },
    Spec {
        tool: Tool::Analyze,
        name: "analyze",
        title: "Analyze code with Gemini",
        description: "Have Gemini read files or directories and answer a question about them: architecture, performance, security, quality.",
        use_when: "to answer a question about files or directories",
        reply: ReplyKind::Answer { sources: false },
        about: "Ask a question about files or directories",
        system_prompt: include_str!("../../prompts/analyze.md"),
        temperature: 0.2,
        thinking: ThinkingMode::Medium,
        rate_limit: per_minute(5),
    },
    Spec {
        tool: Tool::ThinkDeep,
        name: "thinkdeep",
        title: "Think deeper with Gemini",
        description: "Give Gemini your analysis of a hard problem (design, architecture, a tricky bug) to extend and challenge; thinks longer than chat.",
        use_when: "to extend and challenge your own analysis of a hard problem",
        reply: ReplyKind::Answer { sources: true },
        about: "Extend and challenge your own analysis of a hard problem",
        system_prompt: include_str!("../../prompts/thinkdeep.md"),
        temperature: 0.7,
        thinking: ThinkingMode::High,
        rate_limit: per_minute(3),
    },
    Spec {
        tool: Tool::Investigate,
        name: "investigate",
        title: "Investigate the project with Gemini",
        description: "Gemini explores the project itself (lists, searches, reads files and git history; read-only) and answers with file:line citations.",
        use_when: "when Gemini should find the relevant files itself (it reads and searches the project, read-only)",
        reply: ReplyKind::Investigation,
        about: "Gemini investigates the project itself (lists, searches, reads files and git history, read-only) and answers with file:line citations; the steps show on stderr",
        system_prompt: include_str!("../../prompts/investigate.md"),
        temperature: 0.2,
        thinking: ThinkingMode::Medium,
        rate_limit: per_minute(3),
    },
    Spec {
        tool: Tool::Chat,
        name: "chat",
        title: "Chat with Gemini",
        description: "Ask Gemini for a second opinion, to brainstorm, or to check an idea; pass files for context.",
        use_when: "for anything else",
        reply: ReplyKind::Answer { sources: true },
        about: "Ask Gemini for a second opinion",
        system_prompt: include_str!("../../prompts/chat.md"),
        temperature: 0.5,
        thinking: ThinkingMode::Medium,
        rate_limit: per_minute(10),
    },
    Spec {
        tool: Tool::Research,
        name: "research",
        title: "Deep Research by Gemini",
        description: "Gemini's Deep Research agent researches a question on the web for minutes and answers with a cited report; sends no project file unless named in files.",
        use_when: "for a question the web answers (libraries, APIs, standards, prior art), with a cited report; it takes minutes",
        reply: ReplyKind::Answer { sources: true },
        about: "Research a question on the web with Gemini's Deep Research agent: a cited report (GEMINI_MCP_DEEP_RESEARCH=1)",
        system_prompt: include_str!("../../prompts/research.md"),
        temperature: 0.5,
        thinking: ThinkingMode::High,
        rate_limit: per_minute(1),
    },
];

/// What `tools/list` shows of `listmodels`, the one tool that does not ask Gemini (and so has no
/// row in [`SPECS`]: no prompt, no rate limit, no subcommand; it stays on the machine).
pub struct Listed {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
}

pub const LISTMODELS: Listed = Listed {
    name: "listmodels",
    title: "List Gemini models",
    description: "The Gemini models this server can use (limits, aliases, default), its backend and thread store.",
};

impl Tool {
    /// The tool's row.
    pub fn spec(self) -> &'static Spec {
        // `SPECS` is in the order of the variants (a test checks it).
        &SPECS[self as usize]
    }

    /// The tool of this MCP name (`chat`, `thinkdeep`, …).
    pub fn from_name(name: &str) -> Option<Tool> {
        SPECS.iter().find(|s| s.name == name).map(|s| s.tool)
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The tool's system prompt, compiled in.
    pub fn system_prompt(self) -> &'static str {
        self.spec().system_prompt
    }

    /// Sampling temperature sent to models that take one by default (2.5); 3.x and later get
    /// none unless the user asked.
    pub fn default_temperature(self) -> f32 {
        self.spec().temperature
    }
}

/// Every tool name, sorted (the `tools/list` order): the tools that ask Gemini and `listmodels`.
pub fn tool_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = SPECS.iter().map(|s| s.name).collect();
    names.push(LISTMODELS.name);
    names.sort_unstable();
    names
}

/// The rate limits HTTP applies when `GEMINI_MCP_RATE_LIMITS` is not set: each tool's own.
pub fn default_rate_limits() -> RateLimits {
    RateLimits(
        SPECS
            .iter()
            .map(|s| (s.name.to_string(), s.rate_limit))
            .collect(),
    )
}

/// Checks the settings that name tools (`DISABLED_TOOLS`, `GEMINI_MCP_RATE_LIMITS`) against the
/// table. The command line calls it right after reading the configuration, before anything runs
/// (and `doctor` reports it), so a misspelt name is refused as if by the setting itself.
pub fn check_settings(config: &Config) -> Result<(), ConfigError> {
    let names = tool_names();
    if let Some(t) = config
        .tools
        .disabled
        .iter()
        .find(|t| !names.contains(&t.as_str()))
    {
        return Err(ConfigError::Invalid {
            name: "DISABLED_TOOLS",
            message: format!("`{t}` is not a tool; tools are {}", names.join(", ")),
        });
    }
    let limited = config.tools.rate_limits.iter().flat_map(|r| &r.0);
    if let Some((name, _)) = limited
        .into_iter()
        .find(|(name, _)| Tool::from_name(name).is_none())
    {
        let tools: Vec<&str> = SPECS.iter().map(|s| s.name).collect();
        return Err(ConfigError::Invalid {
            name: "GEMINI_MCP_RATE_LIMITS",
            message: format!(
                "`{name}` is not a tool with a rate limit; use {}",
                tools.join(", ")
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rows_are_in_the_order_of_the_variants_and_named_once() {
        for (i, spec) in SPECS.iter().enumerate() {
            assert_eq!(spec.tool as usize, i, "{}", spec.name);
            assert_eq!(Tool::from_name(spec.name), Some(spec.tool));
        }
        let names = tool_names();
        let mut unique = names.clone();
        unique.dedup();
        assert_eq!(names, unique);
        assert_eq!(Tool::from_name("listmodels"), None);
    }

    #[test]
    fn the_documented_default_rate_limits_are_the_tables() {
        let documented = crate::config::SETTINGS
            .iter()
            .find(|s| s.name == "GEMINI_MCP_RATE_LIMITS")
            .map(|s| s.default);
        let defaults = default_rate_limits();
        assert_eq!(
            documented,
            Some(format!("HTTP: `{defaults}`; stdio: `off`").as_str())
        );
        assert_eq!(defaults.to_string().parse::<RateLimits>(), Ok(defaults));
    }

    fn config(env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let lookup = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        Config::load(&lookup, dir.path()).and_then(|c| check_settings(&c).map(|()| c))
    }

    #[test]
    fn settings_naming_tools_are_checked_against_the_table() {
        assert!(config(&[("DISABLED_TOOLS", "thinkdeep, listmodels")]).is_ok());
        assert!(config(&[("GEMINI_MCP_RATE_LIMITS", "chat=1/min,investigate=2/h")]).is_ok());
        for (name, value, needle) in [
            (
                "DISABLED_TOOLS",
                "debug,chatty",
                "DISABLED_TOOLS: `chatty` is not a tool; tools are analyze, chat, codereview, debug, investigate, listmodels, precommit, research, thinkdeep",
            ),
            (
                "GEMINI_MCP_RATE_LIMITS",
                "chatty=1/min",
                "GEMINI_MCP_RATE_LIMITS: `chatty` is not a tool with a rate limit; use codereview, precommit",
            ),
            (
                "GEMINI_MCP_RATE_LIMITS",
                "listmodels=1/min",
                "`listmodels` is not a tool with a rate limit",
            ),
        ] {
            let err = config(&[(name, value)]).unwrap_err().to_string();
            assert!(err.contains(needle), "{value}: {err}");
        }
    }
}

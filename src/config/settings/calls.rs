//! How a call is made: the models, the deadlines and retries (`gemini::Settings`), and the cap on
//! the context sent (`CallSettings`).

use std::time::Duration;

use super::row::Read::{Calls, Gemini};
use super::row::{Category, Group, ROW, Setting};

pub(super) const GROUP: Group = Group {
    category: Category::Calls,
    rows: &[
        Setting {
            name: "GEMINI_MODEL",
            default: "pro",
            doc: "Default model, by name or alias (`pro`, `flash`, `flash-lite`).",
            read: Gemini(|var, g| {
                g.default_model = var.value().unwrap_or_default().trim().to_string();
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_FALLBACK_MODEL",
            default: "flash",
            doc: "Model used after capacity errors (429 quota, 503 overloaded); after a 404 NOT_FOUND for a model Google announced a replacement for, the replacement answers instead. `none` turns both fallbacks off.",
            read: Gemini(|var, g| {
                g.fallback_model = var.value().unwrap_or_default().trim().to_string();
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_TIMEOUT_SECS",
            default: "540",
            doc: "Deadline for one Gemini call, retries included.",
            read: Gemini(|var, g| {
                g.call_timeout = var.secs()?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_CONNECT_TIMEOUT_SECS",
            default: "10",
            doc: "TCP/TLS connect timeout.",
            read: Gemini(|var, g| {
                g.connect_timeout = var.secs()?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_IDLE_TIMEOUT_SECS",
            default: "180",
            doc: "Longest silence between two chunks once Gemini has begun answering.",
            read: Gemini(|var, g| {
                g.idle_timeout = var.secs()?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MAX_ATTEMPTS",
            default: "5",
            doc: "Attempts per call on 408/429/5xx, the first included (also bounds the Gemini CLI's own retries).",
            read: Gemini(|var, g| {
                g.max_attempts = var.at_least(1, "")?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_RETRY_INITIAL_MS",
            default: "2000",
            doc: "First retry delay; doubled per attempt (full jitter).",
            read: Gemini(|var, g| {
                g.retry_initial_delay = Duration::from_millis(var.parse()?);
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_RETRY_MAX_MS",
            default: "30000",
            doc: "Cap on one retry delay.",
            read: Gemini(|var, g| {
                g.retry_max_delay = Duration::from_millis(var.parse()?);
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "MAX_CONTEXT_TOKENS",
            default: "model window",
            derived: true,
            doc: "Cap on the tokens of context (files, diff, history) sent per call.",
            read: Calls(|var, c| {
                c.max_context_tokens = match var.get() {
                    None => None,
                    Some(raw) => match raw.trim().parse::<u64>() {
                        Ok(n) if n >= 1_000 => Some(n),
                        _ => {
                            return Err(var.invalid(format!(
                                "`{raw}` must be a whole number of tokens, at least 1000"
                            )));
                        }
                    },
                };
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_REVIEW_RULES",
            default: "—",
            doc: "A Markdown file of review rules the operator adds to every review (`codereview`, `precommit`, `analyze`, and so the hook and the Action): first in precedence, before the repository's `.gemini/styleguide.md` and the user's own rules (docs/rules.md). Read at each review.",
            read: Calls(|var, c| {
                c.review_rules = match var.get().map(|p| p.trim().to_string()).filter(|p| !p.is_empty()) {
                    None => None,
                    Some(p) => {
                        let path = var.cwd().join(p);
                        if !path.is_file() {
                            return Err(var.invalid(format!(
                                "{} is not a file; name a Markdown file of rules, or unset it",
                                path.display()
                            )));
                        }
                        Some(path)
                    }
                };
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_USER_REVIEW_RULES",
            default: "$XDG_CONFIG_HOME/gemini-mcp/review-rules.md",
            derived: true,
            doc: "The user's own review rules, a Markdown file applied after the repository's when it exists (on Windows `%APPDATA%\\gemini-mcp\\review-rules.md`); `none` reads none.",
            also_reads: &["XDG_CONFIG_HOME", "HOME", "APPDATA"],
            read: Calls(|var, c| {
                c.user_rules = match var.get().map(|v| v.trim().to_string()) {
                    Some(v) if v == "none" || v.is_empty() => None,
                    Some(v) => Some(var.cwd().join(v)),
                    None => user_rules_of(cfg!(windows), &|name| var.os(name)),
                };
                Ok(())
            }),
        },
    ],
};

/// The user's rules file the environment names: on Windows under `%APPDATA%`, elsewhere under the
/// XDG configuration home.
fn user_rules_of(
    windows: bool,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<std::path::PathBuf> {
    let dir = if windows {
        env("APPDATA").map(std::path::PathBuf::from)
    } else {
        env("XDG_CONFIG_HOME")
            .filter(|v| v.starts_with('/'))
            .map(std::path::PathBuf::from)
            .or_else(|| env("HOME").map(|h| std::path::Path::new(&h).join(".config")))
    };
    dir.map(|d| d.join("gemini-mcp").join("review-rules.md"))
}

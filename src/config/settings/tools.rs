//! What the server offers: the tools hidden, the compatibility profiles, the longest reply and
//! the tools' rate limits (`ToolSettings`).

use super::row::Read::Tools;
use super::row::{Category, Group, ROW, Setting};
use crate::config::Compat;
use crate::admission::RateLimits;

pub(super) const GROUP: Group = Group {
    category: Category::Tools,
    rows: &[
        Setting {
            name: "DISABLED_TOOLS",
            default: "—",
            doc: "Comma-separated tools to hide, e.g. `thinkdeep,debug`.",
            // Kept as written: the edge checks the names against the tools' table
            // (`tools::spec::check_settings`).
            read: Tools(|var, t| {
                t.disabled = var.list();
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_COMPAT",
            default: "—",
            doc: "Compatibility profiles, comma-separated: `cli-wrapper` (the Gemini CLI wrapper's `chat` with `systemPrompt` and `cwd`, and `chat-reply` with `sessionId`) and `acp-bridge` (the ACP bridge's `gemini`, `list_models`, `list_sessions`, `reset_session`). Off: `tools/list` holds only this server's tools.",
            read: Tools(|var, t| {
                t.compat = Vec::new();
                for p in var.list() {
                    let profile = match p.as_str() {
                        "cli-wrapper" => Compat::CliWrapper,
                        "acp-bridge" => Compat::AcpBridge,
                        other => {
                            return Err(var.invalid(format!(
                                "`{other}` is not a profile; use cli-wrapper and/or acp-bridge"
                            )));
                        }
                    };
                    if !t.compat.contains(&profile) {
                        t.compat.push(profile);
                    }
                }
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "MAX_REPLY_CHARS",
            default: "48000",
            doc: "Cap on a whole MCP tool result, text and structured content together (at most 500000; also declared to Claude Code); past it the least severe findings are left out, then the answer is cut, saying so.",
            read: Tools(|var, t| {
                t.max_reply_chars = var.parse()?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_RATE_LIMITS",
            // The tools' table's own rates (`tools::spec`, whose test checks this text).
            default: "HTTP: `codereview=5/min,precommit=3/min,debug=5/min,analyze=5/min,thinkdeep=3/min,investigate=3/min,chat=10/min,research=1/min`; stdio: `off`",
            derived: true,
            doc: "Per-tool rate limits per client and instance: `tool=N/unit` items (unit `s`, `min` or `h`), comma-separated, replacing the default; or `off`.",
            read: Tools(|var, t| {
                t.rate_limits = match var.get() {
                    None => None,
                    Some(raw) => Some(raw.parse::<RateLimits>().map_err(|e| var.invalid(e))?),
                };
                Ok(())
            }),
            ..ROW
        },
    ],
};

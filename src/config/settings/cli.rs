//! The Gemini CLI as a backend and as a warm agent: its executable, its transport, and the warm
//! processes' limits and approval modes (`gemini::Settings`).

use std::path::PathBuf;

use super::row::Read::Gemini;
use super::row::{Category, Group, ROW, Setting};
use crate::gemini::CliTransport;

pub(super) const GROUP: Group = Group {
    category: Category::GeminiCli,
    rows: &[
        Setting {
            name: "GEMINI_CLI_PATH",
            default: "gemini",
            doc: "The Gemini CLI executable for the `cli` backend.",
            read: Gemini(|var, g| {
                g.gemini_cli = PathBuf::from(var.value().unwrap_or_default());
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_CLI_TRANSPORT",
            default: "acp",
            doc: "How the `cli` backend runs the Gemini CLI: `acp` (a warm `gemini --acp` process, one session per call; one process per call where ACP is unavailable, said in the log) or `headless` (`gemini -o json` for every call).",
            read: Gemini(|var, g| {
                g.cli_transport = match var.value().as_deref().map(str::trim) {
                    None | Some("") | Some("acp") => CliTransport::Acp,
                    Some("headless") => CliTransport::Headless,
                    Some(other) => {
                        return Err(var.invalid(format!(
                            "`{other}` is not a transport; use acp or headless"
                        )));
                    }
                };
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_ACP_IDLE_SECS",
            default: "600",
            doc: "A warm Gemini CLI process (the `cli` backend over ACP, or `investigate` with `engine: \"gemini-cli\"`) with no call for this long exits; the next call starts it again.",
            read: Gemini(|var, g| {
                g.acp_idle = var.secs()?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_ACP_MAX_PROCESSES",
            default: "4",
            doc: "Most warm Gemini CLI agents alive at once (one per project root, approval mode and model); past it the least recently used one is stopped.",
            read: Gemini(|var, g| {
                g.acp_max_processes = var.at_least(1, "")?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_ACP_ALLOW_MODES",
            default: "—",
            doc: "Approval modes of the Gemini CLI agent that change files or run commands and may run: `autoEdit`, `yolo` (comma-separated); unlisted, they are refused. Where listed, each edit and command is still asked for and judged by the server (edits inside the project only), but the CLI's edit tools (and in `yolo` its shell) open files beside the sandbox and secret redaction.",
            read: Gemini(|var, g| {
                g.acp_allowed_modes = Vec::new();
                for item in var.list() {
                    match crate::gemini::AgentMode::parse(&item) {
                        Some(m) => g.acp_allowed_modes.push(m),
                        None => {
                            return Err(var.invalid(format!(
                                "`{item}` is not an approval mode; use autoEdit and/or yolo"
                            )));
                        }
                    }
                }
                Ok(())
            }),
            ..ROW
        },
    ],
};

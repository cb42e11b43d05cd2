//! Which Gemini answers: the backend, and the Gemini API's key, address and service tier
//! (`gemini::Settings`).

use std::time::Duration;

use super::row::Read::Gemini;
use super::row::{Category, Group, ROW, Setting};
use crate::config::Secret;
use crate::gemini::{ApiSurface, BackendChoice};

pub(super) const GROUP: Group = Group {
    category: Category::Gemini,
    rows: &[
        Setting {
            name: "GEMINI_BACKEND",
            default: "auto",
            doc: "`api`, `cli` or `auto` (API when a key is set, else the Gemini CLI when found on PATH).",
            read: Gemini(|var, g| {
                g.backend = match var.value().as_deref().map(str::trim) {
                    Some("api") => BackendChoice::Api,
                    Some("cli") => BackendChoice::Cli,
                    None | Some("auto") => BackendChoice::Auto,
                    Some(other) => {
                        return Err(var.invalid(format!("`{other}` is not one of api, cli, auto")));
                    }
                };
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_API_KEY",
            default: "—",
            doc: "Key for the Gemini REST API (`GOOGLE_API_KEY` also accepted).",
            also_reads: &["GOOGLE_API_KEY"],
            read: Gemini(|var, g| {
                g.api_key = var
                    .get()
                    .or_else(|| var.os("GOOGLE_API_KEY"))
                    .map(|k| Secret::new(k.trim()));
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_BASE_URL",
            default: "https://generativelanguage.googleapis.com",
            doc: "API base URL (scheme, host, optional path prefix; no `/v1beta`). User info (`https://user:password@proxy`) is sent as HTTP Basic authorization and a `?key=` as the API key's header, never in the URL.",
            read: Gemini(|var, g| {
                // After GEMINI_API_KEY: a different key in the URL is refused.
                let url = var.value().unwrap_or_default();
                let base = crate::gemini::BaseUrl::parse(&url, g.api_key.as_ref())
                    .map_err(|why| var.invalid(why))?;
                (g.base_url, g.base_authorization) = (base.url, base.authorization);
                g.api_key = g.api_key.take().or(base.key);
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_API_SURFACE",
            default: "auto",
            doc: "Which interface of the REST API carries the calls: `generate-content` (`models/…:streamGenerateContent`), `interactions` (the Interactions API, `/v1/interactions`; stateless unless `GEMINI_MCP_INTERACTIONS_STORE=1`) or `auto` (`generate-content` for every model's call: explicit context caching and thinking budgets are `generate-content`'s; the Interactions API for Deep Research, which only it has). With `interactions`, context caching is off; Vertex AI is reached at its own Interactions API (`/v1beta1/projects/…/locations/…/interactions`). See docs/interactions.md.",
            read: Gemini(|var, g| {
                g.api_surface = match var.value().as_deref().map(str::trim) {
                    None | Some("auto") => ApiSurface::Auto,
                    Some("generate-content") => ApiSurface::GenerateContent,
                    Some("interactions") => ApiSurface::Interactions,
                    Some(other) => {
                        return Err(var.invalid(format!(
                            "`{other}` is not one of auto, generate-content, interactions"
                        )));
                    }
                };
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_INTERACTIONS_STORE",
            default: "0",
            doc: "`1`: calls over the Interactions API (`GEMINI_API_SURFACE=interactions`) are sent with `store: true`, so Google keeps each interaction (its input and output), and a thread's next turn sends only what is new with `previous_interaction_id`. `0`: `store: false`, nothing kept at Google, the whole history sent each call. See SECURITY.md.",
            read: Gemini(|var, g| {
                g.interactions_store = var.flag()?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_DEEP_RESEARCH",
            default: "0",
            doc: "`1`: the `research` tool is listed and runs. It hands a question to Gemini's Deep Research agent (the Interactions API, a background run polled by id), which browses the web and answers with a cited report; nothing of the project is sent unless named in its `files`, and what is named passes the sandbox and redaction. Off by default. Gemini API only: a run asked of Vertex AI or the Gemini CLI is refused, naming the settings. See docs/interactions.md.",
            read: Gemini(|var, g| {
                g.research.enabled = var.flag()?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_DEEP_RESEARCH_AGENT",
            default: "deep-research-preview-04-2026",
            doc: "The agent `research` asks (`deep-research-preview-04-2026`, `deep-research-max-preview-04-2026`, or a newer id Google names).",
            read: Gemini(|var, g| {
                let agent = var.value().unwrap_or_default().trim().to_string();
                let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "-._".contains(c);
                if agent.is_empty() || !agent.chars().all(ok) {
                    return Err(var.invalid(
                        "an agent id is lowercase letters, digits, `-`, `.` and `_` (e.g. deep-research-preview-04-2026)",
                    ));
                }
                g.research.agent = agent;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_DEEP_RESEARCH_TOKENS",
            default: "400000",
            doc: "Tokens one `research` run is held at against the daily caps and the per-call ceiling before it starts (the agent reads the web on its own, so its input is not known ahead; Google bills it as the underlying model's tokens). After the run its real usage is counted instead.",
            read: Gemini(|var, g| {
                g.research.hold_tokens = var.at_least(1, " tokens")?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_DEEP_RESEARCH_TIMEOUT_SECS",
            default: "3600",
            doc: "The longest a `research` run may take; past it the run is cancelled at Google and the call fails, saying so.",
            read: Gemini(|var, g| {
                g.research.timeout = var.secs()?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_INTERACTIONS_BACKGROUND",
            default: "0",
            doc: "`1`: a call over the Interactions API (`GEMINI_API_SURFACE=interactions`) that thinks at `high` or `max` runs in the background at Google (`background: true`), polled by id every `GEMINI_MCP_BACKGROUND_POLL_MS`, instead of one streamed request held open for minutes; cancelling the call cancels the run. The run is stored at Google until it is read (the API requires it), then deleted unless `GEMINI_MCP_INTERACTIONS_STORE=1` keeps it for the thread.",
            read: Gemini(|var, g| {
                g.research.thinking_in_background = var.flag()?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_BACKGROUND_POLL_MS",
            default: "10000",
            doc: "How often a background run at Google (`research`, and thinking with `GEMINI_MCP_INTERACTIONS_BACKGROUND=1`) is polled, in milliseconds.",
            read: Gemini(|var, g| {
                g.research.poll = Duration::from_millis(var.at_least(10, " ms")?);
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_SERVICE_TIER",
            default: "—",
            doc: "The Gemini API service tier to ask for: `standard`, `flex` (lower price, longer latency target; good for the git hook and CI) or `priority` (where the account has it). The reply's `usage.tier` says which tier served the call, and the call is priced at that tier (flex half the standard price, priority twice it). Vertex AI takes flex and priority on its global endpoint only. `--tier` on the command line overrides it.",
            read: Gemini(|var, g| {
                g.service_tier = match var.get() {
                    None => None,
                    Some(t) => Some(crate::config::service_tier(&t).map_err(|e| var.invalid(e))?),
                };
                Ok(())
            }),
            ..ROW
        },
    ],
};

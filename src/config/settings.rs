//! Every setting, once: its name (the environment variable and the TOML key), its default as
//! the README shows it, what it does, and how it is read into [`Config`]. Ripgrep's flag
//! definitions are the model: adding a setting is adding one item here (and its README row, which
//! a test checks).

use std::path::PathBuf;
use std::time::Duration;

use super::{
    BackendChoice, ConfigError, Secret, Setting, StoreChoice, Var, any_or_list, canonical_root,
    default_state_dir, tokens, trimmed,
};
use crate::clock::Clock;
use crate::gemini::prices::PriceList;
use crate::limits::RateLimits;

/// Tokens from the setting (comma-separated), else from the file its `_FILE` variant names (one
/// per line; a regular file of at most 1 MiB), else none.
fn token_list(var: &Var<'_>, file_var: &'static str) -> Result<Vec<Secret>, ConfigError> {
    if let Some(t) = var.get() {
        return tokens(var.name, &t, ',');
    }
    let Some(path) = var.os(file_var) else {
        return Ok(Vec::new());
    };
    let t = crate::setting_file::read_text(file_var, std::path::Path::new(&path))?;
    tokens(file_var, &t, '\n')
}

/// Every setting the server reads, in the order they are read (a setting may check one read
/// before it) and shown in the README.
pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "PROJECT_ROOT",
        default: "working directory",
        doc: "Sandbox roots, separated by `:` (`;` on Windows); only files inside them are read.",
        also_reads: &[],
        read: |var, c| {
            c.roots = match var.get() {
                None => vec![canonical_root(var.name, var.cwd())?],
                Some(list) => {
                    let mut roots = Vec::new();
                    for part in std::env::split_paths(&list).filter(|p| !p.as_os_str().is_empty()) {
                        roots.push(canonical_root(var.name, &var.cwd().join(part))?);
                    }
                    if roots.is_empty() {
                        return Err(var.invalid("names no directory"));
                    }
                    roots
                }
            };
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_API_KEY",
        default: "—",
        doc: "Key for the Gemini REST API (`GOOGLE_API_KEY` also accepted).",
        also_reads: &["GOOGLE_API_KEY"],
        read: |var, c| {
            c.api_key = var
                .get()
                .or_else(|| var.os("GOOGLE_API_KEY"))
                .map(|k| Secret::new(k.trim()));
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_BASE_URL",
        default: "https://generativelanguage.googleapis.com",
        doc: "API base URL (scheme, host, optional path prefix; no `/v1beta`). User info (`https://user:password@proxy`) is sent as HTTP Basic authorization and a `?key=` as the API key's header, never in the URL.",
        also_reads: &[],
        read: |var, c| {
            let url = var
                .get()
                .unwrap_or_else(|| "https://generativelanguage.googleapis.com".into());
            let base = crate::gemini::BaseUrl::parse(&url, c.api_key.as_ref())
                .map_err(|why| var.invalid(why))?;
            (c.base_url, c.base_authorization) = (base.url, base.authorization);
            c.api_key = c.api_key.take().or(base.key);
            Ok(())
        },
    },
    Setting {
        name: "GOOGLE_GENAI_USE_VERTEXAI",
        default: "false",
        doc: "`true`: reach Gemini through Vertex AI (as Google's SDKs and the Gemini CLI do), with `GOOGLE_CLOUD_PROJECT` and Application Default Credentials, or with `GOOGLE_API_KEY` alone (express mode).",
        also_reads: &[],
        read: |var, c| {
            c.vertex = var.flag()?.then(|| crate::gemini::VertexSettings {
                project: None,
                location: "global".into(),
                base_url: None,
                api_key: None,
                labels: Vec::new(),
                credentials_file: None,
            });
            Ok(())
        },
    },
    Setting {
        name: "GOOGLE_CLOUD_PROJECT",
        default: "—",
        doc: "The Google Cloud project Vertex AI bills and authorises (with `GOOGLE_GENAI_USE_VERTEXAI=true`).",
        also_reads: &[],
        read: |var, c| {
            let project = var.get().map(|p| p.trim().to_string());
            if let Some(v) = c.vertex.as_mut() {
                v.project = project;
            }
            Ok(())
        },
    },
    Setting {
        name: "GOOGLE_CLOUD_LOCATION",
        default: "global",
        doc: "The Vertex AI location (`global`, or a region such as `europe-west4`).",
        also_reads: &[],
        read: |var, c| {
            let location = var.get().map(|l| l.trim().to_string());
            if let (Some(v), Some(l)) = (c.vertex.as_mut(), location) {
                if !l.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '-') {
                    return Err(var.invalid(format!(
                        "`{l}` is not a location; use global or a region such as us-central1"
                    )));
                }
                v.location = l;
            }
            Ok(())
        },
    },
    Setting {
        name: "GOOGLE_VERTEX_BASE_URL",
        default: "—",
        doc: "Vertex AI endpoint override (scheme and host), for proxies and tests; by default Google's endpoint for the location.",
        also_reads: &[],
        read: |var, c| {
            let base = var
                .get()
                .map(|b| b.trim().trim_end_matches('/').to_string());
            if let (Some(v), Some(b)) = (c.vertex.as_mut(), base) {
                if !(b.starts_with("http://") || b.starts_with("https://")) {
                    return Err(var.invalid("must start with http:// or https://"));
                }
                if crate::secret::without_user_info(&b).is_ok_and(|u| u.authorization.is_some()) {
                    return Err(var.invalid("holds user info (`user:password@`): Vertex AI takes its bearer token or GOOGLE_API_KEY; leave it out"));
                }
                v.base_url = Some(b);
            }
            Ok(())
        },
    },
    Setting {
        name: "GOOGLE_APPLICATION_CREDENTIALS",
        default: "—",
        doc: "Vertex AI's Application Default Credentials: a service-account key, gcloud authorized-user or external-account (workload identity federation) file; else gcloud's `application-default login` file, else the metadata server. Read by Google's auth library; `doctor` names the source.",
        also_reads: &["CLOUDSDK_CONFIG", "HOME"],
        read: |var, c| {
            c.google_application_credentials = var.env().map(std::path::PathBuf::from);
            c.gcloud_adc_file = var
                .os("CLOUDSDK_CONFIG")
                .map(std::path::PathBuf::from)
                .or_else(|| {
                    var.os("HOME")
                        .map(|h| std::path::PathBuf::from(h).join(".config/gcloud"))
                })
                .map(|d| d.join("application_default_credentials.json"));
            super::note_adc_file(var.name, c);
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_SERVICE_TIER",
        default: "—",
        doc: "The Gemini API service tier to ask for: `standard`, `flex` (lower price, longer latency target; good for the git hook and CI) or `priority` (where the account has it). The reply's `usage.tier` says which tier served the call, and the call is priced at that tier (flex half the standard price, priority twice it). Vertex AI takes flex and priority on its global endpoint only. `--tier` on the command line overrides it.",
        also_reads: &[],
        read: |var, c| {
            c.service_tier = match var.get() {
                None => None,
                Some(t) => Some(super::service_tier(&t).map_err(|e| var.invalid(e))?),
            };
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_DAILY_TOKENS",
        default: "—",
        doc: "Daily cap (UTC) on the tokens (input, output and thinking) Gemini calls may use, per project and, over HTTP, per client; counted in the thread store, so every instance on one Redis shares it. A request whose estimated input would pass it is refused before Gemini is called.",
        also_reads: &[],
        read: |var, c| {
            c.daily_tokens = match var.get() {
                None => None,
                Some(_) => Some(var.parse(0u64)?).filter(|n| *n > 0),
            };
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_DAILY_USD",
        default: "—",
        doc: "Daily cap (UTC) on the estimated cost in USD, per project and, over HTTP, per client, like `GEMINI_MCP_DAILY_TOKENS`. A model without a known price is refused under it (give it one with `GEMINI_MCP_PRICES`).",
        also_reads: &[],
        read: |var, c| {
            c.daily_usd = match var.get() {
                None => None,
                Some(_) => {
                    let v: f64 = var.parse(0.0)?;
                    if !(v.is_finite() && v > 0.0) {
                        return Err(var.invalid("must be a positive amount of dollars"));
                    }
                    Some(v)
                }
            };
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_TODAY",
        default: "the system clock",
        doc: "The day (`YYYY-MM-DD`, UTC) that dated rules are read at: prices that change on a date, and the notice of a model's announced shutdown. For reproducible estimates and tests.",
        also_reads: &[],
        read: |var, c| {
            c.prices = match var.get() {
                None => PriceList::at(Clock::system()),
                Some(d) => PriceList::at(
                    Clock::on(d.trim())
                        .ok_or_else(|| var.invalid("must be a date YYYY-MM-DD, e.g. 2026-12-01"))?,
                ),
            };
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_PRICES",
        default: "—",
        doc: "Prices of models this build has none for, or overrides: `model=input/output` in USD per million tokens, comma-separated (e.g. `gemini-3.6-flash=1.5/9`; `model=in/out/in_long/out_long` for prompts over 200k tokens). Under a USD cap, a model without a price is refused, not counted as free; `listmodels` shows which have none.",
        also_reads: &[],
        read: |var, c| {
            if let Some(text) = var.get() {
                let configured =
                    crate::gemini::prices::parse_configured(&text).map_err(|e| var.invalid(e))?;
                c.prices = PriceList::new(c.prices.clock(), configured);
            }
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_AUDIT_LOG",
        default: "—",
        doc: "Append one JSON line per tool call to this file: client, project, tool, model, the files sent (path, SHA-256, bytes, tokens), redactions per rule, request hashes, usage, cost, outcome; never contents or secret values (SECURITY.md § The audit log). Safe with many processes and instances writing; read it with `gemini-mcp audit summary`.",
        also_reads: &[],
        read: |var, c| {
            c.audit_log = var
                .get()
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .map(|p| var.cwd().join(p));
            match &c.audit_log {
                Some(p) => crate::audit::check_path(p).map_err(|why| var.invalid(why)),
                None => Ok(()),
            }
        },
    },
    Setting {
        name: "GEMINI_MCP_AUDIT_LOG_MAX_MB",
        default: "50",
        doc: "Size in MB past which the audit log is renamed to `<log>.1` (the older ones shifted up to `<log>.3`).",
        also_reads: &[],
        read: |var, c| {
            let mb: f64 = var.parse(50.0)?;
            if !(mb.is_finite() && mb > 0.0) {
                return Err(var.invalid("must be a positive number of megabytes"));
            }
            c.audit_log_max_bytes = (mb * 1_048_576.0) as u64;
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_CALL_USD",
        default: "—",
        doc: "Ceiling on one call's estimated cost in USD, checked before each of its requests (input at the model's price; the answer is not known yet): a call over it is refused before Gemini, saying what to narrow; the command line asks on a terminal instead.",
        also_reads: &[],
        read: |var, c| {
            c.call_usd = match var.get() {
                None => None,
                Some(_) => {
                    let v: f64 = var.parse(0.0)?;
                    if !(v.is_finite() && v > 0.0) {
                        return Err(var.invalid("must be a positive amount of dollars"));
                    }
                    Some(v)
                }
            };
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_VERTEX_LABELS",
        default: "—",
        doc: "Labels sent with each Vertex AI request for cost attribution, e.g. `team=payments,env=ci`.",
        also_reads: &[],
        read: |var, c| {
            let mut labels = Vec::new();
            for item in var.list() {
                let Some((k, v)) = item.split_once('=') else {
                    return Err(var.invalid(format!("`{item}` is not key=value")));
                };
                let ok = |s: &str| {
                    !s.is_empty()
                        && s.len() <= 63
                        && s.chars().all(|ch| {
                            ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-' || ch == '_'
                        })
                };
                if !ok(k.trim()) || !(v.trim().is_empty() || ok(v.trim())) {
                    return Err(var.invalid(format!(
                            "`{item}`: keys and values are lowercase letters, digits, - and _ (at most 63)"
                        ),
                    ));
                }
                labels.push((k.trim().to_string(), v.trim().to_string()));
            }
            if let Some(v) = c.vertex.as_mut() {
                v.labels = labels;
            }
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_BACKEND",
        default: "auto",
        doc: "`api`, `cli` or `auto` (API when a key is set, else the Gemini CLI when found on PATH).",
        also_reads: &[],
        read: |var, c| {
            c.backend = match var.get().as_deref().map(str::trim) {
                None | Some("auto") => BackendChoice::Auto,
                Some("api") => BackendChoice::Api,
                Some("cli") => BackendChoice::Cli,
                Some(other) => {
                    return Err(var.invalid(format!("`{other}` is not one of api, cli, auto")));
                }
            };
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_CLI_PATH",
        default: "gemini",
        doc: "The Gemini CLI executable for the `cli` backend.",
        also_reads: &[],
        read: |var, c| {
            c.gemini_cli = PathBuf::from(var.get().unwrap_or_else(|| "gemini".into()));
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MODEL",
        default: "pro",
        doc: "Default model, by name or alias (`pro`, `flash`, `flash-lite`).",
        also_reads: &[],
        read: |var, c| {
            c.default_model = trimmed(var.get(), "pro");
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_FALLBACK_MODEL",
        default: "flash",
        doc: "Model used after capacity errors (429 quota, 503 overloaded); after a 404 NOT_FOUND for a model Google announced a replacement for, the replacement answers instead. `none` turns both fallbacks off.",
        also_reads: &[],
        read: |var, c| {
            c.fallback_model = trimmed(var.get(), "flash");
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_TIMEOUT_SECS",
        default: "540",
        doc: "Deadline for one Gemini call, retries included.",
        also_reads: &[],
        read: |var, c| {
            c.call_timeout = var.secs(540)?;
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_CONNECT_TIMEOUT_SECS",
        default: "10",
        doc: "TCP/TLS connect timeout.",
        also_reads: &[],
        read: |var, c| {
            c.connect_timeout = var.secs(10)?;
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_IDLE_TIMEOUT_SECS",
        default: "180",
        doc: "Longest silence between two chunks once Gemini has begun answering.",
        also_reads: &[],
        read: |var, c| {
            c.idle_timeout = var.secs(180)?;
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MAX_ATTEMPTS",
        default: "5",
        doc: "Attempts per call on 408/429/5xx, the first included (also bounds the Gemini CLI's own retries).",
        also_reads: &[],
        read: |var, c| {
            c.max_attempts = var.parse(5)?;
            if c.max_attempts == 0 {
                return Err(var.invalid("must be at least 1"));
            }
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_RETRY_INITIAL_MS",
        default: "2000",
        doc: "First retry delay; doubled per attempt (full jitter).",
        also_reads: &[],
        read: |var, c| {
            c.retry_initial_delay = Duration::from_millis(var.parse(2000)?);
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_RETRY_MAX_MS",
        default: "30000",
        doc: "Cap on one retry delay.",
        also_reads: &[],
        read: |var, c| {
            c.retry_max_delay = Duration::from_millis(var.parse(30_000)?);
            Ok(())
        },
    },
    Setting {
        name: "MAX_CONTEXT_TOKENS",
        default: "model window",
        doc: "Cap on the tokens of context (files, diff, history) sent per call.",
        also_reads: &[],
        read: |var, c| {
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
        },
    },
    Setting {
        name: "GEMINI_MCP_EXPLORE_MAX_STEPS",
        default: "50",
        doc: "Most tool calls one investigation may make (`investigate`'s `max_steps` defaults to 25 and is capped here).",
        also_reads: &[],
        read: |var, c| {
            c.explore.max_steps = var.parse(50)?;
            if c.explore.max_steps == 0 {
                return Err(var.invalid("must be at least 1"));
            }
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_EXPLORE_TOKENS",
        default: "200000",
        doc: "Tokens of tool results one investigation may send to Gemini (also capped by the model's window); never passed: the result that would cross it is cut to fit (or withheld), saying so, and Gemini is asked for its answer.",
        also_reads: &[],
        read: |var, c| {
            c.explore.token_budget = var.parse(200_000)?;
            if c.explore.token_budget < 1_000 {
                return Err(var.invalid("must be at least 1000"));
            }
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_EXPLORE_RESULT_CHARS",
        default: "32000",
        doc: "Longest result of one investigation tool call, in characters; a longer one is cut on a line, saying which lines to ask for next.",
        also_reads: &[],
        read: |var, c| {
            c.explore.result_chars = var.parse(32_000)?;
            if c.explore.result_chars < 1_000 {
                return Err(var.invalid("must be at least 1000"));
            }
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_EXPLORE_TIMEOUT_SECS",
        default: "600",
        doc: "Time after which an investigation starts no new step and Gemini is asked for its answer.",
        also_reads: &[],
        read: |var, c| {
            let secs: f64 = var.parse(600.0)?;
            if !(secs.is_finite() && secs > 0.0) {
                return Err(var.invalid("must be a positive number of seconds"));
            }
            c.explore.deadline = Duration::from_secs_f64(secs);
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_CLI_TRANSPORT",
        default: "acp",
        doc: "How the `cli` backend runs the Gemini CLI: `acp` (a warm `gemini --acp` process, one session per call; one process per call where ACP is unavailable, said in the log) or `headless` (`gemini -o json` for every call).",
        also_reads: &[],
        read: |var, c| {
            c.cli_transport = match var.get().as_deref().map(str::trim) {
                None | Some("") | Some("acp") => crate::gemini::CliTransport::Acp,
                Some("headless") => crate::gemini::CliTransport::Headless,
                Some(other) => {
                    return Err(
                        var.invalid(format!("`{other}` is not a transport; use acp or headless"))
                    );
                }
            };
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_ACP_IDLE_SECS",
        default: "600",
        doc: "A warm Gemini CLI process (the `cli` backend over ACP, or `investigate` with `engine: \"gemini-cli\"`) with no call for this long exits; the next call starts it again.",
        also_reads: &[],
        read: |var, c| {
            let secs: f64 = var.parse(600.0)?;
            if !(secs.is_finite() && secs > 0.0) {
                return Err(var.invalid("must be a positive number of seconds"));
            }
            c.acp.idle = Duration::from_secs_f64(secs);
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_ACP_MAX_PROCESSES",
        default: "4",
        doc: "Most warm Gemini CLI agents alive at once (one per project root, approval mode and model); past it the least recently used one is stopped.",
        also_reads: &[],
        read: |var, c| {
            c.acp.max_processes = var.parse(4)?;
            if c.acp.max_processes == 0 {
                return Err(var.invalid("must be at least 1"));
            }
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_ACP_ALLOW_MODES",
        default: "—",
        doc: "Approval modes of the Gemini CLI agent that change files or run commands and may run: `autoEdit`, `yolo` (comma-separated); unlisted, they are refused. Where listed, each edit and command is still asked for and judged by the server (edits inside the project only), but the CLI's edit tools (and in `yolo` its shell) open files beside the sandbox and secret redaction.",
        also_reads: &[],
        read: |var, c| {
            let raw = var.get().unwrap_or_default();
            c.acp.allowed_modes = Vec::new();
            for item in raw.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                match crate::gemini::AgentMode::parse(item) {
                    Some(m) => c.acp.allowed_modes.push(m),
                    None => {
                        return Err(var.invalid(format!(
                            "`{item}` is not an approval mode; use autoEdit and/or yolo"
                        )));
                    }
                }
            }
            Ok(())
        },
    },
    Setting {
        name: "MAX_REPLY_CHARS",
        default: "48000",
        doc: "Cap on a whole MCP tool result, text and structured content together (at most 500000; also declared to Claude Code); past it the least severe findings are left out, then the answer is cut, saying so.",
        also_reads: &[],
        read: |var, c| {
            c.max_reply_chars = var.parse(48_000)?;
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_STORE",
        default: "auto",
        doc: "Thread store: `auto` (Redis if `REDIS_URL`, else embedded), `redis`, `embedded`, `memory`.",
        also_reads: &[],
        read: |var, c| {
            c.store = match var.get().as_deref().map(str::trim) {
                None | Some("auto") => StoreChoice::Auto,
                Some("redis") => StoreChoice::Redis,
                Some("embedded") => StoreChoice::Embedded,
                Some("memory") => StoreChoice::Memory,
                Some(other) => {
                    return Err(var.invalid(format!(
                        "`{other}` is not one of auto, redis, embedded, memory"
                    )));
                }
            };
            Ok(())
        },
    },
    Setting {
        name: "REDIS_URL",
        default: "—",
        doc: "Redis for threads shared across instances: `redis://[:password@]host:6379/0` (`rediss://` for TLS); a Redis Cluster as `redis+cluster://[:password@]host:port,host:port` (`rediss+cluster://` for TLS) or a comma-separated list of `redis://` URLs.",
        also_reads: &[],
        read: |var, c| {
            // After GEMINI_MCP_STORE in the table: `redis` needs a URL.
            c.redis_url = var.get().map(|u| Secret::new(u.trim()));
            if let Some(url) = &c.redis_url {
                // Checked here for a clear error at start; the message never holds the value.
                crate::store::redis::connection::Target::parse(url.expose())
                    .map_err(|e| var.invalid(format!("the URL {}", e.reason())))?;
            }
            if c.store == StoreChoice::Redis && c.redis_url.is_none() {
                return Err(var.invalid(format!(
                    "GEMINI_MCP_STORE=redis needs {} (e.g. redis://127.0.0.1:6379/0)",
                    var.name
                )));
            }
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_KEY_PREFIX",
        default: "gemini-mcp",
        doc: "Prefix of every Redis key, one per deployment.",
        also_reads: &[],
        read: |var, c| {
            c.key_prefix = trimmed(var.get(), "gemini-mcp");
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_REDIS_WAIT_REPLICAS",
        default: "0",
        doc: "Replicas that must confirm each turn (Redis `WAIT`, up to 2 s) before it is acknowledged; set it to the replicas each master has so a failover loses no acknowledged turn. 0: acknowledged once the master has it.",
        also_reads: &[],
        read: |var, c| {
            c.redis_wait_replicas = var.parse(0)?;
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_REDIS_CA_FILE",
        default: "—",
        doc: "PEM file of the CA that signed Redis's TLS certificate (a private CA, as Memorystore's); when set, TLS to Redis trusts it instead of the system's roots.",
        also_reads: &[],
        read: |var, c| {
            c.redis_ca_file = var.get().map(|p| var.cwd().join(p.trim()));
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_STATE_DIR",
        default: "$XDG_STATE_HOME/gemini-mcp",
        doc: "Directory of the embedded thread store (on Windows `%LOCALAPPDATA%\\gemini-mcp`).",
        also_reads: &["XDG_STATE_HOME", "HOME", "LOCALAPPDATA"],
        read: |var, c| {
            c.state_dir = match var.get() {
                Some(dir) => var.cwd().join(dir),
                None => default_state_dir(var).ok_or_else(|| {
                    var.invalid(format!(
                        "no state or home directory is known; set {}",
                        var.name
                    ))
                })?,
            };
            Ok(())
        },
    },
    Setting {
        name: "CONVERSATION_TIMEOUT_HOURS",
        default: "3",
        doc: "Thread lifetime after its last turn.",
        also_reads: &[],
        read: |var, c| {
            let hours: f64 = var.parse(3.0)?;
            if !(hours.is_finite() && hours > 0.0) {
                return Err(var.invalid("must be a positive number of hours"));
            }
            c.thread_ttl = Duration::from_secs_f64(hours * 3600.0);
            Ok(())
        },
    },
    Setting {
        name: "MAX_CONVERSATION_TURNS",
        default: "20",
        doc: "Turns (calls) per thread.",
        also_reads: &[],
        read: |var, c| {
            c.max_turns = var.parse(20)?;
            if c.max_turns == 0 {
                return Err(var.invalid("must be at least 1"));
            }
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_SHARE_THREADS_ACROSS_PROJECTS",
        default: "0",
        doc: "`1`: a thread started under other roots (`PROJECT_ROOT`) may be continued here; by default it is refused, naming its project.",
        also_reads: &[],
        read: |var, c| {
            c.share_threads_across_projects = var.flag()?;
            Ok(())
        },
    },
    Setting {
        name: "DISABLED_TOOLS",
        default: "—",
        doc: "Comma-separated tools to hide, e.g. `thinkdeep,debug`.",
        also_reads: &[],
        // Kept as written: the edge checks the names against the tools' table
        // (`tools::spec::check_settings`).
        read: |var, c| {
            c.disabled_tools = var.list();
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_COMPAT",
        default: "—",
        doc: "Compatibility profiles, comma-separated: `cli-wrapper` (the Gemini CLI wrapper's `chat` with `systemPrompt` and `cwd`, and `chat-reply` with `sessionId`) and `acp-bridge` (the ACP bridge's `gemini`, `list_models`, `list_sessions`, `reset_session`). Off: `tools/list` holds only this server's tools.",
        also_reads: &[],
        read: |var, c| {
            c.compat = Vec::new();
            for p in var.list() {
                let profile = match p.as_str() {
                    "cli-wrapper" => super::Compat::CliWrapper,
                    "acp-bridge" => super::Compat::AcpBridge,
                    other => {
                        return Err(var.invalid(format!(
                            "`{other}` is not a profile; use cli-wrapper and/or acp-bridge"
                        )));
                    }
                };
                if !c.compat.contains(&profile) {
                    c.compat.push(profile);
                }
            }
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_SECRET_FILES",
        default: "—",
        doc: "Extra comma-separated globs (file name, or path below the root) of secret files: never read, in walks, requests and git changes.",
        also_reads: &[],
        read: |var, c| {
            c.secret_globs = var.list();
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_INCLUDE",
        default: "—",
        doc: "Comma-separated globs; directory walks keep only matching files.",
        also_reads: &[],
        read: |var, c| {
            c.include_globs = var.list();
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_EXCLUDE",
        default: "—",
        doc: "Comma-separated globs skipped in directory walks.",
        also_reads: &[],
        read: |var, c| {
            c.exclude_globs = var.list();
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_HTTP_TOKEN",
        default: "—",
        doc: "Bearer token for the HTTP transport, required unless it listens on loopback; several (one per client) separated by commas. Or `GEMINI_MCP_HTTP_TOKEN_FILE`: a file with one per line.",
        also_reads: &["GEMINI_MCP_HTTP_TOKEN_FILE"],
        read: |var, c| {
            c.http_tokens = token_list(var, "GEMINI_MCP_HTTP_TOKEN_FILE")?;
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_HTTP_ALLOWED_HOSTS",
        default: "—",
        doc: "Public host names (or `host:port`) accepted in the `Host` header besides `localhost`, `127.0.0.1`, `::1`; `*` accepts any.",
        also_reads: &[],
        read: |var, c| {
            c.http.allowed_hosts = any_or_list(var);
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_HTTP_ALLOWED_ORIGINS",
        default: "—",
        doc: "Browser origins (e.g. `https://app.example.com:443`) accepted besides loopback ones; requests without `Origin` pass; `*` accepts any.",
        also_reads: &[],
        read: |var, c| {
            c.http.allowed_origins = any_or_list(var);
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_HTTP_MAX_BODY_BYTES",
        default: "4194304",
        doc: "Largest HTTP request body; larger ones get 413.",
        also_reads: &[],
        read: |var, c| {
            c.http.max_body_bytes = var.parse(4 * 1024 * 1024)?;
            if c.http.max_body_bytes < 1024 {
                return Err(var.invalid("must be at least 1024 bytes"));
            }
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_HTTP_CLIENT_CONCURRENCY",
        default: "16",
        doc: "Tool calls in flight at once per client (per token, or per peer address without a token).",
        also_reads: &[],
        read: |var, c| {
            c.http.client_concurrency = var.parse(16)?;
            if c.http.client_concurrency == 0 {
                return Err(var.invalid("must be at least 1"));
            }
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_HTTP_MAX_SESSIONS_PER_CLIENT",
        default: "32",
        doc: "Live legacy (`Mcp-Session-Id`) sessions per client and instance; opening one more closes the client's least recently used idle one, or is refused (429) when all are answering calls.",
        also_reads: &[],
        read: |var, c| {
            c.http.max_sessions_per_client = var.parse(32)?;
            if c.http.max_sessions_per_client == 0 {
                return Err(var.invalid("must be at least 1"));
            }
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_RATE_LIMITS",
        // The tools' table's own rates (`tools::spec`, whose test checks this text).
        default: "HTTP: `codereview=5/min,precommit=3/min,debug=5/min,analyze=5/min,thinkdeep=3/min,investigate=3/min,chat=10/min`; stdio: `off`",
        doc: "Per-tool rate limits per client and instance: `tool=N/unit` items (unit `s`, `min` or `h`), comma-separated, replacing the default; or `off`.",
        also_reads: &[],
        read: |var, c| {
            c.rate_limits = match var.get() {
                None => None,
                Some(raw) => Some(raw.parse::<RateLimits>().map_err(|e| var.invalid(e))?),
            };
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_HTTP_SHUTDOWN_SECS",
        default: "30",
        doc: "On SIGTERM/SIGINT, how long calls in flight may take to finish before the server exits.",
        also_reads: &[],
        read: |var, c| {
            c.http.shutdown_grace = var.secs(30)?;
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_METRICS_TOKEN",
        default: "—",
        doc: "Bearer token for `/metrics` (Prometheus), apart from the clients' tokens; several separated by commas. Or `GEMINI_MCP_METRICS_TOKEN_FILE`: one per line. Unset: `/metrics` takes a client's `GEMINI_MCP_HTTP_TOKEN`, or no token when there is none (loopback only).",
        also_reads: &["GEMINI_MCP_METRICS_TOKEN_FILE"],
        read: |var, c| {
            c.http.metrics_tokens = token_list(var, "GEMINI_MCP_METRICS_TOKEN_FILE")?;
            Ok(())
        },
    },
    Setting {
        name: "GEMINI_MCP_CONFIG",
        default: "—",
        doc: "A TOML file with any of these settings as keys; the environment wins.",
        also_reads: &[],
        read: |_, _| {
            // Read first, by `Config::load`: it names the file the others may come from.
            Ok(())
        },
    },
];

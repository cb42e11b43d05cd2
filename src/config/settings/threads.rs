//! Where threads live and for how long: the store, Redis, the embedded store's directory, a
//! thread's lifetime and turns (`store::Settings`), and which threads a call may continue
//! (`CallSettings`).

use std::time::Duration;

use super::row::Read::{Calls, Threads};
use super::row::{Category, Group, ROW, Setting};
use crate::config::{Secret, StoreChoice};

pub(super) const GROUP: Group = Group {
    category: Category::Threads,
    rows: &[
        Setting {
            name: "GEMINI_MCP_STORE",
            default: "auto",
            doc: "Thread store: `auto` (Redis if `REDIS_URL`, else embedded), `redis`, `embedded`, `memory`.",
            read: Threads(|var, t| {
                t.store = match var.value().as_deref().map(str::trim) {
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
            }),
            ..ROW
        },
        Setting {
            name: "REDIS_URL",
            default: "—",
            doc: "Redis for threads shared across instances: `redis://[:password@]host:6379/0` (`rediss://` for TLS); a Redis Cluster as `redis+cluster://[:password@]host:port,host:port` (`rediss+cluster://` for TLS) or a comma-separated list of `redis://` URLs.",
            read: Threads(|var, t| {
                // After GEMINI_MCP_STORE: `redis` needs a URL.
                t.redis_url = var.get().map(|u| Secret::new(u.trim()));
                if let Some(url) = &t.redis_url {
                    // Checked here for a clear error at start; the message never holds the value.
                    crate::store::redis::connection::Target::parse(url.expose())
                        .map_err(|e| var.invalid(format!("the URL {}", e.reason())))?;
                }
                if t.store == StoreChoice::Redis && t.redis_url.is_none() {
                    return Err(var.invalid(format!(
                        "GEMINI_MCP_STORE=redis needs {} (e.g. redis://127.0.0.1:6379/0)",
                        var.name()
                    )));
                }
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_KEY_PREFIX",
            default: "gemini-mcp",
            doc: "Prefix of every Redis key, one per deployment.",
            read: Threads(|var, t| {
                t.key_prefix = var.value().unwrap_or_default().trim().to_string();
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_REDIS_WAIT_REPLICAS",
            default: "0",
            doc: "Replicas that must confirm each turn (Redis `WAIT`, up to 2 s) before it is acknowledged; set it to the replicas each master has so a failover loses no acknowledged turn. 0: acknowledged once the master has it.",
            read: Threads(|var, t| {
                t.redis_wait_replicas = var.parse()?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_REDIS_CA_FILE",
            default: "—",
            doc: "PEM file of the CA that signed Redis's TLS certificate (a private CA, as Memorystore's); when set, TLS to Redis trusts it instead of the system's roots.",
            read: Threads(|var, t| {
                t.redis_ca_file = var.get().map(|p| var.cwd().join(p.trim()));
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_STATE_DIR",
            default: "$XDG_STATE_HOME/gemini-mcp",
            derived: true,
            doc: "Directory of the embedded thread store (on Windows `%LOCALAPPDATA%\\gemini-mcp`).",
            also_reads: &["XDG_STATE_HOME", "HOME", "LOCALAPPDATA"],
            read: Threads(|var, t| {
                t.state_dir = match var.get() {
                    Some(dir) => var.cwd().join(dir),
                    None => crate::config::default_state_dir(var).ok_or_else(|| {
                        var.invalid(format!(
                            "no state or home directory is known; set {}",
                            var.name()
                        ))
                    })?,
                };
                Ok(())
            }),
        },
        Setting {
            name: "CONVERSATION_TIMEOUT_HOURS",
            default: "3",
            doc: "Thread lifetime after its last turn.",
            read: Threads(|var, t| {
                t.ttl = Duration::from_secs_f64(var.positive("hours")? * 3600.0);
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "MAX_CONVERSATION_TURNS",
            default: "20",
            doc: "Turns (calls) per thread.",
            read: Threads(|var, t| {
                t.max_turns = var.at_least(1, "")?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_SHARE_THREADS_ACROSS_PROJECTS",
            default: "0",
            doc: "`1`: a thread started under other roots (`PROJECT_ROOT`) may be continued here; by default it is refused, naming its project.",
            read: Calls(|var, c| {
                c.share_threads_across_projects = var.flag()?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_CONTEXT_CACHE",
            default: "1",
            doc: "Explicit context caching (Gemini API, and Vertex AI with a project): a continued thread's system instruction and earlier turns are kept in a cache at Google and later turns send only what is new, at the cached-token price plus storage; so are a first call's system instruction, files and diff once another call of the same client sent them too (a review re-run over an unchanged change); `0` turns it off.",
            read: Calls(|var, c| {
                c.context_cache = var.flag()?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_CONTEXT_CACHE_TTL_SECS",
            default: "600",
            doc: "Longest a context cache is kept at Google (storage is billed per hour); never past the thread's own expiry. Also how long a first call's front is remembered as seen: a second call sending it within this time makes a cache of it.",
            read: Calls(|var, c| {
                c.context_cache_ttl = var.at_least(60.0, "seconds").map(std::time::Duration::from_secs_f64)?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_CONSENSUS_MODELS",
            default: "pro,flash",
            doc: "The models `models: [\"default\"]` (`--consensus`) asks at once, comma-separated, each optionally `:for`, `:against` or `:neutral` (e.g. `pro:for,flash:against`); two to five.",
            read: Calls(|var, c| {
                let entries: Vec<String> = var
                    .value()
                    .unwrap_or_default()
                    .split(',')
                    .map(|e| e.trim().to_string())
                    .filter(|e| !e.is_empty())
                    .collect();
                c.consensus_models = crate::seats::parse(&entries).map_err(|e| match e.entry {
                    Some(i) => var.invalid(format!("entry {}: {}", i + 1, e.message)),
                    None => var.invalid(e.message),
                })?;
                Ok(())
            }),
            ..ROW
        },
    ],
};

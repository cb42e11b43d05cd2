//! The Streamable HTTP transport: the clients' and `/metrics`' tokens, the hosts and origins
//! accepted, and the limits per request, client and shutdown (`HttpSettings`).

use super::row::Read::Http;
use super::row::{Category, Group, ROW, Setting, Var};
use crate::config::{ConfigError, Secret, tokens};

pub(super) const GROUP: Group = Group {
    category: Category::Http,
    rows: &[
        Setting {
            name: "GEMINI_MCP_HTTP_TOKEN",
            default: "—",
            doc: "Bearer token for the HTTP transport, required unless it listens on loopback; several (one per client) separated by commas. Or `GEMINI_MCP_HTTP_TOKEN_FILE`: a file with one per line.",
            also_reads: &["GEMINI_MCP_HTTP_TOKEN_FILE"],
            read: Http(|var, h| {
                h.tokens = token_list(var, "GEMINI_MCP_HTTP_TOKEN_FILE")?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_HTTP_ALLOWED_HOSTS",
            default: "—",
            doc: "Public host names (or `host:port`) accepted in the `Host` header besides `localhost`, `127.0.0.1`, `::1`; `*` accepts any.",
            read: Http(|var, h| {
                h.allowed_hosts = any_or_list(var);
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_HTTP_ALLOWED_ORIGINS",
            default: "—",
            doc: "Browser origins (e.g. `https://app.example.com:443`) accepted besides loopback ones; requests without `Origin` pass; `*` accepts any.",
            read: Http(|var, h| {
                h.allowed_origins = any_or_list(var);
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_HTTP_MAX_BODY_BYTES",
            default: "4194304",
            doc: "Largest HTTP request body; larger ones get 413.",
            read: Http(|var, h| {
                h.max_body_bytes = var.at_least(1024, " bytes")?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_HTTP_CLIENT_CONCURRENCY",
            default: "16",
            doc: "Tool calls in flight at once per client (per token, or per peer address without a token).",
            read: Http(|var, h| {
                h.client_concurrency = var.at_least(1, "")?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_HTTP_MAX_SESSIONS_PER_CLIENT",
            default: "32",
            doc: "Live legacy (`Mcp-Session-Id`) sessions per client and instance; opening one more closes the client's least recently used idle one, or is refused (429) when all are answering calls.",
            read: Http(|var, h| {
                h.max_sessions_per_client = var.at_least(1, "")?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_HTTP_SHUTDOWN_SECS",
            default: "30",
            doc: "On SIGTERM/SIGINT, how long calls in flight may take to finish before the server exits.",
            read: Http(|var, h| {
                h.shutdown_grace = var.secs()?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_METRICS_TOKEN",
            default: "—",
            doc: "Bearer token for `/metrics` (Prometheus), apart from the clients' tokens; several separated by commas. Or `GEMINI_MCP_METRICS_TOKEN_FILE`: one per line. Unset: `/metrics` takes a client's `GEMINI_MCP_HTTP_TOKEN`, or no token when there is none (loopback only).",
            also_reads: &["GEMINI_MCP_METRICS_TOKEN_FILE"],
            read: Http(|var, h| {
                h.metrics_tokens = token_list(var, "GEMINI_MCP_METRICS_TOKEN_FILE")?;
                Ok(())
            }),
            ..ROW
        },
    ],
};

/// Tokens from the setting (comma-separated), else from the file its `_FILE` variant names (one
/// per line; a regular file of at most 1 MiB), else none.
fn token_list(var: &Var<'_>, file_var: &'static str) -> Result<Vec<Secret>, ConfigError> {
    if let Some(t) = var.get() {
        return tokens(var.name(), &t, ',');
    }
    let Some(path) = var.os(file_var) else {
        return Ok(Vec::new());
    };
    let t = crate::setting_file::read_text(file_var, std::path::Path::new(&path))?;
    tokens(file_var, &t, '\n')
}

/// A comma-separated list, or `None` when it holds `*` (anything goes).
fn any_or_list(var: &Var<'_>) -> Option<Vec<String>> {
    let list = var.list();
    (!list.iter().any(|h| h == "*")).then_some(list)
}

//! `/metrics`: the app's metrics ([`crate::metrics`]) for Prometheus, in OpenMetrics when the
//! scraper asks for it (`Accept: application/openmetrics-text`, as Prometheus does), else in
//! the Prometheus text format.
//!
//! Who may read them: with `GEMINI_MCP_METRICS_TOKEN` set, only its bearer tokens (a scraper
//! need not hold a token that can spend Gemini quota, and a client's token cannot read the
//! metrics); without it, the same tokens as `/mcp` — none on loopback when none is configured,
//! the only case where the server runs without one. Tokens are compared in constant time as for
//! `/mcp` ([`Tokens`]). The metrics hold counts, durations and closed labels (tools, models,
//! outcomes), never a client's name, a prompt, a path or a secret. Like every route it answers
//! only a `Host` and `Origin` of the allowlist ([`super::rebinding`]), which takes the address
//! a scraper dials (scrapers address instances by IP).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use super::auth::{self, Tokens};
use crate::app::App;
use crate::metrics::Sampled;

/// Who may read `/metrics`.
#[derive(Clone)]
pub enum Access {
    /// Anyone who reaches it: no token is configured (the server is on loopback).
    Open,
    /// The clients' tokens (`GEMINI_MCP_HTTP_TOKEN`).
    Clients(Arc<Tokens>),
    /// Its own tokens (`GEMINI_MCP_METRICS_TOKEN`).
    Own(Arc<Tokens>),
}

impl Access {
    /// The access of a server whose clients hold `clients` and whose metrics tokens are `own`.
    pub fn new(clients: Arc<Tokens>, own: &[crate::config::Secret]) -> Access {
        match (own.is_empty(), clients.is_empty()) {
            (false, _) => Access::Own(Arc::new(Tokens::new(own))),
            (true, false) => Access::Clients(clients),
            (true, true) => Access::Open,
        }
    }

    /// For the server's greeting.
    pub fn describe(&self) -> &'static str {
        match self {
            Access::Open => "no token on loopback",
            Access::Clients(_) => "a client's token",
            Access::Own(_) => "GEMINI_MCP_METRICS_TOKEN",
        }
    }

    /// Whether `req` may read the metrics; if not, why, and the setting that holds the tokens.
    fn check(&self, req: &Request) -> Result<(), (auth::Denied, &'static str)> {
        let (tokens, setting) = match self {
            Access::Open => return Ok(()),
            Access::Clients(t) => (t, "GEMINI_MCP_HTTP_TOKEN"),
            Access::Own(t) => (t, "GEMINI_MCP_METRICS_TOKEN"),
        };
        let presented = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes);
        tokens
            .check(presented)
            .map(|_| ())
            .map_err(|denied| (denied, setting))
    }
}

/// What `/metrics` needs.
#[derive(Clone)]
pub struct Scrape {
    pub app: Arc<App>,
    pub access: Access,
    /// The legacy sessions live on this instance.
    pub sessions: Arc<LocalSessionManager>,
}

pub async fn metrics(State(scrape): State<Scrape>, req: Request) -> Response {
    if let Err((denied, setting)) = scrape.access.check(&req) {
        return auth::unauthorized_for(denied, setting);
    }
    let openmetrics = req
        .headers()
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let sampled = Sampled {
        in_flight: scrape.app.in_flight(),
        sessions: scrape.sessions.sessions.read().await.len(),
        acp_processes: scrape.app.agents().map_or(0, |pool| pool.alive()),
    };
    let body = scrape.app.metrics().encode(sampled, openmetrics);
    (
        [(
            header::CONTENT_TYPE,
            crate::metrics::content_type(openmetrics),
        )],
        body,
    )
        .into_response()
}

//! The Streamable HTTP transport: `gemini-mcp serve --http ADDR`. rmcp's `StreamableHttpService`
//! at `/mcp` in axum, behind a bearer-token check, plus `/healthz`, `/readyz` and `/metrics`.
//!
//! Any instance answers any request: 2026-07-28 requests are stateless, and legacy sessions
//! (`Mcp-Session-Id`) are restored from Redis on an instance that did not create them
//! ([`sessions`]); conversations live in the shared thread store. What is per instance: the rate
//! and concurrency limits ([`crate::admission`]) and live SSE streams.
//!
//! Defences: a token is required whenever the bound address is not loopback (startup refuses
//! otherwise) and, once configured, on every `/mcp` request; `Host` and `Origin` are checked
//! against allowlists on every route (DNS rebinding, [`rebinding`]); bodies over
//! `GEMINI_MCP_HTTP_MAX_BODY_BYTES` get 413; tool calls pass the admission gate (per-client
//! concurrency, per-tool rates); request headers over [`MAX_HEADER_BYTES`] in total get 431 on
//! every route; a legacy session answers only the client that opened it, and each client keeps
//! at most `GEMINI_MCP_HTTP_MAX_SESSIONS_PER_CLIENT` live, a session answering a request never
//! being the one closed ([`sessions::SessionOwners`]); threads belong to the token that started
//! them; `/metrics` takes `GEMINI_MCP_METRICS_TOKEN` when set, else the clients' tokens
//! ([`metrics`]).
//!
//! Shutdown (SIGTERM or SIGINT): the listener closes, idle connections close, the gate refuses
//! new tool calls, standalone SSE streams end (clients reconnect elsewhere), and calls in flight
//! run to completion, their thread turn written, for up to `GEMINI_MCP_HTTP_SHUTDOWN_SECS`; then
//! the rest is cancelled and the process exits 0. A second signal cuts the wait short.

mod auth;
mod health;
mod metrics_endpoint;
mod rebinding;
mod sep1686;
mod sessions;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt;
use rmcp::model::{ErrorCode, ErrorData, JsonRpcMessage, RequestId, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::SessionStore;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::config::Config;
use crate::jsonrpc::Screened;
use crate::admission::RateLimits;
use crate::server::Server;
use crate::shutdown::Shutdown;
use auth::Tokens;

/// The legacy session header.
const SESSION_HEADER: &str = "mcp-session-id";
/// How often idle clients are forgotten by the rate limiters.
const HOUSEKEEPING: Duration = Duration::from_secs(60);
/// The most a request's headers (names, values and request target together) may take: well
/// above any MCP client's and proxy's, small enough that headers cannot be used to fill memory.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;
/// JSON-RPC code of a new legacy session refused over the per-client cap.
const OVER_SESSION_CAP: ErrorCode = ErrorCode(-32000);
/// After the grace period, how long cancelled calls get to unwind before the process exits.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// What the `/mcp` guard needs.
#[derive(Clone)]
struct Guard {
    tokens: Arc<Tokens>,
    /// `GEMINI_MCP_HTTP_MAX_BODY_BYTES`.
    max_body: usize,
    /// The request ids being answered in each legacy session.
    in_flight: Arc<Mutex<HashSet<(String, RequestId)>>>,
    sessions: Arc<sessions::SessionOwners>,
    /// Cancelled when the server starts shutting down.
    draining: CancellationToken,
}

/// Serves MCP over Streamable HTTP on `addr` until `shutdown` is requested. Exit codes: 0 after
/// a shutdown, 1 if the server failed while running, 2 if it could not start.
pub async fn serve(config: Arc<Config>, addr: &str, shutdown: Shutdown) -> ExitCode {
    match start(config, addr).await {
        Ok(running) => running.run(shutdown).await,
        Err(code) => code,
    }
}

/// A server listening, with what its shutdown needs.
struct Running {
    config: Arc<Config>,
    app: Arc<App>,
    serving: tokio::task::JoinHandle<std::io::Result<()>>,
    housekeeping: tokio::task::JoinHandle<()>,
    /// Cancelled: every session and stream ends (after the grace period).
    stop: CancellationToken,
    /// Cancelled: no new connections or calls.
    draining: CancellationToken,
    /// The MCP tasks this instance runs: failed, saying why, when the grace is over.
    tasks: Arc<crate::server::tasks::Tasks>,
}

/// Binds, starts the app and the routes, and says where it serves; on failure, what went
/// wrong is on stderr and the exit code is returned.
async fn start(config: Arc<Config>, addr: &str) -> Result<Running, ExitCode> {
    let (listener, local) = bind(addr).await?;
    let tokens = Arc::new(Tokens::new(&config.http.tokens));
    if tokens.is_empty() && !local.ip().is_loopback() {
        crate::term::say!(
            "gemini-mcp: refusing to serve HTTP on {local} without a token: it is not a loopback address, so anyone \
             who can reach it could use your Gemini quota and read the files under PROJECT_ROOT. Set \
             GEMINI_MCP_HTTP_TOKEN (or GEMINI_MCP_HTTP_TOKEN_FILE), e.g. `export GEMINI_MCP_HTTP_TOKEN=$(openssl rand -hex 32)`, \
             and have clients send `Authorization: Bearer <token>`; or listen on 127.0.0.1"
        );
        return Err(ExitCode::from(2));
    }
    let rates = config
        .tools
        .rate_limits
        .clone()
        .unwrap_or_else(crate::tools::spec::default_rate_limits);
    let app = match App::start(config.clone()).await {
        Ok(app) => Arc::new(app.with_limits(&rates, Some(config.http.client_concurrency))),
        Err(e) => {
            crate::term::say!("gemini-mcp: {e}");
            return Err(ExitCode::from(2));
        }
    };
    let redis_sessions = redis_sessions(&config, &app).await?;
    let shared_sessions = redis_sessions.is_some();
    let session_store = redis_sessions.clone().map(|s| s as Arc<dyn SessionStore>);
    let manager = Arc::new(LocalSessionManager::default());
    let scrape = metrics_endpoint::Scrape {
        app: app.clone(),
        access: metrics_endpoint::Access::new(tokens.clone(), &config.http.metrics_tokens),
        sessions: manager.clone(),
    };
    let metrics_access = scrape.access.describe();
    let session_owners = Arc::new(sessions::SessionOwners::new(
        manager.clone(),
        redis_sessions,
        config.http.max_sessions_per_client,
    ));

    let server = Server::new(app.clone());
    let tasks = server.tasks().clone();

    let stop = CancellationToken::new();
    let draining = CancellationToken::new();
    let mut mcp = mcp_config(&config, &stop);
    mcp.session_store = session_store;
    let service = StreamableHttpService::new(move || Ok(server.clone()), manager, mcp);

    let guard = Guard {
        tokens: tokens.clone(),
        max_body: config.http.max_body_bytes,
        in_flight: Arc::default(),
        sessions: session_owners,
        draining: draining.clone(),
    };
    let routes = Router::new()
        .route_service("/mcp", service)
        .layer(middleware::from_fn_with_state(guard, guard_mcp))
        .merge(
            Router::new()
                .route("/healthz", get(health::healthz))
                .route("/readyz", get(health::readyz))
                .with_state(app.clone()),
        )
        .merge(
            Router::new()
                .route("/metrics", get(metrics_endpoint::metrics))
                .with_state(scrape),
        )
        .layer(middleware::from_fn_with_state(
            Arc::new(rebinding::Allowlist::new(
                config.http.allowed_hosts.as_deref(),
                config.http.allowed_origins.as_deref(),
            )),
            rebinding::check,
        ))
        .layer(middleware::from_fn(limit_headers));
    announce(
        &config,
        local,
        &tokens,
        &rates,
        shared_sessions,
        metrics_access,
    );

    let serving = axum::serve(
        listener,
        routes.into_make_service_with_connect_info::<rebinding::Connection>(),
    )
    .with_graceful_shutdown(draining.clone().cancelled_owned());
    let serving = tokio::spawn(serving.into_future());
    let housekeeping = tokio::spawn({
        let app = app.clone();
        async move {
            let mut tick = tokio::time::interval(HOUSEKEEPING);
            loop {
                tick.tick().await;
                app.forget_idle_clients();
            }
        }
    });
    Ok(Running {
        config,
        app,
        serving,
        housekeeping,
        stop,
        draining,
        tasks,
    })
}

async fn bind(addr: &str) -> Result<(tokio::net::TcpListener, SocketAddr), ExitCode> {
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            crate::term::say!("gemini-mcp: cannot listen on {addr}: {e}");
            return Err(ExitCode::from(2));
        }
    };
    match listener.local_addr() {
        Ok(local) => Ok((listener, local)),
        Err(e) => {
            crate::term::say!("gemini-mcp: cannot read the address bound for {addr}: {e}");
            Err(ExitCode::from(2))
        }
    }
}

/// The legacy sessions' shared store when threads are in Redis: every instance then knows every
/// session.
async fn redis_sessions(
    config: &Config,
    app: &App,
) -> Result<Option<Arc<sessions::RedisSessions>>, ExitCode> {
    match (app.store_kind(), &config.threads.redis_url) {
        ("redis", Some(url)) => {
            match sessions::RedisSessions::connect(
                url,
                &config.threads.key_prefix,
                config.threads.redis_ca_file.as_deref(),
            )
            .await
            {
                Ok(s) => Ok(Some(Arc::new(s))),
                Err(e) => {
                    crate::term::say!("gemini-mcp: {e}");
                    Err(ExitCode::from(2))
                }
            }
        }
        _ => Ok(None),
    }
}

/// rmcp's Streamable HTTP settings: JSON responses, the body limit, and the token whose
/// cancellation ends every session. Its own Host and Origin checks are off: every route runs
/// [`rebinding`]'s, `/mcp` included.
fn mcp_config(config: &Config, stop: &CancellationToken) -> StreamableHttpServerConfig {
    StreamableHttpServerConfig::default()
        .with_cancellation_token(stop.child_token())
        .with_json_response(true)
        .with_max_request_body_bytes(config.http.max_body_bytes)
        .disable_allowed_hosts()
        .disable_allowed_origins()
}

/// Says on stderr where the server listens and how it is set up.
fn announce(
    config: &Config,
    local: SocketAddr,
    tokens: &Tokens,
    rates: &RateLimits,
    shared_sessions: bool,
    metrics_access: &str,
) {
    crate::term::say!(
        "gemini-mcp: serving MCP over Streamable HTTP at http://{local}/mcp (health: /healthz, /readyz; metrics: /metrics with {metrics_access}; token {}; rate limits {rates}; legacy sessions {})",
        if tokens.is_empty() {
            "not required on loopback"
        } else {
            "required"
        },
        if shared_sessions {
            "shared through Redis"
        } else {
            "kept per instance"
        },
    );
    if config
        .http
        .allowed_hosts
        .as_ref()
        .is_some_and(Vec::is_empty)
        && local.ip().is_unspecified()
    {
        crate::term::say!(
            "gemini-mcp: note: only loopback names and the address a client dials are accepted in the Host header; set GEMINI_MCP_HTTP_ALLOWED_HOSTS to the host names clients use"
        );
    }
}

impl Running {
    /// Serves until the server fails or a shutdown is requested; then drains: no new connections
    /// or calls, calls in flight finish within the grace period (a second request cuts it
    /// short), and what is still running after it is cancelled.
    async fn run(mut self, mut shutdown: Shutdown) -> ExitCode {
        tokio::select! {
            r = &mut self.serving => {
                self.housekeeping.abort();
                self.stop.cancel();
                return match r {
                    Ok(Ok(())) => ExitCode::SUCCESS,
                    Ok(Err(e)) => { crate::term::say!("gemini-mcp: the HTTP server failed: {e}"); ExitCode::from(1) }
                    Err(e) => { crate::term::say!("gemini-mcp: the HTTP server failed: {e}"); ExitCode::from(1) }
                };
            }
            _ = shutdown.requested() => {}
        }

        let grace = self.config.http.shutdown_grace;
        tracing::info!(
            in_flight = self.app.in_flight(),
            "shutting down: waiting up to {} s for calls in flight",
            grace.as_secs_f64()
        );
        let deadline = tokio::time::Instant::now() + grace;
        let drained = self.app.drain(grace);
        self.draining.cancel();
        let serving = &mut self.serving;
        let finished = tokio::select! {
            finished = async {
                // Then the connections, within the same grace: the last answers are written out.
                drained.await && tokio::time::timeout_at(deadline, serving).await.is_ok()
            } => finished,
            _ = shutdown.requested() => false,
        };
        self.housekeeping.abort();
        if !finished {
            tracing::warn!(
                cut = self.app.in_flight(),
                "grace period over: cancelling what is still in flight"
            );
            self.stop.cancel();
            self.app.abort();
            self.tasks.abandon(CANCEL_GRACE).await;
            let _ = tokio::time::timeout(CANCEL_GRACE, &mut self.serving).await;
        }
        self.stop.cancel();
        if finished {
            tracing::info!("every call finished; stopped");
        }
        ExitCode::SUCCESS
    }
}

/// Request headers over [`MAX_HEADER_BYTES`] in total: 431, before anything else reads them.
async fn limit_headers(req: Request, next: Next) -> Response {
    let size = req.uri().to_string().len()
        + req
            .headers()
            .iter()
            .map(|(k, v)| k.as_str().len() + v.len() + 4)
            .sum::<usize>();
    if size > MAX_HEADER_BYTES {
        let body = serde_json::json!({
            "error": "request_header_fields_too_large",
            "message": format!(
                "the request headers take {size} bytes; this server accepts at most {MAX_HEADER_BYTES} in total"
            ),
        });
        return (
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            axum::Json(body),
        )
            .into_response();
    }
    next.run(req).await
}

/// A POSTed message that rmcp would refuse without a JSON-RPC answer (valid JSON serde cannot
/// hold) is answered here, 400 with the error; lone surrogate escapes are read as U+FFFD
/// ([`crate::jsonrpc`]). Bodies over `max_body` get 413 before they are parsed.
/// Also returns the id when the body is a request.
async fn screen_body(
    req: Request,
    max_body: usize,
) -> Result<(Request, Option<RequestId>, Option<String>), Response> {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, max_body).await.map_err(|_| {
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Payload Too Large: request body exceeds {max_body} bytes"),
        )
            .into_response()
    })?;
    let (bytes, id, method) = match crate::jsonrpc::screen(&bytes) {
        Screened::Answer(answer) => {
            return Err((StatusCode::BAD_REQUEST, axum::Json(answer)).into_response());
        }
        Screened::Message { message, fixed } => {
            let (id, method) = match &message {
                JsonRpcMessage::Request(r) => {
                    (Some(r.id.clone()), Some(r.request.method().to_string()))
                }
                _ => (None, None),
            };
            (fixed.map(bytes::Bytes::from).unwrap_or(bytes), id, method)
        }
        Screened::Ignore => (bytes, None, None),
    };
    Ok((Request::from_parts(parts, Body::from(bytes)), id, method))
}

/// A request id in flight in a legacy session, freed when its response body is done with.
struct InFlight {
    set: Arc<Mutex<HashSet<(String, RequestId)>>>,
    key: (String, RequestId),
}

impl InFlight {
    /// Marks `key` in flight; `None` when it already is.
    fn claim(
        set: &Arc<Mutex<HashSet<(String, RequestId)>>>,
        key: (String, RequestId),
    ) -> Option<InFlight> {
        let fresh = set
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone());
        fresh.then(|| InFlight {
            set: set.clone(),
            key,
        })
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.set
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.key);
    }
}

/// `-32600` "id already in use" for a request whose id is still being answered in its session
/// (see [`crate::jsonrpc`] for why the second is refused rather than run).
fn id_in_use(id: RequestId) -> Response {
    let answer = ServerJsonRpcMessage::error(
        ErrorData::invalid_request(
            format!(
                "id already in use: request {id} is still being answered in this session; send each request with a new id"
            ),
            None,
        ),
        Some(id),
    );
    (StatusCode::BAD_REQUEST, axum::Json(answer)).into_response()
}

/// A new session refused because each of the client's others is answering a request: 429 with
/// a JSON-RPC error naming the setting (`data.setting`, `data.cap`).
fn over_cap(over: sessions::OverCap, id: Option<RequestId>) -> Response {
    let data = serde_json::json!({
        "setting": "GEMINI_MCP_HTTP_MAX_SESSIONS_PER_CLIENT",
        "cap": over.cap,
    });
    let answer = ServerJsonRpcMessage::error(
        ErrorData::new(OVER_SESSION_CAP, over.to_string(), Some(data)),
        id,
    );
    (StatusCode::TOO_MANY_REQUESTS, axum::Json(answer)).into_response()
}

/// Every `/mcp` request: the token check (and the caller's identity for the limits and for the
/// threads and sessions it may use), then rmcp. A legacy session opened by another client is
/// answered 404, as an unknown one. A standalone SSE stream (`GET`) is ended when the server
/// starts draining, so that shutdown waits only for real calls; the client reconnects, to another
/// instance if there is one.
async fn guard_mcp(State(guard): State<Guard>, mut req: Request, next: Next) -> Response {
    let (client, owner) = match guard.tokens.identify(&req) {
        Ok(c) => c,
        Err(denied) => return auth::unauthorized(denied),
    };
    let session = req
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let method = req.method().clone();
    // A POST marks its session busy until its answer is sent: a busy session is never evicted.
    let mut busy = None;
    if let Some(id) = &session {
        match guard.sessions.enter(id, &owner).await {
            Some(b) if method == Method::POST => busy = Some(b),
            Some(_) => {}
            None => {
                return (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response();
            }
        }
    }
    req.extensions_mut().insert(client);
    req.extensions_mut().insert(owner.clone());
    let mut claimed = None;
    let mut request_id = None;
    let mut rpc_method = None;
    if method == Method::POST {
        (req, request_id, rpc_method) = match screen_body(req, guard.max_body).await {
            Ok(r) => r,
            Err(answer) => return answer,
        };
        if let (Some(session), Some(id)) = (&session, &request_id) {
            match InFlight::claim(&guard.in_flight, (session.clone(), id.clone())) {
                Some(c) => claimed = Some(c),
                None => return id_in_use(id.clone()),
            }
        }
    }
    let sep1686 = sep1686::concerns(rpc_method.as_deref(), req.headers());
    let mut resp = sessions::REQUEST_OWNER
        .scope(owner.clone(), next.run(req))
        .await;
    if sep1686 {
        resp = sep1686::rewrite(resp).await;
    }
    match (&session, resp.headers().get(SESSION_HEADER)) {
        (None, Some(opened)) => {
            if let Ok(opened) = opened.to_str()
                && let Err(over) = guard.sessions.opened(opened, &owner).await
            {
                guard.sessions.close(opened).await;
                return over_cap(over, request_id);
            }
        }
        (Some(id), _) if method == Method::DELETE && resp.status().is_success() => {
            guard.sessions.closed(id);
        }
        _ => {}
    }
    if claimed.is_some() || busy.is_some() {
        // Freed once the answer has been sent (or the client went away).
        let (parts, body) = resp.into_parts();
        let stream = body.into_data_stream().map(move |chunk| {
            let _held = (&claimed, &busy);
            chunk
        });
        return Response::from_parts(parts, Body::from_stream(stream));
    }
    if method != Method::GET {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let stream = body
        .into_data_stream()
        .take_until(guard.draining.cancelled_owned());
    Response::from_parts(parts, Body::from_stream(stream))
}

//! The REST API backend, Gemini API and Vertex AI (`vertex`): one `reqwest` client (rustls, pooled connections) speaking the wire
//! format of `wire` to `generativelanguage.googleapis.com` or `GEMINI_BASE_URL`.
//!
//! It owns the transport concerns of a Gemini call: the key (only ever in the `x-goog-api-key`
//! header, marked sensitive), streaming (`:streamGenerateContent?alt=sse` read through
//! [`SseSplitter`]), timeouts (connect; a per-chunk idle timeout once the answer has begun to
//! arrive; the whole-call deadline, which alone bounds the silent thinking before the first chunk),
//! cancellation (`CallContext::cancel` drops the in-flight request), classifying failures into
//! [`GeminiError`]s that say what to do, and which of them are retried (see `retry`).
//!
//! Outcomes of a finished stream, in the order they are checked: a blocked prompt (no candidates,
//! `promptFeedback.blockReason`) → `Blocked`; text → success whatever the finish reason;
//! `MAX_TOKENS` without text → `MaxTokens`; `STOP` without text → one retry, then `Empty`; any
//! other reason without text → `Withheld` naming it. A stream that ends without a finish reason,
//! breaks, stalls, carries malformed JSON or a mid-stream error tail is retried while no answer
//! text has arrived, and is a `Malformed` (or `Stalled`) error after that.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use serde::de::DeserializeOwned;
use tokio::sync::OnceCell;
use tokio::time::Instant;
use tracing::Instrument;

mod background;
pub use background::settled;
pub mod cache;
mod files;
pub mod interactions;
mod retry;
mod sse;
mod stored;
mod stream_answer;
mod vertex;
pub mod wire;
mod words;

use retry::{Failure, RetryPolicy, Retryable};
use sse::SseSplitter;
use stream_answer::{Answer, strip_hint};
use wire::{ErrorBody, GenerateContentResponse};
use words::{canonical_status, excerpt};

use crate::gemini::models::ModelInfo;
use crate::gemini::settings::{ApiSurface, Settings, VertexSettings};
use crate::gemini::vocabulary::{
    CallContext, GeminiError, GenerateRequest, GenerateResponse, ServiceTier,
};
use crate::secret::Secret;

/// A `RetryInfo` delay longer than this is not waited for (gemini-cli's rule).
const MAX_RETRY_INFO_DELAY: Duration = Duration::from_secs(300);
/// Progress about the answer's growth at most this often.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);
/// Pages of `GET /v1beta/models` read at most (the list is a few dozen models).
const MAX_MODEL_PAGES: usize = 20;
/// The Gemini API's answer header naming the tier that served the call (Google's
/// priority-inference guide reads it to see a priority call served at standard).
const SERVED_TIER_HEADER: &str = "x-gemini-service-tier";

/// A tier as the Gemini API names it in [`SERVED_TIER_HEADER`] (`standard`, also the enum's
/// `SERVICE_TIER_STANDARD` spelling); `None` for one we do not know.
fn served_tier(raw: &str) -> Option<ServiceTier> {
    let raw = raw.trim();
    let bare = raw
        .get(..13)
        .filter(|p| p.eq_ignore_ascii_case("service_tier_"))
        .map_or(raw, |_| &raw[13..]);
    ServiceTier::parse(bare)
}

/// Which interface an attempt speaks, and so how its stream is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    GenerateContent,
    Interactions,
}

#[derive(Clone)]
pub struct ApiClient {
    /// Built on the first request, not at start: loading the system's root certificates was
    /// about a sixth of the server's start-up (BENCHMARKS.md § Start-up).
    http: std::sync::OnceLock<Result<reqwest::Client, String>>,
    /// The client's default headers (the key) and connect timeout, for that first build.
    headers: HeaderMap,
    connect_timeout: Duration,
    /// The key (sent by the client's default headers), or Application Default Credentials.
    auth: Auth,
    /// `<GEMINI_BASE_URL>/v1beta`, or Vertex AI's `…/publishers/google`.
    base: String,
    /// Vertex AI: the project and location, and the labels sent with each request.
    vertex: Option<VertexSettings>,
    /// The service tier asked for (`GEMINI_SERVICE_TIER`).
    tier: Option<ServiceTier>,
    /// Which interface carries the calls (`GEMINI_API_SURFACE`).
    surface: ApiSurface,
    /// `<GEMINI_BASE_URL>/v1/interactions` (the Gemini API only).
    interactions_url: String,
    /// Interactions are stored at Google (`GEMINI_MCP_INTERACTIONS_STORE`).
    store: bool,
    /// How background runs are polled and bounded (`GEMINI_MCP_DEEP_RESEARCH…`).
    research: crate::gemini::settings::ResearchSettings,
    policy: RetryPolicy,
    call_timeout: Duration,
    idle_timeout: Duration,
    /// The model list, fetched once.
    models: OnceCell<Vec<ModelInfo>>,
    /// Where retries are counted (`Gemini::with_metrics`).
    metrics: Option<std::sync::Arc<crate::metrics::Metrics>>,
}

/// How requests are authorised.
#[derive(Clone)]
enum Auth {
    /// An API key, in the `x-goog-api-key` default header.
    Key(Secret),
    /// Application Default Credentials: a bearer token per request, cached and refreshed by
    /// `google-cloud-auth` (one refresh at a time).
    Adc(google_cloud_auth::credentials::Credentials),
}

impl ApiClient {
    /// Vertex AI's settings, when this client reaches Vertex AI.
    pub fn vertex_settings(&self) -> Option<&VertexSettings> {
        self.vertex.as_ref()
    }

    /// Where calls go: `<GEMINI_BASE_URL>/v1beta`.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// Builds the HTTP client once; every call shares its connection pool. A proxy's
    /// credentials (`GEMINI_BASE_URL`'s user info) go in `Authorization`, marked sensitive.
    pub fn new(config: &Settings, key: Secret) -> Result<ApiClient, GeminiError> {
        let base = format!("{}/v1beta", config.base_url);
        let mut client = ApiClient::build(config, Auth::Key(key), base, None)?;
        if let Some(auth) = &config.base_authorization {
            let mut header =
                HeaderValue::from_str(auth.expose()).map_err(|_| GeminiError::NotConfigured {
                    message:
                        "GEMINI_BASE_URL's user info cannot be sent in an HTTP header: check it"
                            .into(),
                })?;
            header.set_sensitive(true);
            client
                .headers
                .insert(reqwest::header::AUTHORIZATION, header);
        }
        Ok(client)
    }

    fn build(
        config: &Settings,
        auth: Auth,
        base: String,
        vertex: Option<VertexSettings>,
    ) -> Result<ApiClient, GeminiError> {
        let mut headers = HeaderMap::new();
        if let Auth::Key(key) = &auth {
            let mut header = HeaderValue::from_str(key.expose()).map_err(|_| GeminiError::NotConfigured {
                message: "GEMINI_API_KEY contains characters that cannot be sent in an HTTP header: check it for quotes, spaces or line breaks".into(),
            })?;
            header.set_sensitive(true);
            headers.insert("x-goog-api-key", header);
        }
        let interactions_url = match &vertex {
            Some(v) => v.interactions_url(),
            None => format!("{}/v1/interactions", config.base_url),
        };
        Ok(ApiClient {
            http: std::sync::OnceLock::new(),
            headers,
            connect_timeout: config.connect_timeout,
            auth,
            base,
            vertex,
            tier: config.service_tier,
            surface: config.api_surface,
            interactions_url,
            store: config.interactions_store,
            research: config.research.clone(),
            policy: RetryPolicy {
                max_attempts: config.max_attempts.max(1),
                initial_delay: config.retry_initial_delay,
                max_delay: config.retry_max_delay,
            },
            call_timeout: config.call_timeout,
            idle_timeout: config.idle_timeout,
            models: OnceCell::new(),
            metrics: None,
        })
    }

    /// Counts this client's retries in `metrics`.
    pub fn set_metrics(&mut self, metrics: std::sync::Arc<crate::metrics::Metrics>) {
        self.metrics = Some(metrics);
    }

    /// The HTTP client, built on first use; every call shares its connection pool.
    fn http(&self) -> Result<&reqwest::Client, GeminiError> {
        self.http
            .get_or_init(|| {
                reqwest::Client::builder()
                    .default_headers(self.headers.clone())
                    .user_agent(concat!("gemini-mcp-server/", env!("CARGO_PKG_VERSION")))
                    .connect_timeout(self.connect_timeout)
                    .pool_idle_timeout(Duration::from_secs(90))
                    // A peer that vanished without a reset is noticed within about a minute,
                    // even while Gemini thinks in silence before its first chunk.
                    .tcp_keepalive(Duration::from_secs(30))
                    .tcp_keepalive_interval(Duration::from_secs(10))
                    .tcp_keepalive_retries(3u32)
                    .build()
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| GeminiError::NotConfigured {
                message: format!("cannot set up the HTTP client: {e}"),
            })
    }

    /// The service tier this client asks for on the wire: the Gemini API takes it in the body
    /// (`serviceTier`), Vertex AI in a header, and only on its global endpoint
    /// ([`VertexSettings::tier_header`]); `None` when none is sent.
    pub fn tier_sent(&self) -> Option<ServiceTier> {
        match &self.vertex {
            None => self.tier,
            Some(v) => self.tier.filter(|t| v.tier_header(*t).is_some()),
        }
    }

    /// The body of `req` exactly as [`ApiClient::generate`] sends it.
    pub fn body(&self, req: &GenerateRequest) -> Result<Vec<u8>, GeminiError> {
        if let Some(agent) = &req.agent {
            return Ok(interactions::build_agent_request(req, agent).to_string().into_bytes());
        }
        if self.uses_interactions(req) {
            let background = self.runs_in_background(req);
            // Vertex AI takes the tier as a header, and the operator's labels in the body.
            let tier = self.tier.filter(|_| self.vertex.is_none());
            let mut body = interactions::build_request(req, tier, self.store || background);
            body.background = background;
            body.stream = !background;
            if let Some(v) = &self.vertex {
                body.labels = v.labels.iter().cloned().collect();
            }
            return serde_json::to_vec(&body).map_err(|e| GeminiError::Malformed {
                message: format!("the request could not be encoded: {e}"),
            });
        }
        let mut wire_request = wire::build_request(req);
        if let Some(v) = &self.vertex {
            wire_request.labels = v.labels.iter().cloned().collect();
        } else {
            wire_request.service_tier = self.tier;
        }
        serde_json::to_vec(&wire_request).map_err(|e| GeminiError::Malformed {
            message: format!("the request could not be encoded: {e}"),
        })
    }

    /// One answer, streamed, with retries; bounded by the call deadline and `ctx.cancel`. A
    /// request naming a cache that is gone is sent again whole (`cache_lost` says so): a lost
    /// cache costs the price of the whole request, never the call.
    pub async fn generate(
        &self,
        req: &GenerateRequest,
        ctx: &CallContext,
    ) -> Result<GenerateResponse, GeminiError> {
        if req.agent.is_some() {
            return self.run_in_background(req, ctx).await;
        }
        // Documents too large to go inline are uploaded first, and deleted once answered.
        let (uploaded, files) = self.with_uploads(req, ctx).await?;
        let answer = self.generate_whole(uploaded.as_ref().unwrap_or(req), ctx).await;
        self.delete_files(files).await;
        answer
    }

    /// [`ApiClient::generate`] once its documents are where they go.
    async fn generate_whole(
        &self,
        req: &GenerateRequest,
        ctx: &CallContext,
    ) -> Result<GenerateResponse, GeminiError> {
        match self.generate_as_sent(req, ctx).await {
            Err(e) if req.previous.is_some() && self.uses_interactions(req) && e.is_not_found() => {
                tracing::info!(model = %req.model.id, "the stored interaction is gone: sending the whole history");
                let whole = GenerateRequest {
                    previous: None,
                    ..req.clone()
                };
                self.generate_as_sent(&whole, ctx).await
            }
            Err(e) if req.cache.is_some() && e.is_cache_gone() => {
                tracing::info!(model = %req.model.id, "the context cache is gone: sending the request whole");
                let whole = GenerateRequest {
                    cache: None,
                    previous: None,
                    ..req.clone()
                };
                let mut answer = self.generate_as_sent(&whole, ctx).await?;
                answer.cache_lost = true;
                Ok(answer)
            }
            other => other,
        }
    }

    async fn generate_as_sent(
        &self,
        req: &GenerateRequest,
        ctx: &CallContext,
    ) -> Result<GenerateResponse, GeminiError> {
        if self.runs_in_background(req) {
            return self.run_in_background(req, ctx).await;
        }
        let dialect = if self.uses_interactions(req) {
            Dialect::Interactions
        } else {
            Dialect::GenerateContent
        };
        let url = match dialect {
            Dialect::Interactions => {
                // The model goes in the body; its id is checked as the URL path would be.
                model_segment(&req.model.id)?;
                self.interactions_url.clone()
            }
            Dialect::GenerateContent => format!(
                "{}/models/{}:streamGenerateContent?alt=sse",
                self.base,
                model_segment(&req.model.id)?
            ),
        };
        let body = self.body(req)?;
        let sent = {
            use sha2::Digest;
            hex::encode(sha2::Sha256::digest(&body))
        };
        let body = Bytes::from(body);
        let deadline = Instant::now() + self.call_timeout;
        let backend = if self.vertex.is_some() {
            "vertex"
        } else {
            "api"
        };
        let work = retry::run(&self.policy, ctx, deadline, |attempt| {
            if let (true, Some(m)) = (attempt > 1, &self.metrics) {
                m.retry(&req.model.id);
            }
            let span = crate::traces::gemini_request(backend, &req.model.id, attempt);
            let once = self.stream_once(&url, body.clone(), ctx, dialect);
            async move {
                let answer = once.instrument(span.clone()).await;
                let used = match &answer {
                    Ok(a) => Ok((a.usage.input, a.usage.output)),
                    Err(f) => Err(f.error.kind()),
                };
                crate::traces::gemini_answered(&span, used);
                answer
            }
        });
        let mut answer = self.bounded(ctx, deadline, work).await?;
        answer.request_sha256 = Some(sent);
        Ok(answer)
    }

    /// Tokens Gemini counts for `text` on `model` (`:countTokens`).
    pub async fn count_tokens(&self, model: &str, text: &str) -> Result<u64, GeminiError> {
        let url = format!("{}/models/{}:countTokens", self.base, model_segment(model)?);
        let body = Bytes::from(wire::count_tokens_request(text).to_string());
        let ctx = CallContext::default();
        let deadline = Instant::now() + self.call_timeout;
        let http = self.http()?;
        let work = retry::run(&self.policy, &ctx, deadline, |_| {
            let request = http
                .post(url.as_str())
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone());
            async move {
                let r: wire::CountTokensResponse = self.json(request).await?;
                r.total_tokens.ok_or_else(|| {
                    Failure::fatal(GeminiError::Malformed {
                        message: "countTokens answered without totalTokens".into(),
                    })
                })
            }
        });
        self.bounded(&ctx, deadline, work).await
    }

    /// Every Gemini text model the key can use (`GET /v1beta/models`, all pages), as catalogue
    /// entries: id without `models/`, limits from the listing, thinking style from the id.
    pub async fn list_models(&self) -> Result<Vec<ModelInfo>, GeminiError> {
        if self.vertex.is_some() {
            // Vertex AI lists publisher models in another shape and without the limits the
            // catalogue needs: the built-in catalogue stands. What can fail here is the
            // credentials, so readiness checks that a token can be had.
            return match self.authorize(self.http()?.get(&self.base)).await {
                Ok(_) => Ok(Vec::new()),
                Err(f) => Err(f.error),
            };
        }
        let ctx = CallContext::default();
        let deadline = Instant::now() + self.call_timeout;
        let http = self.http()?;
        let work = async {
            let mut out: Vec<ModelInfo> = Vec::new();
            let mut token: Option<String> = None;
            for _ in 0..MAX_MODEL_PAGES {
                let page: wire::ListModelsResponse =
                    retry::run(&self.policy, &ctx, deadline, |_| {
                        let url =
                            reqwest::Url::parse(&format!("{}/models", self.base)).map(|mut url| {
                                url.query_pairs_mut().append_pair("pageSize", "1000");
                                if let Some(t) = &token {
                                    url.query_pairs_mut().append_pair("pageToken", t);
                                }
                                url
                            });
                        async move {
                            let url = url.map_err(|e| {
                                Failure::fatal(GeminiError::NotConfigured {
                                    message: format!("GEMINI_BASE_URL is not a valid URL: {e}"),
                                })
                            })?;
                            self.json(http.get(url)).await
                        }
                    })
                    .await?;
                for m in page.models.iter().flatten() {
                    if let Some(info) = m.to_model_info()
                        && !out.iter().any(|o| o.id == info.id)
                    {
                        out.push(info);
                    }
                }
                token = page.next_page_token.filter(|t| !t.is_empty());
                if token.is_none() {
                    break;
                }
            }
            Ok(out)
        };
        self.bounded(&ctx, deadline, work).await
    }

    /// [`ApiClient::list_models`], fetched once and cached; a failure is not cached.
    pub async fn models(&self) -> Result<Vec<ModelInfo>, GeminiError> {
        self.models
            .get_or_try_init(|| self.list_models())
            .await
            .cloned()
    }

    /// Runs `work` until it ends, the deadline passes (`Timeout`) or the call is cancelled
    /// (`Cancelled`); dropping `work` aborts any request in flight.
    async fn bounded<T>(
        &self,
        ctx: &CallContext,
        deadline: Instant,
        work: impl Future<Output = Result<T, GeminiError>>,
    ) -> Result<T, GeminiError> {
        tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => Err(GeminiError::Cancelled),
            r = tokio::time::timeout_at(deadline, work) => match r {
                Ok(r) => r.map_err(|e| self.scrub(e)),
                Err(_) => Err(GeminiError::Timeout { after: self.call_timeout }),
            },
        }
    }

    /// Sends a non-streamed request and reads its JSON answer.
    async fn json<T: DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<T, Failure> {
        let response = self.send(request, Some(self.idle_timeout)).await?;
        let text = match tokio::time::timeout(self.idle_timeout, response.text()).await {
            Err(_) => {
                return Err(Failure::transient(GeminiError::Stalled {
                    after: self.idle_timeout,
                }));
            }
            Ok(Err(e)) => return Err(Failure::transient(self.transport(e))),
            Ok(Ok(t)) => t,
        };
        serde_json::from_str(&text).map_err(|e| {
            Failure::transient(GeminiError::Malformed {
                message: format!("unexpected JSON from Gemini: {e}"),
            })
        })
    }

    /// Sends a request, waiting at most `wait` for the answer's headers (else only the call
    /// deadline bounds it); a non-2xx answer becomes a classified failure.
    async fn send(
        &self,
        request: reqwest::RequestBuilder,
        wait: Option<Duration>,
    ) -> Result<reqwest::Response, Failure> {
        let request = self.authorize(request).await?;
        let sent = match wait {
            Some(wait) => tokio::time::timeout(wait, request.send()).await,
            None => Ok(request.send().await),
        };
        let response = match sent {
            Err(_) => {
                return Err(Failure::transient(GeminiError::Stalled {
                    after: self.idle_timeout,
                }));
            }
            Ok(Err(e)) => return Err(Failure::transient(self.transport(e))),
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        crate::traces::gemini_status(status.as_u16());
        if status.is_success() {
            return Ok(response);
        }
        let body = tokio::time::timeout(self.idle_timeout, response.text())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        Err(self.classify(status.as_u16(), &body))
    }

    /// One streamed attempt. Until the first bytes of the body arrive only the call deadline
    /// bounds the wait (a model may think for minutes before its first chunk, and with
    /// `includeThoughts: false` nothing is sent meanwhile); after that, each chunk must follow
    /// within the idle timeout.
    async fn stream_once(
        &self,
        url: &str,
        body: Bytes,
        ctx: &CallContext,
        dialect: Dialect,
    ) -> Result<GenerateResponse, Failure> {
        let mut request = self
            .http()
            .map_err(Failure::fatal)?
            .post(url)
            .header(CONTENT_TYPE, "application/json")
            .body(body);
        if let Some((name, value)) = self
            .vertex
            .as_ref()
            .zip(self.tier)
            .and_then(|(v, t)| v.tier_header(t))
        {
            request = request.header(name, value);
        }
        let response = self.send(request, None).await?;
        ctx.report("Gemini is thinking");
        let mut answer = Answer {
            asked: self.tier_sent(),
            // The Gemini API says in a header which tier served the call (a priority call over
            // its limit is served at standard); Vertex AI in the usage (`Answer::take`).
            served: response
                .headers()
                .get(SERVED_TIER_HEADER)
                .and_then(|v| v.to_str().ok())
                .and_then(served_tier),
            ..Answer::default()
        };
        let mut steps = interactions::Steps::default();
        let mut stream = response.bytes_stream();
        let mut splitter = SseSplitter::new();
        let mut reported: Option<Instant> = None;
        let mut started = false;
        loop {
            let next = if started {
                tokio::time::timeout(self.idle_timeout, stream.next()).await
            } else {
                Ok(stream.next().await)
            };
            let bytes = match next {
                Err(_) => {
                    return Err(answer.broken(GeminiError::Stalled {
                        after: self.idle_timeout,
                    }));
                }
                Ok(None) => break,
                Ok(Some(Err(e))) => return Err(answer.broken(self.transport(e))),
                Ok(Some(Ok(bytes))) => bytes,
            };
            started = true;
            for data in splitter.feed(&bytes) {
                self.event(&mut answer, &mut steps, dialect, &data)?;
            }
            if !answer.text.is_empty() && reported.is_none_or(|at| at.elapsed() >= PROGRESS_EVERY) {
                reported = Some(Instant::now());
                ctx.report(format!(
                    "receiving the answer ({} tokens)",
                    answer.output_tokens()
                ));
            }
        }
        let finished = splitter.finish();
        if let Some(data) = finished.data {
            self.event(&mut answer, &mut steps, dialect, &data)?;
        }
        if !finished.trailing.trim().is_empty() {
            return Err(self.tail(&answer, &finished.trailing));
        }
        let mut done = answer.finish()?;
        if dialect == Dialect::Interactions && self.store {
            done.interaction_id = steps.id;
        }
        Ok(done)
    }

    /// Takes in one SSE event: a response chunk (or an Interactions API event), or an error
    /// object sent as an event.
    fn event(
        &self,
        answer: &mut Answer,
        steps: &mut interactions::Steps,
        dialect: Dialect,
        data: &str,
    ) -> Result<(), Failure> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(());
        }
        if dialect == Dialect::Interactions {
            let event: serde_json::Value = serde_json::from_str(data).map_err(|e| {
                answer.broken(GeminiError::Malformed {
                    message: format!("a streamed event is not valid JSON ({e})"),
                })
            })?;
            return steps.take(answer, &event).map_err(|f| Failure {
                error: self.scrub(f.error),
                retry: f.retry,
            });
        }
        if data.contains("\"error\"")
            && let Some(e) = wire::parse_error(data)
        {
            return Err(self.tail_error(answer, e));
        }
        match serde_json::from_str::<GenerateContentResponse>(data) {
            Ok(chunk) => {
                answer.take(chunk);
                Ok(())
            }
            Err(e) => Err(answer.broken(GeminiError::Malformed {
                message: format!("a streamed chunk is not valid JSON ({e})"),
            })),
        }
    }

    /// Text after the events: Google's mid-stream error object, or garbage.
    fn tail(&self, answer: &Answer, trailing: &str) -> Failure {
        match wire::parse_error(trailing) {
            Some(e) => self.tail_error(answer, e),
            None => answer.broken(GeminiError::Malformed {
                message: format!(
                    "unexpected text in the stream: {}",
                    excerpt(&self.scrub_text(trailing), 200)
                ),
            }),
        }
    }

    fn tail_error(&self, answer: &Answer, e: ErrorBody) -> Failure {
        let status = e.code.unwrap_or(500);
        let failure = self.classify_body(status, Some(e), "");
        if answer.text.is_empty() {
            failure
        } else {
            Failure::fatal(GeminiError::Malformed {
                message: format!(
                    "the answer broke off after {} characters: {}",
                    answer.text.chars().count(),
                    strip_hint(&failure.error)
                ),
            })
        }
    }

    /// A non-2xx answer: Google's error body (plain or array-wrapped) read into an `Api` error
    /// with what to do, and whether to retry.
    fn classify(&self, status: u16, body: &str) -> Failure {
        self.classify_body(status, wire::parse_error(body), body)
    }

    fn classify_body(&self, status: u16, parsed: Option<ErrorBody>, raw: &str) -> Failure {
        let parsed = parsed.unwrap_or_default();
        let code = parsed
            .status
            .clone()
            .unwrap_or_else(|| canonical_status(status).to_string());
        let message = parsed
            .message
            .clone()
            .filter(|m| !m.trim().is_empty())
            .unwrap_or_else(|| {
                let raw = excerpt(raw, 300);
                if raw.is_empty() {
                    format!("HTTP {status} without details")
                } else {
                    raw
                }
            });
        // One line, of a readable length, without the key.
        let message = self.scrub_text(excerpt(&message, 1000).trim_end_matches('.'));
        let lower = message.to_ascii_lowercase();
        let (retry, hint): (Retryable, String) = match status {
            400 if parsed.reason().as_deref() == Some("API_KEY_INVALID")
                || lower.contains("api key not valid") =>
            {
                (
                    Retryable::No,
                    "Set a valid GEMINI_API_KEY (create one at https://aistudio.google.com/apikey).".into(),
                )
            }
            400 if lower.contains("input token count") || lower.contains("exceeds the maximum number of tokens") => (
                Retryable::No,
                "The input is too large for this model: send fewer or smaller files, set MAX_CONTEXT_TOKENS lower, or start a new thread without the old history.".into(),
            ),
            400 if lower.contains("thinking") => (
                Retryable::No,
                "The model refused this thinking configuration: try another `thinking_mode` or model, and report it if it persists.".into(),
            ),
            400 if code == "FAILED_PRECONDITION" => (
                Retryable::No,
                "The Gemini API is not available to this key's project as it is (free tier not offered in the region, or billing needed): enable billing in Google AI Studio, or use the Gemini CLI backend.".into(),
            ),
            400 => (
                Retryable::No,
                "Gemini rejected the request as invalid; retrying will not help. Try another model or fewer inputs, and report it if it persists.".into(),
            ),
            401 | 403 if self.vertex.is_some() => (Retryable::No, self.vertex_denied(status, &parsed, &lower)),
            401 | 403 => (
                Retryable::No,
                "The key was refused: set a valid GEMINI_API_KEY with access to the Gemini API (https://aistudio.google.com/apikey).".into(),
            ),
            404 => (
                Retryable::No,
                "The model is unknown or has been shut down: pick another (the `listmodels` tool shows the available models).".into(),
            ),
            429 => quota_decision(&parsed, &lower),
            408 | 500 | 502 | 503 | 504 => (
                Retryable::Yes { at_least: parsed.retry_delay() },
                match status {
                    500 => "Gemini failed internally. Retry later; very long inputs can cause this, so try fewer files.",
                    503 => "The model is overloaded. Retry in a few minutes, or use a lighter model (e.g. `flash`).",
                    504 => "Gemini ran out of time on this request: send fewer files or lower `thinking_mode`.",
                    _ => "The connection to Gemini failed on the way. Retry later.",
                }
                .to_string(),
            ),
            _ => (
                Retryable::No,
                "An unexpected answer from the Gemini API: check GEMINI_BASE_URL.".into(),
            ),
        };
        Failure {
            error: GeminiError::Api {
                status,
                code,
                message,
                hint,
            },
            retry,
        }
    }

    fn transport(&self, e: reqwest::Error) -> GeminiError {
        // reqwest's own message is terse ("error sending request"); the causes say what failed.
        let mut parts = vec![e.to_string()];
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            let text = s.to_string();
            if !parts.iter().any(|p| p.contains(&text)) {
                parts.push(text);
            }
            source = s.source();
        }
        GeminiError::Transport {
            message: self.scrub_text(&parts.join(": ")),
        }
    }

    /// Defence in depth: the key never leaves in an error, even if an upstream echoes it.
    fn scrub(&self, e: GeminiError) -> GeminiError {
        match e {
            GeminiError::Api {
                status,
                code,
                message,
                hint,
            } => GeminiError::Api {
                status,
                code,
                message: self.scrub_text(&message),
                hint,
            },
            GeminiError::Transport { message } => GeminiError::Transport {
                message: self.scrub_text(&message),
            },
            GeminiError::Malformed { message } => GeminiError::Malformed {
                message: self.scrub_text(&message),
            },
            other => other,
        }
    }

    fn scrub_text(&self, text: &str) -> String {
        let Auth::Key(key) = &self.auth else {
            return text.to_string();
        };
        let key = key.expose();
        if key.len() >= 4 && text.contains(key) {
            text.replace(key, "***")
        } else {
            text.to_string()
        }
    }
}

/// 429: wait for `RetryInfo` unless the quota cannot come back soon (gemini-cli's rules): a
/// per-day quota, "limit: 0" (no access at all), or a delay over five minutes.
fn quota_decision(parsed: &ErrorBody, lower_message: &str) -> (Retryable, String) {
    let per_day = parsed
        .quota_ids()
        .into_iter()
        .find(|q| q.to_ascii_lowercase().contains("perday"));
    let delay = parsed.retry_delay();
    if let Some(q) = per_day {
        return (
            Retryable::No,
            format!(
                "The daily quota of this model is used up ({q}); it resets at midnight Pacific time. Use another model (e.g. `flash`), or enable billing for higher limits: https://ai.google.dev/gemini-api/docs/rate-limits"
            ),
        );
    }
    if lower_message.contains("limit: 0") {
        return (
            Retryable::No,
            "This key has no quota for this model (limit: 0): the free tier does not include it. Use another model (e.g. `flash`) or enable billing: https://ai.google.dev/gemini-api/docs/rate-limits".into(),
        );
    }
    if let Some(d) = delay.filter(|d| *d > MAX_RETRY_INFO_DELAY) {
        return (
            Retryable::No,
            format!(
                "Gemini asks to wait {}s before the next request: try again later, or use another model (e.g. `flash`).",
                d.as_secs()
            ),
        );
    }
    (
        Retryable::Yes { at_least: delay },
        "Rate limit reached: wait a minute and retry, use a lighter model (e.g. `flash`), or raise the quota: https://ai.google.dev/gemini-api/docs/rate-limits".into(),
    )
}

/// The model id as a URL path segment: without `models/`, and only characters model ids use.
fn model_segment(id: &str) -> Result<&str, GeminiError> {
    let bare = id.strip_prefix("models/").unwrap_or(id);
    let ok = !bare.is_empty()
        && bare
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
    if ok {
        Ok(bare)
    } else {
        Err(GeminiError::UnknownModel {
            name: id.to_string(),
            hint: "Model ids use letters, digits, `-`, `.` and `_` only (the `listmodels` tool shows them).".into(),
        })
    }
}

#[cfg(test)]
mod tests;

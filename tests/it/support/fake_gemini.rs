//! A fake Gemini REST API for the tests: a real HTTP server on `127.0.0.1` that speaks the wire
//! Gemini API's wire format (the shapes recorded in `fixtures/gemini/`) and records every request.
//!
//! It runs on its own OS thread with its own tokio runtime, so it serves sync tests, a spawned
//! `gemini-mcp` binary (point `GEMINI_BASE_URL` at [`FakeGemini::base_url`]) and async tests alike;
//! its own delays are real time, whatever the test's clock does. Dropping it stops the server and
//! aborts any answer still in flight.
//!
//! Do not call it from a `#[tokio::test(start_paused = true)]` test through a client with timeouts
//! (our `ApiClient` has three): while a paused runtime waits on a real socket it auto-advances its
//! clock to the next timer, so every call ends at once in `Timeout`. Use real time and the short
//! retry delays of `Config::for_tests`; the retry schedule itself is tested with a paused clock in
//! `gemini::retry`.
//!
//! # Using it
//!
//! ```ignore
//! let fake = FakeGemini::start();
//! // env GEMINI_BASE_URL = fake.base_url(), GEMINI_API_KEY = anything (see `require_key`)
//! fake.push(Script::overloaded());                  // first generate call: 503
//! fake.push(Script::text("## Review\nLooks fine.")); // second: this answer, streamed
//! // …run the code under test…
//! let sent = fake.generate_requests();
//! assert_eq!(sent.len(), 2);
//! assert_eq!(sent[1].model.as_deref(), Some("gemini-3.1-pro-preview"));
//! assert_eq!(sent[1].thinking_config()["thinkingLevel"], "MEDIUM");
//! ```
//!
//! # What it answers
//!
//! - `POST /v1beta/models/{model}:streamGenerateContent?alt=sse` and `…:generateContent`: the next
//!   queued [`Script`] ([`FakeGemini::push`]), or when the queue is empty the default answer:
//!   - text mode: `FAKE-REPLY model=<m> turns=<n> last=<t>` where `<m>` is the model in the URL,
//!     `<n>` the number of user messages in `contents` (earlier turns + 1) and `<t>` the first 80
//!     characters of the last user message's text, line breaks turned into spaces;
//!   - JSON mode (`generationConfig.responseJsonSchema` or `responseSchema` present):
//!     `{"summary":"FAKE-REPLY …","findings":[],"verdict":"ready"}`.
//!
//!   Streams are framed like Google's: `data: <json>\r\n\r\n`, no `[DONE]`, `usageMetadata`,
//!   `modelVersion` and `responseId` on every chunk, text split over a few chunks, and a last
//!   chunk with `finishReason: "STOP"` and a `{"text":"","thoughtSignature":…}` part. Usage:
//!   `promptTokenCount` = ⌈request body chars / 4⌉, `candidatesTokenCount` = ⌈answer chars / 4⌉
//!   (cumulative), `thoughtsTokenCount` = 42 when the request had a `thinkingConfig` or the script
//!   has thoughts; [`Script::usage`] overrides the final figures.
//!   Like Google, a request with both `thinkingBudget` and `thinkingLevel` gets a 400 (before
//!   any script is used).
//! - `POST …:countTokens`: `{"totalTokens": ⌈chars / 4⌉}` over every text part of `contents` (or
//!   `generateContentRequest.contents` and its `systemInstruction`).
//! - `GET /v1beta/models?pageSize=&pageToken=`: [`FakeGemini::default_models`] (or
//!   [`FakeGemini::set_models`]), at most [`MODELS_PAGE_CAP`] per page so that clients have to
//!   follow `nextPageToken`; `GET /v1beta/models/{model}`: one of them, or 404.
//! - With [`FakeGemini::require_key`]: no `x-goog-api-key` (nor `?key=`) → 403
//!   `PERMISSION_DENIED`; a different key → 400 `API_KEY_INVALID`, as Google answers.
//!
//! Scripts for `countTokens` and the model list can be queued too ([`FakeGemini::push_to`]).

#![allow(dead_code)] // Shared by every test file; no test uses every helper.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use axum::routing::{any, get};
use serde_json::{Value, json};

/// The largest page the fake's model list returns, whatever `pageSize` asks.
pub const MODELS_PAGE_CAP: usize = 5;

/// The `thoughtSignature` on the last part of every default answer.
pub const FAKE_SIGNATURE: &str = "ZmFrZS10aG91Z2h0LXNpZ25hdHVyZQ==";

/// Which endpoint a queued script answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `:generateContent` and `:streamGenerateContent` (one queue for both).
    Generate,
    CountTokens,
    /// `GET /v1beta/models` (each page is one request).
    ListModels,
}

/// One request as the fake received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// The path without the query, e.g. `/v1beta/models/gemini-2.5-flash:countTokens`.
    pub path: String,
    pub query: Option<String>,
    /// The model id from the path, without `models/`.
    pub model: Option<String>,
    /// `streamGenerateContent`, `generateContent`, `countTokens`; `None` for GETs.
    pub action: Option<String>,
    /// Header names in lower case, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Null` when empty or not JSON).
    pub body: Value,
    pub raw_body: String,
    /// When the request arrived (its headers and body read).
    pub at: std::time::Instant,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// A `generateContent` or `streamGenerateContent` call.
    pub fn is_generate(&self) -> bool {
        matches!(
            self.action.as_deref(),
            Some("generateContent" | "streamGenerateContent")
        )
    }

    pub fn is_stream(&self) -> bool {
        self.action.as_deref() == Some("streamGenerateContent")
    }

    pub fn generation_config(&self) -> &Value {
        &self.body["generationConfig"]
    }

    pub fn thinking_config(&self) -> &Value {
        &self.body["generationConfig"]["thinkingConfig"]
    }

    /// JSON mode: a response schema was sent.
    pub fn json_mode(&self) -> bool {
        is_json_mode(&self.body)
    }

    /// The text of `systemInstruction`.
    pub fn system_text(&self) -> String {
        parts_text(&self.body["systemInstruction"])
    }

    /// `(role, text)` of every message in `contents`, oldest first.
    pub fn messages(&self) -> Vec<(String, String)> {
        self.body["contents"]
            .as_array()
            .map(|c| {
                c.iter()
                    .map(|m| {
                        let role = m["role"].as_str().unwrap_or("user").to_string();
                        (role, parts_text(m))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The text of the last user message.
    pub fn last_user_text(&self) -> String {
        last_user_text(&self.body)
    }
}

/// One scripted answer. Build with the constructors, adjust with the `with`-style methods.
#[derive(Debug, Clone)]
pub struct Script {
    kind: Kind,
    head_delay: Duration,
    chunk_delay: Duration,
    model_version: Option<String>,
    separator: String,
    array_wrapped: bool,
}

#[derive(Debug, Clone)]
enum Kind {
    /// An answer built for the request (the default answer when `text` is `None`).
    Answer(AnswerSpec),
    /// A Google error object.
    Error { status: u16, error: Value },
    /// Any status, content type and body, sent as is.
    Raw {
        status: u16,
        content_type: String,
        body: String,
    },
    /// A 200 stream: answer chunks (optionally without the finishing chunk), then `ending`.
    Broken { spec: AnswerSpec, ending: Ending },
    /// A 200 stream with exactly this body.
    Sse(String),
}

#[derive(Debug, Clone)]
enum Ending {
    /// The body closes after the last text chunk: no `finishReason`.
    Close,
    /// A raw, pretty-printed JSON error object after the chunks (Google's mid-stream error).
    ErrorTail(Value),
    /// A `data:` line that is not JSON.
    MalformedChunk,
    /// The connection breaks (the chunked body is never terminated).
    Reset,
}

#[derive(Debug, Clone)]
struct AnswerSpec {
    /// Text deltas; `None` = the default echo.
    chunks: Option<Vec<String>>,
    thoughts: Vec<String>,
    finish: String,
    /// `false`: the candidate has `content: {"role":"model"}` and no parts.
    parts: bool,
    /// A blocked prompt: `promptFeedback.blockReason` and no candidates.
    block_reason: Option<String>,
    usage: Option<[u64; 4]>,
    sources: Vec<(String, String)>,
}

impl AnswerSpec {
    fn default_echo() -> AnswerSpec {
        AnswerSpec {
            chunks: None,
            thoughts: Vec::new(),
            finish: "STOP".into(),
            parts: true,
            block_reason: None,
            usage: None,
            sources: Vec::new(),
        }
    }
    fn with_chunks(chunks: Vec<String>) -> AnswerSpec {
        AnswerSpec {
            chunks: Some(chunks),
            ..AnswerSpec::default_echo()
        }
    }
}

/// Splits `text` into about three chunks on character boundaries (no chunk empty unless the
/// text is).
fn split_text(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() < 3 {
        return vec![text.to_string()];
    }
    let n = chars.len().div_ceil(3);
    chars.chunks(n).map(|c| c.iter().collect()).collect()
}

fn google_error(status: u16, code: &str, message: &str, details: Vec<Value>) -> Value {
    let mut e = json!({ "code": status, "message": message, "status": code });
    if !details.is_empty() {
        e["details"] = Value::Array(details);
    }
    e
}

fn quota_error(quota_id: &str, message: &str, retry_delay: Option<&str>) -> Value {
    let mut details = vec![
        json!({
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            "violations": [{
                "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                "quotaId": quota_id,
                "quotaDimensions": {"model": "gemini-2.5-pro", "location": "global"},
                "quotaValue": "50"
            }]
        }),
        json!({
            "@type": "type.googleapis.com/google.rpc.Help",
            "links": [{"description": "Learn more about Gemini API quotas", "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]
        }),
    ];
    if let Some(d) = retry_delay {
        details.push(json!({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": d}));
    }
    google_error(429, "RESOURCE_EXHAUSTED", message, details)
}

impl Script {
    fn new(kind: Kind) -> Script {
        Script {
            kind,
            head_delay: Duration::ZERO,
            chunk_delay: Duration::ZERO,
            model_version: None,
            separator: "\r\n\r\n".into(),
            array_wrapped: false,
        }
    }

    // --- answers ---------------------------------------------------------------------------

    /// The default answer (the echo, or the JSON object in JSON mode); useful with delays.
    pub fn echo() -> Script {
        Script::new(Kind::Answer(AnswerSpec::default_echo()))
    }

    /// This text, streamed in about three chunks, `finishReason: STOP`.
    pub fn text(text: impl Into<String>) -> Script {
        Script::new(Kind::Answer(AnswerSpec::with_chunks(split_text(
            &text.into(),
        ))))
    }

    /// Exactly these text deltas, one chunk each.
    pub fn chunks<I, S>(chunks: I) -> Script
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Script::new(Kind::Answer(AnswerSpec::with_chunks(
            chunks.into_iter().map(Into::into).collect(),
        )))
    }

    /// A JSON-mode answer: `value` serialised as the text.
    pub fn json(value: Value) -> Script {
        Script::text(value.to_string())
    }

    /// The prompt was blocked: one chunk with `promptFeedback.blockReason` and no candidates.
    pub fn blocked(reason: &str) -> Script {
        let mut spec = AnswerSpec::with_chunks(Vec::new());
        spec.block_reason = Some(reason.into());
        Script::new(Kind::Answer(spec))
    }

    /// Thinking used the whole output budget: `finishReason: MAX_TOKENS`, no `parts`, no
    /// `candidatesTokenCount` (a real recorded shape).
    pub fn max_tokens_no_parts() -> Script {
        let mut spec = AnswerSpec::with_chunks(Vec::new());
        spec.finish = "MAX_TOKENS".into();
        spec.parts = false;
        Script::new(Kind::Answer(spec))
    }

    /// `finishReason: STOP` with only an empty text part (a hidden block, as seen in the wild).
    pub fn empty_stop() -> Script {
        Script::new(Kind::Answer(AnswerSpec::with_chunks(Vec::new())))
    }

    /// No text, this finish reason (`SAFETY`, `RECITATION`, …).
    pub fn finish_without_text(reason: &str) -> Script {
        let mut spec = AnswerSpec::with_chunks(Vec::new());
        spec.finish = reason.into();
        Script::new(Kind::Answer(spec))
    }

    // --- broken streams (200, then trouble) -------------------------------------------------

    /// These text chunks, then a `data:` line that is not JSON, then the body closes.
    pub fn malformed_after(chunks: &[&str]) -> Script {
        Script::broken(chunks, Ending::MalformedChunk)
    }

    /// A 200 whose first chunk is not JSON.
    pub fn malformed() -> Script {
        Script::malformed_after(&[])
    }

    /// These text chunks, then Google's raw mid-stream error tail (`{"error":{503 …}}`,
    /// pretty-printed, not an SSE event), then the body closes.
    pub fn error_tail_after(chunks: &[&str]) -> Script {
        let e = google_error(
            503,
            "UNAVAILABLE",
            "This model is currently experiencing high demand. Spikes in demand are usually temporary. Please try again later.",
            Vec::new(),
        );
        Script::broken(chunks, Ending::ErrorTail(e))
    }

    /// These text chunks, then the body closes without a `finishReason`.
    pub fn truncated_after(chunks: &[&str]) -> Script {
        Script::broken(chunks, Ending::Close)
    }

    /// These text chunks, then the connection breaks mid-body.
    pub fn reset_after(chunks: &[&str]) -> Script {
        Script::broken(chunks, Ending::Reset)
    }

    fn broken(chunks: &[&str], ending: Ending) -> Script {
        let spec = AnswerSpec::with_chunks(chunks.iter().map(|c| c.to_string()).collect());
        Script::new(Kind::Broken { spec, ending })
    }

    /// A 200 `text/event-stream` with exactly this body (framing tests).
    pub fn sse(body: impl Into<String>) -> Script {
        Script::new(Kind::Sse(body.into()))
    }

    // --- HTTP errors -------------------------------------------------------------------------

    /// Google's error object with this HTTP status, `status` string and message.
    pub fn error(status: u16, code: &str, message: &str) -> Script {
        Script::new(Kind::Error {
            status,
            error: google_error(status, code, message, Vec::new()),
        })
    }

    /// Google's error object with `details` (`@type` objects).
    pub fn error_with_details(
        status: u16,
        code: &str,
        message: &str,
        details: Vec<Value>,
    ) -> Script {
        Script::new(Kind::Error {
            status,
            error: google_error(status, code, message, details),
        })
    }

    /// Any status and body, sent as is (`content_type` e.g. `text/html`).
    pub fn raw(status: u16, content_type: &str, body: impl Into<String>) -> Script {
        Script::new(Kind::Raw {
            status,
            content_type: content_type.into(),
            body: body.into(),
        })
    }

    /// 429 per-minute quota with `QuotaFailure`, `Help` and (when given) `RetryInfo.retryDelay`
    /// (e.g. `"0.5s"`, `"48s"`); the message says "Please retry in …" like Google's.
    pub fn quota_exceeded(retry_delay: Option<&str>) -> Script {
        let message = match retry_delay {
            Some(d) => format!(
                "You exceeded your current quota, please check your plan and billing details. Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 5, model: gemini-2.5-pro\nPlease retry in {d}."
            ),
            None => "Resource has been exhausted (e.g. check quota).".to_string(),
        };
        Script::new(Kind::Error {
            status: 429,
            error: quota_error(
                "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                &message,
                retry_delay,
            ),
        })
    }

    /// 429 on a per-day quota (terminal despite its `RetryInfo`).
    pub fn quota_per_day() -> Script {
        Script::new(Kind::Error {
            status: 429,
            error: quota_error(
                "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                "You exceeded your current quota, please check your plan and billing details. Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 50, model: gemini-2.5-pro\nPlease retry in 48.805646254s.",
                Some("48s"),
            ),
        })
    }

    /// 429 "limit: 0": the key has no access to the model at all.
    pub fn quota_limit_zero() -> Script {
        Script::new(Kind::Error {
            status: 429,
            error: quota_error(
                "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                "You exceeded your current quota, please check your plan and billing details. Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 0, model: gemini-3.1-pro-preview\nPlease retry in 20s.",
                Some("20s"),
            ),
        })
    }

    /// 503 "high demand" (2026 wording).
    pub fn overloaded() -> Script {
        Script::error(
            503,
            "UNAVAILABLE",
            "This model is currently experiencing high demand. Spikes in demand are usually temporary. Please try again later.",
        )
    }

    /// 500 INTERNAL.
    pub fn internal() -> Script {
        Script::error(
            500,
            "INTERNAL",
            "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting",
        )
    }

    /// 400 for a wrong key, with `ErrorInfo.reason = API_KEY_INVALID`.
    pub fn bad_key() -> Script {
        Script::new(Kind::Error {
            status: 400,
            error: bad_key_error(),
        })
    }

    /// 403 for a missing key.
    pub fn missing_key() -> Script {
        Script::new(Kind::Error {
            status: 403,
            error: missing_key_error(),
        })
    }

    /// 403 for a key without access.
    pub fn permission_denied() -> Script {
        Script::error(
            403,
            "PERMISSION_DENIED",
            "Your API key was reported as leaked. Please use another API key.",
        )
    }

    /// 400: the input is over the model's limit.
    pub fn token_limit(input: u64, max: u64) -> Script {
        Script::error(
            400,
            "INVALID_ARGUMENT",
            &format!(
                "The input token count ({input}) exceeds the maximum number of tokens allowed ({max})."
            ),
        )
    }

    /// 400: both `thinkingBudget` and `thinkingLevel` were sent (the fake also answers this
    /// unprompted to such requests).
    pub fn both_thinking_fields() -> Script {
        Script::new(Kind::Error {
            status: 400,
            error: both_thinking_error(),
        })
    }

    /// 404 for an unknown model (the message names the model of the request).
    pub fn unknown_model() -> Script {
        Script::new(Kind::Error {
            status: 404,
            error: Value::Null, // filled in with the request's model
        })
    }

    // --- modifiers ---------------------------------------------------------------------------

    /// Wait this long before sending the status line and headers.
    pub fn delay_headers(mut self, d: Duration) -> Script {
        self.head_delay = d;
        self
    }

    /// Wait this long before each chunk after the first.
    pub fn chunk_delay(mut self, d: Duration) -> Script {
        self.chunk_delay = d;
        self
    }

    /// Report this `modelVersion` (default: the model of the request).
    pub fn model_version(mut self, v: &str) -> Script {
        self.model_version = Some(v.into());
        self
    }

    /// Separate SSE events with this (default `"\r\n\r\n"`; also `"\n\n"`, `"\r\r"`).
    pub fn separator(mut self, s: &str) -> Script {
        self.separator = s.into();
        self
    }

    /// Send an error object wrapped in a one-element array (`[{"error":…}]`).
    pub fn array_wrapped(mut self) -> Script {
        self.array_wrapped = true;
        self
    }

    /// Thought-summary parts (`"thought": true`) streamed before the answer.
    pub fn thoughts<I, S>(mut self, thoughts: I) -> Script
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        if let Kind::Answer(spec) | Kind::Broken { spec, .. } = &mut self.kind {
            spec.thoughts = thoughts.into_iter().map(Into::into).collect();
        }
        self
    }

    /// The finish reason of an answer with text (e.g. `MAX_TOKENS` for a cut answer).
    pub fn finish(mut self, reason: &str) -> Script {
        if let Kind::Answer(spec) = &mut self.kind {
            spec.finish = reason.into();
        }
        self
    }

    /// The final usage figures: prompt, output (candidates), thinking, cached.
    pub fn usage(mut self, prompt: u64, output: u64, thinking: u64, cached: u64) -> Script {
        if let Kind::Answer(spec) | Kind::Broken { spec, .. } = &mut self.kind {
            spec.usage = Some([prompt, output, thinking, cached]);
        }
        self
    }

    /// Google Search grounding: `(uri, title)` pairs in `groundingMetadata.groundingChunks`.
    pub fn sources(mut self, sources: &[(&str, &str)]) -> Script {
        if let Kind::Answer(spec) = &mut self.kind {
            spec.sources = sources
                .iter()
                .map(|(u, t)| (u.to_string(), t.to_string()))
                .collect();
        }
        self
    }
}

fn bad_key_error() -> Value {
    google_error(
        400,
        "INVALID_ARGUMENT",
        "API key not valid. Please pass a valid API key.",
        vec![
            json!({"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                   "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}}),
            json!({"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "en-US",
                   "message": "API key not valid. Please pass a valid API key."}),
        ],
    )
}

fn missing_key_error() -> Value {
    google_error(
        403,
        "PERMISSION_DENIED",
        "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
        Vec::new(),
    )
}

fn both_thinking_error() -> Value {
    google_error(
        400,
        "INVALID_ARGUMENT",
        "Unable to submit request because thinking_budget and thinking_level are both set. Remove one of them and try again.",
        Vec::new(),
    )
}

/// The fake API. See the module documentation.
pub struct FakeGemini {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// State shared with the server thread. A std mutex: it is never held across an `.await`, and
/// the test side reads it from sync code.
struct Shared {
    inner: Mutex<Inner>,
    /// Generate calls whose answer is still being produced or sent.
    in_flight: std::sync::atomic::AtomicUsize,
}

/// Counts a generate call as in flight until its answer has been sent or its connection dropped.
struct InFlight(Arc<Shared>);

impl InFlight {
    fn new(shared: &Arc<Shared>) -> InFlight {
        shared
            .in_flight
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        InFlight(shared.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

struct Inner {
    requests: Vec<Recorded>,
    generate: VecDeque<Script>,
    count_tokens: VecDeque<Script>,
    list_models: VecDeque<Script>,
    required_key: Option<String>,
    models: Vec<Value>,
    responder: Option<Responder>,
}

/// Builds the answer to a generate call when no script is queued (see [`FakeGemini::respond_with`]).
type Responder = Arc<dyn Fn(&Recorded) -> Option<Script> + Send + Sync>;

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl FakeGemini {
    /// Binds `127.0.0.1:0` and serves on a new thread until dropped.
    pub fn start() -> FakeGemini {
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").expect("bind the fake Gemini API");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("local address");
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                requests: Vec::new(),
                generate: VecDeque::new(),
                count_tokens: VecDeque::new(),
                list_models: VecDeque::new(),
                required_key: None,
                models: FakeGemini::default_models(),
                responder: None,
            }),
            in_flight: std::sync::atomic::AtomicUsize::new(0),
        });
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let state = shared.clone();
        let thread = std::thread::Builder::new()
            .name("fake-gemini".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("fake Gemini runtime");
                rt.block_on(async move {
                    let listener =
                        tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                    let app = Router::new()
                        .route("/v1beta/models", get(list_models))
                        .route("/v1beta/models/{model_action}", any(model_action))
                        .with_state(state);
                    tokio::select! {
                        r = axum::serve(listener, app) => { r.expect("fake Gemini server") }
                        _ = rx => {}
                    }
                });
                // Dropping the runtime here aborts answers still in flight.
            })
            .expect("spawn the fake Gemini thread");
        FakeGemini {
            addr,
            shared,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:<port>`: the value for `GEMINI_BASE_URL` (no `/v1beta`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues the answer to the next generate call (streamed or not). Chainable.
    pub fn push(&self, script: Script) -> &FakeGemini {
        self.push_to(Endpoint::Generate, script)
    }

    /// Queues the answer to the next call of `endpoint`.
    pub fn push_to(&self, endpoint: Endpoint, script: Script) -> &FakeGemini {
        let mut inner = self.shared.lock();
        match endpoint {
            Endpoint::Generate => inner.generate.push_back(script),
            Endpoint::CountTokens => inner.count_tokens.push_back(script),
            Endpoint::ListModels => inner.list_models.push_back(script),
        }
        self
    }

    /// Answers generate calls that find the queue empty with `f(request)` (the default answer
    /// when it returns `None`): a scripted model that reacts to what it is sent.
    pub fn respond_with(&self, f: impl Fn(&Recorded) -> Option<Script> + Send + Sync + 'static) {
        self.shared.lock().responder = Some(Arc::new(f));
    }

    /// Scripts not used yet, over all endpoints.
    pub fn pending(&self) -> usize {
        let inner = self.shared.lock();
        inner.generate.len() + inner.count_tokens.len() + inner.list_models.len()
    }

    /// From now on, answer like Google to a missing (403) or different (400) key.
    pub fn require_key(&self, key: &str) {
        self.shared.lock().required_key = Some(key.to_string());
    }

    /// Replaces the model list (objects as Google lists them, `name: "models/<id>"`).
    pub fn set_models(&self, models: Vec<Value>) {
        self.shared.lock().models = models;
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.lock().requests.clone()
    }

    /// The generate calls so far (streamed or not).
    pub fn generate_requests(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(Recorded::is_generate)
            .collect()
    }

    /// Generate calls still being answered: a cancelled client call drops its connection, and
    /// this falls back to zero.
    pub fn in_flight(&self) -> usize {
        self.shared
            .in_flight
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn clear_requests(&self) {
        self.shared.lock().requests.clear();
    }

    /// A realistic model list (November 2026), with models that are not for text (embedding,
    /// TTS, Gemma) as Google lists them too.
    pub fn default_models() -> Vec<Value> {
        let text = |id: &str, name: &str, version: &str, thinking: bool| {
            json!({
                "name": format!("models/{id}"), "version": version, "displayName": name,
                "description": name, "inputTokenLimit": 1_048_576, "outputTokenLimit": 65_536,
                "supportedGenerationMethods": ["generateContent", "countTokens", "createCachedContent", "batchGenerateContent"],
                "temperature": 1, "topP": 0.95, "topK": 64, "maxTemperature": 2, "thinking": thinking
            })
        };
        vec![
            text("gemini-2.5-pro", "Gemini 2.5 Pro", "2.5", true),
            text("gemini-2.5-flash", "Gemini 2.5 Flash", "001", true),
            text(
                "gemini-2.5-flash-lite",
                "Gemini 2.5 Flash-Lite",
                "001",
                true,
            ),
            text(
                "gemini-3-flash-preview",
                "Gemini 3 Flash Preview",
                "3-flash-preview-12-2025",
                true,
            ),
            text(
                "gemini-3.1-pro-preview",
                "Gemini 3.1 Pro Preview",
                "3.1-pro-preview-01-2026",
                true,
            ),
            text(
                "gemini-3.1-flash-lite",
                "Gemini 3.1 Flash-Lite",
                "3.1",
                true,
            ),
            text("gemini-3.5-flash", "Gemini 3.5 Flash", "3.5", true),
            text(
                "gemini-3.5-flash-lite",
                "Gemini 3.5 Flash-Lite",
                "3.5",
                true,
            ),
            text("gemini-3.7-flash", "Gemini 3.7 Flash", "3.7", true),
            text("gemini-3.8-flash", "Gemini 3.8 Flash", "3.8", true),
            text("gemini-4-argon", "Gemini 4 Argon", "4", true),
            json!({"name": "models/gemini-embedding-001", "displayName": "Gemini Embedding 001",
                   "inputTokenLimit": 2048, "outputTokenLimit": 1,
                   "supportedGenerationMethods": ["embedContent", "countTextTokens", "countTokens"]}),
            json!({"name": "models/gemini-2.5-flash-preview-tts", "displayName": "Gemini 2.5 Flash Preview TTS",
                   "inputTokenLimit": 8192, "outputTokenLimit": 16384,
                   "supportedGenerationMethods": ["countTokens", "generateContent"]}),
            json!({"name": "models/gemma-3-27b-it", "displayName": "Gemma 3 27B",
                   "inputTokenLimit": 131072, "outputTokenLimit": 8192,
                   "supportedGenerationMethods": ["generateContent", "countTokens"]}),
        ]
    }
}

impl Drop for FakeGemini {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

fn record(
    shared: &Shared,
    method: &Method,
    path: String,
    query: Option<String>,
    model_action: Option<(&str, Option<&str>)>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Recorded {
    let raw_body = String::from_utf8_lossy(body).into_owned();
    let r = Recorded {
        method: method.to_string(),
        path,
        query,
        model: model_action.map(|(m, _)| m.trim_start_matches("models/").to_string()),
        action: model_action.and_then(|(_, a)| a.map(String::from)),
        headers: headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_ascii_lowercase(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: serde_json::from_str(&raw_body).unwrap_or(Value::Null),
        raw_body,
        at: std::time::Instant::now(),
    };
    shared.lock().requests.push(r.clone());
    r
}

/// 403/400 like Google when a key is required and missing or wrong.
fn key_check(shared: &Shared, req: &Recorded) -> Option<Response> {
    let required = shared.lock().required_key.clone()?;
    let from_query = req.query.as_deref().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("key="))
            .map(String::from)
    });
    let given = req
        .header("x-goog-api-key")
        .map(String::from)
        .or(from_query);
    match given {
        None => Some(json_response(403, &json!({ "error": missing_key_error() }))),
        Some(k) if k != required => Some(json_response(400, &json!({ "error": bad_key_error() }))),
        Some(_) => None,
    }
}

async fn list_models(
    State(shared): State<Arc<Shared>>,
    method: Method,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let req = record(
        &shared,
        &method,
        "/v1beta/models".into(),
        query.clone(),
        None,
        &headers,
        &body,
    );
    if let Some(r) = key_check(&shared, &req) {
        return r;
    }
    let script = shared.lock().list_models.pop_front();
    if let Some(script) = script {
        return scripted_plain(script, &req).await;
    }
    let param = |name: &str| {
        query.as_deref().and_then(|q| {
            q.split('&')
                .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
                .map(String::from)
        })
    };
    let size = param("pageSize")
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(50)
        .min(MODELS_PAGE_CAP);
    let start = match param("pageToken") {
        None => 0,
        Some(t) => match t
            .strip_prefix("page-")
            .and_then(|n| n.parse::<usize>().ok())
        {
            Some(n) => n,
            None => {
                return json_response(
                    400,
                    &json!({"error": google_error(400, "INVALID_ARGUMENT", "Invalid page token.", Vec::new())}),
                );
            }
        },
    };
    let models = shared.lock().models.clone();
    let page: Vec<Value> = models.iter().skip(start).take(size).cloned().collect();
    let mut out = json!({ "models": page });
    if start + size < models.len() {
        out["nextPageToken"] = json!(format!("page-{}", start + size));
    }
    json_response(200, &out)
}

async fn model_action(
    State(shared): State<Arc<Shared>>,
    method: Method,
    Path(model_action): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (model, action) = match model_action.split_once(':') {
        Some((m, a)) => (m.to_string(), Some(a.to_string())),
        None => (model_action.clone(), None),
    };
    let req = record(
        &shared,
        &method,
        format!("/v1beta/models/{model_action}"),
        query,
        Some((&model, action.as_deref())),
        &headers,
        &body,
    );
    if let Some(r) = key_check(&shared, &req) {
        return r;
    }
    let model = req.model.clone().unwrap_or_default();
    match (method, action.as_deref()) {
        (Method::GET, None) => {
            let found = shared
                .lock()
                .models
                .iter()
                .find(|m| m["name"] == format!("models/{model}"))
                .cloned();
            match found {
                Some(m) => json_response(200, &m),
                None => json_response(404, &json!({ "error": not_found(&model, "get") })),
            }
        }
        (Method::POST, Some("generateContent" | "streamGenerateContent")) => {
            let stream = action.as_deref() == Some("streamGenerateContent");
            if req.body.is_null() {
                return json_response(
                    400,
                    &json!({"error": google_error(400, "INVALID_ARGUMENT", "Invalid JSON payload received.", Vec::new())}),
                );
            }
            let tc = req.thinking_config();
            if tc.get("thinkingBudget").is_some() && tc.get("thinkingLevel").is_some() {
                return json_response(400, &json!({ "error": both_thinking_error() }));
            }
            let (queued, responder) = {
                let mut inner = shared.lock();
                (inner.generate.pop_front(), inner.responder.clone())
            };
            let script = queued
                .or_else(|| responder.and_then(|f| f(&req)))
                .unwrap_or_else(Script::echo);
            // Held while the answer is prepared (dropped with this future if the client goes away)
            // and then by the body stream until the last byte is sent or the connection drops.
            let guard = InFlight::new(&shared);
            let response = generate(script, &req, stream).await;
            let (parts, body) = response.into_parts();
            let body = futures::StreamExt::map(body.into_data_stream(), move |chunk| {
                let _held = &guard;
                chunk
            });
            Response::from_parts(parts, Body::from_stream(body))
        }
        (Method::POST, Some("countTokens")) => {
            let script = shared.lock().count_tokens.pop_front();
            if let Some(script) = script {
                return scripted_plain(script, &req).await;
            }
            let inner = if req.body.get("generateContentRequest").is_some() {
                &req.body["generateContentRequest"]
            } else {
                &req.body
            };
            let mut chars = parts_text(&inner["systemInstruction"]).chars().count();
            for m in inner["contents"].as_array().into_iter().flatten() {
                chars += parts_text(m).chars().count();
            }
            let n = chars.div_ceil(4);
            json_response(
                200,
                &json!({"totalTokens": n, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": n}]}),
            )
        }
        (_, a) => json_response(
            404,
            &json!({"error": google_error(404, "NOT_FOUND", &format!("Method not found: {}.", a.unwrap_or("(none)")), Vec::new())}),
        ),
    }
}

fn not_found(model: &str, method: &str) -> Value {
    google_error(
        404,
        "NOT_FOUND",
        &format!(
            "models/{model} is not found for API version v1beta, or is not supported for {method}. Call ListModels to see the list of available models and their supported methods."
        ),
        Vec::new(),
    )
}

fn json_response(status: u16, body: &Value) -> Response {
    plain(status, "application/json; charset=UTF-8", body.to_string())
}

fn plain(status: u16, content_type: &str, body: String) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from(body))
        .expect("a valid response")
}

/// A script answering an endpoint that does not stream (countTokens, models).
async fn scripted_plain(script: Script, req: &Recorded) -> Response {
    tokio::time::sleep(script.head_delay).await;
    error_or_raw(&script, req)
}

fn error_or_raw(script: &Script, req: &Recorded) -> Response {
    match &script.kind {
        Kind::Error { status, error } => {
            let error = if error.is_null() {
                not_found(
                    req.model.as_deref().unwrap_or("unknown"),
                    req.action.as_deref().unwrap_or("generateContent"),
                )
            } else {
                error.clone()
            };
            let body = if script.array_wrapped {
                json!([{ "error": error }])
            } else {
                json!({ "error": error })
            };
            json_response(*status, &body)
        }
        Kind::Raw {
            status,
            content_type,
            body,
        } => plain(*status, content_type, body.clone()),
        _ => generate_plain(script, req),
    }
}

/// Answers a generate call.
async fn generate(script: Script, req: &Recorded, stream: bool) -> Response {
    tokio::time::sleep(script.head_delay).await;
    match &script.kind {
        Kind::Error { .. } | Kind::Raw { .. } => error_or_raw(&script, req),
        _ if !stream => generate_plain(&script, req),
        Kind::Sse(body) => sse_response(vec![Frame::Bytes(body.clone())], script.chunk_delay),
        Kind::Answer(spec) => {
            let chunks = answer_chunks(spec, &script, req);
            let frames = chunks
                .iter()
                .map(|c| Frame::Bytes(format!("data: {c}{}", script.separator)))
                .collect();
            sse_response(frames, script.chunk_delay)
        }
        Kind::Broken { spec, ending } => {
            let mut spec = spec.clone();
            spec.finish = String::new();
            let mut frames: Vec<Frame> = answer_chunks(&spec, &script, req)
                .iter()
                .map(|c| Frame::Bytes(format!("data: {c}{}", script.separator)))
                .collect();
            match ending {
                Ending::Close => {}
                Ending::ErrorTail(e) => frames.push(Frame::Bytes(
                    serde_json::to_string_pretty(&json!({ "error": e })).expect("json"),
                )),
                Ending::MalformedChunk => frames.push(Frame::Bytes(format!(
                    "data: {{\"candidates\": [{{\"content\": {{\"parts\": [{{\"text\": \"unterminated{}",
                    script.separator
                ))),
                Ending::Reset => frames.push(Frame::Reset),
            }
            sse_response(frames, script.chunk_delay)
        }
    }
}

/// A non-streamed answer: the chunks merged into one response.
fn generate_plain(script: &Script, req: &Recorded) -> Response {
    match &script.kind {
        Kind::Answer(spec) => {
            let mut merged = spec.clone();
            let text: String = resolve_chunks(spec, req).concat();
            merged.chunks = Some(if text.is_empty() {
                Vec::new()
            } else {
                vec![text]
            });
            let mut chunks = answer_chunks(&merged, script, req);
            // Thought parts and the text end up in one candidate.
            let mut last = chunks.pop().unwrap_or(Value::Null);
            if !spec.thoughts.is_empty()
                && let Some(parts) = last["candidates"][0]["content"]["parts"].as_array_mut()
            {
                let mut all: Vec<Value> = spec
                    .thoughts
                    .iter()
                    .map(|t| json!({"text": t, "thought": true}))
                    .collect();
                all.append(parts);
                *parts = all;
            }
            json_response(200, &last)
        }
        Kind::Sse(body) => plain(200, "application/json; charset=UTF-8", body.clone()),
        Kind::Broken { .. } => plain(
            200,
            "application/json; charset=UTF-8",
            "{\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"unterminated".into(),
        ),
        Kind::Error { .. } | Kind::Raw { .. } => error_or_raw(script, req),
    }
}

enum Frame {
    Bytes(String),
    Reset,
}

fn sse_response(frames: Vec<Frame>, chunk_delay: Duration) -> Response {
    let stream = futures::stream::unfold(
        (frames.into_iter(), true),
        move |(mut frames, first)| async move {
            let frame = frames.next()?;
            if !first {
                tokio::time::sleep(chunk_delay).await;
            }
            let item = match frame {
                Frame::Bytes(b) => Ok(Bytes::from(b)),
                Frame::Reset => Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "fake reset",
                )),
            };
            Some((item, (frames, false)))
        },
    );
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(stream))
        .expect("a valid response")
}

/// The text deltas of an answer: scripted, or the default for this request.
fn resolve_chunks(spec: &AnswerSpec, req: &Recorded) -> Vec<String> {
    match &spec.chunks {
        Some(c) => c.clone(),
        None => split_text(&default_answer(
            &req.body,
            req.model.as_deref().unwrap_or(""),
        )),
    }
}

/// The JSON of every chunk of an answer.
fn answer_chunks(spec: &AnswerSpec, script: &Script, req: &Recorded) -> Vec<Value> {
    let model_version = script
        .model_version
        .clone()
        .or_else(|| req.model.clone())
        .unwrap_or_default();
    let response_id = format!("fake-{}", req.raw_body.len());
    let prompt_tokens = spec
        .usage
        .map_or(req.raw_body.chars().count().div_ceil(4) as u64, |u| u[0]);
    let thinking = if !spec.thoughts.is_empty() || req.thinking_config().is_object() {
        spec.usage.map_or(42, |u| u[2])
    } else {
        spec.usage.map_or(0, |u| u[2])
    };
    let cached = spec.usage.map_or(0, |u| u[3]);
    let usage = |candidates: Option<u64>, thoughts: bool| {
        let mut u = json!({ "promptTokenCount": prompt_tokens });
        let mut total = prompt_tokens;
        if let Some(c) = candidates {
            u["candidatesTokenCount"] = json!(c);
            total += c;
        }
        if thoughts && thinking > 0 {
            u["thoughtsTokenCount"] = json!(thinking);
            total += thinking;
        }
        if cached > 0 {
            u["cachedContentTokenCount"] = json!(cached);
        }
        u["totalTokenCount"] = json!(total);
        u
    };
    let wrap = |candidate: Option<Value>, usage: Value| {
        let mut c = json!({ "usageMetadata": usage, "modelVersion": model_version, "responseId": response_id });
        if let Some(candidate) = candidate {
            c["candidates"] = json!([candidate]);
        }
        c
    };

    if let Some(reason) = &spec.block_reason {
        let mut c = wrap(None, usage(None, false));
        c["promptFeedback"] = json!({ "blockReason": reason, "safetyRatings": [] });
        return vec![c];
    }
    if !spec.parts {
        let candidate =
            json!({ "content": { "role": "model" }, "finishReason": spec.finish, "index": 0 });
        return vec![wrap(Some(candidate), usage(None, true))];
    }

    let mut out = Vec::new();
    for t in &spec.thoughts {
        let candidate = json!({ "content": { "role": "model", "parts": [ { "text": t, "thought": true } ] }, "index": 0 });
        out.push(wrap(Some(candidate), usage(None, false)));
    }
    let chunks = resolve_chunks(spec, req);
    let total_chars: usize = chunks.iter().map(|c| c.chars().count()).sum();
    let final_output = spec.usage.map_or(total_chars.div_ceil(4) as u64, |u| u[1]);
    let mut so_far = 0usize;
    let n = chunks.len();
    for (i, text) in chunks.iter().enumerate() {
        so_far += text.chars().count();
        let last = i + 1 == n && !spec.finish.is_empty();
        let output = if last {
            final_output
        } else {
            (so_far.div_ceil(4) as u64).min(final_output.max(1))
        };
        let mut parts = vec![json!({ "text": text })];
        if last {
            parts.push(json!({ "text": "", "thoughtSignature": FAKE_SIGNATURE }));
        }
        let mut candidate = json!({ "content": { "role": "model", "parts": parts }, "index": 0 });
        if last {
            finish_candidate(&mut candidate, spec);
        }
        out.push(wrap(Some(candidate), usage(Some(output), true)));
    }
    if n == 0 && !spec.finish.is_empty() {
        // No text at all: the closing chunk carries only the signature part.
        let mut candidate = json!({ "content": { "role": "model", "parts": [ { "text": "", "thoughtSignature": FAKE_SIGNATURE } ] }, "index": 0 });
        finish_candidate(&mut candidate, spec);
        out.push(wrap(Some(candidate), usage(Some(0), true)));
    }
    out
}

fn finish_candidate(candidate: &mut Value, spec: &AnswerSpec) {
    candidate["finishReason"] = json!(spec.finish);
    if !spec.sources.is_empty() {
        let chunks: Vec<Value> = spec
            .sources
            .iter()
            .map(|(uri, title)| json!({ "web": { "uri": uri, "title": title } }))
            .collect();
        candidate["groundingMetadata"] = json!({
            "webSearchQueries": ["fake query"],
            "groundingChunks": chunks,
        });
    }
}

/// The default answer for a request: the echo, or the JSON object in JSON mode.
pub fn default_answer(body: &Value, model: &str) -> String {
    let turns = body["contents"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter(|m| m["role"].as_str().unwrap_or("user") == "user")
                .count()
        })
        .unwrap_or(0);
    let last: String = last_user_text(body)
        .chars()
        .take(80)
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    let echo = format!("FAKE-REPLY model={model} turns={turns} last={last}");
    if is_json_mode(body) {
        json!({ "summary": echo, "findings": [], "verdict": "ready" }).to_string()
    } else {
        echo
    }
}

fn is_json_mode(body: &Value) -> bool {
    let g = &body["generationConfig"];
    g.get("responseJsonSchema").is_some() || g.get("responseSchema").is_some()
}

fn parts_text(content: &Value) -> String {
    content["parts"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("")
        })
        .unwrap_or_default()
}

fn last_user_text(body: &Value) -> String {
    body["contents"]
        .as_array()
        .and_then(|c| {
            c.iter()
                .rev()
                .find(|m| m["role"].as_str().unwrap_or("user") == "user")
        })
        .map(parts_text)
        .unwrap_or_default()
}

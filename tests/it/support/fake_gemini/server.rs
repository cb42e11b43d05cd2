//! The HTTP server: routes, key checks, recording, the scripts queue.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method};
use axum::response::Response;
use axum::routing::{any, get};
use serde_json::{Value, json};

#[allow(unused_imports)]
use super::*;

/// The fake API. See the module documentation.
pub struct FakeGemini {
    pub(super) addr: SocketAddr,
    pub(super) shared: Arc<Shared>,
    pub(super) shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    pub(super) thread: Option<std::thread::JoinHandle<()>>,
}

/// State shared with the server thread. A std mutex: it is never held across an `.await`, and
/// the test side reads it from sync code.
/// Whether a bearer token is accepted.
pub(super) type BearerCheck = Arc<dyn Fn(&str) -> bool + Send + Sync>;

pub(super) struct Shared {
    pub(super) inner: Mutex<Inner>,
    /// Generate calls whose answer is still being produced or sent.
    pub(super) in_flight: std::sync::atomic::AtomicUsize,
}

/// Counts a generate call as in flight until its answer has been sent or its connection dropped.
pub(super) struct InFlight(Arc<Shared>);

impl InFlight {
    pub(super) fn new(shared: &Arc<Shared>) -> InFlight {
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

pub(super) struct Inner {
    pub(super) requests: Vec<Recorded>,
    pub(super) generate: VecDeque<Script>,
    pub(super) count_tokens: VecDeque<Script>,
    pub(super) list_models: VecDeque<Script>,
    pub(super) required_key: Option<String>,
    /// Vertex AI: accepts a bearer token when this says so (unset: any or none).
    pub(super) bearer_check: Option<BearerCheck>,
    /// Vertex AI: this project answers 403 PERMISSION_DENIED.
    pub(super) denied_project: Option<String>,
    pub(super) models: Vec<Value>,
    pub(super) responder: Option<Responder>,
    pub(super) caches: CacheStore,
    pub(super) interactions: InteractionStore,
    pub(super) files: FileStore,
}

/// Builds the answer to a generate call when no script is queued (see [`FakeGemini::respond_with`]).
pub(super) type Responder = Arc<dyn Fn(&Recorded) -> Option<Script> + Send + Sync>;

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
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
                bearer_check: None,
                denied_project: None,
                models: FakeGemini::default_models(),
                responder: None,
                caches: CacheStore::default(),
                interactions: InteractionStore::default(),
                files: FileStore::default(),
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
                        .route(
                            "/v1/projects/{project}/locations/{location}/publishers/google/models/{model_action}",
                            any(vertex_action),
                        )
                        .route("/v1/publishers/google/models/{model_action}", any(express_action))
                        .route("/v1beta/cachedContents", any(api_collection))
                        .route("/v1beta/cachedContents/{id}", any(api_item))
                        .route(
                            "/v1/projects/{project}/locations/{location}/cachedContents",
                            any(vertex_collection),
                        )
                        .route(
                            "/v1/projects/{project}/locations/{location}/cachedContents/{id}",
                            any(vertex_item),
                        )
                        .route("/upload/v1beta/files", any(upload))
                        .route("/v1beta/files/{id}", any(file_item))
                        .route("/v1beta/interactions", any(create_interaction))
                        .route("/v1beta/interactions/{id}", any(interaction_item))
                        .route("/v1beta/interactions/{id}/cancel", any(cancel_interaction))
                        .route("/v1/interactions", any(create_interaction))
                        .route("/v1/interactions/{id}", any(interaction_item))
                        .route("/v1/interactions/{id}/cancel", any(cancel_interaction))
                        // Vertex AI's, as google-genai reaches it (with a project; express mode).
                        .route(
                            "/v1beta1/projects/{project}/locations/{location}/interactions",
                            any(create_interaction),
                        )
                        .route(
                            "/v1beta1/projects/{project}/locations/{location}/interactions/{id}",
                            any(vertex_interaction_item),
                        )
                        .route(
                            "/v1beta1/projects/{project}/locations/{location}/interactions/{id}/cancel",
                            any(vertex_cancel_interaction),
                        )
                        .route("/v1beta1/interactions", any(create_interaction))
                        .route("/v1beta1/interactions/{id}", any(interaction_item))
                        .route("/v1beta1/interactions/{id}/cancel", any(cancel_interaction))
                        // Google takes 20 MB inline and 2 GB a file: more than axum's 2 MB.
                        .layer(axum::extract::DefaultBodyLimit::max(128 << 20))
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
            Endpoint::CreateCache => inner.caches.scripts.push_back(script),
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
        inner.generate.len()
            + inner.count_tokens.len()
            + inner.list_models.len()
            + inner.caches.scripts.len()
    }

    /// From now on, answer like Google to a missing (403) or different (400) key.
    /// Vertex AI calls must carry a bearer token `check` accepts.
    pub fn require_bearer(&self, check: impl Fn(&str) -> bool + Send + Sync + 'static) {
        self.shared.lock().bearer_check = Some(Arc::new(check));
    }

    /// Vertex AI calls for `project` answer 403 PERMISSION_DENIED.
    pub fn deny_project(&self, project: &str) {
        self.shared.lock().denied_project = Some(project.to_string());
    }

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
            text("gemini-3.6-flash", "Gemini 3.6 Flash", "3.6", true),
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

pub(super) fn record(
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
        effective: None,
        cached_tokens: None,
        at: std::time::Instant::now(),
    };
    shared.lock().requests.push(r.clone());
    r
}

/// 401 like Vertex AI without a valid bearer token (the check is the test's: `require_bearer`);
/// 403 PERMISSION_DENIED for a project set to refuse (`deny_project`).
pub(super) fn bearer_check(shared: &Shared, req: &Recorded, project: &str) -> Option<Response> {
    let (check, denied) = {
        let g = shared.lock();
        (g.bearer_check.clone(), g.denied_project.clone())
    };
    let token = req
        .header("authorization")
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(String::from);
    if let Some(check) = check
        && !token.as_deref().is_some_and(|t| check(t))
    {
        return Some(json_response(
            401,
            &json!({"error": {"code": 401, "status": "UNAUTHENTICATED",
                "message": "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential."}}),
        ));
    }
    if denied.as_deref() == Some(project) {
        return Some(json_response(
            403,
            &json!({"error": {"code": 403, "status": "PERMISSION_DENIED",
                "message": format!("Permission 'aiplatform.endpoints.predict' denied on resource '//aiplatform.googleapis.com/projects/{project}/locations/global/publishers/google/models/gemini' (or it may not exist).")}}),
        ));
    }
    None
}

/// 403/400 like Google when a key is required and missing or wrong.
pub(super) fn key_check(shared: &Shared, req: &Recorded) -> Option<Response> {
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

pub(super) async fn list_models(
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

pub(super) async fn model_action(
    State(shared): State<Arc<Shared>>,
    method: Method,
    Path(model_action): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = format!("/v1beta/models/{model_action}");
    answer(
        shared,
        method,
        path,
        model_action,
        query,
        headers,
        body,
        Auth::Key,
    )
    .await
}

/// Vertex AI's model path: `/v1/projects/{project}/locations/{location}/publishers/google/models/…`,
/// with a bearer token when one is required, and a 403 for a project set to refuse.
pub(super) async fn vertex_action(
    State(shared): State<Arc<Shared>>,
    method: Method,
    Path((project, location, model_action)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = format!(
        "/v1/projects/{project}/locations/{location}/publishers/google/models/{model_action}"
    );
    answer(
        shared,
        method,
        path,
        model_action,
        query,
        headers,
        body,
        Auth::Bearer(project),
    )
    .await
}

/// Vertex AI express mode: `/v1/publishers/google/models/…` with a key.
pub(super) async fn express_action(
    State(shared): State<Arc<Shared>>,
    method: Method,
    Path(model_action): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = format!("/v1/publishers/google/models/{model_action}");
    answer(
        shared,
        method,
        path,
        model_action,
        query,
        headers,
        body,
        Auth::Key,
    )
    .await
}

pub(super) enum Auth {
    Key,
    /// A bearer token, for this project.
    Bearer(String),
}

#[allow(clippy::too_many_arguments)]
async fn answer(
    shared: Arc<Shared>,
    method: Method,
    path: String,
    model_action: String,
    query: Option<String>,
    headers: HeaderMap,
    body: Bytes,
    auth: Auth,
) -> Response {
    let (model, action) = match model_action.split_once(':') {
        Some((m, a)) => (m.to_string(), Some(a.to_string())),
        None => (model_action.clone(), None),
    };
    let req = record(
        &shared,
        &method,
        path,
        query,
        Some((&model, action.as_deref())),
        &headers,
        &body,
    );
    match auth {
        Auth::Key => {
            if let Some(r) = key_check(&shared, &req) {
                return r;
            }
        }
        Auth::Bearer(project) => {
            if let Some(r) = bearer_check(&shared, &req, &project) {
                return r;
            }
        }
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
            if let Some(refused) = unknown_file(&shared, &req.body) {
                return refused;
            }
            // A named cache: refused, or its contents go first (the recorded request learns
            // what the model read).
            let req = match cached_content_use(&shared, &req) {
                CacheUse::Refused(refused) => return refused,
                CacheUse::None => req,
                CacheUse::Read(effective, tokens) => {
                    let mut inner = shared.lock();
                    let mut req = req;
                    req.effective = Some(effective);
                    req.cached_tokens = Some(tokens);
                    if let Some(stored) = inner.requests.iter_mut().rev().find(|r| {
                        r.at == req.at && r.path == req.path && r.raw_body == req.raw_body
                    }) {
                        *stored = req.clone();
                    }
                    req
                }
            };
            let tc = req.thinking_config();
            if tc.get("thinkingBudget").is_some() && tc.get("thinkingLevel").is_some() {
                return json_response(400, &json!({ "error": both_thinking_error() }));
            }
            if model.starts_with("gemini-2.") && req.calls_functions_in_json_mode() {
                return json_response(400, &json!({ "error": functions_with_json_error() }));
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
            // A `generateContentRequest` naming a cache counts it too, under the same rules
            // as a generate call.
            let mut named = req.clone();
            named.body = inner.clone();
            let cached = match cached_content_use(&shared, &named) {
                CacheUse::Refused(refused) => return refused,
                CacheUse::None => 0,
                CacheUse::Read(_, tokens) => tokens as usize,
            };
            let n = chars.div_ceil(4) + cached;
            let mut out = json!({"totalTokens": n, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": n}]});
            if cached > 0 {
                out["cachedContentTokenCount"] = json!(cached);
            }
            json_response(200, &out)
        }
        (_, a) => json_response(
            404,
            &json!({"error": google_error(404, "NOT_FOUND", &format!("Method not found: {}.", a.unwrap_or("(none)")), Vec::new())}),
        ),
    }
}

pub(super) fn not_found(model: &str, method: &str) -> Value {
    google_error(
        404,
        "NOT_FOUND",
        &format!(
            "models/{model} is not found for API version v1beta, or is not supported for {method}. Call ListModels to see the list of available models and their supported methods."
        ),
        Vec::new(),
    )
}

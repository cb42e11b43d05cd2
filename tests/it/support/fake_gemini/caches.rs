//! Explicit context caching: the `cachedContents` resource of the Gemini API
//! (`/v1beta/cachedContents[/{id}]`) and of Vertex AI
//! (`/v1/projects/{p}/locations/{l}/cachedContents[/{id}]`), its rules, and a generate call that
//! names a cache.
//!
//! - Create (`POST`): `model` (`models/<id>`; on Vertex AI
//!   `projects/{p}/locations/{l}/publishers/google/models/<id>`), `contents`, `systemInstruction`,
//!   `tools`, `toolConfig`, `displayName`, and `ttl` (`"600s"`) or `expireTime` (RFC 3339), not
//!   both; one hour without either. A model without `createCachedContent` is a 404. The answer
//!   holds `name`, `model`, `displayName`, `createTime`, `updateTime`, `expireTime` and
//!   `usageMetadata.totalTokenCount`, never the cached members. The count is ⌈chars / 4⌉ of the
//!   text of `systemInstruction` and `contents` plus the JSON of `tools` and `toolConfig` (the
//!   fake's `countTokens` counts text the same way). Under the model's minimum
//!   ([`CACHE_MINIMUMS`], [`FakeGemini::set_cache_minimum`]) it is a 400, and only then does
//!   [`FakeGemini::fail_next_cache_create`]'s 429 come (a free-tier key is told "too small"
//!   first too); a script queued for [`Endpoint::CreateCache`] answers before any check.
//! - Get, list (`cachedContents` + `nextPageToken`, at most [`CACHES_PAGE_CAP`] a page; `{}` when
//!   none is held), patch (only `ttl` or `expireTime` is applied, whatever `updateMask` says; a
//!   body with `name` is a 400) and delete (`{}`).
//! - A cache that is unknown, deleted, expired, or made with another key (Gemini API) or under
//!   another project or location (Vertex AI): the Gemini API answers 403 `PERMISSION_DENIED`
//!   "CachedContent not found (or permission denied)", for generate, get, patch and delete alike;
//!   Vertex AI 404 `NOT_FOUND` "Not found: cached content metadata for <id>.".
//! - Generate with `cachedContent`: 400 beside `systemInstruction`, `tools` or `toolConfig`; 400
//!   for another model than the cache's; else the answer is made for the cache's contents
//!   followed by the request's ([`Recorded::effective_body`]), and its usage has
//!   `cachedContentTokenCount` (the cache's count) inside `promptTokenCount`. `countTokens` with a
//!   `generateContentRequest` naming a cache counts it the same way.
//!
//! Time is the fake's clock: real time plus what [`FakeGemini::advance_clock`] added.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method};
use axum::response::Response;
use serde_json::{Value, json};

#[allow(unused_imports)]
use super::*;

/// The smallest cache each model takes, in tokens, when the test sets none.
///
/// Google documents one table, "the minimum input token count for context caching" on
/// <https://ai.google.dev/gemini-api/docs/caching> (revision of 2026-10-13: Gemini 4 Argon,
/// 3.8/3.7/3.6/3.5 Flash and 3.1 Pro Preview 4,096; 2.5 Flash and 2.5 Pro 2,048; the revision of
/// 2026-05-07 had 3 Flash Preview at 1,024). Flash-Lite models are not in it; a create on
/// `gemini-3.5-flash-lite` was refused below 1,024 ("min_total_token_count=1024", a probe of the
/// real API on 2026-09-07), so the Flash-Lite models take 1,024 here.
pub const CACHE_MINIMUMS: &[(&str, u64)] = &[
    ("gemini-2.5-pro", 2048),
    ("gemini-2.5-flash", 2048),
    ("gemini-2.5-flash-lite", 1024),
    ("gemini-3-flash-preview", 1024),
    ("gemini-3.1-pro-preview", 4096),
    ("gemini-3.1-flash-lite", 1024),
    ("gemini-3.5-flash", 4096),
    ("gemini-3.5-flash-lite", 1024),
    ("gemini-3.6-flash", 4096),
    ("gemini-3.7-flash", 4096),
    ("gemini-3.8-flash", 4096),
    ("gemini-4-argon", 4096),
];

/// The minimum of a model [`CACHE_MINIMUMS`] does not list.
pub const DEFAULT_CACHE_MINIMUM: u64 = 4096;

/// The largest page the fake's cache list returns, whatever `pageSize` asks (Google: "the
/// service may return fewer than this value").
pub const CACHES_PAGE_CAP: usize = 5;

/// The lifetime of a cache created without `ttl` or `expireTime`.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(3600);

/// A `cachedContents` call, as [`Recorded::cache_op`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CacheOp {
    Create,
    Get,
    List,
    Patch,
    Delete,
}

/// A cache the fake holds.
#[derive(Debug, Clone)]
pub struct HeldCache {
    /// `cachedContents/<id>`, or `projects/{p}/locations/{l}/cachedContents/<id>`.
    pub name: String,
    /// As created: `models/<id>`, or Vertex AI's full publisher model name.
    pub model: String,
    pub display_name: String,
    /// `usageMetadata.totalTokenCount`.
    pub token_count: u64,
    pub create_time: SystemTime,
    pub update_time: SystemTime,
    pub expire_time: SystemTime,
    /// The cached members as sent (`Null` when not sent).
    pub contents: Value,
    pub system_instruction: Value,
    pub tools: Value,
    pub tool_config: Value,
    /// The API key that made it (Gemini API); another key does not find it.
    pub key: Option<String>,
}

impl HeldCache {
    /// The model id, without `models/` or Vertex AI's prefix.
    pub fn model_id(&self) -> &str {
        self.model.rsplit('/').next().unwrap_or(&self.model)
    }

    /// `expireTime` as the API says it (RFC 3339 in UTC, 0, 3, 6 or 9 fractional digits).
    pub fn expire_time_rfc3339(&self) -> String {
        rfc3339(self.expire_time)
    }

    pub fn is_vertex(&self) -> bool {
        self.name.starts_with("projects/")
    }
}

/// The caches and their settings, inside [`Inner`].
#[derive(Default)]
pub(super) struct CacheStore {
    pub(super) held: Vec<HeldCache>,
    pub(super) minimums: HashMap<String, u64>,
    /// Added to real time: the fake's clock.
    pub(super) clock_offset: Duration,
    pub(super) created: u64,
    /// The next create answers 429 for free-tier storage.
    pub(super) quota_next: bool,
    pub(super) scripts: VecDeque<Script>,
}

impl CacheStore {
    pub(super) fn now(&self) -> SystemTime {
        SystemTime::now() + self.clock_offset
    }

    /// Drops the caches whose time has come, as Google does.
    pub(super) fn sweep(&mut self) {
        let now = self.now();
        self.held.retain(|c| c.expire_time > now);
    }

    fn minimum(&self, model: &str) -> u64 {
        self.minimums.get(model).copied().unwrap_or_else(|| {
            CACHE_MINIMUMS
                .iter()
                .find(|(m, _)| *m == model)
                .map_or(DEFAULT_CACHE_MINIMUM, |(_, n)| *n)
        })
    }

    /// The live cache `name`, if `key` may see it.
    fn find(&mut self, name: &str, key: Option<&str>) -> Option<&mut HeldCache> {
        self.sweep();
        self.held.iter_mut().find(|c| {
            c.name == name && (c.key.is_none() || key.is_none() || c.key.as_deref() == key)
        })
    }
}

impl FakeGemini {
    /// The caches held now (expired ones are gone), oldest first.
    pub fn caches(&self) -> Vec<HeldCache> {
        let mut inner = self.shared.lock();
        inner.caches.sweep();
        inner.caches.held.clone()
    }

    /// The `cachedContents` calls of this kind so far (with their bodies), in arrival order.
    pub fn cache_requests(&self, op: CacheOp) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.cache_op() == Some(op))
            .collect()
    }

    /// How many `cachedContents` calls of this kind arrived (refused ones too).
    pub fn cache_calls(&self, op: CacheOp) -> usize {
        self.cache_requests(op).len()
    }

    /// The next create answers like a free-tier key: 429 `RESOURCE_EXHAUSTED`,
    /// "TotalCachedContentStorageTokensPerModelFreeTier limit exceeded for model <m>: limit=0,
    /// requested=<n>" (Vertex AI: its plain 429). Any other answer: [`FakeGemini::push_to`]
    /// with [`Endpoint::CreateCache`].
    pub fn fail_next_cache_create(&self) {
        self.shared.lock().caches.quota_next = true;
    }

    /// Deletes a cache behind the client's back (a cache that vanished mid-thread); whether it
    /// was held.
    pub fn vanish_cache(&self, name: &str) -> bool {
        let mut inner = self.shared.lock();
        let before = inner.caches.held.len();
        inner.caches.held.retain(|c| c.name != name);
        inner.caches.held.len() < before
    }

    /// Moves the fake's clock forward: caches expire by it, and the times it answers follow it.
    pub fn advance_clock(&self, by: Duration) {
        self.shared.lock().caches.clock_offset += by;
    }

    /// The fake's clock.
    pub fn now(&self) -> SystemTime {
        self.shared.lock().caches.now()
    }

    /// The smallest cache `model` (an id, `gemini-3.8-flash`) takes from now on.
    pub fn set_cache_minimum(&self, model: &str, tokens: u64) {
        self.shared
            .lock()
            .caches
            .minimums
            .insert(model.to_string(), tokens);
    }
}

// --- routes ----------------------------------------------------------------------------------

/// Where a call was made: the Gemini API, or Vertex AI for a project and location.
#[derive(Debug, Clone)]
pub(super) enum Scope {
    Api,
    Vertex { project: String, location: String },
}

impl Scope {
    /// The scope of a generate call's path.
    pub(super) fn of_path(path: &str) -> Scope {
        let parts: Vec<&str> = path.split('/').collect();
        match parts.as_slice() {
            ["", "v1", "projects", project, "locations", location, ..] => Scope::Vertex {
                project: project.to_string(),
                location: location.to_string(),
            },
            _ => Scope::Api,
        }
    }

    fn parent(&self) -> String {
        match self {
            Scope::Api => String::new(),
            Scope::Vertex { project, location } => {
                format!("projects/{project}/locations/{location}/")
            }
        }
    }

    fn collection_path(&self) -> String {
        match self {
            Scope::Api => "/v1beta/cachedContents".into(),
            Scope::Vertex { .. } => format!("/v1/{}cachedContents", self.parent()),
        }
    }

    /// A model's name as this scope writes it.
    fn model_name(&self, id: &str) -> String {
        match self {
            Scope::Api => format!("models/{id}"),
            Scope::Vertex { .. } => format!("{}publishers/google/models/{id}", self.parent()),
        }
    }
}

pub(super) async fn api_collection(
    State(shared): State<Arc<Shared>>,
    method: Method,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    cache_call(shared, Scope::Api, None, method, query, headers, body).await
}

pub(super) async fn api_item(
    State(shared): State<Arc<Shared>>,
    method: Method,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    cache_call(shared, Scope::Api, Some(id), method, query, headers, body).await
}

pub(super) async fn vertex_collection(
    State(shared): State<Arc<Shared>>,
    method: Method,
    Path((project, location)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let scope = Scope::Vertex { project, location };
    cache_call(shared, scope, None, method, query, headers, body).await
}

pub(super) async fn vertex_item(
    State(shared): State<Arc<Shared>>,
    method: Method,
    Path((project, location, id)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let scope = Scope::Vertex { project, location };
    cache_call(shared, scope, Some(id), method, query, headers, body).await
}

async fn cache_call(
    shared: Arc<Shared>,
    scope: Scope,
    id: Option<String>,
    method: Method,
    query: Option<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut path = scope.collection_path();
    if let Some(id) = &id {
        path = format!("{path}/{id}");
    }
    let req = record(&shared, &method, path, query, None, &headers, &body);
    let refused = match &scope {
        Scope::Api => key_check(&shared, &req),
        Scope::Vertex { project, .. } => bearer_check(&shared, &req, project),
    };
    if let Some(r) = refused {
        return r;
    }
    let key = given_key(&req);
    match (method, id) {
        (Method::POST, None) => {
            let script = shared.lock().caches.scripts.pop_front();
            match script {
                Some(script) => scripted_plain(script, &req).await,
                None => create(&shared, &scope, &req, key),
            }
        }
        (Method::GET, None) => list(&shared, &scope, &req, key.as_deref()),
        (method, Some(id)) if matches!(method, Method::GET | Method::PATCH | Method::DELETE) => {
            let name = format!("{}cachedContents/{id}", scope.parent());
            let mut inner = shared.lock();
            let now = inner.caches.now();
            let Some(cache) = inner.caches.find(&name, key.as_deref()) else {
                return missing(&scope, &id);
            };
            if method == Method::GET {
                return json_response(200, &resource(cache));
            }
            if method == Method::PATCH {
                if req.body.is_null() && !req.raw_body.trim().is_empty() {
                    return json_response(400, &json!({ "error": invalid_json() }));
                }
                // The path sets the name; a body naming it too is refused (a real answer, in a
                // public "Gemini API documentation vs reality" note of June 2025).
                if req.body.get("name").is_some() {
                    let message = "Invalid value at 'cached_content' (oneof), oneof field '_name' is already set. Cannot set 'name'";
                    return json_response(
                        400,
                        &json!({"error": google_error(400, "INVALID_ARGUMENT", message, Vec::new())}),
                    );
                }
                return match expiry(&req.body, &req.raw_body, now) {
                    Err(e) => json_response(400, &json!({ "error": e })),
                    Ok(None) => json_response(200, &resource(cache)),
                    Ok(Some(at)) => {
                        cache.expire_time = at;
                        cache.update_time = now;
                        json_response(200, &resource(cache))
                    }
                };
            }
            inner.caches.held.retain(|c| c.name != name);
            json_response(200, &json!({}))
        }
        _ => json_response(
            404,
            &json!({"error": google_error(404, "NOT_FOUND", "Method not found.", Vec::new())}),
        ),
    }
}

/// The key a Gemini API call carries (header, else `?key=`).
fn given_key(req: &Recorded) -> Option<String> {
    req.header("x-goog-api-key").map(String::from).or_else(|| {
        req.query.as_deref().and_then(|q| {
            q.split('&')
                .find_map(|kv| kv.strip_prefix("key="))
                .map(String::from)
        })
    })
}

fn create(shared: &Shared, scope: &Scope, req: &Recorded, key: Option<String>) -> Response {
    let body = &req.body;
    if !body.is_object() {
        return json_response(400, &json!({ "error": invalid_json() }));
    }
    let model = body["model"].as_str().unwrap_or_default();
    let id = match scope {
        Scope::Api => model.strip_prefix("models/").unwrap_or(model),
        // google-genai (`t_caches_model`): "vertex caches only support model name start with
        // projects".
        Scope::Vertex { .. } => match model.strip_prefix(&scope.model_name("")) {
            Some(id) => id,
            None => {
                return json_response(
                    400,
                    &json!({"error": google_error(400, "INVALID_ARGUMENT", "Request contains an invalid argument.", Vec::new())}),
                );
            }
        },
    };
    if id.is_empty() {
        return json_response(
            400,
            &json!({"error": google_error(400, "INVALID_ARGUMENT", "Request contains an invalid argument.", Vec::new())}),
        );
    }
    let mut inner = shared.lock();
    let cacheable = inner.models.iter().any(|m| {
        m["name"] == format!("models/{id}")
            && m["supportedGenerationMethods"]
                .as_array()
                .is_some_and(|s| s.iter().any(|x| x == "createCachedContent"))
    });
    if !cacheable {
        return json_response(
            404,
            &json!({ "error": not_found(id, "createCachedContent") }),
        );
    }
    let now = inner.caches.now();
    let expire = match expiry(body, &req.raw_body, now) {
        Err(e) => return json_response(400, &json!({ "error": e })),
        Ok(at) => at.unwrap_or(now + DEFAULT_CACHE_TTL),
    };
    let tokens = cache_tokens(body);
    let min = inner.caches.minimum(id);
    if tokens < min {
        let message = match scope {
            // A real answer (gemini-2.5-flash; BerriAI/litellm#17696, and a 2026-09-07 probe).
            Scope::Api => format!(
                "Cached content is too small. total_token_count={tokens}, min_total_token_count={min}"
            ),
            // Vertex AI's wording (BerriAI/litellm's test of a vertex_ai error, gemini-3.5-flash).
            Scope::Vertex { .. } => format!(
                "The cached content is of {tokens} tokens. The minimum token count to start caching is {min}."
            ),
        };
        return json_response(
            400,
            &json!({"error": google_error(400, "INVALID_ARGUMENT", &message, Vec::new())}),
        );
    }
    if std::mem::take(&mut inner.caches.quota_next) {
        let message = match scope {
            Scope::Api => format!(
                "TotalCachedContentStorageTokensPerModelFreeTier limit exceeded for model {id}: limit=0, requested={tokens}"
            ),
            Scope::Vertex { .. } => "Resource exhausted. Please try again later. Please refer to https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429 for more details.".into(),
        };
        return json_response(
            429,
            &json!({"error": google_error(429, "RESOURCE_EXHAUSTED", &message, Vec::new())}),
        );
    }
    inner.caches.created += 1;
    let n = inner.caches.created;
    let cache = HeldCache {
        name: format!("{}cachedContents/{}", scope.parent(), cache_id(scope, n)),
        model: scope.model_name(id),
        display_name: member(body, "displayName", "display_name")
            .as_str()
            .unwrap_or_default()
            .to_string(),
        token_count: tokens,
        create_time: now,
        update_time: now,
        expire_time: expire,
        contents: member(body, "contents", "contents").clone(),
        system_instruction: member(body, "systemInstruction", "system_instruction").clone(),
        tools: member(body, "tools", "tools").clone(),
        tool_config: member(body, "toolConfig", "tool_config").clone(),
        key: if matches!(scope, Scope::Api) {
            key
        } else {
            None
        },
    };
    let out = resource(&cache);
    inner.caches.held.push(cache);
    json_response(200, &out)
}

fn list(shared: &Shared, scope: &Scope, req: &Recorded, key: Option<&str>) -> Response {
    let param = |name: &str| {
        req.query.as_deref().and_then(|q| {
            q.split('&')
                .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
                .map(String::from)
        })
    };
    let size = param("pageSize")
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(CACHES_PAGE_CAP)
        .min(CACHES_PAGE_CAP);
    let start = match param("pageToken") {
        None => 0,
        Some(t) => match t.strip_prefix("caches-").and_then(|n| n.parse().ok()) {
            Some(n) => n,
            None => {
                return json_response(
                    400,
                    &json!({"error": google_error(400, "INVALID_ARGUMENT", "Invalid page token.", Vec::new())}),
                );
            }
        },
    };
    let mut inner = shared.lock();
    inner.caches.sweep();
    let parent = scope.parent();
    let visible: Vec<Value> = inner
        .caches
        .held
        .iter()
        .filter(|c| {
            c.name
                .strip_prefix(&parent)
                .is_some_and(|r| r.starts_with("cachedContents/"))
                && (c.key.is_none() || key.is_none() || c.key.as_deref() == key)
        })
        .map(resource)
        .collect();
    let page: Vec<Value> = visible.iter().skip(start).take(size).cloned().collect();
    // Nothing held: the real API answers `{}` (a 2026-09-07 probe).
    let mut out = json!({});
    if !page.is_empty() {
        out["cachedContents"] = json!(page);
    }
    if start + size < visible.len() {
        out["nextPageToken"] = json!(format!("caches-{}", start + size));
    }
    json_response(200, &out)
}

/// A cache as the API answers it: never its `contents`, `systemInstruction`, `tools` or
/// `toolConfig` (they are input only). The Gemini API writes an empty `displayName` too.
fn resource(c: &HeldCache) -> Value {
    let mut v = json!({
        "name": c.name,
        "model": c.model,
        "createTime": rfc3339(micros(c.create_time)),
        "updateTime": rfc3339(micros(c.update_time)),
        "expireTime": c.expire_time_rfc3339(),
        "usageMetadata": { "totalTokenCount": c.token_count },
    });
    if !c.is_vertex() || !c.display_name.is_empty() {
        v["displayName"] = json!(c.display_name);
    }
    v
}

/// A missing cache, as each backend says it.
fn missing(scope: &Scope, id: &str) -> Response {
    match scope {
        Scope::Api => json_response(
            403,
            &json!({"error": google_error(403, "PERMISSION_DENIED", "CachedContent not found (or permission denied)", Vec::new())}),
        ),
        Scope::Vertex { .. } => json_response(
            404,
            &json!({"error": google_error(404, "NOT_FOUND", &format!("Not found: cached content metadata for {id}."), Vec::new())}),
        ),
    }
}

fn invalid_json() -> Value {
    google_error(
        400,
        "INVALID_ARGUMENT",
        "Invalid JSON payload received.",
        Vec::new(),
    )
}

/// A field under its camelCase or snake_case name (the API takes both); `Null` when absent.
fn member<'a>(body: &'a Value, camel: &str, snake: &str) -> &'a Value {
    match body.get(camel) {
        Some(v) if !v.is_null() => v,
        _ => body.get(snake).unwrap_or(&Value::Null),
    }
}

/// The name a generate body gives in `cachedContent`.
pub(super) fn cached_content_field(body: &Value) -> Option<&str> {
    member(body, "cachedContent", "cached_content").as_str()
}

/// ⌈chars / 4⌉ of what a create body caches: text parts, function calls and results (their
/// JSON), the tools.
fn cache_tokens(body: &Value) -> u64 {
    let mut chars = parts_text(member(body, "systemInstruction", "system_instruction"))
        .chars()
        .count();
    for m in body["contents"].as_array().into_iter().flatten() {
        chars += parts_text(m).chars().count();
        // Function calls and their results count as the API counts them: their JSON.
        for p in m["parts"].as_array().into_iter().flatten() {
            for key in ["functionCall", "functionResponse"] {
                if let Some(v) = p.get(key) {
                    chars += v.to_string().chars().count();
                }
            }
        }
    }
    for v in [
        member(body, "tools", "tools"),
        member(body, "toolConfig", "tool_config"),
    ] {
        if !v.is_null() {
            chars += v.to_string().chars().count();
        }
    }
    chars.div_ceil(4) as u64
}

/// A cache id as each backend writes one: the Gemini API's 40 lower-case letters and digits,
/// Vertex AI's 19 digits.
fn cache_id(scope: &Scope, n: u64) -> String {
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    match scope {
        Scope::Api => {
            let alphabet = b"0123456789abcdefghijklmnopqrstuvwxyz";
            (0..40)
                .map(|_| alphabet[(next() % 36) as usize] as char)
                .collect()
        }
        Scope::Vertex { .. } => format!(
            "{}",
            1_000_000_000_000_000_000 + next() % 8_000_000_000_000_000_000
        ),
    }
}

/// The expiry a create or patch body asks for: `None` when it names none, an error object for
/// both or a malformed one. The wording is the JSON transcoding's of Google's other APIs (not
/// seen from `cachedContents` itself).
fn expiry(body: &Value, raw: &str, now: SystemTime) -> Result<Option<SystemTime>, Value> {
    let ttl = member(body, "ttl", "ttl");
    let at = member(body, "expireTime", "expire_time");
    let bad = |field: &str, kind: &str, v: &Value| {
        let message = format!(
            "Invalid value at 'cached_content.{field}' (type.googleapis.com/google.protobuf.{kind}), {v}"
        );
        google_error(
            400,
            "INVALID_ARGUMENT",
            &message,
            vec![json!({"@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{"field": format!("cached_content.{field}"), "description": message}]})],
        )
    };
    if !ttl.is_null() && !at.is_null() {
        // `expiration` is a oneof: the field read second is refused.
        let ttl_at = raw.find("\"ttl\"").unwrap_or(0);
        let at_name = if raw.contains("\"expire_time\"") {
            "expire_time"
        } else {
            "expireTime"
        };
        let at_at = raw.find(&format!("\"{at_name}\"")).unwrap_or(0);
        let second = if ttl_at > at_at { "ttl" } else { at_name };
        return Err(google_error(
            400,
            "INVALID_ARGUMENT",
            &format!(
                "Invalid value at 'cached_content' (oneof), oneof field 'expiration' is already set. Cannot set '{second}'"
            ),
            Vec::new(),
        ));
    }
    if !ttl.is_null() {
        return match ttl.as_str().and_then(parse_duration) {
            Some(d) => Ok(Some(now + d)),
            None => Err(bad("ttl", "Duration", ttl)),
        };
    }
    if !at.is_null() {
        return match at
            .as_str()
            .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
        {
            Some(t) => Ok(Some(SystemTime::from(t))),
            None => Err(bad("expire_time", "Timestamp", at)),
        };
    }
    Ok(None)
}

/// A protobuf JSON duration: seconds with up to nine fractional digits, then `s` (`"3.5s"`).
pub(super) fn parse_duration(s: &str) -> Option<Duration> {
    let num = s.strip_suffix('s')?;
    let (secs, frac) = num.split_once('.').unwrap_or((num, ""));
    if secs.is_empty() || !secs.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let nanos = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<9}").parse().ok()?
    };
    Some(Duration::new(secs.parse().ok()?, nanos))
}

/// A time as protobuf's JSON writes one: UTC, `Z`, with 0, 3, 6 or 9 fractional digits.
pub(super) fn rfc3339(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// `t` to the microsecond, as Google writes `createTime` and `updateTime`
/// (`2026-09-07T01:18:17.438678Z`); `expireTime` keeps nanoseconds.
fn micros(t: SystemTime) -> SystemTime {
    let since = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    SystemTime::UNIX_EPOCH + Duration::from_micros(since.as_micros() as u64)
}

// --- generate calls that name a cache -------------------------------------------------------------

/// What a generate call does with `cachedContent`.
pub(super) enum CacheUse {
    /// It names none.
    None,
    /// The body the model reads, and the cache's token count.
    Read(Value, u64),
    /// Google's refusal.
    Refused(Response),
}

/// What the `cachedContent` of a generate call comes to.
pub(super) fn cached_content_use(shared: &Shared, req: &Recorded) -> CacheUse {
    let Some(name) = cached_content_field(&req.body) else {
        return CacheUse::None;
    };
    let scope = Scope::of_path(&req.path);
    let body = &req.body;
    let set = |camel, snake| !member(body, camel, snake).is_null();
    if set("systemInstruction", "system_instruction")
        || set("tools", "tools")
        || set("toolConfig", "tool_config")
    {
        let message = match scope {
            // The Gemini API's answer, verbatim (a 2026-09-07 probe: even a byte-identical
            // re-send; one message for all three fields).
            Scope::Api => {
                "CachedContent can not be used with GenerateContent request setting system_instruction, tools or tool_config.\n\nProposed fix: move those values to CachedContent from GenerateContent request."
            }
            // Vertex AI's (BerriAI/litellm#26014, pydantic/pydantic-ai#5671).
            Scope::Vertex { .. } => {
                "Tool config, tools and system instruction should not be set in the request when using cached content."
            }
        };
        return CacheUse::Refused(json_response(
            400,
            &json!({"error": google_error(400, "INVALID_ARGUMENT", message, Vec::new())}),
        ));
    }
    let key = given_key(req);
    let mut inner = shared.lock();
    let id = name.rsplit('/').next().unwrap_or(name).to_string();
    let Some(cache) = inner.caches.find(name, key.as_deref()) else {
        return CacheUse::Refused(missing(&scope, &id));
    };
    let model = req.model.clone().unwrap_or_default();
    if cache.model_id() != model {
        let message = format!(
            "Model used by GenerateContent request ({}) and CachedContent ({}) has to be the same.",
            scope.model_name(&model),
            cache.model
        );
        return CacheUse::Refused(json_response(
            400,
            &json!({"error": google_error(400, "INVALID_ARGUMENT", &message, Vec::new())}),
        ));
    }
    let mut effective = body.clone();
    let mut contents: Vec<Value> = cache.contents.as_array().cloned().unwrap_or_default();
    contents.extend(body["contents"].as_array().cloned().unwrap_or_default());
    effective["contents"] = Value::Array(contents);
    for (field, held) in [
        ("systemInstruction", &cache.system_instruction),
        ("tools", &cache.tools),
        ("toolConfig", &cache.tool_config),
    ] {
        if !held.is_null() {
            effective[field] = held.clone();
        }
    }
    CacheUse::Read(effective, cache.token_count)
}

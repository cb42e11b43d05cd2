//! The Interactions API, as google-genai 3.3.0 defines it (`google/genai/_gaos/interactions.py`
//! for the paths, `types/interactions/` for the shapes), at `/v1beta/interactions` (Google's
//! REST examples) and `/v1/interactions` (the version google-genai 3.3.0 calls, GA since June
//! 2026); one store for both. Below, `/v1beta` stands for either.
//!
//! - `POST /v1beta/interactions`: a `CreateModelInteraction` body (`createmodelinteraction.py`:
//!   `model`, `input` — a string, a `Content`, a list of `Content` or of `Step` —,
//!   `system_instruction`, `generation_config`, `tools`, `response_format`,
//!   `previous_interaction_id`, `store`, `background`, `stream`; snake_case on the wire). It is
//!   answered by the next generate [`Script`] (one queue with `generateContent`, and
//!   [`FakeGemini::respond_with`]), else the echo `FAKE-REPLY model=<m> turns=<n> last=<t>`
//!   (`<n>` counting the turns the server holds), or its JSON object when `response_format`
//!   asks for JSON. An error script is the HTTP error, as for generate.
//!   - Plain: the `Interaction` (`interaction.py`: `id`, `status`, `model`, `created`,
//!     `updated`, `steps` — the output steps —, `usage`, `previous_interaction_id`).
//!   - `stream: true`: `text/event-stream`, the events of `interaction_answer::stream_events`.
//!   - `background: true`: the `Interaction` at once with `status: "in_progress"` and no steps;
//!     it completes when the script's [`Script::delay_headers`] has passed on the fake's clock
//!     (real time plus [`FakeGemini::advance_clock`]), which `GET` then shows.
//! - `GET /v1beta/interactions/{id}?stream=true` (and `last_event_id`): its events replayed.
//! - `GET /v1beta/interactions/{id}` (`?include_input=true` adds `input`): the interaction, its
//!   `steps` led by this turn's `user_input` steps (the create answer has only the model's, as
//!   Google's overview says: ai.google.dev/gemini-api/docs/interactions).
//! - `POST /v1beta/interactions/{id}/cancel`: a background interaction still in progress
//!   becomes `cancelled` (and never completes); any other answers 400 `FAILED_PRECONDITION`.
//! - `DELETE /v1beta/interactions/{id}`: `{}`; the id is unknown from then on.
//!
//! State: with `store` absent or `true` the fake keeps each interaction; a create naming
//! `previous_interaction_id` reads the chain's steps (inputs and outputs, oldest first) as
//! history, counted as input tokens. With `store: false` nothing is kept, so a later
//! `previous_interaction_id` to it fails; `background` needs `store` (400 `INVALID_ARGUMENT`).
//! An unknown or deleted id answers 404 `NOT_FOUND` in Google's error envelope (which
//! google-genai's client reads as its `NotFoundError`); a top-level field the create body does
//! not have (`previousInteractionId`, camelCase) 400 `INVALID_ARGUMENT`.

use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use serde_json::{Value, json};
use std::sync::Arc;

#[allow(unused_imports)]
use super::*;

/// An Interactions API call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InteractionOp {
    Create,
    Get,
    Cancel,
    Delete,
}

/// One interaction the fake holds (`store` was not false).
#[derive(Debug, Clone)]
pub struct HeldInteraction {
    pub id: String,
    /// The `Interaction` as the create answered it (`GET` adds the input steps).
    pub resource: Value,
    /// This turn's input, as steps (`user_input`, `function_result`…).
    pub input: Vec<Value>,
    /// The output steps (empty while a background run is in progress).
    pub outputs: Vec<Value>,
    /// The steps of the chain before this turn, oldest first.
    pub history: Vec<Value>,
    pub previous: Option<String>,
    /// A background run: when it completes, and the resource and outputs it completes with.
    pub(super) pending: Option<(SystemTime, Value, Vec<Value>)>,
    /// What the model produced, for a `GET ?stream=true` replay.
    pub(super) outcome: Outcome,
}

impl HeldInteraction {
    pub fn status(&self) -> &str {
        self.resource["status"].as_str().unwrap_or("")
    }

    /// Completes a background run whose time has come.
    fn settle(&mut self, now: SystemTime) {
        if let Some((at, _, _)) = &self.pending
            && *at <= now
            && let Some((_, resource, outputs)) = self.pending.take()
        {
            self.resource = resource;
            self.outputs = outputs;
        }
    }
}

#[derive(Default)]
pub(super) struct InteractionStore {
    pub(super) held: Vec<HeldInteraction>,
    pub(super) created: u64,
}

impl FakeGemini {
    /// The interactions held now (background runs settled by the fake's clock), oldest first.
    pub fn interactions(&self) -> Vec<HeldInteraction> {
        let mut inner = self.shared.lock();
        let now = inner.caches.now();
        for h in &mut inner.interactions.held {
            h.settle(now);
        }
        inner.interactions.held.clone()
    }

    /// The interaction `id`, if held.
    pub fn interaction(&self, id: &str) -> Option<HeldInteraction> {
        self.interactions().into_iter().find(|h| h.id == id)
    }

    /// The Interactions API calls of `op` so far, in arrival order.
    pub fn interaction_requests(&self, op: InteractionOp) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.interaction_op() == Some(op))
            .collect()
    }

    /// The bytes of each create body received, in order: what a client sends per turn.
    pub fn interaction_bytes_received(&self) -> Vec<usize> {
        self.interaction_requests(InteractionOp::Create)
            .iter()
            .map(|r| r.raw_body.len())
            .collect()
    }
}

impl Recorded {
    /// Which Interactions API call this is, if one.
    pub fn interaction_op(&self) -> Option<InteractionOp> {
        // The Gemini API's paths, and Vertex AI's (`/v1beta1/…/interactions`).
        let path = self.path.as_str();
        let rest = path
            .strip_prefix("/v1beta/interactions")
            .or_else(|| path.strip_prefix("/v1/interactions"))
            .or_else(|| {
                let at = path.find("/interactions")?;
                path.starts_with("/v1beta1/")
                    .then(|| &path[at + "/interactions".len()..])
            })?;
        match (self.method.as_str(), rest) {
            ("POST", "") => Some(InteractionOp::Create),
            ("POST", r) if r.ends_with("/cancel") => Some(InteractionOp::Cancel),
            ("GET", r) if r.len() > 1 => Some(InteractionOp::Get),
            ("DELETE", r) if r.len() > 1 => Some(InteractionOp::Delete),
            _ => None,
        }
    }

    /// A create's input as steps (a string or contents become one `user_input` step).
    pub fn interaction_input(&self) -> Vec<Value> {
        input_steps(&self.body["input"]).unwrap_or_default()
    }

    /// The text of a create's last `user_input` step.
    pub fn interaction_input_text(&self) -> String {
        self.interaction_input()
            .iter()
            .rev()
            .find(|s| s["type"] == "user_input")
            .map(step_text)
            .unwrap_or_default()
    }

    /// The steps the server held for a create (its `previous_interaction_id` chain), oldest
    /// first; empty without one.
    pub fn interaction_history(&self) -> Vec<Value> {
        self.effective
            .as_ref()
            .and_then(|e| e["history"].as_array().cloned())
            .unwrap_or_default()
    }

    /// User turns the model read: the history's and this input's.
    pub fn interaction_turns(&self) -> usize {
        let mut all = self.interaction_history();
        all.extend(self.interaction_input());
        user_turns(&all)
    }
}

/// The fields of a create body: `CreateModelInteraction` and `CreateAgentInteraction`'s
/// (`createmodelinteraction.py`, `createagentinteraction.py`).
pub const CREATE_FIELDS: [&str; 21] = [
    "agent",
    "agent_config",
    "background",
    "cached_content",
    "continuation_token",
    "environment",
    "generation_config",
    "input",
    "labels",
    "model",
    "previous_interaction_id",
    "response_format",
    "response_mime_type",
    "response_modalities",
    "safety_settings",
    "service_tier",
    "store",
    "stream",
    "system_instruction",
    "tools",
    "webhook_config",
];

const CONTENT_TYPES: [&str; 5] = ["text", "image", "audio", "document", "video"];

/// `input` (`interactionsinput.py`: `Content | list[Step] | list[Content] | str`) as steps.
pub(super) fn input_steps(input: &Value) -> Option<Vec<Value>> {
    let is_content = |v: &Value| {
        v["type"]
            .as_str()
            .is_some_and(|t| CONTENT_TYPES.contains(&t))
    };
    match input {
        Value::String(s) => Some(vec![
            json!({ "type": "user_input", "content": [{ "type": "text", "text": s }] }),
        ]),
        Value::Object(_) if is_content(input) => {
            Some(vec![json!({ "type": "user_input", "content": [input] })])
        }
        Value::Array(items) if !items.is_empty() && items.iter().all(is_content) => {
            Some(vec![json!({ "type": "user_input", "content": items })])
        }
        Value::Array(items) if items.iter().all(|s| s["type"].is_string()) => Some(items.clone()),
        _ => None,
    }
}

fn invalid(message: &str) -> Response {
    json_response(
        400,
        &json!({ "error": google_error(400, "INVALID_ARGUMENT", message, Vec::new()) }),
    )
}

fn unknown(id: &str) -> Response {
    json_response(
        404,
        &json!({ "error": google_error(404, "NOT_FOUND", &format!("Interaction '{id}' not found."), Vec::new()) }),
    )
}

/// `POST /v1beta/interactions`.
pub(super) async fn create_interaction(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let model_in_body = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|b| b["model"].as_str().map(String::from));
    let mut req = record(
        &shared,
        &method,
        uri.path().to_string(),
        query,
        model_in_body.as_deref().map(|m| (m, None)),
        &headers,
        &body,
    );
    if let Some(r) = key_check(&shared, &req) {
        return r;
    }
    if method != Method::POST {
        return json_response(
            404,
            &json!({"error": google_error(404, "NOT_FOUND", "Method not found.", Vec::new())}),
        );
    }
    let b = req.body.clone();
    if !b.is_object() {
        return invalid("Invalid JSON payload received.");
    }
    // A field the API does not have (`previousInteractionId`): refused at the top level, as
    // Google's JSON parser refuses unknown names.
    if let Some(k) = b
        .as_object()
        .and_then(|o| o.keys().find(|k| !CREATE_FIELDS.contains(&k.as_str())))
    {
        return invalid(&format!(
            "Invalid JSON payload received. Unknown name \"{k}\": Cannot find field."
        ));
    }
    if !b["model"].is_string() && !b["agent"].is_string() {
        return invalid("One of 'model' or 'agent' must be set.");
    }
    let Some(input) = input_steps(&b["input"]) else {
        return invalid("'input' must be a string, a content, or a list of contents or steps.");
    };
    let store = b["store"].as_bool().unwrap_or(true);
    let background = b["background"].as_bool().unwrap_or(false);
    let stream = b["stream"].as_bool().unwrap_or(false);
    if background && !store {
        return invalid("'background' requires 'store' to be true.");
    }
    let previous = b["previous_interaction_id"].as_str().map(String::from);
    // The chain's steps, and the id and times the fake gives this one.
    let (history, id, now) = {
        let mut inner = shared.lock();
        let now = inner.caches.now();
        let history = match &previous {
            None => Vec::new(),
            Some(p) => {
                let Some(prev) = inner.interactions.held.iter_mut().find(|h| &h.id == p) else {
                    return unknown(p);
                };
                prev.settle(now);
                let mut h = prev.history.clone();
                h.extend(prev.input.iter().cloned());
                h.extend(prev.outputs.iter().cloned());
                h
            }
        };
        inner.interactions.created += 1;
        let id = format!("v1_fake-{:04}", inner.interactions.created);
        // The request learns what the model read (as a cached generate call does).
        req.effective = Some(json!({ "history": history, "input": input }));
        if let Some(stored) = inner
            .requests
            .iter_mut()
            .rev()
            .find(|r| r.at == req.at && r.path == req.path && r.raw_body == req.raw_body)
        {
            *stored = req.clone();
        }
        (history, id, now)
    };
    let (queued, responder) = {
        let mut inner = shared.lock();
        (inner.generate.pop_front(), inner.responder.clone())
    };
    let script = queued
        .or_else(|| responder.and_then(|f| f(&req)))
        .unwrap_or_else(Script::echo);
    let Some(outcome) = outcome(&script, &b, &req.raw_body, &history, &input) else {
        tokio::time::sleep(script.head_delay).await;
        return error_or_raw(&script, &req);
    };
    let stamp = rfc3339(now);
    let mut head = json!({ "id": id, "status": "in_progress", "created": stamp, "updated": stamp });
    for k in ["model", "agent"] {
        if b[k].is_string() {
            head[k] = b[k].clone();
        }
    }
    if let Some(p) = &previous {
        head["previous_interaction_id"] = json!(p);
    }
    for k in ["system_instruction", "service_tier"] {
        if let Some(v) = b.get(k) {
            head[k] = v.clone();
        }
    }
    let outputs = outcome.steps();
    let mut done = head.clone();
    done["status"] = json!(outcome.status);
    done["steps"] = json!(outputs);
    done["usage"] = outcome.usage_json();
    let held = |resource: Value, outputs: Vec<Value>, pending| HeldInteraction {
        id: id.clone(),
        resource,
        input: input.clone(),
        outputs,
        history: history.clone(),
        previous: previous.clone(),
        pending,
        outcome: outcome.clone(),
    };
    if background {
        let at = now + script.head_delay;
        done["updated"] = json!(rfc3339(at));
        let h = held(head.clone(), Vec::new(), Some((at, done, outputs)));
        shared.lock().interactions.held.push(h);
        return json_response(200, &head);
    }
    let guard = InFlight::new(&shared);
    tokio::time::sleep(script.head_delay).await;
    if store {
        let h = held(done.clone(), outputs, None);
        shared.lock().interactions.held.push(h);
    }
    if !stream {
        drop(guard);
        return json_response(200, &done);
    }
    let mut stream_head = head.clone();
    stream_head["object"] = json!("interaction");
    for k in [
        "created",
        "updated",
        "system_instruction",
        "previous_interaction_id",
    ] {
        if let Some(m) = stream_head.as_object_mut() {
            m.remove(k);
        }
    }
    let frames = stream_events(&stream_head, &outcome)
        .into_iter()
        .map(Frame::Bytes)
        .collect();
    let response = sse_response(frames, script.chunk_delay);
    let (parts, body) = response.into_parts();
    let body = futures::StreamExt::map(body.into_data_stream(), move |chunk| {
        let _held = &guard;
        chunk
    });
    Response::from_parts(parts, axum::body::Body::from_stream(body))
}

/// `GET` and `DELETE /v1beta/interactions/{id}` (a create or a stream holds the in-flight count,
/// as a generate call does).
pub(super) async fn interaction_item(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    item(shared, method, uri, id, query, headers, body, false).await
}

/// `GET` and `DELETE` at Vertex AI's path (`/v1beta1/projects/{p}/locations/{l}/interactions/{id}`,
/// google-genai 3.3.0's `_gaos/google_genai.py`).
pub(super) async fn vertex_interaction_item(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    Path((_, _, id)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    item(shared, method, uri, id, query, headers, body, false).await
}

/// `POST …/cancel` at Vertex AI's path.
pub(super) async fn vertex_cancel_interaction(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    Path((_, _, id)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    item(shared, method, uri, id, query, headers, body, true).await
}

/// `POST /v1beta/interactions/{id}/cancel`.
pub(super) async fn cancel_interaction(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    item(shared, method, uri, id, query, headers, body, true).await
}

#[allow(clippy::too_many_arguments)]
async fn item(
    shared: Arc<Shared>,
    method: Method,
    uri: Uri,
    id: String,
    query: Option<String>,
    headers: HeaderMap,
    body: Bytes,
    cancel: bool,
) -> Response {
    let req = record(
        &shared,
        &method,
        uri.path().to_string(),
        query.clone(),
        None,
        &headers,
        &body,
    );
    if let Some(r) = key_check(&shared, &req) {
        return r;
    }
    let param = |name: &str| {
        query.as_deref().and_then(|q| {
            q.split('&')
                .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
                .map(String::from)
        })
    };
    if method == Method::GET && !cancel && param("stream").as_deref() == Some("true") {
        return replay(&shared, &id, param("last_event_id")).await;
    }
    let mut inner = shared.lock();
    let now = inner.caches.now();
    let Some(pos) = inner.interactions.held.iter().position(|h| h.id == id) else {
        return unknown(&id);
    };
    inner.interactions.held[pos].settle(now);
    match (method, cancel) {
        (Method::GET, false) => {
            let h = &inner.interactions.held[pos];
            // The stored resource holds the `user_input` steps too; the create answer only
            // the model's (ai.google.dev/gemini-api/docs/interactions, "How it works").
            let mut out = h.resource.clone();
            let steps: Vec<Value> = h.input.iter().chain(&h.outputs).cloned().collect();
            out["steps"] = json!(steps);
            let include_input = query
                .as_deref()
                .is_some_and(|q| q.split('&').any(|kv| kv == "include_input=true"));
            if include_input {
                out["input"] = json!(h.input);
            }
            json_response(200, &out)
        }
        (Method::DELETE, false) => {
            inner.interactions.held.remove(pos);
            json_response(200, &json!({}))
        }
        (Method::POST, true) => {
            let h = &mut inner.interactions.held[pos];
            if h.pending.is_none() {
                return json_response(
                    400,
                    &json!({ "error": google_error(400, "FAILED_PRECONDITION",
                        "Only a background interaction in progress can be cancelled.", Vec::new()) }),
                );
            }
            h.pending = None;
            h.resource["status"] = json!("cancelled");
            h.resource["updated"] = json!(rfc3339(now));
            json_response(200, &h.resource)
        }
        _ => json_response(
            404,
            &json!({"error": google_error(404, "NOT_FOUND", "Method not found.", Vec::new())}),
        ),
    }
}

/// `GET …/{id}?stream=true` (`last_event_id` to resume after an event): the interaction's
/// events as its create would have streamed them; a background run still in progress is
/// waited for (in real time) first. A cancelled run's stream ends at its status.
async fn replay(shared: &Arc<Shared>, id: &str, last_event_id: Option<String>) -> Response {
    let wait = {
        let mut inner = shared.lock();
        let now = inner.caches.now();
        let Some(h) = inner.interactions.held.iter_mut().find(|h| h.id == id) else {
            return unknown(id);
        };
        h.settle(now);
        h.pending
            .as_ref()
            .and_then(|(at, _, _)| at.duration_since(now).ok())
    };
    if let Some(d) = wait {
        tokio::time::sleep(d).await;
    }
    let (head, outcome, status) = {
        let mut inner = shared.lock();
        let now = inner.caches.now();
        let Some(h) = inner.interactions.held.iter_mut().find(|h| h.id == id) else {
            return unknown(id);
        };
        h.settle(now);
        let mut head = json!({ "id": h.id, "status": "in_progress", "model": h.resource["model"],
            "object": "interaction" });
        if let Some(t) = h.resource.get("service_tier") {
            head["service_tier"] = t.clone();
        }
        (head, h.outcome.clone(), h.status().to_string())
    };
    let mut events = if status == "cancelled" {
        let mut n = 0;
        let mut done = head.clone();
        done["status"] = json!("cancelled");
        vec![
            event(
                "interaction.created",
                json!({ "interaction": head }),
                &mut n,
            ),
            event(
                "interaction.completed",
                json!({ "interaction": done }),
                &mut n,
            ),
        ]
    } else {
        stream_events(&head, &outcome)
    };
    if let Some(last) = last_event_id {
        let marker = format!("\"event_id\":\"{last}\"");
        if let Some(pos) = events.iter().position(|e| e.contains(&marker)) {
            events.drain(..=pos);
        }
    }
    sse_response(
        events.into_iter().map(Frame::Bytes).collect(),
        Duration::ZERO,
    )
}

//! A stand-in OpenAI Responses API for driving the real Codex CLI: a real HTTP server on
//! `127.0.0.1` (the provider's `base_url` is [`ResponsesApi::base_url`]) whose scripted model
//! calls our tools and records every `function_call_output` Codex sends back.
//!
//! Wire format: `POST /v1/responses` answered as a stream of events (`response.created`,
//! `response.output_item.added`/`.done` with a `function_call` or a `message`,
//! `response.output_text.delta`, `response.completed` with usage), each with its
//! `sequence_number`; `GET /v1/models`. Codex offers an MCP server's tools either as functions
//! named `mcp__<server>__<tool>` or as a `namespace` named `mcp__<server>` holding functions named
//! `<tool>`; the model calls them the way they were offered.

#![allow(dead_code)] // Shared by every test file; no test uses every helper.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::scripted_model::{Brain, FINAL_TEXT, Received, Served, event, json, sse};

/// The MCP server's key in the client configuration.
pub const SERVER: &str = "gemini";

pub struct ResponsesApi {
    served: Served,
    state: Arc<ApiState>,
}

struct ApiState {
    brain: Brain,
    received: Mutex<Vec<Received>>,
    requests: Mutex<Vec<Value>>,
}

impl ResponsesApi {
    pub fn start(brain: Brain) -> ResponsesApi {
        let state = Arc::new(ApiState {
            brain,
            received: Mutex::new(Vec::new()),
            requests: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/v1/responses", post(responses))
            .route("/v1/models", get(models))
            .with_state(state.clone());
        ResponsesApi {
            served: Served::start("responses-api", app),
            state,
        }
    }

    /// `http://127.0.0.1:<port>/v1`: the provider's `base_url`.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.served.base_url())
    }

    /// The tool results the model received, oldest first.
    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    pub fn requests(&self) -> Vec<Value> {
        self.state.requests.lock().unwrap().clone()
    }
}

/// How the request offers `tool`: `(name, namespace)` for the function call, if at all.
fn offered(body: &Value, tool: &str) -> Option<(String, Option<String>)> {
    let flat = format!("mcp__{SERVER}__{tool}");
    let namespace = format!("mcp__{SERVER}");
    for t in body["tools"].as_array().into_iter().flatten() {
        if t["type"] == "function" && t["name"] == flat.as_str() {
            return Some((flat, None));
        }
        if t["type"] == "namespace" && t["name"] == namespace.as_str() {
            let inner = t["tools"].as_array().into_iter().flatten();
            if inner.into_iter().any(|f| f["name"] == tool) {
                return Some((tool.to_string(), Some(namespace)));
            }
        }
    }
    None
}

fn offers_our_tools(body: &Value) -> bool {
    let prefix = format!("mcp__{SERVER}");
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["name"].as_str().is_some_and(|n| n.starts_with(&prefix)))
}

/// The output of a `function_call_output`: a string, or `input_text` items joined.
fn output_text(output: &Value) -> String {
    match output {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|i| match i["text"].as_str() {
                Some(t) => t.to_string(),
                None => i.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

fn tool_outputs(body: &Value) -> Vec<Received> {
    body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| Received {
            text: output_text(&i["output"]),
            // The item has no error flag: Codex writes a failure into the text.
            is_error: false,
        })
        .collect()
}

async fn responses(State(state): State<Arc<ApiState>>, body: Bytes) -> Response {
    let body: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return json(400, &json!({"error": {"message": e.to_string()}})),
    };
    state.requests.lock().unwrap().push(body.clone());
    let results = tool_outputs(&body);
    let next = if offers_our_tools(&body) {
        let next = (state.brain)(&results);
        if !results.is_empty() {
            *state.received.lock().unwrap() = results.clone();
        }
        next
    } else {
        None
    };
    let turn = results.len();
    let model = body["model"].as_str().unwrap_or("stand-in").to_string();
    let id = format!("resp_stand_in_{turn}");
    let response = json!({"id": id, "object": "response", "status": "in_progress", "model": model, "output": []});
    let mut seq = 0u64;
    let mut out = String::new();
    let mut emit = |mut data: Value| {
        data["sequence_number"] = json!(seq);
        seq += 1;
        let name = data["type"].as_str().unwrap_or_default().to_string();
        out += &event(&name, &data);
    };
    emit(json!({"type": "response.created", "response": response}));
    let item = match next
        .as_ref()
        .and_then(|c| offered(&body, &c.tool).map(|o| (c, o)))
    {
        Some((call, (name, namespace))) => {
            let mut item = json!({"type": "function_call", "id": format!("fc_{turn}"),
                                  "call_id": format!("call_{turn}"), "name": name,
                                  "arguments": call.args.to_string(), "status": "completed"});
            if let Some(ns) = namespace {
                item["namespace"] = json!(ns);
            }
            let mut added = item.clone();
            added["arguments"] = json!("");
            added["status"] = json!("in_progress");
            emit(json!({"type": "response.output_item.added", "output_index": 0, "item": added}));
            emit(json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
            item
        }
        None => {
            // Ends the turn; also when the tool it wanted is not offered (the test then fails
            // on what the model did not receive).
            let msg_id = format!("msg_{turn}");
            let item = json!({"type": "message", "id": msg_id, "role": "assistant", "status": "completed",
                              "content": [{"type": "output_text", "text": FINAL_TEXT, "annotations": []}]});
            emit(
                json!({"type": "response.output_item.added", "output_index": 0,
                        "item": {"type": "message", "id": msg_id, "role": "assistant", "status": "in_progress", "content": []}}),
            );
            emit(
                json!({"type": "response.output_text.delta", "item_id": msg_id, "output_index": 0,
                        "content_index": 0, "delta": FINAL_TEXT}),
            );
            emit(json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
            item
        }
    };
    let mut done = response.clone();
    done["status"] = json!("completed");
    done["output"] = json!([item]);
    done["usage"] = json!({"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                           "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0},
                           "total_tokens": 120});
    emit(json!({"type": "response.completed", "response": done}));
    sse(out)
}

async fn models() -> Response {
    json(200, &json!({"object": "list", "data": [], "models": []}))
}

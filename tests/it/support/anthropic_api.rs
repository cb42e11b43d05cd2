//! A stand-in Anthropic Messages API for driving the real Claude Code: a real HTTP server on
//! `127.0.0.1` (point `ANTHROPIC_BASE_URL` at [`AnthropicApi::base_url`]) whose scripted model
//! calls our tools and records every `tool_result` Claude Code sends back.
//!
//! Wire format: `POST /v1/messages` answered as streaming SSE (`message_start`,
//! `content_block_start`/`_delta`/`_stop` with `input_json_delta` for a `tool_use`,
//! `message_delta` with the `stop_reason`, `message_stop`) or as one JSON message when the
//! request does not stream; `POST /v1/messages/count_tokens`; `GET /v1/models`.
//! The model acts only on requests that offer the tool it calls next (ours as
//! `mcp__gemini__<tool>`, or one of Claude Code's own such as `Bash`); any other request (a title,
//! a summary) gets a short text answer.

#![allow(dead_code)] // Shared by every test file; no test uses every helper.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::scripted_model::{Brain, FINAL_TEXT, Received, Served, ToolCall, event, json, sse};

/// The MCP server's key in the client configuration: tools are `mcp__gemini__<tool>`.
pub const SERVER: &str = "gemini";

pub struct AnthropicApi {
    served: Served,
    state: Arc<ApiState>,
}

struct ApiState {
    brain: Brain,
    /// The tool results of the latest request that carried any, oldest first.
    received: Mutex<Vec<Received>>,
    /// Every request body, in arrival order.
    requests: Mutex<Vec<(String, Value)>>,
}

impl AnthropicApi {
    pub fn start(brain: Brain) -> AnthropicApi {
        let state = Arc::new(ApiState {
            brain,
            received: Mutex::new(Vec::new()),
            requests: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/v1/messages", post(messages))
            .route("/v1/messages/count_tokens", post(count_tokens))
            .route("/v1/models", get(models))
            .with_state(state.clone());
        AnthropicApi {
            served: Served::start("anthropic-api", app),
            state,
        }
    }

    pub fn base_url(&self) -> String {
        self.served.base_url()
    }

    /// The tool results the model received, oldest first.
    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    /// `(path, body)` of every request.
    pub fn requests(&self) -> Vec<(String, Value)> {
        self.state.requests.lock().unwrap().clone()
    }
}

/// Text of a `tool_result`'s `content`: a string, or blocks whose texts are joined.
fn result_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b["text"].as_str() {
                Some(t) => t.to_string(),
                None => b.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn tool_results(body: &Value) -> Vec<Received> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        for block in m["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" {
                out.push(Received {
                    text: result_text(&block["content"]),
                    is_error: block["is_error"].as_bool().unwrap_or(false),
                });
            }
        }
    }
    out
}

/// The name the model calls a tool by: one of the client's own (`Bash`, `Read`…: capitalised) as
/// it is, one of ours as `mcp__gemini__<tool>`.
fn tool_name(call: &ToolCall) -> String {
    if call.tool.starts_with(|c: char| c.is_ascii_uppercase()) {
        call.tool.clone()
    } else {
        format!("mcp__{SERVER}__{}", call.tool)
    }
}

fn offers(body: &Value, name: &str) -> bool {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["name"] == name)
}

async fn messages(State(state): State<Arc<ApiState>>, body: Bytes) -> Response {
    let body: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return json(
                400,
                &json!({"type": "error", "error": {"type": "invalid_request_error", "message": e.to_string()}}),
            );
        }
    };
    state
        .requests
        .lock()
        .unwrap()
        .push(("/v1/messages".into(), body.clone()));
    let model = body["model"]
        .as_str()
        .unwrap_or("claude-stand-in")
        .to_string();
    let results = tool_results(&body);
    let turn = results.len();
    // The model acts only where the request offers the tool it would call (the client's side
    // requests, such as a title for the session, offer none).
    let next = (state.brain)(&results).filter(|call| offers(&body, &tool_name(call)));
    if !results.is_empty() {
        *state.received.lock().unwrap() = results;
    }
    let usage = json!({"input_tokens": 100, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0});
    let (block, stop_reason) = match &next {
        Some(call) => (
            json!({"type": "tool_use", "id": format!("toolu_stand_in_{turn}"),
                   "name": tool_name(call), "input": call.args}),
            "tool_use",
        ),
        None => (json!({"type": "text", "text": FINAL_TEXT}), "end_turn"),
    };
    if !body["stream"].as_bool().unwrap_or(false) {
        return json(
            200,
            &json!({"id": format!("msg_stand_in_{turn}"), "type": "message", "role": "assistant",
                    "model": model, "content": [block], "stop_reason": stop_reason,
                    "stop_sequence": null, "usage": usage}),
        );
    }
    let mut out = event(
        "message_start",
        &json!({"type": "message_start", "message": {"id": format!("msg_stand_in_{turn}"),
               "type": "message", "role": "assistant", "model": model, "content": [],
               "stop_reason": null, "stop_sequence": null, "usage": usage}}),
    );
    match &next {
        Some(call) => {
            let mut start = block.clone();
            start["input"] = json!({});
            out += &event(
                "content_block_start",
                &json!({"type": "content_block_start", "index": 0, "content_block": start}),
            );
            // The arguments arrive in pieces, as a real model streams them.
            let args = call.args.to_string();
            let cut = args.len() / 2;
            let cut = (cut..args.len())
                .find(|&i| args.is_char_boundary(i))
                .unwrap_or(args.len());
            for piece in [&args[..cut], &args[cut..]] {
                out += &event(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": 0,
                            "delta": {"type": "input_json_delta", "partial_json": piece}}),
                );
            }
        }
        None => {
            out += &event(
                "content_block_start",
                &json!({"type": "content_block_start", "index": 0,
                        "content_block": {"type": "text", "text": ""}}),
            );
            out += &event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": 0,
                        "delta": {"type": "text_delta", "text": FINAL_TEXT}}),
            );
        }
    }
    out += &event(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": 0}),
    );
    out += &event(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                "usage": {"output_tokens": 20}}),
    );
    out += &event("message_stop", &json!({"type": "message_stop"}));
    sse(out)
}

async fn count_tokens(State(state): State<Arc<ApiState>>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let chars = body.to_string().len();
    state
        .requests
        .lock()
        .unwrap()
        .push(("/v1/messages/count_tokens".into(), body));
    json(200, &json!({"input_tokens": chars.div_ceil(4)}))
}

async fn models() -> Response {
    let model = json!({"type": "model", "id": "claude-sonnet-4-5", "display_name": "Claude Sonnet 4.5",
                       "created_at": "2025-09-29T00:00:00Z"});
    json(
        200,
        &json!({"data": [model], "has_more": false, "first_id": "claude-sonnet-4-5", "last_id": "claude-sonnet-4-5"}),
    )
}

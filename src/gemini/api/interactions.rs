//! The Interactions API as a transport of the REST client (`GEMINI_API_SURFACE=interactions`):
//! one [`GenerateRequest`] becomes one `POST /v1/interactions` body, streamed (`stream: true`),
//! stateless (`store: false`: the whole history is sent as steps, nothing is kept at Google),
//! and its server-sent events add up to the same [`Answer`] a `generateContent` stream gives.
//!
//! The shapes are google-genai 3.3.0's (`google/genai/_gaos/types/interactions/`), which name
//! the wire's fields in snake_case:
//! - the body is a `CreateModelInteraction`: `model`, `input` (a list of steps),
//!   `system_instruction` (a string), `generation_config` (`max_output_tokens`, `temperature`,
//!   `thinking_level`), `response_format` (a `TextResponseFormat`: `mime_type` and `schema`),
//!   `tools` (`function`, `google_search`), `service_tier`, `store`, `stream`;
//! - a user message is a `user_input` step of `text` and `image` contents; a model message a
//!   `thought` step (its signature), a `model_output` step (its text) and `function_call` steps;
//!   a function's answer a `function_result` step;
//! - the stream's events (`InteractionSSEEvent`): `step.start` / `step.delta` (`text`,
//!   `thought_signature`, `arguments_delta`, `text_annotation_delta`) / `step.stop`, and
//!   `interaction.completed` with the status and `usage`; an `error` event is Google's error.
//!
//! A model turn is kept for replay in the `generateContent` form (`Part::Recorded` holding a
//! `functionCall` with its `thoughtSignature`, or a text part), whichever interface produced
//! it, so a thread or an investigation can move between the two interfaces and stay one
//! conversation.

use base64::Engine as _;
use serde::Serialize;
use serde_json::{Value, json};

use super::retry::Failure;
use super::stream_answer::Answer;
use super::wire::{FinishReason, UsageMetadata};
use crate::gemini::model_info::{Level, ThinkingConfig};
use crate::gemini::vocabulary::{
    Agent, FunctionCall, GeminiError, GenerateRequest, Message, Part, Role, ServiceTier, Source,
};

/// A `CreateModelInteraction` body, as this client fills it.
#[derive(Debug, Serialize)]
pub struct CreateInteraction {
    pub model: String,
    pub input: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_instruction: Option<String>,
    pub generation_config: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_interaction_id: Option<String>,
    pub store: bool,
    pub stream: bool,
    /// A background run, polled by id (`background` needs `store`, and is not streamed).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub background: bool,
    /// Vertex AI's labels (`GEMINI_MCP_VERTEX_LABELS`).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
}

/// The body of `req` for the Interactions API. A request naming a context cache is never sent
/// here (the client sends it to `generateContent`, whose feature explicit caching is).
///
/// With `store`, the interaction is kept at Google, and a request continuing a stored one
/// (`req.previous`) sends only the messages after those its chain holds.
pub fn build_request(
    req: &GenerateRequest,
    tier: Option<ServiceTier>,
    store: bool,
) -> CreateInteraction {
    let mut generation_config = json!({ "max_output_tokens": req.model.output_limit });
    if let Some(t) = req.temperature {
        generation_config["temperature"] = json!(t);
    }
    if let Some(level) = thinking_level(req.model.thinking_config(req.thinking)) {
        generation_config["thinking_level"] = json!(level);
    }
    let previous = req.previous.as_ref().filter(|_| store);
    let held = previous.map_or(0, |p| p.covers);
    let mut tools = Vec::new();
    if req.web_search {
        tools.push(json!({ "type": "google_search" }));
    }
    if let Some(f) = &req.functions {
        for d in f.declarations.as_array().into_iter().flatten() {
            let mut tool = json!({ "type": "function", "name": d["name"] });
            if let Some(desc) = d.get("description") {
                tool["description"] = desc.clone();
            }
            if let Some(p) = d.get("parametersJsonSchema").or_else(|| d.get("parameters")) {
                tool["parameters"] = p.clone();
            }
            tools.push(tool);
        }
        if !f.allow {
            generation_config["tool_choice"] = json!("none");
        }
    }
    CreateInteraction {
        model: req.model.id.clone(),
        input: req.contents[held.min(req.contents.len())..]
            .iter()
            .flat_map(steps_of)
            .collect(),
        previous_interaction_id: previous.map(|p| p.id.clone()),
        system_instruction: (!req.system_instruction.is_empty())
            .then(|| req.system_instruction.clone()),
        generation_config,
        response_format: req.response_schema.as_ref().map(|schema| {
            json!({ "type": "text", "mime_type": "application/json", "schema": schema })
        }),
        tools,
        service_tier: tier.map(ServiceTier::as_str),
        store,
        stream: true,
        background: false,
        labels: std::collections::BTreeMap::new(),
    }
}

/// The body of an agent's run (`req.agent`, Deep Research) for the Interactions API: a
/// `CreateAgentInteraction` (`createagentinteraction.py`): the `agent`, the request's messages
/// as steps, `agent_config` of type `deep-research` (thought summaries on, so a run reports
/// what it is doing), `background: true` and `store: true` (a background run is kept at Google
/// until it is read: the API refuses `background` without `store`). The system instruction
/// leads the last user turn, since the agent is steered by its prompt.
pub fn build_agent_request(req: &GenerateRequest, agent: &Agent) -> Value {
    let mut input: Vec<Value> = req.contents.iter().flat_map(steps_of).collect();
    if !req.system_instruction.is_empty()
        && let Some(step) = input.iter_mut().rev().find(|s| s["type"] == "user_input")
        && let Some(content) = step["content"].as_array_mut()
    {
        content.insert(0, json!({ "type": "text", "text": req.system_instruction }));
    }
    json!({
        "agent": agent.id,
        "input": input,
        "agent_config": { "type": "deep-research", "thinking_summaries": "auto" },
        "background": true,
        "store": true,
    })
}

/// A finished interaction as `GET /v1/interactions/{id}` returns it (`interaction.py`), read
/// into `answer` as the stream of its steps would have been: one reader for both.
pub(super) fn read_interaction(answer: &mut Answer, resource: &Value) -> Result<(), Failure> {
    let mut steps = Steps::default();
    let events = resource["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .flat_map(|(index, step)| {
            let mut start = step.clone();
            if let Some(o) = start.as_object_mut() {
                o.remove("content");
            }
            let mut events = vec![json!({ "event_type": "step.start", "index": index, "step": start })];
            for c in step["content"].as_array().into_iter().flatten() {
                if let Some(text) = c["text"].as_str() {
                    events.push(json!({ "event_type": "step.delta", "index": index,
                        "delta": { "type": "text", "text": text } }));
                }
                if let Some(a) = c.get("annotations") {
                    events.push(json!({ "event_type": "step.delta", "index": index,
                        "delta": { "type": "text_annotation_delta", "annotations": a } }));
                }
            }
            events.push(json!({ "event_type": "step.stop", "index": index }));
            events
        });
    for event in events {
        steps.take(answer, &event)?;
    }
    steps.take(
        answer,
        &json!({ "event_type": "interaction.completed", "interaction": resource }),
    )
}

/// The Interactions API's thinking level for a model's configuration: its level as it is; a
/// 2.5 model's token budget (which the Interactions API has no field for) as the nearest level.
fn thinking_level(config: ThinkingConfig) -> Option<&'static str> {
    let level = match config {
        ThinkingConfig::None => return None,
        ThinkingConfig::Level(l) => l,
        ThinkingConfig::Budget(0) => Level::Minimal,
        ThinkingConfig::Budget(b) if b <= 2_048 => Level::Low,
        ThinkingConfig::Budget(b) if b <= 8_192 => Level::Medium,
        ThinkingConfig::Budget(_) => Level::High,
    };
    Some(match level {
        Level::Minimal => "minimal",
        Level::Low => "low",
        Level::Medium => "medium",
        Level::High => "high",
    })
}

/// One message as steps: a user's as one `user_input` step (and its function answers as
/// `function_result` steps), a model's as its thought, output and function-call steps.
fn steps_of(m: &Message) -> Vec<Value> {
    match m.role {
        Role::User => {
            let mut content = Vec::new();
            let mut results = Vec::new();
            for p in &m.parts {
                match p {
                    Part::Text(t) => content.push(json!({ "type": "text", "text": t })),
                    Part::Image { mime, data } => content.push(json!({
                        // A PDF is a document to the Interactions API, an image an image.
                        "type": if mime == "application/pdf" { "document" } else { "image" },
                        "mime_type": mime,
                        "data": base64::engine::general_purpose::STANDARD.encode(data.as_slice()),
                    })),
                    Part::Recorded(v) => {
                        if let Some(t) = v["text"].as_str() {
                            content.push(json!({ "type": "text", "text": t }));
                        }
                    }
                    Part::FunctionResponse { id, name, response } => {
                        let mut step = json!({
                            "type": "function_result",
                            "call_id": id.clone().unwrap_or_else(|| name.clone()),
                            "name": name,
                            "result": response.to_string(),
                        });
                        if response.get("error").is_some() {
                            step["is_error"] = json!(true);
                        }
                        results.push(step);
                    }
                }
            }
            let mut steps = results;
            if !content.is_empty() {
                steps.push(json!({ "type": "user_input", "content": content }));
            }
            steps
        }
        Role::Model => {
            let mut steps = Vec::new();
            let mut text = String::new();
            let mut calls = Vec::new();
            for p in &m.parts {
                match p {
                    Part::Text(t) => text.push_str(t),
                    Part::Recorded(v) => {
                        if let Some(sig) = v["thoughtSignature"].as_str()
                            && !steps.iter().any(|s: &Value| s["type"] == "thought")
                        {
                            steps.push(json!({ "type": "thought", "signature": sig }));
                        }
                        if let Some(call) = v.get("functionCall") {
                            let name = call["name"].as_str().unwrap_or_default();
                            calls.push(json!({
                                "type": "function_call",
                                "id": call["id"].as_str().unwrap_or(name),
                                "name": name,
                                "arguments": if call["args"].is_object() { call["args"].clone() } else { json!({}) },
                            }));
                        } else if let Some(t) = v["text"].as_str() {
                            text.push_str(t);
                        }
                    }
                    Part::Image { .. } | Part::FunctionResponse { .. } => {}
                }
            }
            if !text.is_empty() {
                steps.push(json!({ "type": "model_output",
                    "content": [{ "type": "text", "text": text }] }));
            }
            steps.extend(calls);
            steps
        }
    }
}

/// What a stream's events have built so far beyond what [`Answer`] keeps: the step being
/// streamed at each index, and a function call's arguments as they arrive (a JSON string in
/// pieces).
#[derive(Debug, Default)]
pub(super) struct Steps {
    open: Vec<(u64, OpenStep)>,
    /// The thought signature of this turn, given to its first function call as
    /// `generateContent` carries it.
    signature: Option<String>,
    /// The interaction's id, once `interaction.created` names it.
    pub(super) id: Option<String>,
}

#[derive(Debug)]
enum OpenStep {
    Output,
    Call {
        id: String,
        name: String,
        arguments: String,
    },
    Other,
}

impl Steps {
    /// Takes in one event of the stream (its `data`, one `InteractionSSEEvent`).
    pub(super) fn take(&mut self, answer: &mut Answer, event: &Value) -> Result<(), Failure> {
        let index = event["index"].as_u64().unwrap_or(0);
        match event["event_type"].as_str().unwrap_or_default() {
            "interaction.created" => {
                self.id = event["interaction"]["id"].as_str().map(String::from);
                if let Some(m) = event["interaction"]["model"].as_str() {
                    answer.model_version = Some(m.to_string());
                }
            }
            "step.start" => {
                let step = &event["step"];
                let open = match step["type"].as_str().unwrap_or_default() {
                    "model_output" => OpenStep::Output,
                    "function_call" => OpenStep::Call {
                        id: step["id"].as_str().unwrap_or_default().to_string(),
                        name: step["name"].as_str().unwrap_or_default().to_string(),
                        arguments: match &step["arguments"] {
                            Value::Object(o) if !o.is_empty() => step["arguments"].to_string(),
                            _ => String::new(),
                        },
                    },
                    _ => OpenStep::Other,
                };
                if let Some(sig) = step["signature"].as_str() {
                    self.signature = Some(sig.to_string());
                }
                self.open.retain(|(i, _)| *i != index);
                self.open.push((index, open));
            }
            "step.delta" => {
                let delta = &event["delta"];
                let open = self
                    .open
                    .iter_mut()
                    .find(|(i, _)| *i == index)
                    .map(|(_, s)| s);
                match delta["type"].as_str().unwrap_or_default() {
                    "text" => {
                        if let (Some(OpenStep::Output), Some(t)) = (open, delta["text"].as_str()) {
                            answer.text.push_str(t);
                        }
                    }
                    "thought_signature" => {
                        if let Some(sig) = delta["signature"].as_str() {
                            self.signature = Some(sig.to_string());
                        }
                    }
                    "arguments_delta" => {
                        if let (Some(OpenStep::Call { arguments, .. }), Some(more)) =
                            (open, delta["arguments"].as_str())
                        {
                            arguments.push_str(more);
                        }
                    }
                    "text_annotation_delta" => {
                        for a in delta["annotations"].as_array().into_iter().flatten() {
                            citation(answer, a);
                        }
                    }
                    _ => {}
                }
            }
            "step.stop" => {
                let Some(at) = self.open.iter().position(|(i, _)| *i == index) else {
                    return Ok(());
                };
                let (_, step) = self.open.remove(at);
                if let OpenStep::Call {
                    id,
                    name,
                    arguments,
                } = step
                {
                    self.call(answer, id, name, &arguments)?;
                }
            }
            "interaction.completed" => {
                let interaction = &event["interaction"];
                if !answer.text.is_empty() {
                    let mut part = json!({ "text": answer.text });
                    if answer.calls.is_empty()
                        && let Some(sig) = &self.signature
                    {
                        part["thoughtSignature"] = json!(sig);
                    }
                    answer.turn.insert(0, Part::Recorded(part));
                }
                answer.usage = Some(usage(&interaction["usage"]));
                answer.finish = Some(match interaction["status"].as_str().unwrap_or_default() {
                    "completed" | "requires_action" => FinishReason::Stop,
                    "incomplete" => FinishReason::MaxTokens,
                    other => FinishReason::Unknown(other.to_uppercase()),
                });
            }
            "error" => {
                let e = &event["error"];
                let message = e["message"].as_str().unwrap_or("an error event").to_string();
                let code = e["code"].as_str().unwrap_or("UNKNOWN").to_string();
                return Err(answer.broken(GeminiError::Api {
                    status: 500,
                    code,
                    message,
                    hint: "The Interactions API ended the answer with an error; retry, or set GEMINI_API_SURFACE=generate-content.".into(),
                }));
            }
            _ => {}
        }
        Ok(())
    }

    /// A function call whose arguments have all arrived, kept as `generateContent` records it.
    fn call(
        &mut self,
        answer: &mut Answer,
        id: String,
        name: String,
        arguments: &str,
    ) -> Result<(), Failure> {
        let args: Value = if arguments.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(arguments).map_err(|e| {
                answer.broken(GeminiError::Malformed {
                    message: format!("a function call's arguments are not JSON ({e})"),
                })
            })?
        };
        let mut part = json!({ "functionCall": { "id": id, "name": name, "args": args } });
        // generateContent carries the signature on a turn's first call; so does the record.
        if answer.calls.is_empty()
            && let Some(sig) = &self.signature
        {
            part["thoughtSignature"] = json!(sig);
        }
        answer.turn.push(Part::Recorded(part));
        answer.calls.push(FunctionCall {
            id: Some(id),
            name,
            args,
        });
        Ok(())
    }
}

/// A `url_citation` annotation as a source of the answer.
fn citation(answer: &mut Answer, a: &Value) {
    if a["type"] != "url_citation" {
        return;
    }
    let Some(uri) = a["url"].as_str() else {
        return;
    };
    if !answer.sources.iter().any(|s| s.uri == uri) {
        answer.sources.push(Source {
            title: a["title"].as_str().unwrap_or(uri).to_string(),
            uri: uri.to_string(),
        });
    }
}

/// `Usage` (`total_input_tokens`…) in `generateContent`'s terms.
fn usage(u: &Value) -> UsageMetadata {
    let n = |k: &str| u[k].as_u64();
    UsageMetadata {
        prompt_token_count: n("total_input_tokens"),
        candidates_token_count: n("total_output_tokens"),
        thoughts_token_count: n("total_thought_tokens"),
        cached_content_token_count: n("total_cached_tokens"),
        tool_use_prompt_token_count: n("total_tool_use_tokens"),
        total_token_count: n("total_tokens"),
        traffic_type: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(events: &[Value]) -> (Answer, Result<(), Failure>) {
        let mut answer = Answer::default();
        let mut steps = Steps::default();
        for e in events {
            if let Err(f) = steps.take(&mut answer, e) {
                return (answer, Err(f));
            }
        }
        (answer, Ok(()))
    }

    #[test]
    fn a_call_whose_arguments_arrive_in_pieces_is_one_call_with_the_turns_signature() {
        let (answer, ok) = feed(&[
            json!({"event_type": "step.start", "index": 0, "step": {"type": "thought"}}),
            json!({"event_type": "step.delta", "index": 0,
                "delta": {"type": "thought_signature", "signature": "c2ln"}}),
            json!({"event_type": "step.stop", "index": 0}),
            json!({"event_type": "step.start", "index": 1,
                "step": {"type": "function_call", "id": "c1", "name": "read_file", "arguments": {}}}),
            json!({"event_type": "step.delta", "index": 1,
                "delta": {"type": "arguments_delta", "arguments": "{\"path\": \"src/"}}),
            json!({"event_type": "step.delta", "index": 1,
                "delta": {"type": "arguments_delta", "arguments": "lib.rs\"}"}}),
            json!({"event_type": "step.stop", "index": 1}),
            json!({"event_type": "interaction.completed",
                "interaction": {"status": "requires_action", "usage": {"total_input_tokens": 7}}}),
        ]);
        assert!(ok.is_ok());
        assert_eq!(answer.calls.len(), 1);
        assert_eq!(answer.calls[0].args, json!({"path": "src/lib.rs"}));
        assert_eq!(
            answer.turn,
            vec![Part::Recorded(json!({
                "functionCall": {"id": "c1", "name": "read_file", "args": {"path": "src/lib.rs"}},
                "thoughtSignature": "c2ln",
            }))]
        );
        let done = answer.finish().unwrap();
        assert_eq!(done.usage.input, 7);
        assert_eq!(done.finish_reason.as_deref(), Some("STOP"));
    }

    #[test]
    fn arguments_that_are_not_json_are_malformed_and_an_incomplete_answer_is_cut() {
        let (_, broken) = feed(&[
            json!({"event_type": "step.start", "index": 0,
                "step": {"type": "function_call", "id": "c1", "name": "f", "arguments": {}}}),
            json!({"event_type": "step.delta", "index": 0,
                "delta": {"type": "arguments_delta", "arguments": "{\"path\": "}}),
            json!({"event_type": "step.stop", "index": 0}),
        ]);
        let f = broken.unwrap_err();
        assert!(matches!(f.error, GeminiError::Malformed { .. }), "{:?}", f.error);

        let (answer, ok) = feed(&[json!({"event_type": "interaction.completed",
            "interaction": {"status": "incomplete", "usage": {}}})]);
        assert!(ok.is_ok());
        let e = answer.finish().unwrap_err();
        assert!(matches!(e.error, GeminiError::MaxTokens), "{:?}", e.error);
    }

    #[test]
    fn an_error_event_before_any_text_is_worth_retrying_and_after_text_is_not() {
        let error = json!({"event_type": "error",
            "error": {"code": "UNAVAILABLE", "message": "overloaded"}});
        let (_, before) = feed(std::slice::from_ref(&error));
        let f = before.unwrap_err();
        assert!(!matches!(f.retry, super::super::retry::Retryable::No));
        let (_, after) = feed(&[
            json!({"event_type": "step.start", "index": 0, "step": {"type": "model_output"}}),
            json!({"event_type": "step.delta", "index": 0, "delta": {"type": "text", "text": "half"}}),
            error,
        ]);
        let f = after.unwrap_err();
        assert!(matches!(f.retry, super::super::retry::Retryable::No));
        assert!(f.error.to_string().contains("broke off"), "{}", f.error);
    }

    #[test]
    fn a_budget_becomes_the_nearest_level() {
        assert_eq!(thinking_level(ThinkingConfig::Budget(0)), Some("minimal"));
        assert_eq!(thinking_level(ThinkingConfig::Budget(1024)), Some("low"));
        assert_eq!(thinking_level(ThinkingConfig::Budget(8192)), Some("medium"));
        assert_eq!(thinking_level(ThinkingConfig::Budget(24576)), Some("high"));
        assert_eq!(thinking_level(ThinkingConfig::Level(Level::High)), Some("high"));
        assert_eq!(thinking_level(ThinkingConfig::None), None);
    }
}

//! What an interaction answers: a [`Script`] turned into the Interactions API's steps, usage and
//! stream events.
//!
//! The shapes are google-genai 3.3.0's (`google/genai/_gaos/types/interactions/`): steps are
//! `ThoughtStep` (`thoughtstep.py`: `type: "thought"`, `signature`, `summary`),
//! `ModelOutputStep` (`modeloutputstep.py`: `type: "model_output"`, `content` of `TextContent`,
//! `textcontent.py`) and `FunctionCallStep` (`functioncallstep.py`: `type: "function_call"`,
//! `id`, `name`, `arguments`); usage is `Usage` (`usage.py`: `total_input_tokens`,
//! `total_output_tokens`, `total_thought_tokens`, `total_cached_tokens`, `total_tokens`,
//! `input_tokens_by_modality` of `ModalityTokens`, `modalitytokens.py`); the stream is
//! `InteractionSSEEvent` (`interactionsseevent.py`): `interaction.created`,
//! `interaction.status_update`, then per step `step.start`, `step.delta`…, `step.stop`, then
//! `interaction.completed`, each framed `event: <event_type>\ndata: <json>\n\n` as Google's
//! streaming page shows it (ai.google.dev/gemini-api/docs/interactions/streaming).

use serde_json::{Value, json};

#[allow(unused_imports)]
use super::*;

/// The work an answer holds, before it is framed.
#[derive(Debug, Clone, Default)]
pub(super) struct Outcome {
    /// Thought summaries, and the signature of the thought step (none: no thought step).
    pub(super) thoughts: Vec<String>,
    pub(super) signature: Option<String>,
    /// Text deltas of the model output (one `step.delta` each when streamed).
    pub(super) chunks: Vec<String>,
    /// `(id, name, arguments)`.
    pub(super) calls: Vec<(String, String, Value)>,
    /// `in_progress`…: `completed`, `requires_action` after function calls, `incomplete` when
    /// cut (`MAX_TOKENS`).
    pub(super) status: String,
    /// `[input, output, thought, cached]`.
    pub(super) usage: [u64; 4],
    /// `(url, title)`: `url_citation` annotations of the output text (`urlcitation.py`),
    /// each over the whole text.
    pub(super) sources: Vec<(String, String)>,
}

impl Outcome {
    /// The output steps, in order: thought, model output, function calls.
    pub(super) fn steps(&self) -> Vec<Value> {
        let mut out = Vec::new();
        if let Some(sig) = &self.signature {
            let mut step = json!({ "type": "thought", "signature": sig });
            if !self.thoughts.is_empty() {
                step["summary"] = json!(
                    self.thoughts
                        .iter()
                        .map(|t| json!({ "type": "text", "text": t }))
                        .collect::<Vec<_>>()
                );
            }
            out.push(step);
        }
        if !self.chunks.is_empty() {
            let mut text = json!({ "type": "text", "text": self.chunks.concat() });
            if !self.sources.is_empty() {
                text["annotations"] = self.annotations();
            }
            out.push(json!({ "type": "model_output", "content": [text] }));
        }
        for (id, name, args) in &self.calls {
            out.push(json!({ "type": "function_call", "id": id, "name": name, "arguments": args }));
        }
        out
    }

    /// The sources as `url_citation` annotations, each over the whole text (byte offsets).
    pub(super) fn annotations(&self) -> Value {
        let end = self.chunks.concat().len();
        json!(
            self.sources
                .iter()
                .map(
                    |(url, title)| json!({ "type": "url_citation", "url": url, "title": title,
                    "start_index": 0, "end_index": end })
                )
                .collect::<Vec<_>>()
        )
    }

    /// `Usage` as `usage.py` names it.
    pub(super) fn usage_json(&self) -> Value {
        let [input, output, thought, cached] = self.usage;
        let mut u = json!({
            "total_input_tokens": input,
            "total_output_tokens": output,
            "total_tokens": input + output + thought,
            "input_tokens_by_modality": [{ "modality": "text", "tokens": input }],
            "output_tokens_by_modality": [{ "modality": "text", "tokens": output }],
        });
        if thought > 0 {
            u["total_thought_tokens"] = json!(thought);
        }
        if cached > 0 {
            u["total_cached_tokens"] = json!(cached);
            u["cached_tokens_by_modality"] = json!([{ "modality": "text", "tokens": cached }]);
        }
        u
    }
}

/// The text of a step's `content` (or a thought's `summary`): its text items joined.
pub fn step_text(step: &Value) -> String {
    let items = step["content"]
        .as_array()
        .or_else(|| step["summary"].as_array());
    items
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("")
}

/// The user turns in `steps`, counted as the generate echo counts user messages: each
/// `user_input` step, and each run of `function_result` steps (Gemini's one user message of
/// function responses).
pub fn user_turns(steps: &[Value]) -> usize {
    let mut n = 0;
    let mut in_results = false;
    for s in steps {
        match s["type"].as_str() {
            Some("user_input") => {
                n += 1;
                in_results = false;
            }
            Some("function_result") => {
                if !in_results {
                    n += 1;
                }
                in_results = true;
            }
            _ => in_results = false,
        }
    }
    n
}

/// Whether the create asks for JSON: a `response_format` (one or a list, `responseformat.py`)
/// with a `text` format whose `mime_type` is `application/json` or that has a `schema`
/// (`TextResponseFormat`, `textresponseformat.py`).
pub(super) fn wants_json(body: &Value) -> bool {
    let formats = match &body["response_format"] {
        Value::Array(a) => a.clone(),
        Value::Null => Vec::new(),
        one => vec![one.clone()],
    };
    formats.iter().any(|f| {
        f["type"].as_str().unwrap_or("text") == "text"
            && (f["mime_type"] == "application/json" || f.get("schema").is_some())
    }) || body["response_mime_type"] == "application/json"
}

/// The echo for an interaction: `FAKE-REPLY model=<m> turns=<n> last=<t>` as the generate echo
/// says it, `<n>` counting the server-side history too, or its JSON object in JSON mode.
pub(super) fn interaction_echo(body: &Value, all_steps: &[Value]) -> String {
    let model = body["model"].as_str().unwrap_or("");
    let turns = user_turns(all_steps);
    let last: String = all_steps
        .iter()
        .rev()
        .find(|s| s["type"] == "user_input")
        .map(step_text)
        .unwrap_or_default()
        .chars()
        .take(80)
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    let echo = format!("FAKE-REPLY model={model} turns={turns} last={last}");
    if wants_json(body) {
        json!({ "summary": echo, "findings": [], "verdict": "ready" }).to_string()
    } else {
        echo
    }
}

/// Builds the outcome of `script` for a create with this body, `history` (the server-side
/// steps before it) and `input` (its own steps). `None` for an error or raw script, which is
/// answered as the generate endpoints answer it.
pub(super) fn outcome(
    script: &Script,
    body: &Value,
    raw_body: &str,
    history: &[Value],
    input: &[Value],
) -> Option<Outcome> {
    let all: Vec<Value> = history.iter().chain(input).cloned().collect();
    // The held steps, as their JSON would be sent (none: nothing).
    let history_chars: usize = history.iter().map(|s| s.to_string().chars().count()).sum();
    let input_tokens =
        raw_body.chars().count().div_ceil(4) as u64 + history_chars.div_ceil(4) as u64;
    let thinking = body["generation_config"].get("thinking_level").is_some();
    let mut out = Outcome {
        status: "completed".into(),
        ..Outcome::default()
    };
    match &script.kind {
        Kind::Error { .. } | Kind::Raw { .. } => return None,
        Kind::Answer(spec) | Kind::Broken { spec, .. } => {
            out.chunks = match &spec.chunks {
                Some(c) => c.clone(),
                None => split_text(&interaction_echo(body, &all)),
            };
            out.thoughts = spec.thoughts.clone();
            out.sources = spec.sources.clone();
            if thinking || !spec.thoughts.is_empty() {
                out.signature = Some(FAKE_SIGNATURE.into());
            }
            if spec.finish == "MAX_TOKENS" {
                out.status = "incomplete".into();
            }
            let chars: usize = out.chunks.iter().map(|c| c.chars().count()).sum();
            let thought = if out.signature.is_some() { 42 } else { 0 };
            out.usage = spec
                .usage
                .unwrap_or([input_tokens, chars.div_ceil(4) as u64, thought, 0]);
        }
        Kind::Sse(sse) => {
            // A generate stream (`Script::calls`, `Script::sse`): its parts become steps.
            let mut usage = None;
            for line in sse.lines() {
                let Some(data) = line.trim().strip_prefix("data:") else {
                    continue;
                };
                let Ok(chunk) = serde_json::from_str::<Value>(data.trim()) else {
                    continue;
                };
                if chunk["usageMetadata"].is_object() {
                    usage = Some(chunk["usageMetadata"].clone());
                }
                let parts = chunk["candidates"][0]["content"]["parts"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                for p in parts {
                    if let Some(sig) = p["thoughtSignature"].as_str() {
                        out.signature.get_or_insert_with(|| sig.to_string());
                    }
                    if let Some(call) = p.get("functionCall") {
                        let id = call["id"]
                            .as_str()
                            .map_or_else(|| format!("call-{}", out.calls.len() + 1), String::from);
                        let name = call["name"].as_str().unwrap_or("").to_string();
                        out.calls.push((id, name, call["args"].clone()));
                    } else if let Some(t) = p["text"].as_str().filter(|t| !t.is_empty()) {
                        if p["thought"] == true {
                            out.thoughts.push(t.to_string());
                        } else {
                            out.chunks.push(t.to_string());
                        }
                    }
                }
            }
            if !out.calls.is_empty() {
                out.status = "requires_action".into();
            }
            let n = |k: &str| usage.as_ref().and_then(|u| u[k].as_u64()).unwrap_or(0);
            out.usage = [
                usage
                    .as_ref()
                    .map_or(input_tokens, |_| n("promptTokenCount")),
                n("candidatesTokenCount"),
                n("thoughtsTokenCount"),
                n("cachedContentTokenCount"),
            ];
        }
    }
    Some(out)
}

/// One SSE event as Google frames the Interactions stream.
pub(super) fn event(event_type: &str, mut data: Value, n: &mut usize) -> String {
    *n += 1;
    data["event_type"] = json!(event_type);
    data["event_id"] = json!(format!("evt-{n}"));
    format!("event: {event_type}\ndata: {data}\n\n")
}

/// The stream of a create with `stream: true`: `interaction.created` (status `in_progress`),
/// `interaction.status_update`, each step (`step.start` with the step's head, its deltas —
/// `text` (`textdelta.py`), `thought_summary` and `thought_signature`
/// (`thoughtsummarydelta.py`, `thoughtsignaturedelta.py`), `arguments_delta`
/// (`argumentsdelta.py`, the arguments as a JSON string) —, `step.stop`), and
/// `interaction.completed` with the final status and usage (`InteractionSseEventInteraction`,
/// `interactionsseeventinteraction.py`, which has `object: "interaction"`).
pub(super) fn stream_events(head: &Value, outcome: &Outcome) -> Vec<String> {
    let mut n = 0;
    let id = head["id"].clone();
    let mut created = head.clone();
    created["status"] = json!("in_progress");
    let mut out = vec![
        event(
            "interaction.created",
            json!({ "interaction": created }),
            &mut n,
        ),
        event(
            "interaction.status_update",
            json!({ "interaction_id": id, "status": "in_progress" }),
            &mut n,
        ),
    ];
    let mut index = 0;
    let mut step = |start: Value, deltas: Vec<Value>, out: &mut Vec<String>, n: &mut usize| {
        out.push(event(
            "step.start",
            json!({ "index": index, "step": start }),
            n,
        ));
        for d in deltas {
            out.push(event(
                "step.delta",
                json!({ "index": index, "delta": d }),
                n,
            ));
        }
        out.push(event("step.stop", json!({ "index": index }), n));
        index += 1;
    };
    if let Some(sig) = &outcome.signature {
        let mut deltas: Vec<Value> = outcome
            .thoughts
            .iter()
            .map(|t| json!({ "type": "thought_summary", "content": { "type": "text", "text": t } }))
            .collect();
        deltas.push(json!({ "type": "thought_signature", "signature": sig }));
        step(json!({ "type": "thought" }), deltas, &mut out, &mut n);
    }
    if !outcome.chunks.is_empty() {
        let mut deltas: Vec<Value> = outcome
            .chunks
            .iter()
            .map(|t| json!({ "type": "text", "text": t }))
            .collect();
        if !outcome.sources.is_empty() {
            deltas.push(
                json!({ "type": "text_annotation_delta", "annotations": outcome.annotations() }),
            );
        }
        step(json!({ "type": "model_output" }), deltas, &mut out, &mut n);
    }
    for (call_id, name, args) in &outcome.calls {
        step(
            json!({ "type": "function_call", "id": call_id, "name": name, "arguments": {} }),
            vec![json!({ "type": "arguments_delta", "arguments": args.to_string() })],
            &mut out,
            &mut n,
        );
    }
    let mut done = head.clone();
    done["status"] = json!(outcome.status);
    done["usage"] = outcome.usage_json();
    out.push(event(
        "interaction.completed",
        json!({ "interaction": done }),
        &mut n,
    ));
    out
}

//! Responses as Gemini frames them: JSON bodies, SSE streams, chunked answers.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

#[allow(unused_imports)]
use super::*;

pub(super) fn json_response(status: u16, body: &Value) -> Response {
    plain(status, "application/json; charset=UTF-8", body.to_string())
}

pub(super) fn plain(status: u16, content_type: &str, body: String) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from(body))
        .expect("a valid response")
}

/// A script answering an endpoint that does not stream (countTokens, models).
pub(super) async fn scripted_plain(script: Script, req: &Recorded) -> Response {
    tokio::time::sleep(script.head_delay).await;
    error_or_raw(&script, req)
}

pub(super) fn error_or_raw(script: &Script, req: &Recorded) -> Response {
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

/// The tier a call is served at, as Google decides it: the script's (a downgrade), else the one
/// the call asked for where it is asked for — the Gemini API's body `serviceTier`, Vertex AI's
/// `X-Vertex-AI-LLM-Shared-Request-Type` header on its global endpoint (Vertex AI ignores the
/// body's field, and serves Flex and Priority PayGo nowhere else) —, else standard.
pub(super) fn served_tier(script: &Script, req: &Recorded) -> String {
    if let Some(t) = &script.served_tier {
        return t.clone();
    }
    let asked = if req.is_vertex() {
        let global = !req.path.contains("/locations/") || req.path.contains("/locations/global/");
        req.header("x-vertex-ai-llm-shared-request-type")
            .filter(|_| global)
            .map(str::to_ascii_lowercase)
    } else {
        req.body["serviceTier"]
            .as_str()
            .map(str::to_ascii_lowercase)
    };
    match asked.as_deref() {
        Some(t @ ("flex" | "priority")) => t.to_string(),
        _ => "standard".into(),
    }
}

/// Answers a generate call; a Gemini API answer says in the `x-gemini-service-tier` header which
/// tier served it (Vertex AI's say it in `usageMetadata.trafficType`).
pub(super) async fn generate(script: Script, req: &Recorded, stream: bool) -> Response {
    let mut response = answer_generate(&script, req, stream).await;
    if !req.is_vertex() && response.status().is_success() {
        let tier = served_tier(&script, req);
        response.headers_mut().insert(
            "x-gemini-service-tier",
            axum::http::HeaderValue::from_str(&tier).expect("a header value"),
        );
    }
    response
}

async fn answer_generate(script: &Script, req: &Recorded, stream: bool) -> Response {
    let script = script.clone();
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
pub(super) fn generate_plain(script: &Script, req: &Recorded) -> Response {
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

pub(super) enum Frame {
    Bytes(String),
    Reset,
}

pub(super) fn sse_response(frames: Vec<Frame>, chunk_delay: Duration) -> Response {
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
pub(super) fn resolve_chunks(spec: &AnswerSpec, req: &Recorded) -> Vec<String> {
    match &spec.chunks {
        Some(c) => c.clone(),
        None => split_text(&default_answer(
            req.effective_body(),
            req.model.as_deref().unwrap_or(""),
        )),
    }
}

/// The JSON of every chunk of an answer.
pub(super) fn answer_chunks(spec: &AnswerSpec, script: &Script, req: &Recorded) -> Vec<Value> {
    let model_version = script
        .model_version
        .clone()
        .or_else(|| req.model.clone())
        .unwrap_or_default();
    let response_id = format!("fake-{}", req.raw_body.len());
    // A cache's tokens are part of the prompt, as Google counts them.
    let from_cache = req.cached_tokens.filter(|_| spec.usage.is_none());
    let prompt_tokens = spec.usage.map_or(
        req.raw_body.chars().count().div_ceil(4) as u64 + from_cache.unwrap_or(0),
        |u| u[0],
    );
    let thinking = if !spec.thoughts.is_empty() || req.thinking_config().is_object() {
        spec.usage.map_or(42, |u| u[2])
    } else {
        spec.usage.map_or(0, |u| u[2])
    };
    let cached = spec.usage.map_or(from_cache.unwrap_or(0), |u| u[3]);
    let traffic = req
        .is_vertex()
        .then(|| match served_tier(script, req).as_str() {
            "flex" => "ON_DEMAND_FLEX",
            "priority" => "ON_DEMAND_PRIORITY",
            _ => "ON_DEMAND",
        });
    let usage = |candidates: Option<u64>, thoughts: bool| {
        let mut u = json!({ "promptTokenCount": prompt_tokens });
        if let Some(t) = traffic {
            u["trafficType"] = json!(t);
        }
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
        if let Some(n) = from_cache {
            u["promptTokensDetails"] = json!([{ "modality": "TEXT", "tokenCount": prompt_tokens }]);
            u["cacheTokensDetails"] = json!([{ "modality": "TEXT", "tokenCount": n }]);
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

pub(super) fn finish_candidate(candidate: &mut Value, spec: &AnswerSpec) {
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

pub(super) fn is_json_mode(body: &Value) -> bool {
    let g = &body["generationConfig"];
    g.get("responseJsonSchema").is_some() || g.get("responseSchema").is_some()
}

pub(super) fn parts_text(content: &Value) -> String {
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

pub(super) fn last_user_text(body: &Value) -> String {
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

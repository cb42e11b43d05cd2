//! The Gemini REST API's JSON shapes (camelCase), parsed tolerantly, and the translation between
//! them and our own request/response model.
//!
//! This module owns the wire format of `generateContent`/`streamGenerateContent`, `countTokens`,
//! `GET /v1beta/models` and Google's error bodies (the shapes recorded in `fixtures/gemini/`). Nothing
//! outside `gemini/` sees these types.
//!
//! Parsing is forgiving on purpose: Google adds fields and enum values often (SDK 3.4.0 alone
//! added six finish reasons), so every field is an `Option`, the objects we read most keep the
//! fields we do not know in a flattened `extra` map, and enums carry an `Unknown(String)` arm.
//! Requests are strict: we send camelCase, only the fields we mean, and never both thinking
//! fields.

use std::time::Duration;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::models::{Level, ModelInfo, ThinkingConfig, ThinkingStyle, style_for_id};
use super::{GenerateRequest, Message, Role, Source, Usage};

// ---------------------------------------------------------------------------------------------
// Shared content shapes (sent and received)
// ---------------------------------------------------------------------------------------------

/// A message: `{"role": "user"|"model", "parts": [...]}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Content {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Absent when thinking used the whole output budget (`MAX_TOKENS` with no parts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<Vec<WirePart>>,
}

/// One part of a message. Only the kinds this server sends or reads are named; the rest
/// (function calls, file data, executable code…) land in `extra`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WirePart {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// `true` on thought summaries (only with `includeThoughts: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline_data: Option<InlineData>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl WirePart {
    fn text(text: impl Into<String>) -> WirePart {
        WirePart {
            text: Some(text.into()),
            ..WirePart::default()
        }
    }

    /// True for thought-summary parts, which are never part of the answer.
    pub fn is_thought(&self) -> bool {
        self.thought == Some(true)
    }

    /// The function call this part asks for, if it is one.
    pub fn function_call(&self) -> Option<super::FunctionCall> {
        let call = self.extra.get("functionCall")?;
        Some(super::FunctionCall {
            id: call.get("id").and_then(Value::as_str).map(str::to_string),
            name: call.get("name").and_then(Value::as_str)?.to_string(),
            args: call.get("args").cloned().unwrap_or(Value::Null),
        })
    }

    /// Whether the part carries anything worth replaying: text, a signature, a call, data.
    pub fn worth_replaying(&self) -> bool {
        self.text.as_deref().is_some_and(|t| !t.is_empty())
            || self.thought_signature.is_some()
            || self.inline_data.is_some()
            || !self.extra.is_empty()
    }
}

/// Bytes sent inline, base64-encoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InlineData {
    pub mime_type: String,
    pub data: String,
}

// ---------------------------------------------------------------------------------------------
// Request
// ---------------------------------------------------------------------------------------------

/// The body of `generateContent` and `streamGenerateContent`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
///
/// Fields are written in this order on purpose: what stays the same through a conversation or an
/// investigation (system instruction, tools, generation settings) first, then `contents`, which
/// only grows at its end, then `toolConfig`, the one thing a forced final answer changes. Each
/// request of an investigation thus begins with the bytes of the one before it, which is what
/// Gemini's implicit prefix cache matches.
pub struct GenerateContentRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_instruction: Option<Content>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Value>,
    pub generation_config: GenerationConfig,
    pub contents: Vec<Content>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_config: Option<Value>,
    /// Vertex AI only: labels for cost attribution (`GEMINI_MCP_VERTEX_LABELS`).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    /// `standard`, `flex` or `priority` (`GEMINI_SERVICE_TIER`); unset: the API's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerationConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// Only when the caller set one (3.x models degrade below their default of 1.0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_mime_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_json_schema: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_config: Option<WireThinkingConfig>,
}

/// `thinkingBudget` (Gemini 2.5) or `thinkingLevel` (3.x and later); the type makes sending both
/// impossible (the API answers 400 to that).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WireThinkingConfig {
    pub include_thoughts: bool,
    #[serde(flatten)]
    pub amount: ThinkingAmount,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ThinkingAmount {
    #[serde(rename = "thinkingBudget")]
    Budget(u32),
    #[serde(rename = "thinkingLevel")]
    Level(Level),
}

/// Translates our request into the REST body: system instruction, contents (text, images as
/// `inlineData`), the model's thinking configuration, temperature only when set, JSON mode,
/// the model's output limit, and Google Search grounding when asked.
pub fn build_request(req: &GenerateRequest) -> GenerateContentRequest {
    let contents = req.contents.iter().map(content_of).collect();
    let system_instruction = (!req.system_instruction.is_empty()).then(|| Content {
        role: None,
        parts: Some(vec![WirePart::text(req.system_instruction.clone())]),
    });
    let thinking_config = match req.model.thinking_config(req.thinking) {
        ThinkingConfig::Budget(b) => Some(ThinkingAmount::Budget(b)),
        ThinkingConfig::Level(l) => Some(ThinkingAmount::Level(l)),
        ThinkingConfig::None => None,
    }
    .map(|amount| WireThinkingConfig {
        include_thoughts: false,
        amount,
    });
    let json_mode = req.response_schema.is_some();
    let mut tools = Vec::new();
    if req.web_search {
        tools.push(serde_json::json!({ "googleSearch": {} }));
    }
    let mut tool_config = None;
    if let Some(f) = &req.functions {
        tools.push(serde_json::json!({ "functionDeclarations": f.declarations }));
        if !f.allow {
            tool_config = Some(serde_json::json!({ "functionCallingConfig": { "mode": "NONE" } }));
        }
    }
    GenerateContentRequest {
        contents,
        system_instruction,
        generation_config: GenerationConfig {
            max_output_tokens: Some(req.model.output_limit),
            temperature: req.temperature,
            response_mime_type: json_mode.then(|| "application/json".to_string()),
            response_json_schema: req.response_schema.clone(),
            thinking_config,
        },
        tools,
        tool_config,
        labels: Default::default(),
        service_tier: None,
    }
}

fn content_of(m: &Message) -> Content {
    let role = match m.role {
        Role::User => "user",
        Role::Model => "model",
    };
    let parts = m
        .parts
        .iter()
        .map(|p| match p {
            super::Part::Text(t) => WirePart::text(t.clone()),
            super::Part::Image { mime, data } => WirePart {
                inline_data: Some(InlineData {
                    mime_type: mime.clone(),
                    data: base64::engine::general_purpose::STANDARD.encode(data.as_slice()),
                }),
                ..WirePart::default()
            },
            super::Part::Recorded(v) => serde_json::from_value(v.clone()).unwrap_or_default(),
            super::Part::FunctionResponse { id, name, response } => {
                let mut call = serde_json::json!({ "name": name, "response": response });
                if let Some(id) = id {
                    call["id"] = Value::String(id.clone());
                }
                let mut part = WirePart::default();
                part.extra.insert("functionResponse".into(), call);
                part
            }
        })
        .collect();
    Content {
        role: Some(role.to_string()),
        parts: Some(parts),
    }
}

/// The body of `countTokens` for plain text.
pub fn count_tokens_request(text: &str) -> Value {
    serde_json::json!({ "contents": [ { "role": "user", "parts": [ { "text": text } ] } ] })
}

// ---------------------------------------------------------------------------------------------
// Response
// ---------------------------------------------------------------------------------------------

/// One `GenerateContentResponse`: the whole answer of `generateContent`, or one chunk of a
/// stream (where `parts[].text` is a delta).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateContentResponse {
    #[serde(default)]
    pub candidates: Option<Vec<Candidate>>,
    #[serde(default)]
    pub prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    pub usage_metadata: Option<UsageMetadata>,
    /// The model that actually served the request (shut-down models are silently rerouted).
    #[serde(default)]
    pub model_version: Option<String>,
    #[serde(default)]
    pub response_id: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    #[serde(default)]
    pub content: Option<Content>,
    #[serde(default)]
    pub finish_reason: Option<FinishReason>,
    #[serde(default)]
    pub finish_message: Option<String>,
    #[serde(default)]
    pub index: Option<u32>,
    #[serde(default)]
    pub grounding_metadata: Option<GroundingMetadata>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptFeedback {
    /// Set only when the prompt was blocked; a string so new reasons never fail parsing.
    #[serde(default)]
    pub block_reason: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageMetadata {
    #[serde(default)]
    pub prompt_token_count: Option<u64>,
    #[serde(default)]
    pub candidates_token_count: Option<u64>,
    #[serde(default)]
    pub thoughts_token_count: Option<u64>,
    #[serde(default)]
    pub cached_content_token_count: Option<u64>,
    #[serde(default)]
    pub tool_use_prompt_token_count: Option<u64>,
    #[serde(default)]
    pub total_token_count: Option<u64>,
    /// The service tier that served the call, where the API reports it.
    #[serde(default)]
    pub service_tier: Option<String>,
}

impl UsageMetadata {
    pub fn to_usage(self) -> Usage {
        Usage {
            input: self.prompt_token_count.unwrap_or(0),
            output: self.candidates_token_count.unwrap_or(0),
            thinking: self.thoughts_token_count.unwrap_or(0),
            cached: self.cached_content_token_count.unwrap_or(0),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroundingMetadata {
    #[serde(default)]
    pub grounding_chunks: Option<Vec<GroundingChunk>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroundingChunk {
    #[serde(default)]
    pub web: Option<WebSource>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct WebSource {
    #[serde(default)]
    pub uri: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
}

impl GroundingMetadata {
    /// The web pages Gemini cited, in order, without duplicates or entries lacking an address.
    pub fn sources(&self) -> Vec<Source> {
        let mut out: Vec<Source> = Vec::new();
        for chunk in self.grounding_chunks.iter().flatten() {
            let Some(web) = &chunk.web else { continue };
            let Some(uri) = web.uri.as_deref().filter(|u| !u.is_empty()) else {
                continue;
            };
            if out.iter().any(|s| s.uri == uri) {
                continue;
            }
            out.push(Source {
                title: web.title.clone().unwrap_or_else(|| uri.to_string()),
                uri: uri.to_string(),
            });
        }
        out
    }
}

/// Why a candidate stopped. The variants this server treats differently are named; everything
/// else (including values Google adds later) is kept verbatim in `Unknown`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "String")]
pub enum FinishReason {
    Stop,
    MaxTokens,
    Safety,
    Recitation,
    Language,
    Blocklist,
    ProhibitedContent,
    Spii,
    /// The literal `OTHER`.
    Other,
    Unknown(String),
}

impl From<String> for FinishReason {
    fn from(s: String) -> FinishReason {
        match s.as_str() {
            "STOP" => FinishReason::Stop,
            "MAX_TOKENS" => FinishReason::MaxTokens,
            "SAFETY" => FinishReason::Safety,
            "RECITATION" => FinishReason::Recitation,
            "LANGUAGE" => FinishReason::Language,
            "BLOCKLIST" => FinishReason::Blocklist,
            "PROHIBITED_CONTENT" => FinishReason::ProhibitedContent,
            "SPII" => FinishReason::Spii,
            "OTHER" => FinishReason::Other,
            _ => FinishReason::Unknown(s),
        }
    }
}

impl FinishReason {
    /// The wire spelling.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "STOP",
            FinishReason::MaxTokens => "MAX_TOKENS",
            FinishReason::Safety => "SAFETY",
            FinishReason::Recitation => "RECITATION",
            FinishReason::Language => "LANGUAGE",
            FinishReason::Blocklist => "BLOCKLIST",
            FinishReason::ProhibitedContent => "PROHIBITED_CONTENT",
            FinishReason::Spii => "SPII",
            FinishReason::Other => "OTHER",
            FinishReason::Unknown(s) => s,
        }
    }

    /// What to do when a candidate stopped for this reason without any text.
    pub fn hint(&self) -> &'static str {
        match self {
            FinishReason::Safety | FinishReason::ProhibitedContent | FinishReason::Spii => {
                "Gemini's safety filters withheld the answer. Rephrase the request, or leave out the files or text that triggered it."
            }
            FinishReason::Blocklist => {
                "the answer contained blocklisted terms. Rephrase the request."
            }
            FinishReason::Recitation => {
                "the answer would have recited copyrighted or training material verbatim. Retry, or ask for a summary or explanation instead of a copy."
            }
            FinishReason::Language => {
                "the request is in a language the model does not support. Ask in English."
            }
            _ => "Retry; if it happens again, rephrase the request or try another model.",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// countTokens and models
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CountTokensResponse {
    #[serde(default)]
    pub total_tokens: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListModelsResponse {
    #[serde(default)]
    pub models: Option<Vec<WireModel>>,
    #[serde(default)]
    pub next_page_token: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireModel {
    /// `models/<id>`.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub display_name: Option<String>,
    #[serde(default)]
    pub input_token_limit: Option<u64>,
    #[serde(default)]
    pub output_token_limit: Option<u64>,
    #[serde(default)]
    pub supported_generation_methods: Option<Vec<String>>,
    #[serde(default)]
    pub thinking: Option<bool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Kinds of models the endpoint lists that cannot answer a text prompt with text.
const NOT_FOR_TEXT: &[&str] = &[
    "embedding",
    "tts",
    "image",
    "imagen",
    "veo",
    "live",
    "audio",
    "robotics",
    "computer-use",
    "aqa",
];

impl WireModel {
    /// Our view of a listed model, when it is a Gemini text model that can `generateContent`.
    pub fn to_model_info(&self) -> Option<ModelInfo> {
        let name = self.name.as_deref()?;
        let id = name.strip_prefix("models/").unwrap_or(name).to_string();
        if !id.starts_with("gemini-") || NOT_FOR_TEXT.iter().any(|k| id.contains(k)) {
            return None;
        }
        if let Some(methods) = &self.supported_generation_methods
            && !methods.iter().any(|m| m == "generateContent")
        {
            return None;
        }
        let thinking = if self.thinking == Some(false) {
            ThinkingStyle::None
        } else {
            style_for_id(&id)
        };
        Some(ModelInfo {
            display_name: self.display_name.clone().unwrap_or_default(),
            input_limit: self
                .input_token_limit
                .filter(|n| *n > 0)
                .unwrap_or(1_048_576),
            output_limit: self.output_token_limit.filter(|n| *n > 0).unwrap_or(65_536),
            thinking,
            images: true,
            retired: false,
            replacement: None,
            shutdown: None,
            builtin: false,
            id,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// Google's error object: `{"error": {code, message, status, details}}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ErrorBody {
    #[serde(default)]
    pub code: Option<u16>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub details: Option<Vec<Value>>,
}

/// Parses an error body, plain or wrapped in a one-element array (`[{"error":{…}}]`).
pub fn parse_error(body: &str) -> Option<ErrorBody> {
    let value: Value = serde_json::from_str(body.trim()).ok()?;
    let envelope = match value {
        Value::Array(mut items) if !items.is_empty() => items.swap_remove(0),
        other => other,
    };
    match envelope.get("error")? {
        error @ Value::Object(_) => serde_json::from_value(error.clone()).ok(),
        _ => None,
    }
}

impl ErrorBody {
    fn details_of<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.details.iter().flatten().filter(move |d| {
            d.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.rsplit('.').next() == Some(kind))
        })
    }

    /// `RetryInfo.retryDelay`, else the "Please retry in Xs" of the message.
    pub fn retry_delay(&self) -> Option<Duration> {
        self.details_of("RetryInfo")
            .find_map(|d| d.get("retryDelay").and_then(Value::as_str))
            .and_then(parse_duration)
            .or_else(|| self.message.as_deref().and_then(retry_in_message))
    }

    /// Every `QuotaFailure.violations[].quotaId`.
    pub fn quota_ids(&self) -> Vec<String> {
        self.details_of("QuotaFailure")
            .filter_map(|d| d.get("violations").and_then(Value::as_array))
            .flatten()
            .filter_map(|v| v.get("quotaId").and_then(Value::as_str))
            .map(String::from)
            .collect()
    }

    /// `ErrorInfo.reason`, e.g. `API_KEY_INVALID`.
    pub fn reason(&self) -> Option<String> {
        self.details_of("ErrorInfo")
            .find_map(|d| d.get("reason").and_then(Value::as_str))
            .map(String::from)
    }
}

/// A protobuf JSON duration: `"48s"`, `"0.539477544s"`; also `"250ms"`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (number, scale) = if let Some(ms) = s.strip_suffix("ms") {
        (ms, 0.001)
    } else {
        (s.strip_suffix('s')?, 1.0)
    };
    let v: f64 = number.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| Duration::from_secs_f64(v * scale))
}

/// The delay in "… Please retry in 48.805646254s." (gemini-cli parses this when RetryInfo is
/// missing).
fn retry_in_message(message: &str) -> Option<Duration> {
    let lower = message.to_ascii_lowercase();
    let at = lower.find("retry in ")? + "retry in ".len();
    let rest = &message[at..];
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
        .unwrap_or(rest.len());
    parse_duration(rest[..end].trim_end_matches('.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemini::models::Catalogue;
    use crate::gemini::{Part, ThinkingMode};
    use serde_json::json;
    use std::sync::Arc;

    fn request(model: &str, thinking: ThinkingMode) -> GenerateRequest {
        GenerateRequest {
            model: Catalogue::builtin("pro").resolve(model).unwrap(),
            system_instruction: "You review code.".into(),
            contents: vec![
                Message::user("first"),
                Message::model("an answer"),
                Message::user("follow-up"),
            ],
            thinking,
            temperature: None,
            response_schema: None,
            web_search: false,
            functions: None,
        }
    }

    /// The body as it goes on the wire (serialised text, read back).
    fn body(req: &GenerateRequest) -> Value {
        serde_json::from_str(&serde_json::to_string(&build_request(req)).unwrap()).unwrap()
    }

    #[test]
    fn functions_calls_replayed_and_responses_in_the_request() {
        let mut req = request("gemini-3.1-pro-preview", ThinkingMode::Medium);
        let call = json!({"functionCall": {"name": "read_file", "args": {"path": "a.rs"}, "id": "c1"}, "thoughtSignature": "U0lHLTE="});
        req.contents.push(Message {
            role: Role::Model,
            parts: vec![
                super::super::Part::Recorded(json!({"text": "Looking."})),
                super::super::Part::Recorded(call.clone()),
            ],
        });
        req.contents.push(Message {
            role: Role::User,
            parts: vec![super::super::Part::FunctionResponse {
                id: Some("c1".into()),
                name: "read_file".into(),
                response: json!({"output": "1│ fn a() {}"}),
            }],
        });
        req.functions = Some(super::super::Functions {
            declarations: json!([{"name": "read_file"}]),
            allow: true,
        });
        let b = body(&req);
        assert_eq!(
            b["tools"],
            json!([{"functionDeclarations": [{"name": "read_file"}]}])
        );
        assert!(b.get("toolConfig").is_none());
        let n = b["contents"].as_array().unwrap().len();
        assert_eq!(
            b["contents"][n - 2]["parts"][1],
            call,
            "replayed as received"
        );
        assert_eq!(
            b["contents"][n - 1],
            json!({"role": "user", "parts": [{"functionResponse": {"name": "read_file", "id": "c1", "response": {"output": "1│ fn a() {}"}}}]})
        );
        // Calling off keeps the declarations (and the request's prefix); toolConfig comes last.
        let before = serde_json::to_string(&build_request(&req)).unwrap();
        req.functions.as_mut().unwrap().allow = false;
        let after = serde_json::to_string(&build_request(&req)).unwrap();
        assert_eq!(
            body(&req)["toolConfig"],
            json!({"functionCallingConfig": {"mode": "NONE"}})
        );
        let stem = before.strip_suffix('}').unwrap();
        assert!(after.starts_with(stem), "{after}");
        // What stays the same comes first, the growing contents after it.
        let order = [
            "\"systemInstruction\"",
            "\"tools\"",
            "\"generationConfig\"",
            "\"contents\"",
            "\"toolConfig\"",
        ];
        let at: Vec<usize> = order.iter().map(|k| after.find(k).unwrap()).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{after}");
    }

    #[test]
    fn thinking_config_per_model_family() {
        // (model, mode, expected thinkingConfig)
        let cases = [
            (
                "gemini-2.5-pro",
                ThinkingMode::Minimal,
                json!({"includeThoughts": false, "thinkingBudget": 128}),
            ),
            (
                "gemini-2.5-flash",
                ThinkingMode::Max,
                json!({"includeThoughts": false, "thinkingBudget": 24576}),
            ),
            (
                "gemini-2.5-flash-lite",
                ThinkingMode::Minimal,
                json!({"includeThoughts": false, "thinkingBudget": 512}),
            ),
            (
                "gemini-3.1-pro-preview",
                ThinkingMode::Minimal,
                json!({"includeThoughts": false, "thinkingLevel": "LOW"}),
            ),
            (
                "gemini-3.5-flash",
                ThinkingMode::Minimal,
                json!({"includeThoughts": false, "thinkingLevel": "MINIMAL"}),
            ),
            (
                "gemini-4-argon",
                ThinkingMode::Max,
                json!({"includeThoughts": false, "thinkingLevel": "HIGH"}),
            ),
        ];
        for (model, mode, want) in cases {
            let b = body(&request(model, mode));
            let tc = &b["generationConfig"]["thinkingConfig"];
            assert_eq!(tc, &want, "{model} {mode:?}");
            let both = tc.get("thinkingBudget").is_some() && tc.get("thinkingLevel").is_some();
            assert!(!both, "{model}: both thinking fields sent");
        }
        // A model without thinking gets no thinkingConfig at all.
        let b = body(&request("gemini-2.0-flash", ThinkingMode::High));
        assert!(b["generationConfig"].get("thinkingConfig").is_none(), "{b}");
    }

    #[test]
    fn contents_roles_system_instruction_and_limits() {
        let b = body(&request("gemini-3.1-pro-preview", ThinkingMode::Medium));
        assert_eq!(
            b["systemInstruction"],
            json!({"parts": [{"text": "You review code."}]})
        );
        assert_eq!(
            b["contents"],
            json!([
                {"role": "user", "parts": [{"text": "first"}]},
                {"role": "model", "parts": [{"text": "an answer"}]},
                {"role": "user", "parts": [{"text": "follow-up"}]},
            ])
        );
        assert_eq!(b["generationConfig"]["maxOutputTokens"], json!(65536));
        // No temperature, no JSON mode, no tools unless asked.
        assert!(b["generationConfig"].get("temperature").is_none(), "{b}");
        assert!(b["generationConfig"].get("responseMimeType").is_none());
        assert!(b.get("tools").is_none());
    }

    #[test]
    fn temperature_json_mode_and_search_when_asked() {
        let mut r = request("gemini-2.5-flash", ThinkingMode::Low);
        r.temperature = Some(0.2);
        r.response_schema = Some(json!({"type": "object"}));
        r.web_search = true;
        let b = body(&r);
        assert_eq!(b["generationConfig"]["temperature"], json!(0.2));
        assert_eq!(
            b["generationConfig"]["responseMimeType"],
            json!("application/json")
        );
        assert_eq!(
            b["generationConfig"]["responseJsonSchema"],
            json!({"type": "object"})
        );
        assert_eq!(b["tools"], json!([{"googleSearch": {}}]));
        // The serialised text uses camelCase only.
        let text = serde_json::to_string(&build_request(&r)).unwrap();
        assert!(
            !text.contains("_config") && !text.contains("max_output"),
            "{text}"
        );
    }

    #[test]
    fn images_are_sent_inline_as_base64() {
        let mut r = request("gemini-3.5-flash", ThinkingMode::Low);
        r.contents = vec![Message {
            role: Role::User,
            parts: vec![
                Part::Text("what is this?".into()),
                Part::Image {
                    mime: "image/png".into(),
                    data: Arc::new(vec![0x89, b'P', b'N', b'G']),
                },
            ],
        }];
        let b = body(&r);
        assert_eq!(
            b["contents"][0]["parts"][1],
            json!({"inlineData": {"mimeType": "image/png", "data": "iVBORw=="}})
        );
    }

    #[test]
    fn streamed_chunk_from_a_real_recording_parses() {
        let chunk = r#"{"candidates":[{"content":{"parts":[{"text":" done."}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":5947,"totalTokenCount":7993,"thoughtsTokenCount":2042},"modelVersion":"gemini-2.5-flash","responseId":"IZI2acSKMoWl0-kPmYj2yQc"}"#;
        let r: GenerateContentResponse = serde_json::from_str(chunk).unwrap();
        let c = &r.candidates.as_ref().unwrap()[0];
        assert_eq!(c.finish_reason, Some(FinishReason::Stop));
        assert_eq!(
            c.content.as_ref().unwrap().parts.as_ref().unwrap()[0]
                .text
                .as_deref(),
            Some(" done.")
        );
        assert_eq!(
            r.usage_metadata.unwrap().to_usage(),
            Usage {
                input: 4,
                output: 5947,
                thinking: 2042,
                cached: 0
            }
        );
        assert_eq!(r.model_version.as_deref(), Some("gemini-2.5-flash"));
    }

    #[test]
    fn unknown_fields_and_enum_values_never_fail() {
        let chunk = json!({
            "candidates": [{
                "content": {"role": "model", "parts": [
                    {"text": "**Thinking**", "thought": true},
                    {"text": "", "thoughtSignature": "CiQB0e2K", "videoMetadata": {"x": 1}}
                ]},
                "finishReason": "PUP_LIMITED_DISABLED",
                "continuationToken": "abc",
                "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"}]
            }],
            "usageMetadata": {"promptTokenCount": 1, "futureCount": 3, "promptTokensDetails": []},
            "modelStatus": {},
        });
        let r: GenerateContentResponse = serde_json::from_value(chunk).unwrap();
        let c = &r.candidates.unwrap()[0];
        assert_eq!(
            c.finish_reason,
            Some(FinishReason::Unknown("PUP_LIMITED_DISABLED".into()))
        );
        assert_eq!(
            c.finish_reason.as_ref().unwrap().as_str(),
            "PUP_LIMITED_DISABLED"
        );
        assert!(c.extra.contains_key("continuationToken"));
        let parts = c.content.as_ref().unwrap().parts.as_ref().unwrap();
        assert!(parts[0].is_thought());
        assert!(parts[1].extra.contains_key("videoMetadata"));
        assert!(r.extra.contains_key("modelStatus"));
    }

    #[test]
    fn edge_shapes_max_tokens_without_parts_and_blocked_prompt() {
        let r: GenerateContentResponse = serde_json::from_str(include_str!(
            "../../fixtures/gemini/max-tokens-no-parts.json"
        ))
        .unwrap();
        let c = &r.candidates.unwrap()[0];
        assert!(c.content.as_ref().unwrap().parts.is_none());
        assert_eq!(c.finish_reason, Some(FinishReason::MaxTokens));
        assert_eq!(r.usage_metadata.unwrap().to_usage().thinking, 2999);

        let r: GenerateContentResponse =
            serde_json::from_str(include_str!("../../fixtures/gemini/prompt-blocked.json"))
                .unwrap();
        assert!(r.candidates.is_none());
        assert_eq!(
            r.prompt_feedback.unwrap().block_reason.as_deref(),
            Some("SAFETY")
        );
    }

    #[test]
    fn grounding_chunks_become_sources() {
        let c: Candidate = serde_json::from_value(json!({
            "groundingMetadata": {
                "webSearchQueries": ["rust tokio"],
                "groundingChunks": [
                    {"web": {"uri": "https://tokio.rs", "title": "Tokio"}},
                    {"web": {"uri": "https://tokio.rs", "title": "Tokio again"}},
                    {"web": {"uri": "https://docs.rs/x"}},
                    {"retrievedContext": {"uri": "x"}},
                ]
            }
        }))
        .unwrap();
        assert_eq!(
            c.grounding_metadata.unwrap().sources(),
            vec![
                Source {
                    title: "Tokio".into(),
                    uri: "https://tokio.rs".into()
                },
                Source {
                    title: "https://docs.rs/x".into(),
                    uri: "https://docs.rs/x".into()
                },
            ]
        );
    }

    #[test]
    fn error_bodies_plain_and_array_wrapped() {
        let quota = include_str!("../../fixtures/gemini/error-429-per-day.json");
        let e = parse_error(quota).unwrap();
        assert_eq!(e.code, Some(429));
        assert_eq!(e.status.as_deref(), Some("RESOURCE_EXHAUSTED"));
        assert_eq!(e.retry_delay(), Some(Duration::from_secs(48)));
        assert_eq!(
            e.quota_ids(),
            vec!["GenerateRequestsPerDayPerProjectPerModel-FreeTier"]
        );

        let wrapped = include_str!("../../fixtures/gemini/error-400-api-key-invalid-array.json");
        let e = parse_error(wrapped).unwrap();
        assert_eq!(e.code, Some(400));
        assert_eq!(e.reason().as_deref(), Some("API_KEY_INVALID"));

        let tail = parse_error(include_str!("../../fixtures/gemini/error-tail-503.txt")).unwrap();
        assert_eq!(
            (tail.code, tail.status.as_deref()),
            (Some(503), Some("UNAVAILABLE"))
        );
        assert!(parse_error("<html>502 Bad Gateway</html>").is_none());
        assert!(parse_error("[]").is_none());
    }

    #[test]
    fn retry_delays_from_details_or_message() {
        for (s, want) in [
            ("48s", Some(48_000)),
            ("0.539477544s", Some(539)),
            ("250ms", Some(250)),
            ("soon", None),
            ("-1s", None),
        ] {
            assert_eq!(parse_duration(s).map(|d| d.as_millis() as u64), want, "{s}");
        }
        let e = ErrorBody {
            message: Some("Quota exceeded. Please retry in 2.5s.".into()),
            ..ErrorBody::default()
        };
        assert_eq!(e.retry_delay(), Some(Duration::from_millis(2500)));
        let e = ErrorBody {
            message: Some("Please retry in 900ms".into()),
            ..ErrorBody::default()
        };
        assert_eq!(e.retry_delay(), Some(Duration::from_millis(900)));
    }

    #[test]
    fn listed_models_become_model_infos() {
        let list: ListModelsResponse = serde_json::from_value(json!({
            "models": [
                {"name": "models/gemini-3.1-pro-preview", "displayName": "Gemini 3.1 Pro Preview",
                 "inputTokenLimit": 1048576, "outputTokenLimit": 65536, "thinking": true,
                 "supportedGenerationMethods": ["generateContent", "countTokens"]},
                {"name": "models/gemini-2.5-flash", "inputTokenLimit": 131072, "outputTokenLimit": 8192,
                 "supportedGenerationMethods": ["generateContent"]},
                {"name": "models/gemini-embedding-001", "supportedGenerationMethods": ["embedContent"]},
                {"name": "models/gemini-2.5-flash-preview-tts", "supportedGenerationMethods": ["generateContent"]},
                {"name": "models/gemma-3-27b-it", "supportedGenerationMethods": ["generateContent"]},
                {"name": "models/gemini-2.0-flash", "thinking": false}
            ],
            "nextPageToken": "abc"
        }))
        .unwrap();
        assert_eq!(list.next_page_token.as_deref(), Some("abc"));
        let infos: Vec<ModelInfo> = list
            .models
            .unwrap()
            .iter()
            .filter_map(WireModel::to_model_info)
            .collect();
        let ids: Vec<&str> = infos.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(
            ids,
            vec![
                "gemini-3.1-pro-preview",
                "gemini-2.5-flash",
                "gemini-2.0-flash"
            ]
        );
        assert_eq!(infos[1].input_limit, 131072);
        assert_eq!(infos[1].output_limit, 8192);
        assert_eq!(
            infos[1].thinking,
            ThinkingStyle::Budget { min: 0, max: 24576 }
        );
        assert!(infos[0].is_level_family());
        assert_eq!(infos[2].thinking, ThinkingStyle::None);
        assert!(!infos[0].builtin);
    }
}

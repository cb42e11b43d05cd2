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

use crate::gemini::models::{Level, ModelInfo, ThinkingConfig, ThinkingStyle, style_for_id};
use crate::gemini::vocabulary::{
    FunctionCall, GenerateRequest, Message, Part, Role, ServiceTier, Source, Usage,
};

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
    pub fn function_call(&self) -> Option<FunctionCall> {
        let call = self.extra.get("functionCall")?;
        Some(FunctionCall {
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
    /// The Gemini API only (Vertex AI takes the tier in a header): `standard`, `flex` or
    /// `priority` (`GEMINI_SERVICE_TIER`); unset: the API's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<ServiceTier>,
    /// The explicit cache holding the system instruction and the first messages, which are then
    /// not sent (`GenerateRequest::cache`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_content: Option<String>,
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
///
/// With a cache, the system instruction and the messages it holds are left out and the cache is
/// named instead.
pub fn build_request(req: &GenerateRequest) -> GenerateContentRequest {
    let covered = req
        .cache
        .as_ref()
        .map_or(0, |c| c.covers.min(req.contents.len()));
    let contents = req.contents[covered..].iter().map(content_of).collect();
    let system_instruction = (req.cache.is_none() && !req.system_instruction.is_empty())
        .then(|| system_content(&req.system_instruction));
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
    if req.cache.is_some() {
        // The cache holds the tools; the API refuses `tools` and `toolConfig` beside it.
        tools.clear();
        tool_config = None;
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
        cached_content: req.cache.as_ref().map(|c| c.name.clone()),
    }
}

/// A system instruction as the API takes it.
fn system_content(text: &str) -> Content {
    Content {
        role: None,
        parts: Some(vec![WirePart::text(text.to_string())]),
    }
}

/// The body of `cachedContents.create`: the model (`models/…`, or Vertex AI's full name), the
/// system instruction and the first `covers` messages of `req`, kept for `ttl_secs`.
pub fn create_cache_request(
    req: &GenerateRequest,
    model: &str,
    covers: usize,
    ttl_secs: u64,
    display_name: &str,
) -> Value {
    let contents: Vec<Content> = req.contents[..covers.min(req.contents.len())]
        .iter()
        .map(content_of)
        .collect();
    let mut body = serde_json::json!({
        "model": model,
        "contents": contents,
        "ttl": format!("{ttl_secs}s"),
        "displayName": display_name,
    });
    if !req.system_instruction.is_empty() {
        body["systemInstruction"] =
            serde_json::to_value(system_content(&req.system_instruction)).unwrap_or_default();
    }
    // The request's tools (function declarations, web search) go in the cache with it.
    let whole = build_request(&GenerateRequest {
        cache: None,
        previous: None,
        ..req.clone()
    });
    if !whole.tools.is_empty() {
        body["tools"] = Value::Array(whole.tools);
    }
    body
}

/// What `cachedContents.create` answers (the fields we read).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CachedContent {
    pub name: Option<String>,
    pub expire_time: Option<String>,
    pub usage_metadata: Option<CacheUsage>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheUsage {
    pub total_token_count: Option<u64>,
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
            Part::Text(t) => WirePart::text(t.clone()),
            Part::Image { mime, data } => WirePart {
                inline_data: Some(InlineData {
                    mime_type: mime.clone(),
                    data: base64::engine::general_purpose::STANDARD.encode(data.as_slice()),
                }),
                ..WirePart::default()
            },
            Part::Recorded(v) => serde_json::from_value(v.clone()).unwrap_or_default(),
            Part::FunctionResponse { id, name, response } => {
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
    /// Vertex AI only: the traffic the call was served as (`ON_DEMAND`, `ON_DEMAND_FLEX`,
    /// `ON_DEMAND_PRIORITY`, `PROVISIONED_THROUGHPUT`). The Gemini API reports its tier in a
    /// header instead; neither puts one elsewhere in the body.
    #[serde(default)]
    pub traffic_type: Option<String>,
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
mod tests;

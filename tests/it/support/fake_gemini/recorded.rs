//! The requests the fake records, and the endpoints it serves.

use serde_json::Value;

#[allow(unused_imports)]
use super::*;

/// The largest page the fake's model list returns, whatever `pageSize` asks.
pub const MODELS_PAGE_CAP: usize = 5;

/// The `thoughtSignature` on the last part of every default answer.
pub const FAKE_SIGNATURE: &str = "ZmFrZS10aG91Z2h0LXNpZ25hdHVyZQ==";

/// Which endpoint a queued script answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `:generateContent` and `:streamGenerateContent` (one queue for both).
    Generate,
    CountTokens,
    /// `GET /v1beta/models` (each page is one request).
    ListModels,
    /// `POST …/cachedContents`: a script here answers the next create instead of the fake's
    /// cache store (see also [`FakeGemini::fail_next_cache_create`]).
    CreateCache,
}

/// One request as the fake received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// The path without the query, e.g. `/v1beta/models/gemini-2.5-flash:countTokens`.
    pub path: String,
    pub query: Option<String>,
    /// The model id from the path, without `models/`.
    pub model: Option<String>,
    /// `streamGenerateContent`, `generateContent`, `countTokens`; `None` for GETs and for
    /// `cachedContents` (see [`Recorded::cache_op`]).
    pub action: Option<String>,
    /// Header names in lower case, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Null` when empty or not JSON), as sent.
    pub body: Value,
    pub raw_body: String,
    /// A generate call naming a live `cachedContent`: the body the fake answered, the cache's
    /// `contents` first, its `systemInstruction`, `tools` and `toolConfig` in place. See
    /// [`Recorded::effective_body`].
    pub effective: Option<Value>,
    /// That cache's `usageMetadata.totalTokenCount`.
    pub cached_tokens: Option<u64>,
    /// When the request arrived (its headers and body read).
    pub at: std::time::Instant,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// A `generateContent` or `streamGenerateContent` call.
    pub fn is_generate(&self) -> bool {
        matches!(
            self.action.as_deref(),
            Some("generateContent" | "streamGenerateContent")
        )
    }

    pub fn is_stream(&self) -> bool {
        self.action.as_deref() == Some("streamGenerateContent")
    }

    /// The body as the model reads it: [`Recorded::effective`] for a call that used a cache,
    /// else the body as sent. `system_text`, `messages` and `last_user_text` read this one.
    pub fn effective_body(&self) -> &Value {
        self.effective.as_ref().unwrap_or(&self.body)
    }

    /// The `cachedContent` the body names (`cachedContents/…`, or Vertex AI's full name).
    pub fn cached_content(&self) -> Option<&str> {
        cached_content_field(&self.body)
    }

    /// Which `cachedContents` call this is, if one.
    pub fn cache_op(&self) -> Option<CacheOp> {
        let (_, rest) = self.path.split_once("/cachedContents")?;
        let item = rest.strip_prefix('/').is_some_and(|id| !id.is_empty());
        match (self.method.as_str(), item) {
            ("POST", false) => Some(CacheOp::Create),
            ("GET", false) => Some(CacheOp::List),
            ("GET", true) => Some(CacheOp::Get),
            ("PATCH", true) => Some(CacheOp::Patch),
            ("DELETE", true) => Some(CacheOp::Delete),
            _ => None,
        }
    }

    pub fn generation_config(&self) -> &Value {
        &self.body["generationConfig"]
    }

    pub fn thinking_config(&self) -> &Value {
        &self.body["generationConfig"]["thinkingConfig"]
    }

    /// JSON mode: a response schema was sent.
    pub fn json_mode(&self) -> bool {
        is_json_mode(&self.body)
    }

    /// Function declarations (sent, or held by the cache used) together with a JSON response
    /// (`application/json`), which Gemini 2.x refuses.
    pub fn calls_functions_in_json_mode(&self) -> bool {
        let declares = self.effective_body()["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t.get("functionDeclarations").is_some()));
        declares && self.generation_config()["responseMimeType"] == "application/json"
    }

    /// Whether this call reached the Vertex AI paths (`/v1/…`), not the Gemini API's.
    pub fn is_vertex(&self) -> bool {
        self.path.starts_with("/v1/")
    }

    /// The text of `systemInstruction` (the cache's, for a call that used one).
    pub fn system_text(&self) -> String {
        parts_text(&self.effective_body()["systemInstruction"])
    }

    /// `(role, text)` of every message in `contents`, oldest first (a cache's first).
    pub fn messages(&self) -> Vec<(String, String)> {
        self.effective_body()["contents"]
            .as_array()
            .map(|c| {
                c.iter()
                    .map(|m| {
                        let role = m["role"].as_str().unwrap_or("user").to_string();
                        (role, parts_text(m))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The text of the last user message (of the effective conversation).
    pub fn last_user_text(&self) -> String {
        last_user_text(self.effective_body())
    }
}

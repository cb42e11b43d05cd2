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
    /// `streamGenerateContent`, `generateContent`, `countTokens`; `None` for GETs.
    pub action: Option<String>,
    /// Header names in lower case, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Null` when empty or not JSON).
    pub body: Value,
    pub raw_body: String,
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

    /// Function declarations sent together with a JSON response (`application/json`), which
    /// Gemini 2.x refuses.
    pub fn calls_functions_in_json_mode(&self) -> bool {
        let declares = self.body["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t.get("functionDeclarations").is_some()));
        declares && self.generation_config()["responseMimeType"] == "application/json"
    }

    /// Whether this call reached the Vertex AI paths (`/v1/…`), not the Gemini API's.
    pub fn is_vertex(&self) -> bool {
        self.path.starts_with("/v1/")
    }

    /// The text of `systemInstruction`.
    pub fn system_text(&self) -> String {
        parts_text(&self.body["systemInstruction"])
    }

    /// `(role, text)` of every message in `contents`, oldest first.
    pub fn messages(&self) -> Vec<(String, String)> {
        self.body["contents"]
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

    /// The text of the last user message.
    pub fn last_user_text(&self) -> String {
        last_user_text(&self.body)
    }
}

//! What a test scripts the fake to answer: an answer, streamed or not, or one of Google's errors.

use std::time::Duration;

use serde_json::{Value, json};

#[allow(unused_imports)]
use super::*;

/// One scripted answer. Build with the constructors, adjust with the `with`-style methods.
#[derive(Debug, Clone)]
pub struct Script {
    pub(super) kind: Kind,
    pub(super) head_delay: Duration,
    pub(super) chunk_delay: Duration,
    pub(super) model_version: Option<String>,
    pub(super) separator: String,
    pub(super) array_wrapped: bool,
    /// The tier the answer says served the call (default: the one asked for).
    pub(super) served_tier: Option<String>,
}

#[derive(Debug, Clone)]
pub(super) enum Kind {
    /// An answer built for the request (the default answer when `text` is `None`).
    Answer(AnswerSpec),
    /// A Google error object.
    Error { status: u16, error: Value },
    /// Any status, content type and body, sent as is.
    Raw {
        status: u16,
        content_type: String,
        body: String,
    },
    /// A 200 stream: answer chunks (optionally without the finishing chunk), then `ending`.
    Broken { spec: AnswerSpec, ending: Ending },
    /// A 200 stream with exactly this body.
    Sse(String),
}

#[derive(Debug, Clone)]
pub(super) enum Ending {
    /// The body closes after the last text chunk: no `finishReason`.
    Close,
    /// A raw, pretty-printed JSON error object after the chunks (Google's mid-stream error).
    ErrorTail(Value),
    /// A `data:` line that is not JSON.
    MalformedChunk,
    /// The connection breaks (the chunked body is never terminated).
    Reset,
}

#[derive(Debug, Clone)]
pub(super) struct AnswerSpec {
    /// Text deltas; `None` = the default echo.
    pub(super) chunks: Option<Vec<String>>,
    pub(super) thoughts: Vec<String>,
    pub(super) finish: String,
    /// `false`: the candidate has `content: {"role":"model"}` and no parts.
    pub(super) parts: bool,
    /// A blocked prompt: `promptFeedback.blockReason` and no candidates.
    pub(super) block_reason: Option<String>,
    pub(super) usage: Option<[u64; 4]>,
    pub(super) sources: Vec<(String, String)>,
}

impl AnswerSpec {
    pub(super) fn default_echo() -> AnswerSpec {
        AnswerSpec {
            chunks: None,
            thoughts: Vec::new(),
            finish: "STOP".into(),
            parts: true,
            block_reason: None,
            usage: None,
            sources: Vec::new(),
        }
    }
    pub(super) fn with_chunks(chunks: Vec<String>) -> AnswerSpec {
        AnswerSpec {
            chunks: Some(chunks),
            ..AnswerSpec::default_echo()
        }
    }
}

/// Splits `text` into about three chunks on character boundaries (no chunk empty unless the
/// text is).
pub(super) fn split_text(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() < 3 {
        return vec![text.to_string()];
    }
    let n = chars.len().div_ceil(3);
    chars.chunks(n).map(|c| c.iter().collect()).collect()
}

pub(super) fn google_error(status: u16, code: &str, message: &str, details: Vec<Value>) -> Value {
    let mut e = json!({ "code": status, "message": message, "status": code });
    if !details.is_empty() {
        e["details"] = Value::Array(details);
    }
    e
}

pub(super) fn quota_error(quota_id: &str, message: &str, retry_delay: Option<&str>) -> Value {
    let mut details = vec![
        json!({
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            "violations": [{
                "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                "quotaId": quota_id,
                "quotaDimensions": {"model": "gemini-2.5-pro", "location": "global"},
                "quotaValue": "50"
            }]
        }),
        json!({
            "@type": "type.googleapis.com/google.rpc.Help",
            "links": [{"description": "Learn more about Gemini API quotas", "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]
        }),
    ];
    if let Some(d) = retry_delay {
        details.push(json!({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": d}));
    }
    google_error(429, "RESOURCE_EXHAUSTED", message, details)
}

impl Script {
    pub(super) fn new(kind: Kind) -> Script {
        Script {
            kind,
            head_delay: Duration::ZERO,
            chunk_delay: Duration::ZERO,
            model_version: None,
            separator: "\r\n\r\n".into(),
            array_wrapped: false,
            served_tier: None,
        }
    }

    // --- answers ---------------------------------------------------------------------------

    /// The default answer (the echo, or the JSON object in JSON mode); useful with delays.
    pub fn echo() -> Script {
        Script::new(Kind::Answer(AnswerSpec::default_echo()))
    }

    /// This text, streamed in about three chunks, `finishReason: STOP`.
    pub fn text(text: impl Into<String>) -> Script {
        Script::new(Kind::Answer(AnswerSpec::with_chunks(split_text(
            &text.into(),
        ))))
    }

    /// Exactly these text deltas, one chunk each.
    pub fn chunks<I, S>(chunks: I) -> Script
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Script::new(Kind::Answer(AnswerSpec::with_chunks(
            chunks.into_iter().map(Into::into).collect(),
        )))
    }

    /// A JSON-mode answer: `value` serialised as the text.
    pub fn json(value: Value) -> Script {
        Script::text(value.to_string())
    }

    /// The prompt was blocked: one chunk with `promptFeedback.blockReason` and no candidates.
    pub fn blocked(reason: &str) -> Script {
        let mut spec = AnswerSpec::with_chunks(Vec::new());
        spec.block_reason = Some(reason.into());
        Script::new(Kind::Answer(spec))
    }

    /// Thinking used the whole output budget: `finishReason: MAX_TOKENS`, no `parts`, no
    /// `candidatesTokenCount` (a real recorded shape).
    pub fn max_tokens_no_parts() -> Script {
        let mut spec = AnswerSpec::with_chunks(Vec::new());
        spec.finish = "MAX_TOKENS".into();
        spec.parts = false;
        Script::new(Kind::Answer(spec))
    }

    /// `finishReason: STOP` with only an empty text part (a hidden block, as seen in the wild).
    pub fn empty_stop() -> Script {
        Script::new(Kind::Answer(AnswerSpec::with_chunks(Vec::new())))
    }

    /// No text, this finish reason (`SAFETY`, `RECITATION`, …).
    pub fn finish_without_text(reason: &str) -> Script {
        let mut spec = AnswerSpec::with_chunks(Vec::new());
        spec.finish = reason.into();
        Script::new(Kind::Answer(spec))
    }

    // --- broken streams (200, then trouble) -------------------------------------------------

    /// These text chunks, then a `data:` line that is not JSON, then the body closes.
    pub fn malformed_after(chunks: &[&str]) -> Script {
        Script::broken(chunks, Ending::MalformedChunk)
    }

    /// A 200 whose first chunk is not JSON.
    pub fn malformed() -> Script {
        Script::malformed_after(&[])
    }

    /// These text chunks, then Google's raw mid-stream error tail (`{"error":{503 …}}`,
    /// pretty-printed, not an SSE event), then the body closes.
    pub fn error_tail_after(chunks: &[&str]) -> Script {
        let e = google_error(
            503,
            "UNAVAILABLE",
            "This model is currently experiencing high demand. Spikes in demand are usually temporary. Please try again later.",
            Vec::new(),
        );
        Script::broken(chunks, Ending::ErrorTail(e))
    }

    /// These text chunks, then the body closes without a `finishReason`.
    pub fn truncated_after(chunks: &[&str]) -> Script {
        Script::broken(chunks, Ending::Close)
    }

    /// These text chunks, then the connection breaks mid-body.
    pub fn reset_after(chunks: &[&str]) -> Script {
        Script::broken(chunks, Ending::Reset)
    }

    pub(super) fn broken(chunks: &[&str], ending: Ending) -> Script {
        let spec = AnswerSpec::with_chunks(chunks.iter().map(|c| c.to_string()).collect());
        Script::new(Kind::Broken { spec, ending })
    }

    /// A turn of function calls, as Gemini 3 streams it: a short text chunk, then one chunk with
    /// every call (`id` `call-N`, in order), the first carrying the thought signature
    /// `signature`, with `finishReason: STOP` and usage (`[prompt, output, thinking]`).
    /// Each call is `(name, args)`.
    pub fn calls(calls: &[(&str, Value)], signature: &str, usage: [u64; 3]) -> Script {
        let parts: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| {
                let mut part = json!({ "functionCall": { "name": name, "args": args, "id": format!("call-{}", i + 1) } });
                if i == 0 {
                    part["thoughtSignature"] = json!(signature);
                }
                part
            })
            .collect();
        let meta = |output: u64| {
            json!({
                "promptTokenCount": usage[0],
                "candidatesTokenCount": output,
                "thoughtsTokenCount": usage[2],
                "totalTokenCount": usage[0] + output + usage[2],
            })
        };
        let first = json!({
            "candidates": [{ "content": { "role": "model", "parts": [{ "text": "Looking." }] }, "index": 0 }],
            "usageMetadata": meta(1),
            "modelVersion": "gemini-3-flash-preview",
        });
        let second = json!({
            "candidates": [{ "content": { "role": "model", "parts": parts }, "finishReason": "STOP", "index": 0 }],
            "usageMetadata": meta(usage[1]),
            "modelVersion": "gemini-3-flash-preview",
        });
        Script::sse(format!("data: {first}\r\n\r\ndata: {second}\r\n\r\n"))
    }

    /// A 200 `text/event-stream` with exactly this body (framing tests).
    pub fn sse(body: impl Into<String>) -> Script {
        Script::new(Kind::Sse(body.into()))
    }

    // --- HTTP errors -------------------------------------------------------------------------

    /// Google's error object with this HTTP status, `status` string and message.
    pub fn error(status: u16, code: &str, message: &str) -> Script {
        Script::new(Kind::Error {
            status,
            error: google_error(status, code, message, Vec::new()),
        })
    }

    /// Google's error object with `details` (`@type` objects).
    pub fn error_with_details(
        status: u16,
        code: &str,
        message: &str,
        details: Vec<Value>,
    ) -> Script {
        Script::new(Kind::Error {
            status,
            error: google_error(status, code, message, details),
        })
    }

    /// Any status and body, sent as is (`content_type` e.g. `text/html`).
    pub fn raw(status: u16, content_type: &str, body: impl Into<String>) -> Script {
        Script::new(Kind::Raw {
            status,
            content_type: content_type.into(),
            body: body.into(),
        })
    }

    /// 429 per-minute quota with `QuotaFailure`, `Help` and (when given) `RetryInfo.retryDelay`
    /// (e.g. `"0.5s"`, `"48s"`); the message says "Please retry in …" like Google's.
    pub fn quota_exceeded(retry_delay: Option<&str>) -> Script {
        let message = match retry_delay {
            Some(d) => format!(
                "You exceeded your current quota, please check your plan and billing details. Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 5, model: gemini-2.5-pro\nPlease retry in {d}."
            ),
            None => "Resource has been exhausted (e.g. check quota).".to_string(),
        };
        Script::new(Kind::Error {
            status: 429,
            error: quota_error(
                "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                &message,
                retry_delay,
            ),
        })
    }

    /// 429 on a per-day quota (terminal despite its `RetryInfo`).
    pub fn quota_per_day() -> Script {
        Script::new(Kind::Error {
            status: 429,
            error: quota_error(
                "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                "You exceeded your current quota, please check your plan and billing details. Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 50, model: gemini-2.5-pro\nPlease retry in 48.805646254s.",
                Some("48s"),
            ),
        })
    }

    /// 429 "limit: 0": the key has no access to the model at all.
    pub fn quota_limit_zero() -> Script {
        Script::new(Kind::Error {
            status: 429,
            error: quota_error(
                "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                "You exceeded your current quota, please check your plan and billing details. Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 0, model: gemini-3.1-pro-preview\nPlease retry in 20s.",
                Some("20s"),
            ),
        })
    }

    /// 503 "high demand" (2026 wording).
    pub fn overloaded() -> Script {
        Script::error(
            503,
            "UNAVAILABLE",
            "This model is currently experiencing high demand. Spikes in demand are usually temporary. Please try again later.",
        )
    }

    /// 500 INTERNAL.
    pub fn internal() -> Script {
        Script::error(
            500,
            "INTERNAL",
            "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting",
        )
    }

    /// 400 for a wrong key, with `ErrorInfo.reason = API_KEY_INVALID`.
    pub fn bad_key() -> Script {
        Script::new(Kind::Error {
            status: 400,
            error: bad_key_error(),
        })
    }

    /// 403 for a missing key.
    pub fn missing_key() -> Script {
        Script::new(Kind::Error {
            status: 403,
            error: missing_key_error(),
        })
    }

    /// 403 for a key without access.
    pub fn permission_denied() -> Script {
        Script::error(
            403,
            "PERMISSION_DENIED",
            "Your API key was reported as leaked. Please use another API key.",
        )
    }

    /// 400: the input is over the model's limit.
    pub fn token_limit(input: u64, max: u64) -> Script {
        Script::error(
            400,
            "INVALID_ARGUMENT",
            &format!(
                "The input token count ({input}) exceeds the maximum number of tokens allowed ({max})."
            ),
        )
    }

    /// 400: both `thinkingBudget` and `thinkingLevel` were sent (the fake also answers this
    /// unprompted to such requests).
    pub fn both_thinking_fields() -> Script {
        Script::new(Kind::Error {
            status: 400,
            error: both_thinking_error(),
        })
    }

    /// 404 for an unknown model (the message names the model of the request).
    pub fn unknown_model() -> Script {
        Script::new(Kind::Error {
            status: 404,
            error: Value::Null, // filled in with the request's model
        })
    }

    // --- modifiers ---------------------------------------------------------------------------

    /// Wait this long before sending the status line and headers.
    pub fn delay_headers(mut self, d: Duration) -> Script {
        self.head_delay = d;
        self
    }

    /// Wait this long before each chunk after the first.
    pub fn chunk_delay(mut self, d: Duration) -> Script {
        self.chunk_delay = d;
        self
    }

    /// Report this `modelVersion` (default: the model of the request).
    pub fn model_version(mut self, v: &str) -> Script {
        self.model_version = Some(v.into());
        self
    }

    /// Separate SSE events with this (default `"\r\n\r\n"`; also `"\n\n"`, `"\r\r"`).
    pub fn separator(mut self, s: &str) -> Script {
        self.separator = s.into();
        self
    }

    /// Say that `tier` served the call (`standard`, `flex`, `priority`), whatever it asked for:
    /// a priority call over its limit served at standard. The Gemini API says it in the
    /// `x-gemini-service-tier` header, Vertex AI in `usageMetadata.trafficType`.
    pub fn served_tier(mut self, tier: &str) -> Script {
        self.served_tier = Some(tier.into());
        self
    }

    /// Send an error object wrapped in a one-element array (`[{"error":…}]`).
    pub fn array_wrapped(mut self) -> Script {
        self.array_wrapped = true;
        self
    }

    /// Thought-summary parts (`"thought": true`) streamed before the answer.
    pub fn thoughts<I, S>(mut self, thoughts: I) -> Script
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        if let Kind::Answer(spec) | Kind::Broken { spec, .. } = &mut self.kind {
            spec.thoughts = thoughts.into_iter().map(Into::into).collect();
        }
        self
    }

    /// The finish reason of an answer with text (e.g. `MAX_TOKENS` for a cut answer).
    pub fn finish(mut self, reason: &str) -> Script {
        if let Kind::Answer(spec) = &mut self.kind {
            spec.finish = reason.into();
        }
        self
    }

    /// The final usage figures: prompt, output (candidates), thinking, cached.
    pub fn usage(mut self, prompt: u64, output: u64, thinking: u64, cached: u64) -> Script {
        if let Kind::Answer(spec) | Kind::Broken { spec, .. } = &mut self.kind {
            spec.usage = Some([prompt, output, thinking, cached]);
        }
        self
    }

    /// Google Search grounding: `(uri, title)` pairs in `groundingMetadata.groundingChunks`.
    pub fn sources(mut self, sources: &[(&str, &str)]) -> Script {
        if let Kind::Answer(spec) = &mut self.kind {
            spec.sources = sources
                .iter()
                .map(|(u, t)| (u.to_string(), t.to_string()))
                .collect();
        }
        self
    }
}

pub(super) fn bad_key_error() -> Value {
    google_error(
        400,
        "INVALID_ARGUMENT",
        "API key not valid. Please pass a valid API key.",
        vec![
            json!({"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                   "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}}),
            json!({"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "en-US",
                   "message": "API key not valid. Please pass a valid API key."}),
        ],
    )
}

pub(super) fn missing_key_error() -> Value {
    google_error(
        403,
        "PERMISSION_DENIED",
        "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
        Vec::new(),
    )
}

/// Gemini 2.x's answer to function declarations together with JSON mode (Gemini 3 takes both).
pub(super) fn functions_with_json_error() -> Value {
    google_error(
        400,
        "INVALID_ARGUMENT",
        "Function calling with a response mime type: 'application/json' is unsupported",
        Vec::new(),
    )
}

pub(super) fn both_thinking_error() -> Value {
    google_error(
        400,
        "INVALID_ARGUMENT",
        "Unable to submit request because thinking_budget and thinking_level are both set. Remove one of them and try again.",
        Vec::new(),
    )
}

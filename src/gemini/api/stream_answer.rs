//! What the chunks of one streamed answer add up to, and how the stream's end is judged.

use super::retry::{Failure, Retryable};
use super::wire::{FinishReason, GenerateContentResponse, UsageMetadata};
use crate::gemini::vocabulary::{
    FunctionCall, GeminiError, GenerateResponse, Part, ServiceTier, Source,
};

/// What the chunks of one stream add up to.
#[derive(Debug, Default)]
pub(super) struct Answer {
    pub(super) text: String,
    pub(super) usage: Option<UsageMetadata>,
    pub(super) model_version: Option<String>,
    pub(super) finish: Option<FinishReason>,
    pub(super) block_reason: Option<String>,
    pub(super) sources: Vec<Source>,
    pub(super) calls: Vec<FunctionCall>,
    /// Every part worth replaying, as received.
    pub(super) turn: Vec<Part>,
    /// The service tier the call was asked to run at, as sent.
    pub(super) asked: Option<ServiceTier>,
    /// The service tier the API reported serving the call with: the Gemini API's answer
    /// header, or Vertex AI's `usageMetadata.trafficType`.
    pub(super) served: Option<ServiceTier>,
}

impl Answer {
    pub(super) fn take(&mut self, chunk: GenerateContentResponse) {
        if let Some(tier) = chunk
            .usage_metadata
            .as_ref()
            .and_then(|u| u.traffic_type.as_deref())
            .and_then(traffic_tier)
        {
            self.served = Some(tier);
        }
        if let Some(u) = chunk.usage_metadata {
            self.usage = Some(u);
        }
        if let Some(v) = chunk.model_version.filter(|v| !v.is_empty()) {
            self.model_version = Some(v);
        }
        if let Some(reason) = chunk.prompt_feedback.and_then(|f| f.block_reason) {
            self.block_reason = Some(reason);
        }
        // We ask for one candidate; any others are ignored.
        let Some(candidate) = chunk.candidates.and_then(|c| c.into_iter().next()) else {
            return;
        };
        for part in candidate
            .content
            .and_then(|c| c.parts)
            .into_iter()
            .flatten()
        {
            if part.is_thought() {
                continue;
            }
            if let Some(call) = part.function_call() {
                self.calls.push(call);
            }
            if part.worth_replaying()
                && let Ok(raw) = serde_json::to_value(&part)
            {
                self.turn.push(Part::Recorded(raw));
            }
            if let Some(t) = part.text {
                self.text.push_str(&t);
            }
        }
        if let Some(g) = candidate.grounding_metadata {
            for s in g.sources() {
                if !self.sources.iter().any(|o| o.uri == s.uri) {
                    self.sources.push(s);
                }
            }
        }
        if let Some(f) = candidate.finish_reason {
            self.finish = Some(f);
        }
    }

    pub(super) fn output_tokens(&self) -> u64 {
        self.usage
            .as_ref()
            .and_then(|u| u.candidates_token_count)
            .unwrap_or(self.text.len() as u64 / 4)
    }

    /// The stream failed: worth retrying while no answer text has arrived; after that, the
    /// partial answer is not passed off as a whole one.
    pub(super) fn broken(&self, error: GeminiError) -> Failure {
        if self.text.is_empty() {
            // Function calls received so far were not run: asking again loses nothing.
            return Failure::transient(error);
        }
        let error = match error {
            e @ GeminiError::Stalled { .. } => e,
            other => GeminiError::Malformed {
                message: format!(
                    "the answer broke off after {} characters: {}",
                    self.text.chars().count(),
                    strip_hint(&other)
                ),
            },
        };
        Failure::fatal(error)
    }

    pub(super) fn finish(self) -> Result<GenerateResponse, Failure> {
        if self.text.is_empty()
            && let Some(reason) = self.block_reason
        {
            return Err(Failure::fatal(GeminiError::Blocked { reason }));
        }
        let Some(finish) = self.finish.clone() else {
            return Err(self.broken(GeminiError::Malformed {
                message: "the stream ended before Gemini finished the answer (no finishReason)"
                    .into(),
            }));
        };
        if self.text.is_empty() && self.calls.is_empty() {
            return Err(match finish {
                FinishReason::MaxTokens => Failure::fatal(GeminiError::MaxTokens),
                FinishReason::Stop => Failure {
                    error: GeminiError::Empty {
                        finish_reason: "STOP".into(),
                    },
                    retry: Retryable::Once,
                },
                other => Failure::fatal(GeminiError::Withheld {
                    finish_reason: other.as_str().to_string(),
                    hint: other.hint().to_string(),
                }),
            });
        }
        Ok(GenerateResponse {
            text: self.text,
            model_version: self.model_version,
            service_tier: self.served,
            billed_tier: self.served.or(self.asked).unwrap_or_default(),
            usage: self.usage.map(UsageMetadata::to_usage).unwrap_or_default(),
            finish_reason: Some(finish.as_str().to_string()),
            sources: self.sources,
            fallback: None,
            calls: self.calls,
            turn: self.turn,
            request_sha256: None,
            cache_lost: false,
            interaction_id: None,
        })
    }
}

/// The part of an error's message without the advice, for wrapping in another error.
pub(super) fn strip_hint(e: &GeminiError) -> String {
    match e {
        GeminiError::Api {
            status,
            code,
            message,
            ..
        } => format!("{status} {code}: {message}"),
        GeminiError::Transport { message } | GeminiError::Malformed { message } => message.clone(),
        other => other.to_string(),
    }
}

/// The tier Vertex AI reports serving a call with, from `usageMetadata.trafficType`; `None` for
/// Provisioned Throughput (paid by its commitment, not per token: such a call is priced at the
/// tier asked for) and for values we do not know.
fn traffic_tier(traffic_type: &str) -> Option<ServiceTier> {
    match traffic_type {
        "ON_DEMAND" => Some(ServiceTier::Standard),
        "ON_DEMAND_FLEX" => Some(ServiceTier::Flex),
        "ON_DEMAND_PRIORITY" => Some(ServiceTier::Priority),
        _ => None,
    }
}

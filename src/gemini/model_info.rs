//! One model as the catalogue describes it ([`ModelInfo`]: its limits, its thinking style, its
//! announced shutdown) and how it is told how hard to think ([`ThinkingMode`] to
//! [`ThinkingConfig`]). Below both the request vocabulary, which carries a model, and the
//! catalogue, which lists them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How hard the model should think, from the tool's `thinking_mode` parameter.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingMode {
    Minimal,
    Low,
    Medium,
    High,
    Max,
}

impl ThinkingMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingMode::Minimal => "minimal",
            ThinkingMode::Low => "low",
            ThinkingMode::Medium => "medium",
            ThinkingMode::High => "high",
            ThinkingMode::Max => "max",
        }
    }
}

/// The `thinkingLevel` values of Gemini 3 and later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    Minimal,
    Low,
    Medium,
    High,
}

/// How a model is told how hard to think.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "style", rename_all = "lowercase")]
pub enum ThinkingStyle {
    /// Gemini 2.5: `thinkingBudget` in tokens, within `min..=max`.
    Budget { min: u32, max: u32 },
    /// Gemini 3 and later: `thinkingLevel`, one of `accepted` (ascending).
    Level { accepted: Vec<Level> },
    /// No thinking configuration is sent.
    None,
}

/// What is sent as `generationConfig.thinkingConfig`: one of the two, never both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThinkingConfig {
    Budget(u32),
    Level(Level),
    None,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelInfo {
    /// The bare id sent in the URL, e.g. `gemini-3.1-pro-preview`.
    pub id: String,
    pub display_name: String,
    /// Input tokens the model accepts.
    pub input_limit: u64,
    /// Output tokens per answer.
    pub output_limit: u64,
    pub thinking: ThinkingStyle,
    pub images: bool,
    /// No longer listed by the models endpoint: calls are refused locally, naming
    /// `replacement`.
    pub retired: bool,
    /// The model Google names as its successor, for the notice and the fallback on NOT_FOUND.
    pub replacement: Option<String>,
    /// Announced shutdown date (`YYYY-MM-DD`): said in the reply near and past it, never
    /// enforced.
    pub shutdown: Option<String>,
    /// Known to this build (false for models first seen in the models endpoint).
    pub builtin: bool,
}

impl ModelInfo {
    /// True when the local token count is calibrated against this model's tokenizer (Gemma 3's,
    /// used by Gemini 2.x and the 3.0 previews); other models get a wider margin.
    pub fn tokenizer_measured(&self) -> bool {
        [
            "gemini-2.",
            "gemini-3-pro-preview",
            "gemini-3-flash-preview",
        ]
        .iter()
        .any(|p| self.id.starts_with(p))
    }

    /// Whether the model takes function declarations together with JSON mode
    /// (`responseMimeType: application/json`): Gemini 3 and later do; Gemini 2.x answers 400
    /// ("Function calling with a response mime type: 'application/json' is unsupported").
    pub fn calls_functions_in_json_mode(&self) -> bool {
        !["gemini-1.", "gemini-2."]
            .iter()
            .any(|p| self.id.starts_with(p))
    }

    /// Whether `today` (days since 1970-01-01) is on or past the announced shutdown date.
    pub fn past_shutdown(&self, today: i64) -> bool {
        self.shutdown
            .as_deref()
            .and_then(crate::clock::days_from_iso)
            .is_some_and(|day| today >= day)
    }

    /// What the reply says of the model's announced shutdown on `today` (days since 1970-01-01):
    /// from [`NOTICE_DAYS`] before the date on, that it is scheduled to go or past its date,
    /// and what replaces it; nothing before that or without a date.
    pub fn schedule_notice(&self, today: i64) -> Option<String> {
        let date = self.shutdown.as_deref()?;
        let day = crate::clock::days_from_iso(date)?;
        let instead = match &self.replacement {
            Some(r) => format!("; move to {r}"),
            None => String::new(),
        };
        if today >= day {
            Some(format!(
                "{} is past its announced shutdown date ({date}) and may stop answering any day{instead}.",
                self.id
            ))
        } else if today + NOTICE_DAYS >= day {
            Some(format!(
                "{} is scheduled to shut down on {date}{instead}.",
                self.id
            ))
        } else {
            None
        }
    }

    /// True for models that take `thinkingLevel` and no sampling parameters by default (3.x, 4).
    pub fn is_level_family(&self) -> bool {
        matches!(self.thinking, ThinkingStyle::Level { .. })
    }

    /// The thinking configuration for a `thinking_mode` (2.5 models take a budget, 3.x a level;
    /// never both): budgets 128/2048/8192/16384/
    /// 32768 clamped to the model's range; levels clamped to what the model accepts, `max` → high.
    pub fn thinking_config(&self, mode: ThinkingMode) -> ThinkingConfig {
        match &self.thinking {
            ThinkingStyle::Budget { min, max } => {
                let want = match mode {
                    ThinkingMode::Minimal => 128,
                    ThinkingMode::Low => 2048,
                    ThinkingMode::Medium => 8192,
                    ThinkingMode::High => 16384,
                    ThinkingMode::Max => 32768,
                };
                ThinkingConfig::Budget(want.clamp(*min, *max))
            }
            ThinkingStyle::Level { accepted } => {
                let want = match mode {
                    ThinkingMode::Minimal => Level::Minimal,
                    ThinkingMode::Low => Level::Low,
                    ThinkingMode::Medium => Level::Medium,
                    ThinkingMode::High | ThinkingMode::Max => Level::High,
                };
                // The nearest accepted level at or above the wish, else the highest accepted.
                let level = accepted
                    .iter()
                    .copied()
                    .find(|l| *l >= want)
                    .or_else(|| accepted.last().copied());
                level.map_or(ThinkingConfig::None, ThinkingConfig::Level)
            }
            ThinkingStyle::None => ThinkingConfig::None,
        }
    }
}

/// Infers the thinking style of a model from its id, for models not in the built-in table.
pub fn style_for_id(id: &str) -> ThinkingStyle {
    use Level::*;
    if id.starts_with("gemini-2.5-pro") {
        ThinkingStyle::Budget {
            min: 128,
            max: 32768,
        }
    } else if id.starts_with("gemini-2.5-flash-lite") {
        ThinkingStyle::Budget {
            min: 512,
            max: 24576,
        }
    } else if id.starts_with("gemini-2.5-flash") {
        ThinkingStyle::Budget { min: 0, max: 24576 }
    } else if id.starts_with("gemini-2.") || id.starts_with("gemini-1.") {
        ThinkingStyle::None
    } else {
        // Gemini 3 and later: low/medium/high is accepted by every model of the family.
        ThinkingStyle::Level {
            accepted: vec![Low, Medium, High],
        }
    }
}

/// How many days before its announced shutdown a model's replies start saying so.
pub const NOTICE_DAYS: i64 = 30;

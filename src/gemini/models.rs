//! The model catalogue, in one place: known models with their limits and thinking style, the
//! aliases and the default (what one model is, and the thinking configuration each family takes,
//! is `model_info`).
//!
//! The built-in table is a starting point; on the API backend it is refreshed from
//! `GET /v1beta/models`, so a model released after this build works by name, and one the endpoint
//! no longer lists is refused with its replacement named. A shutdown date compiled into the table
//! never refuses a call: Google moves such dates, and the API's own answer (404 NOT_FOUND) is the
//! truth. Past (or near) the date the reply says so, and a 404 falls back to the replacement.

use std::sync::RwLock;

pub use super::model_info::{
    Level, ModelInfo, NOTICE_DAYS, ThinkingConfig, ThinkingStyle, style_for_id,
};
use super::prices::PriceList;
use super::vocabulary::GeminiError;

const M: u64 = 1_048_576;
const OUT: u64 = 65_536;

fn builtin_models() -> Vec<ModelInfo> {
    use Level::*;
    let all = || vec![Minimal, Low, Medium, High];
    let lmh = || vec![Low, Medium, High];
    let m = |id: &str, name: &str, thinking: ThinkingStyle| ModelInfo {
        id: id.into(),
        display_name: name.into(),
        input_limit: M,
        output_limit: OUT,
        thinking,
        images: true,
        retired: false,
        replacement: None,
        shutdown: None,
        builtin: true,
    };
    let ending = |mut info: ModelInfo, date: &str, replacement: &str| {
        info.shutdown = Some(date.into());
        info.replacement = Some(replacement.into());
        info
    };
    let shut_down = ending(
        m(
            "gemini-3-pro-preview",
            "Gemini 3 Pro Preview",
            ThinkingStyle::Level {
                accepted: vec![Low, High],
            },
        ),
        "2026-03-09",
        "gemini-3.1-pro-preview",
    );
    vec![
        m(
            "gemini-3.1-pro-preview",
            "Gemini 3.1 Pro Preview",
            ThinkingStyle::Level { accepted: lmh() },
        ),
        // Input and output share one 1,048,576-token window.
        ModelInfo {
            input_limit: M - OUT,
            ..m(
                "gemini-4-argon",
                "Gemini 4 Argon",
                ThinkingStyle::Level { accepted: lmh() },
            )
        },
        m(
            "gemini-3.8-flash",
            "Gemini 3.8 Flash",
            ThinkingStyle::Level { accepted: lmh() },
        ),
        m(
            "gemini-3.7-flash",
            "Gemini 3.7 Flash",
            ThinkingStyle::Level { accepted: lmh() },
        ),
        // Thinking configuration not documented: none is sent.
        m("gemini-3.6-flash", "Gemini 3.6 Flash", ThinkingStyle::None),
        m(
            "gemini-3.5-flash",
            "Gemini 3.5 Flash",
            ThinkingStyle::Level { accepted: all() },
        ),
        m(
            "gemini-3.5-flash-lite",
            "Gemini 3.5 Flash-Lite",
            ThinkingStyle::Level { accepted: all() },
        ),
        m(
            "gemini-3.1-flash-lite",
            "Gemini 3.1 Flash-Lite",
            ThinkingStyle::Level { accepted: all() },
        ),
        m(
            "gemini-3-flash-preview",
            "Gemini 3 Flash Preview",
            ThinkingStyle::Level { accepted: all() },
        ),
        ending(
            m(
                "gemini-2.5-pro",
                "Gemini 2.5 Pro",
                ThinkingStyle::Budget {
                    min: 128,
                    max: 32768,
                },
            ),
            "2026-12-01",
            "gemini-3.8-flash",
        ),
        ending(
            m(
                "gemini-2.5-flash",
                "Gemini 2.5 Flash",
                ThinkingStyle::Budget { min: 0, max: 24576 },
            ),
            "2026-12-01",
            "gemini-3.5-flash-lite",
        ),
        m(
            "gemini-2.5-flash-lite",
            "Gemini 2.5 Flash-Lite",
            ThinkingStyle::Budget {
                min: 512,
                max: 24576,
            },
        ),
        shut_down,
    ]
}

/// Aliases users type, and the model each stands for.
pub const ALIASES: &[(&str, &str)] = &[
    ("pro", "gemini-3.1-pro-preview"),
    ("flash", "gemini-3.8-flash"),
    ("flash-lite", "gemini-3.5-flash-lite"),
];

/// The models this server can name and what they cost, shared by every call.
pub struct Catalogue {
    models: RwLock<Vec<ModelInfo>>,
    default: String,
    prices: PriceList,
}

impl Catalogue {
    /// The built-in table with `default` (a name or alias) as the default model, its costs
    /// estimated at `prices`.
    pub fn builtin(default: &str, prices: PriceList) -> Catalogue {
        Catalogue {
            models: RwLock::new(builtin_models()),
            default: default.to_string(),
            prices,
        }
    }

    /// The prices estimates are made at (and the clock they are read at).
    pub fn prices(&self) -> &PriceList {
        &self.prices
    }

    /// The default model's name or alias as configured.
    pub fn default_name(&self) -> &str {
        &self.default
    }

    /// Every known model, in table order.
    pub fn list(&self) -> Vec<ModelInfo> {
        self.models
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Resolves a name or alias (`None` = the default). Accepts `models/` prefixes and any case.
    /// Unknown names that look like Gemini models are allowed through with inferred limits (the
    /// API is the judge); anything else is refused with the known names.
    pub fn resolve(&self, name: &str) -> Result<ModelInfo, GeminiError> {
        let raw = name.trim();
        let lower = raw.trim_start_matches("models/").to_ascii_lowercase();
        let id = ALIASES
            .iter()
            .find(|(a, _)| *a == lower)
            .map(|(_, id)| id.to_string())
            .unwrap_or(lower);
        let models = self.models.read().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = models.iter().find(|m| m.id == id) {
            if m.retired {
                return Err(GeminiError::UnknownModel {
                    name: raw.to_string(),
                    hint: format!(
                        "It has been shut down (the models endpoint no longer lists it); use {} instead (or an alias: pro, flash, flash-lite).",
                        m.replacement.as_deref().unwrap_or("another model")
                    ),
                });
            }
            return Ok(m.clone());
        }
        let plausible = id.starts_with("gemini-")
            && id.len() <= 80
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
        if plausible {
            return Ok(ModelInfo {
                id: id.clone(),
                display_name: id.clone(),
                input_limit: M,
                output_limit: OUT,
                thinking: style_for_id(&id),
                images: true,
                retired: false,
                replacement: None,
                shutdown: None,
                builtin: false,
            });
        }
        let known: Vec<&str> = ALIASES
            .iter()
            .map(|(a, _)| *a)
            .chain(models.iter().filter(|m| !m.retired).map(|m| m.id.as_str()))
            .collect();
        Err(GeminiError::UnknownModel {
            name: raw.to_string(),
            hint: format!(
                "Use one of: {} (the `listmodels` tool shows them all).",
                known.join(", ")
            ),
        })
    }

    /// The default model, resolved.
    pub fn default_model(&self) -> Result<ModelInfo, GeminiError> {
        self.resolve(&self.default)
    }

    /// Replaces the table with what the models endpoint reports, keeping our knowledge of thinking
    /// styles, and marking built-in models the endpoint no longer lists as retired (with the
    /// replacement from the alias of their family when known).
    pub fn refresh(&self, listed: Vec<ModelInfo>) {
        if listed.is_empty() {
            return;
        }
        let mut models = self.models.write().unwrap_or_else(|e| e.into_inner());
        let mut merged: Vec<ModelInfo> = Vec::new();
        for mut l in listed {
            if let Some(known) = models.iter().find(|m| m.id == l.id) {
                l.thinking = known.thinking.clone();
                l.images = known.images;
                l.builtin = true;
                // What we know beyond the endpoint: shutdown dates, and windows shared with output.
                l.shutdown = known.shutdown.clone();
                l.replacement = known.replacement.clone();
                l.retired |= known.retired;
                l.input_limit = l.input_limit.min(known.input_limit);
                if l.display_name.is_empty() {
                    l.display_name = known.display_name.clone();
                }
            }
            merged.push(l);
        }
        for known in models.iter() {
            if !merged.iter().any(|m| m.id == known.id) {
                let mut gone = known.clone();
                gone.retired = true;
                if gone.replacement.is_none() {
                    let alias = if gone.id.contains("flash-lite") {
                        "flash-lite"
                    } else if gone.id.contains("flash") {
                        "flash"
                    } else {
                        "pro"
                    };
                    gone.replacement = ALIASES
                        .iter()
                        .find(|(a, _)| *a == alias)
                        .map(|(_, id)| id.to_string());
                }
                merged.push(gone);
            }
        }
        *models = merged;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, days_from_iso};
    use crate::gemini::model_info::ThinkingMode;

    fn cat() -> Catalogue {
        Catalogue::builtin("pro", PriceList::at(Clock::on("2026-11-27").unwrap()))
    }

    #[test]
    fn aliases_resolve() {
        let c = cat();
        assert_eq!(c.resolve("pro").unwrap().id, "gemini-3.1-pro-preview");
        assert_eq!(c.resolve("FLASH").unwrap().id, "gemini-3.8-flash");
        assert_eq!(c.resolve("flash-lite").unwrap().id, "gemini-3.5-flash-lite");
        assert_eq!(
            c.resolve("models/gemini-2.5-pro").unwrap().id,
            "gemini-2.5-pro"
        );
        assert_eq!(c.default_model().unwrap().id, "gemini-3.1-pro-preview");
    }

    #[test]
    fn unknown_models_are_refused_with_a_way_out() {
        let c = cat();
        let e = c.resolve("gpt-5").unwrap_err().to_string();
        assert!(e.contains("pro, flash, flash-lite"), "{e}");
        // A new Gemini model works by name.
        let m = c.resolve("gemini-5-flash").unwrap();
        assert!(m.is_level_family());
    }

    #[test]
    fn thinking_budgets_clamp_to_the_model_range() {
        let c = cat();
        let cases = [
            (
                "gemini-2.5-pro",
                ThinkingMode::Minimal,
                ThinkingConfig::Budget(128),
            ),
            (
                "gemini-2.5-pro",
                ThinkingMode::Max,
                ThinkingConfig::Budget(32768),
            ),
            (
                "gemini-2.5-flash",
                ThinkingMode::Max,
                ThinkingConfig::Budget(24576),
            ),
            (
                "gemini-2.5-flash",
                ThinkingMode::Medium,
                ThinkingConfig::Budget(8192),
            ),
            (
                "gemini-2.5-flash-lite",
                ThinkingMode::Minimal,
                ThinkingConfig::Budget(512),
            ),
            (
                "gemini-2.5-flash-lite",
                ThinkingMode::High,
                ThinkingConfig::Budget(16384),
            ),
            (
                "gemini-3.1-pro-preview",
                ThinkingMode::Minimal,
                ThinkingConfig::Level(Level::Low),
            ),
            (
                "gemini-3.1-pro-preview",
                ThinkingMode::Max,
                ThinkingConfig::Level(Level::High),
            ),
            (
                "gemini-3.5-flash",
                ThinkingMode::Minimal,
                ThinkingConfig::Level(Level::Minimal),
            ),
            (
                "gemini-3.5-flash",
                ThinkingMode::Medium,
                ThinkingConfig::Level(Level::Medium),
            ),
            (
                "gemini-4-argon",
                ThinkingMode::Low,
                ThinkingConfig::Level(Level::Low),
            ),
        ];
        for (model, mode, want) in cases {
            assert_eq!(
                c.resolve(model).unwrap().thinking_config(mode),
                want,
                "{model} {mode:?}"
            );
        }
    }

    #[test]
    fn a_shutdown_date_never_refuses_a_call_and_is_said_near_and_past_it() {
        let c = cat();
        let day = |d: &str| days_from_iso(d).unwrap();
        for model in ["gemini-2.5-pro", "gemini-2.5-flash", "gemini-3-pro-preview"] {
            assert_eq!(c.resolve(model).unwrap().id, model);
        }
        let pro = c.resolve("gemini-2.5-pro").unwrap();
        // More than 30 days before 2026-12-01: nothing to say.
        assert_eq!(pro.schedule_notice(day("2026-10-31")), None);
        let soon = pro.schedule_notice(day("2026-11-01")).unwrap();
        assert!(
            soon.contains("scheduled to shut down on 2026-12-01")
                && soon.contains("move to gemini-3.8-flash"),
            "{soon}"
        );
        for past in ["2026-12-01", "2027-06-30"] {
            let n = pro.schedule_notice(day(past)).unwrap();
            assert!(
                n.contains("past its announced shutdown date (2026-12-01)")
                    && n.contains("gemini-3.8-flash"),
                "{past}: {n}"
            );
        }
        let flash = c.resolve("gemini-2.5-flash").unwrap();
        let n = flash.schedule_notice(day("2026-12-02")).unwrap();
        assert!(n.contains("gemini-3.5-flash-lite"), "{n}");
        // No date, no notice.
        let lite = c.resolve("gemini-2.5-flash-lite").unwrap();
        assert_eq!(lite.schedule_notice(day("2030-01-01")), None);
    }

    #[test]
    fn argon_shares_its_window_between_input_and_output() {
        let m = cat().resolve("gemini-4-argon").unwrap();
        assert_eq!(m.input_limit + m.output_limit, 1_048_576);
    }

    #[test]
    fn refresh_retires_models_the_endpoint_dropped() {
        let c = cat();
        let keep = c.resolve("gemini-3.8-flash").unwrap();
        let mut new = keep.clone();
        new.id = "gemini-3.9-flash".into();
        new.builtin = false;
        c.refresh(vec![keep, new]);
        assert!(c.resolve("gemini-3.9-flash").is_ok());
        let e = c.resolve("gemini-2.5-pro").unwrap_err().to_string();
        assert!(
            e.contains("no longer lists") && e.contains("gemini-3.8-flash"),
            "{e}"
        );
    }
}

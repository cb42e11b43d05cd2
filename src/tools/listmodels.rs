//! `listmodels`: the models the configured backend can use, their limits and aliases, the default,
//! and which backend and thread store are active.

use schemars::JsonSchema;
use serde::Serialize;

use crate::gemini::Gemini;
use crate::gemini::models::{ALIASES, ThinkingStyle};
use crate::gemini::prices::PriceSource;

/// One model.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ModelEntry {
    /// Model id to pass as `model`.
    pub id: String,
    /// Aliases that name it.
    pub aliases: Vec<String>,
    /// Input token limit.
    pub input_limit: u64,
    /// Output token limit.
    pub output_limit: u64,
    /// How thinking is configured: budget or level.
    pub thinking: String,
    /// Accepts images.
    pub images: bool,
    /// The default model.
    pub default: bool,
    /// Paid-tier prices, USD per million tokens; absent where none is known (under a USD cap
    /// such a model is refused until GEMINI_MCP_PRICES gives it one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price: Option<PriceEntry>,
}

/// Prices of a model, USD per million tokens.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PriceEntry {
    pub input: f64,
    pub output: f64,
    /// For prompts over 200,000 tokens.
    pub input_long: f64,
    pub output_long: f64,
    /// google (its pricing page), third_party (no public price yet: what resellers bill) or
    /// configured (GEMINI_MCP_PRICES).
    pub source: PriceSource,
    /// When the built-in prices were checked.
    pub checked: String,
}

/// The `listmodels` reply.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ModelsReport {
    /// api or cli.
    pub backend: String,
    /// redis, embedded or memory.
    pub store: String,
    /// The default model's id.
    pub default_model: String,
    /// Models that can be used.
    pub models: Vec<ModelEntry>,
}

pub fn report(gemini: &Gemini, store: &str) -> ModelsReport {
    let cat = gemini.catalogue();
    let default = cat
        .default_model()
        .map(|m| m.id)
        .unwrap_or_else(|_| cat.default_name().to_string());
    let today = cat.prices().clock().today();
    let models = cat
        .list()
        .into_iter()
        // Not offered: models the endpoint dropped, and those past their announced shutdown
        // (still sent when a call names one: the API decides).
        .filter(|m| !m.retired && !m.past_shutdown(today))
        .map(|m| ModelEntry {
            aliases: ALIASES
                .iter()
                .filter(|(_, id)| *id == m.id)
                .map(|(a, _)| a.to_string())
                .collect(),
            thinking: match &m.thinking {
                ThinkingStyle::Budget { min, max } => format!("budget {min}-{max}"),
                ThinkingStyle::Level { accepted } => {
                    let l: Vec<String> = accepted
                        .iter()
                        .map(|l| format!("{l:?}").to_lowercase())
                        .collect();
                    format!("level {}", l.join("/"))
                }
                ThinkingStyle::None => "none".into(),
            },
            default: m.id == default,
            price: cat.prices().price(&m.id).map(|(p, source)| PriceEntry {
                input: p.input,
                output: p.output,
                input_long: p.input_long,
                output_long: p.output_long,
                source,
                checked: crate::gemini::prices::CHECKED.into(),
            }),
            id: m.id,
            input_limit: m.input_limit,
            output_limit: m.output_limit,
            images: m.images,
        })
        .collect();
    ModelsReport {
        backend: gemini.backend_name().to_string(),
        store: store.to_string(),
        default_model: default,
        models,
    }
}

pub fn render(r: &ModelsReport) -> String {
    let mut out = format!(
        "Backend: {} · thread store: {} · default model: {}\n\n",
        r.backend, r.store, r.default_model
    );
    out.push_str(
        "| model | aliases | input | output | thinking | $/1M in · out |\n|---|---|---|---|---|---|\n",
    );
    for m in &r.models {
        let price = m
            .price
            .as_ref()
            .map_or("—".to_string(), |p| match p.source {
                PriceSource::Google => format!("{} · {}", p.input, p.output),
                PriceSource::ThirdParty => format!("{} · {} (third-party)", p.input, p.output),
                PriceSource::Configured => format!("{} · {} (configured)", p.input, p.output),
            });
        out.push_str(&format!(
            "| {}{} | {} | {} | {} | {} | {} |\n",
            m.id,
            if m.default { " (default)" } else { "" },
            m.aliases.join(", "),
            m.input_limit,
            m.output_limit,
            m.thinking,
            price
        ));
    }
    out.push_str(&format!(
        "\nPrices: paid tier, prompts up to 200,000 tokens, checked {}.\n",
        crate::gemini::prices::CHECKED
    ));
    if r.models
        .iter()
        .any(|m| matches!(&m.price, Some(p) if p.source == PriceSource::ThirdParty))
    {
        out.push_str(
            "Third-party: Google publishes no price yet; the figure resellers bill is used until it does.\n",
        );
    }
    let unpriced: Vec<&str> = r
        .models
        .iter()
        .filter(|m| m.price.is_none())
        .map(|m| m.id.as_str())
        .collect();
    if !unpriced.is_empty() {
        out.push_str(&format!(
            "No known price: {} (give one with {}; under a USD cap these models are refused).\n",
            unpriced.join(", "),
            crate::gemini::prices::PRICES_SETTING
        ));
    }
    out
}

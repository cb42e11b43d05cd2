//! `listmodels`: the models the configured backend can use, their limits and aliases, the default,
//! and which backend and thread store are active.

use schemars::JsonSchema;
use serde::Serialize;

use crate::gemini::Gemini;
use crate::gemini::models::{ALIASES, ThinkingStyle};

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
    /// Paid-tier prices, USD per million tokens (none where unknown).
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
    /// When the prices were checked.
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
    let models = cat
        .list()
        .into_iter()
        .filter(|m| !m.retired)
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
            price: crate::gemini::prices::price(&m.id, crate::gemini::prices::today()).map(|p| {
                PriceEntry {
                    input: p.input,
                    output: p.output,
                    input_long: p.input_long,
                    output_long: p.output_long,
                    checked: crate::gemini::prices::CHECKED.into(),
                }
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
            .map_or("—".to_string(), |p| format!("{} · {}", p.input, p.output));
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
    out
}

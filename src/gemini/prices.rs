//! What a call costs: the paid-tier prices of the built-in models (USD per million tokens, as
//! Google lists them, checked on [`CHECKED`]) and the estimate of a call from its usage. Prices
//! move: a model without a price here gets no estimate, never a guess.

use serde::Serialize;

use super::vocabulary::Usage;

/// When the prices below were last checked against ai.google.dev/gemini-api/docs/pricing.
pub const CHECKED: &str = "2026-11-23";

/// Prompts longer than this many tokens are billed at the long-context prices.
pub const LONG_PROMPT: u64 = 200_000;

/// Cached input tokens cost this fraction of the input price.
pub const CACHED_FRACTION: f64 = 0.1;

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Prices for prompts over [`LONG_PROMPT`] tokens, where they differ.
    pub input_long: f64,
    pub output_long: f64,
}

const fn flat(input: f64, output: f64) -> Price {
    Price {
        input,
        output,
        input_long: input,
        output_long: output,
    }
}

/// The price of `model` on `today` (days since 1970-01-01), if known.
pub fn price(model: &str, today: i64) -> Option<Price> {
    // 2026-12-31 as days since the epoch: gemini-3.8-flash's launch price ends.
    const END_OF_2026: i64 = 20_818;
    Some(match model {
        "gemini-3.1-pro-preview" | "gemini-3-pro-preview" => Price {
            input: 2.00,
            output: 12.00,
            input_long: 4.00,
            output_long: 18.00,
        },
        "gemini-2.5-pro" => Price {
            input: 1.25,
            output: 10.00,
            input_long: 2.50,
            output_long: 15.00,
        },
        "gemini-3.8-flash" if today <= END_OF_2026 => flat(0.75, 3.75),
        "gemini-3.8-flash" => flat(1.50, 7.50),
        "gemini-3.7-flash" => flat(1.50, 7.50),
        "gemini-3.5-flash" => flat(1.50, 9.00),
        "gemini-3-flash-preview" => flat(0.50, 3.00),
        "gemini-3.1-flash-lite" => flat(0.25, 1.50),
        "gemini-2.5-flash" => flat(0.30, 2.50),
        "gemini-2.5-flash-lite" => flat(0.10, 0.40),
        _ => return None,
    })
}

/// The estimated cost in USD of a call of `model` that used `usage`: input at the input price
/// (cached input at a tenth of it), output and thinking at the output price; long prompts at
/// the long-context prices.
pub fn estimate(model: &str, usage: &Usage, today: i64) -> Option<f64> {
    let p = price(model, today)?;
    let long = usage.input > LONG_PROMPT;
    let (input, output) = if long {
        (p.input_long, p.output_long)
    } else {
        (p.input, p.output)
    };
    let cached = usage.cached.min(usage.input);
    let fresh = usage.input - cached;
    let cost = (fresh as f64 * input
        + cached as f64 * input * CACHED_FRACTION
        + (usage.output + usage.thinking) as f64 * output)
        / 1_000_000.0;
    Some(cost)
}

/// Days since 1970-01-01 now.
pub fn today() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_follow_the_price_list() {
        let u = Usage {
            input: 100_000,
            output: 2_000,
            thinking: 8_000,
            cached: 40_000,
        };
        // 60k fresh × $2 + 40k cached × $0.2 + 10k out × $12, per million.
        let c = estimate("gemini-3.1-pro-preview", &u, 20_800).unwrap();
        assert!((c - (0.12 + 0.008 + 0.12)).abs() < 1e-9, "{c}");
        // Over 200k prompt tokens: the long-context prices.
        let long = Usage {
            input: 300_000,
            output: 1_000,
            thinking: 0,
            cached: 0,
        };
        let c = estimate("gemini-3.1-pro-preview", &long, 20_800).unwrap();
        assert!((c - (1.2 + 0.018)).abs() < 1e-9, "{c}");
        // A dated price: 3.8 Flash doubles after 2026-12-31.
        let one = Usage {
            input: 1_000_000,
            ..Usage::default()
        };
        assert_eq!(estimate("gemini-3.8-flash", &one, 20_818), Some(0.75));
        assert_eq!(estimate("gemini-3.8-flash", &one, 20_819), Some(1.50));
        assert_eq!(estimate("gemini-unknown-9", &one, 20_800), None);
    }
}

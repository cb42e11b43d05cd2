//! What a call costs: the paid-tier prices of the built-in models (USD per million tokens, as
//! Google lists them, checked on [`CHECKED`]), the operator's own prices
//! (`GEMINI_MCP_PRICES`), and the estimate of a call from its usage at the service tier that
//! served it (flex and priority are priced off the standard price here, in one place:
//! [`tier_factor`]). Prices move and some change on a date: a [`PriceList`] reads them at the
//! day of the [`Clock`] it is handed, never at the wall clock. A model without a price gets no
//! estimate, never a guess; under a USD cap such a model is refused ([`crate::caps`]), not
//! counted as free.

use serde::Serialize;

use super::vocabulary::{ServiceTier, Usage};
use crate::clock::Clock;

/// When the prices below were last checked against ai.google.dev/gemini-api/docs/pricing.
pub const CHECKED: &str = "2026-11-23";

/// Prompts longer than this many tokens are billed at the long-context prices.
pub const LONG_PROMPT: u64 = 200_000;

/// Cached input tokens cost this fraction of the input price.
pub const CACHED_FRACTION: f64 = 0.1;

/// What a tier costs, as a multiple of the standard price. Google's pricing pages: Flex is "a 50%
/// cost reduction compared to standard rates" (the Gemini API's flex-inference guide; Vertex
/// AI's Flex PayGo "offers a 50% discount"); Priority is "75% to 100% more than standard"
/// (ai.google.dev/gemini-api/docs/optimization), with no per-model figure in what we checked:
/// the top of that range, so that a cap is never passed by a call counted too cheap. The
/// operator's prices (`GEMINI_MCP_PRICES`) are standard prices and take the same factors.
pub fn tier_factor(tier: ServiceTier) -> f64 {
    match tier {
        ServiceTier::Standard => 1.0,
        ServiceTier::Flex => 0.5,
        ServiceTier::Priority => 2.0,
    }
}

/// The setting that gives a model a price.
pub const PRICES_SETTING: &str = "GEMINI_MCP_PRICES";

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Prices for prompts over [`LONG_PROMPT`] tokens, where they differ.
    pub input_long: f64,
    pub output_long: f64,
}

/// Where a price comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PriceSource {
    /// Google's pricing page.
    Google,
    /// Google publishes none yet; the figure resellers bill (models.dev), until it does.
    ThirdParty,
    /// The operator's `GEMINI_MCP_PRICES`.
    Configured,
}

const fn flat(input: f64, output: f64) -> Price {
    Price {
        input,
        output,
        input_long: input,
        output_long: output,
    }
}

/// The built-in price of `model` on `today` (days since 1970-01-01), if one is known. Every
/// model of the built-in catalogue is here but `gemini-3.6-flash`, whose price is not public.
fn builtin(model: &str, today: i64) -> Option<(Price, PriceSource)> {
    use PriceSource::{Google, ThirdParty};
    // 2026-12-31 as days since the epoch: gemini-3.8-flash's launch price ends.
    const END_OF_2026: i64 = 20_818;
    let pro = Price {
        input: 2.00,
        output: 12.00,
        input_long: 4.00,
        output_long: 18.00,
    };
    Some(match model {
        "gemini-3.1-pro-preview" | "gemini-3-pro-preview" => (pro, Google),
        // The Deep Research agents bill their tokens at the underlying Gemini 3 Pro's prices
        // (ai.google.dev/gemini-api/docs/deep-research, Pricing); their searches are not counted.
        "deep-research-preview-04-2026"
        | "deep-research-max-preview-04-2026"
        | "deep-research-pro-preview-12-2025" => (pro, Google),
        "gemini-2.5-pro" => (
            Price {
                input: 1.25,
                output: 10.00,
                input_long: 2.50,
                output_long: 15.00,
            },
            Google,
        ),
        "gemini-4-argon" => (flat(2.00, 10.00), ThirdParty),
        "gemini-3.8-flash" if today <= END_OF_2026 => (flat(0.75, 3.75), Google),
        "gemini-3.8-flash" => (flat(1.50, 7.50), Google),
        "gemini-3.7-flash" => (flat(1.50, 7.50), Google),
        "gemini-3.5-flash" => (flat(1.50, 9.00), Google),
        "gemini-3.5-flash-lite" => (flat(0.30, 2.50), ThirdParty),
        "gemini-3-flash-preview" => (flat(0.50, 3.00), Google),
        "gemini-3.1-flash-lite" => (flat(0.25, 1.50), Google),
        "gemini-2.5-flash" => (flat(0.30, 2.50), Google),
        "gemini-2.5-flash-lite" => (flat(0.10, 0.40), Google),
        _ => return None,
    })
}

/// The prices a server charges its estimates at: the built-in list read at the clock's day,
/// under the operator's own prices.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceList {
    clock: Clock,
    configured: Vec<(String, Price)>,
}

impl PriceList {
    /// The built-in prices at `clock`'s day, with `configured` (model id, price) taking
    /// precedence.
    pub fn new(clock: Clock, configured: Vec<(String, Price)>) -> PriceList {
        PriceList { clock, configured }
    }

    /// The built-in prices at `clock`'s day.
    pub fn at(clock: Clock) -> PriceList {
        PriceList::new(clock, Vec::new())
    }

    /// The clock the prices are read at.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// The price of `model` today, and where it comes from.
    pub fn price(&self, model: &str) -> Option<(Price, PriceSource)> {
        if let Some((_, p)) = self.configured.iter().find(|(id, _)| id == model) {
            return Some((*p, PriceSource::Configured));
        }
        builtin(model, self.clock.today())
    }

    /// The estimated cost in USD of a call of `model` served at `tier` that used `usage`: input
    /// at the input price (cached input at a tenth of it), output and thinking at the output
    /// price; long prompts at the long-context prices; all of it times the tier's
    /// [`tier_factor`].
    pub fn estimate(&self, model: &str, usage: &Usage, tier: ServiceTier) -> Option<f64> {
        let (p, _) = self.price(model)?;
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
        Some(cost * tier_factor(tier))
    }
}

/// What keeping an explicit context cache costs, USD per million tokens per hour: Google's list
/// prices (ai.google.dev/gemini-api/docs/pricing, context caching storage: $4.50 for the Pro
/// models, $1.00 for Flash and Flash-Lite). A model whose input costs a dollar or more per
/// million tokens is priced as a Pro.
fn storage_per_million_hour(input_per_million: f64) -> f64 {
    if input_per_million >= 1.0 { 4.5 } else { 1.0 }
}

impl PriceList {
    /// The cost in USD of keeping `tokens` in an explicit cache of `model` for `hours`.
    pub fn storage(&self, model: &str, tokens: u64, hours: f64) -> Option<f64> {
        let (p, _) = self.price(model)?;
        Some(storage_per_million_hour(p.input) * tokens as f64 / 1_000_000.0 * hours.max(0.0))
    }

    /// What making an explicit cache of `tokens` for `ttl` costs in USD: its creation (the
    /// tokens at the standard input price) and its storage for the whole TTL; `None` where no
    /// price is known.
    pub fn cache_cost(
        &self,
        model: &str,
        tokens: u64,
        ttl: std::time::Duration,
    ) -> (Option<f64>, Option<f64>) {
        let creation = Usage {
            input: tokens,
            ..Usage::default()
        };
        (
            self.estimate(model, &creation, ServiceTier::Standard),
            self.storage(model, tokens, ttl.as_secs_f64() / 3600.0),
        )
    }
}

/// Reads `GEMINI_MCP_PRICES`: `model=input/output` entries separated by commas, USD per million
/// tokens (optionally `model=input/output/input_long/output_long` for the prices over
/// [`LONG_PROMPT`] tokens), e.g. `gemini-3.6-flash=1.5/9`. The error names the entry and the form.
pub fn parse_configured(text: &str) -> Result<Vec<(String, Price)>, String> {
    let mut out: Vec<(String, Price)> = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let bad = |why: &str| {
            format!(
                "`{entry}` {why}: write model=input/output in USD per million tokens, e.g. \
                 gemini-3.6-flash=1.5/9 (or model=input/output/input_long/output_long)"
            )
        };
        let (model, figures) = entry.split_once('=').ok_or_else(|| bad("has no `=`"))?;
        let model = model
            .trim()
            .trim_start_matches("models/")
            .to_ascii_lowercase();
        if model.is_empty() {
            return Err(bad("names no model"));
        }
        let nums: Vec<f64> = figures
            .split('/')
            .map(|n| n.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad("holds something that is not a number"))?;
        if nums.iter().any(|n| !n.is_finite() || *n < 0.0) {
            return Err(bad("holds a negative or infinite price"));
        }
        let price = match nums.as_slice() {
            [i, o] => flat(*i, *o),
            [i, o, il, ol] => Price {
                input: *i,
                output: *o,
                input_long: *il,
                output_long: *ol,
            },
            _ => return Err(bad("needs two or four prices")),
        };
        if out.iter().any(|(m, _)| *m == model) {
            return Err(bad("prices a model a second time"));
        }
        out.push((model, price));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::days_from_iso;

    fn on(date: &str) -> PriceList {
        PriceList::at(Clock::on(date).unwrap())
    }

    #[test]
    fn estimates_follow_the_price_list() {
        let prices = on("2026-11-27");
        let u = Usage {
            input: 100_000,
            output: 2_000,
            thinking: 8_000,
            cached: 40_000,
        };
        // 60k fresh × $2 + 40k cached × $0.2 + 10k out × $12, per million.
        let c = prices
            .estimate("gemini-3.1-pro-preview", &u, ServiceTier::Standard)
            .unwrap();
        assert!((c - (0.12 + 0.008 + 0.12)).abs() < 1e-9, "{c}");
        // Over 200k prompt tokens: the long-context prices.
        let long = Usage {
            input: 300_000,
            output: 1_000,
            thinking: 0,
            cached: 0,
        };
        let c = prices
            .estimate("gemini-3.1-pro-preview", &long, ServiceTier::Standard)
            .unwrap();
        assert!((c - (1.2 + 0.018)).abs() < 1e-9, "{c}");
        assert_eq!(
            prices.estimate("gemini-unknown-9", &long, ServiceTier::Flex),
            None
        );
    }

    #[test]
    fn a_call_is_priced_at_the_tier_that_served_it() {
        let prices = on("2026-11-27");
        let u = Usage {
            input: 1_000_000,
            output: 100_000,
            ..Usage::default()
        };
        // 3.5 Flash: $1.50 in, $9 out per million; flex half of that, priority twice.
        for (tier, want) in [
            (ServiceTier::Standard, 1.5 + 0.9),
            (ServiceTier::Flex, (1.5 + 0.9) / 2.0),
            (ServiceTier::Priority, (1.5 + 0.9) * 2.0),
        ] {
            let c = prices.estimate("gemini-3.5-flash", &u, tier).unwrap();
            assert!((c - want).abs() < 1e-9, "{tier:?}: {c}");
        }
        // The operator's (standard) price takes the same factors.
        let configured = parse_configured("gemini-3.6-flash=1/4").unwrap();
        let prices = PriceList::new(Clock::on("2026-11-27").unwrap(), configured);
        let c = prices
            .estimate("gemini-3.6-flash", &u, ServiceTier::Flex)
            .unwrap();
        assert!((c - 0.7).abs() < 1e-9, "{c}");
    }

    #[test]
    fn a_dated_price_changes_on_its_day_whatever_the_wall_clock_says() {
        let one = Usage {
            input: 1_000_000,
            ..Usage::default()
        };
        // 3.8 Flash's launch price holds through 2026-12-31 and doubles the day after.
        assert_eq!(days_from_iso("2026-12-31"), Some(20_818));
        for (day, want) in [
            ("2026-09-02", 0.75),
            ("2026-12-31", 0.75),
            ("2027-01-01", 1.50),
            ("2030-06-01", 1.50),
        ] {
            assert_eq!(
                on(day).estimate("gemini-3.8-flash", &one, ServiceTier::Standard),
                Some(want),
                "{day}"
            );
        }
    }

    #[test]
    fn every_builtin_model_but_one_has_a_price_and_the_operator_can_give_one() {
        let catalogue = super::super::Catalogue::builtin("pro", on("2026-11-27"));
        let unpriced: Vec<String> = catalogue
            .list()
            .into_iter()
            .filter(|m| on("2026-11-27").price(&m.id).is_none())
            .map(|m| m.id)
            .collect();
        assert_eq!(unpriced, ["gemini-3.6-flash"]);
        let configured =
            parse_configured(" gemini-3.6-flash=1.5/9 , models/Gemini-2.5-Flash=0.5/3/1/6")
                .unwrap();
        let prices = PriceList::new(Clock::on("2026-11-27").unwrap(), configured);
        let (p, source) = prices.price("gemini-3.6-flash").unwrap();
        assert_eq!((p, source), (flat(1.5, 9.0), PriceSource::Configured));
        // The operator's price wins over the built-in one.
        let (p, source) = prices.price("gemini-2.5-flash").unwrap();
        assert_eq!(source, PriceSource::Configured);
        assert_eq!((p.input, p.output_long), (0.5, 6.0));
        assert_eq!(
            prices.price("gemini-4-argon").unwrap().1,
            PriceSource::ThirdParty
        );
    }

    #[test]
    fn a_wrong_price_entry_is_named_with_the_form_to_write() {
        for (text, why) in [
            ("gemini-3.6-flash", "has no `=`"),
            ("=1/2", "names no model"),
            ("m=1", "needs two or four prices"),
            ("m=1/2/3", "needs two or four prices"),
            ("m=one/2", "not a number"),
            ("m=-1/2", "negative"),
            ("m=inf/2", "infinite"),
            ("m=1/2,m=3/4", "a second time"),
        ] {
            let e = parse_configured(text).unwrap_err();
            assert!(
                e.contains(why) && e.contains("model=input/output"),
                "{text}: {e}"
            );
        }
        assert_eq!(parse_configured("").unwrap(), vec![]);
    }
}

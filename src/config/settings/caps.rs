//! What calls may cost: the daily and per-call caps (`caps::Caps`), and the prices and the day
//! estimates are made at (`gemini::Settings::prices`).

use super::row::Read::{Caps, Gemini};
use super::row::{Category, Group, ROW, Setting, Var};
use crate::clock::Clock;
use crate::config::ConfigError;
use crate::gemini::prices::PriceList;

pub(super) const GROUP: Group = Group {
    category: Category::Spending,
    rows: &[
        Setting {
            name: "GEMINI_MCP_DAILY_TOKENS",
            default: "—",
            doc: "Daily cap (UTC) on the tokens (input, output and thinking) Gemini calls may use, per project and, over HTTP, per client; counted in the thread store, so every instance on one Redis shares it. A request whose estimated input would pass it is refused before Gemini is called.",
            read: Caps(|var, c| {
                c.daily_tokens = var.optional::<u64>()?.filter(|n| *n > 0);
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_DAILY_USD",
            default: "—",
            doc: "Daily cap (UTC) on the estimated cost in USD, per project and, over HTTP, per client, like `GEMINI_MCP_DAILY_TOKENS`. A model without a known price is refused under it (give it one with `GEMINI_MCP_PRICES`).",
            read: Caps(|var, c| {
                c.daily_usd = dollars(var)?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_CALL_USD",
            default: "—",
            doc: "Ceiling on one call's estimated cost in USD, checked before each of its requests (input at the model's price; the answer is not known yet): a call over it is refused before Gemini, saying what to narrow; the command line asks on a terminal instead.",
            read: Caps(|var, c| {
                c.call_usd = dollars(var)?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_TODAY",
            default: "the system clock",
            derived: true,
            doc: "The day (`YYYY-MM-DD`, UTC) that dated rules are read at: prices that change on a date, and the notice of a model's announced shutdown. For reproducible estimates and tests.",
            read: Gemini(|var, g| {
                g.prices = match var.get() {
                    None => PriceList::at(Clock::system()),
                    Some(d) => PriceList::at(Clock::on(d.trim()).ok_or_else(|| {
                        var.invalid("must be a date YYYY-MM-DD, e.g. 2026-12-01")
                    })?),
                };
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_PRICES",
            default: "—",
            doc: "Prices of models this build has none for, or overrides: `model=input/output` in USD per million tokens, comma-separated (e.g. `gemini-3.6-flash=1.5/9`; `model=in/out/in_long/out_long` for prompts over 200k tokens). Under a USD cap, a model without a price is refused, not counted as free; `listmodels` shows which have none.",
            read: Gemini(|var, g| {
                // After GEMINI_MCP_TODAY: the prices are read at its day.
                if let Some(text) = var.get() {
                    let configured = crate::gemini::prices::parse_configured(&text)
                        .map_err(|e| var.invalid(e))?;
                    g.prices = PriceList::new(g.prices.clock(), configured);
                }
                Ok(())
            }),
            ..ROW
        },
    ],
};

/// A positive amount of dollars, when set.
fn dollars(var: &Var<'_>) -> Result<Option<f64>, ConfigError> {
    let v = var.optional::<f64>()?;
    if v.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
        return Err(var.invalid("must be a positive amount of dollars"));
    }
    Ok(v)
}

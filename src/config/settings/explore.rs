//! The limits of an investigation (`investigate`, `explore: true`): steps, tokens, the length of
//! one result and the time (`ExploreSettings`).

use super::row::Read::Explore;
use super::row::{Category, Group, ROW, Setting};

pub(super) const GROUP: Group = Group {
    category: Category::Investigations,
    rows: &[
        Setting {
            name: "GEMINI_MCP_EXPLORE_MAX_STEPS",
            default: "50",
            doc: "Most tool calls one investigation may make (`investigate`'s `max_steps` defaults to 25 and is capped here).",
            read: Explore(|var, e| {
                e.max_steps = var.at_least(1, "")?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_EXPLORE_TOKENS",
            default: "200000",
            doc: "Tokens of tool results one investigation may send to Gemini (also capped by the model's window); never passed: the result that would cross it is cut to fit (or withheld), saying so, and Gemini is asked for its answer.",
            read: Explore(|var, e| {
                e.token_budget = var.at_least(1_000, "")?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_EXPLORE_RESULT_CHARS",
            default: "32000",
            doc: "Longest result of one investigation tool call, in characters; a longer one is cut on a line, saying which lines to ask for next.",
            read: Explore(|var, e| {
                e.result_chars = var.at_least(1_000, "")?;
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_EXPLORE_TIMEOUT_SECS",
            default: "600",
            doc: "Time after which an investigation starts no new step and Gemini is asked for its answer.",
            read: Explore(|var, e| {
                e.deadline = var.secs()?;
                Ok(())
            }),
            ..ROW
        },
    ],
};

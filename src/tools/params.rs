//! One body per tool input: a tool's params struct is both its MCP input schema (serde and
//! schemars read its doc comments) and its subcommand's flags (clap reads its `#[arg]`
//! attributes; `help = …` where the command line says it differently). [`Params`] is what the
//! edges need of it beyond that; the value parsers its attributes name are here.
//!
//! A field the MCP schema has and the command line does not is `#[arg(skip)]`; one only the
//! command line has (precommit's `--staged-only`, `--index-file`) is `#[serde(skip)]`, so a
//! client cannot set it and the schema does not show it.

use clap::builder::{PossibleValuesParser, TypedValueParser};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::reply::review::SeverityFilter;
use super::{Plan, Tool, ToolError};
use crate::gemini::ThinkingMode;

/// A tool's params: the tool they are for, its `plan()`, and the text the subcommand takes as
/// its positional argument.
pub trait Params: clap::Args + DeserializeOwned + JsonSchema + Send + 'static {
    /// The tool these params are for.
    const TOOL: Tool;

    /// The tool's pure `plan()`.
    fn plan(self) -> Result<Plan, ToolError>;

    /// The positional text of the subcommand, which `-` reads from stdin; `None` when it has none.
    fn text(&mut self) -> Option<&mut String> {
        None
    }
}

/// A tool parameter's enum as the command line offers it: its values by name, listed to clap
/// (so `--help` shows them and clap names the flag when a value is wrong) and turned into the
/// enum through serde, the way the MCP server reads them.
pub trait Choice: DeserializeOwned + Clone + Send + Sync + 'static {
    /// The values, in the enum's order (a test reads them from the schema).
    const NAMES: &'static [&'static str];
}

impl Choice for ThinkingMode {
    const NAMES: &'static [&'static str] = &["minimal", "low", "medium", "high", "max"];
}

impl Choice for SeverityFilter {
    const NAMES: &'static [&'static str] = &["critical", "high", "medium", "all"];
}

/// `--explore`'s help (codereview, analyze, debug).
pub const EXPLORE_HELP: &str =
    "Let Gemini list, search and read the project's files itself (read-only)";

/// The value parser of a choice flag (`value_parser = choice::<ReviewType>()`).
pub fn choice<T: Choice>() -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(T::NAMES)
        .try_map(|name| serde_json::from_value::<T>(serde_json::Value::String(name)))
}

/// `--temperature`: a number from 0 to 1.
pub fn temperature(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(t) if (0.0..=1.0).contains(&t) => Ok(t),
        _ => Err("use a number from 0 to 1".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::analyze::{AnalysisType, OutputFormat};
    use crate::tools::codereview::ReviewType;

    /// The values a tool parameter's enum takes, read from its schema.
    fn values_of<T: schemars::JsonSchema>() -> Vec<String> {
        let schema = schemars::SchemaGenerator::default().into_root_schema_for::<T>();
        let value = schema.as_value();
        let listed = value.get("enum").and_then(|e| e.as_array()).cloned();
        let one_of = value
            .get("oneOf")
            .and_then(|o| o.as_array())
            .map(|variants| {
                variants
                    .iter()
                    .filter_map(|v| v.get("const").or_else(|| v.get("enum")?.get(0)).cloned())
                    .collect::<Vec<_>>()
            });
        listed
            .or(one_of)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect()
    }

    /// Every value offered to clap is one the enum accepts, and the enum's values are the list,
    /// whole and in order: a value added to a tool's enum fails here until the command line
    /// offers it. Read from the schema here, not when the command line is parsed: building the
    /// schemas at start-up cost 2.5 MB of resident memory (`gemini-mcp --version`: 8.0 → 10.7 MB).
    fn check<T: Choice + JsonSchema>() {
        assert_eq!(values_of::<T>(), T::NAMES);
        for name in T::NAMES {
            let parsed =
                choice::<T>().parse_ref(&clap::Command::new("t"), None, std::ffi::OsStr::new(name));
            assert!(parsed.is_ok(), "{name}");
        }
    }

    #[test]
    fn every_tool_value_is_a_listed_choice() {
        check::<ThinkingMode>();
        check::<ReviewType>();
        check::<SeverityFilter>();
        check::<AnalysisType>();
        check::<OutputFormat>();
    }

    #[test]
    fn temperature_is_between_zero_and_one() {
        assert_eq!(temperature("0.3"), Ok(0.3));
        assert_eq!(temperature("1"), Ok(1.0));
        assert!(temperature("1.5").is_err());
        assert!(temperature("warm").is_err());
    }
}

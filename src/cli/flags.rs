//! Flags shared by the tool subcommands: the common model flags, the output formats and the
//! `--fail-on` threshold. Each is one small item with its test beside it (ripgrep's habit).
//!
//! Choices that name a tool parameter's enum (`--thinking-mode high`, `--review-type quick`)
//! are listed to clap as strings, so `--help` shows them and clap names the flag when a value is
//! wrong, and are turned into the tool's own types through serde, the same way the MCP server
//! reads them: there is one definition of each enum, in `tools/`.

use clap::ValueEnum;
use serde::de::DeserializeOwned;

use crate::reply::review::Severity;
use crate::tools::{Common, ToolError};

/// `--thinking-mode`'s values (the tools' `thinking_mode`).
pub const THINKING_MODES: [&str; 5] = ["minimal", "low", "medium", "high", "max"];
/// `--review-type`'s values (codereview's and precommit's `review_type`).
pub const REVIEW_TYPES: [&str; 4] = ["full", "security", "performance", "quick"];
/// `--severity-filter`'s values (codereview's `severity_filter`).
pub const SEVERITY_FILTERS: [&str; 4] = ["critical", "high", "medium", "all"];
/// `--analysis-type`'s values (analyze's `analysis_type`).
pub const ANALYSIS_TYPES: [&str; 5] = [
    "architecture",
    "performance",
    "security",
    "quality",
    "general",
];
/// `--output-format`'s values (analyze's `output_format`).
pub const ANALYZE_OUTPUTS: [&str; 3] = ["summary", "detailed", "actionable"];

/// The flags every model-backed subcommand takes (the tools' common parameters).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CommonArgs {
    /// Model or alias (pro, flash, flash-lite).
    #[arg(long, short = 'm', value_name = "MODEL", help_heading = "Model")]
    pub model: Option<String>,
    /// Reasoning depth.
    #[arg(long, value_name = "MODE", value_parser = THINKING_MODES, help_heading = "Model")]
    pub thinking_mode: Option<String>,
    /// Sampling temperature, 0 to 1 (best left unset on Gemini 3 and later).
    #[arg(long, value_name = "T", value_parser = temperature, help_heading = "Model")]
    pub temperature: Option<f64>,
    /// Continue a conversation: the continuation_id of an earlier reply (from this command or
    /// from an MCP client), or "latest".
    #[arg(long, value_name = "ID", help_heading = "Model")]
    pub continuation_id: Option<String>,
    /// An image to include (png, jpeg, webp, gif); repeat for several.
    #[arg(long = "image", value_name = "PATH", help_heading = "Model")]
    pub images: Vec<String>,
    /// The Gemini API service tier for this run: standard, flex or priority (overrides
    /// GEMINI_SERVICE_TIER; flex suits hooks and CI).
    #[arg(long, value_name = "TIER", help_heading = "Model")]
    pub tier: Option<String>,
    /// Send nothing: print what would be sent (the files with their tokens, what is left out,
    /// each redaction, the model, the input tokens and a cost band), with exit code 0.
    #[arg(long, help_heading = "Sending")]
    pub dry_run: bool,
    /// With --dry-run: also print the request body exactly as it would leave (redacted).
    #[arg(long, requires = "dry_run", help_heading = "Sending")]
    pub show_request: bool,
}

impl CommonArgs {
    /// The tools' common parameters. Image paths are made absolute against `cwd`.
    pub fn into_common(self, cwd: &std::path::Path) -> Result<Common, ToolError> {
        Ok(Common {
            model: self.model,
            thinking_mode: choice("thinking_mode", self.thinking_mode)?,
            temperature: self.temperature,
            continuation_id: self.continuation_id,
            images: (!self.images.is_empty()).then(|| absolute(cwd, self.images)),
        })
    }
}

fn temperature(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(t) if (0.0..=1.0).contains(&t) => Ok(t),
        _ => Err("use a number from 0 to 1".into()),
    }
}

/// A listed choice turned into the tool's enum (serde, as over MCP).
pub fn choice<T: DeserializeOwned>(
    field: &str,
    value: Option<String>,
) -> Result<Option<T>, ToolError> {
    value
        .map(|v| {
            serde_json::from_value(serde_json::Value::String(v.clone()))
                .map_err(|_| ToolError::invalid(field, format!("`{v}` is not a valid choice")))
        })
        .transpose()
}

/// Paths as the user typed them, made absolute against the working directory (a shell user
/// means `src/` in the current directory, wherever PROJECT_ROOT is).
pub fn absolute(cwd: &std::path::Path, paths: Vec<String>) -> Vec<String> {
    paths
        .into_iter()
        .map(|p| {
            if p.is_empty() || std::path::Path::new(&p).is_absolute() {
                p
            } else {
                // `.` components dropped: `./src` reads as `src` in messages.
                cwd.join(&p)
                    .components()
                    .filter(|c| !matches!(c, std::path::Component::CurDir))
                    .collect::<std::path::PathBuf>()
                    .to_string_lossy()
                    .into_owned()
            }
        })
        .collect()
}

/// How a review is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReviewFormat {
    /// For people: the review, coloured when stdout is a terminal.
    Text,
    /// For scripts: the structured reply, plus `text`, `fail_on`, `fail_on_unverified`,
    /// `unverified_not_counted` and `passed`.
    Json,
    /// SARIF 2.1.0, for code-scanning UIs (GitHub, GitLab, IDEs); checked edits as `fixes`.
    Sarif,
    /// The checked edits as one unified diff, for `git apply` at the project root.
    Patch,
    /// GitLab's Code Quality report (a JSON array of issues).
    Codequality,
}

/// How an answer is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The answer as Markdown, with its footer.
    Text,
    /// The structured reply, plus `text`.
    Json,
}

/// The lowest severity that fails the run (exit 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    Critical,
    High,
    Medium,
    Low,
    /// Never fail on findings.
    None,
}

impl FailOn {
    pub fn threshold(self) -> Option<Severity> {
        match self {
            FailOn::Critical => Some(Severity::Critical),
            FailOn::High => Some(Severity::High),
            FailOn::Medium => Some(Severity::Medium),
            FailOn::Low => Some(Severity::Low),
            FailOn::None => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FailOn::Critical => "critical",
            FailOn::High => "high",
            FailOn::Medium => "medium",
            FailOn::Low => "low",
            FailOn::None => "none",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemini::ThinkingMode;
    use crate::reply::review::SeverityFilter;
    use crate::tools::analyze::{AnalysisType, OutputFormat};
    use crate::tools::codereview::ReviewType;

    /// Every value offered to clap is one the tool's own enum accepts.
    #[test]
    fn every_listed_choice_is_a_tool_value() {
        for v in THINKING_MODES {
            assert!(
                choice::<ThinkingMode>("t", Some(v.into()))
                    .unwrap()
                    .is_some(),
                "{v}"
            );
        }
        for v in REVIEW_TYPES {
            assert!(
                choice::<ReviewType>("t", Some(v.into())).unwrap().is_some(),
                "{v}"
            );
        }
        for v in SEVERITY_FILTERS {
            assert!(
                choice::<SeverityFilter>("t", Some(v.into()))
                    .unwrap()
                    .is_some(),
                "{v}"
            );
        }
        for v in ANALYSIS_TYPES {
            assert!(
                choice::<AnalysisType>("t", Some(v.into()))
                    .unwrap()
                    .is_some(),
                "{v}"
            );
        }
        for v in ANALYZE_OUTPUTS {
            assert!(
                choice::<OutputFormat>("t", Some(v.into()))
                    .unwrap()
                    .is_some(),
                "{v}"
            );
        }
        let err = choice::<ThinkingMode>("thinking_mode", Some("huge".into())).unwrap_err();
        assert!(err.to_string().contains("thinking_mode"), "{err}");
    }

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

    /// The lists offered to clap are the tools' enums, whole and in order: a value added to a
    /// tool's enum fails here until the command line offers it. Read from the schema here, not
    /// when the command line is parsed: building the schemas at start-up cost 2.5 MB of
    /// resident memory (`gemini-mcp --version`: 8.0 → 10.7 MB).
    #[test]
    fn every_tool_value_is_a_listed_choice() {
        assert_eq!(values_of::<ThinkingMode>(), THINKING_MODES);
        assert_eq!(values_of::<ReviewType>(), REVIEW_TYPES);
        assert_eq!(values_of::<SeverityFilter>(), SEVERITY_FILTERS);
        assert_eq!(values_of::<AnalysisType>(), ANALYSIS_TYPES);
        assert_eq!(values_of::<OutputFormat>(), ANALYZE_OUTPUTS);
    }

    #[test]
    fn temperature_is_between_zero_and_one() {
        assert_eq!(temperature("0.3"), Ok(0.3));
        assert_eq!(temperature("1"), Ok(1.0));
        assert!(temperature("1.5").is_err());
        assert!(temperature("warm").is_err());
    }

    #[test]
    fn fail_on_thresholds() {
        assert_eq!(FailOn::High.threshold(), Some(Severity::High));
        assert_eq!(FailOn::Low.threshold(), Some(Severity::Low));
        assert_eq!(FailOn::None.threshold(), None);
    }

    // `/work/proj` and `/abs/x.rs` are Unix absolute paths; on Windows the same with `C:\`.
    #[cfg(unix)]
    #[test]
    fn relative_paths_are_taken_from_the_working_directory() {
        let cwd = std::path::Path::new("/work/proj");
        assert_eq!(
            absolute(
                cwd,
                vec![
                    "src".into(),
                    "/abs/x.rs".into(),
                    ".".into(),
                    "./a/./b".into()
                ]
            ),
            vec![
                "/work/proj/src",
                "/abs/x.rs",
                "/work/proj",
                "/work/proj/a/b"
            ]
        );
    }
}

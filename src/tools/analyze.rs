//! `analyze`: read files or directories and answer a question about them.

use schemars::JsonSchema;
use serde::Deserialize;

use super::params::{Params, choice};
use super::{Common, Plan, Tool, ToolError, paths, required_text, section};

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AnalysisType {
    Architecture,
    Performance,
    Security,
    Quality,
    General,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    Summary,
    Detailed,
    Actionable,
}

#[derive(Debug, Clone, Default, Deserialize, JsonSchema, clap::Args)]
pub struct AnalyzeParams {
    /// Files or directories to analyze.
    #[arg(value_name = "FILES", required = true)]
    pub files: Vec<String>,
    /// What to find out about them.
    #[arg(long, short = 'q', value_name = "TEXT", required = true)]
    pub question: String,
    /// Default general.
    #[arg(
        long,
        value_name = "TYPE",
        value_parser = choice::<AnalysisType>(),
        help = "The angle of the analysis"
    )]
    pub analysis_type: Option<AnalysisType>,
    /// Default detailed.
    #[arg(
        long,
        value_name = "STYLE",
        value_parser = choice::<OutputFormat>(),
        help = "The shape of the answer (the tool's output_format; --format is how it is printed)"
    )]
    pub output_format: Option<OutputFormat>,
    /// Let Gemini search and read the project itself (read-only).
    #[arg(
        long,
        action = clap::ArgAction::SetTrue,
        help = super::params::EXPLORE_HELP
    )]
    pub explore: Option<bool>,
    #[serde(flatten)]
    #[command(flatten)]
    pub common: Common,
    #[serde(flatten)]
    #[command(flatten)]
    pub consensus: super::consensus::ConsensusArgs,
}

impl Params for AnalyzeParams {
    const TOOL: Tool = Tool::Analyze;

    fn plan(self) -> Result<Plan, ToolError> {
        plan(self)
    }
}

pub fn plan(p: AnalyzeParams) -> Result<Plan, ToolError> {
    let mut plan = Plan::new(Tool::Analyze, p.common)?;
    plan.files = paths("files", Some(p.files))?;
    if plan.files.is_empty() {
        return Err(ToolError::invalid(
            "files",
            "name at least one file or directory to analyze",
        ));
    }
    let question = required_text("question", p.question)?;
    let kind = match p.analysis_type.unwrap_or(AnalysisType::General) {
        AnalysisType::Architecture => {
            "architecture: structure, boundaries, dependencies, coupling, how the parts fit"
        }
        AnalysisType::Performance => {
            "performance: complexity, allocations, I/O, contention, scalability"
        }
        AnalysisType::Security => {
            "security: trust boundaries, input handling, secrets, authorization, injection"
        }
        AnalysisType::Quality => "quality: correctness risks, readability, tests, maintainability",
        AnalysisType::General => "general: whatever matters most for the question",
    };
    let format = match p.output_format.unwrap_or(OutputFormat::Detailed) {
        OutputFormat::Summary => "summary: a short overview with the key points only",
        OutputFormat::Detailed => {
            "detailed: a thorough answer with evidence (file:line) for each point"
        }
        OutputFormat::Actionable => {
            "actionable: a prioritised list of concrete changes, each with file:line"
        }
    };
    section(&mut plan.request, "Question", Some(&question));
    section(&mut plan.request, "Analysis type", Some(kind));
    section(&mut plan.request, "Output format", Some(format));
    super::investigate::explore_flag(&mut plan, p.explore)?;
    super::consensus::apply(&mut plan, p.consensus)?;
    Ok(plan)
}

/// The names `--analysis-type` offers (`params::Choice`).
impl super::params::Choice for AnalysisType {
    const NAMES: &'static [&'static str] = &[
        "architecture",
        "performance",
        "security",
        "quality",
        "general",
    ];
}

impl super::params::Choice for OutputFormat {
    const NAMES: &'static [&'static str] = &["summary", "detailed", "actionable"];
}

//! `analyze`: read files or directories and answer a question about them.

use schemars::JsonSchema;
use serde::Deserialize;

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

#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct AnalyzeParams {
    /// Files or directories to analyze.
    pub files: Vec<String>,
    /// What to find out about them.
    pub question: String,
    /// Default general.
    pub analysis_type: Option<AnalysisType>,
    /// Default detailed.
    pub output_format: Option<OutputFormat>,
    /// Let Gemini search and read the project itself (read-only).
    pub explore: Option<bool>,
    #[serde(flatten)]
    pub common: Common,
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
    Ok(plan)
}

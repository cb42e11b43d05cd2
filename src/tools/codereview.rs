//! `codereview`: findings with severity, file:line and a fix, from Gemini's JSON mode.

use schemars::JsonSchema;
use serde::Deserialize;

use super::params::{Params, choice};
use super::{Common, Output, Plan, Tool, ToolError, optional_text, paths, required_text, section};
use crate::reply::review::SeverityFilter;

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReviewType {
    Full,
    Security,
    Performance,
    Quick,
}

impl ReviewType {
    pub fn instructions(self) -> &'static str {
        match self {
            ReviewType::Full => {
                "full: correctness, security, performance, error handling, maintainability"
            }
            ReviewType::Security => {
                "security: injection, authn/authz, secrets, unsafe input handling, data exposure"
            }
            ReviewType::Performance => {
                "performance: complexity, allocations, blocking I/O, contention, unbounded growth"
            }
            ReviewType::Quick => {
                "quick: only bugs and security issues that must be fixed; skip style"
            }
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, JsonSchema, clap::Args)]
pub struct CodeReviewParams {
    /// Files or directories to review.
    #[arg(value_name = "FILES", required = true)]
    pub files: Vec<String>,
    /// What the code does and what the review is for.
    #[arg(long, value_name = "TEXT", required = true)]
    pub context: String,
    /// Default full.
    #[arg(
        long,
        value_name = "TYPE",
        value_parser = choice::<ReviewType>(),
        help = "What to look at"
    )]
    pub review_type: Option<ReviewType>,
    /// Lowest severity reported (default all).
    #[arg(
        long,
        value_name = "SEVERITY",
        value_parser = choice::<SeverityFilter>(),
        help = "Lowest severity reported"
    )]
    pub severity_filter: Option<SeverityFilter>,
    /// Coding standards to check against.
    #[arg(long, value_name = "TEXT")]
    pub standards: Option<String>,
    /// Areas to look at especially.
    #[arg(long, value_name = "TEXT")]
    pub focus_on: Option<String>,
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

impl Params for CodeReviewParams {
    const TOOL: Tool = Tool::CodeReview;

    fn plan(self) -> Result<Plan, ToolError> {
        plan(self)
    }
}

pub fn plan(p: CodeReviewParams) -> Result<Plan, ToolError> {
    let mut plan = Plan::new(Tool::CodeReview, p.common)?;
    plan.files = paths("files", Some(p.files))?;
    if plan.files.is_empty() {
        return Err(ToolError::invalid(
            "files",
            "name at least one file or directory to review",
        ));
    }
    let context = required_text("context", p.context)?;
    section(&mut plan.request, "Review request", Some(&context));
    section(
        &mut plan.request,
        "Review type",
        Some(p.review_type.unwrap_or(ReviewType::Full).instructions()),
    );
    section(
        &mut plan.request,
        "Focus on",
        optional_text("focus_on", p.focus_on)?.as_deref(),
    );
    section(
        &mut plan.request,
        "Standards",
        optional_text("standards", p.standards)?.as_deref(),
    );
    plan.output = Output::Review {
        min_severity: p.severity_filter.map(SeverityFilter::min),
        verdict: false,
    };
    super::investigate::explore_flag(&mut plan, p.explore)?;
    super::consensus::apply(&mut plan, p.consensus)?;
    Ok(plan)
}

/// The names `--review-type` offers (`params::Choice`).
impl super::params::Choice for ReviewType {
    const NAMES: &'static [&'static str] = &["full", "security", "performance", "quick"];
}

//! `precommit`: review pending git changes before committing; findings and a verdict.

use schemars::JsonSchema;
use serde::Deserialize;

use super::codereview::ReviewType;
use super::{Common, Output, Plan, Tool, ToolError, optional_text, paths, required_text, section};
use crate::git::DiffRequest;
use crate::reply::review::SeverityFilter;

#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct PrecommitParams {
    /// Repository directory; nested repositories included.
    pub path: String,
    /// Default true.
    pub include_staged: Option<bool>,
    /// Default true.
    pub include_unstaged: Option<bool>,
    /// Untracked files as additions (default true).
    pub include_untracked: Option<bool>,
    /// Review all changes since this ref instead.
    pub compare_to: Option<String>,
    /// What the change is meant to do; missing pieces become findings.
    pub original_request: Option<String>,
    /// Default full.
    pub review_type: Option<ReviewType>,
    /// Lowest severity reported (default all).
    pub severity_filter: Option<SeverityFilter>,
    /// Nested repository search depth (default 5).
    pub max_depth: Option<u32>,
    /// Extra files to include as context.
    pub files: Option<Vec<String>>,
    #[serde(flatten)]
    pub common: Common,
}

pub fn plan(p: PrecommitParams) -> Result<Plan, ToolError> {
    let mut plan = Plan::new(Tool::Precommit, p.common)?;
    let path = required_text("path", p.path)?;
    let compare_to = optional_text("compare_to", p.compare_to)?.map(|r| r.trim().to_string());
    if let Some(r) = &compare_to
        && (r.starts_with('-') || r.contains(char::is_whitespace))
    {
        return Err(ToolError::invalid(
            "compare_to",
            "must be a branch, tag or commit name",
        ));
    }
    let git = DiffRequest {
        path,
        include_staged: p.include_staged.unwrap_or(true),
        include_unstaged: p.include_unstaged.unwrap_or(true),
        include_untracked: p.include_untracked.unwrap_or(true),
        compare_to,
        max_depth: p.max_depth.unwrap_or(5).min(64) as usize,
        budget: 0,
        index_file: None,
    };
    if git.compare_to.is_none()
        && !(git.include_staged || git.include_unstaged || git.include_untracked)
    {
        return Err(ToolError::invalid(
            "include_staged",
            "staged, unstaged and untracked changes are all excluded: nothing to review",
        ));
    }
    let original = optional_text("original_request", p.original_request)?;
    section(
        &mut plan.request,
        "What the change is meant to do",
        original.as_deref(),
    );
    section(
        &mut plan.request,
        "Review type",
        Some(p.review_type.unwrap_or(ReviewType::Full).instructions()),
    );
    plan.files = paths("files", p.files)?;
    plan.git = Some(git);
    plan.output = Output::Review {
        min_severity: p.severity_filter.unwrap_or(SeverityFilter::All).min(),
        verdict: true,
    };
    Ok(plan)
}

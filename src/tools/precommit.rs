//! `precommit`: review pending git changes before committing; findings and a verdict.

use std::path::PathBuf;
use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::Deserialize;

use super::codereview::ReviewType;
use super::params::{Params, choice};
use super::{Common, Output, Plan, Tool, ToolError, optional_text, paths, required_text, section};
use crate::git::DiffRequest;
use crate::reply::review::SeverityFilter;

/// How deep below `path` nested repositories are looked for when the call names no `max_depth`.
pub const DEFAULT_DEPTH: u32 = 5;

#[derive(Debug, Clone, Default, Deserialize, JsonSchema, clap::Args)]
pub struct PrecommitParams {
    /// Repository directory; nested repositories included.
    #[arg(
        long,
        short = 'p',
        value_name = "PATH",
        default_value = ".",
        help = "The repository, or a directory in it, to review; repositories nested below it are reviewed too"
    )]
    pub path: String,
    // The command line's alone (over MCP: include_unstaged and include_untracked false).
    /// Review only the staged changes (HEAD → index): what `git commit` will record.
    #[serde(skip)]
    #[arg(long)]
    pub staged_only: bool,
    /// Default true.
    #[arg(skip)]
    pub include_staged: Option<bool>,
    /// Default true.
    #[arg(skip)]
    pub include_unstaged: Option<bool>,
    /// Untracked files as additions (default true).
    #[arg(skip)]
    pub include_untracked: Option<bool>,
    /// Review all changes since this ref instead.
    #[arg(
        long,
        value_name = "REF",
        help = "Review everything since this branch, tag or commit (from its merge base with HEAD), uncommitted work included (with --staged-only: committed and staged work only)"
    )]
    pub compare_to: Option<String>,
    /// What the change is meant to do; missing pieces become findings.
    #[arg(long, value_name = "TEXT")]
    pub original_request: Option<String>,
    /// Default full.
    #[arg(
        long,
        value_name = "TYPE",
        value_parser = choice::<ReviewType>(),
        help = "What to look at"
    )]
    pub review_type: Option<ReviewType>,
    /// Lowest severity reported (default all).
    #[arg(skip)]
    pub severity_filter: Option<SeverityFilter>,
    /// Nested repository search depth (default 5).
    #[arg(
        long,
        value_name = "N",
        default_value = default_depth(),
        help = "How deep to look for nested repositories below PATH (0: only the repository containing PATH)"
    )]
    pub max_depth: Option<u32>,
    /// Extra files to include as context.
    #[arg(
        long = "file",
        value_name = "PATH",
        help = "An extra file to include as context; repeat for several"
    )]
    pub files: Option<Vec<String>>,
    // The command line's alone: a client cannot point the review at a file outside the sandbox.
    /// Read this index instead of .git/index (the pre-commit hook passes $GIT_INDEX_FILE, which
    /// `git commit -a` points at the index about to be committed).
    #[serde(skip)]
    #[arg(long, value_name = "FILE")]
    pub index_file: Option<PathBuf>,
    #[serde(flatten)]
    #[command(flatten)]
    pub common: Common,
    #[serde(flatten)]
    #[command(flatten)]
    pub consensus: super::consensus::ConsensusArgs,
}

/// [`DEFAULT_DEPTH`] as the command line shows it (`[default: 5]`).
fn default_depth() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| DEFAULT_DEPTH.to_string())
}

impl Params for PrecommitParams {
    const TOOL: Tool = Tool::Precommit;

    fn plan(self) -> Result<Plan, ToolError> {
        plan(self)
    }
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
        include_unstaged: p.include_unstaged.unwrap_or(!p.staged_only),
        include_untracked: p.include_untracked.unwrap_or(!p.staged_only),
        compare_to,
        max_depth: p.max_depth.unwrap_or(DEFAULT_DEPTH).min(64) as usize,
        budget: 0,
        index_file: p.index_file,
        ignore: None,
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
        min_severity: p.severity_filter.map(SeverityFilter::min),
        verdict: true,
    };
    super::consensus::apply(&mut plan, p.consensus)?;
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `staged_only` and `index_file` are the command line's alone: a client that sends them is
    /// not heard (a review cannot be pointed at an index outside the sandbox).
    #[test]
    fn the_command_line_inputs_are_not_read_from_a_client() {
        let p: PrecommitParams = serde_json::from_value(serde_json::json!({
            "path": "/work/proj",
            "staged_only": true,
            "index_file": "/etc/passwd",
        }))
        .unwrap();
        assert!(!p.staged_only);
        assert_eq!(p.index_file, None);
        let git = plan(p).unwrap().git.unwrap();
        assert!(git.include_unstaged && git.include_untracked);
        assert_eq!(git.index_file, None);
        assert_eq!(git.max_depth, DEFAULT_DEPTH as usize);
    }
}

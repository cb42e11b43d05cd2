//! `debug`: root-cause analysis from an error, its context and what was tried.

use schemars::JsonSchema;
use serde::Deserialize;

use super::params::Params;
use super::{Common, Plan, Tool, ToolError, optional_text, paths, required_text, section};

#[derive(Debug, Clone, Default, Deserialize, JsonSchema, clap::Args)]
pub struct DebugParams {
    /// The bug: what happens, what was expected.
    #[arg(
        value_name = "DESCRIPTION",
        help = "The bug: what happens, what was expected (\"-\" reads it from stdin)"
    )]
    pub error_description: String,
    /// Stack trace, logs or error output.
    #[arg(long, value_name = "TEXT")]
    pub error_context: Option<String>,
    /// Files or directories likely involved.
    #[arg(
        long = "file",
        short = 'f',
        value_name = "PATH",
        help = "A file or directory likely involved; repeat for several"
    )]
    pub files: Option<Vec<String>>,
    /// What was already tried, and what happened.
    #[arg(long, value_name = "TEXT")]
    pub previous_attempts: Option<String>,
    /// Environment: versions, OS, configuration.
    #[arg(long, value_name = "TEXT")]
    pub runtime_info: Option<String>,
    /// Let Gemini search the web and cite its sources.
    #[arg(long = "web-search", action = clap::ArgAction::SetTrue)]
    pub use_websearch: Option<bool>,
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

impl Params for DebugParams {
    const TOOL: Tool = Tool::Debug;

    fn plan(self) -> Result<Plan, ToolError> {
        plan(self)
    }

    fn text(&mut self) -> Option<&mut String> {
        Some(&mut self.error_description)
    }
}

pub fn plan(p: DebugParams) -> Result<Plan, ToolError> {
    let mut plan = Plan::new(Tool::Debug, p.common)?;
    let description = required_text("error_description", p.error_description)?;
    section(&mut plan.request, "Problem", Some(&description));
    section(
        &mut plan.request,
        "Error output",
        optional_text("error_context", p.error_context)?.as_deref(),
    );
    section(
        &mut plan.request,
        "Previous attempts",
        optional_text("previous_attempts", p.previous_attempts)?.as_deref(),
    );
    section(
        &mut plan.request,
        "Runtime",
        optional_text("runtime_info", p.runtime_info)?.as_deref(),
    );
    plan.files = paths("files", p.files)?;
    plan.web_search = p.use_websearch.unwrap_or(false);
    super::investigate::explore_flag(&mut plan, p.explore)?;
    super::consensus::apply(&mut plan, p.consensus)?;
    Ok(plan)
}

//! `thinkdeep`: extend, challenge and stress-test the agent's own analysis of a hard problem.

use schemars::JsonSchema;
use serde::Deserialize;

use super::params::Params;
use super::{Common, Plan, Tool, ToolError, optional_text, paths, required_text, section};

#[derive(Debug, Clone, Default, Deserialize, JsonSchema, clap::Args)]
pub struct ThinkDeepParams {
    /// Your current thinking: the problem, what you found, what you plan.
    #[arg(
        value_name = "ANALYSIS",
        help = "Your current thinking: the problem, what you found, what you plan (\"-\" reads it from stdin)"
    )]
    pub current_analysis: String,
    /// Background: constraints, goals, what was ruled out.
    #[arg(long, value_name = "TEXT")]
    pub problem_context: Option<String>,
    /// Aspects to focus on, e.g. performance, security, architecture.
    #[arg(
        long = "focus-area",
        value_name = "AREA",
        help = "An aspect to focus on (performance, security, architecture…); repeat for several"
    )]
    pub focus_areas: Option<Vec<String>>,
    /// Files or directories to include.
    #[arg(
        long = "file",
        short = 'f',
        value_name = "PATH",
        help = "A file or directory to include; repeat for several"
    )]
    pub files: Option<Vec<String>>,
    /// Let Gemini search the web and cite its sources.
    #[arg(long = "web-search", action = clap::ArgAction::SetTrue)]
    pub use_websearch: Option<bool>,
    #[serde(flatten)]
    #[command(flatten)]
    pub common: Common,
    #[serde(flatten)]
    #[command(flatten)]
    pub consensus: super::consensus::ConsensusArgs,
}

impl Params for ThinkDeepParams {
    const TOOL: Tool = Tool::ThinkDeep;

    fn plan(self) -> Result<Plan, ToolError> {
        plan(self)
    }

    fn text(&mut self) -> Option<&mut String> {
        Some(&mut self.current_analysis)
    }
}

pub fn plan(p: ThinkDeepParams) -> Result<Plan, ToolError> {
    let mut plan = Plan::new(Tool::ThinkDeep, p.common)?;
    let analysis = required_text("current_analysis", p.current_analysis)?;
    let context = optional_text("problem_context", p.problem_context)?;
    let focus = p
        .focus_areas
        .unwrap_or_default()
        .into_iter()
        .map(|f| f.trim().to_string())
        .filter(|f| !f.is_empty())
        .collect::<Vec<_>>();
    section(
        &mut plan.request,
        "The agent's current analysis",
        Some(&analysis),
    );
    section(&mut plan.request, "Problem context", context.as_deref());
    section(&mut plan.request, "Focus areas", Some(&focus.join(", ")));
    plan.files = paths("files", p.files)?;
    plan.web_search = p.use_websearch.unwrap_or(false);
    super::consensus::apply(&mut plan, p.consensus)?;
    Ok(plan)
}

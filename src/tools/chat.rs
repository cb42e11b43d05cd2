//! `chat`: a second opinion, brainstorming, a quick check of an idea.

use schemars::JsonSchema;
use serde::Deserialize;

use super::params::Params;
use super::{Common, Plan, Tool, ToolError, optional_text, paths, required_text, section};

#[derive(Debug, Clone, Default, Deserialize, JsonSchema, clap::Args)]
pub struct ChatParams {
    /// Your question or idea, with the context Gemini needs.
    #[arg(
        value_name = "PROMPT",
        help = "Your question or idea, with the context Gemini needs (\"-\" reads it from stdin)"
    )]
    pub prompt: String,
    /// Files or directories to include.
    #[arg(
        long = "file",
        short = 'f',
        value_name = "PATH",
        help = "A file or directory to include; repeat for several"
    )]
    pub files: Option<Vec<String>>,
    /// Extra instructions for Gemini.
    #[arg(long, value_name = "TEXT")]
    pub system_prompt: Option<String>,
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

impl Params for ChatParams {
    const TOOL: Tool = Tool::Chat;

    fn plan(self) -> Result<Plan, ToolError> {
        plan(self)
    }

    fn text(&mut self) -> Option<&mut String> {
        Some(&mut self.prompt)
    }
}

pub fn plan(p: ChatParams) -> Result<Plan, ToolError> {
    let mut plan = Plan::new(Tool::Chat, p.common)?;
    let prompt = required_text("prompt", p.prompt)?;
    section(&mut plan.request, "Request", Some(&prompt));
    plan.files = paths("files", p.files)?;
    plan.system_extra = optional_text("system_prompt", p.system_prompt)?;
    plan.web_search = p.use_websearch.unwrap_or(false);
    super::consensus::apply(&mut plan, p.consensus)?;
    Ok(plan)
}

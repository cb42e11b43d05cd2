//! `chat`: a second opinion, brainstorming, a quick check of an idea.

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Common, Plan, Tool, ToolError, optional_text, paths, required_text, section};

#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct ChatParams {
    /// Your question or idea, with the context Gemini needs.
    pub prompt: String,
    /// Files or directories to include.
    pub files: Option<Vec<String>>,
    /// Extra instructions for Gemini.
    pub system_prompt: Option<String>,
    /// Let Gemini search the web and cite its sources.
    pub use_websearch: Option<bool>,
    #[serde(flatten)]
    pub common: Common,
}

pub fn plan(p: ChatParams) -> Result<Plan, ToolError> {
    let mut plan = Plan::new(Tool::Chat, p.common)?;
    let prompt = required_text("prompt", p.prompt)?;
    section(&mut plan.request, "Request", Some(&prompt));
    plan.files = paths("files", p.files)?;
    plan.system_extra = optional_text("system_prompt", p.system_prompt)?;
    plan.web_search = p.use_websearch.unwrap_or(false);
    Ok(plan)
}

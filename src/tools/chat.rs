//! `chat`: a second opinion, brainstorming, a quick check of an idea.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::schemars::{self, JsonSchema};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, tool, tool_router};
use serde::Deserialize;

use super::{Common, Plan, Tool, ToolError, optional_text, paths, required_text, section};
use crate::gemini::ThinkingMode;
use crate::server::Server;

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
    let mut plan = Plan::new(Tool::Chat, p.common, ThinkingMode::Medium)?;
    let prompt = required_text("prompt", p.prompt)?;
    section(&mut plan.request, "Request", Some(&prompt));
    plan.files = paths("files", p.files)?;
    plan.system_extra = optional_text("system_prompt", p.system_prompt)?;
    plan.web_search = p.use_websearch.unwrap_or(false);
    Ok(plan)
}

#[tool_router(router = chat_router, vis = "pub(crate)")]
impl Server {
    #[tool(
        description = "Ask Gemini for a second opinion, to brainstorm, or to check an idea; pass files for context.",
        annotations(title = "Chat with Gemini", read_only_hint = true, open_world_hint = true),
        input_schema = super::schema::input_schema::<ChatParams>(),
        output_schema = super::reply::output_schema(&["findings", "findings_left_out", "summary", "verdict", "changed_files"])
    )]
    async fn chat(
        &self,
        Parameters(args): Parameters<JsonObject>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.call_tool_with(args, plan, ctx).await
    }
}

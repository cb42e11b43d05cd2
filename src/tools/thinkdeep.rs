//! `thinkdeep`: extend, challenge and stress-test the agent's own analysis of a hard problem.

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
pub struct ThinkDeepParams {
    /// Your current thinking: the problem, what you found, what you plan.
    pub current_analysis: String,
    /// Background: constraints, goals, what was ruled out.
    pub problem_context: Option<String>,
    /// Aspects to focus on, e.g. performance, security, architecture.
    pub focus_areas: Option<Vec<String>>,
    /// Files or directories to include.
    pub files: Option<Vec<String>>,
    /// Let Gemini search the web and cite its sources.
    pub use_websearch: Option<bool>,
    #[serde(flatten)]
    pub common: Common,
}

pub fn plan(p: ThinkDeepParams) -> Result<Plan, ToolError> {
    let mut plan = Plan::new(Tool::ThinkDeep, p.common, ThinkingMode::High)?;
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
    Ok(plan)
}

#[tool_router(router = thinkdeep_router, vis = "pub(crate)")]
impl Server {
    #[tool(
        description = "Give Gemini your analysis of a hard problem (design, architecture, a tricky bug) to extend, challenge and stress-test. Thinks longer than chat.",
        annotations(title = "Think deeper with Gemini", read_only_hint = true, open_world_hint = true),
        input_schema = super::schema::input_schema::<ThinkDeepParams>(),
        output_schema = super::reply::output_schema(&["findings", "findings_left_out", "summary", "verdict", "changed_files"])
    )]
    async fn thinkdeep(
        &self,
        Parameters(args): Parameters<JsonObject>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.call_tool_with(args, plan, ctx).await
    }
}

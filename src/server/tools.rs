//! The tool adapters: one MCP tool per tool of `tools/`, each a description, annotations, the
//! input and output schemas, and one call into the shared pipeline (`Server::call_tool_with`).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, tool, tool_router};

use super::Server;
use crate::tools::analyze::{self, AnalyzeParams};
use crate::tools::chat::{self, ChatParams};
use crate::tools::codereview::{self, CodeReviewParams};
use crate::tools::debug::{self, DebugParams};
use crate::tools::investigate::{self, InvestigateParams};
use crate::tools::listmodels;
use crate::tools::precommit::{self, PrecommitParams};
use crate::tools::thinkdeep::{self, ThinkDeepParams};

#[tool_router(router = tools_router, vis = "pub(crate)")]
impl Server {
    #[tool(
        description = "Ask Gemini for a second opinion, to brainstorm, or to check an idea; pass files for context.",
        annotations(title = "Chat with Gemini", read_only_hint = true, open_world_hint = true),
        input_schema = crate::tools::schema::input_schema::<ChatParams>(),
        output_schema = crate::tools::reply::output_schema(&["findings", "findings_left_out", "summary", "verdict", "changed_files"])
    )]
    async fn chat(
        &self,
        Parameters(mut args): Parameters<JsonObject>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.cli_wrapper_args(&mut args)?;
        self.call_tool_with(args, chat::plan, ctx).await
    }

    #[tool(
        description = "Give Gemini your analysis of a hard problem (design, architecture, a tricky bug) to extend and challenge; thinks longer than chat.",
        annotations(title = "Think deeper with Gemini", read_only_hint = true, open_world_hint = true),
        input_schema = crate::tools::schema::input_schema::<ThinkDeepParams>(),
        output_schema = crate::tools::reply::output_schema(&["findings", "findings_left_out", "summary", "verdict", "changed_files"])
    )]
    async fn thinkdeep(
        &self,
        Parameters(args): Parameters<JsonObject>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.call_tool_with(args, thinkdeep::plan, ctx).await
    }

    #[tool(
        description = "Have Gemini read files or directories and answer a question about them: architecture, performance, security, quality.",
        annotations(title = "Analyze code with Gemini", read_only_hint = true, open_world_hint = true),
        input_schema = crate::tools::schema::input_schema::<AnalyzeParams>(),
        output_schema = crate::tools::reply::output_schema(&["findings", "findings_left_out", "summary", "verdict", "changed_files", "sources"])
    )]
    async fn analyze(
        &self,
        Parameters(args): Parameters<JsonObject>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.call_tool_with(args, analyze::plan, ctx).await
    }

    #[tool(
        description = "Gemini reviews files and returns findings (severity, file:line, fix) as structured data.",
        annotations(title = "Code review by Gemini", read_only_hint = true, open_world_hint = true),
        input_schema = crate::tools::schema::input_schema::<CodeReviewParams>(),
        output_schema = crate::tools::reply::output_schema(&["changed_files", "verdict", "sources"])
    )]
    async fn codereview(
        &self,
        Parameters(args): Parameters<JsonObject>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.call_tool_with(args, codereview::plan, ctx).await
    }

    #[tool(
        description = "Root-cause a bug: give the error, stack trace, likely files and what you tried; Gemini ranks hypotheses with evidence and fixes.",
        annotations(title = "Debug with Gemini", read_only_hint = true, open_world_hint = true),
        input_schema = crate::tools::schema::input_schema::<DebugParams>(),
        output_schema = crate::tools::reply::output_schema(&["findings", "findings_left_out", "summary", "verdict", "changed_files"])
    )]
    async fn debug(
        &self,
        Parameters(args): Parameters<JsonObject>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.call_tool_with(args, debug::plan, ctx).await
    }

    #[tool(
        description = "Review pending git changes (staged, unstaged, untracked, or since a ref) before committing: findings and a verdict.",
        annotations(title = "Pre-commit review by Gemini", read_only_hint = true, open_world_hint = true),
        input_schema = crate::tools::schema::input_schema::<PrecommitParams>(),
        output_schema = crate::tools::reply::output_schema(&["sources"])
    )]
    async fn precommit(
        &self,
        Parameters(args): Parameters<JsonObject>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.call_tool_with(args, precommit::plan, ctx).await
    }

    #[tool(
        description = "Gemini explores the project itself (lists, searches, reads files and git history; read-only) and answers with file:line citations.",
        annotations(title = "Investigate the project with Gemini", read_only_hint = true, open_world_hint = true),
        input_schema = crate::tools::schema::input_schema::<InvestigateParams>(),
        output_schema = crate::tools::reply::investigate_output_schema()
    )]
    async fn investigate(
        &self,
        Parameters(args): Parameters<JsonObject>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.call_tool_with(args, investigate::plan, ctx).await
    }

    #[tool(
        description = "The Gemini models this server can use (limits, aliases, default), its backend and thread store.",
        annotations(title = "List Gemini models", read_only_hint = true, open_world_hint = false),
        output_schema = crate::tools::schema::output_schema::<listmodels::ModelsReport>(&[])
    )]
    async fn listmodels(&self) -> Result<CallToolResult, ErrorData> {
        // The live list when the endpoint answers in time; the built-in one otherwise.
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            self.app().refresh_models(true),
        )
        .await;
        let r = listmodels::report(self.app().gemini(), self.app().store_kind());
        let value =
            serde_json::to_value(&r).map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let mut result = CallToolResult::success(vec![ContentBlock::text(listmodels::render(&r))]);
        result.structured_content = Some(value);
        Ok(result)
    }
}

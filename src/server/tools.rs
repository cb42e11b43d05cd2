//! The tools' routes, built from the tools' table (`tools::spec`): one per row — the row's
//! description, title and reply schema, the input schema of the tool's params, and one call into
//! the shared pipeline (`Server::call_tool_with`) with the tool's `plan()` — and `listmodels`.
//! The tool's params and `plan()` are named in one match ([`route`]). [`Server::new`] routes
//! them, with the compatibility profiles' tools and each route's result cap.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::ErrorData;
use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, JsonObject, ToolAnnotations};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::{Check, Server, clarify, compat, result_cap};
use crate::app::App;
use crate::tools::spec::{LISTMODELS, SPECS, Spec};
use crate::tools::{
    Plan, Tool, ToolError, analyze, chat, codereview, debug, investigate, listmodels, precommit,
    research, thinkdeep,
};

/// What a route does to the arguments before they are parsed (`chat`'s compatibility names).
type ArgsHook = fn(&Server, &mut JsonObject) -> Result<(), ErrorData>;

impl Server {
    pub fn new(app: Arc<App>) -> Server {
        let (mut tool_router, checks) = Self::tools_router();
        for name in &app.config().tools.disabled {
            tool_router.remove_route(name);
        }
        // Deep Research browses the web: listed only when turned on.
        if !app.config().gemini.research.enabled {
            tool_router.remove_route(crate::tools::spec::Tool::Research.name());
        }
        for &profile in &app.config().tools.compat {
            if profile == crate::config::Compat::CliWrapper
                && let Some(route) = tool_router.map.get_mut("chat")
            {
                route.attr.input_schema = compat::cli_chat_schema(&route.attr.input_schema);
            }
            tool_router.merge(compat::router(profile));
        }
        // Claude Code saves a result over 50,000 characters to a file its model never reads,
        // unless the tool declares a larger size; results are fitted to this cap.
        let cap = result_cap(&app);
        for route in tool_router.map.values_mut() {
            let mut meta = route.attr.meta.take().unwrap_or_default();
            meta.insert("anthropic/maxResultSizeChars".into(), json!(cap));
            route.attr.meta = Some(meta);
        }
        Server {
            app,
            tool_router,
            checks: Arc::new(checks),
            tasks: Arc::default(),
        }
    }

    /// Every tool of this server, the table's and `listmodels`, and the table's tools' checks.
    pub(crate) fn tools_router() -> (ToolRouter<Server>, HashMap<&'static str, Check>) {
        let mut router = ToolRouter::new();
        let mut checks = HashMap::new();
        for spec in &SPECS {
            let (route, check) = route(spec);
            router.add_route(route);
            checks.insert(spec.name, check);
        }
        router.add_route(listmodels_route());
        (router, checks)
    }
}

/// A row's route and check: its tool's params and `plan()`.
fn route(spec: &'static Spec) -> (ToolRoute<Server>, Check) {
    match spec.tool {
        Tool::CodeReview => planned(spec, codereview::plan, None),
        Tool::Precommit => planned(spec, precommit::plan, None),
        Tool::Debug => planned(spec, debug::plan, None),
        Tool::Analyze => planned(spec, analyze::plan, None),
        Tool::ThinkDeep => planned(spec, thinkdeep::plan, None),
        Tool::Investigate => planned(spec, investigate::plan, None),
        Tool::Chat => planned(spec, chat::plan, Some(Server::cli_wrapper_args)),
        Tool::Research => planned(spec, research::plan, None),
    }
}

/// Runs the call; a reply asking for files becomes a question to the client when it can answer
/// one inside the call (`clarify`).
async fn ask<P: DeserializeOwned>(
    server: &Server,
    spec: &'static Spec,
    args: JsonObject,
    plan: fn(P) -> Result<Plan, ToolError>,
    ctx: rmcp::service::RequestContext<rmcp::RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let may_ask = clarify::may_ask(&ctx);
    let result = server.call_tool_with(args, plan, ctx).await?;
    Ok(match may_ask.then(|| clarify::question(spec.name, &result)).flatten() {
        Some(question) => question,
        None => result.into(),
    })
}

/// The route of a tool that plans params `P` and runs the pipeline, and its check.
fn planned<P>(
    spec: &'static Spec,
    plan: fn(P) -> Result<Plan, ToolError>,
    hook: Option<ArgsHook>,
) -> (ToolRoute<Server>, Check)
where
    P: DeserializeOwned + JsonSchema + Send + 'static,
{
    let check: Check = Arc::new(move |server: &Server, mut args: JsonObject| {
        if let Some(hook) = hook {
            hook(server, &mut args)?;
        }
        match super::plan_args(args, plan) {
            Ok(_) => Ok(()),
            // What a plain call answers with a result (a tool error the model reads) is the
            // task's to answer with; only what it refuses as a JSON-RPC error is refused here.
            Err(e) => super::to_mcp(e).map(|_| ()),
        }
    });
    let attr = rmcp::model::Tool::new_with_raw(
        spec.name,
        Some(spec.description.into()),
        crate::tools::schema::input_schema::<P>(),
    )
    .with_raw_output_schema(spec.reply.output_schema())
    .with_annotations(annotations(spec.title, true));
    let route = ToolRoute::new_dyn(
        attr,
        move |ctx: ToolCallContext<'_, Server>| -> BoxFuture<'_, Result<CallToolResponse, ErrorData>> {
            Box::pin(async move {
                let server = ctx.service;
                let mut args = ctx.arguments.unwrap_or_default();
                if let Some(hook) = hook {
                    hook(server, &mut args)?;
                }
                // A later round of a question asked inside the call (`clarify`).
                match clarify::answer(
                    spec.name,
                    args,
                    ctx.request_state.as_deref(),
                    ctx.input_responses.as_ref(),
                )? {
                    clarify::Answer::Reply(reply) => Ok(reply.into()),
                    clarify::Answer::Continue(args) => {
                        ask(server, spec, args, plan, ctx.request_context).await
                    }
                }
            })
        },
    );
    (route, check)
}

/// Every tool is read-only; those that ask Gemini reach out of the machine. `openWorldHint` is
/// sent only when false: true is its default (MCP's `ToolAnnotations`), and every byte of
/// `tools/list` is paid for in each client's context window.
fn annotations(title: &str, open_world: bool) -> ToolAnnotations {
    let open_world = (!open_world).then_some(false);
    ToolAnnotations::from_raw(Some(title.into()), Some(true), None, None, open_world)
}

fn listmodels_route() -> ToolRoute<Server> {
    let attr = rmcp::model::Tool::new_with_raw(
        LISTMODELS.name,
        Some(LISTMODELS.description.into()),
        rmcp::handler::server::common::schema_for_empty_input(),
    )
    .with_raw_output_schema(crate::tools::schema::output_schema::<
        listmodels::ModelsReport,
    >(&[]))
    .with_annotations(annotations(LISTMODELS.title, false));
    ToolRoute::new_dyn(
        attr,
        |ctx: ToolCallContext<'_, Server>| -> BoxFuture<'_, Result<CallToolResponse, ErrorData>> {
            Box::pin(async move { ctx.service.listmodels().await.map(Into::into) })
        },
    )
}

impl Server {
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

//! The MCP edge: the rmcp server handler, the routing of the tools' adapters, and the one place
//! where tool errors become MCP results or JSON-RPC errors. Protocol types stay here and in the
//! tools' one-line adapters; the pipeline knows nothing of MCP.

mod caller;
mod clarify;
mod compat;
mod host;
pub mod tasks;
mod tools;
mod workflows;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, CustomRequest, CustomResult, ErrorCode,
    Implementation, JsonObject, MetaObject, ProgressNotificationParam, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool_handler};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::app::App;
use caller::{client_of, owner_of, trace_parent_of};
use crate::gemini::{CallContext, Progress};
use crate::admission::{Admission, Refusal};
use crate::tools::{Plan, Reply, ToolError};

/// JSON-RPC code for a path refused by the sandbox (ARCHITECTURE.md, Errors).
pub const SANDBOX_ERROR: ErrorCode = ErrorCode(-32001);

/// The largest result size Claude Code accepts as declared by a tool
/// (`_meta["anthropic/maxResultSizeChars"]`).
pub const MAX_RESULT_SIZE_CHARS: usize = 500_000;

/// How often a waiting call tells the client it is still alive.
const HEARTBEAT: Duration = Duration::from_secs(10);

/// The server's instructions to the calling model: when to use which tool (the tools' table says),
/// and how files and threads work.
fn instructions(listed: impl Fn(&str) -> bool) -> String {
    use crate::tools::spec::{LISTMODELS, SPECS};
    let when: Vec<String> = SPECS
        .iter()
        .filter(|s| listed(s.name))
        .map(|s| format!("`{}` {}", s.name, s.use_when))
        .collect();
    format!(
        "Gemini as a second opinion. Use {}. Pass paths in `files` (directories are expanded, .gitignore \
         respected). Every reply carries a `continuation_id`: pass it back (to any tool) to continue the same \
         conversation without resending context. `{}` shows the models and aliases.",
        when.join("; "),
        LISTMODELS.name
    )
}

/// A row's arguments checked as its route checks them (parsed and planned), without running the
/// call: what a call started as a task is refused for at once (`Err`, a JSON-RPC error), as the
/// plain call would be.
pub(crate) type Check = Arc<dyn Fn(&Server, JsonObject) -> Result<(), ErrorData> + Send + Sync>;

#[derive(Clone)]
pub struct Server {
    app: Arc<App>,
    tool_router: ToolRouter<Server>,
    /// Each table tool's arguments check ([`Check`]), for calls started as tasks.
    checks: Arc<std::collections::HashMap<&'static str, Check>>,
    /// The MCP tasks (`tasks`), shared by every clone (one per HTTP session).
    tasks: Arc<tasks::Tasks>,
}

impl Server {
    pub fn app(&self) -> &App {
        &self.app
    }

    /// The MCP tasks this server runs (for the shutdown).
    pub fn tasks(&self) -> &Arc<tasks::Tasks> {
        &self.tasks
    }

    /// The body of every tool adapter: parse the arguments (naming the bad field), plan, run the
    /// pipeline with progress and cancellation, and map the outcome to MCP.
    pub(crate) async fn call_tool_with<P: DeserializeOwned>(
        &self,
        args: JsonObject,
        plan: fn(P) -> Result<Plan, ToolError>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let cap = result_cap(&self.app);
        let outcome = match plan_args(args, plan) {
            Ok(mut plan) => match self.admit(&plan, &ctx) {
                Ok(_admission) => {
                    plan.owner = owner_of(&ctx);
                    self.run(plan, &ctx).await
                }
                Err(refusal) => return Ok(refusal_to_mcp(&refusal)),
            },
            Err(e) => Err(e),
        };
        match outcome {
            Ok(reply) => Ok(to_result(reply, cap)),
            Err(ToolError::TooLarge {
                field,
                chars,
                limit,
            }) => Ok(to_result(resend_prompt(&field, chars, limit), cap)),
            Err(e) => to_mcp(e),
        }
    }

    /// Passes the call through the app's gate; the admission is held until the call ends.
    fn admit(&self, plan: &Plan, ctx: &RequestContext<RoleServer>) -> Result<Admission, Refusal> {
        self.app.admit(plan.tool, &client_of(ctx))
    }

    async fn run(
        &self,
        mut plan: Plan,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Reply, ToolError> {
        plan.trace_parent = trace_parent_of(ctx);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Progress>();
        // A task's record says what the call is doing (`tasks::StatusLine`).
        let status = ctx.extensions.get::<tasks::StatusLine>().cloned();
        let progress: crate::gemini::ProgressFn = Arc::new(move |p| {
            if let Some(status) = &status {
                status.set(&p.message);
            }
            let _ = tx.send(p);
        });
        let call = CallContext {
            cancel: ctx.ct.clone(),
            progress: Some(progress),
            // A task's record keeps the id of a background run the call starts (`tasks`).
            background: ctx
                .extensions
                .get::<crate::gemini::BackgroundRun>()
                .cloned()
                .unwrap_or_default(),
        };
        // Forward progress (and a heartbeat while waiting) when the client asked for it.
        let token = ctx.meta.get_progress_token();
        let peer = ctx.peer.clone();
        // Told when the call is over: what is still queued is sent before the result, so a
        // client never gets a call's progress after its answer (clients drop those).
        let (done_tx, mut done_rx) = tokio::sync::oneshot::channel::<()>();
        let forwarder = tokio::spawn(async move {
            let started = Instant::now();
            let mut n = 0u32;
            let mut last = String::from("working");
            let mut tick =
                tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT);
            let mut draining = false;
            loop {
                let message = if draining {
                    match rx.try_recv() {
                        Ok(p) => p.message,
                        Err(_) => break,
                    }
                } else {
                    tokio::select! {
                        p = rx.recv() => match p { Some(p) => { last = p.message.clone(); p.message } None => break },
                        _ = tick.tick() => format!("{last} ({}s)", started.elapsed().as_secs()),
                        _ = &mut done_rx => { draining = true; continue }
                    }
                };
                if let Some(token) = &token {
                    n += 1;
                    let _ = peer
                        .notify_progress(
                            ProgressNotificationParam::new(token.clone(), f64::from(n))
                                .with_message(message),
                        )
                        .await;
                }
            }
        });
        let client = client_of(ctx);
        let result = tokio::select! {
            r = self.app.run(&client, plan, &call) => r,
            _ = ctx.ct.cancelled() => Err(ToolError::Gemini(crate::gemini::GeminiError::Cancelled)),
        };
        drop(call);
        let _ = done_tx.send(());
        let abort = forwarder.abort_handle();
        if tokio::time::timeout(Duration::from_secs(2), forwarder)
            .await
            .is_err()
        {
            abort.abort();
        }
        result
    }
}

impl tasks::Host for Server {
    fn store(&self) -> &dyn crate::store::ThreadStore {
        self.app.store()
    }

    fn tasks(&self) -> &Arc<tasks::Tasks> {
        &self.tasks
    }

    fn has_tool(&self, tool: &str) -> bool {
        self.tool_router.map.contains_key(tool)
    }

    fn check(&self, request: &CallToolRequestParams) -> Result<(), ErrorData> {
        match self.checks.get(request.name.as_ref()) {
            Some(check) => check(self, request.arguments.clone().unwrap_or_default()),
            None => Ok(()),
        }
    }

    async fn plain_call(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, ErrorData> {
        let tcc = rmcp::handler::server::tool::ToolCallContext::new(self, request, ctx);
        self.tool_router.call(tcc).await
    }
}

/// The cap on a whole tool result (`MAX_REPLY_CHARS`, at most what Claude Code accepts).
fn result_cap(app: &App) -> usize {
    app.config()
        .tools
        .max_reply_chars
        .min(MAX_RESULT_SIZE_CHARS)
}

/// A tool's arguments parsed (naming the bad field) and planned.
pub(crate) fn plan_args<P: DeserializeOwned>(
    args: JsonObject,
    plan: fn(P) -> Result<Plan, ToolError>,
) -> Result<Plan, ToolError> {
    // The common parameters are flattened into each tool's struct, where serde loses the
    // field's name in errors: check them on their own first.
    parse_args::<crate::tools::Common>(args.clone())?;
    plan(parse_args::<P>(args)?)
}

/// Deserialises tool arguments, naming the offending field in the error.
pub fn parse_args<P: DeserializeOwned>(args: JsonObject) -> Result<P, ToolError> {
    let de = Value::Object(args);
    serde_path_to_error::deserialize::<_, P>(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // serde names a missing field only in its message.
        let field = if path == "." {
            inner.split('`').nth(1).unwrap_or("arguments").to_string()
        } else {
            path
        };
        ToolError::invalid(&field, inner)
    })
}

fn resend_prompt(field: &str, chars: usize, limit: usize) -> Reply {
    Reply::resend_prompt(format!(
        "`{field}` is {chars} characters, more than the {limit} this transport carries reliably. Save the text to a file \
         inside the project (for example `prompt.md`), then call again with that path in `files` and a short `{field}` \
         that refers to it."
    ))
}

/// A reply as an MCP result: Markdown text, structured content, and `_meta` with the thread id,
/// finished within `cap` characters over the whole result (both parts carry the answer).
pub fn to_result(reply: Reply, cap: usize) -> CallToolResult {
    let finished = reply.finish(Some(cap));
    let structured = serde_json::to_value(&finished).unwrap_or(Value::Null);
    let id = finished.continuation_id().map(str::to_string);
    let mut result = CallToolResult::success(vec![ContentBlock::text(finished.text)]);
    result.structured_content = Some(structured);
    if let Some(id) = id {
        let mut meta = JsonObject::new();
        meta.insert("continuation_id".into(), Value::String(id.clone()));
        meta.insert("sessionId".into(), Value::String(id));
        result = result.with_meta(Some(MetaObject(meta)));
    }
    result
}

/// The one mapping from tool errors to MCP: bad arguments → -32602 naming the field; a path the
/// sandbox refuses → -32001 naming the path and the root; everything that went wrong while
/// answering → an `isError` result whose text says what to do, as is a call the gate refused
/// (which limit, and `_meta.retry_after_ms` when the wait is known): the model reads these.
pub fn to_mcp(e: ToolError) -> Result<CallToolResult, ErrorData> {
    use crate::collector::CollectError;
    use crate::git::GitError;
    match e {
        ToolError::InvalidArgument { field, message } => Err(ErrorData::invalid_params(
            format!("invalid `{field}`: {message}"),
            Some(json!({ "field": field })),
        )),
        ToolError::Sandbox(s) => {
            let data = json!({ "path": crate::echo::echo(s.path()) });
            Err(ErrorData::new(SANDBOX_ERROR, s.to_string(), Some(data)))
        }
        ToolError::Collect(CollectError::SecretRefused { path, rule }) => {
            let message = CollectError::SecretRefused {
                path: path.clone(),
                rule: rule.clone(),
            }
            .to_string();
            Err(ErrorData::new(
                SANDBOX_ERROR,
                message,
                Some(json!({ "path": path, "rule": rule })),
            ))
        }
        ToolError::Collect(CollectError::Image { path, message }) => {
            let path = crate::echo::echo(&path);
            Err(ErrorData::invalid_params(
                format!("invalid `images`: {path}: {message}"),
                Some(json!({ "field": "images", "path": path })),
            ))
        }
        e @ ToolError::Git(GitError::NotARepository { .. } | GitError::BadRef { .. }) => {
            let field = e.field().unwrap_or_default().to_string();
            let ToolError::Git(g) = e else { unreachable!() };
            Err(ErrorData::invalid_params(
                format!("invalid `{field}`: {g}"),
                Some(json!({ "field": field })),
            ))
        }
        ToolError::TooLarge {
            field,
            chars,
            limit,
        } => Ok(to_result(
            resend_prompt(&field, chars, limit),
            MAX_RESULT_SIZE_CHARS,
        )),
        ToolError::Gemini(g) => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
            "Error executing gemini: {g}"
        ))])),
        other => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
            "Error executing gemini: {other}"
        ))])),
    }
}

/// A call the gate refused, as MCP: an `isError` result naming the limit (the model reads it),
/// with `_meta.retry_after_ms` when the wait is known.
pub fn refusal_to_mcp(r: &Refusal) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(format!(
        "Error executing gemini: {r}"
    ))]);
    if let Some(after) = r.retry_after() {
        let mut meta = JsonObject::new();
        meta.insert(
            "retry_after_ms".into(),
            json!(after.as_millis().max(1) as u64),
        );
        result = result.with_meta(Some(MetaObject(meta)));
    }
    result
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .enable_resources()
                .enable_completions()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new(
            env!("CARGO_PKG_NAME"),
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(instructions(|name| {
            self.tool_router.map.contains_key(name)
        }))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, ErrorData> {
        tasks::call_or_start(self, request, context).await
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        tasks::get_task_state(self, &request.task_id, &context).await
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        tasks::cancel_task_of(self, &request.task_id, &context).await
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        tasks::update_task_of(self, &request.task_id, &context).await
    }

    async fn list_prompts(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, ErrorData> {
        Ok(host::list_prompts())
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, ErrorData> {
        host::get_prompt(&request.name, request.arguments.as_ref()).map(Into::into)
    }

    async fn list_resources(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, ErrorData> {
        Ok(host::list_resources(&self.app, &owner_of(&context)).await)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, ErrorData> {
        Ok(host::list_resource_templates())
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, ErrorData> {
        host::read_resource(&self.app, &owner_of(&context), &request.uri)
            .await
            .map(Into::into)
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, ErrorData> {
        Ok(host::complete(&self.app, &owner_of(&context), &request.r#ref, &request.argument).await)
    }

    /// rmcp hands us a request for a standard method whose params do not parse (e.g. a
    /// `tools/call` whose `name` is a number or whose `arguments` is an array) as a custom
    /// request, and would answer -32601 "method not found". The method exists: answer -32602
    /// saying what is wrong with the params, so the client can fix its call.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        if tasks::SEP1686_METHODS.contains(&request.method.as_str()) {
            return tasks::sep1686(self, request, context).await;
        }
        let method = request.method.as_str();
        if !STANDARD_METHODS.contains(&method) {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                crate::echo::echo(method).into_owned(),
                None,
            ));
        }
        let params = request.params.unwrap_or(Value::Null);
        let detail = match method {
            "tools/call" => serde_path_to_error::deserialize::<_, CallToolRequestParams>(params)
                .err()
                .map(|e| match e.path().to_string().as_str() {
                    "." => e.into_inner().to_string(),
                    path => format!("`{path}`: {}", e.into_inner()),
                }),
            _ => None,
        };
        let detail = detail.unwrap_or_else(|| "they do not match the MCP schema".into());
        Err(ErrorData::invalid_params(
            format!("invalid params for `{method}`: {detail}"),
            None,
        ))
    }
}

/// The MCP methods a client may send a server (2025-06-18).
const STANDARD_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
];

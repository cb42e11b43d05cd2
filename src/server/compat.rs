//! Compatibility with the servers this one grew from (`GEMINI_MCP_COMPAT`, off by default): their
//! tools, by their names, parameters and result shapes, as thin adapters onto our own tools.
//!
//! - `cli-wrapper`: `chat-reply` (`prompt`, `sessionId` — the latest thread when omitted —,
//!   `model`, `systemPrompt`, `cwd`), and `chat` accepting `systemPrompt` and `cwd`. Results: the
//!   answer as text and `_meta.sessionId`; errors as text starting `Error executing gemini:`.
//! - `acp-bridge`: `gemini` (onto `investigate` with the Gemini CLI's agent, under our approval
//!   policy; calls naming the same workspace continue one thread, per caller, until
//!   `reset_session`), `list_models`, `list_sessions`, `reset_session`, returning the bridge's
//!   fields.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, tool, tool_router};
use serde_json::{Value, json};

use super::caller::owner_of;
use super::{Server, to_mcp};
use crate::app::thread_views;
use crate::config::Compat;
use crate::store::Owner;
use crate::tools::{ToolError, chat, investigate};

fn schema(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(JsonObject::new()),
    }
}

fn cli_chat_reply_schema() -> Arc<JsonObject> {
    schema(json!({
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "description": "Prompt that continues the conversation"},
            "sessionId": {"type": "string", "description": "Session ID to continue. If omitted, the latest session is used"},
            "model": {"type": "string", "description": "Model to use for this turn"},
            "systemPrompt": {"type": "string", "description": "System prompt that sets the assistant's behaviour"},
            "cwd": {"type": "string", "description": "Working directory for running the gemini CLI"}
        },
        "required": ["prompt"]
    }))
}

fn bridge_gemini_schema() -> Arc<JsonObject> {
    schema(json!({
        "type": "object",
        "properties": {
            "PROMPT": {"type": "string", "description": "Instruction sent to Gemini"},
            "cd": {"type": "string", "description": "Workspace root for Gemini (must exist)"},
            "model": {"type": "string", "description": "REQUIRED model: gemini-3.1-pro-preview for complex tasks, gemini-3-flash-preview for simple ones"},
            "approval_mode": {"type": "string", "description": "plan (read-only, default here) or default; autoEdit and yolo (they change files) only where the server allows them"},
            "image_path": {"type": "string", "description": "Image for vision (empty: none)"},
            "context": {"type": "string", "description": "Text given to Gemini with the prompt (file contents, docs, background)"},
            "allowed_mcp_servers": {"type": "array", "items": {"type": "string"}, "description": "MCP servers Gemini may load"}
        },
        "required": ["PROMPT", "cd"]
    }))
}

fn empty_schema() -> Arc<JsonObject> {
    schema(json!({"type": "object", "properties": {}}))
}

fn reset_schema() -> Arc<JsonObject> {
    schema(json!({
        "type": "object",
        "properties": {
            "workspace": {"type": "string", "description": "Workspace whose sessions to reset (empty: all)"}
        }
    }))
}

/// The `chat` tool's schema under `cli-wrapper`: ours, plus `systemPrompt` and `cwd`.
pub fn cli_chat_schema(ours: &JsonObject) -> Arc<JsonObject> {
    let mut s = ours.clone();
    if let Some(Value::Object(props)) = s.get_mut("properties") {
        props.insert(
            "systemPrompt".into(),
            json!({"type": "string", "description": "System prompt that sets the assistant's behaviour"}),
        );
        props.insert(
            "cwd".into(),
            json!({"type": "string", "description": "Working directory for running the gemini CLI"}),
        );
    }
    Arc::new(s)
}

/// The routes a profile adds.
pub fn router(profile: Compat) -> ToolRouter<Server> {
    match profile {
        Compat::CliWrapper => Server::cli_wrapper_router(),
        Compat::AcpBridge => Server::acp_bridge_router(),
    }
}

/// A bridge result: the object as structured content and as JSON text; an error when
/// `success` is false.
fn bridge(v: Value) -> CallToolResult {
    let failed = v.get("success") == Some(&Value::Bool(false));
    let mut r = CallToolResult::success(vec![ContentBlock::text(
        serde_json::to_string_pretty(&v).unwrap_or_default(),
    )]);
    r.structured_content = Some(v);
    if failed {
        r.is_error = Some(true);
    }
    r
}

fn bridge_error(message: impl Into<String>) -> CallToolResult {
    bridge(json!({"success": false, "error": message.into()}))
}

impl Server {
    /// `cli-wrapper`'s `cwd`: a directory inside the roots, else refused like any path;
    /// `systemPrompt` becomes `system_prompt`.
    pub(crate) fn cli_wrapper_args(&self, args: &mut JsonObject) -> Result<(), ErrorData> {
        if !self.app.config().tools.compat.contains(&Compat::CliWrapper) {
            return Ok(());
        }
        if let Some(v) = args.remove("systemPrompt") {
            args.entry("system_prompt").or_insert(v);
        }
        if let Some(cwd) = args.remove("cwd") {
            let Some(cwd) = cwd.as_str() else {
                return to_mcp(ToolError::invalid(
                    "cwd",
                    "must be a string: a directory of the project",
                ))
                .map(|_| ());
            };
            let sandbox = self.app.collector().sandbox();
            if let Err(e) = sandbox.resolve(cwd) {
                return to_mcp(ToolError::Sandbox(e)).map(|_| ());
            }
        }
        Ok(())
    }

    /// The thread holding `owner`'s conversation in `workspace`, while it has room for a turn
    /// (a full or deleted one: the next call starts afresh).
    async fn workspace_thread(&self, owner: &Owner, workspace: &Path) -> Option<String> {
        let id = self
            .app
            .agents()?
            .workspaces()
            .thread(owner.as_str(), workspace)?;
        let thread = thread_views::load(&self.app, owner, &id).await.ok()?;
        (thread.turns.len() < self.app.config().threads.max_turns as usize).then_some(id)
    }
}

#[tool_router(router = cli_wrapper_router, vis = "pub(crate)")]
impl Server {
    #[tool(
        name = "chat-reply",
        description = "Continues an existing Gemini session",
        annotations(title = "Continue a Gemini session", read_only_hint = true, open_world_hint = true),
        input_schema = cli_chat_reply_schema()
    )]
    async fn chat_reply(
        &self,
        Parameters(mut args): Parameters<JsonObject>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.cli_wrapper_args(&mut args)?;
        let session = args
            .remove("sessionId")
            .and_then(|v| v.as_str().map(str::to_string))
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "latest".into());
        args.insert("continuation_id".into(), Value::String(session));
        // Our chat's result: the answer as text, the thread in `_meta.sessionId`.
        self.call_tool_with(args, chat::plan, ctx).await
    }
}

#[tool_router(router = acp_bridge_router, vis = "pub(crate)")]
impl Server {
    #[tool(
        name = "gemini",
        description = "Execute AI-driven tasks using Gemini via Agent Client Protocol with multi-modal support, session management, and tool execution capabilities.",
        annotations(title = "Gemini CLI Agent", read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = true),
        input_schema = bridge_gemini_schema()
    )]
    async fn bridge_gemini(
        &self,
        Parameters(args): Parameters<JsonObject>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let get = |k: &str| args.get(k).and_then(|v| v.as_str()).map(str::to_string);
        let Some(prompt) = get("PROMPT").filter(|p| !p.trim().is_empty()) else {
            return Ok(bridge_error(
                "`PROMPT` is required: the instruction for Gemini.",
            ));
        };
        let Some(cd) = get("cd") else {
            return Ok(bridge_error(
                "`cd` is required: the workspace root (a directory of this project).",
            ));
        };
        let workspace: PathBuf = match self.app.collector().sandbox().resolve(&cd) {
            Ok(p) if p.as_path().is_dir() => p.as_path().to_path_buf(),
            Ok(_) => {
                return Ok(bridge_error(format!(
                    "Workspace directory `{cd}` does not exist."
                )));
            }
            Err(e) => return Ok(bridge_error(e.to_string())),
        };
        if get("image_path").is_some_and(|p| !p.is_empty()) {
            return Ok(bridge_error(
                "`image_path` is not supported by this server's Gemini CLI agent: leave it empty, or send the image with the `chat` tool's `images`.",
            ));
        }
        if args
            .get("allowed_mcp_servers")
            .and_then(|v| v.as_array())
            .is_some_and(|a| !a.is_empty())
        {
            return Ok(bridge_error(
                "`allowed_mcp_servers` is not supported: this server runs the Gemini CLI agent with no MCP servers; leave it out.",
            ));
        }
        let mode = get("approval_mode").unwrap_or_else(|| "plan".into());
        let mut task = prompt;
        if let Some(context) = get("context").filter(|c| !c.trim().is_empty()) {
            task = format!("{task}\n\n## Context\n{context}");
        }
        let owner = owner_of(&ctx);
        let params = investigate::InvestigateParams {
            task,
            engine: Some("gemini-cli".into()),
            approval_mode: Some(mode),
            common: crate::tools::Common {
                model: get("model"),
                continuation_id: self.workspace_thread(&owner, &workspace).await,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut plan = match investigate::plan(params) {
            Ok(p) => p,
            Err(e) => return Ok(bridge_error(e.to_string())),
        };
        let _admission = match self.admit(&plan, &ctx) {
            Ok(a) => a,
            Err(refusal) => return Ok(bridge_error(refusal.to_string())),
        };
        plan.owner = owner.clone();
        let started = std::time::Instant::now();
        match self.run(plan, &ctx).await {
            Ok(reply) => {
                if let (Some(pool), Some(thread)) = (self.app.agents(), reply.continuation_id()) {
                    pool.workspaces().set(owner.as_str(), &workspace, thread);
                }
                let agent = reply.agent();
                let mut out = json!({
                    "success": true,
                    "SESSION_ID": reply.continuation_id(),
                    "agent_messages": reply.answer_text(),
                    "stop_reason": reply.stop_reason(),
                    "duration_ms": started.elapsed().as_millis() as u64,
                    "model_used": reply.meta.model,
                });
                if let Some(a) = agent {
                    if !a.thought.is_empty() {
                        out["thought"] = json!(a.thought);
                    }
                    if !a.tool_calls.is_empty() {
                        out["tool_calls"] = json!(a.tool_calls);
                    }
                    if !a.plan.is_empty() {
                        out["plan"] = json!(a.plan);
                    }
                    out["approval_policy"] = json!(a.approval_policy);
                }
                Ok(bridge(out))
            }
            Err(e) => Ok(bridge_error(e.to_string())),
        }
    }

    #[tool(
        name = "list_models",
        description = "List the models, approval modes and the agent's state.",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false),
        input_schema = empty_schema()
    )]
    async fn bridge_list_models(&self) -> Result<CallToolResult, ErrorData> {
        let report = crate::tools::listmodels::report(self.app.gemini(), self.app.store_kind());
        let models: Vec<String> = report.models.iter().map(|m| m.id.clone()).collect();
        let modes: Vec<&str> =
            crate::gemini::usable_modes(&self.app.config().gemini.acp_allowed_modes)
                .into_iter()
                .map(|m| m.id())
                .collect();
        let current = self.app.agents().and_then(|p| p.current_model());
        Ok(bridge(json!({
            "models": models,
            "approval_modes": modes,
            "current_model": current.as_deref().unwrap_or("(not started)"),
            "agent_info": {"name": "gemini-cli"},
            "bridge_version": env!("CARGO_PKG_VERSION"),
            "process_running": current.is_some(),
        })))
    }

    #[tool(
        name = "list_sessions",
        description = "List the Gemini CLI agent's sessions.",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false),
        input_schema = empty_schema()
    )]
    async fn bridge_list_sessions(
        &self,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let owner = owner_of(&ctx);
        let Some(pool) = self.app.agents() else {
            return Ok(bridge(json!({"sessions": [], "count": 0})));
        };
        let agent_sessions = pool.sessions();
        let mut sessions = Vec::new();
        for (workspace, thread) in pool.workspaces().of(owner.as_str()) {
            let Ok(t) = thread_views::load(&self.app, &owner, &thread).await else {
                continue;
            };
            let agent = agent_sessions.iter().find(|(id, ..)| *id == thread);
            sessions.push(json!({
                "workspace": workspace.display().to_string(),
                "session_id": thread,
                "agent_session": agent.map(|(_, session, ..)| session),
                "turn_count": t.turns.len(),
                "max_turns": self.app.config().threads.max_turns,
                "model": agent.map(|(_, _, model, _)| model),
            }));
        }
        let count = sessions.len();
        Ok(bridge(json!({"sessions": sessions, "count": count})))
    }

    #[tool(
        name = "reset_session",
        description = "Reset the Gemini CLI agent's sessions of a workspace (empty: all).",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        input_schema = reset_schema()
    )]
    async fn bridge_reset_session(
        &self,
        Parameters(args): Parameters<JsonObject>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let owner = owner_of(&ctx);
        let workspace = args
            .get("workspace")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .trim()
            .to_string();
        let reset: Vec<String> = self
            .app
            .agents()
            .map(|p| p.workspaces().reset(owner.as_str(), &workspace))
            .unwrap_or_default()
            .into_iter()
            .map(|(path, _)| path.display().to_string())
            .collect();
        let count = reset.len();
        Ok(bridge(if workspace.is_empty() {
            json!({"reset": "all", "count": count})
        } else if count == 0 {
            json!({"reset": [], "count": 0, "message": "No session found for workspace"})
        } else {
            json!({"reset": reset, "count": count})
        }))
    }
}

//! The only way the Gemini CLI's agent reads the project: our read-only explore functions
//! (`explore::Explorer`, over the collector's sandbox and redaction) served to the agent's
//! sessions as an MCP server, and the private files that switch off every path of the CLI's own
//! that reads project bytes.
//!
//! The CLI runs its own read and search tools without asking, so a permission policy never sees
//! them; they are taken away instead. The agent process gets:
//! - a policy file that denies every tool (the CLI then leaves them out of the model's
//!   declarations) except this server's, which it allows; in the modes that write, the CLI's
//!   edit tools (and in `yolo` its shell) are asked for (`ask_user`), each time, so that our
//!   permission policy judges every edit and command;
//! - the plain backends' settings (`cli::system_settings`, here with no tool of the CLI's
//!   own but, in the modes that write, those), as the settings of its workspace: the process
//!   and its sessions work in its private
//!   directory (`cli::confine`), not in the project, so no workspace tree and no `GEMINI.md`
//!   of the project reach Gemini (the CLI reads a system settings file only where root owns
//!   every directory above it, and reads context files up from its working directory whatever
//!   its settings say);
//! - this server, over HTTP on the loopback with a random bearer token, answering `initialize`,
//!   `tools/list` and `tools/call` from the same `Explorer` that `investigate` uses: one body of
//!   the rule, in this process.

use std::net::SocketAddr;
use std::sync::Arc;

use agent_client_protocol::v1::schema::{HttpHeader, McpServer, McpServerHttp};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use crate::explore::Explorer;
use crate::gemini::agent_mode::AgentMode;
use crate::gemini::vocabulary::{GeminiError, cli_error};

/// The MCP server's name as the agent sees it: its tools are `mcp_project_<function>`.
pub const SERVER_NAME: &str = "project";

/// What the agent's private policy file says under `mode`: every tool denied, ours allowed, and
/// the CLI's own tools of the mode ([`AgentMode::cli_tools`]) asked for each time. Ours are named
/// whole (`mcp_project_list_files`, …): the CLI checks an MCP call a second time with the server
/// named `mcp_project`, which a rule by server name would not match. The rules are of the user
/// tier (4.x), above the CLI's own mode rules (1.x: `yolo`'s allow-all is 1.998).
pub fn policy(mode: AgentMode) -> String {
    let ours: Vec<String> = Explorer::functions()
        .iter()
        .map(|f| format!("\"mcp_{SERVER_NAME}_{}\"", served_name(&f.name)))
        .collect();
    let mut p = format!(
        "# Written by gemini-mcp-server: the agent reads the project only through `{SERVER_NAME}`.\n\
         [[rule]]\ntoolName = \"*\"\ndecision = \"deny\"\npriority = 998\n\n\
         [[rule]]\ntoolName = [{}]\ndecision = \"allow\"\npriority = 999\n",
        ours.join(", ")
    );
    let asked: Vec<String> = mode
        .cli_tools()
        .iter()
        .map(|t| format!("\"{t}\""))
        .collect();
    if !asked.is_empty() {
        p.push_str(&format!(
            "\n# AgentMode {}: each of these asks, and the server's policy answers.\n\
             [[rule]]\ntoolName = [{}]\ndecision = \"ask_user\"\npriority = 999\n",
            mode.id(),
            asked.join(", ")
        ));
    }
    p
}

/// The agent's system settings under `mode`: none of the CLI's own tools registered but the
/// mode's (an allow-list: a denied built-in `read_file` would also hide ours, which the CLI
/// matches by its short name), no workspace tree.
pub fn settings(mode: AgentMode) -> String {
    crate::gemini::gemini_cli::system_settings(Some(mode.cli_tools()))
}

/// The agent process's private directory under `mode`: its policy and its system settings.
pub async fn agent_files(mode: AgentMode) -> Result<tempfile::TempDir, GeminiError> {
    super::process::private_dir(vec![
        ("policy.toml", policy(mode)),
        (crate::gemini::gemini_cli::SETTINGS, settings(mode)),
    ])
    .await
}

/// The running server: its address and token; stopped when dropped.
pub struct ProjectTools {
    addr: SocketAddr,
    token: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ProjectTools {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Served {
    explorer: Arc<Explorer>,
    token: String,
}

impl ProjectTools {
    /// Serves `explorer` on a loopback port chosen by the system.
    pub async fn start(explorer: Arc<Explorer>) -> Result<ProjectTools, GeminiError> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| {
                cli_error(format!(
                    "could not open a loopback port for the Gemini CLI agent's project tools: {e}"
                ))
            })?;
        let addr = listener.local_addr().map_err(|e| {
            cli_error(format!(
                "the Gemini CLI agent's project tools have no address: {e}"
            ))
        })?;
        let token = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let state = Arc::new(Served {
            explorer,
            token: token.clone(),
        });
        let app = axum::Router::new()
            .route(
                "/mcp",
                axum::routing::post(handle)
                    .get(not_allowed)
                    .delete(not_allowed),
            )
            .with_state(state);
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(error = %e, "the Gemini CLI agent's project tools stopped");
            }
        });
        Ok(ProjectTools { addr, token, task })
    }

    /// The server as a session's `mcpServers` entry.
    pub fn entry(&self) -> McpServer {
        McpServer::Http(
            McpServerHttp::new(SERVER_NAME, format!("http://{}/mcp", self.addr)).headers(vec![
                HttpHeader::new("Authorization", format!("Bearer {}", self.token)),
            ]),
        )
    }
}

async fn not_allowed() -> StatusCode {
    StatusCode::METHOD_NOT_ALLOWED
}

/// One JSON-RPC message: a request answered with JSON, a notification with 202.
async fn handle(State(s): State<Arc<Served>>, headers: HeaderMap, body: Bytes) -> Response {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if !bool::from(given.as_bytes().ct_eq(s.token.as_bytes())) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return reply(Value::Null, Err((-32700, "not JSON".into())));
    };
    let Some(id) = message.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let method = message["method"].as_str().unwrap_or("");
    tracing::debug!(method, "the Gemini CLI agent's project tools");
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let result = match method {
        "initialize" => Ok(json!({
            "protocolVersion": params["protocolVersion"].as_str().unwrap_or("2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": SERVER_NAME, "version": env!("CARGO_PKG_VERSION")},
        })),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({ "tools": tools() })),
        "tools/call" => call(&s.explorer, params).await,
        other => Err((
            -32601,
            format!("method `{}` not found", crate::echo::echo(other)),
        )),
    };
    reply(id, result)
}

fn reply(id: Value, result: Result<Value, (i64, String)>) -> Response {
    let body = match result {
        Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
        Err((code, message)) => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        }
    };
    axum::Json(body).into_response()
}

/// Explore functions served under another name: the CLI hides an MCP tool whose short name is
/// one of its own tools' (`read_file`), even when that tool is not registered.
const RENAMED: &[(&str, &str)] = &[("read_file", "read_lines")];

/// The name the agent sees for `function`, and back.
fn served_name(function: &str) -> &str {
    RENAMED
        .iter()
        .find(|(f, _)| *f == function)
        .map_or(function, |(_, served)| served)
}

fn function_name(served: &str) -> &str {
    RENAMED
        .iter()
        .find(|(_, s)| *s == served)
        .map_or(served, |(f, _)| f)
}

/// The explore functions as MCP tools, each marked read-only.
fn tools() -> Vec<Value> {
    Explorer::functions()
        .iter()
        .map(|f| {
            json!({
                "name": served_name(&f.name),
                "description": f.description,
                "inputSchema": f.parameters,
                "annotations": {"readOnlyHint": true},
            })
        })
        .collect()
}

/// Runs one function off the runtime; a refused call is a tool error the model can read.
async fn call(explorer: &Arc<Explorer>, params: Value) -> Result<Value, (i64, String)> {
    let name = function_name(params["name"].as_str().unwrap_or("")).to_string();
    let args = params
        .get("arguments")
        .cloned()
        .filter(|a| !a.is_null())
        .unwrap_or_else(|| json!({}));
    let explorer = explorer.clone();
    let outcome = tokio::task::spawn_blocking(move || explorer.execute(&name, &args))
        .await
        .map_err(|e| (-32603, format!("the call failed: {e}")))?;
    Ok(json!({
        "content": [{"type": "text", "text": outcome.text}],
        "isError": !outcome.ok,
    }))
}

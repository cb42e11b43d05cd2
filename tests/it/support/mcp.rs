//! Drives the real `gemini-mcp` binary over stdio with rmcp's client, in a hermetic environment:
//! a cleared environment, a temporary HOME and state directory, the given project root.

use std::path::Path;

use rmcp::model::{CallToolRequestParams, CallToolResult, ErrorData, JsonObject};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;

use crate::support::Hermetic as _;

pub type Client = RunningService<RoleClient, ()>;

/// The binary under test.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_gemini-mcp")
}

/// A command for the binary with a cleared environment rooted at `root`, plus `vars`.
pub fn command(root: &Path, vars: &[(&str, &str)]) -> tokio::process::Command {
    std_command(root, vars).into()
}

/// [`command`], for a test that drives the process without the async runtime.
pub fn std_command(root: &Path, vars: &[(&str, &str)]) -> std::process::Command {
    let mut cmd = std::process::Command::new(binary());
    cmd.hermetic_env()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", root.join(".home"))
        .env("GEMINI_MCP_STATE_DIR", root.join(".state"))
        .env("PROJECT_ROOT", root)
        .env("GEMINI_MCP_STORE", "memory")
        .env("GEMINI_MCP_LOG", "warn")
        // Hermetic: a Gemini CLI installed on this machine must not become the backend.
        .env("GEMINI_CLI_PATH", root.join(".no-gemini-cli"))
        .current_dir(root);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd
}

/// Starts the server over stdio and completes `initialize`.
pub async fn start(root: &Path, vars: &[(&str, &str)]) -> Client {
    let transport = TokioChildProcess::new(command(root, vars)).expect("spawn gemini-mcp");
    ().serve(transport).await.expect("initialize")
}

pub fn args(v: Value) -> JsonObject {
    match v {
        Value::Object(m) => m,
        other => panic!("arguments must be an object, got {other}"),
    }
}

/// Calls a tool; `Ok` is a tool result (possibly `isError`), `Err` a JSON-RPC error.
pub async fn call(
    client: &Client,
    tool: &'static str,
    arguments: Value,
) -> Result<CallToolResult, ErrorData> {
    match client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args(arguments)))
        .await
    {
        Ok(r) => Ok(r),
        Err(ServiceError::McpError(e)) => Err(e),
        Err(other) => panic!("transport failure calling {tool}: {other}"),
    }
}

/// The text of a result's first content block.
pub fn text(r: &CallToolResult) -> String {
    r.content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

/// A client that records the progress notifications it receives.
#[derive(Clone, Default)]
pub struct Recorder {
    pub progress: std::sync::Arc<std::sync::Mutex<Vec<rmcp::model::ProgressNotificationParam>>>,
}

impl rmcp::ClientHandler for Recorder {
    fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.progress.lock().unwrap().push(params);
        std::future::ready(())
    }
}

pub type RecordingClient = RunningService<RoleClient, Recorder>;

/// Starts the server with a client that records progress notifications.
pub async fn start_recording(root: &Path, vars: &[(&str, &str)]) -> (RecordingClient, Recorder) {
    let recorder = Recorder::default();
    let transport = TokioChildProcess::new(command(root, vars)).expect("spawn gemini-mcp");
    let client = recorder.clone().serve(transport).await.expect("initialize");
    (client, recorder)
}

/// The API key the tests give the server; it must never come back in a reply or a log.
pub const KEY: &str = "AIzaTEST-key-never-to-be-printed-0123456789";

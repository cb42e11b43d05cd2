//! The server's life under a client: Claude Code stops it with its first signal.

use serde_json::json;

use super::{Client, Project};
use crate::support::scripted_model::{ToolCall, calls_in_order};

/// Claude Code stops a stdio server with SIGINT, then SIGTERM 100 ms later, then SIGKILL at
/// 500 ms; its debug log says which it took. Ours exits on the first signal, by itself.
#[test]
fn claude_code_stops_the_server_with_its_first_signal() {
    let project = Project::new();
    let brain = calls_in_order(vec![ToolCall::new("chat", json!({"prompt": "Hello?"}))]);
    let Some((got, log)) = project.drive_logged(Client::ClaudeCode, brain) else {
        return;
    };
    assert_eq!(got.len(), 1, "tool results received: {got:?}");
    let ours: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("MCP server \"gemini\""))
        .collect();
    assert!(
        ours.iter().any(|l| l.contains("exited cleanly")),
        "Claude Code did not see our server exit cleanly: {ours:#?}"
    );
    let forced: Vec<&&str> = ours
        .iter()
        .filter(|l| l.contains("SIGINT failed") || l.contains("SIGKILL"))
        .collect();
    assert!(
        forced.is_empty(),
        "our server did not exit on SIGINT; Claude Code escalated: {forced:#?}"
    );
}

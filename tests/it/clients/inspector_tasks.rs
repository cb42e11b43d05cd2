//! The MCP Inspector's CLI (2.12.0) in its modern era (2026-07-28): it declares the tasks
//! extension, gets a task for a call that asks Gemini, polls it and prints its reply — the same
//! reply its legacy era gets from the plain call.

use serde_json::Value;

use super::{Client, Project, client_command, locate, private_home};
use crate::support::fake_gemini::Script;
use crate::support::mcp;

const ANSWER: &str = "INSPECTED-ANSWER: keep the sorted vector.";

/// The Inspector's `tools/call` of `chat` in `era`: its JSON output and our server's log.
fn inspect(era: &str) -> Option<(Value, String)> {
    let (bin, path) = locate(Client::Inspector)?;
    let project = Project::new();
    project
        .gemini
        .push(Script::text(ANSWER).delay_headers(std::time::Duration::from_secs(2)));
    let mut cmd = client_command(&bin);
    cmd.arg("--cli").arg(mcp::binary());
    for (k, v) in project.server_env() {
        let v = if k == "GEMINI_MCP_LOG" {
            "gemini_mcp_server::server=debug,warn".into()
        } else {
            v
        };
        cmd.arg("-e").arg(format!("{k}={v}"));
    }
    cmd.args([
        "--protocol-era",
        era,
        "--method",
        "tools/call",
        "--tool-name",
        "chat",
    ])
    .args([
        "--tool-arg",
        "prompt=Is a trie overkill?",
        "--format",
        "json",
    ])
    .env("PATH", &path)
    .envs(private_home(project.root().join(".home")))
    .current_dir(project.root());
    let out = cmd.output().expect("run the Inspector");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "inspector ({era}): {stderr}");
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "inspector ({era}): {e}: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    Some((v, stderr))
}

#[test]
fn the_inspector_runs_a_long_call_as_a_task_in_its_modern_era() {
    let Some((modern, log)) = inspect("modern") else {
        return;
    };
    assert!(
        log.contains("the call runs as a task"),
        "not run as a task; server log:\n{log}"
    );
    let text = modern["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains(ANSWER), "{modern}");
    assert!(
        modern["result"]["structuredContent"]["continuation_id"].is_string(),
        "{modern}"
    );

    let Some((legacy, log)) = inspect("legacy") else {
        return;
    };
    assert!(
        !log.contains("the call runs as a task"),
        "legacy ran as a task:\n{log}"
    );
    let plain = legacy["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(plain.contains(ANSWER), "{legacy}");
}

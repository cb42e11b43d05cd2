//! A review longer than the client's tool timeout, with the real clients. Claude Code's tool
//! timeout is set small (`MCP_TOOL_TIMEOUT`) and the stand-in Gemini answers after it. Run as
//! `claude -p` (its SDK entry point, which asks for no task) the call times out and the model
//! gets an error: the failure tasks remove; the README's advice for it (`MCP_TOOL_TIMEOUT=600000`)
//! brings the answer. Run interactively, on a pseudo-terminal (tmux), Claude Code declares the
//! tasks extension, the call returns a task at once, Claude Code polls it in the background, and
//! Gemini's answer reaches the model as the task's notification. The Codex CLI, which declares no
//! tasks, times out the same way under a small `tool_timeout_sec`, and not under the README's.

#![cfg(unix)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Client, Project, locate};
use crate::support::anthropic_api::AnthropicApi;
use crate::support::fake_gemini::Script;
use crate::support::mcp;
use crate::support::scripted_model::{ToolCall, calls_in_order};

const ANSWER: &str = "LATE-REVIEW: add() subtracts; fix it before the release.";
/// Claude Code's tool timeout in these runs.
const TOOL_TIMEOUT_MS: u64 = 4_000;
/// How long the stand-in Gemini takes to answer: past the tool timeout.
const GEMINI_TAKES: Duration = Duration::from_secs(9);

fn review_call() -> ToolCall {
    ToolCall::new(
        "codereview",
        json!({"files": ["src/lib.rs"], "context": "add() should add two numbers."}),
    )
}

fn late_review() -> Script {
    Script::json(json!({"summary": ANSWER, "verdict": "needs_changes", "findings": []}))
        .delay_headers(GEMINI_TAKES)
}

/// `claude -p` on the late review with its tool timeout at `timeout_ms`: what its model received.
fn print_mode(timeout_ms: u64) -> Option<Vec<crate::support::scripted_model::Received>> {
    let project = Project::new();
    project.gemini.push(late_review());
    let (bin, path) = locate(Client::ClaudeCode)?;
    let home = tempfile::tempdir().unwrap();
    let api = AnthropicApi::start(calls_in_order(vec![review_call()]));
    let config = write_mcp_config(&project, home.path());
    let mut cmd = super::client_command(&bin);
    cmd.args(["-p", "Ask Gemini, then report what it said."])
        .arg("--mcp-config")
        .arg(&config)
        .args(["--strict-mcp-config", "--allowedTools", "mcp__gemini__*"])
        .envs(claude_env(home.path(), &api))
        .env("MCP_TOOL_TIMEOUT", timeout_ms.to_string());
    super::run(cmd, &path, &project.root(), home.path(), "claude");
    Some(api.received())
}

#[test]
fn claude_code_print_mode_times_out_on_a_long_review_unless_its_timeout_is_raised() {
    let Some(got) = print_mode(TOOL_TIMEOUT_MS) else {
        return;
    };
    assert_eq!(got.len(), 1, "tool results: {got:?}");
    assert!(
        got[0].is_error
            && got[0].text.to_lowercase().contains("timed out")
            && !got[0].text.contains(ANSWER),
        "expected the call to time out; the model received: {got:?}"
    );
    // The README's advice for `claude -p`.
    let Some(got) = print_mode(600_000) else {
        return;
    };
    assert_eq!(got.len(), 1, "tool results: {got:?}");
    assert!(
        !got[0].is_error && got[0].text.contains(ANSWER),
        "with MCP_TOOL_TIMEOUT=600000 the review did not arrive: {got:?}"
    );
}

#[test]
fn codex_times_out_on_a_long_review_unless_its_timeout_is_raised() {
    for (timeout_secs, arrives) in [(3, false), (600, true)] {
        let project = Project::new();
        project.gemini.push(late_review());
        let Some((bin, path)) = locate(Client::Codex) else {
            return;
        };
        let home = tempfile::tempdir().unwrap();
        let got = project.drive_codex_timeout(
            &bin,
            &path,
            home.path(),
            calls_in_order(vec![review_call()]),
            timeout_secs,
        );
        assert_eq!(got.len(), 1, "tool_timeout_sec = {timeout_secs}: {got:?}");
        assert_eq!(
            got[0].text.contains(ANSWER),
            arrives,
            "tool_timeout_sec = {timeout_secs}: the model received {got:?}"
        );
    }
}

#[test]
fn interactive_claude_code_gets_a_long_review_through_a_task() {
    let project = Project::new();
    project.gemini.push(late_review());
    let Some((bin, path)) = locate(Client::ClaudeCode) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let api = AnthropicApi::start(calls_in_order(vec![review_call()]));
    let config = write_mcp_config(&project, home.path());
    trust(home.path(), &project.root());
    // The client in a terminal of its own, started by a script that holds its environment.
    let script = home.path().join("claude.sh");
    let mut env: Vec<(String, String)> = claude_env(home.path(), &api)
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    env.push(("PATH".into(), path));
    env.push(("MCP_TOOL_TIMEOUT".into(), TOOL_TIMEOUT_MS.to_string()));
    env.push(("TERM".into(), "xterm-256color".into()));
    env.push(("GEMINI_MCP_TODAY".into(), crate::support::TODAY.into()));
    let exports: String = env
        .iter()
        .map(|(k, v)| format!("export {k}={}\n", quote(v)))
        .collect();
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncd {}\n{exports}exec {} --mcp-config {} --strict-mcp-config --allowedTools 'mcp__gemini__*' --debug-file {}\n",
            quote(&project.root().display().to_string()),
            quote(&bin.display().to_string()),
            quote(&config.display().to_string()),
            quote(&home.path().join("claude-debug.log").display().to_string()),
        ),
    )
    .unwrap();
    let socket = home.path().join("tmux.sock");
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args(args)
            .output()
    };
    let Ok(started) = tmux(&[
        "new-session",
        "-d",
        "-x",
        "200",
        "-y",
        "50",
        "sh",
        &script.display().to_string(),
    ]) else {
        if std::env::var("GEMINI_MCP_REQUIRE_CLIENTS").as_deref() == Ok("1") {
            panic!("GEMINI_MCP_REQUIRE_CLIENTS=1 but tmux is not installed");
        }
        eprintln!("skipped: tmux is not installed");
        return;
    };
    assert!(started.status.success(), "tmux: {started:?}");
    let _stop = Stop(socket.clone());
    let screen = || {
        tmux(&["capture-pane", "-p"])
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    };

    // The prompt is typed once our server is connected (Claude Code connects its MCP servers
    // while its prompt is already shown).
    let log_file = home.path().join("claude-debug.log");
    let connected = || {
        std::fs::read_to_string(&log_file)
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains("\"gemini\"") && l.to_lowercase().contains("connected"))
    };
    let ready = Instant::now() + Duration::from_secs(40);
    while !connected() && Instant::now() < ready {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        connected(),
        "our server never connected; screen:\n{}",
        screen()
    );
    let typed = tmux(&[
        "send-keys",
        "-l",
        "Ask Gemini to review src/lib.rs, then report what it said.",
    ]);
    assert!(typed.is_ok_and(|o| o.status.success()));
    std::thread::sleep(Duration::from_millis(500));
    assert!(tmux(&["send-keys", "Enter"]).is_ok_and(|o| o.status.success()));

    // The call comes back at once as a task: the model's tool result does not wait for Gemini.
    let began = Instant::now();
    let deadline = began + Duration::from_secs(100);
    let mut first_result_at = None;
    let mut answered = false;
    while Instant::now() < deadline {
        if first_result_at.is_none() && !api.received().is_empty() {
            first_result_at = Some(began.elapsed());
        }
        if api
            .requests()
            .iter()
            .any(|(_, body)| body["messages"].to_string().contains(ANSWER))
        {
            answered = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let shown = screen();
    let log = std::fs::read_to_string(home.path().join("claude-debug.log")).unwrap_or_default();
    let log_tail: String = {
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(80)..].join("\n")
    };
    assert!(
        answered,
        "Gemini's answer never reached Claude's model; the model received {:?}\nscreen:\n{shown}\nlog:\n{log_tail}",
        api.received()
    );
    let got = api.received();
    assert!(
        got.iter()
            .all(|r| !r.text.to_lowercase().contains("timed out")),
        "{got:?}"
    );
    // The call's own result was the task, at once, before Gemini answered; Gemini's answer came
    // later, as Claude Code's notification that the task completed.
    assert_eq!(got.len(), 1, "tool results: {got:?}");
    assert!(
        got[0].text.contains("server-side task") && !got[0].text.contains(ANSWER),
        "the call's result was not a task: {}",
        got[0].text
    );
    let at = first_result_at.expect("a first result");
    assert!(
        at < GEMINI_TAKES,
        "the call's result came after {at:?}, not at once"
    );
    let notified = api.requests().iter().any(|(_, body)| {
        body["messages"].as_array().into_iter().flatten().any(|m| {
            m["role"] == "user"
                && m["content"].as_array().into_iter().flatten().any(|b| {
                    b["type"] == "text"
                        && b["text"]
                            .as_str()
                            .is_some_and(|t| t.contains("task-notification") && t.contains(ANSWER))
                })
        })
    });
    assert!(
        notified,
        "the answer did not come as the task's notification"
    );
    assert_eq!(project.gemini.generate_requests().len(), 1);
}

/// The server entry of Claude Code's `--mcp-config`.
fn write_mcp_config(project: &Project, home: &Path) -> std::path::PathBuf {
    let config = home.join("mcp.json");
    let server = json!({"mcpServers": {"gemini": {
        "type": "stdio", "command": mcp::binary(), "args": [], "env": project.server_env_json()}}});
    std::fs::write(&config, server.to_string()).unwrap();
    config
}

/// Claude Code's environment: a private home, the stand-in API, nothing sent anywhere else, and
/// the small tool timeout.
fn claude_env(home: &Path, api: &AnthropicApi) -> Vec<(&'static str, String)> {
    let h = home.display().to_string();
    vec![
        ("HOME", h.clone()),
        ("USERPROFILE", h),
        (
            "CLAUDE_CONFIG_DIR",
            home.join(".claude").display().to_string(),
        ),
        ("ANTHROPIC_BASE_URL", api.base_url()),
        ("ANTHROPIC_API_KEY", "sk-ant-stand-in".into()),
        ("DISABLE_TELEMETRY", "1".into()),
        ("DISABLE_AUTOUPDATER", "1".into()),
        ("DISABLE_ERROR_REPORTING", "1".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        ("ENABLE_TOOL_SEARCH", "false".into()),
    ]
}

/// What a first run of interactive Claude Code would ask before it starts: onboarding done, the
/// project trusted, the key approved.
fn trust(home: &Path, project: &Path) {
    let state: Value = json!({
        "hasCompletedOnboarding": true,
        "theme": "dark",
        "bypassPermissionsModeAccepted": true,
        "customApiKeyResponses": {"approved": ["sk-ant-stand-in"[..].chars().rev().take(20).collect::<String>().chars().rev().collect::<String>()], "rejected": []},
        "projects": {project.display().to_string(): {
            "hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true,
            "allowedTools": []}}
    });
    let dir = home.join(".claude");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(".claude.json"), state.to_string()).unwrap();
    std::fs::write(home.join(".claude.json"), state.to_string()).unwrap();
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Stops the tmux server (and the client in it) when the test ends.
struct Stop(std::path::PathBuf);

impl Drop for Stop {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.0)
            .arg("kill-server")
            .output();
    }
}

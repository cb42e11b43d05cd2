//! The Gemini CLI's agent reads only through the server: the real Gemini CLI (`engine:
//! "gemini-cli"`) against the stand-in Gemini, which asks for the project's secret files by every
//! tool the CLI has and by ours. Nothing of a secret may reach any request Gemini receives in
//! `plan`, `default` and `autoEdit` (the operator allowing it: the CLI's edit tools are the
//! agent's, not its read, search or shell tools); ordinary files are still read, through our
//! tools. In `yolo` (allowed too) the CLI's shell is the agent's: that is what the mode no longer
//! holds, and the reply says so.

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientRequest, ServerResult};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};

use crate::clients::{Client, locate};
use crate::support::fake_gemini::{FakeGemini, Recorded, Script};
use crate::support::mcp;

/// The secret values: none may appear in a request to Gemini.
const ENV_KEY: &str = "sk-live-Zq8vR2mN5xT1wY7uK3pL9dF4hJ6gB0cV";
const SSH_BODY: &str = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZWQy";
const YML_VALUE: &str = "Vx7-hunter2-yml-Kq4Rt9Lm";
const INLINE_KEY: &str = "sk-proj-Wm3Np8Qr2St6Uv1Xy5Za9Bc4De7Fg0HjKkL";
/// In an ordinary file: it must reach Gemini, through our tools.
const ORDINARY: &str = "ORDINARY-CONTENT-4417";
const TASK: &str = "SECRETS-TASK: why does add(2, 2) return 0?";

fn project() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let w = |p: &str, text: &str| crate::support::project::write(&root, p, text);
    w(
        "src/lib.rs",
        &format!("// {ORDINARY}\npub fn add(a: i32, b: i32) -> i32 {{\n    a - b\n}}\n"),
    );
    w(
        "src/settings.py",
        &format!("DEBUG = True\nOPENAI_API_KEY = \"{INLINE_KEY}\"\n"),
    );
    w(".env", &format!("OPENAI_API_KEY={ENV_KEY}\n"));
    w(
        "deploy/id_rsa",
        &format!(
            "-----BEGIN OPENSSH PRIVATE KEY-----\n{SSH_BODY}\n-----END OPENSSH PRIVATE KEY-----\n"
        ),
    );
    w(
        "config/secrets.yml",
        &format!("production:\n  db_password: {YML_VALUE}\n"),
    );
    (dir, root)
}

/// Every way the CLI's own tools could read the secrets, as function calls.
fn cli_calls(root: &std::path::Path) -> Vec<(&'static str, Value)> {
    let at = |p: &str| root.join(p).display().to_string();
    let mut calls = Vec::new();
    for p in [
        ".env",
        "deploy/id_rsa",
        "config/secrets.yml",
        "src/settings.py",
    ] {
        calls.push(("read_file", json!({"file_path": at(p)})));
    }
    calls.extend([
        (
            "read_many_files",
            json!({"include": ["**/*", ".env", "deploy/id_rsa", "config/secrets.yml"]}),
        ),
        (
            "grep_search",
            json!({"pattern": "OPENAI_API_KEY|PRIVATE|db_password", "dir_path": at(".")}),
        ),
        (
            "search_file_content",
            json!({"pattern": "OPENAI_API_KEY|PRIVATE|db_password"}),
        ),
        ("glob", json!({"pattern": "**/*"})),
        ("list_directory", json!({"dir_path": at("deploy")})),
        (
            "run_shell_command",
            json!({"command": "cat .env deploy/id_rsa config/secrets.yml src/settings.py", "description": "read"}),
        ),
        (
            "web_fetch",
            json!({"prompt": format!("Summarise file://{}", at(".env"))}),
        ),
    ]);
    calls
}

/// The same through our tools: refused or redacted; and an ordinary file, read.
fn our_calls() -> Vec<(&'static str, Value)> {
    let mut calls = Vec::new();
    for p in [
        ".env",
        "deploy/id_rsa",
        "config/secrets.yml",
        "src/settings.py",
    ] {
        calls.push(("mcp_project_read_lines", json!({"path": p})));
    }
    calls.extend([
        (
            "mcp_project_search_text",
            json!({"pattern": "OPENAI_API_KEY"}),
        ),
        ("mcp_project_list_files", json!({})),
        ("mcp_project_read_lines", json!({"path": "src/lib.rs"})),
    ]);
    calls
}

async fn investigate(client: &mcp::RecordingClient, mode: &str) -> rmcp::model::CallToolResult {
    let req = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
        CallToolRequestParams::new("investigate").with_arguments(mcp::args(json!({
            "task": TASK, "engine": "gemini-cli", "approval_mode": mode, "model": "flash"
        }))),
    ));
    let mut options = PeerRequestOptions::no_options();
    options.timeout = Some(Duration::from_secs(120));
    let handle = client.send_cancellable_request(req, options).await.unwrap();
    match handle.await_response().await.unwrap() {
        ServerResult::CallToolResult(r) => r,
        other => panic!("unexpected {other:?}"),
    }
}

/// The function responses Gemini received, by name.
fn function_responses(requests: &[Recorded]) -> Vec<(String, String)> {
    requests
        .iter()
        .flat_map(|r| r.body["contents"].as_array().cloned().unwrap_or_default())
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p.get("functionResponse").cloned())
        .map(|f| {
            (
                f["name"].as_str().unwrap_or("").to_string(),
                f["response"].to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn the_real_gemini_clis_agent_reads_no_secret_in_any_mode_but_yolo() {
    let Some((bin, path)) = locate(Client::GeminiCli) else {
        return;
    };
    let (_dir, root) = project();
    let home = tempfile::tempdir().unwrap();
    crate::clients::gemini_cli_home(home.path());

    let model = FakeGemini::start();
    let (cli, ours) = (cli_calls(&root), our_calls());
    model.respond_with(move |req: &Recorded| {
        if !req.is_stream() || !req.raw_body.contains("SECRETS-TASK") {
            return None;
        }
        // Each turn's thought signature is replayed in the next request: it says where we are.
        Some(if req.raw_body.contains("c2lnLXR3bw==") {
            Script::text("SECRETS-ANSWER: add subtracts (src/lib.rs:3).")
        } else if req.raw_body.contains("c2lnLW9uZQ==") {
            Script::calls(&ours, "c2lnLXR3bw==", [100, 5, 5])
        } else {
            Script::calls(&cli, "c2lnLW9uZQ==", [100, 5, 5])
        })
    });
    let vars = crate::clients::gemini_cli_server_env(
        &bin,
        &path,
        home.path(),
        &model.base_url(),
        &[("GEMINI_MCP_ACP_ALLOW_MODES", "autoEdit,yolo")],
    );
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (client, _recorder) = mcp::start_recording(&root, &refs).await;
    let mut failures = Vec::new();
    for mode in ["plan", "default", "autoEdit", "yolo"] {
        model.clear_requests();
        let r = investigate(&client, mode).await;
        let text = mcp::text(&r);
        let requests = model.requests();
        // Nothing of a secret in anything Gemini received (but in `yolo`, below).
        for (what, secret) in [
            (".env", ENV_KEY),
            ("deploy/id_rsa", SSH_BODY),
            ("config/secrets.yml", YML_VALUE),
            ("src/settings.py", INLINE_KEY),
        ] {
            if mode != "yolo" && requests.iter().any(|q| q.raw_body.contains(secret)) {
                failures.push(format!("{mode}: {what}'s secret reached Gemini"));
            }
        }
        if mode == "yolo" {
            // Allowed by the operator, `yolo` gives the agent the CLI's shell, which reads beside
            // the sandbox: the call runs, says so, and the command's output reaches Gemini.
            let s = r.structured_content.clone().unwrap_or(Value::Null);
            let policy = s["agent"]["approval_policy"].as_str().unwrap_or("");
            if r.is_error == Some(true) || !policy.contains("Not held") {
                failures.push(format!("{mode}: {text}"));
            }
            let responses = function_responses(&requests);
            if !responses
                .iter()
                .any(|(n, r)| n == "run_shell_command" && r.contains("\"output\""))
            {
                failures.push(format!("{mode}: the shell did not run: {responses:?}"));
            }
            continue;
        }
        if r.is_error == Some(true) {
            failures.push(format!("{mode}: failed: {text}"));
            continue;
        }
        let s = r.structured_content.clone().unwrap_or(Value::Null);
        if !s["answer"]
            .as_str()
            .unwrap_or("")
            .contains("SECRETS-ANSWER")
        {
            failures.push(format!("{mode}: no answer: {s}"));
        }
        // The ordinary file was read, through our tools; the secret files were refused by them.
        let responses = function_responses(&requests);
        let read = |name: &str, needle: &str| {
            responses
                .iter()
                .any(|(n, r)| n.ends_with(name) && r.contains(needle))
        };
        if !read("project_read_lines", ORDINARY) {
            let names: Vec<&str> = responses.iter().map(|(n, _)| n.as_str()).collect();
            let declared: Vec<String> = requests
                .iter()
                .filter(|q| q.is_stream())
                .map(|q| {
                    q.body["tools"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .flat_map(|t| {
                            t["functionDeclarations"]
                                .as_array()
                                .cloned()
                                .unwrap_or_default()
                        })
                        .map(|d| d["name"].as_str().unwrap_or("").to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .collect();
            failures.push(format!(
                "{mode}: src/lib.rs not read through our tools; results: {names:?}; last: {:?}; declared: {declared:?}",
                responses.last()
            ));
        }
        if !read("project_read_lines", "looks like a secret")
            && !read("project_read_lines", "secret")
        {
            failures.push(format!(
                "{mode}: our read_file did not refuse a secret file"
            ));
        }
        if !read("project_read_lines", "[REDACTED") {
            failures.push(format!(
                "{mode}: src/settings.py not redacted by our read_file"
            ));
        }
    }
    client.cancel().await.unwrap();
    assert!(failures.is_empty(), "{failures:#?}");
}

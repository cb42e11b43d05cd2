//! The real Gemini CLI (pinned, from npm) as the agent, behind the fake Gemini API: it explores
//! over ACP under our policy, and edits only inside the project where the operator allows it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{acp_processes_with_home, call, files_holding, structured, text_of};
use crate::support::mcp;

/// The real Gemini CLI (pinned, from npm) in ACP mode, behind the fake Gemini API: its model
/// asks for a shell command, then to read a file through our tools, then answers. In every mode
/// the CLI has no shell (its own tools are denied); the read runs; the answer, the tool calls and
/// the session come back; no process is left behind.
#[tokio::test]
async fn the_real_gemini_cli_explores_over_acp_under_our_policy() {
    use crate::clients::{Client, locate};
    use crate::support::fake_gemini::{FakeGemini, Recorded, Script};
    let Some((bin, path)) = locate(Client::GeminiCli) else {
        return;
    };
    let project = crate::support::project::with(&[crate::support::project::BUGGY_ADD]);
    let root = std::fs::canonicalize(project.path()).unwrap();
    let home = tempfile::tempdir().unwrap();
    crate::clients::gemini_cli_home(home.path());

    let model = FakeGemini::start();
    let file = root.join("src/lib.rs").display().to_string();
    let pwned = root.join("pwned");
    let command = format!("touch {}", pwned.display());
    model.respond_with(move |req: &Recorded| {
        if !req.is_stream() || !req.raw_body.contains("\"mcp_project_read_lines\"") {
            return None;
        }
        let responses = req.raw_body.matches("\"functionResponse\"").count();
        Some(match responses {
            0 => Script::calls(
                &[(
                    "run_shell_command",
                    json!({"command": command, "description": "touch"}),
                )],
                "c2lnLW9uZQ==",
                [100, 5, 5],
            ),
            1 => Script::calls(
                &[("mcp_project_read_lines", json!({"path": file}))],
                "c2lnLXR3bw==",
                [100, 5, 5],
            ),
            _ => Script::text("REAL-CLI-ANSWER: add subtracts (src/lib.rs:2)."),
        })
    });
    let vars =
        crate::clients::gemini_cli_server_env(&bin, &path, home.path(), &model.base_url(), &[]);
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (client, recorder) = mcp::start_recording(&root, &refs).await;
    for mode in ["plan", "default"] {
        model.clear_requests();
        let r = call(
            &client,
            json!({"task": "Why does add(2, 2) return 0?", "engine": "gemini-cli",
                   "approval_mode": mode, "model": "flash"}),
            Duration::from_secs(120),
        )
        .await
        .unwrap();
        let s = structured(&r);
        assert_ne!(r.is_error, Some(true), "{mode}: {}", text_of(&r));
        assert_eq!(
            s["answer"], "REAL-CLI-ANSWER: add subtracts (src/lib.rs:2).",
            "{mode}: {s}"
        );
        assert_eq!(s["stop_reason"], "end_turn", "{s}");
        let a = &s["agent"];
        assert!(!a["session_id"].as_str().unwrap().is_empty(), "{s}");
        let read = a["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["status"] == "completed")
            .unwrap_or_else(|| panic!("{mode}: no read among the tool calls: {s}"));
        assert_eq!(read["status"], "completed", "{s}");
        // The file reached Gemini through our read, numbered.
        let sent = model.generate_requests();
        assert!(
            sent.iter().any(|r| r.raw_body.contains("a - b")),
            "{mode}: src/lib.rs was not read"
        );
        assert!(s["usage"]["input"].as_u64().unwrap() > 0, "{s}");
        assert!(!pwned.exists(), "{mode}: the shell command ran");
        // The command's result, as the CLI sent it to its model: refused, not run.
        let sent = model.generate_requests();
        let refused = sent
            .iter()
            .filter(|r| r.is_stream())
            .flat_map(|r| r.body["contents"].as_array().cloned().unwrap_or_default())
            .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
            .find(|p| p["functionResponse"]["name"] == "run_shell_command")
            .unwrap_or_else(|| panic!("{mode}: no result for the command"));
        let error = refused["functionResponse"]["response"]["error"]
            .as_str()
            .unwrap_or("");
        // The agent has no shell in any mode: only our read-only tools.
        assert!(error.contains("not found in registry"), "{mode}: {refused}");
    }
    let progress = recorder.progress.lock().unwrap().len();
    assert!(progress >= 2, "no progress per tool call ({progress})");
    // The warm agent is found while it lives, so the check below can see one left behind.
    let warm = acp_processes_with_home(home.path());
    assert!(!warm.is_empty(), "the warm Gemini CLI was not found");
    client.cancel().await.unwrap();
    // The server is gone: so is every Gemini CLI it started.
    let started = Instant::now();
    loop {
        let left = acp_processes_with_home(home.path());
        if left.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "left behind: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The real Gemini CLI (pinned, from npm) in `autoEdit`, which the operator allowed, behind the
/// fake Gemini API: its model writes a file inside the project, one outside it, one in `.git`,
/// a secret file, and (by a relative path, which the CLI resolves into its own working directory)
/// its workspace settings. The CLI asks before each (its session in its `default` mode, our
/// policy file saying `ask_user`), our policy answers: only the first is written. Nothing of the
/// session is left in the CLI's home.
#[tokio::test]
async fn the_real_gemini_cli_edits_only_inside_the_project_where_the_operator_allows_it() {
    use crate::clients::{Client, locate};
    use crate::support::fake_gemini::{FakeGemini, Recorded, Script};
    let Some((bin, path)) = locate(Client::GeminiCli) else {
        return;
    };
    let project = crate::support::project::with(&[
        crate::support::project::BUGGY_ADD,
        (".env", "TOKEN=x\n"),
        (".git/config", "[core]\n"),
    ]);
    let root = std::fs::canonicalize(project.path()).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    crate::clients::gemini_cli_home(home.path());
    let model = FakeGemini::start();
    let at = |p: &str| root.join(p).display().to_string();
    let writes = vec![
        (
            "write_file",
            json!({"file_path": at("NOTES.md"), "content": "WRITTEN-INSIDE\n"}),
        ),
        (
            "write_file",
            json!({"file_path": outside.path().join("x.txt").display().to_string(), "content": "OUT\n"}),
        ),
        (
            "write_file",
            json!({"file_path": at(".git/config"), "content": "[core]\n\tfsmonitor = touch PWNED\n"}),
        ),
        (
            "write_file",
            json!({"file_path": at(".env"), "content": "TOKEN=stolen\n"}),
        ),
        (
            "write_file",
            json!({"file_path": ".gemini/settings.json", "content": "{\"mcpServers\": {}}"}),
        ),
    ];
    model.respond_with(move |req: &Recorded| {
        if !req.is_stream() || !req.raw_body.contains("EDIT-TASK") {
            return None;
        }
        Some(if req.raw_body.contains("\"functionResponse\"") {
            Script::text("EDITED: NOTES.md written.")
        } else {
            Script::calls(&writes, "c2lnLW9uZQ==", [100, 5, 5])
        })
    });
    let vars = crate::clients::gemini_cli_server_env(
        &bin,
        &path,
        home.path(),
        &model.base_url(),
        &[("GEMINI_MCP_ACP_ALLOW_MODES", "autoEdit")],
    );
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (client, _recorder) = mcp::start_recording(&root, &refs).await;
    let r = call(
        &client,
        json!({"task": "EDIT-TASK: write the notes.", "engine": "gemini-cli",
               "approval_mode": "autoEdit", "model": "flash"}),
        Duration::from_secs(120),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    let s = structured(&r);
    assert!(
        s["answer"]
            .as_str()
            .unwrap()
            .ends_with("EDITED: NOTES.md written."),
        "{s}"
    );
    // The writes the CLI itself lets through (inside its workspace directories: the root and its
    // own working directory) were asked for, each, and judged by our policy; the CLI refused
    // the others itself ("Path not in workspace": outside the root, `.git`, `.env`).
    let asked: Vec<(String, bool, String)> = s["agent"]["permissions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["tool"].as_str().unwrap().to_string(),
                p["allowed"].as_bool().unwrap(),
                p["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[0].0.ends_with("NOTES.md") && asked[0].1, "{asked:?}");
    assert!(
        asked[1].0.ends_with(".gemini/settings.json")
            && !asked[1].1
            && asked[1].2.contains("the Gemini CLI's working directory"),
        "{asked:?}"
    );
    let results: Vec<String> = model
        .generate_requests()
        .iter()
        .flat_map(|q| q.body["contents"].as_array().cloned().unwrap_or_default())
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .filter(|p| p["functionResponse"]["name"] == "write_file")
        .map(|p| p["functionResponse"]["response"].to_string())
        .collect();
    assert_eq!(results.len(), 5, "{results:?}");
    for refused in &results[1..4] {
        assert!(refused.contains("Path not in workspace"), "{refused}");
    }
    // The edit the agent made is among its tool calls, with its file.
    let edits: Vec<&Value> = s["agent"]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "edit")
        .collect();
    assert!(
        edits
            .iter()
            .any(|c| c["target"] == "NOTES.md" && c["status"] == "completed"),
        "{s}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("NOTES.md")).unwrap(),
        "WRITTEN-INSIDE\n"
    );
    assert!(!outside.path().join("x.txt").exists());
    assert_eq!(
        std::fs::read_to_string(root.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join(".env")).unwrap(),
        "TOKEN=x\n"
    );
    // The agent's working directory keeps our settings.
    let workdir = root.join(".state/gemini-cli/agent-autoedit");
    let settings = std::fs::read_to_string(workdir.join(".gemini/settings.json")).unwrap();
    assert!(!settings.contains("mcpServers"), "{settings}");
    client.cancel().await.unwrap();
    // The CLI's record of the session is gone.
    assert_eq!(
        files_holding(home.path(), "EDIT-TASK"),
        Vec::<PathBuf>::new()
    );
}

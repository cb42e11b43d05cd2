//! The server's policy over the agent: `investigate` under the read-only policy, modes that write
//! needing the server's consent, and an allowed mode that writes under the server's policy.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Agent, call, chunk, start, structured, text_of, update};
use crate::support::mcp;

fn permission(id: &str, title: &str, kind: &str, path: Option<&str>) -> Value {
    let mut call = json!({"toolCallId": id, "title": title, "kind": kind});
    if let Some(p) = path {
        call["locations"] = json!([{ "path": p }]);
    }
    json!({ "permission": call })
}

#[tokio::test]
async fn the_agent_investigates_under_the_servers_read_only_policy() {
    let src = "SRC";
    let agent = Agent::new(json!([[
        chunk("agent_thought_chunk", "Looking at add."),
        update(
            "plan",
            json!({"entries": [
                {"content": "Read src/lib.rs", "priority": "high", "status": "in_progress"}
            ]})
        ),
        update(
            "tool_call",
            json!({
                "toolCallId": "t1", "title": "ReadFile src/lib.rs", "kind": "read", "status": "pending",
                "locations": [{"path": src}], "rawInput": {"file_path": "src/lib.rs"}
            })
        ),
        update(
            "tool_call_update",
            json!({"toolCallId": "t1", "status": "completed"})
        ),
        permission("p1", "ReadFile src/lib.rs", "read", Some(src)),
        permission("p2", "ReadFile /etc/passwd", "read", Some("/etc/passwd")),
        permission("p3", "ReadFile .env", "read", Some(".env")),
        permission("p4", "Shell rm -rf /", "execute", None),
        permission("p5", "Edit src/lib.rs", "edit", Some(src)),
        permission("p6", "Switch to yolo", "switch_mode", None),
        chunk("agent_message_chunk", "AGENT-ANSWER: add subtracts "),
        chunk("agent_message_chunk", "(src/lib.rs:2)."),
    ]]));
    // The stand-in learns the project's absolute path from its script.
    let script = std::fs::read_to_string(agent.dir.path().join("script.json"))
        .unwrap()
        .replace(
            "\"SRC\"",
            &format!("\"{}/src/lib.rs\"", agent.root().display()),
        );
    std::fs::write(agent.dir.path().join("script.json"), script).unwrap();
    let vars = agent.vars(&[]);
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (client, recorder) = mcp::start_recording(&agent.root(), &refs).await;

    let r = call(
        &client,
        json!({"task": "Why does add(2, 2) return 0?", "engine": "gemini-cli", "model": "flash"}),
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    let text = text_of(&r);
    assert_ne!(r.is_error, Some(true), "{text}");
    let s = structured(&r);
    assert_eq!(
        s["answer"], "AGENT-ANSWER: add subtracts (src/lib.rs:2).",
        "{s}"
    );
    assert_eq!(s["stop_reason"], "end_turn");
    assert_eq!(s["usage"]["input"], 120, "{s}");
    let a = &s["agent"];
    assert_eq!(a["engine"], "gemini-cli");
    assert_eq!(a["session"], "new");
    assert!(
        a["approval_policy"]
            .as_str()
            .unwrap()
            .starts_with("plan (read-only)")
    );
    assert_eq!(a["thought"], "Looking at add.");
    assert_eq!(a["plan"][0]["content"], "Read src/lib.rs");
    assert_eq!(a["tool_calls"][0]["kind"], "read");
    assert_eq!(a["tool_calls"][0]["status"], "completed");
    assert_eq!(a["tool_calls"][0]["arguments"]["file_path"], "src/lib.rs");
    let allowed: Vec<(String, bool)> = a["permissions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["tool"].as_str().unwrap().to_string(),
                p["allowed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        allowed,
        [
            ("ReadFile src/lib.rs".to_string(), true),
            ("ReadFile /etc/passwd".to_string(), false),
            ("ReadFile .env".to_string(), false),
            ("Shell rm -rf /".to_string(), false),
            ("Edit src/lib.rs".to_string(), false),
            ("Switch to yolo".to_string(), false),
        ]
    );
    assert!(
        text.contains("Gemini CLI agent: 1 tool call (end_turn); policy plan (read-only)"),
        "{text}"
    );
    // What it read, shown as every path is: relative to the root.
    assert!(text.contains("; read src/lib.rs"), "{text}");
    assert!(
        !text.contains(&agent.root().display().to_string()),
        "{text}"
    );

    // What the agent got: our handshake, plan mode, and answers in the format the CLI requires
    // (allow_once for the allowed read, reject_once for the rest; never allow_always).
    let starts = agent.starts();
    assert_eq!(starts.len(), 1);
    let argv: Vec<&str> = starts[0]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(argv.contains(&"--acp"), "{argv:?}");
    // Its own tools denied, ours (`mcp_project_*`) allowed by name.
    let policy = starts[0]["policy"].as_str().unwrap();
    assert!(policy.contains("\"mcp_project_read_lines\""), "{policy}");
    assert!(
        argv.windows(2)
            .any(|w| w[0] == "-m" && w[1].contains("flash")),
        "{argv:?}"
    );
    // It works in its private directory, not in the project (whose tree and `GEMINI.md` the CLI
    // would send); it reads the project through our tools.
    let cwd = starts[0]["cwd"].as_str().unwrap();
    assert!(cwd.ends_with("/gemini-cli/agent"), "{cwd}");
    assert_ne!(cwd, agent.root().display().to_string());
    let init = &agent.received("initialize")[0]["params"];
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["clientCapabilities"]["fs"]["writeTextFile"], false);
    assert_eq!(init["clientCapabilities"]["terminal"], false);
    assert_eq!(
        agent.received("session/set_mode")[0]["params"]["modeId"],
        "plan"
    );
    let prompt = &agent.received("session/prompt")[0]["params"]["prompt"][0]["text"];
    assert!(
        prompt
            .as_str()
            .unwrap()
            .contains("Why does add(2, 2) return 0?"),
        "{prompt}"
    );
    let answers: Vec<Value> = agent
        .lines("permissions.jsonl")
        .into_iter()
        .map(|p| p["answer"]["result"].clone())
        .collect();
    assert_eq!(
        answers[0],
        json!({"outcome": {"outcome": "selected", "optionId": "proceed_once"}})
    );
    for a in &answers[1..] {
        assert_eq!(
            *a,
            json!({"outcome": {"outcome": "selected", "optionId": "cancel"}})
        );
    }

    // Each tool call and each permission was a progress notification.
    let progress: Vec<String> = recorder
        .progress
        .lock()
        .unwrap()
        .iter()
        .filter_map(|p| p.message.clone())
        .collect();
    assert!(
        progress.iter().any(|m| m == "read ReadFile src/lib.rs"),
        "{progress:?}"
    );
    assert!(
        progress
            .iter()
            .any(|m| m.starts_with("rejected Shell rm -rf /")),
        "{progress:?}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn modes_that_write_need_the_servers_consent() {
    let agent = Agent::new(json!([[
        permission("p1", "Edit src/lib.rs", "edit", Some("src/lib.rs")),
        permission("p2", "Shell make", "execute", None),
        chunk("agent_message_chunk", "edited"),
    ]]));
    let client = start(&agent, &[]).await;
    let r = call(
        &client,
        json!({"task": "Fix add.", "engine": "gemini-cli", "approval_mode": "yolo"}),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert_eq!(r.is_error, Some(true));
    let t = text_of(&r);
    assert!(
        t.contains("GEMINI_MCP_ACP_ALLOW_MODES") && t.contains("`yolo`"),
        "{t}"
    );
    assert!(
        agent.starts().is_empty(),
        "a refused mode started the agent"
    );
    let err = call(
        &client,
        json!({"task": "Fix add.", "engine": "gemini-cli", "approval_mode": "sudo"}),
        Duration::from_secs(30),
    )
    .await
    .unwrap_err();
    assert!(format!("{err:?}").contains("approval_mode"), "{err:?}");
    let err = call(
        &client,
        json!({"task": "Fix add.", "approval_mode": "plan"}),
        Duration::from_secs(30),
    )
    .await
    .unwrap_err();
    assert!(format!("{err:?}").contains("engine"), "{err:?}");
    client.cancel().await.unwrap();

    // Another mode than the one the operator listed is refused as well.
    let client = start(&agent, &[("GEMINI_MCP_ACP_ALLOW_MODES", "autoEdit")]).await;
    let r = call(
        &client,
        json!({"task": "Fix add.", "engine": "gemini-cli", "approval_mode": "yolo"}),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert_eq!(r.is_error, Some(true));
    let t = text_of(&r);
    assert!(
        t.contains("GEMINI_MCP_ACP_ALLOW_MODES") && t.contains("`yolo`"),
        "{t}"
    );
    assert!(
        agent.starts().is_empty(),
        "a refused mode started the agent"
    );
    client.cancel().await.unwrap();
}

/// A mode that writes, allowed by the operator, runs: the CLI's edit tools (and in `yolo` its
/// shell) are the agent's, the project root is a workspace directory of the CLI's, and the CLI
/// asks before each edit and command (its session in its `default` mode, our policy file saying
/// `ask_user`), so that the server's policy judges every one: an edit inside the project allowed,
/// outside it, into a secret file or into `.git` refused; commands only in `yolo`. The reply
/// says what no longer holds.
#[tokio::test]
async fn an_allowed_mode_that_writes_runs_under_the_servers_policy() {
    let outside = tempfile::tempdir().unwrap();
    let elsewhere = outside.path().join("notes.txt").display().to_string();
    let edits = |n: &str| {
        vec![
            permission(
                &format!("{n}1"),
                "src/lib.rs: a - b => a + b",
                "edit",
                Some("LIB"),
            ),
            permission(
                &format!("{n}2"),
                "Write notes.txt",
                "edit",
                Some(&elsewhere),
            ),
            permission(&format!("{n}3"), "Write .env", "edit", Some("ENV")),
            permission(
                &format!("{n}4"),
                "Edit .git/config",
                "edit",
                Some("GITCONFIG"),
            ),
            permission(&format!("{n}5"), "cargo test", "execute", None),
            chunk("agent_message_chunk", "FIXED: add adds (src/lib.rs:2)."),
        ]
    };
    let agent = Agent::new(json!([edits("a"), edits("y")]));
    let root = agent.root().display().to_string();
    let script = std::fs::read_to_string(agent.dir.path().join("script.json"))
        .unwrap()
        .replace("\"LIB\"", &format!("\"{root}/src/lib.rs\""))
        .replace("\"ENV\"", &format!("\"{root}/.env\""))
        .replace("\"GITCONFIG\"", &format!("\"{root}/.git/config\""));
    std::fs::write(agent.dir.path().join("script.json"), script).unwrap();
    let client = start(&agent, &[("GEMINI_MCP_ACP_ALLOW_MODES", "autoEdit,yolo")]).await;
    let mut decisions = Vec::new();
    for mode in ["autoEdit", "yolo"] {
        let r = call(
            &client,
            json!({"task": "Fix add.", "engine": "gemini-cli", "approval_mode": mode}),
            Duration::from_secs(30),
        )
        .await
        .unwrap();
        assert_ne!(r.is_error, Some(true), "{mode}: {}", text_of(&r));
        let s = structured(&r);
        assert_eq!(s["answer"], "FIXED: add adds (src/lib.rs:2).", "{s}");
        let policy = s["agent"]["approval_policy"].as_str().unwrap();
        assert!(policy.starts_with(mode), "{policy}");
        // What no longer holds is said.
        assert!(
            policy.contains("Not held") && policy.contains("beside the server's sandbox"),
            "{policy}"
        );
        let allowed: Vec<bool> = s["agent"]["permissions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["allowed"].as_bool().unwrap())
            .collect();
        decisions.push(allowed);
    }
    // Inside, outside, a secret, .git, a command.
    assert_eq!(decisions[0], [true, false, false, false, false], "autoEdit");
    assert_eq!(decisions[1], [true, false, false, false, true], "yolo");
    // The answers the CLI got, in the format it requires.
    let answers: Vec<String> = agent
        .lines("permissions.jsonl")
        .iter()
        .map(|p| {
            p["answer"]["result"]["outcome"]["optionId"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(answers[0], "proceed_once");
    assert_eq!(answers[1], "cancel");

    // How each ran: the mode's CLI tools, asked for each time; the root a workspace directory;
    // the session in the CLI's `default` mode, so that it asks.
    let starts = agent.starts();
    assert_eq!(starts.len(), 2, "one process per mode");
    for (start, tools, dir) in [
        (
            &starts[0],
            "[\"replace\", \"write_file\"]",
            "gemini-cli/agent-autoedit",
        ),
        (
            &starts[1],
            "[\"replace\", \"write_file\", \"run_shell_command\"]",
            "gemini-cli/agent-yolo",
        ),
    ] {
        let argv: Vec<&str> = start["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert!(
            argv.windows(2)
                .any(|w| w[0] == "--include-directories" && w[1] == root),
            "{argv:?}"
        );
        let policy = start["policy"].as_str().unwrap();
        assert!(
            policy.contains(&format!("toolName = {tools}\ndecision = \"ask_user\"")),
            "{policy}"
        );
        let cwd = start["cwd"].as_str().unwrap();
        assert!(cwd.ends_with(dir), "{cwd}");
        let settings =
            std::fs::read_to_string(std::path::Path::new(cwd).join(".gemini/settings.json"))
                .unwrap();
        assert!(
            settings.contains(&format!("\"core\":{}", tools.replace(", ", ","))),
            "{settings}"
        );
    }
    for m in agent.received("session/set_mode") {
        assert_eq!(m["params"]["modeId"], "default", "{m}");
    }
    // The agent was told it may change files.
    let prompt = agent.received("session/prompt")[0]["params"]["prompt"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        prompt.contains("make the changes the task asks for"),
        "{prompt}"
    );
    client.cancel().await.unwrap();
}

//! The ACP bridge profile as a conversation: one session per (caller, workspace) across `gemini`
//! calls, `reset_session` starting the next call afresh, `list_models` naming the running agent's
//! model; and a warm agent killed between calls replaced before anything is sent.

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ClientRequest, ServerResult};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};

use super::{Agent, call, chunk, start, structured, text_of, update};
use crate::support::http::{HttpServer, Style};
use crate::support::mcp;

const BRIDGE: (&str, &str) = ("GEMINI_MCP_COMPAT", "acp-bridge");

async fn bridge(client: &mcp::RecordingClient, name: &'static str, args: Value) -> CallToolResult {
    let req = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
        CallToolRequestParams::new(name).with_arguments(mcp::args(args)),
    ));
    let handle = client
        .send_cancellable_request(req, PeerRequestOptions::no_options())
        .await
        .unwrap();
    match handle.await_response().await.unwrap() {
        ServerResult::CallToolResult(r) => r,
        other => panic!("unexpected {other:?}"),
    }
}

/// A `gemini` call that succeeded: its result.
async fn asked(client: &mcp::RecordingClient, prompt: &str, cd: &str) -> Value {
    let r = bridge(
        client,
        "gemini",
        json!({"PROMPT": prompt, "cd": cd, "model": "flash"}),
    )
    .await;
    let s = structured(&r);
    assert_ne!(r.is_error, Some(true), "{prompt}: {}", text_of(&r));
    assert_eq!(s["success"], true, "{s}");
    s
}

fn prompt_text(m: &Value) -> String {
    m["params"]["prompt"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn the_bridge_keeps_one_session_per_workspace_until_it_is_reset() {
    let agent = Agent::new(json!([
        [chunk("agent_message_chunk", "FIRST-ANSWER")],
        [chunk("agent_message_chunk", "SECOND-ANSWER")],
        [chunk("agent_message_chunk", "FRESH-ANSWER")],
    ]));
    let client = start(&agent, &[BRIDGE]).await;
    let root = agent.root().display().to_string();

    let first = asked(&client, "FIRST-QUESTION", &root).await;
    let models = structured(&bridge(&client, "list_models", json!({})).await);
    assert_eq!(models["process_running"], true, "{models}");
    // The agent runs the model asked for, not the server's default.
    assert_eq!(models["current_model"], first["model_used"], "{models}");
    assert_ne!(
        models["current_model"], "gemini-3.1-pro-preview",
        "{models}"
    );

    let second = asked(&client, "SECOND-QUESTION", &root).await;
    assert_eq!(second["agent_messages"], "SECOND-ANSWER");
    assert_eq!(
        second["SESSION_ID"], first["SESSION_ID"],
        "the same workspace continues its session"
    );
    let prompts = agent.received("session/prompt");
    assert_eq!(agent.received("session/new").len(), 1, "one agent session");
    assert_eq!(
        prompts[1]["params"]["sessionId"], prompts[0]["params"]["sessionId"],
        "the second request went to the session holding the first turn"
    );
    let sessions = structured(&bridge(&client, "list_sessions", json!({})).await);
    assert_eq!(sessions["count"], 1, "{sessions}");
    let listed = &sessions["sessions"][0];
    assert_eq!(listed["workspace"], root.as_str(), "{sessions}");
    assert_eq!(listed["session_id"], first["SESSION_ID"], "{sessions}");
    assert_eq!(listed["turn_count"], 2, "{sessions}");
    assert_eq!(listed["model"], first["model_used"], "{sessions}");

    // The seed's shape: the workspaces reset, by path.
    let reset = structured(&bridge(&client, "reset_session", json!({"workspace": root})).await);
    assert_eq!(reset, json!({"reset": [root], "count": 1}));
    let sessions = structured(&bridge(&client, "list_sessions", json!({})).await);
    assert_eq!(sessions["count"], 0, "{sessions}");

    // The next call for the workspace starts afresh: a new session, without the earlier turns.
    let fresh = asked(&client, "FRESH-QUESTION", &root).await;
    assert_eq!(fresh["agent_messages"], "FRESH-ANSWER");
    assert_ne!(fresh["SESSION_ID"], first["SESSION_ID"], "{fresh}");
    assert_eq!(agent.received("session/new").len(), 2);
    let prompts = agent.received("session/prompt");
    let sent = prompt_text(&prompts[2]);
    assert_ne!(
        prompts[2]["params"]["sessionId"],
        prompts[0]["params"]["sessionId"]
    );
    assert!(
        sent.contains("FRESH-QUESTION") && !sent.contains("FIRST-QUESTION"),
        "{sent}"
    );

    // A sub-directory is a workspace of its own.
    std::fs::create_dir_all(agent.root().join("src")).unwrap();
    let sub = agent.root().join("src").display().to_string();
    let other = asked(&client, "SUB-QUESTION", &sub).await;
    assert_ne!(other["SESSION_ID"], fresh["SESSION_ID"], "{other}");
    let sessions = structured(&bridge(&client, "list_sessions", json!({})).await);
    assert_eq!(sessions["count"], 2, "{sessions}");
    client.cancel().await.unwrap();
}

type HttpClient = crate::support::http::Client;

async fn over_http(client: &HttpClient, name: &'static str, args: Value) -> Value {
    let r = client
        .call_tool(CallToolRequestParams::new(name).with_arguments(mcp::args(args)))
        .await
        .unwrap();
    r.structured_content.unwrap_or(Value::Null)
}

/// Two HTTP clients (two tokens) naming the same workspace hold a conversation each.
#[tokio::test]
async fn each_caller_has_its_own_session_of_a_workspace() {
    const ALICE: &str = "alice-token-0123456789abcdef-never-logged";
    const BOB: &str = "bob-token-fedcba9876543210-never-logged";
    let agent = Agent::new(json!([
        [chunk("agent_message_chunk", "ALICE-1")],
        [chunk("agent_message_chunk", "BOB-1")],
        [chunk("agent_message_chunk", "ALICE-2")],
    ]));
    let tokens = format!("{ALICE},{BOB}");
    let mut vars = agent.vars(&[BRIDGE]);
    vars.push(("GEMINI_MCP_HTTP_TOKEN".into(), tokens));
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let server = HttpServer::start(&agent.root(), &refs).await;
    let root = agent.root().display().to_string();
    let alice = server.client(Style::Legacy, Some(ALICE)).await;
    let bob = server.client(Style::Legacy, Some(BOB)).await;
    let ask = async |client: &HttpClient, prompt: &str| {
        let s = over_http(
            client,
            "gemini",
            json!({"PROMPT": prompt, "cd": root, "model": "flash"}),
        )
        .await;
        assert_eq!(s["success"], true, "{prompt}: {s}");
        s
    };
    let a1 = ask(&alice, "ALICE-QUESTION").await;
    let b1 = ask(&bob, "BOB-QUESTION").await;
    let a2 = ask(&alice, "ALICE-AGAIN").await;
    assert_ne!(
        a1["SESSION_ID"], b1["SESSION_ID"],
        "Bob continued Alice's session"
    );
    assert_eq!(a2["SESSION_ID"], a1["SESSION_ID"], "Alice lost her session");
    let listed = over_http(&bob, "list_sessions", json!({})).await;
    assert_eq!(listed["count"], 1, "{listed}");
    assert_eq!(listed["sessions"][0]["session_id"], b1["SESSION_ID"]);
    // Bob's reset leaves Alice's session alone.
    let reset = over_http(&bob, "reset_session", json!({"workspace": ""})).await;
    assert_eq!(reset, json!({"reset": "all", "count": 1}));
    let listed = over_http(&alice, "list_sessions", json!({})).await;
    assert_eq!(listed["count"], 1, "{listed}");
    assert_eq!(listed["sessions"][0]["session_id"], a1["SESSION_ID"]);
    let _ = alice.cancel().await;
    let _ = bob.cancel().await;
}

/// The real Gemini CLI behind the bridge: the second call's request to Gemini carries the first
/// turn; after `kill -9` of the CLI, the next call still does, on a new process.
#[tokio::test]
async fn the_real_gemini_cli_holds_the_bridges_conversation() {
    use crate::clients::{Client, locate};
    use crate::support::fake_gemini::{FakeGemini, Recorded, Script};
    let Some((bin, path)) = locate(Client::GeminiCli) else {
        return;
    };
    let project = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(project.path()).unwrap();
    std::fs::write(
        root.join("lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 { a - b }\n",
    )
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    crate::clients::gemini_cli_home(home.path());
    let model = FakeGemini::start();
    model.respond_with(|req: &Recorded| {
        if !req.is_stream() || !req.raw_body.contains("QUESTION") {
            return None;
        }
        Some(if req.raw_body.contains("SECOND-QUESTION") {
            Script::text("SECOND-ANSWER")
        } else {
            Script::text("FIRST-ANSWER-7d1c")
        })
    });
    let vars = crate::clients::gemini_cli_server_env(
        &bin,
        &path,
        home.path(),
        &model.base_url(),
        &[("GEMINI_MCP_COMPAT", "acp-bridge")],
    );
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (client, _) = mcp::start_recording(&root, &refs).await;
    let cd = root.display().to_string();
    let first = asked(&client, "FIRST-QUESTION: what does add do?", &cd).await;
    assert_eq!(first["agent_messages"], "FIRST-ANSWER-7d1c", "{first}");
    let second = asked(&client, "SECOND-QUESTION: and why?", &cd).await;
    assert_eq!(second["agent_messages"], "SECOND-ANSWER", "{second}");
    assert_eq!(second["SESSION_ID"], first["SESSION_ID"]);
    let sent: Vec<String> = model
        .generate_requests()
        .into_iter()
        .filter(|r| r.is_stream() && r.raw_body.contains("SECOND-QUESTION"))
        .map(|r| r.raw_body)
        .collect();
    let last = sent.last().expect("the second question reached Gemini");
    assert!(
        last.contains("FIRST-QUESTION") && last.contains("FIRST-ANSWER-7d1c"),
        "the second request lacks the first turn: {last}"
    );

    // `kill -9` of the warm CLI, then a call at once: it runs on a new one and reaches Gemini
    // once, with the conversation.
    // Ours only: the warm CLI runs with this test's home.
    let ours: Vec<i32> = super::acp_processes_with_home(home.path())
        .into_iter()
        .map(|(p, _)| p as i32)
        .collect();
    assert_eq!(ours.len(), 1, "one warm Gemini CLI");
    let pid = nix::unistd::Pid::from_raw(ours[0]);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
    let third = asked(&client, "THIRD-QUESTION: after the kill?", &cd).await;
    assert_eq!(third["SESSION_ID"], first["SESSION_ID"], "{third}");
    let sent: Vec<String> = model
        .generate_requests()
        .into_iter()
        .filter(|r| r.is_stream() && r.raw_body.contains("THIRD-QUESTION"))
        .map(|r| r.raw_body)
        .collect();
    assert_eq!(sent.len(), 1, "the question reached Gemini once");
    assert!(sent[0].contains("FIRST-QUESTION"), "{}", sent[0]);
    client.cancel().await.unwrap();
}

/// `kill -9` of the warm agent, then a call at once: nothing had been sent, so the call runs on
/// a fresh process and reaches the agent once; a continued session is loaded there.
#[tokio::test]
async fn a_call_right_after_the_agent_was_killed_runs_on_a_fresh_one() {
    let agent = Agent::new(json!([
        [chunk("agent_message_chunk", "FIRST")],
        [chunk("agent_message_chunk", "AFTER-THE-KILL")],
        [chunk("agent_message_chunk", "AFTER-THE-SECOND-KILL")],
    ]));
    let client = start(&agent, &[BRIDGE]).await;
    let root = agent.root().display().to_string();
    let first = asked(&client, "FIRST-QUESTION", &root).await;
    let kill = |n: usize| {
        let pid = agent.starts()[n]["pid"].as_i64().unwrap() as i32;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
    };

    // The bridge continues the workspace's live session: the prompt is the first message.
    kill(0);
    let r = bridge(
        &client,
        "gemini",
        json!({"PROMPT": "SECOND-QUESTION", "cd": root, "model": "flash"}),
    )
    .await;
    let s = structured(&r);
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    assert_eq!(s["agent_messages"], "AFTER-THE-KILL", "{s}");
    assert_eq!(s["SESSION_ID"], first["SESSION_ID"], "{s}");
    assert_eq!(agent.starts().len(), 2, "one fresh process");
    let prompts = agent.received("session/prompt");
    assert_eq!(prompts.len(), 2, "each question reached the agent once");
    assert_eq!(
        agent.received("session/load").len(),
        1,
        "the session was loaded in the fresh process"
    );

    // `investigate` opens a new session first.
    kill(1);
    let r = call(
        &client,
        json!({"task": "THIRD-QUESTION", "engine": "gemini-cli", "model": "flash"}),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    assert_eq!(structured(&r)["answer"], "AFTER-THE-SECOND-KILL");
    assert_eq!(agent.starts().len(), 3);
    let prompts = agent.received("session/prompt");
    assert_eq!(prompts.len(), 3, "each question reached the agent once");
    assert!(prompt_text(&prompts[2]).contains("THIRD-QUESTION"));
    client.cancel().await.unwrap();
}

/// `list_models` lists the approval modes a call can use: `autoEdit` and `yolo` where the
/// operator allows them (`GEMINI_MCP_ACP_ALLOW_MODES`), and only there; a call in one of them
/// runs there, its `approval_policy` saying what no longer holds, and is refused elsewhere,
/// naming the setting.
#[tokio::test]
async fn list_models_offers_the_modes_the_operator_allows() {
    let agent = Agent::new(json!([
        [chunk("agent_message_chunk", "EDITED")],
        [chunk("agent_message_chunk", "RAN")],
    ]));
    let root = agent.root().display().to_string();
    let client = start(&agent, &[BRIDGE]).await;
    let models = structured(&bridge(&client, "list_models", json!({})).await);
    assert_eq!(
        models["approval_modes"],
        json!(["plan", "default"]),
        "{models}"
    );
    for mode in ["autoEdit", "yolo"] {
        let r = bridge(
            &client,
            "gemini",
            json!({"PROMPT": "Fix it.", "cd": root, "approval_mode": mode}),
        )
        .await;
        let s = structured(&r);
        assert_eq!(s["success"], false, "{mode}: {s}");
        assert!(
            s["error"]
                .as_str()
                .unwrap()
                .contains("GEMINI_MCP_ACP_ALLOW_MODES"),
            "{mode}: {s}"
        );
    }
    assert!(
        agent.starts().is_empty(),
        "a refused mode started the agent"
    );
    client.cancel().await.unwrap();

    let client = start(
        &agent,
        &[BRIDGE, ("GEMINI_MCP_ACP_ALLOW_MODES", "autoEdit,yolo")],
    )
    .await;
    let models = structured(&bridge(&client, "list_models", json!({})).await);
    assert_eq!(
        models["approval_modes"],
        json!(["plan", "default", "autoEdit", "yolo"]),
        "{models}"
    );
    for (mode, answer) in [("autoEdit", "EDITED"), ("yolo", "RAN")] {
        let r = bridge(
            &client,
            "gemini",
            json!({"PROMPT": "Fix it.", "cd": root, "approval_mode": mode, "model": "flash"}),
        )
        .await;
        let s = structured(&r);
        assert_ne!(r.is_error, Some(true), "{mode}: {}", text_of(&r));
        assert_eq!(s["agent_messages"], answer, "{s}");
        let policy = s["approval_policy"].as_str().unwrap();
        assert!(
            policy.starts_with(mode) && policy.contains("Not held"),
            "{policy}"
        );
    }
    client.cancel().await.unwrap();
}

/// The bridge's `tool_calls` say what the agent reached, as ACP reports it: a call's files
/// (`locations`, relative to the root, with their line) and its input (`rawInput`, or, as the
/// CLI 0.61.0 reports an MCP tool's arguments, the JSON in the call's content; never a result),
/// every value through the secret redaction.
#[tokio::test]
async fn the_bridges_tool_calls_say_what_the_agent_reached() {
    const TOKEN: &str = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789";
    let agent = Agent::new(json!([[
        // Our read, as the real CLI reports an MCP tool call: the arguments' JSON as content.
        super::update(
            "tool_call",
            json!({
                "toolCallId": "t1", "title": "read_lines (project MCP Server)", "kind": "other",
                "status": "in_progress", "locations": [],
                "content": [{"type": "content", "content": {"type": "text", "text": "{\"path\":\"src/lib.rs\"}"}}]
            })
        ),
        // Its result, JSON-looking text: not taken for the input.
        super::update(
            "tool_call_update",
            json!({
                "toolCallId": "t1", "status": "completed",
                "content": [{"type": "content", "content": {"type": "text", "text": "{\"path\":\"NOT-THE-INPUT\"}"}}]
            })
        ),
        // A call as ACP describes one: absolute locations with a line, and rawInput.
        super::update(
            "tool_call",
            json!({
                "toolCallId": "t2", "title": "ReadFile", "kind": "read", "status": "completed",
                "locations": [{"path": "LIB", "line": 2}], "rawInput": {"file_path": "LIB"}
            })
        ),
        // A search whose pattern holds a token.
        super::update(
            "tool_call",
            json!({
                "toolCallId": "t3", "title": "search_text (project MCP Server)", "kind": "other",
                "status": "completed",
                "content": [{"type": "content", "content": {"type": "text",
                    "text": format!("{{\"pattern\":\"{TOKEN}\",\"path\":\"src\"}}")}}]
            })
        ),
        chunk("agent_message_chunk", "BRIDGE-ANSWER"),
    ]]));
    let root = agent.root().display().to_string();
    let script = std::fs::read_to_string(agent.dir.path().join("script.json"))
        .unwrap()
        .replace("\"LIB\"", &format!("\"{root}/src/lib.rs\""));
    std::fs::write(agent.dir.path().join("script.json"), script).unwrap();
    let client = start(&agent, &[BRIDGE]).await;
    let s = asked(&client, "What does add do?", &root).await;
    let calls = s["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 3, "{s}");
    assert_eq!(calls[0]["target"], "src/lib.rs", "{s}");
    assert_eq!(calls[0]["arguments"], json!({"path": "src/lib.rs"}), "{s}");
    assert_eq!(calls[0]["status"], "completed", "{s}");
    assert_eq!(calls[1]["target"], "src/lib.rs:2", "{s}");
    assert_eq!(
        calls[1]["locations"],
        json!([{"path": "src/lib.rs", "line": 2}]),
        "{s}"
    );
    assert_eq!(calls[1]["arguments"]["file_path"], "src/lib.rs", "{s}");
    let search = calls[2]["target"].as_str().unwrap();
    assert!(search.starts_with("src pattern `[REDACTED"), "{s}");
    let whole = serde_json::to_string(&s).unwrap();
    assert!(!whole.contains(TOKEN), "{whole}");
    assert!(
        !whole.contains(&root),
        "an absolute path of the project: {whole}"
    );
    client.cancel().await.unwrap();
}

/// The ACP bridge profile (`GEMINI_MCP_COMPAT=acp-bridge`): the bridge's `gemini` call onto our
/// agent engine and policy, with its result fields; `list_models`, `list_sessions`,
/// `reset_session`.
#[tokio::test]
async fn the_acp_bridges_tools_map_onto_the_agent_engine() {
    let agent = Agent::new(json!([[
        chunk("agent_thought_chunk", "Reading."),
        update(
            "tool_call",
            json!({"toolCallId": "t1", "title": "ReadFile src/lib.rs", "kind": "read", "status": "completed"})
        ),
        chunk("agent_message_chunk", "BRIDGE-ANSWER"),
    ],]));
    let client = start(&agent, &[("GEMINI_MCP_COMPAT", "acp-bridge")]).await;
    let root = agent.root().display().to_string();
    let bridge = |name: &'static str, args: Value| {
        let client = &client;
        async move {
            let req = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
                CallToolRequestParams::new(name).with_arguments(mcp::args(args)),
            ));
            let handle = client
                .send_cancellable_request(req, PeerRequestOptions::no_options())
                .await
                .unwrap();
            match handle.await_response().await.unwrap() {
                ServerResult::CallToolResult(r) => r,
                other => panic!("unexpected {other:?}"),
            }
        }
    };
    let models = structured(&bridge("list_models", json!({})).await);
    assert_eq!(models["process_running"], false);
    assert_eq!(models["current_model"], "(not started)");
    assert_eq!(
        models["approval_modes"],
        json!(["plan", "default"]),
        "{models}"
    );

    let r = bridge(
        "gemini",
        json!({"PROMPT": "Why does add subtract?", "cd": root, "model": "flash"}),
    )
    .await;
    let s = structured(&r);
    assert_ne!(r.is_error, Some(true), "{s}");
    assert_eq!(s["success"], true);
    assert_eq!(s["agent_messages"], "BRIDGE-ANSWER");
    assert_eq!(s["thought"], "Reading.");
    assert_eq!(s["stop_reason"], "end_turn");
    assert_eq!(s["tool_calls"][0]["status"], "completed");
    assert!(s["approval_policy"].as_str().unwrap().starts_with("plan"));
    let session = s["SESSION_ID"].as_str().unwrap().to_string();
    assert_eq!(
        agent.received("session/set_mode")[0]["params"]["modeId"],
        "plan"
    );

    // The bridge defaults to yolo; here a mode above what the server allows is refused, not
    // downgraded. So are a workspace outside the project and what we cannot honour.
    for (args, says) in [
        (
            json!({"PROMPT": "x", "cd": root, "approval_mode": "yolo"}),
            "GEMINI_MCP_ACP_ALLOW_MODES",
        ),
        (json!({"PROMPT": "x", "cd": "/etc"}), "outside"),
        (
            json!({"PROMPT": "x", "cd": root, "image_path": "/tmp/a.png"}),
            "image_path",
        ),
        (
            json!({"PROMPT": "x", "cd": root, "allowed_mcp_servers": ["fs"]}),
            "allowed_mcp_servers",
        ),
        (json!({"cd": root}), "PROMPT"),
    ] {
        let r = bridge("gemini", args.clone()).await;
        let s = structured(&r);
        assert_eq!(r.is_error, Some(true), "{args}: {s}");
        assert_eq!(s["success"], false, "{args}");
        assert!(s["error"].as_str().unwrap().contains(says), "{args}: {s}");
    }
    assert_eq!(agent.starts().len(), 1, "refused calls started nothing");

    let sessions = structured(&bridge("list_sessions", json!({})).await);
    assert_eq!(sessions["count"], 1, "{sessions}");
    assert_eq!(sessions["sessions"][0]["session_id"], session.as_str());
    assert_eq!(sessions["sessions"][0]["workspace"], root.as_str());
    assert_eq!(sessions["sessions"][0]["turn_count"], 1);
    let none = structured(&bridge("reset_session", json!({"workspace": "/elsewhere"})).await);
    assert_eq!(
        none,
        json!({"reset": [], "count": 0, "message": "No session found for workspace"})
    );
    let reset = structured(&bridge("reset_session", json!({})).await);
    assert_eq!(reset, json!({"reset": "all", "count": 1}));
    let sessions = structured(&bridge("list_sessions", json!({})).await);
    assert_eq!(sessions["count"], 0, "{sessions}");
    client.cancel().await.unwrap();
}

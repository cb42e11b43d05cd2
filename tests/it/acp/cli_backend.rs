//! The `cli` backend over ACP: answers from one warm process (one process per call without ACP),
//! a login Google refuses explained, and no record of a call left under the CLI's home.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ClientRequest, ServerResult};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};

use super::{Agent, alive, call, chunk, files_holding, structured, text_of};
use crate::support::mcp;

/// The `cli` backend over ACP: every tool's call is a session of one warm process, Gemini as a
/// plain model (every CLI tool denied, a neutral system prompt, the tool's own instructions
/// leading the prompt).
#[tokio::test]
async fn the_cli_backend_answers_from_one_warm_process() {
    let agent = Agent::new(json!([
        [chunk("agent_message_chunk", "WARM-ONE")],
        [chunk("agent_message_chunk", "WARM-TWO")],
    ]));
    let mut vars = agent.vars(&[("GEMINI_BACKEND", "cli")]);
    vars.retain(|(k, _)| k != "GEMINI_API_KEY");
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let client = mcp::start(&agent.root(), &refs).await;
    let r = mcp::call(
        &client,
        "chat",
        json!({"prompt": "Is a trie overkill for 200 routes?"}),
    )
    .await
    .unwrap();
    let s = structured(&r);
    assert_eq!(s["answer"], "WARM-ONE", "{s}");
    let id = s["continuation_id"].as_str().unwrap().to_string();
    let r = mcp::call(
        &client,
        "chat",
        json!({"prompt": "And for 50,000?", "continuation_id": id}),
    )
    .await
    .unwrap();
    assert_eq!(structured(&r)["answer"], "WARM-TWO");

    let starts = agent.starts();
    assert_eq!(starts.len(), 1, "one warm process for both calls");
    let argv: Vec<&str> = starts[0]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        argv.contains(&"--acp") && argv.contains(&"--policy"),
        "{argv:?}"
    );
    assert!(
        starts[0]["policy"]
            .as_str()
            .unwrap()
            .contains("toolName = \"*\"\ndecision = \"deny\"")
    );
    assert!(
        starts[0]["system_md"]
            .as_str()
            .unwrap()
            .contains("# Instructions")
    );
    let tmpdir = starts[0]["tmpdir"].as_str().unwrap();
    assert!(tmpdir.contains("gemini-mcp-acp-"), "{tmpdir}");
    assert_eq!(agent.received("session/new").len(), 2, "a session per call");
    assert!(agent.received("session/set_mode").is_empty());
    let prompts = agent.received("session/prompt");
    let second = prompts[1]["params"]["prompt"][0]["text"].as_str().unwrap();
    assert!(second.starts_with("# Instructions"), "{second}");
    // Our thread is the source of truth: the whole conversation comes with each call.
    assert!(
        second.contains("Is a trie overkill")
            && second.contains("WARM-ONE")
            && second.contains("And for 50,000?"),
        "{second}"
    );
    client.cancel().await.unwrap();
    let pid = starts[0]["pid"].as_i64().unwrap();
    let started = Instant::now();
    while alive(pid) && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!alive(pid), "the warm process outlived the server");
    assert!(
        !std::path::Path::new(tmpdir).exists(),
        "its private directory was left behind"
    );
}

/// A Gemini CLI without ACP: the `cli` backend says so in the log and answers one process per
/// call.
#[tokio::test]
async fn without_acp_the_cli_backend_runs_one_process_per_call() {
    let dir = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let bin = dir.path().join("gemini");
    std::fs::write(
        &bin,
        format!(
            "#!/bin/sh\necho \"$@\" >> '{}/argv'\nfor a in \"$@\"; do [ \"$a\" = --acp ] && {{ echo 'Unknown argument: acp' >&2; exit 1; }}; done\n\
             cat > /dev/null\necho '{{\"response\": \"PER-CALL-ANSWER\", \"stats\": {{}}}}'\n",
            dir.path().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin_s = bin.display().to_string();
    let vars = [
        ("GEMINI_BACKEND", "cli"),
        ("GEMINI_CLI_PATH", bin_s.as_str()),
        ("GEMINI_MCP_LOG", "warn"),
    ];
    let client = mcp::start(project.path(), &vars).await;
    for _ in 0..2 {
        let r = mcp::call(&client, "chat", json!({"prompt": "Hello?"}))
            .await
            .unwrap();
        assert_eq!(
            structured(&r)["answer"],
            "PER-CALL-ANSWER",
            "{}",
            text_of(&r)
        );
    }
    let argv = std::fs::read_to_string(dir.path().join("argv")).unwrap();
    let acp_tries = argv.lines().filter(|l| l.contains("--acp")).count();
    assert_eq!(
        acp_tries, 1,
        "ACP is tried once, then the per-call path is kept: {argv}"
    );
    assert_eq!(
        argv.lines().filter(|l| l.contains("-o json")).count(),
        2,
        "{argv}"
    );
    client.cancel().await.unwrap();
}

/// Google refuses Login with Google for individual accounts since 2026-06-18: the CLI answers
/// `session/new` with -32000 and Google's words. Both the agent and the `cli` backend over ACP
/// explain it and say what works, instead of passing it through.
#[tokio::test]
async fn a_login_google_refuses_is_explained() {
    let agent = Agent::new(json!([]));
    let mut vars = agent.vars(&[("ACP_STAND_IN_LOGIN", "refused")]);
    vars.retain(|(k, _)| k != "GEMINI_API_KEY");
    vars.push(("GEMINI_BACKEND".into(), "cli".into()));
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let client = mcp::start_recording(&agent.root(), &refs).await.0;
    let investigate = call(
        &client,
        json!({"task": "Where is add?", "engine": "gemini-cli"}),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let chat = call_tool(&client, "chat", json!({"prompt": "Is a trie overkill?"})).await;
    for (what, r) in [("investigate", investigate), ("chat", chat)] {
        assert_eq!(r.is_error, Some(true), "{what}");
        let t = text_of(&r);
        for says in [
            "Login with Google",
            "UNSUPPORTED_CLIENT",
            "individual",
            "2026-06-18",
            "GEMINI_API_KEY",
            "Gemini Code Assist Standard or Enterprise",
        ] {
            assert!(t.contains(says), "{what}: {t:?} lacks {says:?}");
        }
        assert!(!t.contains("ACP error"), "{what}: passed through: {t}");
    }
    assert!(
        !agent.received("session/new").is_empty(),
        "the refusal came from the agent"
    );
    client.cancel().await.unwrap();
}

async fn call_tool(
    client: &mcp::RecordingClient,
    name: &'static str,
    args: Value,
) -> rmcp::model::CallToolResult {
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

/// The CLI records every session under its home (the task, the files sent, the answers): once a
/// call is done, the agent's and the `cli` backend's alike, nothing of it is left there, and the
/// CLI's directory of our sessions' records is this user's alone.
#[tokio::test]
async fn no_record_of_a_call_is_left_under_the_clis_home() {
    let agent = Agent::new(json!([
        [chunk("agent_message_chunk", "AGENT-ANSWER-7714")],
        [chunk("agent_message_chunk", "AGENT-ANSWER-7715")],
        [chunk("agent_message_chunk", "PLAIN-ANSWER-7716")],
    ]));
    let mut vars = agent.vars(&[]);
    vars.push(("GEMINI_BACKEND".into(), "cli".into()));
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let client = mcp::start_recording(&agent.root(), &refs).await.0;
    // The server's HOME (`support::mcp`), where the CLI keeps its records.
    let home = agent.root().join(".home");
    let r = call(
        &client,
        json!({"task": "RECORD-TASK-7714: where is add?", "engine": "gemini-cli"}),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    let id = structured(&r)["continuation_id"]
        .as_str()
        .unwrap()
        .to_string();
    // A second turn of the live session, then a plain call of the `cli` backend.
    let r = call(
        &client,
        json!({"task": "RECORD-TASK-7715: and who calls it?", "engine": "gemini-cli",
               "continuation_id": id}),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert_eq!(structured(&r)["agent"]["session"], "live");
    let r = call_tool(
        &client,
        "chat",
        json!({"prompt": "RECORD-TASK-7716: a trie?"}),
    )
    .await;
    assert_eq!(
        structured(&r)["answer"],
        "PLAIN-ANSWER-7716",
        "{}",
        text_of(&r)
    );
    // The stand-in recorded each session under the home, as the real CLI does…
    let written = agent.lines("chats");
    assert_eq!(written.len(), 2, "{written:?}");
    for path in &written {
        assert!(
            path.as_str()
                .unwrap()
                .starts_with(&home.display().to_string()),
            "{path}"
        );
    }
    // …and nothing of them is left.
    for needle in ["RECORD-TASK-77", "AGENT-ANSWER-77", "PLAIN-ANSWER-77"] {
        assert_eq!(
            files_holding(&home, needle),
            Vec::<PathBuf>::new(),
            "{needle}"
        );
    }
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir(home.join(".gemini/tmp"))
        .unwrap()
        .flatten()
    {
        let mode = entry.metadata().unwrap().permissions().mode();
        assert_eq!(
            mode & 0o077,
            0,
            "{} is open to others",
            entry.path().display()
        );
    }
    client.cancel().await.unwrap();
}

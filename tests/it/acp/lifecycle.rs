//! The agent's processes and sessions: a session reused by a continuation and an agent restarted
//! after a crash, cancellation, idle agents exiting, none outliving the server or a SIGTERM, and a
//! thread rebuilt once its agent session is gone.

use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ClientRequest};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};

use super::{Agent, alive, call, chunk, start, structured, text_of};
use crate::support::mcp::{self, KEY};

/// Sends an `investigate` call and cancels it (MCP `notifications/cancelled`) once the agent has
/// received its `prompts`-th `session/prompt`: the cancellation reaches a prompt in flight, however
/// slowly the agent started.
async fn cancel_once_prompted(
    client: &mcp::RecordingClient,
    agent: &Agent,
    args: Value,
    prompts: usize,
) {
    let req = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
        CallToolRequestParams::new("investigate").with_arguments(mcp::args(args)),
    ));
    let handle = client
        .send_cancellable_request(req, PeerRequestOptions::no_options())
        .await
        .unwrap();
    let started = Instant::now();
    while agent.received("session/prompt").len() < prompts {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the agent never received prompt {prompts}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    handle.cancel(None).await.unwrap();
}

#[tokio::test]
async fn continuing_reuses_the_session_and_a_crash_restarts_the_agent() {
    let agent = Agent::new(json!([
        [chunk("agent_message_chunk", "first")],
        [chunk("agent_message_chunk", "second")],
        [chunk("agent_message_chunk", "partial"), {"crash": true}],
        [chunk("agent_message_chunk", "after the crash")],
        [{"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota)."}}],
    ]));
    let client = start(&agent, &[]).await;
    let args = |id: Option<&str>| {
        let mut a = json!({"task": "Map the project.", "engine": "gemini-cli"});
        if let Some(id) = id {
            a["continuation_id"] = json!(id);
        }
        a
    };
    let r = call(&client, args(None), Duration::from_secs(30))
        .await
        .unwrap();
    let s = structured(&r);
    let id = s["continuation_id"].as_str().unwrap().to_string();
    let session = s["agent"]["session_id"].as_str().unwrap().to_string();
    assert_eq!(s["answer"], "first");

    let r = call(&client, args(Some(&id)), Duration::from_secs(30))
        .await
        .unwrap();
    let s = structured(&r);
    assert_eq!(s["answer"], "second");
    assert_eq!(s["agent"]["session"], "live");
    assert_eq!(s["agent"]["session_id"], session.as_str());
    assert_eq!(agent.starts().len(), 1, "one warm process");
    assert_eq!(agent.received("session/new").len(), 1);
    // The live session already holds the conversation: only the new request is sent.
    let prompts = agent.received("session/prompt");
    assert!(
        !prompts[1]["params"]["prompt"][0]["text"]
            .as_str()
            .unwrap()
            .contains("first")
    );

    let r = call(&client, args(Some(&id)), Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    let t = text_of(&r);
    assert!(
        t.contains("exited while answering") && t.contains("starts it again"),
        "{t}"
    );

    let r = call(&client, args(Some(&id)), Duration::from_secs(30))
        .await
        .unwrap();
    let s = structured(&r);
    assert_ne!(r.is_error, Some(true), "{s}");
    assert_eq!(s["answer"], "after the crash");
    assert_eq!(agent.starts().len(), 2, "restarted after the crash");
    // The CLI's own record of the session is gone after each call, so the session cannot be
    // loaded in the new process: it is rebuilt from our thread, the whole conversation sent.
    assert_eq!(
        agent.received("session/load")[0]["params"]["sessionId"],
        session.as_str()
    );
    assert_eq!(s["agent"]["session"], "new", "{s}");
    let rebuilt = agent.received("session/prompt").last().unwrap()["params"]["prompt"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        rebuilt.contains("first") && rebuilt.contains("second"),
        "{rebuilt}"
    );

    let r = call(&client, args(None), Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    let t = text_of(&r);
    assert!(t.contains("quota") && !t.contains(KEY), "{t}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn cancellation_cancels_the_prompt_then_kills_an_agent_that_ignores_it() {
    let agent = Agent::new(json!([
        [{"hang": true}],
        [chunk("agent_message_chunk", "still warm")],
        [{"hang_ignoring_cancel": true}],
        [chunk("agent_message_chunk", "a new process")],
    ]));
    let client = start(&agent, &[]).await;
    let args = json!({"task": "Take your time.", "engine": "gemini-cli"});
    cancel_once_prompted(&client, &agent, args.clone(), 1).await;
    let started = Instant::now();
    while agent.received("session/cancel").is_empty() && started.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        agent.received("session/cancel").len(),
        1,
        "no session/cancel sent"
    );
    let r = call(&client, args.clone(), Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(structured(&r)["answer"], "still warm");
    assert_eq!(
        agent.starts().len(),
        1,
        "a cancelled prompt that stopped keeps its process"
    );

    cancel_once_prompted(&client, &agent, args.clone(), 3).await;
    let pid = agent.starts()[0]["pid"].as_i64().unwrap();
    let started = Instant::now();
    while alive(pid) && started.elapsed() < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !alive(pid),
        "the agent that ignored session/cancel is still running"
    );
    let r = call(&client, args, Duration::from_secs(30)).await.unwrap();
    assert_eq!(structured(&r)["answer"], "a new process");
    assert_eq!(agent.starts().len(), 2);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_idle_agent_exits_and_none_outlives_the_server() {
    let agent = Agent::new(json!([
        [chunk("agent_message_chunk", "one")],
        [chunk("agent_message_chunk", "two")],
    ]));
    let client = start(&agent, &[("GEMINI_MCP_ACP_IDLE_SECS", "0.5")]).await;
    let args = json!({"task": "Hello?", "engine": "gemini-cli"});
    call(&client, args.clone(), Duration::from_secs(30))
        .await
        .unwrap();
    let pid = agent.starts()[0]["pid"].as_i64().unwrap();
    let started = Instant::now();
    while alive(pid) && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!alive(pid), "the idle agent did not exit");
    call(&client, args, Duration::from_secs(30)).await.unwrap();
    assert_eq!(agent.starts().len(), 2);
    let pid = agent.starts()[1]["pid"].as_i64().unwrap();
    assert!(alive(pid));
    client.cancel().await.unwrap();
    let started = Instant::now();
    while alive(pid) && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!alive(pid), "the agent outlived the server");
}

/// A thread continued by a server that never saw its agent session (a restart): the session is
/// rebuilt from our thread, the whole conversation sent to a new session.
#[tokio::test]
async fn a_thread_outlives_its_agent_session_and_is_rebuilt() {
    let agent = Agent::new(json!([
        [chunk("agent_message_chunk", "FIRST-ANSWER")],
        [chunk("agent_message_chunk", "SECOND-ANSWER")],
    ]));
    let store = [("GEMINI_MCP_STORE", "embedded")];
    let client = start(&agent, &store).await;
    let r = call(
        &client,
        json!({"task": "Where is add defined?", "engine": "gemini-cli"}),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let id = structured(&r)["continuation_id"]
        .as_str()
        .unwrap()
        .to_string();
    client.cancel().await.unwrap();

    let client = start(&agent, &store).await;
    let r = call(
        &client,
        json!({"task": "And who calls it?", "engine": "gemini-cli", "continuation_id": id}),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let s = structured(&r);
    assert_eq!(s["answer"], "SECOND-ANSWER", "{s}");
    assert_eq!(s["agent"]["session"], "new", "{s}");
    assert_eq!(agent.starts().len(), 2);
    let prompts = agent.received("session/prompt");
    let rebuilt = prompts[1]["params"]["prompt"][0]["text"].as_str().unwrap();
    assert!(
        rebuilt.contains("Where is add defined?")
            && rebuilt.contains("FIRST-ANSWER")
            && rebuilt.contains("And who calls it?"),
        "{rebuilt}"
    );
    client.cancel().await.unwrap();
}

/// SIGTERM to the server while the agent is mid-prompt: the server exits and takes its warm
/// Gemini CLI process (its whole group) with it.
#[tokio::test]
async fn sigterm_mid_prompt_leaves_no_agent_behind() {
    use tokio::io::AsyncWriteExt;
    let agent = Agent::new(json!([[{"hang_ignoring_cancel": true}]]));
    let vars = agent.vars(&[]);
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut child = mcp::command(&agent.root(), &refs)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "investigate", "arguments": {"task": "Take forever.", "engine": "gemini-cli"}}}),
    ] {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    let started = Instant::now();
    while agent.received("session/prompt").is_empty() && started.elapsed() < Duration::from_secs(20)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        agent.received("session/prompt").len(),
        1,
        "the prompt never reached the agent"
    );
    let agent_pid = agent.starts()[0]["pid"].as_i64().unwrap();
    assert!(alive(agent_pid));
    let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("the server exits on SIGTERM")
        .unwrap();
    let started = Instant::now();
    while alive(agent_pid) && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!alive(agent_pid), "the agent outlived the server");
    drop(stdin);
}

//! The protocol over HTTP: both styles (Streamable HTTP and the legacy sessions) handshake, list
//! and call, progress on the call's own stream, a JSON-RPC answer to bodies serde cannot hold, and
//! a request id already in flight refused.

use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use super::{Env, succeeded, until};
use crate::support::fake_gemini::Script;
use crate::support::http::{Raw, Style, result_text};
use crate::support::mcp::{args, text};

#[tokio::test]
async fn both_protocol_styles_handshake_list_and_call() {
    let env = Env::new();
    let server = env.server(&[]).await;
    for style in [Style::Legacy, Style::Stateless] {
        let client = server.client(style, None).await;
        let info = client.peer_info().expect("server info");
        assert_eq!(
            info.server_info.as_ref().map(|s| s.name.as_str()),
            Some("gemini-mcp-server"),
            "{style:?}"
        );
        let tools = client.list_all_tools().await.unwrap();
        assert!(tools.iter().any(|t| t.name == "chat"), "{style:?}");
        let r = client
            .call_tool(
                CallToolRequestParams::new("chat")
                    .with_arguments(args(json!({"prompt": format!("hello {style:?}")}))),
            )
            .await
            .unwrap();
        assert_ne!(r.is_error, Some(true), "{style:?}: {r:?}");
        assert!(
            text(&r).contains(&format!(
                "FAKE-REPLY model=gemini-3.1-pro-preview turns=1 last=## Request hello {style:?}"
            )),
            "{style:?}: {}",
            text(&r)
        );
        client.cancel().await.unwrap();
    }

    // The wire: a legacy handshake hands out a session; a 2026-07-28 call needs none.
    let raw = Raw::new(&server.url());
    let session = raw.initialize().await;
    assert!(!session.is_empty());
    let a = raw
        .session_call(&session, 1, "chat", json!({"prompt": "in a session"}))
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert!(
        result_text(&a.message).contains("last=## Request in a session"),
        "{}",
        a.text
    );
    let a = raw.call(2, "chat", json!({"prompt": "stateless"})).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.header("mcp-session-id"), None);
    assert!(
        result_text(&a.message).contains("last=## Request stateless"),
        "{}",
        a.text
    );
    // A legacy request without a session is refused, as the spec says.
    let a = raw
        .post(
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
            &[],
        )
        .await;
    assert_eq!(a.status, 400, "{}", a.text);
}

#[tokio::test]
async fn progress_travels_on_the_calls_own_stream() {
    let env = Env::new();
    let server = env.server(&[]).await;
    let a = Raw::new(&server.url())
        .modern(
            1,
            "tools/call",
            json!({"name": "chat", "arguments": {"prompt": "with progress"},
                   "_meta": {"progressToken": "p-1"}}),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(
        a.header("content-type").as_deref(),
        Some("text/event-stream"),
        "{}",
        a.text
    );
    let events: Vec<Value> = a
        .text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect();
    let progress: Vec<&Value> = events
        .iter()
        .filter(|e| e["method"] == "notifications/progress")
        .collect();
    assert!(!progress.is_empty(), "{}", a.text);
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == "p-1")
    );
    assert!(result_text(&a.message).contains("last=## Request with progress"));
}

#[tokio::test]
async fn bodies_serde_cannot_hold_still_get_a_json_rpc_answer() {
    let env = Env::new();
    let server = env.server(&[]).await;
    let raw = Raw::new(&server.url());
    let modern = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "chat"),
    ];
    let call = |id: &str, arguments: &str| {
        let meta = crate::support::http::modern_meta().to_string();
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"chat","arguments":{arguments},"_meta":{meta}}}}}"#
        )
        .into_bytes()
    };
    // An id that cannot be read: -32600 without an id.
    let a = raw
        .post_bytes(call("1e400", r#"{"prompt":"x"}"#), &modern)
        .await;
    assert_eq!(a.status, 400, "{}", a.text);
    assert_eq!(a.message["error"]["code"], -32600, "{}", a.text);
    assert!(a.message.get("id").is_none_or(Value::is_null), "{}", a.text);
    assert!(a.text.contains("`id`"), "{}", a.text);
    // A readable id, an unreadable argument: -32602 naming it.
    let a = raw
        .post_bytes(call("5", r#"{"prompt":"x","temperature":1e400}"#), &modern)
        .await;
    assert_eq!(a.status, 400, "{}", a.text);
    assert_eq!(a.message["error"]["code"], -32602, "{}", a.text);
    assert_eq!(a.message["id"], 5, "{}", a.text);
    assert!(
        a.text.contains("params.arguments.temperature"),
        "{}",
        a.text
    );
    // A lone surrogate is read as U+FFFD and the call is answered.
    let a = raw
        .post_bytes(call("6", r#"{"prompt":"cut \ud800 here"}"#), &modern)
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert!(succeeded(&a.message), "{}", a.text);
    let sent = env.fake.generate_requests();
    assert_eq!(sent.len(), 1, "only the readable call reached Gemini");
    assert!(
        sent[0].last_user_text().contains("cut \u{fffd} here"),
        "{}",
        sent[0].last_user_text()
    );
    // Not JSON at all: rmcp's answer, unchanged.
    let a = raw.post_bytes(b"{not json".to_vec(), &modern).await;
    assert!(a.status >= 400, "{}", a.text);
}

#[tokio::test]
async fn a_request_id_in_flight_in_a_legacy_session_is_refused_and_the_first_is_answered() {
    let env = Env::new();
    let server = env.server(&[]).await;
    let raw = Raw::new(&server.url());
    let session = raw.initialize().await;
    env.fake
        .push(Script::text("first answer").delay_headers(Duration::from_secs(2)));
    let first = raw.session_call(&session, 7, "chat", json!({"prompt": "first"}));
    let second = async {
        assert!(
            until(30, async || env.fake.in_flight() > 0).await,
            "the first call never reached Gemini"
        );
        raw.session_call(&session, 7, "chat", json!({"prompt": "second, same id"}))
            .await
    };
    let (first, second) = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::join!(first, second)
    })
    .await
    .expect("both requests are answered");
    assert!(
        result_text(&first.message).contains("first answer"),
        "{}",
        first.text
    );
    assert_eq!(second.message["error"]["code"], -32600, "{}", second.text);
    assert!(second.text.contains("id already in use"), "{}", second.text);
    assert_eq!(second.message["id"], 7, "{}", second.text);
    assert_eq!(
        env.fake.generate_requests().len(),
        1,
        "the duplicate never ran"
    );
    // Answered: the id is free again.
    let again = raw
        .session_call(&session, 7, "chat", json!({"prompt": "third"}))
        .await;
    assert!(succeeded(&again.message), "{}", again.text);
}

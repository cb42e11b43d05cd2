//! Several instances sharing one Redis: threads and legacy sessions, and concurrent turns that
//! lose nothing.

use serde_json::json;

use super::{Env, continuation_id, succeeded};
use crate::support::http::{Raw, result_text};
use crate::support::redis::RedisServer;

#[tokio::test]
async fn two_instances_share_threads_and_legacy_sessions() {
    let env = Env::new();
    if crate::support::redis_missing() {
        return;
    }
    let redis = RedisServer::start();
    let url = redis.url();
    let vars = [
        ("REDIS_URL", url.as_str()),
        ("GEMINI_MCP_STORE", "redis"),
        ("GEMINI_MCP_KEY_PREFIX", "shared"),
    ];
    let a = env.server(&vars).await;
    let b = env.server(&vars).await;
    assert_ne!(a.base, b.base);

    // A thread started on A continues on B, with A's turn in the history Gemini receives.
    let first = Raw::new(&a.url())
        .call(1, "chat", json!({"prompt": "remember the word pelican"}))
        .await;
    let id = continuation_id(&first.message);
    let second = Raw::new(&b.url())
        .call(
            2,
            "chat",
            json!({"prompt": "which word?", "continuation_id": id}),
        )
        .await;
    assert_eq!(continuation_id(&second.message), id);
    assert!(
        result_text(&second.message).contains("turns=2"),
        "{}",
        second.text
    );
    let sent = env.fake.generate_requests();
    let last = sent.last().unwrap();
    let history: String = last.messages().iter().map(|(_, t)| t.as_str()).collect();
    assert!(history.contains("remember the word pelican"), "{history}");

    // A legacy session opened on A is served by B (restored from Redis).
    let session = Raw::new(&a.url()).initialize().await;
    let on_b = Raw::new(&b.url())
        .session_call(&session, 3, "chat", json!({"prompt": "session on B"}))
        .await;
    assert_eq!(on_b.status, 200, "{}", on_b.text);
    assert!(
        result_text(&on_b.message).contains("last=## Request session on B"),
        "{}",
        on_b.text
    );
    // A DELETE through B removes the session from Redis: no instance can restore it any more.
    let closed = reqwest::Client::new()
        .delete(b.url())
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status().as_u16(), 202);
    assert_eq!(
        redis
            .cli(&["EXISTS", &format!("shared:mcp-session:{session}")])
            .trim(),
        "0"
    );
}

#[tokio::test]
async fn concurrent_turns_on_two_instances_lose_nothing() {
    let env = Env::new();
    if crate::support::redis_missing() {
        return;
    }
    let redis = RedisServer::start();
    let url = redis.url();
    let vars = [
        ("REDIS_URL", url.as_str()),
        ("GEMINI_MCP_STORE", "redis"),
        ("GEMINI_MCP_KEY_PREFIX", "busy"),
        ("MAX_CONVERSATION_TURNS", "100"),
        ("GEMINI_MCP_RATE_LIMITS", "off"),
        ("GEMINI_MCP_HTTP_CLIENT_CONCURRENCY", "64"),
    ];
    let a = env.server(&vars).await;
    let b = env.server(&vars).await;
    let first = Raw::new(&a.url())
        .call(1, "chat", json!({"prompt": "start"}))
        .await;
    let id = continuation_id(&first.message);

    let mut calls = Vec::new();
    for (name, server) in [("A", &a), ("B", &b)] {
        for n in 0..10 {
            let url = server.url();
            let id = id.clone();
            calls.push(tokio::spawn(async move {
                let prompt = format!("turn {name}-{n}");
                let r = Raw::new(&url)
                    .call(
                        100 + n,
                        "chat",
                        json!({"prompt": prompt, "continuation_id": id}),
                    )
                    .await;
                (prompt, r)
            }));
        }
    }
    for c in calls {
        let (prompt, r) = c.await.unwrap();
        assert!(succeeded(&r.message), "{prompt}: {}", r.text);
    }
    let key = format!("busy:thread:{id}:turns");
    assert_eq!(redis.cli(&["LLEN", &key]).trim(), "21");
    let turns = redis.cli(&["LRANGE", &key, "0", "-1"]);
    for name in ["A", "B"] {
        for n in 0..10 {
            assert!(
                turns.contains(&format!("turn {name}-{n}")),
                "turn {name}-{n} lost"
            );
        }
    }
}

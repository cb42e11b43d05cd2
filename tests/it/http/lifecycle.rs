//! The server's life as a load balancer sees it: health and readiness, a graceful shutdown that
//! lets the call in flight finish, and quiet logs on stderr only.

use std::time::Duration;

use serde_json::json;

#[cfg(unix)]
use super::continuation_id;
use super::{Env, TOKEN, succeeded, until};
#[cfg(unix)]
use crate::support::fake_gemini::Script;
use crate::support::http::Raw;
#[cfg(unix)]
use crate::support::http::{Style, result_text};
use crate::support::mcp::KEY;
use crate::support::redis::RedisServer;

#[tokio::test]
async fn health_and_readiness_follow_redis() {
    let env = Env::new();
    if crate::support::redis_missing() {
        return;
    }
    let mut redis = RedisServer::start();
    let url = redis.url();
    let server = env
        .server(&[
            ("REDIS_URL", &url),
            ("GEMINI_MCP_STORE", "redis"),
            ("GEMINI_MCP_HTTP_TOKEN", TOKEN),
        ])
        .await;
    assert_eq!(server.get("/healthz").await, (200, json!({"status": "ok"})));
    let (status, body) = server.get("/readyz").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["checks"]["threads"]["status"], "ok");
    assert_eq!(body["checks"]["threads"]["store"], "redis");
    assert_eq!(body["checks"]["gemini"]["status"], "ok");

    redis.kill();
    let (status, body) = server.get("/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "not ready");
    assert_eq!(body["checks"]["threads"]["status"], "down");
    assert_eq!(body["checks"]["gemini"]["status"], "ok");
    // The body names the part, not where it lives.
    assert!(
        !body.to_string().contains(&redis.port().to_string()),
        "{body}"
    );
    // Liveness does not depend on Redis.
    assert_eq!(server.get("/healthz").await.0, 200);

    redis.restart();
    assert!(
        until(30, async || server.get("/readyz").await.0 == 200).await,
        "not ready again after Redis came back: {}",
        server.get("/readyz").await.1
    );
}

#[tokio::test]
async fn readiness_reports_a_gemini_backend_that_cannot_work() {
    let env = Env::new();
    env.fake.require_key("another-key");
    let server = env.server(&[]).await;
    let (status, body) = server.get("/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["checks"]["gemini"]["status"], "down");
    assert_eq!(body["checks"]["threads"]["status"], "ok");
    assert!(!body.to_string().contains(KEY));
}

// On Windows the counterpart is Ctrl-Break sent to the server's console process group.
#[cfg(unix)]
#[tokio::test]
async fn sigterm_lets_the_call_in_flight_finish_and_keeps_its_turn() {
    let env = Env::new();
    if crate::support::redis_missing() {
        return;
    }
    let redis = RedisServer::start();
    let url = redis.url();
    let mut server = env
        .server(&[
            ("REDIS_URL", &url),
            ("GEMINI_MCP_STORE", "redis"),
            ("GEMINI_MCP_KEY_PREFIX", "drain"),
            ("GEMINI_MCP_LOG", "info"),
        ])
        .await;
    env.fake
        .push(Script::echo().delay_headers(Duration::from_secs(2)));
    // A legacy client holds a standalone SSE stream open: shutdown must not wait for it.
    let legacy = server.client(Style::Legacy, None).await;
    let in_flight = tokio::spawn({
        let url = server.url();
        async move {
            Raw::new(&url)
                .call(1, "chat", json!({"prompt": "finish me"}))
                .await
        }
    });
    assert!(until(30, async || env.fake.in_flight() == 1).await);
    server.terminate();
    assert!(
        until(30, async || server.stderr().contains("shutting down")).await,
        "{}",
        server.stderr()
    );

    // New calls are refused: no connection, or the gate's refusal if one slipped in.
    let late = reqwest::Client::new()
        .post(server.url())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "chat")
        .json(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "chat", "arguments": {"prompt": "too late"},
            "_meta": crate::support::http::modern_meta()}}),
        )
        .send()
        .await;
    if let Ok(resp) = late {
        let body = resp.text().await.unwrap_or_default();
        assert!(
            body.contains("shutting down"),
            "a new call was served: {body}"
        );
    }

    let done = in_flight.await.unwrap();
    assert_eq!(done.status, 200, "{}", done.text);
    assert!(succeeded(&done.message), "{}", done.text);
    assert!(result_text(&done.message).contains("last=## Request finish me"));
    let id = continuation_id(&done.message);
    let status = server.wait().await;
    assert_eq!(status.code(), Some(0), "{}", server.stderr());
    assert!(
        server.stderr().contains("every call finished; stopped"),
        "{}",
        server.stderr()
    );
    // The turn was written before the answer went out.
    assert_eq!(
        redis
            .cli(&["LLEN", &format!("drain:thread:{id}:turns")])
            .trim(),
        "1"
    );
    assert!(
        env.fake
            .generate_requests()
            .iter()
            .all(|r| !r.last_user_text().contains("too late"))
    );
    drop(legacy);
}

/// The log lines after the start line: quiet at the default level and at `info` (nothing of
/// rmcp's per-request lines, never the client's `initialize` parameters), rmcp's details at
/// `debug`; stdout stays empty, the start line is on stderr.
#[tokio::test]
async fn serving_http_logs_quietly_by_default_on_stderr_only() {
    let env = Env::new();
    let url = env.fake.base_url();
    for (level, rmcp_lines) in [("", false), ("info", false), ("debug", true)] {
        let out = env.dir.path().join("stdout.txt");
        let err = env.dir.path().join("stderr.txt");
        let mut child = crate::support::mcp::std_command(
            env.dir.path(),
            &[
                ("GEMINI_API_KEY", KEY),
                ("GEMINI_BASE_URL", url.as_str()),
                ("GEMINI_MCP_LOG", level),
            ],
        )
        .args(["serve", "--http", "127.0.0.1:0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
        let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
        assert!(
            until(30, async || read(&err).contains("/mcp")).await,
            "{level:?}: no start line on stderr: {}",
            read(&err)
        );
        let base = read(&err)
            .split("at http://")
            .nth(1)
            .and_then(|r| r.split("/mcp").next())
            .map(|a| format!("http://{a}/mcp"))
            .unwrap();
        let raw = Raw::new(&base);
        let session = raw.initialize().await;
        let a = raw
            .session_call(&session, 1, "chat", json!({"prompt": "hello"}))
            .await;
        assert!(succeeded(&a.message), "{}", a.text);
        let a = raw.call(2, "chat", json!({"prompt": "stateless"})).await;
        assert!(succeeded(&a.message), "{}", a.text);
        tokio::time::sleep(Duration::from_millis(300)).await;
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(read(&out), "", "{level:?}: stdout stays clean");
        let logs = read(&err);
        let after: Vec<&str> = logs
            .lines()
            .filter(|l| !l.starts_with("gemini-mcp: serving MCP"))
            .collect();
        let rmcp: Vec<&&str> = after.iter().filter(|l| l.contains("rmcp")).collect();
        assert_eq!(!rmcp.is_empty(), rmcp_lines, "{level:?}: {logs}");
        if !rmcp_lines {
            assert!(!logs.contains("peer_info"), "{level:?}: {logs}");
            assert!(
                after.iter().filter(|l| l.contains(" INFO ")).count() <= 2,
                "{level:?}: at most one line per call: {logs}"
            );
        }
    }
}

//! The server over Streamable HTTP, as clients and load balancers see it: both protocol styles,
//! the token, Host/Origin checks, the body limit, the admission limits, health and readiness,
//! graceful shutdown, and several instances sharing one Redis.

use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::support::fake_gemini::{FakeGemini, Script};
use crate::support::http::{HttpServer, Raw, Style, result_text};
use crate::support::mcp::{KEY, args, text};
use crate::support::redis::RedisServer;

const TOKEN: &str = "test-token-0123456789abcdef-never-logged";

struct Env {
    dir: tempfile::TempDir,
    fake: FakeGemini,
}

impl Env {
    fn new() -> Env {
        Env {
            dir: crate::support::project::with(&[crate::support::project::MAIN_RS]),
            fake: FakeGemini::start(),
        }
    }

    /// Starts a server talking to the fake Gemini, with `extra` settings.
    async fn server(&self, extra: &[(&str, &str)]) -> HttpServer {
        let url = self.fake.base_url();
        let mut vars = vec![("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", url.as_str())];
        vars.extend_from_slice(extra);
        HttpServer::start(self.dir.path(), &vars).await
    }
}

/// Polls `cond` every 50 ms for up to `secs` seconds (waits for a state, never measures time).
async fn until(secs: u64, mut cond: impl AsyncFnMut() -> bool) -> bool {
    for _ in 0..secs * 20 {
        if cond().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A tool result that is not an error.
fn succeeded(message: &Value) -> bool {
    message["result"].is_object() && message["result"]["isError"] != true
}

fn continuation_id(message: &Value) -> String {
    message["result"]["structuredContent"]["continuation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no continuation_id in {message}"))
        .to_string()
}

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
async fn the_token_is_required_once_configured_and_never_shown() {
    let env = Env::new();
    let server = env.server(&[("GEMINI_MCP_HTTP_TOKEN", TOKEN)]).await;
    let raw = Raw::new(&server.url());

    let a = raw.call(1, "chat", json!({"prompt": "no token"})).await;
    assert_eq!(a.status, 401, "{}", a.text);
    let challenge = a.header("www-authenticate").unwrap_or_default();
    assert!(challenge.starts_with("Bearer realm="), "{challenge}");
    assert!(a.text.contains("GEMINI_MCP_HTTP_TOKEN"), "{}", a.text);

    let wrong = format!("{TOKEN}x");
    let a = Raw::new(&server.url())
        .header("authorization", &format!("Bearer {wrong}"))
        .call(2, "chat", json!({"prompt": "wrong token"}))
        .await;
    assert_eq!(a.status, 401, "{}", a.text);
    assert!(
        a.header("www-authenticate")
            .unwrap_or_default()
            .contains("invalid_token"),
        "{a:?}"
    );
    assert!(!a.text.contains(TOKEN), "{}", a.text);

    let a = Raw::new(&server.url())
        .header("authorization", &format!("Bearer {TOKEN}"))
        .call(3, "chat", json!({"prompt": "right token"}))
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert!(
        result_text(&a.message).contains("last=## Request right token"),
        "{}",
        a.text
    );

    // rmcp's client with the token, in both styles.
    for style in [Style::Legacy, Style::Stateless] {
        let client = server.client(style, Some(TOKEN)).await;
        assert!(!client.list_all_tools().await.unwrap().is_empty());
        client.cancel().await.unwrap();
    }
    // Health endpoints need no token.
    assert_eq!(server.get("/healthz").await.0, 200);

    // Nothing ever prints the token, nor sends it to Gemini.
    assert!(!server.stderr().contains(TOKEN), "{}", server.stderr());
    for r in env.fake.requests() {
        assert!(!r.raw_body.contains(TOKEN));
        assert!(r.headers.iter().all(|(_, v)| !v.contains(TOKEN)));
    }
}

#[tokio::test]
async fn a_public_address_needs_a_token_and_the_command_line_takes_none() {
    let env = Env::new();
    let url = env.fake.base_url();
    let vars = [("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", url.as_str())];
    let Err((status, stderr)) = HttpServer::try_start(env.dir.path(), &vars, "0.0.0.0:0").await
    else {
        panic!("the server started on 0.0.0.0 without a token");
    };
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("GEMINI_MCP_HTTP_TOKEN"), "{stderr}");
    assert!(stderr.contains("refusing"), "{stderr}");

    // With a token it starts.
    let mut with = vars.to_vec();
    with.push(("GEMINI_MCP_HTTP_TOKEN", TOKEN));
    let server = HttpServer::try_start(env.dir.path(), &with, "0.0.0.0:0")
        .await
        .unwrap_or_else(|(s, e)| panic!("{s:?}: {e}"));
    drop(server);

    // There is no flag for it: a token on the command line would show in `ps`.
    let out = crate::support::mcp::command(env.dir.path(), &vars)
        .args(["serve", "--http", "127.0.0.1:0", "--token", TOKEN])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--token"));
}

#[tokio::test]
async fn host_and_origin_are_checked() {
    let env = Env::new();
    let server = env
        .server(&[
            ("GEMINI_MCP_HTTP_ALLOWED_HOSTS", "mcp.example.com"),
            (
                "GEMINI_MCP_HTTP_ALLOWED_ORIGINS",
                "https://app.example.com:443",
            ),
        ])
        .await;
    let raw = Raw::new(&server.url());
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                      "params": {"_meta": crate::support::http::modern_meta()}});
    let std_headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/list"),
    ];
    for (headers, expected) in [
        (vec![], 200),
        (vec![("host", "evil.example")], 403),
        (vec![("host", "mcp.example.com")], 200),
        (vec![("host", "mcp.example.com:8443")], 200),
        (vec![("origin", "https://evil.example")], 403),
        (vec![("origin", "http://localhost:3000")], 200),
        (vec![("origin", "https://app.example.com")], 200),
        (vec![("origin", "http://app.example.com")], 403),
    ] {
        let mut all = std_headers.to_vec();
        all.extend(headers.iter().copied());
        let a = raw.post(list.clone(), &all).await;
        assert_eq!(a.status, expected, "{headers:?}: {}", a.text);
    }
}

/// `GET <url>` with `headers`: the status.
async fn status_of(url: &str, headers: &[(&str, &str)]) -> u16 {
    let mut req = reqwest::Client::new()
        .get(url)
        .timeout(Duration::from_secs(30));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.expect("GET").status().as_u16()
}

/// DNS rebinding: every route, not only `/mcp`, answers only a `Host` of its own and a browser
/// `Origin` on the list. A page whose name is rebound to 127.0.0.1 cannot read the metrics or
/// the readiness of a server on loopback without a token (they need none there).
#[tokio::test]
async fn every_route_checks_host_and_origin() {
    let env = Env::new();
    let server = env
        .server(&[("GEMINI_MCP_HTTP_ALLOWED_HOSTS", "mcp.example.com")])
        .await;
    let port = server.base.rsplit(':').next().unwrap().to_string();
    let localhost = format!("localhost:{port}");
    let mut wrong = Vec::new();
    for path in ["/metrics", "/readyz", "/healthz", "/mcp"] {
        let url = format!("{}{path}", server.base);
        for (headers, refused) in [
            (vec![], false),
            (vec![("host", localhost.as_str())], false),
            (vec![("host", "mcp.example.com")], false),
            (vec![("origin", "http://localhost:3000")], false),
            (vec![("host", "evil.example")], true),
            (vec![("host", "evil.example:80")], true),
            (vec![("origin", "https://evil.example")], true),
            (vec![("origin", "null")], true),
        ] {
            let status = status_of(&url, &headers).await;
            if (status == 403) != refused {
                wrong.push(format!("{path} {headers:?}: {status}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A server on every interface answers a `Host` that is the address the client dialled (probes
/// and scrapers address an instance by its IP; a rebound name is never an address), and no
/// other address: on Linux every 127.x.y.z is this machine's, dialled here as 127.0.0.2.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_host_that_is_the_dialled_address_is_accepted_and_no_other() {
    let env = Env::new();
    let url = env.fake.base_url();
    let vars = [
        ("GEMINI_API_KEY", KEY),
        ("GEMINI_BASE_URL", url.as_str()),
        ("GEMINI_MCP_HTTP_TOKEN", TOKEN),
    ];
    let server = HttpServer::try_start(env.dir.path(), &vars, "0.0.0.0:0")
        .await
        .expect("starts with a token");
    let port = server.base.rsplit(':').next().unwrap().to_string();
    let dialled = format!("127.0.0.2:{port}");
    let bearer = format!("Bearer {TOKEN}");
    let mut wrong = Vec::new();
    for path in ["/healthz", "/readyz", "/metrics", "/mcp"] {
        let url = format!("http://{dialled}{path}");
        for (host, refused) in [
            (dialled.as_str(), false),
            ("127.0.0.2", false),
            ("127.0.0.3", true),
            ("10.1.2.3", true),
        ] {
            let status = status_of(&url, &[("host", host), ("authorization", &bearer)]).await;
            if (status == 403) != refused {
                wrong.push(format!("{path} Host {host}: {status}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[tokio::test]
async fn an_oversized_body_gets_413() {
    // The default (4 MiB) is checked in `config`; here a small limit, so that the client has
    // sent its whole body before the server answers (a client still writing when the 413 and
    // the close arrive may see a reset instead of the answer).
    let env = Env::new();
    let small = env
        .server(&[("GEMINI_MCP_HTTP_MAX_BODY_BYTES", "65536")])
        .await;
    let raw = Raw::new(&small.url());
    let a = raw
        .call(1, "chat", json!({"prompt": "y".repeat(70_000)}))
        .await;
    assert_eq!(a.status, 413, "{}", &a.text[..a.text.len().min(300)]);
    // Under the limit it is served (a long prompt gets `resend_prompt`, not an error).
    let a = raw
        .call(2, "chat", json!({"prompt": "y".repeat(50_001)}))
        .await;
    assert_eq!(a.status, 200, "{}", &a.text[..a.text.len().min(300)]);
    assert_eq!(
        a.message["result"]["structuredContent"]["status"],
        "resend_prompt"
    );
}

#[tokio::test]
async fn a_rate_limit_says_which_limit_and_when_to_retry() {
    let env = Env::new();
    let server = env
        .server(&[("GEMINI_MCP_RATE_LIMITS", "chat=2/min")])
        .await;
    let raw = Raw::new(&server.url());
    for id in 1..=2 {
        let a = raw
            .call(id, "chat", json!({"prompt": format!("call {id}")}))
            .await;
        assert!(succeeded(&a.message), "{}", a.text);
    }
    let a = raw.call(3, "chat", json!({"prompt": "call 3"})).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.message["result"]["isError"], true, "{}", a.text);
    let t = result_text(&a.message);
    assert!(
        t.starts_with("Error executing gemini: rate limit reached"),
        "{t}"
    );
    assert!(
        t.contains("`chat` allows 2 calls per minute per client"),
        "{t}"
    );
    assert!(t.contains("GEMINI_MCP_RATE_LIMITS"), "{t}");
    assert!(t.contains("retry in "), "{t}");
    let after = a.message["result"]["_meta"]["retry_after_ms"]
        .as_u64()
        .unwrap_or_else(|| panic!("no retry_after_ms: {}", a.text));
    assert!(after > 0 && after <= 60_000, "{after}");
    // The refused call never reached Gemini; other tools are not limited by chat's rate.
    assert_eq!(env.fake.generate_requests().len(), 2);
    let a = raw
        .call(4, "debug", json!({"error_description": "boom"}))
        .await;
    assert!(succeeded(&a.message), "{}", a.text);
}

#[tokio::test]
async fn the_concurrency_limit_is_per_client() {
    let env = Env::new();
    let server = env
        .server(&[
            ("GEMINI_MCP_HTTP_TOKEN", "token-a,token-b"),
            ("GEMINI_MCP_HTTP_CLIENT_CONCURRENCY", "2"),
            ("GEMINI_MCP_RATE_LIMITS", "off"),
        ])
        .await;
    // The first two calls are held by the fake Gemini until the test ends.
    env.fake
        .push(Script::echo().delay_headers(Duration::from_secs(600)))
        .push(Script::echo().delay_headers(Duration::from_secs(600)));
    let a = Raw::new(&server.url()).header("authorization", "Bearer token-a");
    let b = Raw::new(&server.url()).header("authorization", "Bearer token-b");
    let held: Vec<_> = (1..=2)
        .map(|id| {
            let a = Raw::new(&server.url()).header("authorization", "Bearer token-a");
            tokio::spawn(async move { a.call(id, "chat", json!({"prompt": "held"})).await })
        })
        .collect();
    assert!(until(30, async || env.fake.in_flight() == 2).await);

    let refused = a.call(3, "chat", json!({"prompt": "third"})).await;
    assert_eq!(
        refused.message["result"]["isError"], true,
        "{}",
        refused.text
    );
    let t = result_text(&refused.message);
    assert!(
        t.contains("too many calls in flight from this client"),
        "{t}"
    );
    assert!(t.contains("limit is 2"), "{t}");
    // Another client is not affected.
    let other = b.call(4, "chat", json!({"prompt": "other client"})).await;
    assert!(succeeded(&other.message), "{}", other.text);
    assert!(result_text(&other.message).contains("last=## Request other client"));
    for h in held {
        h.abort();
    }
}

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

#[tokio::test]
async fn stdio_has_no_rate_limits_unless_they_are_set() {
    let env = Env::new();
    let url = env.fake.base_url();
    let vars = [("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", url.as_str())];
    let client = crate::support::mcp::start(env.dir.path(), &vars).await;
    // More calls than HTTP's default chat rate allows in a minute.
    for n in 0..12 {
        let r = crate::support::mcp::call(&client, "chat", json!({"prompt": format!("n{n}")}))
            .await
            .unwrap();
        assert_ne!(r.is_error, Some(true), "call {n}: {}", text(&r));
    }
    client.cancel().await.unwrap();

    let mut limited = vars.to_vec();
    limited.push(("GEMINI_MCP_RATE_LIMITS", "chat=1/h"));
    let client = crate::support::mcp::start(env.dir.path(), &limited).await;
    let first = crate::support::mcp::call(&client, "chat", json!({"prompt": "one"}))
        .await
        .unwrap();
    assert_ne!(first.is_error, Some(true), "{}", text(&first));
    let second = crate::support::mcp::call(&client, "chat", json!({"prompt": "two"}))
        .await
        .unwrap();
    assert_eq!(second.is_error, Some(true));
    assert!(
        text(&second).contains("`chat` allows 1 call per hour per client"),
        "{}",
        text(&second)
    );
    client.cancel().await.unwrap();
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

const OTHER_TOKEN: &str = "other-token-fedcba9876543210-never-logged";

/// A `DELETE`-less probe of a legacy session: the status of a `ping` in it.
async fn ping_status(url: &str, token: &str, session: &str) -> u16 {
    Raw::new(url)
        .header("authorization", &format!("Bearer {token}"))
        .post(
            json!({"jsonrpc": "2.0", "id": 90, "method": "ping"}),
            &[
                ("mcp-session-id", session),
                ("mcp-protocol-version", "2025-06-18"),
            ],
        )
        .await
        .status
}

#[tokio::test]
async fn threads_and_sessions_belong_to_the_token_that_started_them() {
    let env = Env::new();
    if crate::support::redis_missing() {
        return;
    }
    let redis = RedisServer::start();
    let url = redis.url();
    let tokens = format!("{TOKEN},{OTHER_TOKEN}");
    let vars = [
        ("REDIS_URL", url.as_str()),
        ("GEMINI_MCP_STORE", "redis"),
        ("GEMINI_MCP_KEY_PREFIX", "owned"),
        ("GEMINI_MCP_HTTP_TOKEN", tokens.as_str()),
    ];
    let one = env.server(&vars).await;
    let two = env.server(&vars).await;
    let alice = |u: &str| Raw::new(u).header("authorization", &format!("Bearer {TOKEN}"));
    let bob = |u: &str| Raw::new(u).header("authorization", &format!("Bearer {OTHER_TOKEN}"));

    // Threads: Alice's thread cannot be continued by Bob, on either instance, nor found by
    // `latest`; the refusal does not say whose it is.
    let first = alice(&one.url())
        .call(1, "chat", json!({"prompt": "alice's secret plan"}))
        .await;
    let id = continuation_id(&first.message);
    for server in [&one, &two] {
        let refused = bob(&server.url())
            .call(2, "chat", json!({"prompt": "peek", "continuation_id": id}))
            .await;
        assert_eq!(
            refused.message["result"]["isError"], true,
            "{}",
            refused.text
        );
        let said = result_text(&refused.message);
        assert!(
            said.contains(&format!("continuation_id {id} belongs to another client")),
            "{said}"
        );
        assert!(!said.contains("token#") && !said.contains(TOKEN), "{said}");
        let latest = bob(&server.url())
            .call(
                3,
                "chat",
                json!({"prompt": "peek", "continuation_id": "latest"}),
            )
            .await;
        assert!(
            result_text(&latest.message).contains("no earlier thread"),
            "{}",
            latest.text
        );
    }
    let sent = env.fake.generate_requests();
    assert_eq!(sent.len(), 1, "refusals never reach Gemini");
    let mine = alice(&two.url())
        .call(
            4,
            "chat",
            json!({"prompt": "go on", "continuation_id": "latest"}),
        )
        .await;
    assert_eq!(continuation_id(&mine.message), id, "{}", mine.text);
    assert!(
        result_text(&mine.message).contains("turns=2"),
        "{}",
        mine.text
    );

    // Sessions: a session Alice opened is unknown to Bob (404, as any unknown session), on the
    // instance that opened it and on one that would restore it from Redis.
    let session = alice(&one.url()).initialize().await;
    assert_eq!(ping_status(&one.url(), OTHER_TOKEN, &session).await, 404);
    assert_eq!(ping_status(&two.url(), OTHER_TOKEN, &session).await, 404);
    assert_eq!(ping_status(&two.url(), TOKEN, &session).await, 200);
    assert_eq!(ping_status(&one.url(), TOKEN, &session).await, 200);
    let deleted = reqwest::Client::new()
        .delete(one.url())
        .header("authorization", format!("Bearer {OTHER_TOKEN}"))
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert_eq!(
        deleted.status().as_u16(),
        404,
        "Bob cannot close Alice's session"
    );
    assert_eq!(ping_status(&one.url(), TOKEN, &session).await, 200);

    // Redis holds a digest of the owner, never a token.
    let keys = redis.cli(&["KEYS", "owned:*"]);
    for key in keys.lines().filter(|k| !k.trim().is_empty()) {
        let key = key.trim();
        let dump = match redis.cli(&["TYPE", key]).trim() {
            "string" => redis.cli(&["GET", key]),
            "hash" => redis.cli(&["HGETALL", key]),
            "list" => redis.cli(&["LRANGE", key, "0", "-1"]),
            _ => redis.cli(&["ZRANGE", key, "0", "-1"]),
        };
        assert!(!dump.trim().is_empty(), "{key}");
        assert!(
            !dump.contains(TOKEN) && !dump.contains(OTHER_TOKEN),
            "{key}: {dump}"
        );
    }
    for server in [&one, &two] {
        assert!(!server.stderr().contains(TOKEN), "{}", server.stderr());
    }
}

#[tokio::test]
async fn live_sessions_per_client_are_capped_least_recently_used_first() {
    let env = Env::new();
    let tokens = format!("{TOKEN},{OTHER_TOKEN}");
    let server = env
        .server(&[
            ("GEMINI_MCP_HTTP_TOKEN", tokens.as_str()),
            ("GEMINI_MCP_HTTP_MAX_SESSIONS_PER_CLIENT", "3"),
        ])
        .await;
    let url = server.url();
    let alice = Raw::new(&url).header("authorization", &format!("Bearer {TOKEN}"));
    let bob = Raw::new(&server.url()).header("authorization", &format!("Bearer {OTHER_TOKEN}"));
    let bobs = bob.initialize().await;
    let mut sessions = Vec::new();
    for _ in 0..3 {
        sessions.push(alice.initialize().await);
    }
    // The first is used again: the second is now the least recently used.
    assert_eq!(ping_status(&server.url(), TOKEN, &sessions[0]).await, 200);
    sessions.push(alice.initialize().await);
    let statuses: Vec<u16> =
        futures::future::join_all(sessions.iter().map(|s| ping_status(&url, TOKEN, s))).await;
    assert_eq!(statuses, vec![200, 404, 200, 200], "{sessions:?}");
    assert_eq!(
        ping_status(&server.url(), OTHER_TOKEN, &bobs).await,
        200,
        "another client's sessions are not counted"
    );
    // Opening many more keeps the client at the cap and the server serving.
    for _ in 0..20 {
        alice.initialize().await;
    }
    let live =
        futures::future::join_all(sessions.iter().map(|s| ping_status(&url, TOKEN, s))).await;
    assert!(live.iter().all(|s| *s == 404), "{live:?}");
}

/// The 2025-06-18 `initialize` a client sends, raw (the helper asserts success).
fn initialize_message() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "0"}}})
}

#[tokio::test]
async fn a_session_answering_a_call_is_never_evicted_and_a_client_over_its_cap_is_told() {
    let env = Env::new();
    let server = env
        .server(&[
            ("GEMINI_MCP_HTTP_TOKEN", TOKEN),
            ("GEMINI_MCP_HTTP_MAX_SESSIONS_PER_CLIENT", "1"),
        ])
        .await;
    let url = server.url();
    let alice = Raw::new(&url).header("authorization", &format!("Bearer {TOKEN}"));
    let a = alice.initialize().await;
    env.fake
        .push(Script::text("the long answer").delay_headers(Duration::from_secs(2)));
    let call = alice.session_call(&a, 1, "chat", json!({"prompt": "a long question"}));
    let second = async {
        assert!(
            until(30, async || env.fake.in_flight() > 0).await,
            "the call never reached Gemini"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        alice.post(initialize_message(), &[]).await
    };
    let (call, second) = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::join!(call, second)
    })
    .await
    .expect("both requests are answered");
    // The call in flight is answered whole.
    assert_eq!(call.status, 200, "{}", call.text);
    assert!(
        result_text(&call.message).contains("the long answer"),
        "the answer was cut off: {}",
        call.text
    );
    // The new session is refused, saying why and what to change.
    assert_eq!(second.status, 429, "{}", second.text);
    assert_eq!(second.message["error"]["code"], -32000, "{}", second.text);
    assert_eq!(second.message["id"], 0, "{}", second.text);
    assert_eq!(
        second.message["error"]["data"]["setting"], "GEMINI_MCP_HTTP_MAX_SESSIONS_PER_CLIENT",
        "{}",
        second.text
    );
    assert!(
        second
            .text
            .contains("GEMINI_MCP_HTTP_MAX_SESSIONS_PER_CLIENT"),
        "{}",
        second.text
    );
    assert_eq!(second.header("mcp-session-id"), None, "{second:?}");
    // The busy session lives on; once it is idle, a new session replaces it as before.
    assert_eq!(ping_status(&url, TOKEN, &a).await, 200);
    let b = alice.initialize().await;
    assert_eq!(ping_status(&url, TOKEN, &b).await, 200);
    assert_eq!(ping_status(&url, TOKEN, &a).await, 404);
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

#[tokio::test]
async fn oversized_request_headers_get_431() {
    let env = Env::new();
    let server = env.server(&[]).await;
    let raw = Raw::new(&server.url());
    let big = "x".repeat(40 * 1024);
    let a = raw.call(1, "chat", json!({"prompt": "hi"})).await;
    assert_eq!(a.status, 200, "{}", a.text);
    let a = raw
        .post(
            json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
            &[("x-padding", big.as_str())],
        )
        .await;
    assert_eq!(a.status, 431, "{}", a.text);
    assert!(a.text.contains("32768"), "{}", a.text);
    // Many headers that add up count too; a sane request still passes.
    let many: Vec<(String, String)> = (0..40)
        .map(|i| (format!("x-h{i}"), "y".repeat(1000)))
        .collect();
    let extra: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        raw.post(json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}), &extra)
            .await
            .status,
        431
    );
    assert_eq!(server.get("/healthz").await.0, 200);
    let (status, _) = {
        let resp = reqwest::Client::new()
            .get(format!("{}/healthz", server.base))
            .header("x-padding", big.as_str())
            .send()
            .await
            .unwrap();
        (resp.status().as_u16(), ())
    };
    assert_eq!(status, 431, "every route has the limit");
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

/// Prompts, resources and completions over Streamable HTTP; a token sees only its own threads.
#[tokio::test]
async fn prompts_and_thread_resources_over_http_belong_to_their_token() {
    use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams, ResourceContents};
    let env = Env::new();
    let tokens = format!("{TOKEN},{OTHER_TOKEN}");
    let server = env
        .server(&[
            ("GEMINI_MCP_HTTP_TOKEN", tokens.as_str()),
            ("GEMINI_MCP_STORE", "memory"),
        ])
        .await;
    let alice = server.client(Style::Legacy, Some(TOKEN)).await;
    let bob = server.client(Style::Legacy, Some(OTHER_TOKEN)).await;
    env.fake.push(Script::text("ALICE-ANSWER"));
    let r = alice
        .call_tool(
            CallToolRequestParams::new("chat")
                .with_arguments(args(json!({"prompt": "alice's secret plan"}))),
        )
        .await
        .unwrap();
    let id = r.structured_content.unwrap()["continuation_id"]
        .as_str()
        .unwrap()
        .to_string();

    let prompts = alice.list_all_prompts().await.unwrap();
    assert_eq!(prompts.len(), 6);
    let mut a = serde_json::Map::new();
    a.insert("error".into(), json!("panic: index out of bounds"));
    let got = alice
        .get_prompt(GetPromptRequestParams::new("root-cause").with_arguments(a))
        .await
        .unwrap();
    assert!(serde_json::to_string(&got).unwrap().contains("`debug`"));

    async fn read(
        client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
        uri: String,
    ) -> Result<rmcp::model::ReadResourceResult, rmcp::ServiceError> {
        client
            .read_resource(ReadResourceRequestParams::new(uri))
            .await
    }
    let text = |r: rmcp::model::ReadResourceResult| match &r.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => text.clone(),
        other => panic!("{other:?}"),
    };
    let mine: Value = serde_json::from_str(&text(
        read(&alice, "gemini-mcp://threads".into()).await.unwrap(),
    ))
    .unwrap();
    assert_eq!(mine["threads"][0]["id"], id.as_str());
    let md = text(
        read(&alice, format!("gemini-mcp://threads/{id}"))
            .await
            .unwrap(),
    );
    assert!(md.contains("ALICE-ANSWER"), "{md}");

    let theirs: Value = serde_json::from_str(&text(
        read(&bob, "gemini-mcp://threads".into()).await.unwrap(),
    ))
    .unwrap();
    assert_eq!(theirs["threads"], json!([]), "Bob sees Alice's threads");
    let err = read(&bob, format!("gemini-mcp://threads/{id}"))
        .await
        .unwrap_err();
    let err = format!("{err:?}");
    assert!(err.contains("belongs to another client"), "{err}");
    assert!(
        !err.contains("secret plan") && !err.contains("ALICE-ANSWER"),
        "{err}"
    );
    let resources = bob.list_all_resources().await.unwrap();
    assert!(
        resources.iter().all(|r| !r.uri.contains(&id)),
        "Bob's resource list names Alice's thread"
    );
    alice.cancel().await.unwrap();
    bob.cancel().await.unwrap();
}

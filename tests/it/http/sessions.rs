//! What belongs to a token: its threads, sessions, prompts and thread resources; and the live
//! sessions per client, capped least recently used first, never evicting one answering a call.

use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use super::{Env, TOKEN, continuation_id, until};
use crate::support::fake_gemini::Script;
use crate::support::http::{Raw, Style, result_text};
use crate::support::mcp::args;
use crate::support::redis::RedisServer;

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

//! End to end: the real binary over stdio, the fake Gemini API behind it. Two servers continue
//! one thread through the embedded store and through Redis, a Redis outage as the server reports
//! it, a thread refused in another project, and the daily cap shared by instances on one Redis.

use serde_json::{Value, json};

use crate::support::fake_gemini::{FakeGemini, Recorded};
use crate::support::mcp::{self, KEY, call, text};
use crate::support::redis::RedisServer;

fn structured(r: &rmcp::model::CallToolResult) -> Value {
    r.structured_content.clone().expect("structured content")
}

/// What Gemini read for one call: the system instruction, then every message in order.
fn prompt_text(r: &Recorded) -> String {
    let mut s = r.system_text();
    for (role, t) in r.messages() {
        s.push_str(&format!("\n<{role}>\n{t}"));
    }
    s
}

fn shared_prefix_ratio(a: &str, b: &str) -> f64 {
    let shared = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    shared as f64 / a.len() as f64
}

/// Server A starts a thread, server B continues it by id, A continues with "latest", A
/// stops and a third process C continues it with another tool.
async fn two_servers_continue_one_thread(store: &[(&str, &str)]) {
    let fake = FakeGemini::start();
    let dir = tempfile::tempdir().unwrap();
    let base = fake.base_url();
    let mut vars = vec![("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", base.as_str())];
    vars.extend_from_slice(store);
    let a = mcp::start(dir.path(), &vars).await;
    let b = mcp::start(dir.path(), &vars).await;

    let first = call(
        &a,
        "chat",
        json!({"prompt": "first: is the parser's error recovery sound?"}),
    )
    .await
    .unwrap();
    assert_ne!(first.is_error, Some(true), "{}", text(&first));
    let id = structured(&first)["continuation_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(structured(&first)["remaining_turns"], 19);

    let steps: [(&mcp::Client, &str, Value); 2] = [
        (
            &b,
            "chat",
            json!({"prompt": "second: and on nested blocks?", "continuation_id": id}),
        ),
        (
            &a,
            "chat",
            json!({"prompt": "third: summarise", "continuation_id": "latest"}),
        ),
    ];
    for (n, (client, tool, args)) in steps.into_iter().enumerate() {
        let r = call(client, tool, args).await.unwrap();
        assert_ne!(r.is_error, Some(true), "{}", text(&r));
        let s = structured(&r);
        assert_eq!(s["continuation_id"], id.as_str(), "the same thread");
        assert_eq!(s["remaining_turns"], 18 - n);
        assert!(
            text(&r).contains(&format!("turns={}", n + 2)),
            "Gemini saw the whole thread: {}",
            text(&r)
        );
    }
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();

    let c = mcp::start(dir.path(), &vars).await;
    let r = call(
        &c,
        "debug",
        json!({"error_description": "fourth: a panic in recovery", "continuation_id": id}),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert_eq!(structured(&r)["remaining_turns"], 16);
    c.cancel().await.unwrap();

    // Each request's messages begin with the previous request's, byte for byte; with the
    // same tool (same system instruction) the whole prompt does (Gemini's prefix cache).
    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 4);
    for (n, pair) in sent.windows(2).enumerate() {
        let (before, after) = (pair[0].messages(), pair[1].messages());
        assert_eq!(after.len(), before.len() + 2, "call {}", n + 2);
        assert_eq!(
            after[..before.len()],
            before[..],
            "call {} rewrote history",
            n + 2
        );
    }
    for n in 0..2 {
        let ratio = shared_prefix_ratio(&prompt_text(&sent[n]), &prompt_text(&sent[n + 1]));
        eprintln!(
            "shared prefix, call {} -> {}: {:.1}%",
            n + 1,
            n + 2,
            ratio * 100.0
        );
        assert!(ratio > 0.9, "call {} shares {:.1}%", n + 2, ratio * 100.0);
    }
    // Every question is in the last prompt's user messages once: no history repeated (the
    // fake's answers echo the question, so model messages are left out of the count).
    let users: String = sent[3]
        .messages()
        .into_iter()
        .filter(|(role, _)| role == "user")
        .map(|(_, t)| t)
        .collect();
    for q in ["first:", "second:", "third:", "fourth:"] {
        assert_eq!(users.matches(q).count(), 1, "{q} in:\n{users}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_two_servers_share_the_embedded_store() {
    // mcp::command gives both processes the same GEMINI_MCP_STATE_DIR (under the root).
    two_servers_continue_one_thread(&[("GEMINI_MCP_STORE", "embedded")]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_two_servers_share_redis() {
    if crate::support::redis_missing() {
        return;
    }
    let redis = RedisServer::start();
    let url = redis.url();
    two_servers_continue_one_thread(&[
        ("GEMINI_MCP_STORE", "auto"),
        ("REDIS_URL", url.as_str()),
        ("GEMINI_MCP_KEY_PREFIX", "e2e"),
    ])
    .await;
    assert!(
        redis.cli(&["KEYS", "e2e:thread:*"]).contains("e2e:thread:"),
        "the thread lives in Redis"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_redis_outage_seen_through_the_server() {
    const PASSWORD: &str = "outage-pw-9931";
    if crate::support::redis_missing() {
        return;
    }
    let mut redis = RedisServer::start_with_password(PASSWORD);
    let fake = FakeGemini::start();
    let dir = tempfile::tempdir().unwrap();
    let (base, url) = (fake.base_url(), redis.url());
    let client = mcp::start(
        dir.path(),
        &[
            ("GEMINI_API_KEY", KEY),
            ("GEMINI_BASE_URL", base.as_str()),
            ("GEMINI_MCP_STORE", "auto"),
            ("REDIS_URL", url.as_str()),
        ],
    )
    .await;
    let first = call(&client, "chat", json!({"prompt": "one"}))
        .await
        .unwrap();
    let id = structured(&first)["continuation_id"]
        .as_str()
        .unwrap()
        .to_string();

    redis.kill();
    // Continuing needs the thread: a clear isError reply, and Gemini is not called.
    let calls_before = fake.generate_requests().len();
    let r = call(
        &client,
        "chat",
        json!({"prompt": "two", "continuation_id": id}),
    )
    .await
    .unwrap();
    assert_eq!(r.is_error, Some(true));
    let msg = text(&r);
    assert!(msg.contains("Redis") && msg.contains("try again"), "{msg}");
    assert!(!msg.contains(PASSWORD), "{msg}");
    assert_eq!(fake.generate_requests().len(), calls_before);
    // A new question is still answered, and says it could not be kept.
    let r = call(&client, "chat", json!({"prompt": "three"}))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert!(text(&r).contains("could not be saved"), "{}", text(&r));
    assert!(structured(&r)["continuation_id"].is_null());

    // Redis is back (empty): the same server process works again.
    redis.restart();
    let r = call(&client, "chat", json!({"prompt": "four"}))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let fresh = structured(&r)["continuation_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = call(
        &client,
        "chat",
        json!({"prompt": "five", "continuation_id": fresh}),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert!(text(&r).contains("turns=2"), "{}", text(&r));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn thread_server_refuses_to_start_when_redis_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let port = crate::support::redis::free_port();
    let url = format!("redis://:startup-pw-5150@127.0.0.1:{port}/0");
    let out = mcp::command(
        dir.path(),
        &[
            ("GEMINI_API_KEY", KEY),
            ("GEMINI_MCP_STORE", "auto"),
            ("REDIS_URL", url.as_str()),
        ],
    )
    .stdin(std::process::Stdio::null())
    .output()
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("REDIS_URL"), "{stderr}");
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
    assert!(!stderr.contains("startup-pw"), "{stderr}");
    assert!(out.stdout.is_empty(), "stdout carries only MCP messages");
}

/// A thread stays in the project (roots) it was started in: a server on other roots sharing
/// the same store refuses it, naming the project and the setting, unless the setting allows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_from_another_project_is_refused_unless_sharing_is_allowed() {
    let fake = FakeGemini::start();
    let dir = tempfile::tempdir().unwrap();
    let (one, two) = (dir.path().join("one"), dir.path().join("two"));
    for root in [&one, &two] {
        let (rel, content) = crate::support::project::MAIN_RS;
        crate::support::project::write(root, rel, content);
    }
    let state = dir.path().join("state");
    let (base, state) = (fake.base_url(), state.display().to_string());
    let vars = |share: &'static str| {
        vec![
            ("GEMINI_API_KEY", KEY),
            ("GEMINI_BASE_URL", base.as_str()),
            ("GEMINI_MCP_STORE", "embedded"),
            ("GEMINI_MCP_STATE_DIR", state.as_str()),
            ("GEMINI_MCP_SHARE_THREADS_ACROSS_PROJECTS", share),
        ]
    };
    let in_one = mcp::start(&one, &vars("0")).await;
    let first = call(&in_one, "chat", json!({"prompt": "started in one"}))
        .await
        .unwrap();
    let id = structured(&first)["continuation_id"]
        .as_str()
        .unwrap()
        .to_string();

    let in_two = mcp::start(&two, &vars("0")).await;
    for continuation in [id.as_str(), "latest"] {
        let r = call(
            &in_two,
            "chat",
            json!({"prompt": "continue in two", "continuation_id": continuation}),
        )
        .await
        .unwrap();
        assert_eq!(r.is_error, Some(true), "{continuation}: {}", text(&r));
        if continuation == "latest" {
            // `latest` looks only at this project's threads.
            assert!(text(&r).contains("no earlier thread"), "{}", text(&r));
            continue;
        }
        let canonical = one.canonicalize().unwrap().display().to_string();
        assert!(
            text(&r).contains(&format!("started in another project ({canonical})")),
            "{}",
            text(&r)
        );
        assert!(
            text(&r).contains("GEMINI_MCP_SHARE_THREADS_ACROSS_PROJECTS=1"),
            "{}",
            text(&r)
        );
    }
    assert_eq!(
        fake.generate_requests().len(),
        1,
        "refusals never reach Gemini"
    );

    let shared = mcp::start(&two, &vars("1")).await;
    let r = call(
        &shared,
        "chat",
        json!({"prompt": "continue in two, shared", "continuation_id": id}),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert_eq!(structured(&r)["continuation_id"], id.as_str());
    assert_eq!(structured(&r)["remaining_turns"], 18);
}

/// The daily cap is counted in Redis: a call on one instance spends it, the next call on
/// another instance is refused before Gemini is called, saying the cap, the spend and when it
/// resets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daily_cap_is_shared_by_instances_on_one_redis() {
    use crate::support::fake_gemini::{FakeGemini, Script};
    use crate::support::mcp::{self, KEY};
    use serde_json::json;
    if crate::support::redis_missing() {
        return;
    }
    let redis = RedisServer::start();
    let dir = crate::support::project::with(&[crate::support::project::MAIN_RS]);
    let fake = FakeGemini::start();
    let url = fake.base_url();
    let redis_url = redis.url();
    let vars = [
        ("GEMINI_API_KEY", KEY),
        ("GEMINI_BASE_URL", url.as_str()),
        ("GEMINI_MCP_STORE", "redis"),
        ("REDIS_URL", redis_url.as_str()),
        ("GEMINI_MCP_DAILY_TOKENS", "5000"),
    ];
    let one = mcp::start(dir.path(), &vars).await;
    let two = mcp::start(dir.path(), &vars).await;
    fake.push(Script::text("spent").usage(6_000, 100, 0, 0));
    let r = mcp::call(&one, "chat", json!({"prompt": "first"}))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", mcp::text(&r));
    let r = mcp::call(&two, "chat", json!({"prompt": "second"}))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true), "{}", mcp::text(&r));
    let t = mcp::text(&r);
    assert!(
        t.contains("daily token cap of 5000 (GEMINI_MCP_DAILY_TOKENS)")
            && t.contains("6100 tokens spent today")
            && t.contains("00:00 UTC"),
        "{t}"
    );
    assert_eq!(
        fake.generate_requests().len(),
        1,
        "the refused call reached Gemini"
    );
    one.cancel().await.unwrap();
    two.cancel().await.unwrap();
}

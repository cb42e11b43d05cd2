//! The admission limits: the body and header sizes, the rate limit and when to retry, the
//! concurrency limit per client, and stdio without limits unless they are set.

use std::time::Duration;

use serde_json::json;

use super::{Env, succeeded, until};
use crate::support::fake_gemini::Script;
use crate::support::http::{Raw, result_text};
use crate::support::mcp::{KEY, text};

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

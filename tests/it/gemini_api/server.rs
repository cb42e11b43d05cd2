//! The fake's other endpoints, which other tests (and the Gemini CLI) use, and the real binary
//! answering through the API against the fake.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{KEY, setup};
use crate::support::fake_gemini::{FAKE_SIGNATURE, FakeGemini, Script};

#[tokio::test]
async fn the_fake_answers_non_streaming_generate_content() {
    let s = setup();
    s.fake
        .push(Script::text("one shot").thoughts(["**thinking**"]));
    let http = reqwest::Client::new();
    let url = format!(
        "{}/v1beta/models/gemini-3.8-flash:generateContent",
        s.fake.base_url()
    );
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
    let v: Value = http
        .post(&url)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let parts = &v["candidates"][0]["content"]["parts"];
    assert_eq!(parts[0], json!({"text": "**thinking**", "thought": true}));
    assert_eq!(parts[1]["text"], "one shot");
    assert_eq!(parts[2]["thoughtSignature"], FAKE_SIGNATURE);
    assert_eq!(v["candidates"][0]["finishReason"], "STOP");
    assert_eq!(v["modelVersion"], "gemini-3.8-flash");

    // The default answer, and Google's 400 for both thinking fields.
    let v: Value = http
        .post(&url)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        v["candidates"][0]["content"]["parts"][0]["text"],
        "FAKE-REPLY model=gemini-3.8-flash turns=1 last=hi"
    );
    let both = json!({"contents": [], "generationConfig": {"thinkingConfig": {"thinkingBudget": 1024, "thinkingLevel": "LOW"}}});
    let r = http.post(&url).json(&both).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let e: Value = r.json().await.unwrap();
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("thinking_level")
    );
}

#[tokio::test]
async fn the_server_answers_through_the_api_and_refreshes_models_in_the_background() {
    let fake = FakeGemini::start();
    let dir = crate::support::project::with(&[crate::support::project::MAIN_RS]);
    let base = fake.base_url();
    let client = crate::support::mcp::start(
        dir.path(),
        &[("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", &base)],
    )
    .await;
    let result =
        crate::support::mcp::call(&client, "chat", json!({"prompt": "Is this a good idea?"}))
            .await
            .unwrap();
    let text = crate::support::mcp::text(&result);
    assert_ne!(result.is_error, Some(true), "{text}");
    assert!(
        text.starts_with("FAKE-REPLY model=gemini-3.1-pro-preview turns=1 last="),
        "{text}"
    );
    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 1);
    assert!(sent[0].last_user_text().contains("Is this a good idea?"));
    assert_eq!(sent[0].header("x-goog-api-key"), Some(KEY));

    // The model list was fetched at start, without holding the call up.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !fake.requests().iter().any(|r| r.path == "/v1beta/models") {
        assert!(Instant::now() < deadline, "no GET /v1beta/models at start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client.cancel().await.unwrap();
}

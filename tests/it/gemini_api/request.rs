//! What is sent: the request body (thinking, temperature, the system instruction, the history,
//! images, JSON mode).

use std::sync::Arc;

use gemini_mcp_server::gemini::{Message, Part, Role, ThinkingMode, Usage};
use serde_json::{Value, json};

use super::{KEY, request, setup};
use crate::support::fake_gemini::default_answer;

#[tokio::test]
async fn default_answer_is_streamed_and_read_whole() {
    let s = setup();
    let req = request("gemini-3.1-pro-preview");
    let resp = s.generate(&req).await.unwrap();

    let sent = s.fake.generate_requests();
    assert_eq!(sent.len(), 1);
    let r = &sent[0];
    assert_eq!(r.method, "POST");
    assert_eq!(
        r.path,
        "/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent"
    );
    assert_eq!(r.query.as_deref(), Some("alt=sse"));
    assert!(r.is_stream());
    assert_eq!(r.header("x-goog-api-key"), Some(KEY));
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("application/json")
    );
    // The answer is exactly what the fake's default produces for this body.
    assert_eq!(resp.text, default_answer(&r.body, "gemini-3.1-pro-preview"));
    assert_eq!(
        resp.text,
        "FAKE-REPLY model=gemini-3.1-pro-preview turns=1 last=Review this function, please."
    );
    assert_eq!(resp.finish_reason.as_deref(), Some("STOP"));
    assert_eq!(
        resp.model_version.as_deref(),
        Some("gemini-3.1-pro-preview")
    );
    assert!(resp.fallback.is_none());
    // Usage is the last chunk's: the fake counts ⌈chars/4⌉ and 42 thinking tokens.
    assert_eq!(
        resp.usage,
        Usage {
            input: r.raw_body.chars().count().div_ceil(4) as u64,
            output: resp.text.chars().count().div_ceil(4) as u64,
            thinking: 42,
            cached: 0
        }
    );
}

#[tokio::test]
async fn thinking_config_and_temperature_in_the_request_body() {
    let s = setup();
    /// (model, mode, temperature asked, expected thinkingConfig, expected temperature sent)
    type Case = (
        &'static str,
        ThinkingMode,
        Option<f32>,
        Value,
        Option<Value>,
    );
    let cases: Vec<Case> = vec![
        (
            "gemini-2.5-pro",
            ThinkingMode::Max,
            Some(0.3),
            json!({"includeThoughts": false, "thinkingBudget": 32768}),
            Some(json!(0.3)),
        ),
        (
            "gemini-2.5-flash",
            ThinkingMode::Max,
            None,
            json!({"includeThoughts": false, "thinkingBudget": 24576}),
            None,
        ),
        (
            "gemini-2.5-flash-lite",
            ThinkingMode::Minimal,
            None,
            json!({"includeThoughts": false, "thinkingBudget": 512}),
            None,
        ),
        (
            "gemini-3.1-pro-preview",
            ThinkingMode::Minimal,
            None,
            json!({"includeThoughts": false, "thinkingLevel": "LOW"}),
            None,
        ),
        (
            "gemini-3.5-flash",
            ThinkingMode::High,
            Some(0.7),
            json!({"includeThoughts": false, "thinkingLevel": "HIGH"}),
            Some(json!(0.7)),
        ),
        (
            "gemini-4-argon",
            ThinkingMode::Medium,
            None,
            json!({"includeThoughts": false, "thinkingLevel": "MEDIUM"}),
            None,
        ),
    ];
    for (model, mode, temperature, want_thinking, want_temperature) in &cases {
        let mut req = request(model);
        req.thinking = *mode;
        req.temperature = *temperature;
        s.generate(&req).await.unwrap();
        let sent = s.fake.generate_requests();
        let r = sent.last().unwrap();
        assert_eq!(r.model.as_deref(), Some(*model));
        assert_eq!(r.thinking_config(), want_thinking, "{model} {mode:?}");
        assert_eq!(
            r.generation_config().get("temperature"),
            want_temperature.as_ref(),
            "{model}"
        );
        assert_eq!(r.generation_config()["maxOutputTokens"], json!(65536));
    }
    assert_eq!(s.fake.generate_requests().len(), cases.len());
}

#[tokio::test]
async fn system_instruction_history_images_and_json_mode() {
    let s = setup();
    let mut req = request("gemini-3.8-flash");
    req.contents = vec![
        Message::user("first question"),
        Message::model("first answer"),
        Message {
            role: Role::User,
            parts: vec![
                Part::Text("what is in this picture?".into()),
                Part::Image {
                    mime: "image/png".into(),
                    data: Arc::new(b"\x89PNG\r\n\x1a\nfake".to_vec()),
                },
            ],
        },
    ];
    req.response_schema =
        Some(json!({"type": "object", "properties": {"summary": {"type": "string"}}}));
    req.web_search = true;
    let resp = s.generate(&req).await.unwrap();

    let r = &s.fake.generate_requests()[0];
    assert_eq!(r.system_text(), "You are a careful reviewer.");
    assert_eq!(
        r.messages(),
        vec![
            ("user".to_string(), "first question".to_string()),
            ("model".to_string(), "first answer".to_string()),
            ("user".to_string(), "what is in this picture?".to_string()),
        ]
    );
    assert_eq!(
        r.body["contents"][2]["parts"][1],
        json!({"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgpmYWtl"}})
    );
    assert_eq!(
        r.generation_config()["responseMimeType"],
        json!("application/json")
    );
    assert_eq!(
        r.generation_config()["responseJsonSchema"]["properties"]["summary"],
        json!({"type": "string"})
    );
    assert_eq!(r.body["tools"], json!([{"googleSearch": {}}]));
    // JSON mode: the default answer is a JSON object echoing the request.
    let v: Value = serde_json::from_str(&resp.text).unwrap();
    assert_eq!(v["verdict"], "ready");
    assert_eq!(v["findings"], json!([]));
    assert_eq!(
        v["summary"],
        "FAKE-REPLY model=gemini-3.8-flash turns=2 last=what is in this picture?"
    );
}

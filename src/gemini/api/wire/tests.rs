use super::*;
use crate::gemini::models::Catalogue;
use crate::gemini::vocabulary::{Part, ThinkingMode};
use serde_json::json;
use std::sync::Arc;

fn request(model: &str, thinking: ThinkingMode) -> GenerateRequest {
    GenerateRequest {
        model: Catalogue::builtin(
            "pro",
            crate::gemini::prices::PriceList::at(crate::clock::Clock::on("2026-11-27").unwrap()),
        )
        .resolve(model)
        .unwrap(),
        system_instruction: "You review code.".into(),
        contents: vec![
            Message::user("first"),
            Message::model("an answer"),
            Message::user("follow-up"),
        ],
        thinking,
        temperature: None,
        response_schema: None,
        web_search: false,
        cache: None,
        previous: None,
        agent: None,
        functions: None,
    }
}

/// The body as it goes on the wire (serialised text, read back).
fn body(req: &GenerateRequest) -> Value {
    serde_json::from_str(&serde_json::to_string(&build_request(req)).unwrap()).unwrap()
}

#[test]
fn functions_calls_replayed_and_responses_in_the_request() {
    let mut req = request("gemini-3.1-pro-preview", ThinkingMode::Medium);
    let call = json!({"functionCall": {"name": "read_file", "args": {"path": "a.rs"}, "id": "c1"}, "thoughtSignature": "U0lHLTE="});
    req.contents.push(Message {
        role: Role::Model,
        parts: vec![
            Part::Recorded(json!({"text": "Looking."})),
            Part::Recorded(call.clone()),
        ],
    });
    req.contents.push(Message {
        role: Role::User,
        parts: vec![Part::FunctionResponse {
            id: Some("c1".into()),
            name: "read_file".into(),
            response: json!({"output": "1│ fn a() {}"}),
        }],
    });
    req.functions = Some(crate::gemini::vocabulary::Functions {
        declarations: json!([{"name": "read_file"}]),
        allow: true,
    });
    let b = body(&req);
    assert_eq!(
        b["tools"],
        json!([{"functionDeclarations": [{"name": "read_file"}]}])
    );
    assert!(b.get("toolConfig").is_none());
    let n = b["contents"].as_array().unwrap().len();
    assert_eq!(
        b["contents"][n - 2]["parts"][1],
        call,
        "replayed as received"
    );
    assert_eq!(
        b["contents"][n - 1],
        json!({"role": "user", "parts": [{"functionResponse": {"name": "read_file", "id": "c1", "response": {"output": "1│ fn a() {}"}}}]})
    );
    // Calling off keeps the declarations (and the request's prefix); toolConfig comes last.
    let before = serde_json::to_string(&build_request(&req)).unwrap();
    req.functions.as_mut().unwrap().allow = false;
    let after = serde_json::to_string(&build_request(&req)).unwrap();
    assert_eq!(
        body(&req)["toolConfig"],
        json!({"functionCallingConfig": {"mode": "NONE"}})
    );
    let stem = before.strip_suffix('}').unwrap();
    assert!(after.starts_with(stem), "{after}");
    // What stays the same comes first, the growing contents after it.
    let order = [
        "\"systemInstruction\"",
        "\"tools\"",
        "\"generationConfig\"",
        "\"contents\"",
        "\"toolConfig\"",
    ];
    let at: Vec<usize> = order.iter().map(|k| after.find(k).unwrap()).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{after}");
}

#[test]
fn thinking_config_per_model_family() {
    // (model, mode, expected thinkingConfig)
    let cases = [
        (
            "gemini-2.5-pro",
            ThinkingMode::Minimal,
            json!({"includeThoughts": false, "thinkingBudget": 128}),
        ),
        (
            "gemini-2.5-flash",
            ThinkingMode::Max,
            json!({"includeThoughts": false, "thinkingBudget": 24576}),
        ),
        (
            "gemini-2.5-flash-lite",
            ThinkingMode::Minimal,
            json!({"includeThoughts": false, "thinkingBudget": 512}),
        ),
        (
            "gemini-3.1-pro-preview",
            ThinkingMode::Minimal,
            json!({"includeThoughts": false, "thinkingLevel": "LOW"}),
        ),
        (
            "gemini-3.5-flash",
            ThinkingMode::Minimal,
            json!({"includeThoughts": false, "thinkingLevel": "MINIMAL"}),
        ),
        (
            "gemini-4-argon",
            ThinkingMode::Max,
            json!({"includeThoughts": false, "thinkingLevel": "HIGH"}),
        ),
    ];
    for (model, mode, want) in cases {
        let b = body(&request(model, mode));
        let tc = &b["generationConfig"]["thinkingConfig"];
        assert_eq!(tc, &want, "{model} {mode:?}");
        let both = tc.get("thinkingBudget").is_some() && tc.get("thinkingLevel").is_some();
        assert!(!both, "{model}: both thinking fields sent");
    }
    // A model without thinking gets no thinkingConfig at all.
    let b = body(&request("gemini-2.0-flash", ThinkingMode::High));
    assert!(b["generationConfig"].get("thinkingConfig").is_none(), "{b}");
}

#[test]
fn contents_roles_system_instruction_and_limits() {
    let b = body(&request("gemini-3.1-pro-preview", ThinkingMode::Medium));
    assert_eq!(
        b["systemInstruction"],
        json!({"parts": [{"text": "You review code."}]})
    );
    assert_eq!(
        b["contents"],
        json!([
            {"role": "user", "parts": [{"text": "first"}]},
            {"role": "model", "parts": [{"text": "an answer"}]},
            {"role": "user", "parts": [{"text": "follow-up"}]},
        ])
    );
    assert_eq!(b["generationConfig"]["maxOutputTokens"], json!(65536));
    // No temperature, no JSON mode, no tools unless asked.
    assert!(b["generationConfig"].get("temperature").is_none(), "{b}");
    assert!(b["generationConfig"].get("responseMimeType").is_none());
    assert!(b.get("tools").is_none());
}

#[test]
fn temperature_json_mode_and_search_when_asked() {
    let mut r = request("gemini-2.5-flash", ThinkingMode::Low);
    r.temperature = Some(0.2);
    r.response_schema = Some(json!({"type": "object"}));
    r.web_search = true;
    let b = body(&r);
    assert_eq!(b["generationConfig"]["temperature"], json!(0.2));
    assert_eq!(
        b["generationConfig"]["responseMimeType"],
        json!("application/json")
    );
    assert_eq!(
        b["generationConfig"]["responseJsonSchema"],
        json!({"type": "object"})
    );
    assert_eq!(b["tools"], json!([{"googleSearch": {}}]));
    // The serialised text uses camelCase only.
    let text = serde_json::to_string(&build_request(&r)).unwrap();
    assert!(
        !text.contains("_config") && !text.contains("max_output"),
        "{text}"
    );
}

#[test]
fn images_are_sent_inline_as_base64() {
    let mut r = request("gemini-3.5-flash", ThinkingMode::Low);
    r.contents = vec![Message {
        role: Role::User,
        parts: vec![
            Part::Text("what is this?".into()),
            Part::Image {
                mime: "image/png".into(),
                data: Arc::new(vec![0x89, b'P', b'N', b'G']),
            },
        ],
    }];
    let b = body(&r);
    assert_eq!(
        b["contents"][0]["parts"][1],
        json!({"inlineData": {"mimeType": "image/png", "data": "iVBORw=="}})
    );
}

#[test]
fn streamed_chunk_from_a_real_recording_parses() {
    let chunk = r#"{"candidates":[{"content":{"parts":[{"text":" done."}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":5947,"totalTokenCount":7993,"thoughtsTokenCount":2042},"modelVersion":"gemini-2.5-flash","responseId":"IZI2acSKMoWl0-kPmYj2yQc"}"#;
    let r: GenerateContentResponse = serde_json::from_str(chunk).unwrap();
    let c = &r.candidates.as_ref().unwrap()[0];
    assert_eq!(c.finish_reason, Some(FinishReason::Stop));
    assert_eq!(
        c.content.as_ref().unwrap().parts.as_ref().unwrap()[0]
            .text
            .as_deref(),
        Some(" done.")
    );
    assert_eq!(
        r.usage_metadata.unwrap().to_usage(),
        Usage {
            input: 4,
            output: 5947,
            thinking: 2042,
            cached: 0
        }
    );
    assert_eq!(r.model_version.as_deref(), Some("gemini-2.5-flash"));
}

#[test]
fn unknown_fields_and_enum_values_never_fail() {
    let chunk = json!({
        "candidates": [{
            "content": {"role": "model", "parts": [
                {"text": "**Thinking**", "thought": true},
                {"text": "", "thoughtSignature": "CiQB0e2K", "videoMetadata": {"x": 1}}
            ]},
            "finishReason": "PUP_LIMITED_DISABLED",
            "continuationToken": "abc",
            "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"}]
        }],
        "usageMetadata": {"promptTokenCount": 1, "futureCount": 3, "promptTokensDetails": []},
        "modelStatus": {},
    });
    let r: GenerateContentResponse = serde_json::from_value(chunk).unwrap();
    let c = &r.candidates.unwrap()[0];
    assert_eq!(
        c.finish_reason,
        Some(FinishReason::Unknown("PUP_LIMITED_DISABLED".into()))
    );
    assert_eq!(
        c.finish_reason.as_ref().unwrap().as_str(),
        "PUP_LIMITED_DISABLED"
    );
    assert!(c.extra.contains_key("continuationToken"));
    let parts = c.content.as_ref().unwrap().parts.as_ref().unwrap();
    assert!(parts[0].is_thought());
    assert!(parts[1].extra.contains_key("videoMetadata"));
    assert!(r.extra.contains_key("modelStatus"));
}

#[test]
fn edge_shapes_max_tokens_without_parts_and_blocked_prompt() {
    let r: GenerateContentResponse = serde_json::from_str(include_str!(
        "../../../../fixtures/gemini/max-tokens-no-parts.json"
    ))
    .unwrap();
    let c = &r.candidates.unwrap()[0];
    assert!(c.content.as_ref().unwrap().parts.is_none());
    assert_eq!(c.finish_reason, Some(FinishReason::MaxTokens));
    assert_eq!(r.usage_metadata.unwrap().to_usage().thinking, 2999);

    let r: GenerateContentResponse = serde_json::from_str(include_str!(
        "../../../../fixtures/gemini/prompt-blocked.json"
    ))
    .unwrap();
    assert!(r.candidates.is_none());
    assert_eq!(
        r.prompt_feedback.unwrap().block_reason.as_deref(),
        Some("SAFETY")
    );
}

#[test]
fn grounding_chunks_become_sources() {
    let c: Candidate = serde_json::from_value(json!({
        "groundingMetadata": {
            "webSearchQueries": ["rust tokio"],
            "groundingChunks": [
                {"web": {"uri": "https://tokio.rs", "title": "Tokio"}},
                {"web": {"uri": "https://tokio.rs", "title": "Tokio again"}},
                {"web": {"uri": "https://docs.rs/x"}},
                {"retrievedContext": {"uri": "x"}},
            ]
        }
    }))
    .unwrap();
    assert_eq!(
        c.grounding_metadata.unwrap().sources(),
        vec![
            Source {
                title: "Tokio".into(),
                uri: "https://tokio.rs".into()
            },
            Source {
                title: "https://docs.rs/x".into(),
                uri: "https://docs.rs/x".into()
            },
        ]
    );
}

#[test]
fn error_bodies_plain_and_array_wrapped() {
    let quota = include_str!("../../../../fixtures/gemini/error-429-per-day.json");
    let e = parse_error(quota).unwrap();
    assert_eq!(e.code, Some(429));
    assert_eq!(e.status.as_deref(), Some("RESOURCE_EXHAUSTED"));
    assert_eq!(e.retry_delay(), Some(Duration::from_secs(48)));
    assert_eq!(
        e.quota_ids(),
        vec!["GenerateRequestsPerDayPerProjectPerModel-FreeTier"]
    );

    let wrapped = include_str!("../../../../fixtures/gemini/error-400-api-key-invalid-array.json");
    let e = parse_error(wrapped).unwrap();
    assert_eq!(e.code, Some(400));
    assert_eq!(e.reason().as_deref(), Some("API_KEY_INVALID"));

    let tail = parse_error(include_str!(
        "../../../../fixtures/gemini/error-tail-503.txt"
    ))
    .unwrap();
    assert_eq!(
        (tail.code, tail.status.as_deref()),
        (Some(503), Some("UNAVAILABLE"))
    );
    assert!(parse_error("<html>502 Bad Gateway</html>").is_none());
    assert!(parse_error("[]").is_none());
}

#[test]
fn retry_delays_from_details_or_message() {
    for (s, want) in [
        ("48s", Some(48_000)),
        ("0.539477544s", Some(539)),
        ("250ms", Some(250)),
        ("soon", None),
        ("-1s", None),
    ] {
        assert_eq!(parse_duration(s).map(|d| d.as_millis() as u64), want, "{s}");
    }
    let e = ErrorBody {
        message: Some("Quota exceeded. Please retry in 2.5s.".into()),
        ..ErrorBody::default()
    };
    assert_eq!(e.retry_delay(), Some(Duration::from_millis(2500)));
    let e = ErrorBody {
        message: Some("Please retry in 900ms".into()),
        ..ErrorBody::default()
    };
    assert_eq!(e.retry_delay(), Some(Duration::from_millis(900)));
}

#[test]
fn listed_models_become_model_infos() {
    let list: ListModelsResponse = serde_json::from_value(json!({
        "models": [
            {"name": "models/gemini-3.1-pro-preview", "displayName": "Gemini 3.1 Pro Preview",
             "inputTokenLimit": 1048576, "outputTokenLimit": 65536, "thinking": true,
             "supportedGenerationMethods": ["generateContent", "countTokens"]},
            {"name": "models/gemini-2.5-flash", "inputTokenLimit": 131072, "outputTokenLimit": 8192,
             "supportedGenerationMethods": ["generateContent"]},
            {"name": "models/gemini-embedding-001", "supportedGenerationMethods": ["embedContent"]},
            {"name": "models/gemini-2.5-flash-preview-tts", "supportedGenerationMethods": ["generateContent"]},
            {"name": "models/gemma-3-27b-it", "supportedGenerationMethods": ["generateContent"]},
            {"name": "models/gemini-2.0-flash", "thinking": false}
        ],
        "nextPageToken": "abc"
    }))
    .unwrap();
    assert_eq!(list.next_page_token.as_deref(), Some("abc"));
    let infos: Vec<ModelInfo> = list
        .models
        .unwrap()
        .iter()
        .filter_map(WireModel::to_model_info)
        .collect();
    let ids: Vec<&str> = infos.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(
        ids,
        vec![
            "gemini-3.1-pro-preview",
            "gemini-2.5-flash",
            "gemini-2.0-flash"
        ]
    );
    assert_eq!(infos[1].input_limit, 131072);
    assert_eq!(infos[1].output_limit, 8192);
    assert_eq!(
        infos[1].thinking,
        ThinkingStyle::Budget { min: 0, max: 24576 }
    );
    assert!(infos[0].is_level_family());
    assert_eq!(infos[2].thinking, ThinkingStyle::None);
    assert!(!infos[0].builtin);
}

#[test]
fn a_request_from_a_cache_names_it_and_sends_only_what_it_does_not_hold() {
    let mut req = request("gemini-3.1-pro-preview", ThinkingMode::Medium);
    let whole = body(&req);
    assert!(whole.get("cachedContent").is_none());
    req.cache = Some(crate::gemini::CacheUse {
        name: "cachedContents/abc123".into(),
        covers: 2,
    });
    let b = body(&req);
    assert_eq!(b["cachedContent"], "cachedContents/abc123");
    // The cache holds the system instruction and the first two messages.
    assert!(b.get("systemInstruction").is_none(), "{b}");
    assert_eq!(b["contents"], json!([{"role": "user", "parts": [{"text": "follow-up"}]}]));
    assert_eq!(b["generationConfig"], whole["generationConfig"]);
    // A cache said to hold more than there is holds all but nothing is lost.
    req.cache.as_mut().unwrap().covers = 9;
    assert_eq!(body(&req)["contents"], json!([]));
}

#[test]
fn a_cache_is_made_of_the_system_instruction_and_the_first_messages() {
    let req = request("gemini-3.1-pro-preview", ThinkingMode::Medium);
    let b = create_cache_request(&req, "models/gemini-3.1-pro-preview", 2, 3600, "thread 7d1c");
    assert_eq!(b["model"], "models/gemini-3.1-pro-preview");
    assert_eq!(b["ttl"], "3600s");
    assert_eq!(b["displayName"], "thread 7d1c");
    assert_eq!(
        b["systemInstruction"],
        json!({"parts": [{"text": "You review code."}]})
    );
    assert_eq!(
        b["contents"],
        json!([
            {"role": "user", "parts": [{"text": "first"}]},
            {"role": "model", "parts": [{"text": "an answer"}]}
        ])
    );
    assert!(b.get("expireTime").is_none(), "ttl and expireTime are exclusive");
}

//! The REST backend against the fake Gemini API: what is sent, how answers and failures are read,
//! retries, timeouts, cancellation, the capacity fallback, and that the key never leaks.
//!
//! These tests use real time with the short retry delays of `Config::for_tests` (10–50 ms): a
//! paused tokio clock auto-advances into the client's timeouts while a real socket is waiting, so
//! the backoff schedule itself is tested with a paused clock in `gemini::api::retry`'s unit tests.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gemini_mcp_server::config::{BackendChoice, Config, Secret};
use gemini_mcp_server::gemini::api::ApiClient;
use gemini_mcp_server::gemini::{
    CallContext, Catalogue, Gemini, GeminiError, GenerateRequest, GenerateResponse, Message, Part,
    Role, ThinkingMode, Usage,
};
use serde_json::{Value, json};

use crate::support::fake_gemini::{
    Endpoint, FAKE_SIGNATURE, FakeGemini, MODELS_PAGE_CAP, Script, default_answer,
};

const KEY: &str = "AIzaSyFAKE-test-key-0123456789abcdef";

struct Setup {
    fake: FakeGemini,
    config: Config,
    _dir: tempfile::TempDir,
}

fn setup() -> Setup {
    setup_with(|_| {})
}

fn setup_with(adjust: impl FnOnce(&mut Config)) -> Setup {
    let fake = FakeGemini::start();
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::for_tests(dir.path());
    config.base_url = fake.base_url();
    config.api_key = Some(Secret::new(KEY));
    config.backend = BackendChoice::Api;
    adjust(&mut config);
    Setup {
        fake,
        config,
        _dir: dir,
    }
}

impl Setup {
    fn client(&self) -> ApiClient {
        ApiClient::new(&self.config.gemini(), Secret::new(KEY)).unwrap()
    }
    fn gemini(&self) -> Gemini {
        Gemini::from_config(&self.config.gemini()).unwrap()
    }
    async fn generate(&self, req: &GenerateRequest) -> Result<GenerateResponse, GeminiError> {
        self.client().generate(req, &CallContext::default()).await
    }
}

fn request(model: &str) -> GenerateRequest {
    GenerateRequest {
        model: Catalogue::builtin("pro", crate::support::prices())
            .resolve(model)
            .unwrap(),
        system_instruction: "You are a careful reviewer.".into(),
        contents: vec![Message::user("Review this function, please.")],
        thinking: ThinkingMode::Medium,
        temperature: None,
        response_schema: None,
        web_search: false,
        functions: None,
    }
}

// ---------------------------------------------------------------------------------------------
// What is sent
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// How answers are read
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn every_sse_framing_gives_the_same_answer() {
    let s = setup();
    let chunks = ["## Review\n", "  indented line\r\n", "last ✓ line"];
    for sep in ["\r\n\r\n", "\n\n", "\r\r"] {
        s.fake.push(Script::chunks(chunks).separator(sep));
        let resp = s.generate(&request("gemini-3.8-flash")).await.unwrap();
        assert_eq!(resp.text, chunks.concat(), "separator {sep:?}");
        assert_eq!(resp.finish_reason.as_deref(), Some("STOP"));
    }
}

#[tokio::test]
async fn a_hand_written_stream_in_googles_exact_bytes() {
    let s = setup();
    // Two chunks from a real gemini-2.5-flash recording (text abridged), a metadata-only chunk,
    // and a final empty part with a signature.
    let body = concat!(
        "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Okay, let's\"}],\"role\":\"model\"},\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":4,\"candidatesTokenCount\":49,\"totalTokenCount\":2095,\"thoughtsTokenCount\":2042},\"modelVersion\":\"gemini-2.5-flash\",\"responseId\":\"IZI2acSKMoWl0-kPmYj2yQc\"}\r\n\r\n",
        "data: {\"usageMetadata\":{\"promptTokenCount\":4,\"totalTokenCount\":2095},\"modelVersion\":\"gemini-2.5-flash\"}\r\n\r\n",
        "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\" done.\"},{\"text\":\"\",\"thoughtSignature\":\"c2ln\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":4,\"candidatesTokenCount\":5947,\"totalTokenCount\":7993,\"thoughtsTokenCount\":2042,\"cachedContentTokenCount\":2},\"modelVersion\":\"gemini-2.5-flash\",\"responseId\":\"IZI2acSKMoWl0-kPmYj2yQc\"}\r\n\r\n",
    );
    s.fake.push(Script::sse(body));
    let resp = s.generate(&request("gemini-2.5-flash")).await.unwrap();
    assert_eq!(resp.text, "Okay, let's done.");
    assert_eq!(
        resp.usage,
        Usage {
            input: 4,
            output: 5947,
            thinking: 2042,
            cached: 2
        }
    );
    assert_eq!(resp.model_version.as_deref(), Some("gemini-2.5-flash"));
}

#[tokio::test]
async fn a_recorded_stream_and_a_recorded_error() {
    let s = setup();
    s.fake.push(Script::sse(include_str!(
        "../../../fixtures/gemini/stream-gemini-2.5-flash.sse"
    )));
    let resp = s.generate(&request("gemini-2.5-flash")).await.unwrap();
    assert_eq!(resp.text, "Okay, let's done.");
    assert_eq!(
        resp.usage,
        Usage {
            input: 4,
            output: 5947,
            thinking: 2042,
            cached: 0
        }
    );

    s.fake.push(Script::raw(
        400,
        "application/json; charset=UTF-8",
        include_str!("../../../fixtures/gemini/error-400-api-key-invalid-array.json"),
    ));
    let e = s.generate(&request("gemini-2.5-flash")).await.unwrap_err();
    assert!(matches!(e, GeminiError::Api { status: 400, .. }), "{e:?}");
    assert!(e.to_string().contains("GEMINI_API_KEY"), "{e}");
}

#[tokio::test]
async fn thoughts_are_left_out_and_usage_and_model_version_come_from_the_last_chunk() {
    let s = setup();
    s.fake.push(
        Script::text("The answer.")
            .thoughts(["**Reading the diff**", "**Checking callers**"])
            .usage(1200, 3, 800, 1024)
            .model_version("gemini-3.8-flash-001"),
    );
    let resp = s.generate(&request("gemini-3.8-flash")).await.unwrap();
    assert_eq!(resp.text, "The answer.");
    assert_eq!(
        resp.usage,
        Usage {
            input: 1200,
            output: 3,
            thinking: 800,
            cached: 1024
        }
    );
    assert_eq!(resp.model_version.as_deref(), Some("gemini-3.8-flash-001"));
}

#[tokio::test]
async fn cut_answers_keep_their_text_and_say_why() {
    let s = setup();
    s.fake
        .push(Script::text("partial but useful").finish("MAX_TOKENS"));
    let resp = s.generate(&request("gemini-3.8-flash")).await.unwrap();
    assert_eq!(resp.text, "partial but useful");
    assert_eq!(resp.finish_reason.as_deref(), Some("MAX_TOKENS"));
}

#[tokio::test]
async fn grounding_sources_are_returned() {
    let s = setup();
    s.fake
        .push(Script::text("Tokio 1.54 is current.").sources(&[
            ("https://tokio.rs/blog", "Tokio blog"),
            ("https://crates.io/crates/tokio", "tokio - crates.io"),
        ]));
    let mut req = request("gemini-3.8-flash");
    req.web_search = true;
    let resp = s.generate(&req).await.unwrap();
    let uris: Vec<&str> = resp.sources.iter().map(|s| s.uri.as_str()).collect();
    assert_eq!(
        uris,
        vec!["https://tokio.rs/blog", "https://crates.io/crates/tokio"]
    );
    assert_eq!(resp.sources[0].title, "Tokio blog");
}

#[tokio::test]
async fn progress_is_reported_while_streaming() {
    let s = setup();
    s.fake
        .push(Script::chunks(["a", "b", "c"]).chunk_delay(Duration::from_millis(20)));
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = seen.clone();
    let ctx = CallContext {
        progress: Some(Arc::new(move |p| sink.lock().unwrap().push(p.message))),
        ..CallContext::default()
    };
    s.client()
        .generate(&request("gemini-3.8-flash"), &ctx)
        .await
        .unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.first().map(String::as_str), Some("Gemini is thinking"));
    assert!(
        seen.iter().any(|m| m.starts_with("receiving the answer (")),
        "{seen:?}"
    );
    // A modest rate: not one report per chunk.
    assert!(seen.len() <= 3, "{seen:?}");
}

// ---------------------------------------------------------------------------------------------
// Failures: each outcome, its error, its advice, and how often it was tried
// ---------------------------------------------------------------------------------------------

/// How a case should end.
enum Want {
    Ok(&'static str),
    Err(fn(&GeminiError) -> bool, &'static [&'static str]),
}

#[tokio::test]
async fn failure_outcomes_map_to_errors_with_advice_and_the_right_attempts() {
    use GeminiError as E;
    // (name, scripts queued, expected outcome, expected generate requests)
    let cases: Vec<(&str, Vec<Script>, Want, usize)> = vec![
        (
            "blocked prompt",
            vec![Script::blocked("PROHIBITED_CONTENT")],
            Want::Err(
                |e| matches!(e, E::Blocked { reason } if reason == "PROHIBITED_CONTENT"),
                &["blocked", "Rephrase"],
            ),
            1,
        ),
        (
            "MAX_TOKENS without parts",
            vec![Script::max_tokens_no_parts()],
            Want::Err(
                |e| matches!(e, E::MaxTokens),
                &["MAX_TOKENS", "thinking_mode"],
            ),
            1,
        ),
        (
            "empty STOP twice",
            vec![Script::empty_stop(), Script::empty_stop()],
            Want::Err(
                |e| matches!(e, E::Empty { finish_reason } if finish_reason == "STOP"),
                &["empty answer"],
            ),
            2,
        ),
        (
            "empty STOP then an answer",
            vec![Script::empty_stop(), Script::text("second try")],
            Want::Ok("second try"),
            2,
        ),
        (
            "SAFETY without text",
            vec![Script::finish_without_text("SAFETY")],
            Want::Err(
                |e| matches!(e, E::Withheld { finish_reason, .. } if finish_reason == "SAFETY"),
                &["SAFETY", "safety filters"],
            ),
            1,
        ),
        (
            "RECITATION without text",
            vec![Script::finish_without_text("RECITATION")],
            Want::Err(
                |e| matches!(e, E::Withheld { .. }),
                &["RECITATION", "summary"],
            ),
            1,
        ),
        (
            "a new finish reason without text",
            vec![Script::finish_without_text("PUP_LIMITED_DISABLED")],
            Want::Err(
                |e| matches!(e, E::Withheld { .. }),
                &["PUP_LIMITED_DISABLED", "Retry"],
            ),
            1,
        ),
        (
            "malformed chunk, then an answer",
            vec![Script::malformed(), Script::text("recovered")],
            Want::Ok("recovered"),
            2,
        ),
        (
            "malformed chunk every time",
            (0..5).map(|_| Script::malformed()).collect(),
            Want::Err(|e| matches!(e, E::Malformed { .. }), &["not valid JSON"]),
            5,
        ),
        (
            "malformed chunk after text",
            vec![Script::malformed_after(&["half an ans"])],
            Want::Err(
                |e| matches!(e, E::Malformed { .. }),
                &["broke off after 11 characters"],
            ),
            1,
        ),
        (
            "error tail before any text, then an answer",
            vec![Script::error_tail_after(&[]), Script::text("fine now")],
            Want::Ok("fine now"),
            2,
        ),
        (
            "error tail after text",
            vec![Script::error_tail_after(&["The first ", "part"])],
            Want::Err(
                |e| matches!(e, E::Malformed { .. }),
                &[
                    "broke off after 14 characters",
                    "503 UNAVAILABLE",
                    "high demand",
                ],
            ),
            1,
        ),
        (
            "stream closed without finishReason, before text",
            vec![Script::truncated_after(&[]), Script::text("whole")],
            Want::Ok("whole"),
            2,
        ),
        (
            "stream closed without finishReason, after text",
            vec![Script::truncated_after(&["an unfinished sent"])],
            Want::Err(|e| matches!(e, E::Malformed { .. }), &["no finishReason"]),
            1,
        ),
        (
            "connection reset after text",
            vec![Script::reset_after(&["some text"])],
            Want::Err(
                |e| matches!(e, E::Malformed { .. }),
                &["broke off after 9 characters"],
            ),
            1,
        ),
        (
            "connection reset before text, then an answer",
            vec![Script::reset_after(&[]), Script::text("after reset")],
            Want::Ok("after reset"),
            2,
        ),
        (
            "400 invalid key",
            vec![Script::bad_key()],
            Want::Err(
                |e| matches!(e, E::Api { status: 400, code, .. } if code == "INVALID_ARGUMENT"),
                &["API key not valid", "GEMINI_API_KEY"],
            ),
            1,
        ),
        (
            "400 invalid key, array-wrapped",
            vec![Script::bad_key().array_wrapped()],
            Want::Err(
                |e| matches!(e, E::Api { status: 400, .. }),
                &["API key not valid", "GEMINI_API_KEY"],
            ),
            1,
        ),
        (
            "400 token limit",
            vec![Script::token_limit(1_500_000, 1_048_576)],
            Want::Err(
                |e| matches!(e, E::Api { status: 400, .. }),
                &["(1500000)", "fewer or smaller files", "MAX_CONTEXT_TOKENS"],
            ),
            1,
        ),
        (
            "400 both thinking fields",
            vec![Script::both_thinking_fields()],
            Want::Err(
                |e| matches!(e, E::Api { status: 400, .. }),
                &["thinking_budget and thinking_level", "thinking_mode"],
            ),
            1,
        ),
        (
            "403 permission denied",
            vec![Script::permission_denied()],
            Want::Err(
                |e| matches!(e, E::Api { status: 403, code, .. } if code == "PERMISSION_DENIED"),
                &["GEMINI_API_KEY"],
            ),
            1,
        ),
        (
            "404 unknown model",
            vec![Script::unknown_model()],
            Want::Err(
                |e| matches!(e, E::Api { status: 404, .. }),
                &["models/gemini-3.8-flash is not found", "listmodels"],
            ),
            1,
        ),
        (
            "503 every time",
            (0..5).map(|_| Script::overloaded()).collect(),
            Want::Err(
                |e| matches!(e, E::Api { status: 503, .. }),
                &["high demand", "overloaded", "(tried 5 times)"],
            ),
            5,
        ),
        (
            "503 array-wrapped, then an answer",
            vec![Script::overloaded().array_wrapped(), Script::text("ok")],
            Want::Ok("ok"),
            2,
        ),
        (
            "500, 502, 504, 408, then an answer",
            vec![
                Script::internal(),
                Script::raw(
                    502,
                    "text/html",
                    "<html><body>502 Bad Gateway</body></html>",
                ),
                Script::error(
                    504,
                    "DEADLINE_EXCEEDED",
                    "Deadline expired before operation could complete.",
                ),
                Script::raw(408, "text/plain", ""),
                Script::text("finally"),
            ],
            Want::Ok("finally"),
            5,
        ),
        (
            "429 per-minute without RetryInfo, then an answer",
            vec![Script::quota_exceeded(None), Script::text("after quota")],
            Want::Ok("after quota"),
            2,
        ),
        (
            "429 per-day quota fails fast",
            vec![Script::quota_per_day()],
            Want::Err(
                |e| matches!(e, E::Api { status: 429, .. }),
                &["daily quota", "PerDay", "flash"],
            ),
            1,
        ),
        (
            "429 limit: 0 fails fast",
            vec![Script::quota_limit_zero()],
            Want::Err(
                |e| matches!(e, E::Api { status: 429, .. }),
                &["limit: 0", "no quota"],
            ),
            1,
        ),
        (
            "429 asking for more than 5 minutes fails fast",
            vec![Script::quota_exceeded(Some("400s"))],
            Want::Err(|e| matches!(e, E::Api { status: 429, .. }), &["wait 400s"]),
            1,
        ),
        (
            "an HTML 418 is not retried",
            vec![Script::raw(418, "text/html", "<h1>teapot</h1>")],
            Want::Err(
                |e| matches!(e, E::Api { status: 418, .. }),
                &["teapot", "GEMINI_BASE_URL"],
            ),
            1,
        ),
    ];

    for (name, scripts, want, attempts) in cases {
        let s = setup();
        for script in scripts {
            s.fake.push(script);
        }
        let result = s.generate(&request("gemini-3.8-flash")).await;
        match (&want, &result) {
            (Want::Ok(text), Ok(resp)) => assert_eq!(resp.text, *text, "{name}"),
            (Want::Err(is, words), Err(e)) => {
                assert!(is(e), "{name}: unexpected error {e:?}");
                let shown = e.to_string();
                for w in *words {
                    assert!(shown.contains(w), "{name}: `{w}` missing from: {shown}");
                }
            }
            (_, other) => panic!("{name}: unexpected outcome {other:?}"),
        }
        assert_eq!(
            s.fake.generate_requests().len(),
            attempts,
            "{name}: attempts"
        );
        assert_eq!(s.fake.pending(), 0, "{name}: scripts left unused");
    }
}

#[tokio::test]
async fn retry_info_delay_is_honoured() {
    let s = setup();
    s.fake.push(Script::quota_exceeded(Some("0.4s")));
    s.fake.push(Script::text("after waiting"));
    let started = Instant::now();
    let resp = s.generate(&request("gemini-3.8-flash")).await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(resp.text, "after waiting");
    // The backoff of the test configuration is at most 10 ms; RetryInfo asked for 400 ms.
    assert!(elapsed >= Duration::from_millis(400), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    assert_eq!(s.fake.generate_requests().len(), 2);
}

#[tokio::test]
async fn max_attempts_is_configurable() {
    let s = setup_with(|c| c.max_attempts = 2);
    for _ in 0..3 {
        s.fake.push(Script::overloaded());
    }
    let e = s.generate(&request("gemini-3.8-flash")).await.unwrap_err();
    assert!(matches!(e, GeminiError::Api { status: 503, .. }), "{e:?}");
    assert_eq!(s.fake.generate_requests().len(), 2);
    assert_eq!(s.fake.pending(), 1);
}

#[tokio::test]
async fn no_retry_when_the_wait_would_pass_the_deadline() {
    let s = setup_with(|c| c.call_timeout = Duration::from_secs(2));
    s.fake.push(Script::quota_exceeded(Some("30s")));
    let started = Instant::now();
    let e = s.generate(&request("gemini-3.8-flash")).await.unwrap_err();
    assert!(matches!(e, GeminiError::Api { status: 429, .. }), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(s.fake.generate_requests().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Timeouts and cancellation
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_call_deadline_ends_a_slow_answer() {
    let s = setup_with(|c| c.call_timeout = Duration::from_millis(300));
    s.fake
        .push(Script::text("too late").delay_headers(Duration::from_secs(30)));
    let started = Instant::now();
    let e = s.generate(&request("gemini-3.8-flash")).await.unwrap_err();
    assert!(matches!(e, GeminiError::Timeout { .. }), "{e:?}");
    assert!(e.to_string().contains("GEMINI_TIMEOUT_SECS"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn long_thinking_before_the_first_chunk_is_not_cut_by_the_idle_timeout() {
    // Silence before the first chunk is thinking: only the call deadline bounds it.
    let s = setup_with(|c| c.idle_timeout = Duration::from_millis(300));
    s.fake
        .push(Script::text("worth the wait").delay_headers(Duration::from_millis(1200)));
    let resp = s.generate(&request("gemini-3.8-flash")).await.unwrap();
    assert_eq!(resp.text, "worth the wait");
    assert_eq!(s.fake.generate_requests().len(), 1);

    let s = setup_with(|c| {
        c.idle_timeout = Duration::from_millis(300);
        c.call_timeout = Duration::from_millis(800);
    });
    s.fake
        .push(Script::text("too late").delay_headers(Duration::from_secs(30)));
    let e = s.generate(&request("gemini-3.8-flash")).await.unwrap_err();
    assert!(matches!(e, GeminiError::Timeout { .. }), "{e:?}");
    assert_eq!(s.fake.generate_requests().len(), 1);
}

#[tokio::test]
async fn a_stream_that_goes_silent_is_retried_before_text_and_reported_after() {
    // Thoughts arrived, then silence: nothing of the answer yet, so it is retried.
    let s = setup_with(|c| {
        c.idle_timeout = Duration::from_millis(200);
        c.max_attempts = 2;
    });
    for _ in 0..2 {
        s.fake.push(
            Script::text("late")
                .thoughts(["**Thinking**"])
                .chunk_delay(Duration::from_secs(30)),
        );
    }
    let e = s.generate(&request("gemini-3.8-flash")).await.unwrap_err();
    assert!(matches!(e, GeminiError::Stalled { .. }), "{e:?}");
    assert!(e.to_string().contains("GEMINI_IDLE_TIMEOUT_SECS"), "{e}");
    assert_eq!(s.fake.generate_requests().len(), 2);

    // Silent between chunks once text has arrived: not retried.
    let s = setup_with(|c| c.idle_timeout = Duration::from_millis(200));
    s.fake.push(
        Script::chunks(["first part, ", "then nothing"]).chunk_delay(Duration::from_secs(30)),
    );
    let e = s.generate(&request("gemini-3.8-flash")).await.unwrap_err();
    assert!(matches!(e, GeminiError::Stalled { .. }), "{e:?}");
    assert_eq!(s.fake.generate_requests().len(), 1);
}

#[tokio::test]
async fn slow_but_steady_streams_are_fine() {
    let s = setup_with(|c| c.idle_timeout = Duration::from_millis(500));
    s.fake.push(
        Script::chunks(["one ", "two ", "three"])
            .delay_headers(Duration::from_millis(200))
            .chunk_delay(Duration::from_millis(200)),
    );
    let resp = s.generate(&request("gemini-3.8-flash")).await.unwrap();
    assert_eq!(resp.text, "one two three");
}

#[tokio::test]
async fn cancellation_aborts_the_request_in_flight() {
    let s = setup();
    s.fake
        .push(Script::text("never read").delay_headers(Duration::from_secs(30)));
    let ctx = CallContext::default();
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let e = s
        .client()
        .generate(&request("gemini-3.8-flash"), &ctx)
        .await
        .unwrap_err();
    assert!(matches!(e, GeminiError::Cancelled), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
    // The request had reached the server; nothing was retried after the cancel.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(s.fake.generate_requests().len(), 1);
}

#[tokio::test]
async fn an_unreachable_server_is_a_transport_error_after_retries() {
    // A port nobody listens on: bind, note it, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let s = setup_with(|c| {
        c.base_url = format!("http://127.0.0.1:{port}");
        c.max_attempts = 3;
    });
    let e = s.generate(&request("gemini-3.8-flash")).await.unwrap_err();
    assert!(matches!(e, GeminiError::Transport { .. }), "{e:?}");
    let shown = e.to_string();
    assert!(shown.contains("GEMINI_BASE_URL"), "{shown}");
    assert!(!shown.contains(KEY));
}

// ---------------------------------------------------------------------------------------------
// The capacity fallback in `Gemini::generate`
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn persistent_503_falls_back_to_the_faster_model() {
    let s = setup_with(|c| c.max_attempts = 2);
    s.fake.push(Script::overloaded()).push(Script::overloaded());
    let gemini = s.gemini();
    let req = request("gemini-3.1-pro-preview");
    let resp = gemini.generate(req, &CallContext::default()).await.unwrap();

    let sent = s.fake.generate_requests();
    let models: Vec<&str> = sent.iter().map(|r| r.model.as_deref().unwrap()).collect();
    assert_eq!(
        models,
        vec![
            "gemini-3.1-pro-preview",
            "gemini-3.1-pro-preview",
            "gemini-3.8-flash"
        ]
    );
    assert!(
        resp.text.starts_with("FAKE-REPLY model=gemini-3.8-flash "),
        "{}",
        resp.text
    );
    let fb = resp.fallback.expect("fallback is reported");
    assert_eq!(fb.from, "gemini-3.1-pro-preview");
    assert_eq!(fb.to, "gemini-3.8-flash");
    assert!(fb.reason.contains("503"), "{}", fb.reason);
}

#[tokio::test]
async fn a_daily_quota_falls_back_at_once() {
    let s = setup();
    s.fake.push(Script::quota_per_day());
    let resp = s
        .gemini()
        .generate(request("gemini-3.1-pro-preview"), &CallContext::default())
        .await
        .unwrap();
    let sent = s.fake.generate_requests();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[1].model.as_deref(), Some("gemini-3.8-flash"));
    assert!(resp.fallback.unwrap().reason.contains("429"));
}

#[tokio::test]
async fn no_fallback_on_a_bad_request() {
    let s = setup();
    s.fake.push(Script::token_limit(2_000_000, 1_048_576));
    let e = s
        .gemini()
        .generate(request("gemini-3.1-pro-preview"), &CallContext::default())
        .await
        .unwrap_err();
    assert!(matches!(e, GeminiError::Api { status: 400, .. }), "{e:?}");
    assert_eq!(s.fake.generate_requests().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// countTokens and the model list
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn count_tokens_asks_the_api() {
    let s = setup();
    let text = "fn main() { println!(\"hello\"); }\n".repeat(10);
    let n = s
        .client()
        .count_tokens("gemini-3.8-flash", &text)
        .await
        .unwrap();
    // The fake counts ⌈chars/4⌉ of what it was sent.
    assert_eq!(n, text.chars().count().div_ceil(4) as u64);
    let r = &s.fake.requests()[0];
    assert_eq!(r.action.as_deref(), Some("countTokens"));
    assert_eq!(r.model.as_deref(), Some("gemini-3.8-flash"));
    assert_eq!(r.body["contents"][0]["parts"][0]["text"], json!(text));
    assert_eq!(r.header("x-goog-api-key"), Some(KEY));

    // Its errors are classified like any other.
    s.fake
        .push_to(Endpoint::CountTokens, Script::unknown_model());
    let e = s
        .client()
        .count_tokens("gemini-9-nope", "x")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("listmodels"), "{e}");
}

#[tokio::test]
async fn list_models_follows_pages_and_keeps_text_models() {
    let s = setup();
    let client = s.client();
    let models = client.list_models().await.unwrap();
    let ids: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(
        ids,
        vec![
            "gemini-2.5-pro",
            "gemini-2.5-flash",
            "gemini-2.5-flash-lite",
            "gemini-3-flash-preview",
            "gemini-3.1-pro-preview",
            "gemini-3.1-flash-lite",
            "gemini-3.5-flash",
            "gemini-3.5-flash-lite",
            "gemini-3.6-flash",
            "gemini-3.7-flash",
            "gemini-3.8-flash",
            "gemini-4-argon",
        ]
    );
    assert!(
        models
            .iter()
            .all(|m| m.input_limit == 1_048_576 && m.output_limit == 65_536)
    );
    assert_eq!(models[4].display_name, "Gemini 3.1 Pro Preview");
    // Pages were followed: the fake serves at most MODELS_PAGE_CAP per page.
    let listed = FakeGemini::default_models().len();
    let gets: Vec<_> = s
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.path == "/v1beta/models")
        .collect();
    assert_eq!(gets.len(), listed.div_ceil(MODELS_PAGE_CAP));
    assert!(gets[1].query.as_deref().unwrap().contains("pageToken="));
    assert!(gets.iter().all(|r| r.header("x-goog-api-key") == Some(KEY)));
}

#[tokio::test]
async fn refresh_models_updates_the_catalogue_once() {
    let s = setup();
    let mut models: Vec<Value> = FakeGemini::default_models()
        .into_iter()
        .filter(|m| m["name"] != "models/gemini-2.5-pro")
        .collect();
    models.push(
        json!({"name": "models/gemini-3.9-flash", "displayName": "Gemini 3.9 Flash",
        "inputTokenLimit": 2_097_152, "outputTokenLimit": 131_072,
        "supportedGenerationMethods": ["generateContent", "countTokens"], "thinking": true}),
    );
    s.fake.set_models(models);
    let gemini = s.gemini();
    assert!(gemini.catalogue().resolve("gemini-2.5-pro").is_ok());

    let n = gemini.refresh_models().await.unwrap();
    assert_eq!(n, 12);
    let new = gemini.catalogue().resolve("gemini-3.9-flash").unwrap();
    assert_eq!((new.input_limit, new.output_limit), (2_097_152, 131_072));
    let e = gemini.catalogue().resolve("gemini-2.5-pro").unwrap_err();
    assert!(e.to_string().contains("shut down"), "{e}");

    // Cached: a second refresh asks nothing more.
    let before = s.fake.requests().len();
    gemini.refresh_models().await.unwrap();
    assert_eq!(s.fake.requests().len(), before);
}

#[tokio::test]
async fn a_failed_refresh_is_an_error_and_is_not_cached() {
    let s = setup();
    s.fake
        .push_to(Endpoint::ListModels, Script::permission_denied());
    let gemini = s.gemini();
    let e = gemini.refresh_models().await.unwrap_err();
    assert!(matches!(e, GeminiError::Api { status: 403, .. }), "{e:?}");
    assert!(gemini.refresh_models().await.unwrap() > 0);
}

// ---------------------------------------------------------------------------------------------
// The key
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_fake_answers_like_google_to_missing_or_wrong_keys() {
    let s = setup();
    s.fake.require_key("the-right-key");
    let e = s.generate(&request("gemini-3.8-flash")).await.unwrap_err();
    assert!(matches!(e, GeminiError::Api { status: 400, .. }), "{e:?}");
    assert!(e.to_string().contains("GEMINI_API_KEY"), "{e}");

    let right = ApiClient::new(&s.config.gemini(), Secret::new("the-right-key")).unwrap();
    let resp = right
        .generate(&request("gemini-3.8-flash"), &CallContext::default())
        .await
        .unwrap();
    assert!(resp.text.starts_with("FAKE-REPLY"));

    // No key at all: Google's 403.
    let bare = reqwest::Client::new()
        .post(format!(
            "{}/v1beta/models/gemini-3.8-flash:generateContent",
            s.fake.base_url()
        ))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status().as_u16(), 403);
}

/// A `tracing` writer that keeps everything in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_key_never_appears_in_errors_or_logs() {
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let s = setup();
    // Failures of every kind, including an upstream that echoes the key back.
    s.fake
        .push(Script::error(
            400,
            "INVALID_ARGUMENT",
            &format!("API key {KEY} not valid"),
        ))
        .push(Script::overloaded())
        .push(Script::overloaded())
        .push(Script::overloaded())
        .push(Script::overloaded())
        .push(Script::overloaded())
        .push(Script::malformed_after(&["x"]))
        .push(Script::raw(
            500,
            "text/plain",
            format!("proxy says key={KEY}"),
        ))
        .push(Script::raw(
            500,
            "text/plain",
            format!("proxy says key={KEY}"),
        ))
        .push(Script::raw(
            500,
            "text/plain",
            format!("proxy says key={KEY}"),
        ))
        .push(Script::raw(
            500,
            "text/plain",
            format!("proxy says key={KEY}"),
        ))
        .push(Script::raw(
            500,
            "text/plain",
            format!("proxy says key={KEY}"),
        ));
    let client = s.client();
    let mut errors = Vec::new();
    for _ in 0..4 {
        errors.push(
            client
                .generate(&request("gemini-3.8-flash"), &CallContext::default())
                .await
                .unwrap_err(),
        );
    }
    assert_eq!(s.fake.pending(), 0);
    let unreachable = setup_with(|c| {
        c.base_url = "http://127.0.0.1:9".into();
        c.max_attempts = 1;
    });
    errors.push(
        unreachable
            .generate(&request("gemini-3.8-flash"))
            .await
            .unwrap_err(),
    );

    // The key was sent, in the header only.
    let sent = s.fake.requests();
    assert!(sent.iter().all(|r| r.header("x-goog-api-key") == Some(KEY)));
    assert!(
        sent.iter()
            .all(|r| !r.path.contains(KEY) && !r.query.as_deref().unwrap_or("").contains(KEY))
    );

    assert!(
        errors[0].to_string().contains("API key *** not valid"),
        "{}",
        errors[0]
    );
    for e in &errors {
        for shown in [e.to_string(), format!("{e:?}")] {
            assert!(!shown.contains(KEY), "key leaked: {shown}");
        }
    }
    for printed in [format!("{:?}", s.config), format!("{:?}", s.config.api_key)] {
        assert!(!printed.contains(KEY), "key leaked: {printed}");
    }
    let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("retrying a Gemini call"),
        "logs were not captured: {logs}"
    );
    assert!(!logs.contains(KEY), "key leaked into logs: {logs}");
}

// ---------------------------------------------------------------------------------------------
// The fake itself, for the other endpoints other tests (and the Gemini CLI) use
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// The real binary against the fake
// ---------------------------------------------------------------------------------------------

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

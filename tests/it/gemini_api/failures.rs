//! Failures: each outcome, its error, its advice, and how often it was tried.

use std::time::{Duration, Instant};

use gemini_mcp_server::gemini::GeminiError;

use super::{request, setup, setup_with};
use crate::support::fake_gemini::Script;

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
    let s = setup_with(|c| c.gemini.max_attempts = 2);
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
    let s = setup_with(|c| c.gemini.call_timeout = Duration::from_secs(2));
    s.fake.push(Script::quota_exceeded(Some("30s")));
    let started = Instant::now();
    let e = s.generate(&request("gemini-3.8-flash")).await.unwrap_err();
    assert!(matches!(e, GeminiError::Api { status: 429, .. }), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(s.fake.generate_requests().len(), 1);
}

//! How answers are read: every SSE framing, Google's exact bytes and recorded streams, thoughts
//! left out, usage from the last chunk, cut answers, grounding sources, progress.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use gemini_mcp_server::gemini::{CallContext, GeminiError, Usage};

use super::{request, setup};
use crate::support::fake_gemini::Script;

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

//! The key: answered as Google answers a missing or wrong one, and never in errors or logs.

use std::sync::{Arc, Mutex};

use gemini_mcp_server::config::Secret;
use gemini_mcp_server::gemini::api::ApiClient;
use gemini_mcp_server::gemini::{CallContext, GeminiError};

use super::{KEY, request, setup, setup_with};
use crate::support::fake_gemini::Script;

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
    // Another test's subscriber, registered at the same time on another thread, may have cached
    // a callsite as uninteresting before this one existed: ask every callsite again.
    tracing::callsite::rebuild_interest_cache();

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
        c.gemini.base_url = "http://127.0.0.1:9".into();
        c.gemini.max_attempts = 1;
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
    for printed in [
        format!("{:?}", s.config),
        format!("{:?}", s.config.gemini.api_key),
    ] {
        assert!(!printed.contains(KEY), "key leaked: {printed}");
    }
    let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("retrying a Gemini call"),
        "logs were not captured: {logs}"
    );
    assert!(!logs.contains(KEY), "key leaked into logs: {logs}");
}

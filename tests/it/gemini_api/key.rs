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

/// Set in the child process that [`key_logs_child`] runs in.
const CHILD: &str = "GEMINI_MCP_KEY_TEST_CHILD";

/// The key in no error and no log line. `tracing`'s dispatch state (which callsites are
/// interesting, the highest level any subscriber wants) is one per process: another test's
/// subscriber, set or dropped on another thread in the middle of this one, once hid the retry
/// log line from this test's subscriber. So the checks run in a process of their own, where the
/// capturing subscriber is the global one and sees every thread's events.
#[test]
fn the_key_never_appears_in_errors_or_logs() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "gemini_api::key::key_logs_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the checks failed in their process:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "the child process ran no check:\n{stdout}"
    );
}

/// Not a test on its own: the checks that [`the_key_never_appears_in_errors_or_logs`] runs in a
/// process of their own; run any other way (`--include-ignored`), it does nothing.
#[test]
#[ignore = "the child process of the key test; it runs it"]
fn key_logs_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::set_global_default(subscriber).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(key_checks(logs));
}

async fn key_checks(logs: Captured) {
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
    let leaked: Vec<&str> = logs.lines().filter(|l| l.contains(KEY)).collect();
    assert!(leaked.is_empty(), "key leaked into logs: {leaked:#?}");
}

//! Timeouts and cancellation: the call's deadline, the idle timeout of a stream, cancellation of
//! the request in flight, an unreachable server.

use std::time::{Duration, Instant};

use gemini_mcp_server::gemini::{CallContext, GeminiError};

use super::{KEY, request, setup, setup_with};
use crate::support::fake_gemini::Script;

#[tokio::test]
async fn the_call_deadline_ends_a_slow_answer() {
    let s = setup_with(|c| c.gemini.call_timeout = Duration::from_millis(300));
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
    let s = setup_with(|c| c.gemini.idle_timeout = Duration::from_millis(300));
    s.fake
        .push(Script::text("worth the wait").delay_headers(Duration::from_millis(1200)));
    let resp = s.generate(&request("gemini-3.8-flash")).await.unwrap();
    assert_eq!(resp.text, "worth the wait");
    assert_eq!(s.fake.generate_requests().len(), 1);

    let s = setup_with(|c| {
        c.gemini.idle_timeout = Duration::from_millis(300);
        c.gemini.call_timeout = Duration::from_millis(800);
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
        c.gemini.idle_timeout = Duration::from_millis(200);
        c.gemini.max_attempts = 2;
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
    let s = setup_with(|c| c.gemini.idle_timeout = Duration::from_millis(200));
    s.fake.push(
        Script::chunks(["first part, ", "then nothing"]).chunk_delay(Duration::from_secs(30)),
    );
    let e = s.generate(&request("gemini-3.8-flash")).await.unwrap_err();
    assert!(matches!(e, GeminiError::Stalled { .. }), "{e:?}");
    assert_eq!(s.fake.generate_requests().len(), 1);
}

#[tokio::test]
async fn slow_but_steady_streams_are_fine() {
    let s = setup_with(|c| c.gemini.idle_timeout = Duration::from_millis(500));
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
        c.gemini.base_url = format!("http://127.0.0.1:{port}");
        c.gemini.max_attempts = 3;
    });
    let e = s.generate(&request("gemini-3.8-flash")).await.unwrap_err();
    assert!(matches!(e, GeminiError::Transport { .. }), "{e:?}");
    let shown = e.to_string();
    assert!(shown.contains("GEMINI_BASE_URL"), "{shown}");
    assert!(!shown.contains(KEY));
}

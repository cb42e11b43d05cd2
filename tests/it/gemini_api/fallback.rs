//! The capacity fallback in `Gemini::generate`.

use gemini_mcp_server::gemini::{CallContext, GeminiError};

use super::{request, setup, setup_with};
use crate::support::fake_gemini::Script;

#[tokio::test]
async fn persistent_503_falls_back_to_the_faster_model() {
    let s = setup_with(|c| c.gemini.max_attempts = 2);
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

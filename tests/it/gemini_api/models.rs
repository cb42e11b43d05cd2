//! countTokens and the model list: pages followed, text models kept, the catalogue refreshed.

use gemini_mcp_server::gemini::GeminiError;
use serde_json::{Value, json};

use super::{KEY, setup};
use crate::support::fake_gemini::{Endpoint, FakeGemini, MODELS_PAGE_CAP, Script};

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

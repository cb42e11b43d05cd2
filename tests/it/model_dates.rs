//! Dates and prices compiled into the catalogue, end to end: a shutdown date never refuses a
//! call (the API's 404 is the truth, and the replacement answers it), a dated price is read at
//! the server's day (`GEMINI_MCP_TODAY`), and under a USD cap a model without a price is refused
//! rather than counted as free.

use serde_json::{Value, json};

use crate::support::fake_gemini::{FakeGemini, Script};
use crate::support::mcp::{self, KEY, call, text};

struct Env {
    dir: tempfile::TempDir,
    fake: FakeGemini,
}

impl Env {
    fn new() -> Env {
        Env {
            dir: crate::support::project::with(&[crate::support::project::BUGGY_ADD]),
            fake: FakeGemini::start(),
        }
    }

    async fn client(&self, extra: &[(&str, &str)]) -> mcp::Client {
        let url = self.fake.base_url();
        let mut vars = vec![("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", url.as_str())];
        vars.extend_from_slice(extra);
        mcp::start(self.dir.path(), &vars).await
    }

    fn models_asked(&self) -> Vec<String> {
        self.fake
            .generate_requests()
            .iter()
            .filter_map(|r| r.model.clone())
            .collect()
    }
}

fn structured(r: &rmcp::model::CallToolResult) -> Value {
    r.structured_content.clone().expect("structured content")
}

/// Past gemini-2.5-flash's announced date (2026-12-01) the call is sent as asked, and the reply
/// says the model is past its date and what replaces it; a month before, that it is scheduled.
#[tokio::test]
async fn a_model_past_its_shutdown_date_is_asked_and_the_reply_says_so() {
    for (today, says) in [
        (
            "2026-12-15",
            "gemini-2.5-flash is past its announced shutdown date (2026-12-01)",
        ),
        (
            "2026-11-27",
            "gemini-2.5-flash is scheduled to shut down on 2026-12-01",
        ),
    ] {
        let env = Env::new();
        let client = env.client(&[("GEMINI_MCP_TODAY", today)]).await;
        let r = call(
            &client,
            "chat",
            json!({"prompt": "hello", "model": "gemini-2.5-flash"}),
        )
        .await
        .unwrap();
        assert_ne!(r.is_error, Some(true), "{today}: {}", text(&r));
        assert_eq!(env.models_asked(), ["gemini-2.5-flash"], "{today}");
        let t = text(&r);
        assert!(
            t.contains(says) && t.contains("move to gemini-3.5-flash-lite"),
            "{today}: {t}"
        );
        client.cancel().await.unwrap();
    }
    // Far from the date nothing is said.
    let env = Env::new();
    let client = env.client(&[("GEMINI_MCP_TODAY", "2026-06-01")]).await;
    let r = call(
        &client,
        "chat",
        json!({"prompt": "hello", "model": "gemini-2.5-flash"}),
    )
    .await
    .unwrap();
    assert!(!text(&r).contains("shut down"), "{}", text(&r));
    client.cancel().await.unwrap();
}

/// When the API answers 404 NOT_FOUND for a model with an announced replacement, the
/// replacement answers, and the reply says so; with fallbacks off, the error names it.
#[tokio::test]
async fn a_model_the_api_no_longer_serves_is_answered_by_its_replacement() {
    let gone = |r: &crate::support::fake_gemini::Recorded| {
        (r.model.as_deref() == Some("gemini-2.5-flash")).then(Script::unknown_model)
    };
    let env = Env::new();
    env.fake.respond_with(gone);
    let client = env.client(&[("GEMINI_MCP_TODAY", "2026-12-15")]).await;
    let r = call(
        &client,
        "chat",
        json!({"prompt": "hello", "model": "gemini-2.5-flash"}),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert_eq!(
        env.models_asked(),
        ["gemini-2.5-flash", "gemini-3.5-flash-lite"]
    );
    let s = structured(&r);
    assert_eq!(s["model"], "gemini-3.5-flash-lite");
    assert_eq!(s["fallback"]["from"], "gemini-2.5-flash");
    assert_eq!(s["fallback"]["to"], "gemini-3.5-flash-lite");
    assert!(
        text(&r).contains(
            "Answered by gemini-3.5-flash-lite because gemini-2.5-flash is no longer served (404 NOT_FOUND)"
        ),
        "{}",
        text(&r)
    );
    client.cancel().await.unwrap();

    let env = Env::new();
    env.fake.respond_with(gone);
    let client = env.client(&[("GEMINI_FALLBACK_MODEL", "none")]).await;
    let r = call(
        &client,
        "chat",
        json!({"prompt": "hello", "model": "gemini-2.5-flash"}),
    )
    .await
    .unwrap();
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    let t = text(&r);
    assert!(
        t.contains("404") && t.contains("its replacement is gemini-3.5-flash-lite"),
        "{t}"
    );
    assert_eq!(env.models_asked(), ["gemini-2.5-flash"]);
    client.cancel().await.unwrap();
}

/// Under a USD cap a model without a known price is refused before Gemini, naming the setting
/// that gives it one; with that setting it is asked and its cost counted.
#[tokio::test]
async fn a_usd_cap_refuses_a_model_without_a_price_until_one_is_given() {
    let env = Env::new();
    let client = env.client(&[("GEMINI_MCP_DAILY_USD", "5")]).await;
    let r = call(
        &client,
        "chat",
        json!({"prompt": "hello", "model": "gemini-3.6-flash"}),
    )
    .await
    .unwrap();
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    let t = text(&r);
    assert!(
        t.contains("gemini-3.6-flash has no known price")
            && t.contains("GEMINI_MCP_DAILY_USD")
            && t.contains("GEMINI_MCP_PRICES"),
        "{t}"
    );
    assert!(env.fake.generate_requests().is_empty(), "it reached Gemini");
    // Argon, once unpriced too, now has one (a third-party figure) and is asked.
    let r = call(
        &client,
        "chat",
        json!({"prompt": "hello", "model": "gemini-4-argon"}),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert!(structured(&r)["usage"]["cost_usd"].as_f64().unwrap() > 0.0);
    // listmodels says which model has no price and where the others come from.
    let r = call(&client, "listmodels", json!({})).await.unwrap();
    let t = text(&r);
    assert!(
        t.contains("No known price: gemini-3.6-flash") && t.contains("(third-party)"),
        "{t}"
    );
    let models = structured(&r)["models"].clone();
    let entry = |id: &str| {
        models
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .cloned()
            .unwrap()
    };
    assert!(entry("gemini-3.6-flash").get("price").is_none());
    assert_eq!(entry("gemini-4-argon")["price"]["source"], "third_party");
    assert_eq!(entry("gemini-3.8-flash")["price"]["source"], "google");
    client.cancel().await.unwrap();

    let env = Env::new();
    let client = env
        .client(&[
            ("GEMINI_MCP_DAILY_USD", "5"),
            ("GEMINI_MCP_PRICES", "gemini-3.6-flash=1.5/9"),
        ])
        .await;
    let r = call(
        &client,
        "chat",
        json!({"prompt": "hello", "model": "gemini-3.6-flash"}),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert!(structured(&r)["usage"]["cost_usd"].as_f64().unwrap() > 0.0);
    assert_eq!(env.models_asked(), ["gemini-3.6-flash"]);
    client.cancel().await.unwrap();
}

/// gemini-3.8-flash's launch price ends after 2026-12-31: the estimate follows the server's
/// day on both sides of it.
#[tokio::test]
async fn a_dated_price_follows_the_servers_day() {
    let mut costs = Vec::new();
    for today in ["2026-12-31", "2027-01-01"] {
        let env = Env::new();
        env.fake.push(Script::text("ok").usage(1_000_000, 0, 0, 0));
        let client = env.client(&[("GEMINI_MCP_TODAY", today)]).await;
        let r = call(
            &client,
            "chat",
            json!({"prompt": "hello", "model": "flash"}),
        )
        .await
        .unwrap();
        assert_ne!(r.is_error, Some(true), "{}", text(&r));
        costs.push(structured(&r)["usage"]["cost_usd"].as_f64().unwrap());
        client.cancel().await.unwrap();
    }
    assert_eq!(costs, [0.75, 1.5]);
}

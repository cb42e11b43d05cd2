//! The stand-in Gemini's `cachedContents`, driven over HTTP as a client would: create, get,
//! list, patch and delete on the Gemini API and on Vertex AI, expiry by the fake's clock, each
//! refusal Google answers, and a generate call that reads a cache first.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::fake_gemini::{
    CACHES_PAGE_CAP, CacheOp, Endpoint, FakeGemini, HeldCache, Script,
};

const KEY: &str = "cache-key";
const MODEL: &str = "gemini-3.8-flash";
const VERTEX: &str = "/v1/projects/p/locations/us-central1";

/// A client of the fake: every call with `x-goog-api-key: KEY` unless told otherwise.
struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    fn of(fake: &FakeGemini) -> Client {
        Client {
            http: reqwest::Client::new(),
            base: fake.base_url(),
        }
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        key: Option<&str>,
    ) -> (u16, Value) {
        let mut r = self.http.request(method, format!("{}{path}", self.base));
        if let Some(k) = key {
            r = r.header("x-goog-api-key", k);
        }
        if let Some(b) = body {
            r = r.json(&b);
        }
        let r = r.send().await.expect("the fake answers");
        let status = r.status().as_u16();
        let text = r.text().await.expect("a body");
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        self.send(method, path, body, Some(KEY)).await
    }

    async fn create(&self, body: Value) -> (u16, Value) {
        self.call(Method::POST, "/v1beta/cachedContents", Some(body))
            .await
    }

    async fn generate(&self, model: &str, body: Value) -> (u16, Value) {
        let path = format!("/v1beta/models/{model}:generateContent");
        self.call(Method::POST, &path, Some(body)).await
    }
}

/// About `tokens` tokens of text, as the fake counts them (⌈chars / 4⌉).
fn text_of(tokens: usize) -> String {
    "abcd".repeat(tokens)
}

fn user(text: &str) -> Value {
    json!({"role": "user", "parts": [{"text": text}]})
}

/// A create body for `model` over `tokens` tokens of contents.
fn cache_body(model: &str, tokens: usize) -> Value {
    json!({"model": format!("models/{model}"), "contents": [user(&text_of(tokens))]})
}

fn seconds_between(a: &Value, b: &Value) -> i64 {
    let t = |v: &Value| chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap();
    (t(b) - t(a)).num_seconds()
}

fn error_of(v: &Value) -> (&str, &str) {
    (
        v["error"]["status"].as_str().unwrap_or_default(),
        v["error"]["message"].as_str().unwrap_or_default(),
    )
}

#[tokio::test]
async fn a_cache_is_created_read_listed_patched_and_deleted() {
    let fake = FakeGemini::start();
    fake.require_key(KEY);
    let c = Client::of(&fake);

    // Nothing held: Google lists `{}`.
    assert_eq!(
        c.call(Method::GET, "/v1beta/cachedContents", None).await,
        (200, json!({}))
    );

    let mut body = cache_body(MODEL, 5000);
    body["systemInstruction"] = json!({"parts": [{"text": "You review code."}]});
    body["displayName"] = json!("repo@abc123");
    body["ttl"] = json!("600s");
    let (status, made) = c.create(body.clone()).await;
    assert_eq!(status, 200, "{made}");
    let name = made["name"].as_str().unwrap().to_string();
    let id = name.strip_prefix("cachedContents/").unwrap();
    assert_eq!(id.len(), 40);
    assert!(
        id.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    );
    assert_eq!(made["model"], "models/gemini-3.8-flash");
    assert_eq!(made["displayName"], "repo@abc123");
    assert_eq!(made["createTime"], made["updateTime"]);
    assert_eq!(
        seconds_between(&made["createTime"], &made["expireTime"]),
        600
    );
    let tokens = (5000 * 4 + "You review code.".len()).div_ceil(4) as u64;
    assert_eq!(made["usageMetadata"], json!({"totalTokenCount": tokens}));
    // The cached members are input only.
    for k in [
        "contents",
        "systemInstruction",
        "tools",
        "toolConfig",
        "ttl",
    ] {
        assert!(made.get(k).is_none(), "{k} in {made}");
    }
    // The same key check as the generate endpoints.
    let (status, e) = c
        .send(
            Method::POST,
            "/v1beta/cachedContents",
            Some(body.clone()),
            None,
        )
        .await;
    assert_eq!((status, error_of(&e).0), (403, "PERMISSION_DENIED"));
    let (status, e) = c
        .send(Method::GET, &format!("/v1beta/{name}"), None, Some("other"))
        .await;
    assert_eq!((status, error_of(&e).0), (400, "INVALID_ARGUMENT"));

    let held: Vec<HeldCache> = fake.caches();
    assert_eq!(held.len(), 1);
    assert_eq!(
        (held[0].name.as_str(), held[0].model_id()),
        (name.as_str(), MODEL)
    );
    assert_eq!(held[0].token_count, tokens);
    assert_eq!(held[0].contents, body["contents"]);
    assert_eq!(held[0].system_instruction, body["systemInstruction"]);
    assert_eq!(
        held[0].expire_time_rfc3339(),
        made["expireTime"].as_str().unwrap()
    );

    assert_eq!(
        c.call(Method::GET, &format!("/v1beta/{name}"), None).await,
        (200, made.clone())
    );

    // Only the expiry changes, whatever else the body says.
    let (status, patched) = c
        .call(
            Method::PATCH,
            &format!("/v1beta/{name}?updateMask=ttl"),
            Some(json!({"ttl": "7200s", "displayName": "renamed", "contents": []})),
        )
        .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["displayName"], "repo@abc123");
    assert_eq!(patched["createTime"], made["createTime"]);
    assert_eq!(
        seconds_between(&patched["updateTime"], &patched["expireTime"]),
        7200
    );
    assert_eq!(fake.caches()[0].contents, body["contents"]);
    // The path names the cache; the body may not.
    let (status, e) = c
        .call(
            Method::PATCH,
            &format!("/v1beta/{name}"),
            Some(json!({"name": name, "ttl": "60s"})),
        )
        .await;
    assert_eq!(
        (status, error_of(&e).1),
        (
            400,
            "Invalid value at 'cached_content' (oneof), oneof field '_name' is already set. Cannot set 'name'"
        )
    );
    let at = "2030-01-02T03:04:05Z";
    let (_, patched) = c
        .call(
            Method::PATCH,
            &format!("/v1beta/{name}?updateMask=expireTime"),
            Some(json!({"expireTime": at})),
        )
        .await;
    assert_eq!(patched["expireTime"], at);

    // Pages of at most CACHES_PAGE_CAP, followed by nextPageToken.
    fake.set_cache_minimum(MODEL, 1);
    for _ in 0..CACHES_PAGE_CAP {
        assert_eq!(c.create(cache_body(MODEL, 1)).await.0, 200);
    }
    let (_, page) = c
        .call(Method::GET, "/v1beta/cachedContents?pageSize=100", None)
        .await;
    assert_eq!(
        page["cachedContents"].as_array().unwrap().len(),
        CACHES_PAGE_CAP
    );
    assert_eq!(page["cachedContents"][0]["name"], json!(name));
    let token = page["nextPageToken"].as_str().unwrap();
    let (_, rest) = c
        .call(
            Method::GET,
            &format!("/v1beta/cachedContents?pageSize=100&pageToken={token}"),
            None,
        )
        .await;
    assert_eq!(rest["cachedContents"].as_array().unwrap().len(), 1);
    assert!(rest.get("nextPageToken").is_none());

    assert_eq!(
        c.call(Method::DELETE, &format!("/v1beta/{name}"), None)
            .await,
        (200, json!({}))
    );
    let (status, e) = c.call(Method::GET, &format!("/v1beta/{name}"), None).await;
    assert_eq!(
        (status, error_of(&e)),
        (
            403,
            (
                "PERMISSION_DENIED",
                "CachedContent not found (or permission denied)"
            )
        )
    );
    let (status, _) = c
        .call(Method::DELETE, &format!("/v1beta/{name}"), None)
        .await;
    assert_eq!(status, 403);
    assert_eq!(fake.caches().len(), CACHES_PAGE_CAP);

    // Every call is recorded, with its body; refused ones too.
    assert_eq!(fake.cache_calls(CacheOp::Create), 2 + CACHES_PAGE_CAP);
    assert_eq!(fake.cache_calls(CacheOp::Get), 3);
    assert_eq!(fake.cache_calls(CacheOp::List), 3);
    assert_eq!(fake.cache_calls(CacheOp::Patch), 3);
    assert_eq!(fake.cache_calls(CacheOp::Delete), 2);
    assert_eq!(fake.cache_requests(CacheOp::Create)[0].body, body);
    assert_eq!(
        fake.cache_requests(CacheOp::Patch)[0].query.as_deref(),
        Some("updateMask=ttl")
    );
}

#[tokio::test]
async fn caches_expire_by_the_fakes_clock() {
    let fake = FakeGemini::start();
    let c = Client::of(&fake);
    // No ttl: one hour.
    let (_, hour) = c.create(cache_body(MODEL, 4096)).await;
    assert_eq!(
        seconds_between(&hour["createTime"], &hour["expireTime"]),
        3600
    );
    assert_eq!(hour["displayName"], "");
    let mut body = cache_body(MODEL, 4096);
    body["ttl"] = json!("60s");
    let (_, minute) = c.create(body).await;
    let name = minute["name"].as_str().unwrap();

    let ask = json!({"cachedContent": name, "contents": [user("Still there?")]});
    fake.advance_clock(Duration::from_secs(59));
    assert_eq!(
        c.call(Method::GET, &format!("/v1beta/{name}"), None)
            .await
            .0,
        200
    );
    assert_eq!(c.generate(MODEL, ask.clone()).await.0, 200);
    fake.advance_clock(Duration::from_secs(2));
    let (status, e) = c.call(Method::GET, &format!("/v1beta/{name}"), None).await;
    assert_eq!((status, error_of(&e).0), (403, "PERMISSION_DENIED"));
    let (status, e) = c.generate(MODEL, ask).await;
    assert_eq!(
        (status, error_of(&e).1),
        (403, "CachedContent not found (or permission denied)")
    );
    let (_, list) = c.call(Method::GET, "/v1beta/cachedContents", None).await;
    assert_eq!(list["cachedContents"].as_array().unwrap().len(), 1);
    assert_eq!(fake.caches().len(), 1);

    // The times the fake answers follow its clock.
    fake.advance_clock(Duration::from_secs(3600));
    assert!(fake.caches().is_empty());
    let (_, later) = c.create(cache_body(MODEL, 4096)).await;
    assert!(seconds_between(&hour["createTime"], &later["createTime"]) >= 3661);
}

#[tokio::test]
async fn the_fake_refuses_what_google_refuses() {
    let fake = FakeGemini::start();
    let c = Client::of(&fake);

    // Too small, by the model's minimum (2.5 Flash: 2,048) or the test's.
    let (status, e) = c.create(cache_body("gemini-2.5-flash", 896)).await;
    assert_eq!(
        (status, error_of(&e)),
        (
            400,
            (
                "INVALID_ARGUMENT",
                "Cached content is too small. total_token_count=896, min_total_token_count=2048"
            )
        )
    );
    let (_, e) = c.create(cache_body(MODEL, 4095)).await;
    assert!(
        error_of(&e)
            .1
            .ends_with("total_token_count=4095, min_total_token_count=4096"),
        "{e}"
    );
    fake.set_cache_minimum(MODEL, 10);
    assert_eq!(c.create(cache_body(MODEL, 10)).await.0, 200);

    // ttl or expireTime, not both; well formed.
    let mut both = cache_body(MODEL, 4096);
    both["ttl"] = json!("60s");
    both["expireTime"] = json!("2030-01-01T00:00:00Z");
    let (status, e) = c.create(both).await;
    assert_eq!((status, error_of(&e).0), (400, "INVALID_ARGUMENT"));
    assert!(
        error_of(&e)
            .1
            .contains("oneof field 'expiration' is already set"),
        "{e}"
    );
    for (field, value) in [("ttl", "60"), ("ttl", "-5s"), ("expireTime", "tomorrow")] {
        let mut b = cache_body(MODEL, 4096);
        b[field] = json!(value);
        let (status, e) = c.create(b).await;
        assert_eq!(
            (status, error_of(&e).0),
            (400, "INVALID_ARGUMENT"),
            "{field}={value}"
        );
    }
    // A model that does not cache, or none Google has.
    let (status, e) = c.create(cache_body("gemini-embedding-001", 4096)).await;
    assert_eq!((status, error_of(&e).0), (404, "NOT_FOUND"));
    assert!(error_of(&e).1.contains("createCachedContent"), "{e}");
    assert_eq!(c.create(cache_body("gemini-9-nope", 4096)).await.0, 404);

    // The next create fails as a free-tier key's does, then creates work again.
    fake.fail_next_cache_create();
    let (status, e) = c.create(cache_body(MODEL, 12)).await;
    assert_eq!(
        (status, error_of(&e)),
        (
            429,
            (
                "RESOURCE_EXHAUSTED",
                "TotalCachedContentStorageTokensPerModelFreeTier limit exceeded for model gemini-3.8-flash: limit=0, requested=12"
            )
        )
    );
    fake.push_to(Endpoint::CreateCache, Script::internal());
    assert_eq!(c.create(cache_body(MODEL, 12)).await.0, 500);
    assert_eq!(fake.pending(), 0);
    let (_, made) = c.create(cache_body(MODEL, 12)).await;
    let name = made["name"].as_str().unwrap().to_string();

    // Generate: nothing the cache holds may be sent beside it.
    let conflict = "CachedContent can not be used with GenerateContent request setting system_instruction, tools or tool_config.\n\nProposed fix: move those values to CachedContent from GenerateContent request.";
    for (field, value) in [
        ("systemInstruction", json!({"parts": [{"text": "x"}]})),
        (
            "tools",
            json!([{"functionDeclarations": [{"name": "read_file"}]}]),
        ),
        (
            "toolConfig",
            json!({"functionCallingConfig": {"mode": "ANY"}}),
        ),
        ("system_instruction", json!({"parts": [{"text": "x"}]})),
    ] {
        let mut body = json!({"cachedContent": name, "contents": [user("hi")]});
        body[field] = value;
        let (status, e) = c.generate(MODEL, body).await;
        assert_eq!(
            (status, error_of(&e)),
            (400, ("INVALID_ARGUMENT", conflict)),
            "{field}"
        );
    }
    // The cache's model only.
    let ask = json!({"cachedContent": name, "contents": [user("hi")]});
    let (status, e) = c.generate("gemini-3.5-flash", ask.clone()).await;
    assert_eq!(
        (status, error_of(&e).1),
        (
            400,
            "Model used by GenerateContent request (models/gemini-3.5-flash) and CachedContent (models/gemini-3.8-flash) has to be the same."
        )
    );
    // Another key does not find it; an unknown name neither.
    let path = format!("/v1beta/models/{MODEL}:generateContent");
    assert_eq!(
        c.send(Method::POST, &path, Some(ask.clone()), Some("another"))
            .await
            .0,
        403
    );
    let unknown = json!({"cachedContent": "cachedContents/nope", "contents": [user("hi")]});
    assert_eq!(c.generate(MODEL, unknown).await.0, 403);
    // Gone behind the client's back.
    assert_eq!(c.generate(MODEL, ask.clone()).await.0, 200);
    assert!(fake.vanish_cache(&name));
    assert_eq!(c.generate(MODEL, ask).await.0, 403);
    // Each is recorded as sent.
    assert_eq!(fake.generate_requests().len(), 9);
}

#[tokio::test]
async fn a_generate_call_reads_the_cache_first() {
    let fake = FakeGemini::start();
    let c = Client::of(&fake);
    let files = format!("=== src/lib.rs ===\n{}", text_of(4096));
    let system = "You review code.";
    let (_, made) = c
        .create(json!({
            "model": format!("models/{MODEL}"),
            "systemInstruction": {"parts": [{"text": system}]},
            "contents": [user(&files), {"role": "model", "parts": [{"text": "Read."}]}],
            "tools": [{"functionDeclarations": [{"name": "read_file", "description": "Reads a file."}]}],
        }))
        .await;
    let name = made["name"].as_str().unwrap();
    let cached = made["usageMetadata"]["totalTokenCount"].as_u64().unwrap();
    let body = json!({"cachedContent": name, "contents": [user("What changed?")],
        "generationConfig": {"maxOutputTokens": 1024}});

    let (status, v) = c.generate(MODEL, body.clone()).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["candidates"][0]["content"]["parts"][0]["text"],
        format!("FAKE-REPLY model={MODEL} turns=2 last=What changed?")
    );
    let sent = fake.generate_requests().pop().unwrap();
    let own = sent.raw_body.chars().count().div_ceil(4) as u64;
    let usage = &v["usageMetadata"];
    assert_eq!(usage["cachedContentTokenCount"], cached);
    assert_eq!(usage["promptTokenCount"], own + cached);
    assert_eq!(
        usage["cacheTokensDetails"],
        json!([{"modality": "TEXT", "tokenCount": cached}])
    );
    assert_eq!(
        usage["totalTokenCount"].as_u64().unwrap(),
        own + cached + usage["candidatesTokenCount"].as_u64().unwrap()
    );

    // What was sent, and what the model read.
    assert_eq!(sent.body, body);
    assert_eq!(sent.cached_content(), Some(name));
    assert_eq!(sent.cached_tokens, Some(cached));
    let effective = sent.effective_body();
    assert_eq!(effective["contents"].as_array().unwrap().len(), 3);
    assert_eq!(
        effective["tools"][0]["functionDeclarations"][0]["name"],
        "read_file"
    );
    assert_eq!(sent.system_text(), system);
    let roles: Vec<String> = sent.messages().into_iter().map(|(r, _)| r).collect();
    assert_eq!(roles, ["user", "model", "user"]);
    assert_eq!(sent.messages()[0].1, files);
    assert_eq!(sent.last_user_text(), "What changed?");

    // countTokens counts a named cache too.
    let count = format!("/v1beta/models/{MODEL}:countTokens");
    let ask = json!({"generateContentRequest": {"model": format!("models/{MODEL}"),
        "cachedContent": name, "contents": [user("What changed?")]}});
    let (_, counted) = c.call(Method::POST, &count, Some(ask)).await;
    assert_eq!(
        counted["totalTokens"],
        "What changed?".len().div_ceil(4) as u64 + cached
    );
    assert_eq!(counted["cachedContentTokenCount"], cached);
    let (_, plain) = c
        .call(
            Method::POST,
            &count,
            Some(json!({"contents": [user("What changed?")]})),
        )
        .await;
    assert_eq!(
        plain,
        json!({"totalTokens": 4, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 4}]})
    );

    // Streamed, the same; a responder sees the effective conversation too.
    fake.respond_with(|r| {
        Some(Script::text(format!(
            "system={} turns={}",
            r.system_text(),
            r.messages().len()
        )))
    });
    let text = reqwest::Client::new()
        .post(format!(
            "{}/v1beta/models/{MODEL}:streamGenerateContent?alt=sse",
            fake.base_url()
        ))
        .json(&body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let chunks: Vec<Value> = text
        .split("\r\n\r\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let said: String = chunks
        .iter()
        .filter_map(|c| c["candidates"][0]["content"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(said, format!("system={system} turns=3"));
    for chunk in &chunks {
        assert_eq!(chunk["usageMetadata"]["cachedContentTokenCount"], cached);
        assert_eq!(chunk["usageMetadata"]["promptTokenCount"], own + cached);
    }
    // A call without a cache is answered as before.
    let (_, plain) = c.generate(MODEL, json!({"contents": [user("hi")]})).await;
    assert!(
        plain["usageMetadata"]
            .get("cachedContentTokenCount")
            .is_none()
    );
    assert!(fake.generate_requests().last().unwrap().effective.is_none());
}

#[tokio::test]
async fn vertex_ai_holds_caches_under_its_project_and_location() {
    let fake = FakeGemini::start();
    fake.require_bearer(|t| t == "token");
    let http = reqwest::Client::new();
    let base = fake.base_url();
    let call = |method: Method, path: String, body: Option<Value>| {
        let mut r = http
            .request(method, format!("{base}{path}"))
            .bearer_auth("token");
        if let Some(b) = body {
            r = r.json(&b);
        }
        async move {
            let r = r.send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let model = format!("projects/p/locations/us-central1/publishers/google/models/{MODEL}");
    let body = json!({"model": model, "contents": [user(&text_of(4096))], "ttl": "300s"});
    let (status, made) = call(
        Method::POST,
        format!("{VERTEX}/cachedContents"),
        Some(body.clone()),
    )
    .await;
    assert_eq!(status, 200, "{made}");
    let name = made["name"].as_str().unwrap().to_string();
    let id = name
        .strip_prefix("projects/p/locations/us-central1/cachedContents/")
        .unwrap()
        .to_string();
    assert!(
        id.len() == 19 && id.bytes().all(|b| b.is_ascii_digit()),
        "{id}"
    );
    assert_eq!(made["model"], json!(model));
    assert!(made.get("displayName").is_none());
    assert_eq!(
        seconds_between(&made["createTime"], &made["expireTime"]),
        300
    );

    // Without a token, as Vertex AI answers; a model name without the project is refused.
    let r = http
        .post(format!("{base}{VERTEX}/cachedContents"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let short = json!({"model": format!("models/{MODEL}"), "contents": [user(&text_of(4096))]});
    assert_eq!(
        call(
            Method::POST,
            format!("{VERTEX}/cachedContents"),
            Some(short)
        )
        .await
        .0,
        400
    );
    let small = json!({"model": model, "contents": [user("tiny")]});
    let (status, e) = call(
        Method::POST,
        format!("{VERTEX}/cachedContents"),
        Some(small),
    )
    .await;
    assert_eq!(
        (status, error_of(&e)),
        (
            400,
            (
                "INVALID_ARGUMENT",
                "The cached content is of 1 tokens. The minimum token count to start caching is 4096."
            )
        )
    );

    assert_eq!(
        call(Method::GET, format!("/v1/{name}"), None).await,
        (200, made.clone())
    );
    let (_, list) = call(Method::GET, format!("{VERTEX}/cachedContents"), None).await;
    assert_eq!(list["cachedContents"][0]["name"], json!(name));
    // Another project or location holds none of it.
    let (_, other) = call(
        Method::GET,
        "/v1/projects/q/locations/us-central1/cachedContents".into(),
        None,
    )
    .await;
    assert_eq!(other, json!({}));
    let (status, e) = call(
        Method::GET,
        format!("/v1/projects/p/locations/europe-west4/cachedContents/{id}"),
        None,
    )
    .await;
    assert_eq!(
        (status, error_of(&e)),
        (
            404,
            (
                "NOT_FOUND",
                format!("Not found: cached content metadata for {id}.").as_str()
            )
        )
    );

    let generate = format!("{VERTEX}/publishers/google/models/{MODEL}:generateContent");
    let ask = json!({"cachedContent": name, "contents": [user("What changed?")]});
    let (status, v) = call(Method::POST, generate.clone(), Some(ask.clone())).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["usageMetadata"]["cachedContentTokenCount"], 4096);
    assert_eq!(v["usageMetadata"]["trafficType"], "ON_DEMAND");
    let mut conflict = ask.clone();
    conflict["systemInstruction"] = json!({"parts": [{"text": "x"}]});
    let (status, e) = call(Method::POST, generate.clone(), Some(conflict)).await;
    assert_eq!(
        (status, error_of(&e).1),
        (
            400,
            "Tool config, tools and system instruction should not be set in the request when using cached content."
        )
    );
    let other_model = format!("{VERTEX}/publishers/google/models/gemini-3.5-flash:generateContent");
    assert_eq!(
        call(Method::POST, other_model, Some(ask.clone())).await.0,
        400
    );

    let (status, patched) = call(
        Method::PATCH,
        format!("/v1/{name}"),
        Some(json!({"ttl": "60s"})),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        seconds_between(&patched["updateTime"], &patched["expireTime"]),
        60
    );
    assert_eq!(
        call(Method::DELETE, format!("/v1/{name}"), None).await,
        (200, json!({}))
    );
    let (status, e) = call(Method::POST, generate, Some(ask)).await;
    assert_eq!((status, error_of(&e).0), (404, "NOT_FOUND"));
    assert!(fake.caches().is_empty());
    assert!(
        fake.cache_requests(CacheOp::Create)
            .iter()
            .all(|r| r.is_vertex())
    );
}

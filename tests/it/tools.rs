//! Every tool end to end: the real binary over stdio, the fake Gemini API behind it. What Gemini
//! received is asserted from the fake's recordings.

use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ClientRequest, ServerResult};
use rmcp::service::PeerRequestOptions;
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
}

fn structured(r: &rmcp::model::CallToolResult) -> Value {
    r.structured_content.clone().expect("structured content")
}

#[tokio::test]
async fn chat_answers_with_text_structured_content_and_meta() {
    let env = Env::new();
    let client = env.client(&[]).await;
    let r = call(
        &client,
        "chat",
        json!({"prompt": "Is a trie overkill for 200 routes?"}),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let s = structured(&r);
    assert_eq!(s["status"], "success");
    let id = s["continuation_id"].as_str().unwrap();
    assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");
    assert_eq!(s["remaining_turns"], 19);
    assert_eq!(s["model"], "gemini-3.1-pro-preview");
    assert!(
        s["usage"]["input"].as_u64().unwrap() > 0 && s["usage"]["output"].as_u64().unwrap() > 0,
        "{s}"
    );
    let meta = r.meta.clone().expect("_meta").0;
    assert_eq!(meta["continuation_id"], id);
    assert_eq!(meta["sessionId"], id);
    let t = text(&r);
    assert!(
        t.starts_with("FAKE-REPLY model=gemini-3.1-pro-preview turns=1"),
        "{t}"
    );
    assert!(
        t.contains(&format!("continuation_id: {id} (19 turns left)")),
        "{t}"
    );

    let sent = env.fake.generate_requests();
    assert_eq!(sent.len(), 1);
    let req = &sent[0];
    assert_eq!(req.header("x-goog-api-key"), Some(KEY));
    assert!(!req.path.contains(KEY) && !req.query.clone().unwrap_or_default().contains(KEY));
    assert!(
        req.system_text().contains("thinking partner"),
        "{}",
        req.system_text()
    );
    assert!(req.system_text().contains("requires_clarification"));
    assert_eq!(req.thinking_config()["thinkingLevel"], "MEDIUM");
    assert!(req.thinking_config().get("thinkingBudget").is_none());
    assert!(
        req.generation_config().get("temperature").is_none(),
        "no sampling parameters for 3.x by default"
    );
    assert!(
        req.last_user_text()
            .ends_with("## Request\nIs a trie overkill for 200 routes?\n"),
        "{}",
        req.last_user_text()
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn thinking_follows_the_model_family_and_the_tool() {
    let env = Env::new();
    let client = env.client(&[]).await;
    let cases: &[(&str, Value, &str, Value)] = &[
        (
            "chat",
            json!({"prompt": "q", "model": "gemini-2.5-flash", "thinking_mode": "max"}),
            "thinkingBudget",
            json!(24576),
        ),
        (
            "chat",
            json!({"prompt": "q", "model": "gemini-2.5-pro", "thinking_mode": "minimal"}),
            "thinkingBudget",
            json!(128),
        ),
        (
            "chat",
            json!({"prompt": "q", "model": "gemini-2.5-flash-lite", "thinking_mode": "minimal"}),
            "thinkingBudget",
            json!(512),
        ),
        (
            "chat",
            json!({"prompt": "q", "model": "pro", "thinking_mode": "minimal"}),
            "thinkingLevel",
            json!("LOW"),
        ),
        (
            "chat",
            json!({"prompt": "q", "model": "flash-lite", "thinking_mode": "minimal"}),
            "thinkingLevel",
            json!("MINIMAL"),
        ),
        (
            "thinkdeep",
            json!({"current_analysis": "a"}),
            "thinkingLevel",
            json!("HIGH"),
        ),
        (
            "debug",
            json!({"error_description": "e"}),
            "thinkingLevel",
            json!("MEDIUM"),
        ),
    ];
    for (tool, args, key, want) in cases {
        env.fake.clear_requests();
        let r = call(&client, tool, args.clone()).await.unwrap();
        assert_ne!(r.is_error, Some(true), "{tool} {args}: {}", text(&r));
        let req = env.fake.generate_requests().pop().unwrap();
        let tc = req.thinking_config();
        assert_eq!(&tc[*key], want, "{tool} {args}: {tc}");
        assert_eq!(
            tc.as_object()
                .unwrap()
                .keys()
                .filter(|k| k.starts_with("thinking"))
                .count(),
            1,
            "never both: {tc}"
        );
    }
    // 2.5 models get the tool's temperature; an explicit one wins everywhere.
    env.fake.clear_requests();
    call(
        &client,
        "chat",
        json!({"prompt": "q", "model": "gemini-2.5-flash"}),
    )
    .await
    .unwrap();
    assert_eq!(
        env.fake.generate_requests()[0].generation_config()["temperature"],
        0.5
    );
    env.fake.clear_requests();
    call(&client, "chat", json!({"prompt": "q", "temperature": 0.3}))
        .await
        .unwrap();
    let t = env.fake.generate_requests()[0].generation_config()["temperature"]
        .as_f64()
        .unwrap();
    assert!((t - 0.3).abs() < 1e-6, "{t}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn every_tool_sends_its_own_prompt_and_request_sections() {
    let env = Env::new();
    let client = env.client(&[]).await;
    let cases: &[(&str, Value, &str, &[&str])] = &[
        (
            "chat",
            json!({"prompt": "P1", "system_prompt": "Answer in French."}),
            "thinking partner",
            &["## Request\nP1"],
        ),
        (
            "thinkdeep",
            json!({"current_analysis": "A1", "problem_context": "C1", "focus_areas": ["latency", "cost"]}),
            "principal engineer",
            &[
                "## The agent's current analysis\nA1",
                "## Problem context\nC1",
                "## Focus areas\nlatency, cost",
            ],
        ),
        (
            "debug",
            json!({"error_description": "D1", "error_context": "trace", "previous_attempts": "restart", "runtime_info": "linux"}),
            "debugging expert",
            &[
                "## Problem\nD1",
                "## Error output\ntrace",
                "## Previous attempts\nrestart",
                "## Runtime\nlinux",
            ],
        ),
    ];
    for (tool, args, role, sections) in cases {
        env.fake.clear_requests();
        let r = call(&client, tool, args.clone()).await.unwrap();
        assert_ne!(r.is_error, Some(true), "{tool}: {}", text(&r));
        let req = env.fake.generate_requests().pop().unwrap();
        assert!(
            req.system_text().contains(role),
            "{tool}: {}",
            req.system_text()
        );
        for s in *sections {
            assert!(
                req.last_user_text().contains(s),
                "{tool}: `{s}` not in {}",
                req.last_user_text()
            );
        }
    }
    env.fake.clear_requests();
    call(
        &client,
        "chat",
        json!({"prompt": "P", "system_prompt": "Answer in French."}),
    )
    .await
    .unwrap();
    let sys = env.fake.generate_requests()[0].system_text();
    assert!(
        sys.trim_end().ends_with("Answer in French."),
        "caller instructions come last: {sys}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn continuation_carries_history_across_tools_and_latest() {
    let env = Env::new();
    let client = env.client(&[("MAX_CONVERSATION_TURNS", "3")]).await;
    let first = call(&client, "chat", json!({"prompt": "first question"}))
        .await
        .unwrap();
    let id = structured(&first)["continuation_id"]
        .as_str()
        .unwrap()
        .to_string();

    let second = call(
        &client,
        "debug",
        json!({"error_description": "second", "continuation_id": id}),
    )
    .await
    .unwrap();
    let s = structured(&second);
    assert_eq!(
        s["continuation_id"],
        id.as_str(),
        "the same thread, not a new one"
    );
    assert_eq!(s["remaining_turns"], 1);
    let req = env.fake.generate_requests().pop().unwrap();
    let msgs = req.messages();
    assert_eq!(msgs.len(), 3, "user, model, user: {msgs:?}");
    assert_eq!(msgs[0].0, "user");
    assert!(msgs[0].1.contains("first question"));
    assert_eq!(msgs[1].0, "model");
    assert!(msgs[1].1.starts_with("FAKE-REPLY"), "{:?}", msgs[1]);
    assert!(msgs[2].1.contains("## Problem\nsecond"));
    // The new request starts with the bytes of the previous one (Gemini's prefix cache).
    let earlier = env.fake.generate_requests()[0].messages();
    assert_eq!(msgs[0], earlier[0]);

    let third = call(
        &client,
        "thinkdeep",
        json!({"current_analysis": "third", "continuation_id": "latest"}),
    )
    .await
    .unwrap();
    assert_eq!(structured(&third)["continuation_id"], id.as_str());
    assert_eq!(structured(&third)["remaining_turns"], 0);

    let full = call(
        &client,
        "chat",
        json!({"prompt": "fourth", "continuation_id": id}),
    )
    .await
    .unwrap();
    assert_eq!(full.is_error, Some(true));
    assert!(
        text(&full).contains("limit of 3 turns") && text(&full).contains("without continuation_id"),
        "{}",
        text(&full)
    );

    let unknown = call(
        &client,
        "chat",
        json!({"prompt": "x", "continuation_id": uuid::Uuid::new_v4().to_string()}),
    )
    .await
    .unwrap();
    assert_eq!(unknown.is_error, Some(true));
    assert!(
        text(&unknown).contains("unknown or has expired"),
        "{}",
        text(&unknown)
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn gemini_failures_are_tool_errors_that_say_what_to_do() {
    let env = Env::new();
    let client = env
        .client(&[
            ("GEMINI_MAX_ATTEMPTS", "2"),
            ("GEMINI_RETRY_INITIAL_MS", "10"),
            ("GEMINI_RETRY_MAX_MS", "20"),
        ])
        .await;
    let cases: Vec<(Script, &[&str])> = vec![
        (Script::bad_key(), &["400", "GEMINI_API_KEY"]),
        (Script::permission_denied(), &["403"]),
        (Script::quota_per_day(), &["429", "quota"]),
        (Script::blocked("SAFETY"), &["blocked", "SAFETY"]),
        (
            Script::max_tokens_no_parts(),
            &["MAX_TOKENS", "thinking_mode"],
        ),
        (Script::unknown_model(), &["404"]),
    ];
    for (script, words) in cases {
        env.fake.push(script);
        // The fallback model itself: nothing to fall back to, so the error comes through.
        let r = call(
            &client,
            "chat",
            json!({"prompt": "hello", "model": "flash"}),
        )
        .await
        .unwrap();
        assert_eq!(r.is_error, Some(true), "{words:?}: {}", text(&r));
        let t = text(&r);
        assert!(t.starts_with("Error executing gemini: "), "{t}");
        for w in words {
            assert!(t.contains(w), "`{w}` not in: {t}");
        }
        assert!(!t.contains(KEY));
    }
    // Retries are visible at the fake: a 503 then an answer is one success and two requests.
    env.fake.clear_requests();
    env.fake.push(Script::overloaded());
    let r = call(&client, "chat", json!({"prompt": "hello"}))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert_eq!(env.fake.generate_requests().len(), 2);
    // 400 is never retried.
    env.fake.clear_requests();
    env.fake.push(Script::bad_key());
    call(&client, "chat", json!({"prompt": "hello"}))
        .await
        .unwrap();
    assert_eq!(env.fake.generate_requests().len(), 1);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn capacity_errors_fall_back_to_the_faster_model_and_say_so() {
    let env = Env::new();
    let client = env
        .client(&[
            ("GEMINI_MAX_ATTEMPTS", "2"),
            ("GEMINI_RETRY_INITIAL_MS", "10"),
        ])
        .await;
    env.fake
        .push(Script::overloaded())
        .push(Script::overloaded());
    let r = call(&client, "chat", json!({"prompt": "hello"}))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let s = structured(&r);
    assert_eq!(s["fallback"]["from"], "gemini-3.1-pro-preview");
    assert_eq!(s["fallback"]["to"], "gemini-3.8-flash");
    assert_eq!(s["model"], "gemini-3.8-flash");
    assert!(
        text(&r).contains(
            "Answered by gemini-3.8-flash because gemini-3.1-pro-preview was over capacity"
        ),
        "{}",
        text(&r)
    );
    let models: Vec<String> = env
        .fake
        .generate_requests()
        .iter()
        .map(|r| r.model.clone().unwrap())
        .collect();
    assert_eq!(
        models,
        [
            "gemini-3.1-pro-preview",
            "gemini-3.1-pro-preview",
            "gemini-3.8-flash"
        ]
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_key_never_leaks_into_replies_or_logs() {
    let env = Env::new();
    let url = env.fake.base_url();
    let transport = rmcp::transport::TokioChildProcess::builder(mcp::command(
        env.dir.path(),
        &[
            ("GEMINI_API_KEY", KEY),
            ("GEMINI_BASE_URL", &url),
            ("GEMINI_MCP_LOG", "trace"),
            ("GEMINI_MAX_ATTEMPTS", "2"),
            ("GEMINI_RETRY_INITIAL_MS", "10"),
        ],
    ))
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let (transport, stderr) = transport;
    let mut stderr = stderr.expect("stderr");
    let log = tokio::spawn(async move {
        let mut s = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut s)
            .await
            .unwrap();
        s
    });
    let client = rmcp::ServiceExt::serve((), transport).await.unwrap();
    let mut replies = String::new();
    for script in [
        Script::bad_key(),
        Script::missing_key(),
        Script::overloaded(),
        Script::internal(),
        Script::malformed(),
        Script::text("ok"),
    ] {
        env.fake.push(script);
        let r = call(&client, "chat", json!({"prompt": "hello"}))
            .await
            .unwrap();
        replies.push_str(&serde_json::to_string(&r).unwrap());
    }
    let listed = call(&client, "listmodels", json!({})).await.unwrap();
    replies.push_str(&serde_json::to_string(&listed).unwrap());
    client.cancel().await.unwrap();
    let log = log.await.unwrap();
    assert!(log.len() > 200, "trace logging produced output: {log}");
    assert!(
        !replies.contains(KEY) && !replies.contains("0123456789"),
        "key in a reply"
    );
    assert!(
        !log.contains(KEY) && !log.contains("0123456789"),
        "key in the log"
    );
}

#[tokio::test]
async fn progress_is_reported_while_waiting() {
    let env = Env::new();
    let url = env.fake.base_url();
    let (client, recorder) = mcp::start_recording(
        env.dir.path(),
        &[("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", &url)],
    )
    .await;
    env.fake.push(
        Script::chunks(["one ", "two ", "three ", "four"]).chunk_delay(Duration::from_millis(700)),
    );
    let r = call_with(&client, "chat", json!({"prompt": "slow"}), None)
        .await
        .unwrap();
    assert_eq!(text(&r).lines().next().unwrap(), "one two three four");
    let progress = recorder.progress.lock().unwrap().clone();
    assert!(progress.len() >= 2, "{progress:?}");
    assert!(
        progress.windows(2).all(|w| w[1].progress > w[0].progress),
        "progress increases: {progress:?}"
    );
    assert!(
        progress
            .iter()
            .any(|p| p.message.as_deref().unwrap_or("").contains("Gemini")),
        "{progress:?}"
    );
    client.cancel().await.unwrap();
}

async fn call_with<H: rmcp::ClientHandler>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, H>,
    tool: &'static str,
    args: Value,
    timeout: Option<Duration>,
) -> Result<rmcp::model::CallToolResult, rmcp::service::ServiceError> {
    let req = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
        CallToolRequestParams::new(tool).with_arguments(mcp::args(args)),
    ));
    let mut options = PeerRequestOptions::no_options();
    options.timeout = timeout;
    let handle = client.send_cancellable_request(req, options).await?;
    match handle.await_response().await? {
        ServerResult::CallToolResult(r) => Ok(r),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn cancellation_aborts_the_gemini_call_and_the_server_keeps_serving() {
    let env = Env::new();
    let client = env.client(&[]).await;
    // A 60 s answer: only cancellation can end it early.
    env.fake.push(
        Script::chunks(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"])
            .chunk_delay(Duration::from_secs(6)),
    );
    let err = call_with(
        &client,
        "chat",
        json!({"prompt": "slow"}),
        Some(Duration::from_millis(800)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, rmcp::service::ServiceError::Timeout { .. }),
        "{err:?}"
    );
    let started = Instant::now();
    while env.fake.in_flight() > 0 && started.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        env.fake.in_flight(),
        0,
        "the HTTP call to Gemini was not dropped"
    );
    // Nothing was saved for the cancelled call, and the server answers the next one.
    let latest = call(
        &client,
        "chat",
        json!({"prompt": "next", "continuation_id": "latest"}),
    )
    .await
    .unwrap();
    assert!(
        text(&latest).contains("no earlier thread"),
        "{}",
        text(&latest)
    );
    let r = call(&client, "chat", json!({"prompt": "next"}))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_call_ends_at_its_deadline() {
    let env = Env::new();
    let client = env.client(&[("GEMINI_TIMEOUT_SECS", "1")]).await;
    env.fake
        .push(Script::text("late").delay_headers(Duration::from_secs(60)));
    let started = Instant::now();
    let r = call(&client, "chat", json!({"prompt": "slow"}))
        .await
        .unwrap();
    // Ended by the 1 s deadline, not by the 60 s answer (the bound is loose for loaded machines).
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}: {}",
        started.elapsed(),
        text(&r)
    );
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("GEMINI_TIMEOUT_SECS"), "{}", text(&r));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn listmodels_reflects_the_models_endpoint() {
    let env = Env::new();
    let mut models = FakeGemini::default_models();
    models.retain(|m| m["name"] != "models/gemini-3.7-flash");
    let mut new = models[0].clone();
    new["name"] = json!("models/gemini-5-flash");
    new["displayName"] = json!("Gemini 5 Flash");
    models.push(new);
    env.fake.set_models(models);
    let client = env.client(&[]).await;
    let r = call(&client, "listmodels", json!({})).await.unwrap();
    let ids: Vec<String> = structured(&r)["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    assert!(
        ids.contains(&"gemini-5-flash".to_string()),
        "a model released after this build is offered: {ids:?}"
    );
    assert!(
        !ids.contains(&"gemini-3.7-flash".to_string()),
        "a model the endpoint dropped is not: {ids:?}"
    );
    let e = call(
        &client,
        "chat",
        json!({"prompt": "x", "model": "gemini-3.7-flash"}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code.0, -32602);
    assert!(e.message.contains("shut down"), "{}", e.message);
    client.cancel().await.unwrap();
}

/// A malformed `continuation_id` is refused when the call is planned: -32602 naming the field,
/// before the rate limit counts the call and before anything reaches Gemini (not even the model
/// list).
#[tokio::test]
async fn a_malformed_continuation_id_costs_nothing() {
    let env = Env::new();
    let client = env
        .client(&[("GEMINI_MCP_RATE_LIMITS", "chat=1/hour")])
        .await;
    for _ in 0..3 {
        let e = call(
            &client,
            "chat",
            json!({"prompt": "x", "continuation_id": "not-a-thread"}),
        )
        .await
        .unwrap_err();
        assert_eq!(e.code.0, -32602);
        assert!(e.message.contains("continuation_id"), "{}", e.message);
        assert!(e.message.contains("not-a-thread"), "{}", e.message);
    }
    assert!(
        env.fake.requests().is_empty(),
        "nothing reached Gemini: {:?}",
        env.fake.requests().len()
    );
    // The one call the hour allows is still there.
    let r = call(&client, "chat", json!({"prompt": "x"})).await.unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    client.cancel().await.unwrap();
}

/// A daily token cap is checked against the whole request as it is built (system instruction,
/// history, files and the prompt): a prompt-only call over the cap is refused before Gemini,
/// saying the estimate, the cap and what to narrow.
#[tokio::test]
async fn a_daily_token_cap_refuses_the_call_that_would_cross_it_before_gemini() {
    let env = Env::new();
    let client = env.client(&[("GEMINI_MCP_DAILY_TOKENS", "200")]).await;
    let prompt = "Explain why the parser drops the last line of its input. ".repeat(110);
    let counted = gemini_mcp_server::collector::tokens::count(&prompt);
    assert!(counted >= 1_300, "{counted}");
    let r = call(&client, "chat", json!({"prompt": prompt}))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    let t = text(&r);
    let needs: u64 = t
        .split("this request needs about ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no estimate in {t}"));
    assert!(needs >= counted, "estimate {needs} < prompt {counted}: {t}");
    assert!(
        t.contains("daily token cap of 200 (GEMINI_MCP_DAILY_TOKENS)")
            && t.contains("system instruction")
            && t.contains("this turn's files and text")
            && t.contains("shorter prompt")
            && t.contains("00:00 UTC"),
        "{t}"
    );
    assert!(
        env.fake.generate_requests().is_empty(),
        "the refused call reached Gemini"
    );
    client.cancel().await.unwrap();
}

//! Over the Interactions API, through the real binary against the stand-in: every tool; Vertex
//! AI at its own Interactions API; long thinking run in the background and polled by id; and
//! the benchmark of server-side state and of a background run (BENCHMARKS.md § Interactions
//! API). The transport's own cases: `interactions_api`.

use serde_json::json;

use crate::interactions_api::{Env, call, thread_of};
use crate::support::fake_gemini::{InteractionOp, Script};
use crate::support::http::{HttpServer, Raw, result_text};
use crate::support::mcp::KEY;

/// Holds the create bodies in `sent` to google-genai 3.3.0's `CreateModelInteraction`, strictly;
/// without google-genai here, skipped unless `GEMINI_MCP_REQUIRE_GENAI` says it must run.
#[cfg(unix)]
fn hold_to_google_genai(sent: &[crate::support::fake_gemini::Recorded]) {
    let python = match crate::wire_schema::genai_python() {
        Ok(p) => p,
        Err(why) => {
            if crate::support::skip_when(Some(why), "GEMINI_MCP_REQUIRE_GENAI") {
                return;
            }
            unreachable!("skip_when panics when the environment is required");
        }
    };
    let records: Vec<serde_json::Value> = sent
        .iter()
        .map(|r| json!({"name": r.path, "interaction_create": r.body}))
        .collect();
    let (ok, report) = crate::wire_schema::validate(&python, &records);
    assert!(ok, "{report}");
}

/// google-genai's environment is a Linux one (`wire_schema`).
#[cfg(not(unix))]
fn hold_to_google_genai(_: &[crate::support::fake_gemini::Recorded]) {}

/// Vertex AI serves the Interactions API too (google-genai 3.3.0 reaches it at
/// `/v1beta1/projects/{project}/locations/{location}/interactions`, and at `/v1beta1/interactions`
/// in express mode): with a project the call goes there with its bearer token (Application
/// Default Credentials, here from a stand-in metadata server), the operator's labels in the
/// body and no tier field (Vertex takes it as a header); in express mode with the key. Deep
/// Research stays the Gemini API's, and is refused naming the settings.
#[tokio::test]
async fn vertex_ai_answers_over_its_interactions_api() {
    let env = Env::new();
    env.fake.require_bearer(|t| t.starts_with("mds-token-"));
    let mds = crate::vertex::Metadata::start(3600).await;
    let host = mds.addr.to_string();
    let url = env.fake.base_url();
    let server = HttpServer::start(
        env.dir.path(),
        &[
            ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
            ("GOOGLE_CLOUD_PROJECT", "my-proj"),
            ("GOOGLE_CLOUD_LOCATION", "us-central1"),
            ("GOOGLE_VERTEX_BASE_URL", url.as_str()),
            ("GCE_METADATA_HOST", host.as_str()),
            ("GEMINI_MCP_VERTEX_LABELS", "team=payments"),
            ("GEMINI_API_SURFACE", "interactions"),
            ("GEMINI_MCP_DEEP_RESEARCH", "1"),
        ],
    )
    .await;
    let raw = Raw::new(&server.url());
    let first = call(
        &raw,
        1,
        "chat",
        json!({"prompt": "hello", "files": ["src/lib.rs"]}),
    )
    .await;
    assert!(result_text(&first).contains("turns=1"), "{first}");
    call(
        &raw,
        2,
        "chat",
        json!({"prompt": "again", "continuation_id": thread_of(&first)}),
    )
    .await;
    let creates = env.creates();
    assert_eq!(
        creates.len(),
        2,
        "{:?}",
        env.fake
            .requests()
            .iter()
            .map(|r| r.path.clone())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        creates[0].path,
        "/v1beta1/projects/my-proj/locations/us-central1/interactions"
    );
    assert!(
        creates[0]
            .header("authorization")
            .is_some_and(|a| a.starts_with("Bearer mds-token-")),
        "the bearer token goes with it"
    );
    assert_eq!(
        creates[0].body["labels"]["team"], "payments",
        "{}",
        creates[0].body
    );
    assert!(creates[0].body.get("service_tier").is_none());
    assert!(
        creates[1].body.to_string().contains("marker-lib"),
        "the history is sent whole"
    );
    assert!(env.fake.generate_requests().is_empty());
    hold_to_google_genai(&creates);
    let refused = raw
        .call(3, "research", json!({"question": "q"}))
        .await
        .message;
    let text = format!("{}{}", result_text(&refused), refused["error"]);
    assert!(text.contains("GOOGLE_GENAI_USE_VERTEXAI"), "{text}");
    assert_eq!(env.creates().len(), 2, "no run was started");

    // Express mode: the key, at `/v1beta1/interactions`.
    let env = Env::new();
    let url = env.fake.base_url();
    let express = HttpServer::start(
        env.dir.path(),
        &[
            ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
            ("GOOGLE_API_KEY", KEY),
            ("GOOGLE_VERTEX_BASE_URL", url.as_str()),
            ("GEMINI_API_SURFACE", "interactions"),
        ],
    )
    .await;
    let answer = call(
        &Raw::new(&express.url()),
        1,
        "chat",
        json!({"prompt": "hello"}),
    )
    .await;
    assert!(result_text(&answer).contains("FAKE-REPLY"), "{answer}");
    let creates = env.creates();
    assert_eq!(creates.len(), 1);
    assert_eq!(creates[0].path, "/v1beta1/interactions");
    assert_eq!(creates[0].header("x-goog-api-key"), Some(KEY));
}

/// With `GEMINI_MCP_INTERACTIONS_BACKGROUND=1`, a call that thinks at `high` runs in the
/// background at Google (`background: true`, `store: true`, not streamed), polled by id, and is
/// deleted once read; a call at `medium` is streamed as before. With the thread's chain kept
/// (`GEMINI_MCP_INTERACTIONS_STORE=1`) the run is kept and the next turn continues it. Both
/// bodies are google-genai's `CreateModelInteraction`.
#[tokio::test]
async fn long_thinking_runs_in_the_background_polled_by_id() {
    let env = Env::new();
    let state = tempfile::tempdir().unwrap();
    let on = [
        ("GEMINI_MCP_INTERACTIONS_BACKGROUND", "1"),
        ("GEMINI_MCP_BACKGROUND_POLL_MS", "50"),
    ];
    let server = env.server_with("interactions", state.path(), &on).await;
    let raw = Raw::new(&server.url());
    env.fake
        .push(Script::text("Deep thoughts.").delay_headers(std::time::Duration::from_millis(400)));
    let deep = call(
        &raw,
        1,
        "thinkdeep",
        json!({"current_analysis": "add is pure", "thinking_mode": "high", "files": ["src/lib.rs"]}),
    )
    .await;
    assert!(result_text(&deep).contains("Deep thoughts."), "{deep}");
    let body = env.creates()[0].body.clone();
    assert_eq!(body["background"], true, "{body}");
    assert_eq!(body["store"], true, "background needs store: {body}");
    assert_eq!(body["stream"], false, "{body}");
    assert!(body.to_string().contains("marker-lib"));
    let polls = env.fake.interaction_requests(InteractionOp::Get);
    assert!(polls.len() >= 2, "{} polls", polls.len());
    assert_eq!(
        env.fake.interaction_requests(InteractionOp::Delete).len(),
        1
    );
    assert!(
        env.fake.interactions().is_empty(),
        "read, the run is deleted"
    );

    call(&raw, 2, "chat", json!({"prompt": "quick"})).await;
    let body = env.creates()[1].body.clone();
    assert!(body.get("background").is_none(), "{body}");
    assert_eq!(body["stream"], true, "{body}");

    // Kept as the thread's chain: the next turn continues it.
    let kept = tempfile::tempdir().unwrap();
    let stored = [on[0], on[1], ("GEMINI_MCP_INTERACTIONS_STORE", "1")];
    let server = env.server_with("interactions", kept.path(), &stored).await;
    let raw = Raw::new(&server.url());
    let first = call(
        &raw,
        3,
        "thinkdeep",
        json!({"current_analysis": "add is pure", "thinking_mode": "max"}),
    )
    .await;
    assert_eq!(env.fake.interactions().len(), 1, "kept for the thread");
    let next = call(
        &raw,
        4,
        "chat",
        json!({"prompt": "and?", "continuation_id": thread_of(&first)}),
    )
    .await;
    assert!(result_text(&next).contains("turns=2"), "{next}");
    let chained = env.creates().last().unwrap().body.clone();
    assert_eq!(
        chained["previous_interaction_id"].as_str(),
        Some(env.fake.interactions()[0].id.as_str()),
        "{chained}"
    );

    hold_to_google_genai(&env.creates());
}

/// BENCHMARKS.md, Interactions API: a ten-turn chat thread over a ~25 KB file, over
/// `generateContent`, the Interactions API stateless, and the Interactions API with server-side
/// state (`GEMINI_MCP_INTERACTIONS_STORE=1`): the request bytes sent and the input tokens the
/// stand-in bills (it counts a token per 4 characters of the body, and a chained turn's held
/// history as input, as Google bills it); then a background run's overhead against the same
/// answer streamed. Run with `GEMINI_MCP_BENCH_INTERACTIONS=1 cargo test --test it --
/// --nocapture interactions_tools::bench`.
#[tokio::test]
async fn bench_a_ten_turn_thread_and_a_background_run() {
    if std::env::var("GEMINI_MCP_BENCH_INTERACTIONS").as_deref() != Ok("1") {
        return;
    }
    println!(
        "| transport | request bytes sent | billed input tokens | cost (USD, list prices) | turns seen by the model |"
    );
    println!("|---|---|---|---|---|");
    let mut rows = Vec::new();
    for (surface, store, cache) in [
        ("generate-content", "0", "0"),
        ("generate-content", "0", "1"),
        ("interactions", "0", "0"),
        ("interactions", "1", "0"),
    ] {
        let env = Env::new();
        crate::support::project::write(
            env.dir.path(),
            "src/big.rs",
            &"pub fn step(x: u32) -> u32 { x.wrapping_mul(31).rotate_left(7) } // filler\n"
                .repeat(330),
        );
        let state = tempfile::tempdir().unwrap();
        let server = env
            .server_with(
                surface,
                state.path(),
                &[
                    ("GEMINI_MCP_INTERACTIONS_STORE", store),
                    ("GEMINI_MCP_CONTEXT_CACHE", cache),
                ],
            )
            .await;
        let raw = Raw::new(&server.url());
        let mut thread: Option<String> = None;
        let mut billed = 0u64;
        let mut usd = 0.0;
        let mut last = String::new();
        for turn in 0..10u64 {
            let mut args = json!({"prompt": format!("question {turn}: what does step do?")});
            match &thread {
                None => args["files"] = json!(["src/big.rs"]),
                Some(t) => args["continuation_id"] = json!(t),
            }
            let answer = call(&raw, turn + 1, "chat", args).await;
            thread.get_or_insert_with(|| thread_of(&answer));
            let usage = &answer["result"]["structuredContent"]["usage"];
            billed += usage["input"].as_u64().unwrap_or(0);
            usd += usage["cost_usd"].as_f64().unwrap_or(0.0);
            last = result_text(&answer);
        }
        let sent: usize = if surface == "generate-content" {
            env.fake
                .generate_requests()
                .iter()
                .map(|r| r.raw_body.len())
                .sum()
        } else {
            env.creates().iter().map(|r| r.raw_body.len()).sum()
        };
        let turns = last
            .split("turns=")
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .unwrap_or("?")
            .to_string();
        let name = match (surface, store, cache) {
            ("generate-content", _, "0") => "generateContent",
            ("generate-content", _, _) => "generateContent, context cache",
            (_, "0", _) => "Interactions, stateless",
            _ => "Interactions, server-side state",
        };
        println!("| {name} | {sent} | {billed} | {usd:.4} | {turns} |");
        rows.push((sent as f64, billed as f64, usd));
    }
    println!(
        "\nserver-side state against generateContent: {:.3} of the bytes, {:.3} of the billed input, {:.3} of the cost",
        rows[3].0 / rows[0].0,
        rows[3].1 / rows[0].1,
        rows[3].2 / rows[0].2
    );

    // A background run's overhead: the same 2 s answer, streamed and run in the background.
    println!("\n| how | poll interval | wall time (median of 3) |\n|---|---|---|");
    let mut times = Vec::new();
    for (background, poll) in [("0", "10000"), ("1", "250"), ("1", "1000"), ("1", "10000")] {
        let env = Env::new();
        let state = tempfile::tempdir().unwrap();
        let server = env
            .server_with(
                "interactions",
                state.path(),
                &[
                    ("GEMINI_MCP_INTERACTIONS_BACKGROUND", background),
                    ("GEMINI_MCP_BACKGROUND_POLL_MS", poll),
                ],
            )
            .await;
        let raw = Raw::new(&server.url());
        let mut runs = Vec::new();
        for i in 0..3 {
            env.fake.push(
                Script::text("Deep thoughts.").delay_headers(std::time::Duration::from_secs(2)),
            );
            let started = std::time::Instant::now();
            call(
                &raw,
                i + 1,
                "thinkdeep",
                json!({"current_analysis": "add is pure", "thinking_mode": "high"}),
            )
            .await;
            runs.push(started.elapsed());
        }
        runs.sort();
        let how = if background == "1" {
            "background"
        } else {
            "streamed"
        };
        println!("| {how} | {poll} ms | {:.2} s |", runs[1].as_secs_f64());
        times.push(runs[1].as_secs_f64());
    }
    println!(
        "\nbackground against streamed: {:.2} (250 ms), {:.2} (1 s), {:.2} (10 s, the default)",
        times[1] / times[0],
        times[2] / times[0],
        times[3] / times[0]
    );
}

/// Every tool answers over the Interactions API, through the real binary: chat, thinkdeep,
/// analyze, codereview, debug and precommit (on a git repository with a pending change) in one
/// request each, investigate in a function-call round, research as an agent's run; nothing goes
/// to generateContent, and each reply is the tool's own (a review's JSON read as a review).
#[tokio::test]
async fn every_tool_answers_over_the_interactions_api() {
    let env = Env::new();
    let root = env.dir.path();
    let repo = git2::Repository::init(root).unwrap();
    let mut index = repo.index().unwrap();
    index.add_path(std::path::Path::new("src/lib.rs")).unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("Test", "test@example.com").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "first", &tree, &[])
        .unwrap();
    crate::support::project::write(
        root,
        "src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 { a - b } // marker-lib\n",
    );
    let state = tempfile::tempdir().unwrap();
    let server = env
        .server_with(
            "interactions",
            state.path(),
            &[
                ("GEMINI_MCP_DEEP_RESEARCH", "1"),
                ("GEMINI_MCP_BACKGROUND_POLL_MS", "50"),
            ],
        )
        .await;
    let raw = Raw::new(&server.url());
    let text_tools = [
        (
            "chat",
            json!({"prompt": "what does add do?", "files": ["src/lib.rs"]}),
        ),
        (
            "thinkdeep",
            json!({"current_analysis": "add is pure", "files": ["src/lib.rs"]}),
        ),
        (
            "analyze",
            json!({"files": ["src/"], "question": "Where is add used?"}),
        ),
        (
            "debug",
            json!({"error_description": "add(2, 1) is 1", "files": ["src/lib.rs"]}),
        ),
    ];
    for (i, (tool, args)) in text_tools.into_iter().enumerate() {
        let answer = call(&raw, i as u64 + 1, tool, args).await;
        let text = result_text(&answer);
        assert!(text.contains("FAKE-REPLY"), "{tool}: {text}");
        let body = env.creates().last().unwrap().body.clone();
        assert!(
            body.to_string().contains("marker-lib"),
            "{tool}: the file is sent"
        );
        assert_eq!(body["stream"], true, "{tool}");
    }
    for (i, (tool, args)) in [
        (
            "codereview",
            json!({"files": ["src/lib.rs"], "context": "Adds numbers"}),
        ),
        (
            "precommit",
            json!({"path": ".", "original_request": "Fix add"}),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let answer = call(&raw, 10 + i as u64, tool, args).await;
        let review = &answer["result"]["structuredContent"];
        assert!(review["findings"].is_array(), "{tool}: {answer}");
        assert!(
            review["summary"]
                .as_str()
                .unwrap_or_default()
                .contains("FAKE-REPLY"),
            "{tool}: {review}"
        );
        let body = env.creates().last().unwrap().body.clone();
        assert_eq!(
            body["response_format"]["mime_type"], "application/json",
            "{tool}"
        );
    }
    let precommit = env.creates().last().unwrap().body.to_string();
    assert!(precommit.contains("a - b"), "the diff is sent: {precommit}");

    env.fake
        .push(Script::calls(
            &[("read_file", json!({"path": "src/lib.rs"}))],
            "c2ln",
            [300, 10, 20],
        ))
        .push(Script::text("add subtracts (src/lib.rs:1).").usage(500, 20, 10, 0));
    let inv = call(
        &raw,
        20,
        "investigate",
        json!({"task": "What does add do?"}),
    )
    .await;
    assert!(result_text(&inv).contains("add subtracts"), "{inv}");

    env.fake
        .push(crate::research::report(std::time::Duration::from_millis(
            200,
        )));
    let research = call(&raw, 21, "research", json!({"question": "Which parser?"})).await;
    assert!(result_text(&research).contains("Use clap 4"), "{research}");
    assert_eq!(
        env.creates().last().unwrap().body["agent"],
        crate::research::AGENT
    );
    assert!(
        env.fake.generate_requests().is_empty(),
        "nothing went to generateContent"
    );
    assert_eq!(env.creates().len(), 6 + 2 + 1, "one create per request");
}

//! Consensus through the real server and command line, against the stand-in Gemini with a
//! planted answer per model: the models asked at once (seen in the requests' arrival times), no
//! request holding another model's answer, each model's stance in its own instructions, the
//! synthesis made from the answers with no model named, review findings merged by verified
//! location, a model that fails named while the others answer, the caps refusing the whole
//! consensus before any request, the cost summed, the thread continued, the dry run and the
//! precommit gate that requires agreement.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::fake_gemini::{FakeGemini, Recorded, Script};
use crate::support::mcp::{self, KEY, call, text};

/// The models asked in these tests, each with the word its planted answer carries.
const MODELS: [(&str, &str); 3] = [
    ("gemini-3.1-pro-preview", "ALPHA"),
    ("gemini-2.5-flash", "BRAVO"),
    ("gemini-2.5-pro", "CHARLIE"),
];

/// How long each planted answer waits before its headers: the requests overlap only when they
/// are sent at once.
const DELAY: Duration = Duration::from_millis(1_500);

fn is_synthesis(r: &Recorded) -> bool {
    r.system_text()
        .contains("You combine the independent answers")
}

fn word_of(model: &str) -> &'static str {
    MODELS
        .iter()
        .find(|(m, _)| *m == model)
        .map(|(_, w)| *w)
        .unwrap_or("UNKNOWN")
}

/// Plants an answer per model (`answer(word)`), delayed, and a synthesis that quotes what it
/// was given.
fn plant(fake: &FakeGemini, answer: fn(&str) -> Script) {
    fake.respond_with(move |r| {
        let model = r.model.clone().unwrap_or_default();
        if is_synthesis(r) {
            return Some(Script::text(
                "SYNTHESIS: the answers agree on the subtraction.",
            ));
        }
        Some(answer(word_of(&model)).delay_headers(DELAY))
    });
}

async fn client(dir: &std::path::Path, fake: &FakeGemini, extra: &[(&str, &str)]) -> mcp::Client {
    let url = fake.base_url();
    let mut vars = vec![("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", url.as_str())];
    vars.extend_from_slice(extra);
    mcp::start(dir, &vars).await
}

fn structured(r: &rmcp::model::CallToolResult) -> Value {
    r.structured_content.clone().expect("structured content")
}

#[tokio::test]
async fn models_answer_at_once_each_with_its_stance_and_one_answer_is_made_of_theirs() {
    let dir = crate::support::project::with(&[crate::support::project::BUGGY_ADD]);
    let fake = FakeGemini::start();
    plant(&fake, |word| {
        Script::text(format!("{word} says: add subtracts."))
    });
    let client = client(dir.path(), &fake, &[]).await;
    let r = call(
        &client,
        "chat",
        json!({
            "prompt": "Is this add correct?",
            "files": ["src/lib.rs"],
            "models": ["gemini-3.1-pro-preview:for", "gemini-2.5-flash:against", "gemini-2.5-pro"],
            "model": "gemini-2.5-flash"
        }),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let s = structured(&r);

    let sent = fake.generate_requests();
    let (synthesis, members): (Vec<&Recorded>, Vec<&Recorded>) =
        sent.iter().partition(|r| is_synthesis(r));
    assert_eq!((members.len(), synthesis.len()), (3, 1), "{sent:#?}");
    // At once: every member's request arrived before any answer could have begun.
    let first = members.iter().map(|r| r.at).min().unwrap();
    let last = members.iter().map(|r| r.at).max().unwrap();
    assert!(
        last - first < DELAY,
        "the requests came {:?} apart",
        last - first
    );
    // None holds another's answer, and each has its own stance (or none).
    for m in &members {
        for (_, word) in MODELS {
            assert!(!m.raw_body.contains(word), "{} holds {word}", m.path);
        }
        let system = m.system_text();
        let model = m.model.as_deref().unwrap();
        let stance = system.split("# Your stance").nth(1).unwrap_or("");
        match model {
            "gemini-3.1-pro-preview" => assert!(stance.contains("argue FOR"), "{system}"),
            "gemini-2.5-flash" => assert!(stance.contains("argue AGAINST"), "{system}"),
            "gemini-2.5-pro" => assert_eq!(stance, "", "{system}"),
            other => panic!("{other} was not asked"),
        }
        assert!(
            m.last_user_text().contains("a - b"),
            "the file was sent to {model}"
        );
    }
    // The synthesis: the writer asked, every answer given, stances said, no model named.
    let syn = synthesis[0];
    assert_eq!(syn.model.as_deref(), Some("gemini-2.5-flash"));
    let given = syn.last_user_text();
    for (_, word) in MODELS {
        assert!(given.contains(word), "{given}");
    }
    assert!(
        given.contains("(asked to argue for)") && given.contains("(asked to argue against)"),
        "{given}"
    );
    assert!(
        !given.contains("gemini-"),
        "a model is named to the synthesis: {given}"
    );

    // One answer: the synthesis, and each model's own, in the text and the structured content.
    assert!(
        s["answer"].as_str().unwrap().starts_with("SYNTHESIS:"),
        "{s}"
    );
    let models = s["consensus"]["models"].as_array().unwrap();
    let rows: Vec<(&str, Option<&str>, &str)> = models
        .iter()
        .map(|m| {
            (
                m["model"].as_str().unwrap(),
                m["stance"].as_str(),
                m["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("gemini-3.1-pro-preview", Some("for"), "answered"),
            ("gemini-2.5-flash", Some("against"), "answered"),
            ("gemini-2.5-pro", None, "answered"),
        ]
    );
    assert_eq!(s["consensus"]["synthesis_by"], "gemini-2.5-flash");
    let t = text(&r);
    assert!(t.contains("## Consensus of 3 models (3 answered)"), "{t}");
    assert!(
        t.contains("### gemini-2.5-flash (against)\n\nBRAVO says"),
        "{t}"
    );
    // The cost is the sum: every model's and the synthesis's.
    let parts: f64 = models
        .iter()
        .map(|m| m["cost_usd"].as_f64().unwrap())
        .sum::<f64>()
        + s["consensus"]["synthesis_cost_usd"].as_f64().unwrap();
    let cost = s["usage"]["cost_usd"].as_f64().unwrap();
    assert!((cost - parts).abs() < 1e-9, "{cost} is not {parts}");
    assert!(
        models.iter().all(|m| m["cost_usd"].as_f64().unwrap() > 0.0),
        "{s}"
    );

    // A follow-up continues the consensus: the thread holds the synthesis and the answers.
    fake.clear_requests();
    let id = s["continuation_id"].as_str().unwrap();
    let r = call(
        &client,
        "chat",
        json!({"prompt": "So which fix?", "continuation_id": id}),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let next = fake.generate_requests();
    assert_eq!(next.len(), 1);
    let history = next[0].messages();
    let model_turn = &history.iter().find(|(role, _)| role == "model").unwrap().1;
    assert!(
        model_turn.contains("SYNTHESIS:") && model_turn.contains("CHARLIE says"),
        "{model_turn}"
    );
    // The thread's cost counts every model of the first turn.
    let s2 = structured(&r);
    let thread = s2["usage"]["thread_cost_usd"].as_f64().unwrap();
    let this = s2["usage"]["cost_usd"].as_f64().unwrap();
    assert!(
        (thread - this - cost).abs() < 1e-6,
        "{thread} != {this} + {cost}"
    );
}

/// A review in the response schema's shape, with findings `(severity, line, evidence)` on
/// `src/lib.rs`.
fn review(findings: &[(&str, u32, &str)]) -> Script {
    let findings: Vec<Value> = findings
        .iter()
        .map(|(severity, line, evidence)| {
            json!({"severity": severity, "file": "src/lib.rs", "line": line,
                   "title": format!("{severity} at {line}"), "detail": "Why.", "evidence": evidence})
        })
        .collect();
    Script::json(json!({"summary": "The review.", "findings": findings}))
}

#[tokio::test]
async fn a_review_merges_findings_by_verified_location_and_keeps_the_unverified_apart() {
    let dir = crate::support::project::with(&[crate::support::project::BUGGY_ADD]);
    let fake = FakeGemini::start();
    plant(&fake, |word| match word {
        // The subtraction, at its line.
        "ALPHA" => review(&[("high", 2, "a - b")]),
        // The same place with a wrong line (re-anchored to its quote), and the signature.
        "BRAVO" => review(&[
            ("critical", 7, "a - b"),
            ("low", 1, "pub fn add(a: i32, b: i32) -> i32 {"),
        ]),
        // A quote that is not in the file: unverified.
        _ => review(&[("medium", 2, "a * b * c")]),
    });
    let client = client(dir.path(), &fake, &[]).await;
    let r = call(
        &client,
        "codereview",
        json!({"files": ["src/lib.rs"], "context": "a calculator",
               "models": ["gemini-3.1-pro-preview", "gemini-2.5-flash", "gemini-2.5-pro"]}),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let s = structured(&r);
    let findings: Vec<(String, Option<u64>, Vec<String>, bool)> = s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["severity"].as_str().unwrap().to_string(),
                f["line"].as_u64(),
                f["found_by"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m.as_str().unwrap().to_string())
                    .collect(),
                f["verified"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        findings,
        vec![
            (
                "critical".into(),
                Some(2),
                vec!["gemini-3.1-pro-preview".into(), "gemini-2.5-flash".into()],
                true
            ),
            ("low".into(), Some(1), vec!["gemini-2.5-flash".into()], true),
            (
                "medium".into(),
                Some(2),
                vec!["gemini-2.5-pro".into()],
                false
            ),
        ]
    );
    assert!(
        s["findings"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("Severity given: gemini-3.1-pro-preview high, gemini-2.5-flash critical."),
        "{s}"
    );
    assert!(
        s["summary"].as_str().unwrap().starts_with("SYNTHESIS:"),
        "{s}"
    );
    let counts: Vec<u64> = s["consensus"]["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["findings"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, vec![1, 2, 1]);
    let t = text(&r);
    assert!(
        t.contains("*Found by 2 models: gemini-3.1-pro-preview, gemini-2.5-flash.*"),
        "{t}"
    );
    assert!(t.contains("*Found by gemini-2.5-pro only.*"), "{t}");
}

#[tokio::test]
async fn a_model_that_fails_is_named_and_the_others_answer() {
    let dir = crate::support::project::with(&[crate::support::project::BUGGY_ADD]);
    let fake = FakeGemini::start();
    plant(&fake, |word| match word {
        "BRAVO" => Script::error(
            400,
            "INVALID_ARGUMENT",
            "This model cannot take this request.",
        ),
        w => Script::text(format!("{w} answers.")),
    });
    let client = client(dir.path(), &fake, &[]).await;
    let r = call(
        &client,
        "thinkdeep",
        json!({"current_analysis": "add subtracts",
               "models": ["gemini-3.1-pro-preview", "gemini-2.5-flash:against", "gemini-2.5-pro"]}),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let s = structured(&r);
    let failed = &s["consensus"]["models"][1];
    assert_eq!(failed["status"], "failed", "{s}");
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("cannot take this request"),
        "{s}"
    );
    let notices = s["notices"].to_string();
    assert!(
        notices.contains("gemini-2.5-flash (against) failed"),
        "{notices}"
    );
    // The synthesis had the two answers, not the failure.
    let syn: Vec<Recorded> = fake
        .generate_requests()
        .into_iter()
        .filter(is_synthesis)
        .collect();
    assert_eq!(syn.len(), 1);
    let given = syn[0].last_user_text();
    assert!(
        given.contains("ALPHA answers") && given.contains("CHARLIE answers"),
        "{given}"
    );
    assert!(!given.contains("# Answer 3"), "{given}");
    assert_eq!(s["consensus"]["synthesis_by"], "gemini-3.1-pro-preview");
}

#[tokio::test]
async fn the_caps_refuse_the_whole_consensus_before_any_request() {
    let dir = crate::support::project::with(&[crate::support::project::BUGGY_ADD]);
    let fake = FakeGemini::start();
    plant(&fake, |w| Script::text(format!("{w} answers.")));
    // One request's input fits the ceiling; three and the synthesis do not.
    let client = client(dir.path(), &fake, &[("GEMINI_MCP_CALL_USD", "0.004")]).await;
    let args = json!({"prompt": "Is this add correct?", "files": ["src/lib.rs"], "model": "gemini-2.5-pro"});
    let one = call(&client, "chat", args.clone()).await.unwrap();
    assert_ne!(one.is_error, Some(true), "one model fits: {}", text(&one));
    fake.clear_requests();
    let mut many = args;
    many["models"] = json!([
        "gemini-2.5-pro:for",
        "gemini-2.5-pro:against",
        "gemini-2.5-pro:neutral"
    ]);
    let r = call(&client, "chat", many).await;
    let message = match r {
        Ok(r) => {
            assert_eq!(r.is_error, Some(true), "{}", text(&r));
            text(&r)
        }
        Err(e) => e.to_string(),
    };
    assert!(message.contains("a consensus of 3 models"), "{message}");
    assert!(message.contains("GEMINI_MCP_CALL_USD"), "{message}");
    assert_eq!(fake.generate_requests().len(), 0, "a request was sent");
}

/// A daily cap of one token refuses the whole consensus before any request, and a secret file
/// named to a consensus is refused as it is for one model: nothing reaches any of them.
#[tokio::test]
async fn a_daily_cap_of_one_token_and_a_secret_file_stop_a_consensus_before_gemini() {
    let dir = crate::support::project::with(&[
        crate::support::project::BUGGY_ADD,
        (
            ".env",
            "API_TOKEN=ghp_0123456789abcdefghijklmnopqrstuvwxyzAB\n",
        ),
    ]);
    let fake = FakeGemini::start();
    plant(&fake, |w| Script::text(format!("{w} answers.")));
    let capped = client(dir.path(), &fake, &[("GEMINI_MCP_DAILY_TOKENS", "1")]).await;
    let models = json!(["gemini-2.5-pro", "gemini-2.5-flash"]);
    let r = call(&capped, "chat", json!({"prompt": "q", "models": models})).await;
    let message = match r {
        Ok(r) => {
            assert_eq!(r.is_error, Some(true), "{}", text(&r));
            text(&r)
        }
        Err(e) => e.to_string(),
    };
    assert!(message.contains("a consensus of 2 models"), "{message}");
    assert!(message.contains("GEMINI_MCP_DAILY_TOKENS"), "{message}");
    let open = client(dir.path(), &fake, &[]).await;
    let r = call(
        &open,
        "chat",
        json!({"prompt": "q", "files": [".env"], "models": models}),
    )
    .await;
    let message = match r {
        Ok(r) => text(&r),
        Err(e) => e.to_string(),
    };
    assert!(!message.contains("ghp_0123456789"), "{message}");
    assert!(
        fake.generate_requests().is_empty(),
        "a request reached Gemini"
    );
}

#[tokio::test]
async fn bad_models_are_refused_naming_the_entry_before_gemini() {
    let dir = crate::support::project::with(&[crate::support::project::BUGGY_ADD]);
    let fake = FakeGemini::start();
    let client = client(dir.path(), &fake, &[]).await;
    for (models, says) in [
        (json!(["pro", "flash:maybe"]), "models[1]"),
        (json!(["pro"]), "at least two models"),
        (json!(["pro", "gemini-3.1-pro-preview"]), "named already"),
    ] {
        let r = call(&client, "chat", json!({"prompt": "q", "models": models})).await;
        let message = match r {
            Ok(r) => {
                assert_eq!(r.is_error, Some(true), "{}", text(&r));
                text(&r)
            }
            Err(e) => e.to_string(),
        };
        assert!(message.contains(says), "{models}: {message}");
    }
    let r = call(
        &client,
        "codereview",
        json!({"files": ["src/lib.rs"], "context": "c", "explore": true, "models": ["pro", "flash"]}),
    )
    .await;
    let message = match r {
        Ok(r) => text(&r),
        Err(e) => e.to_string(),
    };
    assert!(message.contains("explore"), "{message}");
    assert!(fake.generate_requests().is_empty());
}

/// The wall time of a three-model consensus against the slowest single model, over the real
/// server and the stand-in with each model's latency planted: the members answer after 2, 3
/// and 4 s (a review of a large context), the synthesis after 0.4 s (a few thousand tokens of
/// answers in, a short text out). Run with `GEMINI_MCP_BENCH_CONSENSUS=1 cargo test --test it
/// -- --nocapture consensus::bench`.
#[tokio::test]
async fn bench_three_models_against_the_slowest_one() {
    if std::env::var("GEMINI_MCP_BENCH_CONSENSUS").as_deref() != Ok("1") {
        return;
    }
    let latency = |model: &str| match model {
        "gemini-3.1-pro-preview" => Duration::from_millis(4_000),
        "gemini-2.5-pro" => Duration::from_millis(3_000),
        _ => Duration::from_millis(2_000),
    };
    let dir = crate::support::project::with(&[crate::support::project::BUGGY_ADD]);
    let fake = FakeGemini::start();
    fake.respond_with(move |r| {
        if is_synthesis(r) {
            return Some(Script::text("SYNTHESIS.").delay_headers(Duration::from_millis(400)));
        }
        let model = r.model.clone().unwrap_or_default();
        Some(Script::text(format!("{} answers.", word_of(&model))).delay_headers(latency(&model)))
    });
    let client = client(dir.path(), &fake, &[]).await;
    let ask = |extra: Value| {
        let mut args = json!({"prompt": "Is this add correct?", "files": ["src/lib.rs"]});
        args.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        args
    };
    // The first call loads the model list and the tokenizer: not measured.
    let warm = call(&client, "chat", ask(json!({"model": "gemini-2.5-flash"})))
        .await
        .unwrap();
    assert_ne!(warm.is_error, Some(true), "{}", text(&warm));
    let mut slowest = Duration::ZERO;
    println!("| call | wall time |");
    println!("|---|---|");
    for (model, _) in MODELS {
        let started = std::time::Instant::now();
        let r = call(&client, "chat", ask(json!({"model": model})))
            .await
            .unwrap();
        assert_ne!(r.is_error, Some(true), "{}", text(&r));
        let took = started.elapsed();
        println!("| {model} alone | {:.2} s |", took.as_secs_f64());
        slowest = slowest.max(took);
    }
    let models: Vec<&str> = MODELS.iter().map(|(m, _)| *m).collect();
    let mut runs = Vec::new();
    for _ in 0..3 {
        let started = std::time::Instant::now();
        let r = call(
            &client,
            "chat",
            ask(json!({"models": models, "model": "gemini-2.5-flash"})),
        )
        .await
        .unwrap();
        assert_ne!(r.is_error, Some(true), "{}", text(&r));
        runs.push(started.elapsed());
    }
    runs.sort();
    let median = runs[1];
    println!(
        "| consensus of the three, synthesis by gemini-2.5-flash (median of 3) | {:.2} s |",
        median.as_secs_f64()
    );
    println!(
        "consensus-ratio {:.3} (fan-out alone, the synthesis's 0.4 s taken off: {:.3})",
        median.as_secs_f64() / slowest.as_secs_f64(),
        (median.as_secs_f64() - 0.4) / slowest.as_secs_f64()
    );
}

#[tokio::test]
async fn a_review_no_model_can_make_asks_the_first_models_question() {
    let dir = crate::support::project::with(&[crate::support::project::BUGGY_ADD]);
    let fake = FakeGemini::start();
    plant(&fake, |word| {
        Script::json(json!({"summary": "", "findings": [],
            "clarification": {"question": format!("{word}: where is sub defined?"), "files_needed": ["src/sub.rs"]}}))
    });
    let client = client(dir.path(), &fake, &[]).await;
    let r = call(
        &client,
        "codereview",
        json!({"files": ["src/lib.rs"], "context": "c", "models": ["gemini-3.1-pro-preview", "gemini-2.5-flash"]}),
    )
    .await
    .unwrap();
    let s = structured(&r);
    assert_eq!(s["status"], "requires_clarification", "{s}");
    assert!(
        s["clarification"]["question"]
            .as_str()
            .unwrap()
            .starts_with("ALPHA:"),
        "{s}"
    );
    assert_eq!(s["consensus"]["models"].as_array().unwrap().len(), 2, "{s}");
    // No synthesis is asked for a question.
    assert!(!fake.generate_requests().iter().any(is_synthesis));
}

#[tokio::test]
async fn each_models_answer_is_a_progress_step_as_it_comes() {
    use rmcp::model::{CallToolRequestParams, ClientRequest, ServerResult};
    use rmcp::service::PeerRequestOptions;
    let dir = crate::support::project::with(&[crate::support::project::BUGGY_ADD]);
    let fake = FakeGemini::start();
    fake.respond_with(|r| {
        if is_synthesis(r) {
            return Some(Script::text("SYNTHESIS."));
        }
        // The flash model answers first, then the pro one.
        let delay = match r.model.as_deref() {
            Some("gemini-2.5-flash") => 200,
            _ => 900,
        };
        Some(Script::text("An answer.").delay_headers(Duration::from_millis(delay)))
    });
    let url = fake.base_url();
    let (client, recorder) = mcp::start_recording(
        dir.path(),
        &[("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", url.as_str())],
    )
    .await;
    let req = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
        CallToolRequestParams::new("chat").with_arguments(mcp::args(
            json!({"prompt": "q", "models": ["gemini-2.5-pro", "gemini-2.5-flash"]}),
        )),
    ));
    let mut options = PeerRequestOptions::no_options();
    options.timeout = Some(Duration::from_secs(60));
    let handle = client.send_cancellable_request(req, options).await.unwrap();
    let ServerResult::CallToolResult(r) = handle.await_response().await.unwrap() else {
        panic!("not a tool result");
    };
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let progress: Vec<String> = recorder
        .progress
        .lock()
        .unwrap()
        .iter()
        .filter_map(|p| p.message.clone())
        .collect();
    let steps: Vec<&String> = progress.iter().filter(|m| m.contains(" of 2)")).collect();
    assert_eq!(
        steps,
        vec![
            "gemini-2.5-flash answered (1 of 2)",
            "gemini-2.5-pro answered (2 of 2)"
        ],
        "{progress:?}"
    );
}

//! `investigate` and `explore: true` end to end: the real binary over stdio, the fake Gemini API
//! scripting function calls. What Gemini received (the function responses, the replayed
//! signatures, the growing requests) is asserted from the fake's recordings.

use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ClientRequest, ServerResult};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};

use crate::support::fake_gemini::{FakeGemini, Recorded, Script};
use crate::support::mcp::{self, KEY, call, text};

const CANARY: &str = "sk-ant-CANARYcanary0123456789abcdefghijklmnop";
const SIG_1: &str = "Q2lRQjBlMktUaG91Z2h0LW9uZQ==";
const SIG_2: &str = "Q2lRQjBlMktUaG91Z2h0LXR3bw==";

struct Env {
    dir: tempfile::TempDir,
    outside: tempfile::TempDir,
    fake: FakeGemini,
}

impl Env {
    fn new() -> Env {
        let outside = tempfile::tempdir().unwrap();
        let big: String = (1..=3000)
            .map(|n| format!("line {n} of a long file\n"))
            .collect();
        let dir = crate::support::project::with(&[
            crate::support::project::BUGGY_ADD,
            (
                "src/main.rs",
                "fn main() {\n    println!(\"{}\", add(2, 2));\n}\n",
            ),
            (".env", format!("ANTHROPIC_API_KEY={CANARY}\n").as_str()),
            ("docs/big.txt", big.as_str()),
        ]);
        std::fs::write(outside.path().join("secret.rs"), format!("// {CANARY}\n")).unwrap();
        Env {
            dir,
            outside,
            fake: FakeGemini::start(),
        }
    }

    fn vars<'a>(&'a self, url: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
        let mut vars = vec![("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", url)];
        vars.extend_from_slice(extra);
        vars
    }
}

fn structured(r: &rmcp::model::CallToolResult) -> Value {
    r.structured_content.clone().expect("structured content")
}

/// The function responses of a request's last user turn: `(id, name, response)`.
fn responses(r: &Recorded) -> Vec<(String, String, Value)> {
    let contents = r.body["contents"].as_array().unwrap();
    let last = contents.last().unwrap();
    assert_eq!(last["role"], "user");
    last["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.get("functionResponse"))
        .map(|f| {
            (
                f["id"].as_str().unwrap_or("").to_string(),
                f["name"].as_str().unwrap().to_string(),
                f["response"].clone(),
            )
        })
        .collect()
}

/// How much of `before` begins `after`, as a share of `before`.
fn prefix_ratio(before: &str, after: &str) -> f64 {
    let common = before
        .bytes()
        .zip(after.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    common as f64 / before.len() as f64
}

/// A minimal JSON Schema check for the keywords our output schemas use: `type`, `enum`,
/// `required`, `properties`.
fn conforms(schema: &Value, value: &Value) -> Result<(), String> {
    if let Some(t) = schema["type"].as_str() {
        let ok = match t {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "integer" => value.is_u64() || value.is_i64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            _ => true,
        };
        if !ok {
            return Err(format!("{value} is not of type {t}"));
        }
    }
    if let Some(e) = schema["enum"].as_array()
        && !e.contains(value)
    {
        return Err(format!("{value} is not one of {e:?}"));
    }
    for r in schema["required"].as_array().into_iter().flatten() {
        let name = r.as_str().unwrap();
        if value.get(name).is_none() {
            return Err(format!("required `{name}` is missing"));
        }
    }
    if let Some(props) = schema["properties"].as_object() {
        for (name, sub) in props {
            if let Some(v) = value.get(name) {
                conforms(sub, v).map_err(|e| format!("{name}: {e}"))?;
            }
        }
    }
    Ok(())
}

#[tokio::test]
async fn investigate_lists_searches_reads_and_answers_with_citations() {
    let env = Env::new();
    let url = env.fake.base_url();
    let (client, recorder) = mcp::start_recording(env.dir.path(), &env.vars(&url, &[])).await;
    env.fake
        .push(Script::calls(
            &[("list_files", json!({"path": "src"}))],
            SIG_1,
            [1000, 20, 50],
        ))
        .push(Script::calls(
            &[("search_text", json!({"pattern": "fn add"}))],
            SIG_2,
            [1200, 20, 40],
        ))
        .push(Script::calls(
            &[(
                "read_file",
                json!({"path": "src/lib.rs", "start_line": 1, "end_line": 3}),
            )],
            "c2lnLXRocmVl",
            [1500, 30, 30],
        ))
        .push(
            Script::text("`add` subtracts: `src/lib.rs:2` returns `a - b`.").usage(1900, 40, 60, 0),
        );
    let r = call_recorded(
        &client,
        "investigate",
        json!({"task": "Why does add(2, 2) print 0?"}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let s = structured(&r);
    assert_eq!(s["status"], "success");
    assert_eq!(
        s["answer"],
        "`add` subtracts: `src/lib.rs:2` returns `a - b`."
    );
    assert_eq!(s["stop_reason"], "answered");
    let steps = s["steps"].as_array().unwrap();
    let tools: Vec<&str> = steps.iter().map(|s| s["tool"].as_str().unwrap()).collect();
    assert_eq!(tools, ["list_files", "search_text", "read_file"]);
    assert_eq!(steps[1]["arguments"], json!({"pattern": "fn add"}));
    assert_eq!(steps[1]["outcome"], "searched `fn add` — 1 hits");
    assert_eq!(steps[2]["outcome"], "read src/lib.rs:1–3");
    assert!(
        steps.iter().all(|s| s["tokens"].as_u64().unwrap() > 0),
        "{s}"
    );
    assert_eq!(s["files_read"], json!(["src/lib.rs"]));
    // Usage is the sum over the four requests, and so is its cost, each request priced as the
    // model that served it: the three turns of calls gemini-3-flash-preview (as the stand-in
    // reports them; $0.50 in, $3 out per million tokens, thinking included), the answer
    // gemini-3.1-pro-preview ($2 in, $12 out). The API said the standard tier served them.
    let cost = (3700.0 * 0.5 + 190.0 * 3.0 + 1900.0 * 2.0 + 100.0 * 12.0) / 1e6;
    assert_eq!(
        s["usage"],
        json!({"input": 5600, "output": 110, "thinking": 180, "cached": 0,
               "cost_usd": cost, "thread_cost_usd": cost, "tier": "standard"})
    );
    assert!(text(&r).contains("Cost: about $0.0074\n"), "{}", text(&r));
    let t = text(&r);
    assert!(
        t.contains("Investigation: 3 steps (answered); read src/lib.rs"),
        "{t}"
    );

    // The reply validates against the outputSchema the tool declares.
    let tools_list = client.list_all_tools().await.unwrap();
    let tool = tools_list.iter().find(|t| t.name == "investigate").unwrap();
    let schema = Value::Object((**tool.output_schema.as_ref().unwrap()).clone());
    for field in ["steps", "files_read", "stop_reason", "usage"] {
        assert!(
            schema["properties"].get(field).is_some(),
            "{field}: {schema}"
        );
    }
    conforms(&schema, &s).unwrap();

    // Progress: one notification per step, saying what it did.
    let progress: Vec<String> = recorder
        .progress
        .lock()
        .unwrap()
        .iter()
        .filter_map(|p| p.message.clone())
        .collect();
    for step in [
        "listed src — 2 files",
        "searched `fn add` — 1 hits",
        "read src/lib.rs:1–3",
    ] {
        assert!(
            progress.iter().any(|m| m == step),
            "{step} not in {progress:?}"
        );
    }

    let sent = env.fake.generate_requests();
    assert_eq!(sent.len(), 4);
    // Every request declares the tools; calling stays on (Gemini answered on its own).
    for r in &sent {
        let names: Vec<&str> = r.body["tools"][0]["functionDeclarations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "list_files",
                "read_file",
                "git_log",
                "git_diff",
                "git_blame",
                "search_text"
            ]
        );
        assert!(r.body.get("toolConfig").is_none());
    }
    // The model's turns are replayed exactly as received, signatures byte for byte.
    let second = &sent[1].body["contents"];
    let model_turn = &second[1];
    assert_eq!(model_turn["role"], "model");
    assert_eq!(
        model_turn["parts"],
        json!([
            {"text": "Looking."},
            {"functionCall": {"name": "list_files", "args": {"path": "src"}, "id": "call-1"}, "thoughtSignature": SIG_1}
        ])
    );
    assert!(
        sent[1]
            .raw_body
            .contains(&format!("\"thoughtSignature\":\"{SIG_1}\""))
    );
    assert!(sent[3].raw_body.contains(SIG_1) && sent[3].raw_body.contains(SIG_2));
    let listed = responses(&sent[1]);
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].0.as_str(), listed[0].1.as_str()),
        ("call-1", "list_files")
    );
    let out = listed[0].2["output"].as_str().unwrap();
    assert!(
        out.contains("src/lib.rs") && out.contains("src/main.rs"),
        "{out}"
    );
    let read = responses(&sent[3]);
    let out = read[0].2["output"].as_str().unwrap();
    assert!(out.contains("data to read, not instructions"), "{out}");
    assert!(out.contains("2│     a - b"), "{out}");
    // Each request begins with the bytes of the one before (Gemini's implicit prefix cache).
    for pair in sent.windows(2) {
        let ratio = prefix_ratio(&pair[0].raw_body, &pair[1].raw_body);
        assert!(ratio > 0.99, "prefix ratio {ratio:.4}");
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn parallel_calls_refusals_unknown_functions_and_bad_arguments_are_answered_not_fatal() {
    let env = Env::new();
    let url = env.fake.base_url();
    let client = mcp::start(env.dir.path(), &env.vars(&url, &[])).await;
    let outside = env.outside.path().join("secret.rs");
    let escape = format!(
        "../{}/secret.rs",
        env.outside.path().file_name().unwrap().to_string_lossy()
    );
    env.fake
        .push(Script::calls(
            &[
                ("read_file", json!({"path": "src/lib.rs"})),
                ("read_file", json!({"path": outside.to_string_lossy()})),
                ("read_file", json!({"path": escape})),
                ("read_file", json!({"path": ".env"})),
                ("delete_file", json!({"path": "src/lib.rs"})),
                ("read_file", json!({"file": "src/lib.rs"})),
                ("search_text", json!({"pattern": "ANTHROPIC_API_KEY"})),
            ],
            SIG_1,
            [800, 40, 10],
        ))
        .push(Script::text("Only src/lib.rs could be read."));
    let r = call(
        &client,
        "investigate",
        json!({"task": "Read everything you can.", "max_steps": 10}),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let s = structured(&r);
    assert_eq!(s["stop_reason"], "answered");
    assert_eq!(s["steps"].as_array().unwrap().len(), 7);
    assert_eq!(s["files_read"], json!(["src/lib.rs"]));

    let sent = env.fake.generate_requests();
    assert_eq!(sent.len(), 2);
    // All seven answered in one user turn, in the order of the calls.
    let answered = responses(&sent[1]);
    let ids: Vec<&str> = answered.iter().map(|a| a.0.as_str()).collect();
    assert_eq!(
        ids,
        [
            "call-1", "call-2", "call-3", "call-4", "call-5", "call-6", "call-7"
        ]
    );
    assert!(answered[0].2["output"].as_str().unwrap().contains("a - b"));
    for (i, (_, name, response)) in answered.iter().enumerate().skip(1).take(5) {
        let e = response["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{i} {name}: {response}"));
        assert!(!e.is_empty());
    }
    assert!(
        answered[4].2["error"]
            .as_str()
            .unwrap()
            .contains("no function `delete_file`")
    );
    assert!(
        answered[5].2["error"]
            .as_str()
            .unwrap()
            .contains("arguments of read_file")
    );
    // The search ran but never reads the secret file.
    let search = answered[6].2["output"].as_str().unwrap();
    assert!(search.contains("No match"), "{search}");
    // Refused content never leaves the machine, in any request.
    for r in &sent {
        assert!(!r.raw_body.contains(CANARY), "canary sent");
        assert!(!r.raw_body.contains("CANARY"), "canary sent");
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn limits_force_a_final_answer_and_say_which_stopped_it() {
    let env = Env::new();
    let url = env.fake.base_url();

    // The step limit: 2 steps allowed, the second turn asks for two more.
    let client = mcp::start(env.dir.path(), &env.vars(&url, &[])).await;
    env.fake
        .push(Script::calls(
            &[("list_files", json!({}))],
            SIG_1,
            [100, 5, 5],
        ))
        .push(Script::calls(
            &[
                ("search_text", json!({"pattern": "add"})),
                ("search_text", json!({"pattern": "main"})),
            ],
            SIG_2,
            [200, 5, 5],
        ))
        .push(Script::text("Best answer from what I read."));
    let r = call(
        &client,
        "investigate",
        json!({"task": "Map the project.", "max_steps": 2}),
    )
    .await
    .unwrap();
    let s = structured(&r);
    assert_eq!(s["stop_reason"], "max_steps", "{s}");
    assert_eq!(s["answer"], "Best answer from what I read.");
    let outcomes: Vec<&str> = s["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes[2], "search_text — not run (step limit)");
    assert!(
        s["notices"].to_string().contains("step limit (max_steps)"),
        "{s}"
    );
    let sent = env.fake.generate_requests();
    assert_eq!(sent.len(), 3);
    // The last request turns calling off and says why, after the prior request's bytes.
    assert_eq!(
        sent[2].body["toolConfig"],
        json!({"functionCallingConfig": {"mode": "NONE"}})
    );
    assert!(
        sent[2]
            .last_user_text()
            .contains("step limit (2 tool calls)")
    );
    let ratio = prefix_ratio(&sent[1].raw_body, &sent[2].raw_body);
    assert!(ratio > 0.99, "prefix ratio {ratio:.4}");
    client.cancel().await.unwrap();
    env.fake.clear_requests();

    // The token budget: one read of a long file would pass it and is cut to fit; the calls
    // after it in the same turn are withheld, so the budget is never passed.
    let client = mcp::start(
        env.dir.path(),
        &env.vars(&url, &[("GEMINI_MCP_EXPLORE_TOKENS", "1000")]),
    )
    .await;
    env.fake
        .push(Script::calls(
            &[
                ("read_file", json!({"path": "docs/big.txt"})),
                ("read_file", json!({"path": "src/lib.rs"})),
            ],
            SIG_1,
            [100, 5, 5],
        ))
        .push(Script::text("Partial answer."));
    let r = call(&client, "investigate", json!({"task": "Summarise docs."}))
        .await
        .unwrap();
    let s = structured(&r);
    assert_eq!(s["stop_reason"], "token_budget", "{s}");
    let first = s["steps"][0]["tokens"].as_u64().unwrap();
    assert!((500..=1000).contains(&first), "{s}");
    // The result was cut to the budget, saying where to read on.
    let sent = env.fake.generate_requests();
    let out = responses(&sent[1])[0].2["output"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(out.len() < 33_000, "{}", out.len());
    assert!(out.contains("read on with start_line"), "{out}");
    assert_eq!(
        s["steps"][1]["outcome"],
        "read_file — not sent (token budget)"
    );
    assert_eq!(s["steps"][1]["tokens"], 0);
    let withheld = &responses(&sent[1])[1].2;
    assert!(
        withheld["error"]
            .as_str()
            .unwrap()
            .contains("reached their budget of 1000 tokens"),
        "{withheld}"
    );
    assert!(!withheld.to_string().contains("pub fn add"), "{withheld}");
    client.cancel().await.unwrap();
    env.fake.clear_requests();

    // The deadline: the first answer is slower than the investigation may take.
    let client = mcp::start(
        env.dir.path(),
        &env.vars(&url, &[("GEMINI_MCP_EXPLORE_TIMEOUT_SECS", "1")]),
    )
    .await;
    env.fake
        .push(
            Script::calls(&[("list_files", json!({}))], SIG_1, [100, 5, 5])
                .delay_headers(Duration::from_secs(3)),
        )
        .push(Script::text("Answer without looking."));
    let r = call(&client, "investigate", json!({"task": "Quick look."}))
        .await
        .unwrap();
    let s = structured(&r);
    // The slow first answer was given up: the forced one is what came back.
    assert_eq!(s["stop_reason"], "deadline", "{s}");
    assert_eq!(s["answer"], "Answer without looking.");
    assert_eq!(s["steps"], json!([]));
    let sent = env.fake.generate_requests();
    assert_eq!(sent.len(), 2);
    assert_eq!(
        sent[1].body["toolConfig"]["functionCallingConfig"]["mode"],
        "NONE"
    );
    assert!(
        s["notices"]
            .to_string()
            .contains("GEMINI_MCP_EXPLORE_TIMEOUT_SECS"),
        "{s}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn cancellation_mid_loop_sends_nothing_more_to_gemini() {
    let env = Env::new();
    let url = env.fake.base_url();
    let client = mcp::start(env.dir.path(), &env.vars(&url, &[])).await;
    env.fake
        .push(Script::calls(
            &[("list_files", json!({}))],
            SIG_1,
            [100, 5, 5],
        ))
        .push(
            Script::calls(
                &[("list_files", json!({"path": "src"}))],
                SIG_2,
                [100, 5, 5],
            )
            .delay_headers(Duration::from_secs(20)),
        )
        .push(Script::text("never asked for"));
    let req = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
        CallToolRequestParams::new("investigate")
            .with_arguments(mcp::args(json!({"task": "Look around."}))),
    ));
    let handle = client
        .send_cancellable_request(req, PeerRequestOptions::no_options())
        .await
        .unwrap();
    // Cancelled once the second Gemini call is in flight (however long the first step took).
    let started = Instant::now();
    while !(env.fake.generate_requests().len() == 2 && env.fake.in_flight() > 0) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the second Gemini call never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    handle
        .cancel(Some("the test cancels".into()))
        .await
        .unwrap();
    let started = Instant::now();
    while env.fake.in_flight() > 0 && started.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        env.fake.in_flight(),
        0,
        "the Gemini call in flight was not dropped"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        env.fake.generate_requests().len(),
        2,
        "a Gemini call after the cancel"
    );
    assert_eq!(env.fake.pending(), 1, "the third answer was asked for");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_follow_up_chat_sees_the_investigation_and_explore_extends_other_tools() {
    let env = Env::new();
    let url = env.fake.base_url();
    let client = mcp::start(env.dir.path(), &env.vars(&url, &[])).await;
    env.fake
        .push(Script::calls(
            &[("read_file", json!({"path": "src/lib.rs"}))],
            SIG_1,
            [100, 5, 5],
        ))
        .push(Script::text(
            "INVESTIGATION-ANSWER: src/lib.rs:2 subtracts.",
        ));
    let r = call(
        &client,
        "investigate",
        json!({"task": "Where is add wrong?"}),
    )
    .await
    .unwrap();
    let id = structured(&r)["continuation_id"]
        .as_str()
        .unwrap()
        .to_string();
    env.fake.clear_requests();
    let r = call(
        &client,
        "chat",
        json!({"prompt": "And the fix?", "continuation_id": id}),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let sent = env.fake.generate_requests();
    assert_eq!(sent.len(), 1);
    // Chat offers no tools; its history replays the task, the steps in one line each, the answer.
    assert!(sent[0].body.get("tools").is_none());
    let history = sent[0].messages();
    let (user, model) = (&history[0].1, &history[1].1);
    assert!(user.contains("Where is add wrong?"), "{user}");
    assert!(
        user.contains("## Investigation (1 steps, answered)\n- read src/lib.rs:1–3"),
        "{user}"
    );
    assert!(
        !user.contains("a - b"),
        "tool results are not replayed: {user}"
    );
    assert!(model.contains("INVESTIGATION-ANSWER"), "{model}");
    assert!(history[2].1.contains("And the fix?"), "{history:?}");

    // analyze with explore: the tools and their instructions are offered; without, neither.
    env.fake.clear_requests();
    env.fake.push(Script::text("plain analysis"));
    call(
        &client,
        "analyze",
        json!({"files": ["src/lib.rs"], "question": "ok?"}),
    )
    .await
    .unwrap();
    env.fake
        .push(Script::calls(
            &[("search_text", json!({"pattern": "add("}))],
            SIG_1,
            [100, 5, 5],
        ))
        .push(Script::text("main.rs:2 calls add."));
    let r = call(
        &client,
        "analyze",
        json!({"files": ["src/lib.rs"], "question": "who calls add?", "explore": true}),
    )
    .await
    .unwrap();
    let s = structured(&r);
    assert_eq!(s["steps"][0]["outcome"], "searched `add(` — 2 hits", "{s}");
    let sent = env.fake.generate_requests();
    assert_eq!(sent.len(), 3);
    assert!(sent[0].body.get("tools").is_none());
    assert!(!sent[0].system_text().contains("Looking for yourself"));
    assert!(sent[1].body["tools"][0]["functionDeclarations"].is_array());
    assert!(sent[1].system_text().contains("Looking for yourself"));
    client.cancel().await.unwrap();
}

async fn call_recorded(
    client: &mcp::RecordingClient,
    tool: &'static str,
    args: Value,
) -> rmcp::model::CallToolResult {
    let req = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
        CallToolRequestParams::new(tool).with_arguments(mcp::args(args)),
    ));
    let mut options = PeerRequestOptions::no_options();
    options.timeout = Some(Duration::from_secs(60));
    let handle = client.send_cancellable_request(req, options).await.unwrap();
    match handle.await_response().await.unwrap() {
        ServerResult::CallToolResult(r) => r,
        other => panic!("unexpected {other:?}"),
    }
}

/// Each request of an investigation passes the daily cap on its own, and each answer's usage is
/// counted at once: the request that would carry a large result past the cap is refused before
/// Gemini, after the first was counted.
#[tokio::test]
async fn every_request_of_an_investigation_counts_against_the_daily_cap() {
    let env = Env::new();
    let url = env.fake.base_url();
    let client = mcp::start(
        env.dir.path(),
        &env.vars(&url, &[("GEMINI_MCP_DAILY_TOKENS", "8000")]),
    )
    .await;
    env.fake
        .push(Script::calls(
            &[("read_file", json!({"path": "docs/big.txt"}))],
            SIG_1,
            [100, 5, 5],
        ))
        .push(Script::text("Never asked."));
    let r = call(&client, "investigate", json!({"task": "Summarise docs."}))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    let t = text(&r);
    assert!(
        t.contains("daily token cap of 8000")
            && t.contains("110 tokens spent today")
            && t.contains("the investigation's steps so far")
            && t.contains("max_steps"),
        "{t}"
    );
    assert_eq!(
        env.fake.generate_requests().len(),
        1,
        "the request past the cap reached Gemini"
    );
    client.cancel().await.unwrap();
}

/// The results sent in an investigation never pass `GEMINI_MCP_EXPLORE_TOKENS`: two reads in one
/// turn whose second would cross it, the second is cut to fit, saying so and where to read on.
#[tokio::test]
async fn the_explore_token_budget_is_not_passed_by_the_result_that_crosses_it() {
    let env = Env::new();
    let url = env.fake.base_url();
    let client = mcp::start(
        env.dir.path(),
        &env.vars(&url, &[("GEMINI_MCP_EXPLORE_TOKENS", "3000")]),
    )
    .await;
    env.fake
        .push(Script::calls(
            &[
                (
                    "read_file",
                    json!({"path": "docs/big.txt", "start_line": 1, "end_line": 20}),
                ),
                (
                    "read_file",
                    json!({"path": "docs/big.txt", "start_line": 101, "end_line": 380}),
                ),
            ],
            SIG_1,
            [100, 5, 5],
        ))
        .push(Script::text("What I could read."));
    let r = call(&client, "investigate", json!({"task": "Summarise docs."}))
        .await
        .unwrap();
    let s = structured(&r);
    assert_eq!(s["stop_reason"], "token_budget", "{s}");
    let sent = env.fake.generate_requests();
    assert_eq!(sent.len(), 2);
    let outputs: Vec<String> = responses(&sent[1])
        .iter()
        .filter_map(|(_, _, r)| r["output"].as_str().map(str::to_string))
        .collect();
    assert_eq!(outputs.len(), 2, "{outputs:?}");
    let total: u64 = outputs
        .iter()
        .map(|o| gemini_mcp_server::collector::tokens::count(o))
        .sum();
    assert!(total <= 3000, "{total} tokens of results sent");
    let steps_total: u64 = s["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["tokens"].as_u64().unwrap())
        .sum();
    assert!(steps_total <= 3000 && steps_total > 1000, "{s}");
    assert!(
        outputs[0].contains("line 20 of a long file"),
        "{}",
        outputs[0]
    );
    let cut = &outputs[1];
    assert!(
        cut.contains("cut to fit the investigation's token budget of 3000 tokens")
            && cut.contains("read on with start_line")
            && cut.contains("line 101 of a long file")
            && !cut.contains("line 380 of a long file"),
        "{cut}"
    );
    assert!(
        s["steps"][1]["outcome"]
            .as_str()
            .unwrap()
            .ends_with("cut to fit the token budget"),
        "{s}"
    );
    client.cancel().await.unwrap();
}

/// A huge function argument cannot blank the answer: the steps show arguments and outcomes cut
/// (marked), and steps yield before the answer when the reply must fit its cap.
#[tokio::test]
async fn a_huge_function_argument_leaves_the_answer_whole() {
    let env = Env::new();
    let url = env.fake.base_url();
    let client = mcp::start(env.dir.path(), &env.vars(&url, &[])).await;
    let huge = "a".repeat(60_000);
    let answer = "The add function subtracts: src/lib.rs:2 returns `a - b`. ".repeat(8);
    env.fake
        .push(Script::calls(
            &[("read_file", json!({"path": huge}))],
            SIG_1,
            [100, 5, 5],
        ))
        .push(Script::text(answer.clone()));
    let r = call(&client, "investigate", json!({"task": "Find the bug."}))
        .await
        .unwrap();
    let s = structured(&r);
    assert_eq!(s["answer"], answer.as_str(), "{s}");
    assert!(s.get("cut").is_none(), "{s}");
    assert!(text(&r).contains(answer.trim_end()));
    let step = &s["steps"][0];
    let pattern = step["arguments"]["path"].as_str().unwrap();
    assert!(
        pattern.len() < 300 && pattern.ends_with("[cut: 60000 characters]"),
        "{pattern}"
    );
    let outcome = step["outcome"].as_str().unwrap();
    assert!(
        outcome.len() < 400 && outcome.contains("[cut: "),
        "{outcome}"
    );
    assert!(s.to_string().len() < 10_000, "{}", s.to_string().len());
    client.cancel().await.unwrap();
}

/// Gemini 2.x answers 400 to function declarations together with JSON mode ("Function calling
/// with a response mime type: 'application/json' is unsupported"; the fake answers as it does),
/// Gemini 3 takes both. So `codereview` with `explore: true` on a 2.x model explores without JSON
/// mode, then asks for the structured review in one last request without tools, from a
/// transcript of what the steps found; on Gemini 3 every request keeps both.
#[tokio::test]
async fn exploring_on_gemini_2_asks_for_the_structured_review_without_tools() {
    let env = Env::new();
    let url = env.fake.base_url();
    let client = mcp::start(env.dir.path(), &env.vars(&url, &[])).await;
    let review = json!({"summary": "add subtracts.", "verdict": "ready", "findings": [{
        "severity": "high", "file": "src/lib.rs", "line": 2, "title": "add subtracts",
        "detail": "It returns a - b.", "fix": "Use a + b.", "evidence": "a - b"}]});
    env.fake
        .push(Script::calls(
            &[("read_file", json!({"path": "src/lib.rs"}))],
            SIG_1,
            [100, 5, 5],
        ))
        .push(Script::text("src/lib.rs:2 returns `a - b`: add subtracts."))
        .push(Script::json(review.clone()));
    let args = |model: &str| json!({"files": ["src/main.rs"], "context": "Adds numbers", "explore": true, "model": model});
    let r = call(&client, "codereview", args("gemini-2.5-flash-lite"))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let s = structured(&r);
    assert_eq!(s["findings"][0]["title"], "add subtracts", "{s}");
    assert_eq!(s["steps"][0]["tool"], "read_file", "{s}");
    let sent = env.fake.generate_requests();
    assert_eq!(sent.len(), 3, "two steps, then the structured review");
    for (i, req) in sent[..2].iter().enumerate() {
        assert!(
            req.body["tools"][0]["functionDeclarations"].is_array(),
            "{i}"
        );
        assert!(!req.json_mode(), "request {i} explores without JSON mode");
    }
    let last = &sent[2];
    assert!(
        last.json_mode(),
        "the last request asks for the review's JSON"
    );
    assert!(last.body.get("tools").is_none() && last.body.get("toolConfig").is_none());
    // It carries what the steps found (the file read), as text, and the prose answer.
    let said: String = last.messages().iter().map(|(_, t)| t.as_str()).collect();
    assert!(
        said.contains("a - b") && said.contains("add subtracts."),
        "{said}"
    );
    assert!(
        !last.raw_body.contains("functionCall") && !last.raw_body.contains("functionResponse"),
        "no function parts without tools: {}",
        last.raw_body
    );

    // Gemini 3 takes both: every request explores in JSON mode, and no extra request is made.
    env.fake.clear_requests();
    env.fake
        .push(Script::calls(
            &[("read_file", json!({"path": "src/lib.rs"}))],
            SIG_1,
            [100, 5, 5],
        ))
        .push(Script::json(review));
    let r = call(&client, "codereview", args("gemini-3.5-flash"))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let sent = env.fake.generate_requests();
    assert_eq!(sent.len(), 2);
    assert!(
        sent.iter()
            .all(|r| r.json_mode() && r.body["tools"].is_array())
    );
    client.cancel().await.unwrap();
}

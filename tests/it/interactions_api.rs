//! The Interactions API as the REST backend's transport (`GEMINI_API_SURFACE=interactions`),
//! through the real binary against the stand-in Gemini's `/v1/interactions`: the tools answer
//! as over `generateContent`, a thread's earlier turns are sent as steps (stateless:
//! `store: false`), a thread moves between the two interfaces and stays one conversation, an
//! investigation's function calls and results round-trip as steps with their signature, JSON
//! mode is a `response_format`, usage reaches the reply, Google's errors are retried as before,
//! and every body sent is one google-genai 3.3.0 knows (`CreateModelInteraction`, strictly).

use serde_json::{Value, json};

use crate::support::fake_gemini::{FakeGemini, InteractionOp, Recorded, Script};
use crate::support::http::{HttpServer, Raw, result_text};
use crate::support::mcp::KEY;

pub(crate) struct Env {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) fake: FakeGemini,
}

impl Env {
    pub(crate) fn new() -> Env {
        Env {
            dir: crate::support::project::with(&[
                (
                    "src/lib.rs",
                    "pub fn add(a: u32, b: u32) -> u32 { a + b } // marker-lib\n",
                ),
                ("src/util.rs", "pub fn twice(x: u32) -> u32 { x * 2 }\n"),
            ]),
            fake: FakeGemini::start(),
        }
    }

    pub(crate) async fn server(&self, surface: &str, store: &std::path::Path) -> HttpServer {
        self.server_with(surface, store, &[]).await
    }

    pub(crate) async fn server_with(
        &self,
        surface: &str,
        store: &std::path::Path,
        extra: &[(&str, &str)],
    ) -> HttpServer {
        let url = self.fake.base_url();
        let state = store.display().to_string();
        let mut vars = vec![
            ("GEMINI_API_KEY", KEY),
            ("GEMINI_BASE_URL", url.as_str()),
            ("GEMINI_API_SURFACE", surface),
            ("GEMINI_MCP_STORE", "embedded"),
            ("GEMINI_MCP_STATE_DIR", state.as_str()),
        ];
        vars.extend_from_slice(extra);
        HttpServer::start(self.dir.path(), &vars).await
    }

    pub(crate) fn creates(&self) -> Vec<Recorded> {
        self.fake.interaction_requests(InteractionOp::Create)
    }
}

pub(crate) async fn call(raw: &Raw, id: u64, tool: &str, args: Value) -> Value {
    let answer = raw.call(id, tool, args).await.message;
    assert!(answer.get("error").is_none(), "{answer}");
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    answer
}

pub(crate) fn thread_of(answer: &Value) -> String {
    answer["result"]["structuredContent"]["continuation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no thread: {answer}"))
        .to_string()
}

#[tokio::test]
async fn a_thread_over_the_interactions_api_sends_its_history_as_steps_and_keeps_nothing_at_google()
{
    let env = Env::new();
    let state = tempfile::tempdir().unwrap();
    let server = env.server("interactions", state.path()).await;
    let raw = Raw::new(&server.url());

    let first = call(
        &raw,
        1,
        "chat",
        json!({"prompt": "what does add do?", "files": ["src/lib.rs"]}),
    )
    .await;
    let text = result_text(&first);
    assert!(text.contains("FAKE-REPLY"), "{text}");
    assert!(text.contains("turns=1"), "{text}");
    assert!(
        env.fake.generate_requests().is_empty(),
        "nothing went to generateContent"
    );
    let creates = env.creates();
    assert_eq!(creates.len(), 1);
    let body = &creates[0].body;
    assert_eq!(creates[0].path, "/v1/interactions");
    assert_eq!(body["store"], false, "{body}");
    assert_eq!(body["stream"], true, "{body}");
    assert!(body["system_instruction"].is_string(), "{body}");
    assert!(body["generation_config"]["max_output_tokens"].is_u64());
    assert!(body.to_string().contains("marker-lib"), "the file is sent");
    assert_eq!(creates[0].header("x-goog-api-key"), Some(KEY));
    assert!(
        env.fake.interactions().is_empty(),
        "store: false keeps nothing"
    );
    // The usage the stand-in reported (a token per 4 characters of the body) is the reply's.
    let usage = &first["result"]["structuredContent"]["usage"];
    let counted = creates[0].raw_body.chars().count().div_ceil(4) as u64;
    assert_eq!(usage["input"].as_u64(), Some(counted), "{usage}");
    assert!(usage["output"].as_u64().unwrap_or(0) > 0, "{usage}");

    let thread = thread_of(&first);
    let second = call(
        &raw,
        2,
        "chat",
        json!({"prompt": "and in words?", "continuation_id": thread}),
    )
    .await;
    let text = result_text(&second);
    assert!(
        text.contains("turns=2"),
        "the model read both turns: {text}"
    );
    let body = &env.creates()[1].body;
    let steps: Vec<&str> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        steps,
        ["user_input", "model_output", "user_input"],
        "{body}"
    );
    assert!(body.get("previous_interaction_id").is_none(), "{body}");
}

fn step_types(body: &Value) -> Vec<String> {
    body["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["type"].as_str().unwrap().to_string())
        .collect()
}

/// With `GEMINI_MCP_INTERACTIONS_STORE=1` Google keeps each answer and a thread's next turn
/// sends only what is new; a file changed since sends the whole history (Google's chain holds
/// the old content), and an interaction gone at Google costs the call only the whole history.
#[tokio::test]
async fn a_stored_thread_sends_only_what_is_new_unless_its_chain_no_longer_holds_the_history() {
    let env = Env::new();
    let state = tempfile::tempdir().unwrap();
    let server = env
        .server_with(
            "interactions",
            state.path(),
            &[("GEMINI_MCP_INTERACTIONS_STORE", "1")],
        )
        .await;
    let raw = Raw::new(&server.url());
    let first = call(
        &raw,
        1,
        "chat",
        json!({"prompt": "what does add do?", "files": ["src/lib.rs"]}),
    )
    .await;
    let thread = thread_of(&first);
    let held = env.fake.interactions();
    assert_eq!(held.len(), 1, "store: true keeps the interaction");
    assert_eq!(env.creates()[0].body["store"], true);

    let next = |id: u64, prompt: &str| {
        let raw = &raw;
        let args = json!({"prompt": prompt, "continuation_id": thread});
        async move { call(raw, id, "chat", args).await }
    };
    let second = next(2, "and in words?").await;
    assert!(
        result_text(&second).contains("turns=2"),
        "{}",
        result_text(&second)
    );
    let body = &env.creates()[1].body;
    assert_eq!(
        body["previous_interaction_id"],
        held[0].id.as_str(),
        "{body}"
    );
    assert_eq!(
        step_types(body),
        ["user_input"],
        "only the new turn: {body}"
    );
    assert!(
        !body.to_string().contains("marker-lib"),
        "the file is not sent again"
    );
    let bytes = env.fake.interaction_bytes_received();
    assert!(bytes[1] < bytes[0], "{bytes:?}");

    // The file changes: Google's chain holds its old content, so the history goes whole.
    crate::support::project::write(
        env.dir.path(),
        "src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 { a.wrapping_add(b) } // marker-new\n",
    );
    let third = next(3, "and now?").await;
    assert!(
        result_text(&third).contains("turns=3"),
        "{}",
        result_text(&third)
    );
    let body = &env.creates()[2].body;
    assert!(body.get("previous_interaction_id").is_none(), "{body}");
    assert!(body.to_string().contains("marker-new"), "{body}");
    assert_eq!(
        step_types(body),
        [
            "user_input",
            "model_output",
            "user_input",
            "model_output",
            "user_input"
        ]
    );

    // Unchanged again: chained to the third turn's interaction. Then that one is deleted at
    // Google: the call is sent again whole and answered.
    next(4, "fourth").await;
    let fourth = &env.creates()[3].body;
    let third_id = env.fake.interactions()[2].id.clone();
    assert_eq!(
        fourth["previous_interaction_id"],
        third_id.as_str(),
        "{fourth}"
    );
    let fourth_id = env.fake.interactions().last().unwrap().id.clone();
    let deleted = reqwest::Client::new()
        .delete(format!(
            "{}/v1/interactions/{fourth_id}",
            env.fake.base_url()
        ))
        .header("x-goog-api-key", KEY)
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success());
    let fifth = next(5, "fifth").await;
    assert!(
        result_text(&fifth).contains("turns=5"),
        "{}",
        result_text(&fifth)
    );
    let creates = env.creates();
    assert_eq!(creates.len(), 6, "the lost chain costs one more request");
    assert_eq!(
        creates[4].body["previous_interaction_id"],
        fourth_id.as_str()
    );
    assert!(creates[5].body.get("previous_interaction_id").is_none());
    assert_eq!(step_types(&creates[5].body).len(), 9, "the whole history");

    // Deleting the thread deletes what Google stored for its turns.
    let url = env.fake.base_url();
    let state_dir = state.path().display().to_string();
    let out = crate::support::mcp::std_command(
        env.dir.path(),
        &[
            ("GEMINI_API_KEY", KEY),
            ("GEMINI_BASE_URL", url.as_str()),
            ("GEMINI_API_SURFACE", "interactions"),
            ("GEMINI_MCP_INTERACTIONS_STORE", "1"),
            ("GEMINI_MCP_STORE", "embedded"),
            ("GEMINI_MCP_STATE_DIR", state_dir.as_str()),
        ],
    )
    .args(["threads", "delete", &thread])
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left: Vec<String> = env
        .fake
        .interactions()
        .iter()
        .map(|h| h.id.clone())
        .collect();
    // The fourth was already gone at Google; the five turns' own interactions are deleted.
    assert!(left.is_empty(), "left at Google: {left:?}");
}

#[tokio::test]
async fn a_thread_moves_between_the_two_interfaces_and_stays_one_conversation() {
    let env = Env::new();
    let state = tempfile::tempdir().unwrap();
    let first = {
        let server = env.server("generate-content", state.path()).await;
        let raw = Raw::new(&server.url());
        call(
            &raw,
            1,
            "chat",
            json!({"prompt": "first question", "files": ["src/lib.rs"]}),
        )
        .await
    };
    assert_eq!(env.fake.generate_requests().len(), 1);
    let thread = thread_of(&first);
    let second = {
        let server = env.server("interactions", state.path()).await;
        let raw = Raw::new(&server.url());
        call(
            &raw,
            1,
            "chat",
            json!({"prompt": "second question", "continuation_id": thread}),
        )
        .await
    };
    assert!(
        result_text(&second).contains("turns=2"),
        "{}",
        result_text(&second)
    );
    assert!(env.creates()[0].body.to_string().contains("marker-lib"));
    let third = {
        let server = env.server("generate-content", state.path()).await;
        let raw = Raw::new(&server.url());
        call(
            &raw,
            1,
            "chat",
            json!({"prompt": "third question", "continuation_id": thread}),
        )
        .await
    };
    assert!(
        result_text(&third).contains("turns=3"),
        "{}",
        result_text(&third)
    );
}

#[tokio::test]
async fn a_review_asks_for_json_with_a_response_format() {
    let env = Env::new();
    let state = tempfile::tempdir().unwrap();
    let server = env.server("interactions", state.path()).await;
    let raw = Raw::new(&server.url());
    let answer = call(
        &raw,
        1,
        "codereview",
        json!({"files": ["src/lib.rs"], "context": "Adds numbers"}),
    )
    .await;
    let body = &env.creates()[0].body;
    assert_eq!(body["response_format"]["type"], "text", "{body}");
    assert_eq!(body["response_format"]["mime_type"], "application/json");
    assert!(body["response_format"]["schema"].is_object(), "{body}");
    let structured = &answer["result"]["structuredContent"];
    assert!(
        structured["findings"].is_array(),
        "the review was read from the JSON answer: {structured}"
    );
}

#[tokio::test]
async fn an_investigation_round_trips_its_function_calls_as_steps() {
    let env = Env::new();
    let state = tempfile::tempdir().unwrap();
    let server = env.server("interactions", state.path()).await;
    let raw = Raw::new(&server.url());
    env.fake
        .push(Script::calls(
            &[("read_file", json!({"path": "src/lib.rs"}))],
            "c2lnLTE=",
            [500, 20, 30],
        ))
        .push(Script::text("add adds its arguments (src/lib.rs:1).").usage(900, 30, 40, 0));
    let answer = call(&raw, 1, "investigate", json!({"task": "What does add do?"})).await;
    assert!(
        result_text(&answer).contains("add adds its arguments"),
        "{}",
        result_text(&answer)
    );
    let creates = env.creates();
    assert!(creates.len() >= 2, "{} creates", creates.len());
    let first = &creates[0].body;
    assert!(
        first["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["type"] == "function" && t["name"] == "read_file"),
        "the functions are declared as tools: {first}"
    );
    // The second request replays the model's call (with its thought signature) and our result.
    let second = &creates[1].body;
    let steps = second["input"].as_array().unwrap();
    let thought = steps
        .iter()
        .find(|s| s["type"] == "thought")
        .unwrap_or_else(|| panic!("no thought step: {second}"));
    assert_eq!(thought["signature"], "c2lnLTE=");
    let called = steps
        .iter()
        .find(|s| s["type"] == "function_call")
        .unwrap_or_else(|| panic!("no call step: {second}"));
    assert_eq!(called["name"], "read_file");
    assert_eq!(called["arguments"]["path"], "src/lib.rs");
    let result = steps
        .iter()
        .find(|s| s["type"] == "function_result")
        .unwrap_or_else(|| panic!("no result step: {second}"));
    assert_eq!(result["call_id"], called["id"]);
    assert!(
        result["result"].as_str().unwrap().contains("marker-lib"),
        "the file read is the result: {result}"
    );
}

#[tokio::test]
async fn googles_errors_over_the_interactions_api_are_retried_as_before() {
    let env = Env::new();
    let state = tempfile::tempdir().unwrap();
    let server = env.server("interactions", state.path()).await;
    let raw = Raw::new(&server.url());
    env.fake.push(Script::overloaded());
    let answer = call(&raw, 1, "chat", json!({"prompt": "hello"})).await;
    assert!(result_text(&answer).contains("FAKE-REPLY"));
    assert_eq!(env.creates().len(), 2, "one 503, then the answer");
}

/// Every body this binary sent the stand-in's Interactions API in the tests above' kinds of
/// call, held to google-genai 3.3.0's `CreateModelInteraction` strictly (no field it lacks).
#[cfg(unix)]
#[tokio::test]
async fn every_interactions_body_we_send_is_one_google_genai_knows() {
    let python = match crate::wire_schema::genai_python() {
        Ok(p) => p,
        Err(why) => {
            if crate::support::skip_when(Some(why), "GEMINI_MCP_REQUIRE_GENAI") {
                return;
            }
            unreachable!("skip_when panics when the environment is required");
        }
    };
    let env = Env::new();
    let state = tempfile::tempdir().unwrap();
    let server = env.server("interactions", state.path()).await;
    let raw = Raw::new(&server.url());
    let first = call(
        &raw,
        1,
        "chat",
        json!({"prompt": "hi", "files": ["src/lib.rs"], "temperature": 0.2}),
    )
    .await;
    call(
        &raw,
        2,
        "chat",
        json!({"prompt": "more", "continuation_id": thread_of(&first)}),
    )
    .await;
    call(
        &raw,
        3,
        "codereview",
        json!({"files": ["src/lib.rs"], "context": "Adds numbers"}),
    )
    .await;
    call(
        &raw,
        4,
        "thinkdeep",
        json!({"current_analysis": "add is pure", "thinking_mode": "high"}),
    )
    .await;
    // A PDF named in `files` goes as a document.
    crate::support::project::write(
        env.dir.path(),
        "spec.pdf",
        "%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n",
    );
    call(
        &raw,
        41,
        "chat",
        json!({"prompt": "spec?", "files": ["spec.pdf", "src/lib.rs"]}),
    )
    .await;
    assert!(
        env.creates()
            .last()
            .unwrap()
            .body
            .to_string()
            .contains("\"type\":\"document\""),
        "{}",
        env.creates().last().unwrap().body
    );
    env.fake
        .push(Script::calls(
            &[("read_file", json!({"path": "src/util.rs"}))],
            "c2lnLTI=",
            [500, 20, 30],
        ))
        .push(Script::text("twice doubles (src/util.rs:1).").usage(900, 30, 40, 0));
    call(
        &raw,
        5,
        "investigate",
        json!({"task": "What does twice do?"}),
    )
    .await;
    {
        let stored = tempfile::tempdir().unwrap();
        let server = env
            .server_with(
                "interactions",
                stored.path(),
                &[("GEMINI_MCP_INTERACTIONS_STORE", "1")],
            )
            .await;
        let raw = Raw::new(&server.url());
        let first = call(
            &raw,
            6,
            "chat",
            json!({"prompt": "stored", "files": ["src/lib.rs"]}),
        )
        .await;
        call(
            &raw,
            7,
            "chat",
            json!({"prompt": "chained", "continuation_id": thread_of(&first)}),
        )
        .await;
        assert!(env.creates().last().unwrap().body["previous_interaction_id"].is_string());
    }
    let records: Vec<Value> = env
        .creates()
        .iter()
        .enumerate()
        .map(|(i, r)| json!({"name": format!("create {i}"), "interaction_create": r.body}))
        .collect();
    assert!(records.len() >= 8, "{} bodies", records.len());
    let (ok, report) = crate::wire_schema::validate(&python, &records);
    assert!(ok, "{report}");
    // The check can fail: a body with a generateContent field in it.
    let mut wrong = records[0].clone();
    wrong["interaction_create"]["systemInstruction"] = json!({"parts": [{"text": "x"}]});
    let (ok, report) = crate::wire_schema::validate(&python, &[wrong]);
    assert!(!ok, "{report}");
}

/// Over the Interactions API the call passes the same gates before anything is sent: a daily
/// cap of one token refuses it, a secret file is refused by the sandbox and its value goes
/// nowhere, and an answer with a terminal control reaches the reply as over generateContent.
#[tokio::test]
async fn the_interactions_path_keeps_the_caps_the_sandbox_and_reads_answers_as_generate_content_does()
 {
    let env = Env::new();
    crate::support::project::write(
        env.dir.path(),
        ".env",
        "API_TOKEN=interactions-secret-value-2718281828\n",
    );
    let state = tempfile::tempdir().unwrap();
    let capped = env
        .server_with(
            "interactions",
            state.path(),
            &[("GEMINI_MCP_DAILY_TOKENS", "1")],
        )
        .await;
    let answer = Raw::new(&capped.url())
        .call(1, "chat", json!({"prompt": "over the cap"}))
        .await
        .message;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(
        answer.to_string().contains("GEMINI_MCP_DAILY_TOKENS"),
        "{answer}"
    );
    assert!(env.creates().is_empty(), "Gemini was asked over the cap");

    let state = tempfile::tempdir().unwrap();
    let server = env.server("interactions", state.path()).await;
    let raw = Raw::new(&server.url());
    let refused = raw
        .call(
            2,
            "codereview",
            json!({"files": [".env"], "context": "check it"}),
        )
        .await
        .message;
    assert!(
        !refused.to_string().contains("interactions-secret-value"),
        "{refused}"
    );
    assert!(
        env.creates()
            .iter()
            .all(|r| !r.raw_body.contains("interactions-secret-value")),
        "the secret reached Gemini"
    );

    // Gemini's answer is read by the same code as over generateContent: a terminal control in
    // it reaches the reply as it does there (escaped in JSON; neutralised where printed).
    let osc52 = "copied \u{1b}]52;c;ZXZpbA==\u{7} to your clipboard";
    env.fake.push(Script::text(osc52));
    let over_interactions = call(&raw, 3, "chat", json!({"prompt": "hello"})).await;
    let other = tempfile::tempdir().unwrap();
    let plain = env.server("generate-content", other.path()).await;
    env.fake.push(Script::text(osc52));
    let over_generate = call(
        &Raw::new(&plain.url()),
        4,
        "chat",
        json!({"prompt": "hello"}),
    )
    .await;
    let answer = |r: &Value| r["result"]["structuredContent"]["answer"].clone();
    assert_eq!(answer(&over_interactions), answer(&over_generate));
}

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

struct Env {
    dir: tempfile::TempDir,
    fake: FakeGemini,
}

impl Env {
    fn new() -> Env {
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

    async fn server(&self, surface: &str, store: &std::path::Path) -> HttpServer {
        self.server_with(surface, store, &[]).await
    }

    async fn server_with(
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

    fn creates(&self) -> Vec<Recorded> {
        self.fake.interaction_requests(InteractionOp::Create)
    }
}

async fn call(raw: &Raw, id: u64, tool: &str, args: Value) -> Value {
    let answer = raw.call(id, tool, args).await.message;
    assert!(answer.get("error").is_none(), "{answer}");
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    answer
}

fn thread_of(answer: &Value) -> String {
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
    if let Ok(python) = crate::wire_schema::genai_python() {
        let records: Vec<Value> = creates
            .iter()
            .map(|r| json!({"name": "vertex create", "interaction_create": r.body}))
            .collect();
        let (ok, report) = crate::wire_schema::validate(&python, &records);
        assert!(ok, "{report}");
    }
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

/// Every body this binary sent the stand-in's Interactions API in the tests above' kinds of
/// call, held to google-genai 3.3.0's `CreateModelInteraction` strictly (no field it lacks).
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

    if let Ok(python) = crate::wire_schema::genai_python() {
        let records: Vec<Value> = env
            .creates()
            .iter()
            .map(|r| json!({"name": "create", "interaction_create": r.body}))
            .collect();
        let (ok, report) = crate::wire_schema::validate(&python, &records);
        assert!(ok, "{report}");
    }
}

/// BENCHMARKS.md, Interactions API: a ten-turn chat thread over a ~25 KB file, over
/// `generateContent`, the Interactions API stateless, and the Interactions API with server-side
/// state (`GEMINI_MCP_INTERACTIONS_STORE=1`): the request bytes sent and the input tokens the
/// stand-in bills (it counts a token per 4 characters of the body, and a chained turn's held
/// history as input, as Google bills it); then a background run's overhead against the same
/// answer streamed. Run with `GEMINI_MCP_BENCH_INTERACTIONS=1 cargo test --test it --
/// --nocapture interactions_api::bench`.
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

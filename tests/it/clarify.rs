//! Questions inside the call (2026-07-28 multi-round-trip requests): Gemini asks for files, a
//! client that accepts form elicitation is asked within the call which to send, and its answer
//! continues the same call — Gemini's next request holds the files. Declined, the call answers
//! with today's reply; a client without elicitation, or on an earlier revision, gets today's
//! reply at once; answers that do not fit the question are bad params; another client cannot
//! continue someone else's question with a copied `requestState`.

use serde_json::{Value, json};

use crate::support::fake_gemini::{FakeGemini, Script};
use crate::support::http::{HttpServer, Raw, result_text};
use crate::support::mcp::KEY;

const SECRET_DB: &str = "fn connect() -> Pool { Pool::new(\"unique-db-marker-41\") }\n";
const TOKEN_A: &str = "clarify-token-a-0123456789abcdef";
const TOKEN_B: &str = "clarify-token-b-0123456789abcdef";

struct Env {
    dir: tempfile::TempDir,
    fake: FakeGemini,
}

impl Env {
    fn new() -> Env {
        Env {
            dir: crate::support::project::with(&[
                ("src/main.rs", "fn main() { db::connect(); }\n"),
                ("src/db.rs", SECRET_DB),
                ("src/pool.rs", "pub struct Pool;\n"),
            ]),
            fake: FakeGemini::start(),
        }
    }

    async fn http(&self, extra: &[(&str, &str)]) -> HttpServer {
        let url = self.fake.base_url();
        let mut vars = vec![("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", url.as_str())];
        vars.extend_from_slice(extra);
        HttpServer::start(self.dir.path(), &vars).await
    }

    /// Gemini first asks for `src/db.rs` and `src/pool.rs`, then answers.
    fn asks_then_answers(&self) {
        self.fake.push(Script::json(json!({
            "status": "requires_clarification",
            "question": "Where is the connection pool made?",
            "files_needed": ["src/db.rs", "src/pool.rs"]
        })));
        self.fake.push(Script::text(
            "The pool is made in connect(); it is never closed.",
        ));
    }
}

/// `_meta` of a 2026-07-28 request whose client declares `capabilities`.
fn meta(capabilities: Value) -> Value {
    json!({"io.modelcontextprotocol/clientCapabilities": capabilities})
}

fn elicits() -> Value {
    meta(json!({"elicitation": {"form": {}}}))
}

async fn call(raw: &Raw, id: u64, params: Value) -> Value {
    raw.modern(id, "tools/call", params).await.message
}

fn first_round() -> Value {
    json!({"name": "chat", "arguments": {"prompt": "why does the app leak connections?", "files": ["src/main.rs"]},
           "_meta": elicits()})
}

fn retry(state: &str, answer: Value) -> Value {
    let mut p = first_round();
    p["requestState"] = json!(state);
    p["inputResponses"] = json!({"files": answer});
    p
}

#[tokio::test]
async fn gemini_asking_for_files_asks_the_client_and_its_answer_continues_the_call() {
    let env = Env::new();
    env.asks_then_answers();
    let server = env.http(&[]).await;
    let raw = Raw::new(&server.url());

    let asked = call(&raw, 1, first_round()).await;
    let r = &asked["result"];
    assert_eq!(r["resultType"], "input_required", "{asked}");
    let form = &r["inputRequests"]["files"];
    assert_eq!(form["method"], "elicitation/create", "{asked}");
    assert_eq!(form["params"]["mode"], "form");
    let message = form["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("Where is the connection pool made?")
            && message.contains("src/db.rs, src/pool.rs"),
        "{message}"
    );
    let schema = &form["params"]["requestedSchema"];
    assert_eq!(
        schema["properties"]["files"]["items"]["enum"],
        json!(["src/db.rs", "src/pool.rs"])
    );
    let state = r["requestState"]
        .as_str()
        .expect("a requestState")
        .to_string();
    assert_eq!(env.fake.generate_requests().len(), 1);

    // The user sends one of the two; the same call, made again, continues with it.
    let done = call(
        &raw,
        2,
        retry(
            &state,
            json!({"action": "accept", "content": {"files": ["src/db.rs"]}}),
        ),
    )
    .await;
    assert_ne!(done["result"]["resultType"], "input_required", "{done}");
    assert_ne!(done["result"]["isError"], true, "{done}");
    let text = result_text(&done);
    assert!(text.contains("it is never closed"), "{text}");
    let structured = &done["result"]["structuredContent"];
    assert_eq!(structured["status"], "success", "{done}");

    let requests = env.fake.generate_requests();
    assert_eq!(requests.len(), 2, "one Gemini request per round");
    let second = requests[1].body.to_string();
    assert!(
        second.contains("unique-db-marker-41"),
        "Gemini's next request holds the chosen file"
    );
    assert!(
        !second.contains("pub struct Pool"),
        "the file the user left out is not sent"
    );
    // It continues the thread Gemini's question opened: the question is an earlier turn.
    let messages = requests[1].messages();
    assert!(
        messages
            .iter()
            .any(|(role, text)| role == "model" && text.contains("requires_clarification")),
        "{messages:?}"
    );
    let included: Vec<&str> = structured["files"]["included"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["path"].as_str())
        .collect();
    assert!(
        included.iter().any(|p| p.ends_with("src/db.rs")),
        "{included:?}"
    );
}

#[tokio::test]
async fn a_declined_question_answers_with_todays_reply() {
    let env = Env::new();
    env.asks_then_answers();
    let server = env.http(&[]).await;
    let raw = Raw::new(&server.url());
    let asked = call(&raw, 1, first_round()).await;
    let state = asked["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    let declined = call(&raw, 2, retry(&state, json!({"action": "decline"}))).await;
    let r = &declined["result"];
    assert_eq!(
        r["structuredContent"]["status"], "requires_clarification",
        "{declined}"
    );
    assert!(r["structuredContent"]["continuation_id"].is_string());
    let text = result_text(&declined);
    assert!(
        text.contains("src/db.rs") && text.contains("continuation_id"),
        "{text}"
    );
    assert_eq!(
        env.fake.generate_requests().len(),
        1,
        "no Gemini request for a declined question"
    );
}

#[tokio::test]
async fn a_client_that_cannot_be_asked_gets_todays_reply_at_once() {
    let env = Env::new();
    let server = env.http(&[]).await;
    let raw = Raw::new(&server.url());
    // No elicitation declared (2026-07-28), and the 2025-06-18 session of a client that does.
    for (n, params) in [
        json!({"name": "chat", "arguments": {"prompt": "why?"}, "_meta": meta(json!({}))}),
        json!({"name": "chat", "arguments": {"prompt": "why?"}, "_meta": meta(json!({"elicitation": {"url": {}}}))}),
    ]
    .into_iter()
    .enumerate()
    {
        env.fake.push(Script::json(json!({
            "status": "requires_clarification", "question": "Which?", "files_needed": ["src/db.rs"]
        })));
        let got = call(&raw, n as u64 + 1, params).await;
        assert_ne!(got["result"]["resultType"], "input_required", "{got}");
        assert_eq!(
            got["result"]["structuredContent"]["status"], "requires_clarification",
            "{got}"
        );
    }
    let legacy = Raw::new(&server.url());
    let session = legacy
        .initialize_with(json!({"elicitation": {"form": {}}}))
        .await;
    env.fake.push(Script::json(json!({
        "status": "requires_clarification", "question": "Which?", "files_needed": ["src/db.rs"]
    })));
    let got = legacy
        .post(
            json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                   "params": {"name": "chat", "arguments": {"prompt": "why?"}}}),
            &[
                ("mcp-session-id", session.as_str()),
                ("mcp-protocol-version", "2025-06-18"),
            ],
        )
        .await
        .message;
    assert_ne!(got["result"]["resultType"], "input_required", "{got}");
    assert_eq!(
        got["result"]["structuredContent"]["status"], "requires_clarification",
        "{got}"
    );
}

#[tokio::test]
async fn answers_that_do_not_fit_the_question_are_refused_and_send_nothing() {
    let env = Env::new();
    env.asks_then_answers();
    let server = env.http(&[]).await;
    let raw = Raw::new(&server.url());
    let asked = call(&raw, 1, first_round()).await;
    let state = asked["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    let mut tampered = state.clone();
    tampered.insert(3, '!');
    for (n, params, field) in [
        (
            2,
            retry(
                &state,
                json!({"action": "accept", "content": {"files": ["../outside.rs"]}}),
            ),
            "inputResponses.files.content.files",
        ),
        (
            3,
            retry(&tampered, json!({"action": "decline"})),
            "requestState",
        ),
        (
            4,
            {
                let mut p = retry(
                    &state,
                    json!({"action": "accept", "content": {"files": ["src/db.rs"]}}),
                );
                p["name"] = json!("thinkdeep");
                p["arguments"] = json!({"current_analysis": "x"});
                p
            },
            "requestState",
        ),
    ] {
        let got = call(&raw, n, params).await;
        assert_eq!(got["error"]["code"], -32602, "{got}");
        let message = got["error"]["message"].as_str().unwrap();
        assert!(message.contains(field), "{field}: {message}");
    }
    assert_eq!(
        env.fake.generate_requests().len(),
        1,
        "nothing sent for a refused answer"
    );
}

#[tokio::test]
async fn another_client_cannot_continue_a_question_it_did_not_get() {
    let env = Env::new();
    env.asks_then_answers();
    let tokens = format!("{TOKEN_A},{TOKEN_B}");
    let server = env
        .http(&[("GEMINI_MCP_HTTP_TOKEN", tokens.as_str())])
        .await;
    let a = Raw::new(&server.url()).header("authorization", &format!("Bearer {TOKEN_A}"));
    let b = Raw::new(&server.url()).header("authorization", &format!("Bearer {TOKEN_B}"));
    let asked = call(&a, 1, first_round()).await;
    let state = asked["result"]["requestState"]
        .as_str()
        .expect("asked")
        .to_string();
    let stolen = call(
        &b,
        2,
        retry(
            &state,
            json!({"action": "accept", "content": {"files": ["src/db.rs"]}}),
        ),
    )
    .await;
    let text = stolen.to_string();
    assert!(
        stolen["error"].is_object() || stolen["result"]["isError"] == true,
        "{stolen}"
    );
    assert!(!text.contains("it is never closed"), "{text}");
    assert!(
        env.fake
            .generate_requests()
            .iter()
            .all(|r| !r.body.to_string().contains("unique-db-marker-41")),
        "the file never reached Gemini for the other client"
    );
}

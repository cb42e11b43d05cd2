//! The stand-in Gemini's Interactions API, driven over HTTP as a client would: create (plain,
//! JSON mode, a function call round), a streamed create, `previous_interaction_id` chains and
//! their errors, `store: false`, a background run polled, cancelled and deleted, and the bytes a
//! chained turn sends against a stateless one.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::fake_gemini::{FakeGemini, InteractionOp, Script};

const MODEL: &str = "gemini-3.8-flash";

/// A client of the fake's Interactions API.
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

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut r = self
            .http
            .request(method, format!("{}/v1beta/interactions{path}", self.base))
            .header("x-goog-api-key", "k");
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

    async fn create(&self, body: Value) -> (u16, Value) {
        self.call(Method::POST, "", Some(body)).await
    }

    /// A streamed create: the content type and each event's `(event:, data:)`.
    async fn create_streamed(&self, mut body: Value) -> (String, Vec<(String, Value)>) {
        body["stream"] = json!(true);
        let r = self
            .http
            .post(format!("{}/v1beta/interactions", self.base))
            .header("x-goog-api-key", "k")
            .header("accept", "text/event-stream")
            .json(&body)
            .send()
            .await
            .expect("the fake answers");
        let ct = r
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let text = r.text().await.unwrap();
        (ct, parse_events(&text))
    }
}

/// The events of an Interactions stream: `event: <type>\ndata: <json>` blocks.
pub fn parse_events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(|block| {
            let mut name = String::new();
            let mut data = Value::Null;
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = n.to_string();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(d).expect("an event's data is JSON");
                }
            }
            (name, data)
        })
        .collect()
}

/// The text of an interaction's `model_output` steps.
fn output_text(interaction: &Value) -> String {
    interaction["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["type"] == "model_output")
        .flat_map(|s| s["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["text"].as_str().map(String::from))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_create_answers_an_interaction_from_the_script_queue() {
    let fake = FakeGemini::start();
    let client = Client::of(&fake);

    // Plain: the echo, with Google's fields.
    let (status, it) = client
        .create(json!({"model": MODEL, "input": "Review this diff.",
            "system_instruction": "You review code."}))
        .await;
    assert_eq!(status, 200, "{it}");
    assert!(it["id"].as_str().unwrap().starts_with("v1_"), "{it}");
    assert_eq!(it["status"], "completed");
    assert_eq!(it["model"], MODEL);
    assert_eq!(
        output_text(&it),
        format!("FAKE-REPLY model={MODEL} turns=1 last=Review this diff.")
    );
    let usage = &it["usage"];
    let sent = fake.interaction_requests(InteractionOp::Create);
    let bytes = fake.interaction_bytes_received();
    assert_eq!(bytes, vec![sent[0].raw_body.len()]);
    assert_eq!(
        usage["total_input_tokens"],
        json!(sent[0].raw_body.chars().count().div_ceil(4))
    );
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["total_input_tokens"].as_u64().unwrap()
            + usage["total_output_tokens"].as_u64().unwrap()
    );
    assert_eq!(sent[0].interaction_input_text(), "Review this diff.");
    assert_eq!(sent[0].model.as_deref(), Some(MODEL));

    // A scripted text, and thinking: a thought step with its signature, 42 thought tokens.
    fake.push(Script::text("## Review\nFine.").thoughts(["Reading the diff."]));
    let (_, it) = client
        .create(
            json!({"model": MODEL, "input": [{"type": "text", "text": "Again."}],
            "generation_config": {"thinking_level": "high", "max_output_tokens": 1024}}),
        )
        .await;
    assert_eq!(output_text(&it), "## Review\nFine.");
    assert_eq!(it["steps"][0]["type"], "thought");
    assert_eq!(it["steps"][0]["summary"][0]["text"], "Reading the diff.");
    assert_eq!(it["usage"]["total_thought_tokens"], 42);

    // JSON mode: the echo's JSON object.
    let (_, it) = client
        .create(json!({"model": MODEL, "input": "Summarise.",
            "response_format": {"type": "text", "mime_type": "application/json",
                "schema": {"type": "object", "properties": {"summary": {"type": "string"}}}}}))
        .await;
    let answer: Value = serde_json::from_str(&output_text(&it)).expect("JSON text");
    assert_eq!(answer["verdict"], "ready");
    assert!(answer["summary"].as_str().unwrap().contains("turns=1"));

    // A function call round: the calls as steps, `requires_action`; the results go back as
    // `function_result` steps on the same chain.
    fake.push(Script::calls(
        &[("read_file", json!({"path": "src/lib.rs"}))],
        "c2ln",
        [100, 10, 5],
    ));
    let tools = json!([{"type": "function", "name": "read_file", "description": "Reads a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]);
    let (_, it) = client
        .create(json!({"model": MODEL, "input": "Investigate.", "tools": tools}))
        .await;
    assert_eq!(it["status"], "requires_action", "{it}");
    let call = it["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["type"] == "function_call")
        .expect("a call step")
        .clone();
    assert_eq!(call["name"], "read_file");
    assert_eq!(call["arguments"]["path"], "src/lib.rs");
    assert_eq!(it["usage"]["total_input_tokens"], 100);
    let (_, next) = client
        .create(
            json!({"model": MODEL, "previous_interaction_id": it["id"], "tools": tools,
            "input": [{"type": "function_result", "call_id": call["id"], "name": "read_file",
                "result": "fn main() {}"}]}),
        )
        .await;
    assert_eq!(next["status"], "completed");
    assert!(output_text(&next).contains("turns=2"), "{next}");

    // An error script is the HTTP error.
    fake.push(Script::overloaded());
    let (status, err) = client.create(json!({"model": MODEL, "input": "x"})).await;
    assert_eq!(status, 503);
    assert_eq!(err["error"]["status"], "UNAVAILABLE");
    assert_eq!(fake.pending(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_streamed_create_sends_googles_events_in_order() {
    let fake = FakeGemini::start();
    let client = Client::of(&fake);
    fake.push(Script::chunks(["Hel", "lo"]).thoughts(["Hmm."]));
    let (ct, events) = client
        .create_streamed(json!({"model": MODEL, "input": "Hi"}))
        .await;
    assert!(ct.starts_with("text/event-stream"), "{ct}");
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "interaction.created",
            "interaction.status_update",
            "step.start",
            "step.delta",
            "step.delta",
            "step.stop",
            "step.start",
            "step.delta",
            "step.delta",
            "step.stop",
            "interaction.completed",
        ]
    );
    for (name, data) in &events {
        assert_eq!(data["event_type"], name.as_str());
    }
    assert_eq!(events[0].1["interaction"]["status"], "in_progress");
    assert_eq!(events[2].1["step"]["type"], "thought");
    assert_eq!(events[4].1["delta"]["type"], "thought_signature");
    assert_eq!(events[6].1["step"]["type"], "model_output");
    let text: String = events[7..9]
        .iter()
        .map(|(_, d)| d["delta"]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(text, "Hello");
    let done = &events[10].1["interaction"];
    assert_eq!(done["status"], "completed");
    assert!(done["usage"]["total_output_tokens"].as_u64().unwrap() > 0);
    // The streamed interaction is held, with its steps.
    let id = done["id"].as_str().unwrap();
    let (_, got) = client.call(Method::GET, &format!("/{id}"), None).await;
    assert_eq!(output_text(&got), "Hello");

    // The held interaction's stream replays by `GET ?stream=true`, resumable after an event.
    let url = format!("{}/v1beta/interactions/{id}?stream=true", fake.base_url());
    let replay = reqwest::get(&url).await.unwrap().text().await.unwrap();
    let again = parse_events(&replay);
    assert_eq!(again.len(), events.len());
    assert_eq!(
        again.last().unwrap().1["interaction"]["status"],
        "completed"
    );
    let after = events[6].1["event_id"].as_str().unwrap();
    let resumed = reqwest::get(format!("{url}&last_event_id={after}"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let resumed = parse_events(&resumed);
    assert_eq!(resumed.len(), events.len() - 7);
    assert_eq!(resumed[0].0, "step.delta");

    // A function call streams its arguments as one `arguments_delta`.
    fake.push(Script::calls(
        &[("grep", json!({"q": "todo"}))],
        "c2ln",
        [9, 9, 0],
    ));
    let (_, events) = client
        .create_streamed(json!({"model": MODEL, "input": "Find."}))
        .await;
    let delta = events
        .iter()
        .find(|(_, d)| d["delta"]["type"] == "arguments_delta")
        .expect("an arguments delta");
    let args: Value =
        serde_json::from_str(delta.1["delta"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"q": "todo"}));
    assert_eq!(
        events.last().unwrap().1["interaction"]["status"],
        "requires_action"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn previous_interaction_id_chains_the_history_and_store_false_keeps_nothing() {
    let fake = FakeGemini::start();
    let client = Client::of(&fake);
    let (_, first) = client
        .create(json!({"model": MODEL, "input": "One."}))
        .await;
    let (_, second) = client
        .create(json!({"model": MODEL, "input": "Two.", "previous_interaction_id": first["id"]}))
        .await;
    let (_, third) = client
        .create(json!({"model": MODEL, "input": "Three.", "previous_interaction_id": second["id"]}))
        .await;
    assert_eq!(
        output_text(&third),
        format!("FAKE-REPLY model={MODEL} turns=3 last=Three.")
    );
    assert_eq!(third["previous_interaction_id"], second["id"]);
    let sent = fake.interaction_requests(InteractionOp::Create);
    assert_eq!(sent[2].interaction_turns(), 3);
    let history = sent[2].interaction_history();
    assert_eq!(history.len(), 4, "two inputs and two outputs: {history:?}");
    assert_eq!(history[0]["type"], "user_input");
    assert_eq!(history[1]["type"], "model_output");
    // The history counts as input: the third turn is billed more than it sent.
    let own = sent[2].raw_body.chars().count().div_ceil(4) as u64;
    assert!(third["usage"]["total_input_tokens"].as_u64().unwrap() > own);
    assert_eq!(fake.interactions().len(), 3);
    // Create answers the model's steps; the stored resource leads with the user's.
    assert_eq!(third["steps"][0]["type"], "model_output");
    let tid = third["id"].as_str().unwrap();
    let (_, got) = client.call(Method::GET, &format!("/{tid}"), None).await;
    assert_eq!(got["steps"][0]["type"], "user_input");
    assert_eq!(got["steps"][1]["type"], "model_output");

    // An unknown id, and a deleted one: 404 NOT_FOUND.
    let (status, err) = client
        .create(json!({"model": MODEL, "input": "x", "previous_interaction_id": "v1_nope"}))
        .await;
    assert_eq!(
        (status, err["error"]["status"].as_str()),
        (404, Some("NOT_FOUND"))
    );
    let id = first["id"].as_str().unwrap();
    let (status, _) = client.call(Method::DELETE, &format!("/{id}"), None).await;
    assert_eq!(status, 200);
    let (status, _) = client
        .create(json!({"model": MODEL, "input": "x", "previous_interaction_id": id}))
        .await;
    assert_eq!(status, 404);
    let (status, _) = client.call(Method::GET, &format!("/{id}"), None).await;
    assert_eq!(status, 404);

    // store: false — answered, not held; a chain to it fails.
    let (status, unstored) = client
        .create(json!({"model": MODEL, "input": "Secret.", "store": false}))
        .await;
    assert_eq!(status, 200);
    let uid = unstored["id"].as_str().unwrap();
    assert!(fake.interaction(uid).is_none());
    let (status, _) = client
        .create(json!({"model": MODEL, "input": "x", "previous_interaction_id": uid}))
        .await;
    assert_eq!(status, 404);
    // Without state a client sends the history itself, as steps.
    let (_, whole) = client
        .create(json!({"model": MODEL, "store": false, "input": [
            {"type": "user_input", "content": [{"type": "text", "text": "One."}]},
            {"type": "model_output", "content": [{"type": "text", "text": "Ok."}]},
            {"type": "user_input", "content": [{"type": "text", "text": "Two."}]}]}))
        .await;
    assert!(output_text(&whole).contains("turns=2 last=Two."), "{whole}");
    // Background needs store; a bad input is refused.
    let (status, _) = client
        .create(json!({"model": MODEL, "input": "x", "store": false, "background": true}))
        .await;
    assert_eq!(status, 400);
    let (status, err) = client
        .create(json!({"model": MODEL, "input": "x", "previousInteractionId": "v1_x"}))
        .await;
    assert_eq!(
        (status, err["error"]["status"].as_str()),
        (400, Some("INVALID_ARGUMENT"))
    );
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("previousInteractionId")
    );
    let (status, err) = client.create(json!({"model": MODEL, "input": 7})).await;
    assert_eq!(
        (status, err["error"]["status"].as_str()),
        (400, Some("INVALID_ARGUMENT"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_background_run_is_polled_cancelled_and_deleted() {
    let fake = FakeGemini::start();
    let client = Client::of(&fake);
    fake.push(Script::text("Deep answer.").delay_headers(Duration::from_secs(3600)));
    let (status, it) = client
        .create(json!({"model": MODEL, "input": "Think long.", "background": true}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(it["status"], "in_progress");
    assert!(it.get("steps").is_none());
    let id = it["id"].as_str().unwrap().to_string();
    let (_, polled) = client.call(Method::GET, &format!("/{id}"), None).await;
    assert_eq!(polled["status"], "in_progress");
    // The fake's clock passes the script's delay: done.
    fake.advance_clock(Duration::from_secs(3601));
    let (_, polled) = client
        .call(Method::GET, &format!("/{id}?include_input=true"), None)
        .await;
    assert_eq!(polled["status"], "completed", "{polled}");
    assert_eq!(output_text(&polled), "Deep answer.");
    assert_eq!(polled["input"][0]["type"], "user_input");
    // Cancel: only while in progress.
    let (status, err) = client
        .call(Method::POST, &format!("/{id}/cancel"), None)
        .await;
    assert_eq!(
        (status, err["error"]["status"].as_str()),
        (400, Some("FAILED_PRECONDITION"))
    );

    fake.push(Script::echo().delay_headers(Duration::from_secs(3600)));
    let (_, run) = client
        .create(json!({"model": MODEL, "input": "Again.", "background": true}))
        .await;
    let rid = run["id"].as_str().unwrap().to_string();
    let (status, cancelled) = client
        .call(Method::POST, &format!("/{rid}/cancel"), None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(cancelled["status"], "cancelled");
    fake.advance_clock(Duration::from_secs(7200));
    assert_eq!(fake.interaction(&rid).unwrap().status(), "cancelled");
    let (status, body) = client.call(Method::DELETE, &format!("/{rid}"), None).await;
    assert_eq!((status, body), (200, json!({})));
    assert!(fake.interaction(&rid).is_none());
    assert_eq!(fake.interaction_requests(InteractionOp::Cancel).len(), 2);
    assert_eq!(fake.interaction_requests(InteractionOp::Delete).len(), 1);
    assert_eq!(fake.interaction_requests(InteractionOp::Get).len(), 2);
    assert!(fake.generate_requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chained_turn_sends_fewer_bytes_than_a_stateless_one_and_is_billed_the_history() {
    let fake = FakeGemini::start();
    let client = Client::of(&fake);
    let text = "fn add(a: u32, b: u32) -> u32 { a - b }\n".repeat(50);
    let (_, first) = client
        .create(json!({"model": MODEL, "input": text.clone()}))
        .await;
    let (_, chained) = client
        .create(
            json!({"model": MODEL, "input": "And now?", "previous_interaction_id": first["id"]}),
        )
        .await;
    let (_, stateless) = client
        .create(json!({"model": MODEL, "store": false, "input": [
            {"type": "user_input", "content": [{"type": "text", "text": text}]},
            {"type": "model_output", "content": [{"type": "text", "text": output_text(&first)}]},
            {"type": "user_input", "content": [{"type": "text", "text": "And now?"}]}]}))
        .await;
    let bytes = fake.interaction_bytes_received();
    assert_eq!(bytes.len(), 3);
    assert!(bytes[1] * 10 < bytes[2], "{bytes:?}");
    // Both turns read the same conversation, and are billed about the same input.
    assert_eq!(output_text(&chained), output_text(&stateless));
    let billed = |v: &Value| v["usage"]["total_input_tokens"].as_u64().unwrap() as i64;
    assert!(
        (billed(&chained) - billed(&stateless)).abs() * 10 < billed(&stateless),
        "{} vs {}",
        billed(&chained),
        billed(&stateless)
    );
}

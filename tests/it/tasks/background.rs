//! A task whose call runs in the background at Google (`research`, a Deep Research run):
//! cancelling the task cancels the run at Google; and the task outlives the instance running
//! it: after that instance is killed, a new instance on the same store takes the task up and
//! polls the same run to its end (no second run is started), and the reply and the thread's
//! turn are those of the call.

use std::time::Duration;

use serde_json::json;

use super::{Env, Modern, TOKEN_A, TOKEN_B, task_id, until};
use crate::research::report;
use crate::support::fake_gemini::InteractionOp;
use crate::support::http::result_text;

const ON: [(&str, &str); 2] = [
    ("GEMINI_MCP_DEEP_RESEARCH", "1"),
    ("GEMINI_MCP_BACKGROUND_POLL_MS", "50"),
];

#[tokio::test]
async fn cancelling_a_research_task_cancels_its_run_at_google() {
    let env = Env::new();
    let server = env.http(&ON).await;
    let client = Modern::new(&server, None, true);
    env.fake.push(report(Duration::from_secs(3600)));
    let id = task_id(
        &client
            .call("research", json!({"question": "Which parser?"}))
            .await,
    );
    assert!(until(20, async || env.fake.interactions().len() == 1).await);
    assert_eq!(env.fake.interactions()[0].status(), "in_progress");
    let ack = client.cancel(&id).await;
    assert!(ack["result"].is_object(), "{ack}");
    assert!(
        until(10, async || env.fake.interactions().is_empty()).await,
        "the run goes on at Google: {} cancels seen; {}",
        env.fake.interaction_requests(InteractionOp::Cancel).len(),
        server.stderr()
    );
    // Cancelled at Google, then deleted there.
    assert_eq!(
        env.fake.interaction_requests(InteractionOp::Cancel).len(),
        1
    );
    let done = client.finished(&id).await;
    assert_eq!(done["result"]["status"], "cancelled", "{done}");
}

#[tokio::test]
async fn a_research_task_outlives_its_instance_and_a_new_one_takes_it_up() {
    let env = Env::new();
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().display().to_string();
    let tokens = format!("{TOKEN_A},{TOKEN_B}");
    let mut vars = ON.to_vec();
    vars.extend([
        ("GEMINI_MCP_STORE", "embedded"),
        ("GEMINI_MCP_STATE_DIR", dir.as_str()),
        ("GEMINI_MCP_HTTP_TOKEN", tokens.as_str()),
    ]);
    let first = env.http(&vars).await;
    let on_first = Modern::new(&first, Some(TOKEN_A), true);
    env.fake.push(report(Duration::from_secs(3600)));
    let id = task_id(
        &on_first
            .call("research", json!({"question": "Which argument parser?"}))
            .await,
    );
    assert!(until(20, async || env.fake.interactions().len() == 1).await);
    let run = env.fake.interactions()[0].id.clone();
    // The record names the run at its next beat (every 500 ms).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    drop(on_first);
    drop(first); // SIGKILL: no drain, no last word.
    let polled = env.fake.interaction_requests(InteractionOp::Get).len();

    let second = env.http(&vars).await;
    let on_second = Modern::new(&second, Some(TOKEN_A), true);
    let seen = on_second.get(&id).await;
    assert_eq!(seen["result"]["status"], "working", "not failed: {seen}");
    // Another client's token neither sees the task nor takes it up, even once it could be.
    let other = Modern::new(&second, Some(TOKEN_B), true);
    tokio::time::sleep(Duration::from_secs(11)).await;
    for answer in [other.get(&id).await, other.cancel(&id).await] {
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        env.fake.interaction_requests(InteractionOp::Get).len(),
        polled,
        "another client's request took the task up"
    );
    assert!(
        env.fake
            .interaction_requests(InteractionOp::Cancel)
            .is_empty()
    );
    // Once the stopped instance's lease lapses (10 s), a tasks/get takes the task up: the new
    // instance polls the same run.
    assert!(
        until(30, async || {
            on_second.get(&id).await;
            env.fake.interaction_requests(InteractionOp::Get).len() > polled
        })
        .await,
        "{}",
        on_second.get(&id).await
    );
    // The run finishes at Google.
    env.fake.advance_clock(Duration::from_secs(3600));
    let done = on_second.finished(&id).await;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    let text = done["result"]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("Use clap 4"), "{done}");
    assert!(text.contains("https://docs.rs/clap/latest/clap/"), "{done}");
    assert_eq!(
        env.fake.interaction_requests(InteractionOp::Create).len(),
        1,
        "no second run was started"
    );
    assert!(
        env.fake
            .interaction_requests(InteractionOp::Get)
            .iter()
            .all(|g| g.path.ends_with(&run)),
        "every poll is of the one run"
    );
    assert!(
        env.fake.interactions().is_empty(),
        "read, the run is deleted"
    );
    // The call's turn was saved once, by the instance that finished it.
    let next = on_second
        .call(
            "chat",
            json!({"prompt": "And for a daemon?", "continuation_id": "latest"}),
        )
        .await;
    let next = on_second.finished(&task_id(&next)).await;
    assert_eq!(next["result"]["status"], "completed", "{next}");
    let history = env
        .fake
        .generate_requests()
        .last()
        .unwrap()
        .body
        .to_string();
    assert_eq!(history.matches("Use clap 4").count(), 1, "{history}");
    let _ = result_text(&next);
}

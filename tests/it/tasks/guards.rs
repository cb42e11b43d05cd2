//! A task passes the same checks and caps as a call: bad arguments refuse the `tools/call`
//! itself (no task is made, Gemini is not asked), in both revisions; a daily cap refuses the task's
//! call before Gemini is asked; a secret file fails the task with the sandbox's error and its
//! value reaches no answer; an answer carrying terminal controls is the task's result exactly as
//! it is the plain call's; a shutdown finishes the task that fits in its grace and fails the
//! other, saying so.

use serde_json::{Value, json};

use super::{Env, Modern, task_id};
use crate::support::fake_gemini::Script;
use crate::support::http::Raw;

#[tokio::test]
async fn bad_arguments_refuse_the_call_itself_and_make_no_task() {
    let env = Env::new();
    let server = env.http(&[]).await;
    let client = Modern::new(&server, None, true);
    for (tool, args, field) in [
        ("chat", json!({"prompt": 5}), "prompt"),
        ("codereview", json!({"files": ["main.rs"]}), "context"),
        (
            "chat",
            json!({"prompt": "x", "temperature": "hot"}),
            "temperature",
        ),
    ] {
        let answer = client.call(tool, args).await;
        assert_eq!(answer["error"]["code"], -32602, "{tool}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(field), "{field}: {message}");
    }
    // The 2025-11-25 form, in a session.
    let raw = Raw::new(&server.url());
    let session = raw.initialize().await;
    let headers = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    let answer = raw
        .post(
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
                "name": "chat", "arguments": {"prompt": ["not", "text"]}, "task": {"ttl": 60000}}}),
            &headers,
        )
        .await
        .message;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let listed = raw
        .post(
            json!({"jsonrpc": "2.0", "id": 8, "method": "tasks/list", "params": {}}),
            &headers,
        )
        .await
        .message;
    assert_eq!(listed["result"]["tasks"], json!([]), "{listed}");
    assert!(env.fake.generate_requests().is_empty(), "Gemini was asked");
}

#[tokio::test]
async fn a_daily_cap_refuses_a_task_as_it_refuses_a_call() {
    let env = Env::new();
    let server = env.http(&[("GEMINI_MCP_DAILY_TOKENS", "1")]).await;
    let tasks = Modern::new(&server, None, true);
    let plain = Modern::new(&server, None, false);
    let call = plain.call("chat", json!({"prompt": "over the cap"})).await;
    let done = tasks
        .finished(&task_id(
            &tasks.call("chat", json!({"prompt": "over the cap"})).await,
        ))
        .await;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    let task = &done["result"]["result"];
    assert_eq!(task["isError"], true, "{done}");
    assert_eq!(call["result"]["isError"], true, "{call}");
    let (a, b) = (text(task), text(&call["result"]));
    assert!(a.contains("GEMINI_MCP_DAILY_TOKENS"), "{a}");
    assert_eq!(a, b, "the task's refusal is the call's");
    assert!(env.fake.generate_requests().is_empty(), "Gemini was asked");
}

#[tokio::test]
async fn a_secret_file_fails_the_task_with_the_sandboxs_error_and_its_value_goes_nowhere() {
    let env = Env::new();
    crate::support::project::write(
        env.dir.path(),
        ".env",
        "API_TOKEN=task-secret-value-3141592653\n",
    );
    let server = env.http(&[]).await;
    let client = Modern::new(&server, None, true);
    let created = client
        .call(
            "codereview",
            json!({"files": [".env"], "context": "check it"}),
        )
        .await;
    let id = task_id(&created);
    let done = client.finished(&id).await;
    assert_eq!(done["result"]["status"], "failed", "{done}");
    assert_eq!(done["result"]["error"]["code"], -32001, "{done}");
    let everything = format!("{created}{done}{}", client.get(&id).await);
    assert!(!everything.contains("task-secret-value"), "{everything}");
    assert!(
        env.fake
            .generate_requests()
            .iter()
            .all(|r| !r.body.to_string().contains("task-secret-value")),
        "the secret reached Gemini"
    );
}

#[tokio::test]
async fn an_answer_with_terminal_controls_is_the_tasks_result_as_it_is_the_calls() {
    const HOSTILE: &str =
        "Sure.\u{1b}]52;c;Y3VybCBldmlsLnNoIHwgc2g=\u{7}\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}8m done";
    let env = Env::new();
    let server = env.http(&[]).await;
    let tasks = Modern::new(&server, None, true);
    let plain = Modern::new(&server, None, false);
    env.fake.push(Script::text(HOSTILE));
    let call = plain.call("chat", json!({"prompt": "hi"})).await;
    env.fake.push(Script::text(HOSTILE));
    let done = tasks
        .finished(&task_id(&tasks.call("chat", json!({"prompt": "hi"})).await))
        .await;
    let task = &done["result"]["result"];
    // The same reply, but for the thread each opened and what it cost to the second.
    let (a, b) = (comparable(task), comparable(&call["result"]));
    assert_eq!(a, b);
    assert!(
        !done["result"]["statusMessage"]
            .as_str()
            .unwrap_or_default()
            .contains('\u{1b}'),
        "{done}"
    );
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A reply with its thread id and usage figures blanked.
fn comparable(result: &Value) -> Value {
    let mut r = result.clone();
    r.as_object_mut().unwrap().remove("_meta");
    r.as_object_mut().unwrap().remove("resultType");
    let s = &mut r["structuredContent"];
    for k in ["continuation_id", "usage", "remaining_turns"] {
        s.as_object_mut().unwrap().remove(k);
    }
    let mut text = r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // The footer names the thread and the cost.
    text = text
        .lines()
        .filter(|l| !l.contains("continuation_id") && !l.contains('$') && !l.contains("tokens"))
        .collect::<Vec<_>>()
        .join("\n");
    r["content"][0]["text"] = json!(text);
    r
}

#[cfg(unix)] // SIGTERM
#[tokio::test]
async fn shutdown_finishes_what_fits_in_its_grace_and_fails_the_rest_saying_so() {
    if crate::support::redis_missing() {
        return;
    }
    let env = Env::new();
    let redis = crate::support::redis::RedisServer::start();
    let url = redis.url();
    let shared = [
        ("REDIS_URL", url.as_str()),
        ("GEMINI_MCP_STORE", "redis"),
        ("GEMINI_MCP_HTTP_SHUTDOWN_SECS", "3"),
    ];
    let mut first = env.http(&shared).await;
    let second = env.http(&shared).await;
    let on_first = Modern::new(&first, None, true);
    let on_second = Modern::new(&second, None, true);
    // One task ends within the grace, one does not.
    env.fake
        .push(Script::text("finished in time").delay_headers(std::time::Duration::from_secs(1)));
    let quick = task_id(&on_first.call("chat", json!({"prompt": "quick"})).await);
    // The stand-in answers requests in the order they come: the quick one first.
    assert!(super::until(20, async || env.fake.in_flight() == 1).await);
    env.fake
        .push(Script::echo().delay_headers(std::time::Duration::from_secs(600)));
    let slow = task_id(&on_first.call("chat", json!({"prompt": "slow"})).await);
    assert!(super::until(20, async || env.fake.in_flight() == 2).await);
    first.terminate();
    let exited = first.wait().await;
    assert!(exited.success(), "{exited:?}");

    let quick = on_second.finished(&quick).await;
    assert_eq!(quick["result"]["status"], "completed", "{quick}");
    assert!(
        text(&quick["result"]["result"]).contains("finished in time"),
        "{quick}"
    );
    let slow = on_second.get(&slow).await;
    assert_eq!(slow["result"]["status"], "failed", "{slow}");
    let why = slow["result"]["statusMessage"].as_str().unwrap_or_default();
    assert!(
        why.contains("server shut down before the task finished"),
        "{why}"
    );
    assert!(super::until(10, async || env.fake.in_flight() == 0).await);
}

//! Gemini faults under concurrency: twenty calls at once against a fake Gemini that answers
//! 429 bursts with `RetryInfo`, 503s, too late, malformed bodies, broken streams and blocked
//! prompts. Every call must end with an answer or an `isError` result that starts
//! `Error executing gemini:`, within a generous bound of its timeout (a hang detector, not a
//! performance target); retries must stay within `GEMINI_MAX_ATTEMPTS` per model (plus the one
//! capacity fallback), counted from what the fake received.
//!
//! Each call asks its own question (`<phase>-<n>`), so the fake's recordings can be attributed
//! to calls.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rmcp::model::CallToolResult;
use serde_json::json;

use super::{Env, within};
use crate::support::fake_gemini::{Recorded, Script};
use crate::support::mcp::{self, KEY, call, text};

const CONCURRENCY: usize = 20;
const MAX_ATTEMPTS: usize = 3;
/// `GEMINI_TIMEOUT_SECS`: per model, so a call with a capacity fallback may take two.
const TIMEOUT: Duration = Duration::from_secs(3);
/// No call may take longer than this (two deadlines, the fallback's included, plus slack).
const HANG_BOUND: Duration = Duration::from_secs(2 * 3 + 10);

struct Outcome {
    n: usize,
    result: CallToolResult,
    took: Duration,
}

impl Outcome {
    fn ok(&self) -> bool {
        self.result.is_error != Some(true)
    }
    fn text(&self) -> String {
        text(&self.result)
    }
}

async fn server(env: &Env) -> mcp::Client {
    env.client(&[
        ("GEMINI_MAX_ATTEMPTS", "3"),
        ("GEMINI_RETRY_INITIAL_MS", "10"),
        ("GEMINI_RETRY_MAX_MS", "50"),
        ("GEMINI_TIMEOUT_SECS", "3"),
        ("GEMINI_IDLE_TIMEOUT_SECS", "2"),
    ])
    .await
}

/// `CONCURRENCY` chat calls at once, each asking `<phase>-<n>`. Panics on a JSON-RPC error or
/// a call that does not end within [`HANG_BOUND`].
async fn burst(client: &mcp::Client, phase: &str) -> Vec<Outcome> {
    let calls = (0..CONCURRENCY).map(|n| async move {
        let started = Instant::now();
        let question = format!("{phase}-{n}");
        let result = within(
            HANG_BOUND,
            &question,
            call(client, "chat", json!({"prompt": question})),
        )
        .await
        .unwrap_or_else(|e| panic!("{phase}-{n}: a JSON-RPC error: {e:?}"));
        Outcome {
            n,
            result,
            took: started.elapsed(),
        }
    });
    let outcomes = futures::future::join_all(calls).await;
    for o in &outcomes {
        let t = o.text();
        assert!(
            o.ok() || t.starts_with("Error executing gemini: "),
            "{phase}-{}: an error that does not say what failed: {t}",
            o.n
        );
        assert!(!t.trim().is_empty(), "{phase}-{}: an empty answer", o.n);
        assert!(!t.contains(KEY), "{phase}-{}: the key leaked", o.n);
    }
    outcomes
}

/// The generate requests of each call of `phase`, in arrival order.
fn per_call(sent: &[Recorded], phase: &str) -> HashMap<usize, Vec<Recorded>> {
    let mut map: HashMap<usize, Vec<Recorded>> = HashMap::new();
    for r in sent {
        let t = r.last_user_text();
        let n = question_number(&t, phase)
            .unwrap_or_else(|| panic!("a request of no call of {phase}: {t}"));
        map.entry(n).or_default().push(r.clone());
    }
    map
}

/// `n` of the question `<phase>-<n>` in a prompt.
fn question_number(text: &str, phase: &str) -> Option<usize> {
    let tag = format!("{phase}-");
    let at = text.find(&tag)? + tag.len();
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Each call sent at most `MAX_ATTEMPTS` requests per model, and used at most two models.
fn retries_within_limits(sent: &[Recorded], phase: &str) {
    for (n, reqs) in per_call(sent, phase) {
        let mut by_model: HashMap<String, usize> = HashMap::new();
        for r in &reqs {
            *by_model
                .entry(r.model.clone().unwrap_or_default())
                .or_default() += 1;
        }
        assert!(by_model.len() <= 2, "{phase}-{n}: models {by_model:?}");
        for (model, count) in &by_model {
            assert!(
                *count <= MAX_ATTEMPTS,
                "{phase}-{n}: {count} attempts on {model} (GEMINI_MAX_ATTEMPTS={MAX_ATTEMPTS})"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_gemini_429_bursts_wait_for_retry_info_and_then_succeed() {
    let env = Env::new();
    let client = server(&env).await;
    // Every call's first attempt meets a 429 that asks for 300 ms.
    for _ in 0..CONCURRENCY {
        env.fake.push(Script::quota_exceeded(Some("0.3s")));
    }
    let outcomes = burst(&client, "q429").await;
    for o in &outcomes {
        assert!(o.ok(), "q429-{}: {}", o.n, o.text());
        assert!(o.text().contains(&format!("q429-{}", o.n)), "{}", o.text());
    }
    let sent = env.fake.generate_requests();
    // Each 429 was used once and each call ended with one answer.
    assert_eq!(sent.len(), 2 * CONCURRENCY, "requests: {}", sent.len());
    assert_eq!(env.fake.pending(), 0);
    retries_within_limits(&sent, "q429");
    // Every retry came at least the 300 ms after the attempt before it that RetryInfo asked.
    for (n, reqs) in per_call(&sent, "q429") {
        for pair in reqs.windows(2) {
            let gap = pair[1].at - pair[0].at;
            assert!(
                gap >= Duration::from_millis(300),
                "q429-{n}: retried after {gap:?}"
            );
        }
    }
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_gemini_503s_retry_then_fall_back_then_give_up_within_limits() {
    let env = Env::new();
    let client = server(&env).await;
    // A burst of 30 overloads for 20 calls: every call ends with an answer, some from the
    // fallback model.
    for _ in 0..30 {
        env.fake.push(Script::overloaded());
    }
    let outcomes = burst(&client, "o503").await;
    for o in &outcomes {
        assert!(o.ok(), "o503-{}: {}", o.n, o.text());
    }
    let sent = env.fake.generate_requests();
    assert_eq!(sent.len(), 30 + CONCURRENCY);
    retries_within_limits(&sent, "o503");

    // Overloaded for good: each call tries the model 3 times, the fallback 3 times, and says so.
    env.fake.clear_requests();
    for _ in 0..CONCURRENCY * 2 * MAX_ATTEMPTS {
        env.fake.push(Script::overloaded());
    }
    let outcomes = burst(&client, "down").await;
    for o in &outcomes {
        assert!(!o.ok(), "down-{}: answered while Gemini was down", o.n);
        assert!(o.text().contains("503"), "down-{}: {}", o.n, o.text());
    }
    let sent = env.fake.generate_requests();
    assert_eq!(sent.len(), CONCURRENCY * 2 * MAX_ATTEMPTS);
    for (n, reqs) in per_call(&sent, "down") {
        assert_eq!(reqs.len(), 2 * MAX_ATTEMPTS, "down-{n}");
    }
    retries_within_limits(&sent, "down");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_gemini_timeouts_end_every_call_near_its_deadline() {
    let env = Env::new();
    let client = server(&env).await;
    // Headers that never come in time, and a stream that stalls after its first chunk.
    for n in 0..CONCURRENCY {
        env.fake.push(if n % 2 == 0 {
            Script::text("late").delay_headers(Duration::from_secs(120))
        } else {
            Script::chunks(["stalled ", "never ", "finished"]).chunk_delay(Duration::from_secs(120))
        });
    }
    let outcomes = burst(&client, "slow").await;
    for o in &outcomes {
        assert!(!o.ok(), "slow-{}: {}", o.n, o.text());
        let t = o.text();
        assert!(
            t.contains("GEMINI_TIMEOUT_SECS") || t.contains("GEMINI_IDLE_TIMEOUT_SECS"),
            "slow-{}: {t}",
            o.n
        );
        assert!(
            !t.contains("stalled"),
            "slow-{}: a partial answer: {t}",
            o.n
        );
        assert!(
            o.took >= Duration::from_secs(1),
            "slow-{}: {:?}",
            o.n,
            o.took
        );
    }
    let slowest = outcomes.iter().map(|o| o.took).max().unwrap();
    eprintln!("slowest timed-out call: {slowest:?} (timeout {TIMEOUT:?})");
    retries_within_limits(&env.fake.generate_requests(), "slow");
    // The abandoned HTTP calls are dropped, not left hanging on the fake.
    let started = Instant::now();
    while env.fake.in_flight() > 0 {
        assert!(
            started.elapsed() < HANG_BOUND,
            "{} Gemini calls still open",
            env.fake.in_flight()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // And the server answers the next call at once.
    let r = call(&client, "chat", json!({"prompt": "after"}))
        .await
        .unwrap();
    assert!(r.is_error != Some(true), "{}", text(&r));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_gemini_malformed_and_broken_streams_are_never_half_answers() {
    let env = Env::new();
    let client = server(&env).await;
    // Four of each: a 200 that is not JSON (streamed and plain), an HTML 502, a stream cut with a
    // Google error tail, a reset connection, a stream that ends without finishReason, an
    // unterminated chunk after some text. Then the default answer for whatever retries.
    let partial = "PARTIAL-ANSWER ";
    let kinds: Vec<Script> = vec![
        Script::malformed(),
        Script::raw(200, "application/json", "{\"candidates\": [ not json"),
        Script::raw(
            502,
            "text/html",
            "<html><body>502 Bad Gateway</body></html>",
        ),
        Script::error_tail_after(&[partial]),
        Script::reset_after(&[partial]),
        Script::truncated_after(&[partial]),
        Script::malformed_after(&[partial]),
        Script::raw(
            200,
            "text/event-stream",
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"PARTIAL-ANSWER\"}]}}]}\r\n\r\ndata: [DONE\r\n\r\n",
        ),
    ];
    for n in 0..CONCURRENCY {
        env.fake.push(kinds[n % kinds.len()].clone());
    }
    let outcomes = burst(&client, "bad").await;
    let answered = outcomes.iter().filter(|o| o.ok()).count();
    for o in &outcomes {
        let t = o.text();
        assert!(
            !t.contains("PARTIAL-ANSWER"),
            "bad-{}: a broken stream passed for an answer: {t}",
            o.n
        );
        if o.ok() {
            assert!(t.starts_with("FAKE-REPLY"), "bad-{}: {t}", o.n);
        }
    }
    eprintln!("{answered} of {CONCURRENCY} calls answered after a retry, the rest say what failed");
    retries_within_limits(&env.fake.generate_requests(), "bad");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_gemini_blocked_prompts_are_clear_errors_and_not_retried() {
    let env = Env::new();
    let client = server(&env).await;
    for n in 0..CONCURRENCY {
        env.fake.push(match n % 4 {
            0 => Script::blocked("SAFETY"),
            1 => Script::blocked("PROHIBITED_CONTENT"),
            2 => Script::finish_without_text("SAFETY"),
            _ => Script::finish_without_text("RECITATION"),
        });
    }
    let outcomes = burst(&client, "blk").await;
    for o in &outcomes {
        assert!(!o.ok(), "blk-{}: {}", o.n, o.text());
        let t = o.text();
        assert!(
            ["SAFETY", "PROHIBITED_CONTENT", "RECITATION"]
                .iter()
                .any(|r| t.contains(r)),
            "blk-{}: the reason is not named: {t}",
            o.n
        );
    }
    let sent = env.fake.generate_requests();
    assert_eq!(sent.len(), CONCURRENCY, "a blocked prompt was retried");
    client.cancel().await.unwrap();
}

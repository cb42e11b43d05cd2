//! Redis faults under load: two server processes on one redis-server take concurrent turns on
//! shared threads while redis-server is killed (SIGKILL) and restarted on the same port.
//!
//! "No thread loses an acknowledged turn" is tested as: every call that got a success reply
//! whose `continuation_id` is its thread (the server's acknowledgement that the turn was
//! stored; when saving fails the reply has no `continuation_id`) has its turn in that thread
//! afterwards, exactly once. Redis runs with `appendfsync always`, so what it acknowledged
//! survives its own crash; what is tested is that the server acknowledges only what Redis
//! acknowledged. Calls during the outage must end (a clear `isError` naming Redis, or an
//! answer that says it could not be saved) within a hang bound, and the servers must work
//! again once Redis is back, without a restart.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gemini_mcp_server::config::{Config, Secret, StoreChoice};
use gemini_mcp_server::store::{self, ThreadId};
use serde_json::{Value, json};

use super::{Env, long_tests, within};
use crate::support::mcp::{self, call, text};
use crate::support::redis::RedisServer;

const THREADS: usize = 6;
const WORKERS_PER_SERVER: usize = 4;
const HANG_BOUND: Duration = Duration::from_secs(40);
const PREFIX: &str = "hard";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Before,
    Outage,
    After,
}

#[derive(Debug)]
struct Attempt {
    thread: usize,
    prompt: String,
    phase: Phase,
    acked: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_redis_killed_mid_load_loses_no_acknowledged_turn() {
    let run_for = if long_tests() {
        Duration::from_secs(10)
    } else {
        Duration::from_millis(1500)
    };
    let env = Env::new();
    if crate::support::redis_missing() {
        return;
    }
    let redis = RedisServer::start_persistent();
    let url = redis.url();
    let base = env.fake.base_url();
    let vars = env.vars(
        &base,
        &[
            ("GEMINI_MCP_STORE", "redis"),
            ("REDIS_URL", url.as_str()),
            ("GEMINI_MCP_KEY_PREFIX", PREFIX),
            ("MAX_CONVERSATION_TURNS", "1000"),
            // The outage is expected: keep its warnings out of the test output.
            ("GEMINI_MCP_LOG", "error"),
        ],
    );
    let servers = [
        mcp::start(env.root(), &vars).await,
        mcp::start(env.root(), &vars).await,
    ];

    // The threads, one first turn each (acknowledged, so it counts too).
    let mut ids = Vec::new();
    let attempts = Mutex::new(Vec::new());
    for t in 0..THREADS {
        let prompt = format!("thread {t} opening");
        let r = call(&servers[t % 2], "chat", json!({"prompt": prompt}))
            .await
            .unwrap();
        let id = r.structured_content.as_ref().unwrap()["continuation_id"]
            .as_str()
            .expect("a thread id")
            .to_string();
        ids.push(id);
        attempts.lock().unwrap().push(Attempt {
            thread: t,
            prompt,
            phase: Phase::Before,
            acked: true,
        });
    }

    let phase = Mutex::new(Phase::Before);
    let stop = AtomicBool::new(false);
    let worker = |server: usize, w: usize| {
        let (servers, ids, attempts, phase, stop) = (&servers, &ids, &attempts, &phase, &stop);
        async move {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let t = (w + i) % THREADS;
                let prompt = format!("turn s{server}-w{w}-i{i} on thread {t}");
                let started_in = *phase.lock().unwrap();
                let r = within(
                    HANG_BOUND,
                    &prompt,
                    call(
                        &servers[server],
                        "chat",
                        json!({"prompt": prompt, "continuation_id": ids[t]}),
                    ),
                )
                .await
                .unwrap_or_else(|e| panic!("{prompt}: JSON-RPC error {e:?}"));
                let ended_in = *phase.lock().unwrap();
                let s = r.structured_content.clone().unwrap_or(Value::Null);
                let acked = r.is_error != Some(true) && s["continuation_id"] == ids[t].as_str();
                if !acked {
                    let msg = text(&r);
                    assert!(
                        msg.contains("Redis"),
                        "{prompt}: a failure that does not name Redis: {msg}"
                    );
                    assert!(
                        started_in == Phase::Outage || ended_in != Phase::Before,
                        "{prompt}: failed while Redis was up: {msg}"
                    );
                }
                // Calls that straddle a change of phase count as outage calls.
                let p = if started_in == ended_in {
                    started_in
                } else {
                    Phase::Outage
                };
                attempts.lock().unwrap().push(Attempt {
                    thread: t,
                    prompt,
                    phase: p,
                    acked,
                });
                i += 1;
            }
        }
    };
    let workers = futures::future::join_all(
        (0..2)
            .flat_map(|s| (0..WORKERS_PER_SERVER).map(move |w| (s, w)))
            .map(|(s, w)| worker(s, w)),
    );
    let control = async {
        tokio::time::sleep(run_for).await;
        *phase.lock().unwrap() = Phase::Outage;
        let mut redis = tokio::task::spawn_blocking(move || {
            let mut redis = redis;
            redis.kill();
            redis
        })
        .await
        .unwrap();
        tokio::time::sleep(run_for).await;
        redis = tokio::task::spawn_blocking(move || {
            redis.restart();
            redis
        })
        .await
        .unwrap();
        // The first calls after the restart may still meet the old connections.
        tokio::time::sleep(Duration::from_millis(500)).await;
        *phase.lock().unwrap() = Phase::After;
        tokio::time::sleep(run_for).await;
        stop.store(true, Ordering::SeqCst);
        redis
    };
    let ((), redis) = tokio::join!(
        async {
            workers.await;
        },
        control
    );

    let attempts = attempts.into_inner().unwrap();
    let count = |p: Phase, acked: bool| {
        attempts
            .iter()
            .filter(|a| a.phase == p && a.acked == acked)
            .count()
    };
    eprintln!(
        "turns acknowledged/failed: before {}/{}, outage {}/{}, after {}/{}",
        count(Phase::Before, true),
        count(Phase::Before, false),
        count(Phase::Outage, true),
        count(Phase::Outage, false),
        count(Phase::After, true),
        count(Phase::After, false)
    );
    assert!(
        count(Phase::Before, true) > THREADS,
        "no load before the kill"
    );
    assert!(
        count(Phase::After, true) > 0,
        "the servers did not recover after Redis came back"
    );
    assert_eq!(count(Phase::After, false), 0, "failures after recovery");
    assert!(
        count(Phase::Outage, false) > 0,
        "no call noticed the outage: the kill was not exercised"
    );

    // Read every thread back from Redis (through the store the servers use).
    let dir = tempfile::tempdir().unwrap();
    let mut c = Config::for_tests(dir.path());
    c.threads.store = StoreChoice::Redis;
    c.threads.redis_url = Some(Secret::new(redis.url()));
    c.threads.key_prefix = PREFIX.into();
    c.threads.max_turns = 1000;
    let store = store::open(&c.threads()).await.unwrap();
    let mut stored: HashMap<usize, Vec<String>> = HashMap::new();
    for (t, id) in ids.iter().enumerate() {
        let thread = store.load(id.parse::<ThreadId>().unwrap()).await.unwrap();
        stored.insert(
            t,
            thread.turns.into_iter().map(|turn| turn.request).collect(),
        );
    }
    let mut lost = Vec::new();
    for a in attempts.iter().filter(|a| a.acked) {
        let turns = &stored[&a.thread];
        let n = turns.iter().filter(|r| r.contains(&a.prompt)).count();
        if n == 0 {
            lost.push(a);
        }
        assert!(n <= 1, "{}: stored {n} times", a.prompt);
    }
    assert!(lost.is_empty(), "acknowledged turns lost: {lost:#?}");
    // Nothing was stored that was not attempted.
    for (t, turns) in &stored {
        for r in turns {
            assert!(
                attempts
                    .iter()
                    .any(|a| a.thread == *t && r.contains(&a.prompt)),
                "thread {t}: a turn nobody sent: {r}"
            );
        }
    }
    let started = Instant::now();
    for s in servers {
        s.cancel().await.unwrap();
    }
    assert!(started.elapsed() < HANG_BOUND);
}

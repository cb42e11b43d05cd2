//! 1,000 concurrent MCP sessions over HTTP (issue 31's load profile): the release binary serving
//! Streamable HTTP, the tests' fake Gemini answering every call after 2 s.
//!
//! A session is what a 2025-06-18 client (the Gemini CLI) does: `initialize` (the server answers
//! with an `Mcp-Session-Id`), `notifications/initialized`, one `tools/call` `chat` that the fake
//! holds 2 s, and at the end of the round `DELETE` (the client closing it). Each session has its
//! own bearer token by default (one client each, as the README advises), so the per-client
//! limits stay at their defaults; `--one-token` sends every session with one token and raises
//! those limits instead (they would bind: see below).
//!
//! Reported:
//! - memory: the server's RSS idle, after its first call (tokenizer loaded), with every session
//!   open and idle, and at its peak with every session's call in flight (sampled every 10 ms,
//!   and VmHWM reset through `clear_refs`); per session = (that − after the first call) ÷ N;
//! - open descriptors at the peak, and the fake's calls in flight at once (so that the N calls
//!   are known to have been in flight together);
//! - per timed round, interleaved with the baseline (the same N requests sent by the same
//!   client straight to the fake, all at once, so both see the same load): each step's latency,
//!   and the overhead of each call = its latency through the server minus the latency of the
//!   same request (same index, same body) sent directly in the same round;
//! - the server's CPU per session (user + system over the timed rounds), the errors (any
//!   non-2xx answer, JSON-RPC error or `isError` result; must be 0), and with `--redis` the
//!   Redis commands per session (`INFO commandstats` before and after the timed rounds).
//!
//! ```sh
//! cargo build --release --bin gemini-mcp
//! cargo bench --bench http_sessions -- [SESSIONS] [--rounds R] [--redis] [--one-token] [--nofile N]
//! ```
//!
//! `--nofile N` runs the server with `prlimit --nofile=N:N`, to see where descriptors bind.
//! The server's limits: with one token per session, the defaults hold (chat 10/min per client:
//! each client makes R + 1 calls, so R ≤ 9; 16 calls and 32 sessions in flight per client).

#[path = "../tests/it/support/fake_gemini/mod.rs"]
mod fake_gemini;
#[path = "../tests/it/support/redis/mod.rs"]
#[allow(dead_code, unused_imports)] // Shared with the tests; this bench uses one server only.
mod redis;
#[path = "support/served.rs"]
mod served;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fake_gemini::{FakeGemini, Script};
use serde_json::{Value, json};
use served::{cpu_ms, fds, ms, percentile, reset_peak, rss};

/// How long the fake holds every generate call.
const DELAY: Duration = Duration::from_secs(2);
/// The protocol version of a client with sessions.
const PROTOCOL: &str = "2025-06-18";

struct Args {
    sessions: usize,
    rounds: usize,
    redis: bool,
    one_token: bool,
    nofile: Option<u64>,
}

fn args() -> Args {
    let all: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let after = |flag: &str| {
        all.iter()
            .position(|a| a == flag)
            .and_then(|i| all.get(i + 1))
            .map(|v| v.parse::<u64>().expect("a number after the flag"))
    };
    let valued = ["--rounds", "--nofile"];
    let sessions = all
        .iter()
        .enumerate()
        .filter(|(i, _)| *i == 0 || !valued.contains(&all[i - 1].as_str()))
        .find_map(|(_, a)| a.parse().ok())
        .unwrap_or(1000);
    Args {
        sessions,
        rounds: after("--rounds").unwrap_or(3) as usize,
        redis: all.iter().any(|a| a == "--redis"),
        one_token: all.iter().any(|a| a == "--one-token"),
        nofile: after("--nofile"),
    }
}

/// The client side: one reqwest client, the server's and the fake's addresses, the tokens.
struct Target {
    http: reqwest::Client,
    url: String,
    base: String,
    tokens: Vec<String>,
}

/// An answer: status, `Mcp-Session-Id` if any, body.
type Answer = (u16, Option<String>, String);

impl Target {
    fn token(&self, i: usize) -> &str {
        &self.tokens[i % self.tokens.len()]
    }

    async fn post(&self, i: usize, session: Option<&str>, body: Value) -> Result<Answer, String> {
        let mut req = self
            .http
            .post(&self.url)
            .bearer_auth(self.token(i))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(s) = session {
            req = req
                .header("mcp-session-id", s)
                .header("mcp-protocol-version", PROTOCOL);
        }
        let resp = req.send().await.map_err(|e| format!("{e:?}"))?;
        let status = resp.status().as_u16();
        let id = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        let text = resp.text().await.map_err(|e| format!("{e:?}"))?;
        Ok((status, id, text))
    }

    /// `initialize` and `notifications/initialized`: the session id and each step's latency.
    async fn open(&self, i: usize) -> Result<(String, Duration, Duration), String> {
        let start = Instant::now();
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "http-sessions-bench", "version": "0"}}});
        let (status, id, text) = self.post(i, None, init).await?;
        let Some(session) = id.filter(|_| status == 200 && text.contains("\"result\"")) else {
            return Err(format!("initialize: {status}: {text}"));
        };
        let init = start.elapsed();
        let start = Instant::now();
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let (status, _, text) = self.post(i, Some(&session), note).await?;
        if status != 202 {
            return Err(format!("notifications/initialized: {status}: {text}"));
        }
        Ok((session, init, start.elapsed()))
    }

    /// One `tools/call` `chat` in the session.
    async fn call(&self, i: usize, session: &str) -> Result<Duration, String> {
        let start = Instant::now();
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "chat", "arguments": {"prompt": prompt(i)}}});
        let (status, _, text) = self.post(i, Some(session), body).await?;
        let elapsed = start.elapsed();
        let v = message(&text).ok_or_else(|| format!("{status}: {text}"))?;
        if status != 200 || v["result"].is_null() || v["result"]["isError"] == true {
            return Err(format!("tools/call: {status}: {text}"));
        }
        Ok(elapsed)
    }

    /// `DELETE /mcp`: the client ends its session.
    async fn close(&self, i: usize, session: &str) -> Result<(), String> {
        let resp = self
            .http
            .delete(&self.url)
            .bearer_auth(self.token(i))
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", PROTOCOL)
            .send()
            .await
            .map_err(|e| format!("{e:?}"))?;
        let status = resp.status();
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            return Err(format!("DELETE: {status}: {text}"));
        }
        Ok(())
    }

    /// The same request's Gemini call sent to the fake directly.
    async fn direct(&self, i: usize) -> Result<Duration, String> {
        let start = Instant::now();
        let body = json!({"contents": [{"role": "user", "parts": [{"text": prompt(i)}]}]});
        let resp = self
            .http
            .post(format!(
                "{}/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse",
                self.base
            ))
            .header("x-goog-api-key", "bench-key")
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("{e:?}"))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| format!("{e:?}"))?;
        if !status.is_success() || !text.contains("FAKE-REPLY") {
            return Err(format!("direct: {status}: {text}"));
        }
        Ok(start.elapsed())
    }
}

/// The JSON-RPC answer in a body: the body itself (JSON), or the SSE event holding a `result`
/// or an `error` (a session's requests are answered on an event stream).
fn message(text: &str) -> Option<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        return Some(v);
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("result").is_some() || v.get("error").is_some())
}

fn prompt(i: usize) -> String {
    format!("bench session {i}")
}

/// Runs `f(i)` for every `i < n` at once; the results in order of `i`.
async fn all<T, F, Fut>(n: usize, f: F) -> Vec<Result<T, String>>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Result<T, String>> + Send + 'static,
{
    let tasks: Vec<_> = (0..n).map(|i| tokio::spawn(f(i))).collect();
    let mut out = Vec::with_capacity(n);
    for t in tasks {
        out.push(t.await.unwrap_or_else(|e| Err(format!("task: {e}"))));
    }
    out
}

/// The errors of a burst, counted and the first few kept; the successes.
#[derive(Default)]
struct Errors {
    count: usize,
    first: Vec<String>,
}

impl Errors {
    fn keep<T>(&mut self, results: Vec<Result<T, String>>) -> Vec<Option<T>> {
        results
            .into_iter()
            .map(|r| match r {
                Ok(v) => Some(v),
                Err(e) => {
                    self.count += 1;
                    if self.first.len() < 5 {
                        self.first.push(e);
                    }
                    None
                }
            })
            .collect()
    }
}

/// The most seen while a sampler ran: RSS (MB), open descriptors, the fake's calls in flight.
#[derive(Default, Clone, Copy)]
struct Peak {
    rss_mb: f64,
    fds: usize,
    in_flight: usize,
}

/// Samples the server every 10 ms on its own thread until `stop`.
fn sampler(
    pid: u32,
    fake: Arc<FakeGemini>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Peak> {
    std::thread::spawn(move || {
        let mut peak = Peak::default();
        while !stop.load(Ordering::Relaxed) {
            peak.rss_mb = peak.rss_mb.max(rss(pid).0);
            peak.fds = peak.fds.max(fds(pid));
            peak.in_flight = peak.in_flight.max(fake.in_flight());
            std::thread::sleep(Duration::from_millis(10));
        }
        peak
    })
}

/// Memory with every session open, then with every call in flight: (RSS with the sessions
/// open and idle, the peak while their calls run).
async fn memory_round(
    t: &Arc<Target>,
    n: usize,
    pid: u32,
    fake: &Arc<FakeGemini>,
    errors: &mut Errors,
) -> (f64, Peak) {
    let opened = all(n, |i| {
        let t = t.clone();
        async move { t.open(i).await.map(|(s, _, _)| s) }
    })
    .await;
    let sessions = errors.keep(opened);
    std::thread::sleep(Duration::from_millis(300));
    let open_mb = rss(pid).0;
    let reset = reset_peak(pid);
    let stop = Arc::new(AtomicBool::new(false));
    let watch = sampler(pid, fake.clone(), stop.clone());
    let sessions = Arc::new(sessions);
    let calls = all(n, |i| {
        let (t, sessions) = (t.clone(), sessions.clone());
        async move {
            match &sessions[i] {
                Some(s) => t.call(i, s).await,
                None => Err("no session".into()),
            }
        }
    })
    .await;
    errors.keep(calls);
    stop.store(true, Ordering::Relaxed);
    let mut peak = watch.join().unwrap_or_default();
    if reset {
        peak.rss_mb = peak.rss_mb.max(rss(pid).1);
    }
    close_all(t, &sessions, errors).await;
    (open_mb, peak)
}

async fn close_all(t: &Arc<Target>, sessions: &Arc<Vec<Option<String>>>, errors: &mut Errors) {
    let closed = all(sessions.len(), |i| {
        let (t, sessions) = (t.clone(), sessions.clone());
        async move {
            match &sessions[i] {
                Some(s) => t.close(i, s).await,
                None => Ok(()),
            }
        }
    })
    .await;
    errors.keep(closed);
}

/// One timed round: the baseline burst, then the sessions burst.
#[derive(Default)]
struct Timed {
    direct: Vec<f64>,
    init: Vec<f64>,
    initialized: Vec<f64>,
    call: Vec<f64>,
    /// Per index: the call through the server minus the same request sent directly.
    overhead: Vec<f64>,
    direct_wall: Vec<f64>,
    session_wall: Vec<f64>,
}

async fn timed_round(t: &Arc<Target>, n: usize, errors: &mut Errors, out: &mut Timed) {
    let start = Instant::now();
    let direct = all(n, |i| {
        let t = t.clone();
        async move { t.direct(i).await }
    })
    .await;
    out.direct_wall.push(ms(start.elapsed()));
    let direct = errors.keep(direct);
    let start = Instant::now();
    let sessions = all(n, |i| {
        let t = t.clone();
        async move {
            let (s, init, initialized) = t.open(i).await?;
            let call = t.call(i, &s).await?;
            Ok((s, init, initialized, call))
        }
    })
    .await;
    out.session_wall.push(ms(start.elapsed()));
    let sessions = errors.keep(sessions);
    for (d, s) in direct.iter().zip(&sessions) {
        if let Some((_, init, initialized, call)) = s {
            out.init.push(ms(*init));
            out.initialized.push(ms(*initialized));
            out.call.push(ms(*call));
            if let Some(d) = d {
                out.overhead.push(ms(*call) - ms(*d));
            }
        }
    }
    out.direct.extend(direct.iter().flatten().map(|d| ms(*d)));
    let ids: Vec<Option<String>> = sessions.into_iter().map(|s| s.map(|(s, ..)| s)).collect();
    close_all(t, &Arc::new(ids), errors).await;
}

/// `INFO commandstats`: calls per command.
fn commandstats(redis: &redis::RedisServer) -> BTreeMap<String, u64> {
    redis
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(":calls=")?;
            Some((name.to_string(), rest.split(',').next()?.parse().ok()?))
        })
        .collect()
}

fn tokens(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("bench-token-{i:06}-{}", "0123456789abcdef".repeat(3)))
        .collect()
}

/// The settings of the run: one token per session and the default limits, or one token and
/// the per-client limits raised to the session count.
fn settings(a: &Args, token_file: &std::path::Path) -> Vec<(&'static str, String)> {
    let mut env = vec![(
        "GEMINI_MCP_HTTP_TOKEN_FILE",
        token_file.display().to_string(),
    )];
    if a.one_token {
        env.extend([
            ("GEMINI_MCP_RATE_LIMITS", "off".to_string()),
            ("GEMINI_MCP_HTTP_CLIENT_CONCURRENCY", a.sessions.to_string()),
            (
                "GEMINI_MCP_HTTP_MAX_SESSIONS_PER_CLIENT",
                a.sessions.to_string(),
            ),
        ]);
    }
    env
}

fn row(name: &str, v: &[f64]) {
    println!(
        "| {name} | {:.1} | {:.1} | {:.1} | {:.1} |",
        percentile(v, 50.0),
        percentile(v, 90.0),
        percentile(v, 99.0),
        percentile(v, 100.0)
    );
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::main]
async fn main() {
    let a = args();
    let n = a.sessions;
    let fake = Arc::new(FakeGemini::start());
    fake.respond_with(|_| Some(Script::echo().delay_headers(DELAY)));
    let root = tempfile::tempdir().expect("temp dir");
    let secrets = tempfile::tempdir().expect("temp dir");
    let tokens = tokens(if a.one_token { 1 } else { n });
    let token_file = secrets.path().join("tokens");
    std::fs::write(&token_file, tokens.join("\n")).expect("token file");
    let redis_server = a.redis.then(redis::RedisServer::start);
    let redis_url = redis_server.as_ref().map(|r| r.url());
    let env = settings(&a, &token_file);
    let server = served::start(
        &fake.base_url(),
        root.path(),
        redis_url.as_deref(),
        &env,
        a.nofile,
    );
    let pid = server.child.id();
    let t = Arc::new(Target {
        http: reqwest::Client::builder()
            .pool_max_idle_per_host(n)
            .build()
            .expect("client"),
        url: server.url.clone(),
        base: fake.base_url(),
        tokens,
    });
    println!(
        "{n} concurrent sessions ({PROTOCOL}: initialize, notifications/initialized, tools/call chat, DELETE), fake Gemini answering in {} s; store: {}; tokens: {}; {} timed rounds; load average at start {}",
        DELAY.as_secs(),
        if a.redis { "redis" } else { "memory" },
        if a.one_token {
            "one for all sessions"
        } else {
            "one per session"
        },
        a.rounds,
        load_average(),
    );
    for (k, v) in &env {
        if *k != "GEMINI_MCP_HTTP_TOKEN_FILE" {
            println!("  {k}={v}");
        }
    }
    if let Some(nofile) = a.nofile {
        println!("  server's open-file limit: {nofile}");
    }

    std::thread::sleep(Duration::from_millis(300));
    let idle_mb = rss(pid).0;
    let idle_fds = fds(pid);
    let mut errors = Errors::default();
    // The first call loads the tokenizer and the model list.
    let first = match t.open(0).await {
        Ok((s, ..)) => {
            let r = t.call(0, &s).await;
            let _ = t.close(0, &s).await;
            r.map(|_| ())
        }
        Err(e) => Err(e),
    };
    errors.keep(vec![first]);
    std::thread::sleep(Duration::from_millis(300));
    let warm_mb = rss(pid).0;

    let (open_mb, peak) = memory_round(&t, n, pid, &fake, &mut errors).await;
    let after_memory_mb = rss(pid).0;

    // The baseline's connections to the fake, opened before it is timed (as the server's were
    // in the memory round).
    let warm = all(n, |i| {
        let t = t.clone();
        async move { t.direct(i).await }
    })
    .await;
    errors.keep(warm);

    let before = redis_server.as_ref().map(commandstats);
    let cpu_before = cpu_ms(pid);
    let stop = Arc::new(AtomicBool::new(false));
    let watch = sampler(pid, fake.clone(), stop.clone());
    let mut timed = Timed::default();
    let mut loads = Vec::new();
    for _ in 0..a.rounds {
        timed_round(&t, n, &mut errors, &mut timed).await;
        loads.push(load_average());
    }
    stop.store(true, Ordering::Relaxed);
    let timed_peak = watch.join().unwrap_or_default();
    let cpu_per_session = (cpu_ms(pid) - cpu_before) / (a.rounds * n) as f64;
    let after = redis_server.as_ref().map(commandstats);
    let end_mb = rss(pid).0;
    let log = server.log.lock().map(|l| l.clone()).unwrap_or_default();

    report(&a, &timed, &errors);
    println!();
    println!(
        "server RSS: idle {idle_mb:.1} MB; after the first call {warm_mb:.1} MB; {n} sessions open and idle {open_mb:.1} MB → {:.1} KB per idle session; peak with {n} calls in flight {:.1} MB → {:.1} KB per session with its call in flight; after closing them {after_memory_mb:.1} MB; after the timed rounds {end_mb:.1} MB",
        (open_mb - warm_mb).max(0.0) * 1024.0 / n as f64,
        peak.rss_mb,
        (peak.rss_mb - warm_mb).max(0.0) * 1024.0 / n as f64,
    );
    println!(
        "over the timed rounds: peak RSS {:.1} MB, peak open descriptors {}, the fake's calls in flight at once {} of {n}",
        timed_peak.rss_mb, timed_peak.fds, timed_peak.in_flight
    );
    println!(
        "open descriptors: idle {idle_fds}, peak {} → {:.2} per in-flight session; the fake's calls in flight at once: {} of {n}",
        peak.fds,
        (peak.fds.saturating_sub(idle_fds)) as f64 / n as f64,
        peak.in_flight,
    );
    println!(
        "server CPU per session (initialize, initialized, call, DELETE; user + system): {cpu_per_session:.2} ms"
    );
    println!("load average after each timed round: {}", loads.join("; "));
    if let (Some(b), Some(a)) = (before, after) {
        redis_report(&b, &a, timed.call.len());
    }
    if !log.is_empty() {
        println!(
            "server log ({} lines, first {}):",
            log.len(),
            log.len().min(5)
        );
        for l in log.iter().take(5) {
            println!("  {l}");
        }
    }
    drop(server);
    if errors.count > 0 {
        std::process::exit(1);
    }
}

fn report(a: &Args, timed: &Timed, errors: &Errors) {
    println!();
    println!(
        "errors: {} (of {} sessions and {} baseline calls, memory round, warm-up and first call included)",
        errors.count,
        (a.rounds + 1) * a.sessions + 1,
        (a.rounds + 1) * a.sessions
    );
    for e in &errors.first {
        println!("  {}", e.chars().take(300).collect::<String>());
    }
    println!();
    println!("| ms | p50 | p90 | p99 | max |");
    println!("|---|---|---|---|---|");
    row(
        "baseline: the Gemini call sent to the fake directly",
        &timed.direct,
    );
    row("initialize", &timed.init);
    row("notifications/initialized", &timed.initialized);
    row("tools/call chat through gemini-mcp", &timed.call);
    row(
        "overhead: the call minus the same request sent directly",
        &timed.overhead,
    );
    row("wall of a round: baseline burst", &timed.direct_wall);
    row("wall of a round: sessions burst", &timed.session_wall);
    println!();
    println!(
        "ratio, call through the server ÷ direct: p50 {:.3}x, p99 {:.3}x; sessions burst wall ÷ baseline burst wall (median): {:.3}x",
        percentile(&timed.call, 50.0) / percentile(&timed.direct, 50.0),
        percentile(&timed.call, 99.0) / percentile(&timed.direct, 99.0),
        percentile(&timed.session_wall, 50.0) / percentile(&timed.direct_wall, 50.0),
    );
}

fn redis_report(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, sessions: usize) {
    println!("Redis commands per session over the timed rounds ({sessions} sessions):");
    let mut total = 0;
    for (name, calls) in after {
        let d = calls - before.get(name).copied().unwrap_or(0);
        if d > 0 && name != "info" {
            total += d;
            println!("  {name}: {:.2}", d as f64 / sessions as f64);
        }
    }
    println!(
        "  all: {:.2} (commands run inside scripts counted too)",
        total as f64 / sessions.max(1) as f64
    );
}

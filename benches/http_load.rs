//! HTTP under load: 200 concurrent `tools/call` (`chat`, 2026-07-28 stateless requests) against
//! the release binary serving Streamable HTTP, with the tests' fake Gemini answering each call
//! after 100 ms. Reports, per round of 200: wall time; per call: latency through the server and
//! the overhead over the same request sent to the fake directly (the baseline, same client, same
//! run); and the server's RSS idle, after the first call (tokenizer loaded), and at its peak with
//! 200 calls in flight (the fake holding each for 1 s, so all 200 are in flight together).
//!
//! ```sh
//! cargo build --release --bin gemini-mcp
//! cargo bench --bench http_load -- [ROUNDS] [--redis]
//! ```
//!
//! `--redis` runs the server on a private `redis-server` (the shared-deployment store) instead
//! of the memory store.

#[path = "../tests/it/support/fake_gemini/mod.rs"]
mod fake_gemini;
#[path = "../tests/it/support/redis/mod.rs"]
#[allow(dead_code, unused_imports)] // Shared with the tests; this bench uses one server only.
mod redis;

#[path = "support/served.rs"]
#[allow(dead_code)]
mod served;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_gemini::{FakeGemini, Script};
use serde_json::{Value, json};
use served::{cpu_ms, ms, percentile, reset_peak, rss};

const CONCURRENCY: usize = 200;
/// Calls made one at a time, for the fixed cost of a call.
const SEQUENTIAL: usize = 50;
const DELAY: Duration = Duration::from_millis(100);
/// The fake's delay while memory is measured: long enough for all calls to be in flight at once.
const HOLD: Duration = Duration::from_secs(1);

fn start_server(fake: &FakeGemini, root: &std::path::Path, redis: Option<&str>) -> served::Server {
    let env = [
        ("GEMINI_MCP_RATE_LIMITS", "off".to_string()),
        ("GEMINI_MCP_HTTP_CLIENT_CONCURRENCY", "10000".to_string()),
    ];
    served::start(&fake.base_url(), root, redis, &env, None)
}

fn call_body(i: usize) -> Value {
    json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
        "name": "chat", "arguments": {"prompt": format!("bench call {i}")},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
}

/// One tools/call through the server; its latency, or why it failed.
async fn mcp_call(http: &reqwest::Client, url: &str, i: usize) -> Result<Duration, String> {
    let start = Instant::now();
    let resp = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "chat")
        .body(call_body(i).to_string())
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| e.to_string())?;
    let elapsed = start.elapsed();
    let v: Value = serde_json::from_str(&text).map_err(|_| format!("{status}: {text}"))?;
    if v["result"]["isError"] == true || v["result"].is_null() {
        return Err(format!("{status}: {text}"));
    }
    Ok(elapsed)
}

/// The same wait sent to the fake directly: what the client and the fake cost on their own.
async fn direct_call(http: &reqwest::Client, base: &str, i: usize) -> Result<Duration, String> {
    let start = Instant::now();
    let body =
        json!({"contents": [{"role": "user", "parts": [{"text": format!("bench call {i}")}]}]});
    let resp = http
        .post(format!(
            "{base}/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse"
        ))
        .header("x-goog-api-key", "bench-key")
        .json(&body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| e.to_string())?;
    if !status.is_success() || !text.contains("FAKE-REPLY") {
        return Err(format!("{status}: {text}"));
    }
    Ok(start.elapsed())
}

/// Runs `n` calls at once; their latencies and the round's wall time.
async fn burst<F, Fut>(n: usize, call: F) -> (Vec<Duration>, Duration)
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Result<Duration, String>> + Send + 'static,
{
    let start = Instant::now();
    let tasks: Vec<_> = (0..n).map(|i| tokio::spawn(call(i))).collect();
    let mut out = Vec::with_capacity(n);
    for t in tasks {
        match t.await.expect("call task") {
            Ok(d) => out.push(d),
            Err(e) => {
                eprintln!("a call failed: {e}");
                std::process::exit(1);
            }
        }
    }
    (out, start.elapsed())
}

fn push_delays(fake: &FakeGemini, n: usize, d: Duration) {
    for _ in 0..n {
        fake.push(Script::echo().delay_headers(d));
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let rounds: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(5);
    let use_redis = args.iter().any(|a| a == "--redis");

    let fake = FakeGemini::start();
    let root = tempfile::tempdir().expect("temp dir");
    let redis_server = use_redis.then(redis::RedisServer::start);
    let redis_url = redis_server.as_ref().map(|r| r.url());
    let server = start_server(&fake, root.path(), redis_url.as_deref());
    let pid = server.child.id();
    let url: Arc<str> = server.url.clone().into();
    let base: Arc<str> = fake.base_url().into();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(CONCURRENCY)
        .build()
        .expect("client");

    std::thread::sleep(Duration::from_millis(300));
    let (idle_mb, _) = rss(pid);
    // The first call loads the tokenizer and the model list.
    push_delays(&fake, 1, DELAY);
    mcp_call(&http, &url, 0).await.expect("first call");
    std::thread::sleep(Duration::from_millis(300));
    let (warm_mb, _) = rss(pid);

    // Memory with every call in flight at once.
    let (before_mb, _) = rss(pid);
    let peak_reset = reset_peak(pid);
    push_delays(&fake, CONCURRENCY, HOLD);
    let h = http.clone();
    let u = url.clone();
    let sampler = tokio::spawn(async move {
        let mut max = 0.0f64;
        for _ in 0..300 {
            max = max.max(rss(pid).0);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        max
    });
    burst(CONCURRENCY, move |i| {
        let (h, u) = (h.clone(), u.clone());
        async move { mcp_call(&h, &u, i).await }
    })
    .await;
    let sampled_peak = sampler.await.unwrap_or(0.0);
    let (_, hwm) = rss(pid);
    let peak_mb = if peak_reset {
        hwm.max(sampled_peak)
    } else {
        sampled_peak
    };

    // Warm both paths' connection pools.
    push_delays(&fake, CONCURRENCY, DELAY);
    let h = http.clone();
    let b = base.clone();
    burst(CONCURRENCY, move |i| {
        let (h, b) = (h.clone(), b.clone());
        async move { direct_call(&h, &b, i).await }
    })
    .await;
    push_delays(&fake, CONCURRENCY, DELAY);
    let h = http.clone();
    let u = url.clone();
    burst(CONCURRENCY, move |i| {
        let (h, u) = (h.clone(), u.clone());
        async move { mcp_call(&h, &u, i).await }
    })
    .await;

    let cpu_before = cpu_ms(pid);
    let mut base_lat = Vec::new();
    let mut base_wall = Vec::new();
    let mut srv_lat = Vec::new();
    let mut srv_wall = Vec::new();
    for _ in 0..rounds {
        // Interleaved, so both see the same machine load.
        push_delays(&fake, CONCURRENCY, DELAY);
        let h = http.clone();
        let b = base.clone();
        let (lat, wall) = burst(CONCURRENCY, move |i| {
            let (h, b) = (h.clone(), b.clone());
            async move { direct_call(&h, &b, i).await }
        })
        .await;
        base_lat.extend(lat.into_iter().map(ms));
        base_wall.push(ms(wall));

        push_delays(&fake, CONCURRENCY, DELAY);
        let h = http.clone();
        let u = url.clone();
        let (lat, wall) = burst(CONCURRENCY, move |i| {
            let (h, u) = (h.clone(), u.clone());
            async move { mcp_call(&h, &u, i).await }
        })
        .await;
        srv_lat.extend(lat.into_iter().map(ms));
        srv_wall.push(ms(wall));
    }

    let cpu_per_call = (cpu_ms(pid) - cpu_before) / (rounds * CONCURRENCY) as f64;

    // One call at a time: the fixed cost of a call, without queueing behind 199 others.
    let mut seq_base = Vec::new();
    let mut seq_srv = Vec::new();
    for i in 0..SEQUENTIAL {
        push_delays(&fake, 2, DELAY);
        seq_base.push(ms(direct_call(&http, &base, i).await.expect("direct call")));
        seq_srv.push(ms(mcp_call(&http, &url, i).await.expect("call")));
    }

    let (after_mb, _) = rss(pid);
    let overhead: Vec<f64> = {
        let b50 = percentile(&base_lat, 50.0);
        srv_lat.iter().map(|l| l - b50).collect()
    };
    let store = if use_redis { "redis" } else { "memory" };
    println!(
        "{rounds} rounds x {CONCURRENCY} concurrent tools/call (chat), fake Gemini answering in {} ms; store: {store}",
        DELAY.as_millis()
    );
    println!();
    println!("| path | wall ms per round (median) | call ms p50 | call ms p99 | call ms max |");
    println!("|---|---|---|---|---|");
    for (name, lat, wall) in [
        ("client → fake (baseline)", &base_lat, &base_wall),
        ("client → gemini-mcp → fake", &srv_lat, &srv_wall),
    ] {
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {:.1} |",
            percentile(wall, 50.0),
            percentile(lat, 50.0),
            percentile(lat, 99.0),
            percentile(lat, 100.0)
        );
    }
    println!(
        "| one call at a time, baseline ({SEQUENTIAL} calls) | — | {:.1} | {:.1} | {:.1} |",
        percentile(&seq_base, 50.0),
        percentile(&seq_base, 99.0),
        percentile(&seq_base, 100.0)
    );
    println!(
        "| one call at a time, through gemini-mcp | — | {:.1} | {:.1} | {:.1} |",
        percentile(&seq_srv, 50.0),
        percentile(&seq_srv, 99.0),
        percentile(&seq_srv, 100.0)
    );
    let wall_ratio = percentile(&srv_wall, 50.0) / ms(DELAY);
    let budget = 1.5 * ms(DELAY) + (percentile(&base_wall, 50.0) - ms(DELAY));
    println!();
    println!(
        "server wall / 100 ms: {wall_ratio:.2}x; target 1.5 x 100 ms + the client's own overhead = {budget:.1} ms: {}",
        if percentile(&srv_wall, 50.0) <= budget {
            "met"
        } else {
            "missed"
        }
    );
    println!(
        "per-call overhead over the baseline's median: p50 {:.1} ms, p99 {:.1} ms (target p99 < 20 ms: {})",
        percentile(&overhead, 50.0),
        percentile(&overhead, 99.0),
        if percentile(&overhead, 99.0) < 20.0 {
            "met"
        } else {
            "missed"
        }
    );
    println!(
        "server CPU per call under load (user + system): {cpu_per_call:.2} ms → about {:.0} calls/s per core",
        1000.0 / cpu_per_call.max(0.001)
    );
    println!(
        "server RSS: idle {idle_mb:.1} MB; after the first call (tokenizer loaded) {warm_mb:.1} MB; peak with {CONCURRENCY} calls in flight {peak_mb:.1} MB → {:.0} KB per in-flight call; after all rounds {after_mb:.1} MB",
        (peak_mb - before_mb).max(0.0) * 1024.0 / CONCURRENCY as f64
    );
    drop(server);
}

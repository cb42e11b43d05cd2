//! Metrics benchmark (BENCHMARKS.md `## Metrics`): what the metrics cost the processes that never
//! serve them (stdio, the command line) and the HTTP server that does.
//!
//! - start: `Metrics::new()` (every family registered), against `App::start` as a whole (memory
//!   store, the same run), which now includes it;
//! - per call: the updates one tool call of one Gemini request makes (`call`, `request`,
//!   `tokens`), on 1 and 2 threads, against the same number of bare atomic adds (the floor);
//! - a scrape: `encode` of a registry holding a busy instance's series (8 tools × 3 models × 6
//!   outcomes, histograms, tokens), Prometheus text and OpenMetrics.
//!
//! Run: `cargo bench --bench metrics` (release build). `METRICS_BENCH_RUNS` sets the runs per
//! figure (default 7; the median is shown).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use gemini_mcp_server::app::App;
use gemini_mcp_server::config::Config;
use gemini_mcp_server::metrics::{Metrics, Sampled, Tokens};

const TOOLS: [&str; 8] = [
    "chat",
    "thinkdeep",
    "analyze",
    "codereview",
    "debug",
    "precommit",
    "investigate",
    "listmodels",
];
const MODELS: [&str; 3] = ["gemini-3.1-pro-preview", "gemini-3.8-flash", "other"];
const OUTCOMES: [&str; 6] = [
    "ok",
    "gemini_api",
    "thread",
    "rate_limit",
    "abandoned",
    "cancelled",
];
/// Calls per timed batch.
const CALLS: usize = 100_000;

fn main() {
    let runs: usize = std::env::var("METRICS_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let root = tempfile::tempdir().expect("a directory");

    println!("## start, median of {runs}\n");
    let new = median(runs, || {
        let started = Instant::now();
        std::hint::black_box(Metrics::new());
        started.elapsed()
    });
    let app = median(runs, || {
        let config = Arc::new(Config::for_tests(root.path()));
        let started = Instant::now();
        let app = runtime
            .block_on(App::start(config))
            .expect("the app starts");
        let took = started.elapsed();
        drop(app);
        took
    });
    println!("| what | µs | share of App::start |\n|---|---|---|");
    println!(
        "| Metrics::new | {:.1} | {:.1}% |",
        us(new),
        100.0 * new.as_secs_f64() / app.as_secs_f64()
    );
    println!("| App::start (memory store) | {:.1} | 100% |\n", us(app));

    println!("## one call's updates (call, request, tokens), {CALLS} calls, median of {runs}\n");
    println!(
        "| threads | metrics ns/call (wall) | bare atomic adds ns/call (wall) | ratio |\n|---|---|---|---|"
    );
    for threads in [1, 2] {
        let metrics = Arc::new(Metrics::new());
        metrics.know_models(MODELS.iter().map(|m| m.to_string()));
        let ours = median(runs, || on_threads(threads, || updates(&metrics)));
        let floor = Arc::new(AtomicU64::new(0));
        let bare = median(runs, || on_threads(threads, || atomic_adds(&floor)));
        println!(
            "| {threads} | {:.0} | {:.1} | {:.0}x |",
            per_call(ours, threads),
            per_call(bare, threads),
            ours.as_secs_f64() / bare.as_secs_f64()
        );
    }

    println!("\n## a scrape of a busy instance's series, median of {runs}\n");
    let busy = Metrics::new();
    busy.know_models(MODELS.iter().map(|m| m.to_string()));
    for tool in TOOLS {
        for model in MODELS {
            for outcome in OUTCOMES {
                busy.call(tool, Some(model), outcome, Duration::from_millis(7));
            }
            busy.request(model, "ok", Duration::from_secs(3));
            busy.request(model, "error", Duration::from_secs(1));
            busy.tokens(model, tokens(), Some(0.01));
        }
        busy.refusal(tool, "rate_limit");
    }
    let sampled = Sampled::default();
    println!("| format | bytes | µs |\n|---|---|---|");
    for (name, open) in [("Prometheus text", false), ("OpenMetrics", true)] {
        let bytes = busy.encode(sampled, open).len();
        let took = median(runs, || {
            let started = Instant::now();
            std::hint::black_box(busy.encode(sampled, open));
            started.elapsed()
        });
        println!("| {name} | {bytes} | {:.0} |", us(took));
    }
}

fn tokens() -> Tokens {
    Tokens {
        input: 12_000,
        output: 800,
        cached: 9_000,
        thinking: 2_000,
    }
}

/// [`CALLS`] calls' updates, spread over the tools and models.
fn updates(metrics: &Metrics) {
    for i in 0..CALLS {
        let tool = TOOLS[i % TOOLS.len()];
        let model = MODELS[i % MODELS.len()];
        metrics.request(model, "ok", Duration::from_millis(1500));
        metrics.tokens(model, tokens(), Some(0.004));
        metrics.call(tool, Some(model), "ok", Duration::from_millis(4));
    }
}

/// As many atomic adds as [`updates`] makes (counters and histogram fields: about 12 per call).
fn atomic_adds(floor: &AtomicU64) {
    for _ in 0..CALLS * 12 {
        floor.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs `work` on `threads` threads at once; the wall time.
fn on_threads(threads: usize, work: impl Fn() + Sync) -> Duration {
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(&work);
        }
    });
    started.elapsed()
}

fn median(runs: usize, mut f: impl FnMut() -> Duration) -> Duration {
    let mut times: Vec<Duration> = (0..runs.max(1)).map(|_| f()).collect();
    times.sort();
    times[times.len() / 2]
}

/// Wall time per call, over the calls of every thread.
fn per_call(d: Duration, threads: usize) -> f64 {
    d.as_nanos() as f64 / (CALLS * threads) as f64
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

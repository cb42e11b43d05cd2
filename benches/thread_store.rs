//! Thread-store benchmark (BENCHMARKS.md `## Thread store`): load a 20-turn thread that sent 30
//! files and rebuild its history (the files re-read through the collector), as the pipeline does
//! on every continued call; on the embedded store, on Redis over loopback (a private
//! `redis-server` on a free port), on a private Redis Cluster (three masters, three replicas;
//! `cluster+w` waits for one replica, `GEMINI_MCP_REDIS_WAIT_REPLICAS=1`) and on the memory
//! store for reference. Also counts the Redis commands of one load (`INFO commandstats`), and
//! times the appends that fill a project with 1,000 threads and a listing of 20 of them.
//!
//! Run: `cargo bench --bench thread_store` (release build; needs `redis-server` and `redis-cli`
//! on PATH).
//! `THREAD_BENCH_ITERS` sets the number of timed iterations (default 300).
//! `THREAD_BENCH_RECOUNT=1` stores the turns without their files' token counts, so the collector
//! counts every file again on each rebuild (the cost before `Collector::collect_counted`).

#[allow(dead_code, unused_imports)] // Shared with the tests, which use all of it.
#[path = "../tests/it/support/redis/mod.rs"]
mod redis_server;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gemini_mcp_server::collector::Collector;
use gemini_mcp_server::config::{Config, Secret, StoreChoice};
use gemini_mcp_server::pipeline::earlier_turns;
use gemini_mcp_server::store::Usage;
use gemini_mcp_server::store::{self, FileRef, Owner, ThreadId, ThreadStore, Turn};
use sha2::{Digest, Sha256};

const TURNS: usize = 20;
const FILES: usize = 30;
const BUDGET: u64 = 400_000;

fn main() {
    let iters: usize = std::env::var("THREAD_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(iters));
}

async fn run(iters: usize) {
    let project = tempfile::tempdir().expect("project dir");
    let root = std::fs::canonicalize(project.path()).expect("canonical root");
    let recount = std::env::var("THREAD_BENCH_RECOUNT").is_ok_and(|v| v == "1");
    let turns = make_project(&root, recount);
    let bytes: usize = turns
        .iter()
        .map(|t| t.request.len() + t.response.len())
        .sum();
    let file_bytes: u64 = (0..FILES)
        .map(|i| std::fs::metadata(file_path(&root, i)).map_or(0, |m| m.len()))
        .sum();
    println!(
        "files' token counts {}",
        if recount {
            "not stored: counted on every rebuild"
        } else {
            "stored with the turns: reused"
        }
    );
    println!(
        "thread: {TURNS} turns ({} KiB of requests and answers), {FILES} files ({} KiB); {iters} iterations",
        bytes / 1024,
        file_bytes / 1024
    );

    let redis = redis_server::RedisServer::start();
    let cluster = redis_server::RedisCluster::start();
    let mut base = Config::for_tests(&root);
    base.threads.max_turns = 100;
    let collector = Arc::new(Collector::new(&base.collector()).expect("collector"));

    for (name, store, url, wait) in [
        ("embedded", StoreChoice::Embedded, None, 0),
        ("redis", StoreChoice::Redis, Some(redis.url()), 0),
        ("cluster", StoreChoice::Redis, Some(cluster.url()), 0),
        ("cluster+w", StoreChoice::Redis, Some(cluster.url()), 1),
        ("memory", StoreChoice::Memory, None, 0),
    ] {
        let mut c = base.clone();
        c.threads.store = store;
        c.threads.redis_url = url.map(Secret::new);
        c.threads.redis_wait_replicas = wait;
        c.threads.state_dir = root.join(".state");
        c.threads.key_prefix = format!("bench-{name}");
        let s = store::open(&c.threads()).await.expect("store");
        let id = ThreadId::new();
        for t in &turns {
            s.append(id, &root.display().to_string(), &Owner::local(), t)
                .await
                .expect("append");
        }
        // Warm up (the tokenizer's tables, the page cache, the script cache).
        for _ in 0..20 {
            one(&s, id, &collector).await;
        }
        let mut load = Vec::with_capacity(iters);
        let mut render = Vec::with_capacity(iters);
        let mut total = Vec::with_capacity(iters);
        let mut check = 0usize;
        for _ in 0..iters {
            let (l, r, n) = one(&s, id, &collector).await;
            load.push(l);
            render.push(r);
            total.push(l + r);
            check = n;
        }
        assert_eq!(check, 2 * TURNS, "every turn rendered");
        println!(
            "{name:>9}: load median {} (p90 {}) · history rebuild median {} (p90 {}) · total median {} (p90 {})",
            ms(median(&mut load)),
            ms(p90(&mut load)),
            ms(median(&mut render)),
            ms(p90(&mut render)),
            ms(median(&mut total)),
            ms(p90(&mut total)),
        );
        if name == "redis" {
            redis.cli(&["CONFIG", "RESETSTAT"]);
            s.load(id).await.expect("load");
            let stats = redis.cli(&["INFO", "commandstats"]);
            let calls: Vec<&str> = stats
                .lines()
                .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info"))
                .filter(|l| !l.starts_with("cmdstat_config"))
                .collect();
            println!("    redis commands for one load: {calls:?}");
        }
        list_bench(&s, &root.display().to_string(), name, &turns[0], iters).await;
    }
}

/// Appending the first turn of 1,000 threads to one project, then listing 20 of them
/// (resources/list, `gemini-mcp threads list`).
async fn list_bench(s: &Arc<dyn ThreadStore>, root: &str, name: &str, first: &Turn, iters: usize) {
    let project = format!("{root}/listing");
    let mut turn = first.clone();
    turn.request = "## Question\nWhere does the rate limiter admit a burst?\n".into();
    let mut appends = Vec::with_capacity(1_000);
    for _ in 0..1_000 {
        let t = Instant::now();
        s.append(ThreadId::new(), &project, &Owner::local(), &turn)
            .await
            .expect("append");
        appends.push(t.elapsed());
    }
    println!(
        "{name:>9}: append a thread's first turn median {} (p90 {})",
        ms(median(&mut appends)),
        ms(p90(&mut appends)),
    );
    for _ in 0..20 {
        s.list(&project, &Owner::local(), 20).await.expect("list");
    }
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t = Instant::now();
        let listed = s.list(&project, &Owner::local(), 20).await.expect("list");
        times.push(t.elapsed());
        assert_eq!(listed.len(), 20);
    }
    println!(
        "{name:>9}: list 20 of 1,000 threads median {} (p90 {})",
        ms(median(&mut times)),
        ms(p90(&mut times)),
    );
}

/// One continued call's thread work: load, then rebuild the history on the blocking pool.
async fn one(
    s: &Arc<dyn ThreadStore>,
    id: ThreadId,
    collector: &Arc<Collector>,
) -> (Duration, Duration, usize) {
    let t0 = Instant::now();
    let thread = s.load(id).await.expect("load");
    let t1 = Instant::now();
    let c = collector.clone();
    let h = tokio::task::spawn_blocking(move || earlier_turns::rebuild(&thread, &c, BUDGET))
        .await
        .expect("rebuild");
    let t2 = Instant::now();
    assert_eq!(h.omitted_turns, 0);
    (t1 - t0, t2 - t1, h.messages.len())
}

fn file_path(root: &Path, i: usize) -> std::path::PathBuf {
    root.join(format!("src/module_{i:02}.rs"))
}

/// Writes 30 source files (about 3 KiB each) and a thread of 20 turns that sent them: turn k
/// sends files 3k/2 .. 3(k+1)/2 (one or two each), as the pipeline would store it.
fn make_project(root: &Path, recount: bool) -> Vec<Turn> {
    std::fs::create_dir_all(root.join("src")).expect("src dir");
    for i in 0..FILES {
        let mut s = format!("//! Module {i}: part of the benchmark project.\n\n");
        for f in 0..30 {
            s.push_str(&format!(
                "pub fn function_{i}_{f}(input: &[u32]) -> u32 {{\n    input.iter().map(|x| x * {f} + {i}).sum()\n}}\n"
            ));
        }
        std::fs::write(file_path(root, i), s).expect("write file");
    }
    (0..TURNS)
        .map(|k| {
            let files = (k * FILES / TURNS..(k + 1) * FILES / TURNS)
                .map(|i| {
                    let path = file_path(root, i);
                    let bytes = std::fs::read(&path).expect("read back");
                    FileRef {
                        path: path.display().to_string(),
                        hash: hex::encode(Sha256::digest(&bytes)),
                        tokens: if recount { 0 } else { bytes.len() as u64 / 3 },
                    }
                })
                .collect();
            let request = format!(
                "Question {k}: how does this module handle empty input, and what should change? {}\n",
                "Consider the callers. ".repeat(10)
            );
            let response = format!(
                "## Answer {k}\n\n{}",
                "The function sums the mapped values; an empty slice yields zero, which is fine. "
                    .repeat(25)
            );
            Turn {
                tool: "chat".into(),
                request_tokens: request.len() as u64 / 4,
                response_tokens: response.len() as u64 / 4,
                request,
                files,
                response,
                model: "gemini-2.5-pro".into(),
                usage: Usage::default(),
                at_ms: 0,
                frames: Vec::new(),
                context_cache: None,
                extra_usd: 0.0,
                interaction: None,
            }
        })
        .collect()
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn p90(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v[v.len() * 9 / 10]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

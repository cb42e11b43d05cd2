//! The collector benchmark (BENCHMARKS.md § Collector).
//!
//! `cargo bench --bench collector` collects, in-process with the tokenizer already loaded (as in
//! the server), CPython's standard library under a 335,544-token budget and a generated
//! 100,000-file tree under 1,000,000 tokens, on 1 thread and on every core, and compares each
//! with the physical floor: reading the same chosen files' bytes (in-process, and `cat`), and
//! listing every directory of the corpus (what any walk pays).
//! "cold" is the first request to a freshly started collector (workers warmed at start as in
//! the server, nothing of the corpus seen yet); the other columns are a warm server's.
//!
//! Environment: `BENCH_STDLIB` (default `/tmp/bench/stdlib`: a copy of
//! `lib/python3.11` without `site-packages` and `__pycache__`), `BENCH_TREE` (default
//! `/tmp/bench/tree100k`, generated on first use), `BENCH_RUNS` (default 15), `BENCH_ONLY`
//! (run only corpora whose name contains it), `BENCH_THREADS` (comma-separated thread counts;
//! default 1 and every core).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gemini_mcp_server::collector::{CollectRequest, Collected, Collector, pieces, tokens};
use gemini_mcp_server::config::Config;

type Error = Box<dyn std::error::Error>;

#[path = "support/tree.rs"]
mod tree;
use tree::generate_tree;
#[path = "support/floors.rs"]
mod floors;
use floors::list;

fn main() -> Result<(), Error> {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let stdlib =
        PathBuf::from(std::env::var("BENCH_STDLIB").unwrap_or_else(|_| "/tmp/bench/stdlib".into()));
    let tree =
        PathBuf::from(std::env::var("BENCH_TREE").unwrap_or_else(|_| "/tmp/bench/tree100k".into()));
    if !tree.join(".complete").exists() {
        let t = Instant::now();
        generate_tree(&tree, 100_000)?;
        eprintln!("generated {} in {:.1?}", tree.display(), t.elapsed());
    }
    let t = Instant::now();
    tokens::warm_up();
    println!("tokenizer load: {:.0} ms", ms(t.elapsed()));
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let thread_counts: Vec<usize> = match std::env::var("BENCH_THREADS") {
        Ok(v) => v.split(',').filter_map(|t| t.trim().parse().ok()).collect(),
        Err(_) => vec![1, cores],
    };
    println!(
        "| corpus | budget | threads | median ms | min | max | CPU ms/run | cold ms | files sent / seen | tokens | fill | floor: read ms | floor: cat ms | median ÷ cat | floor: list ms | median ÷ (cat + list) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (name, root, budget) in [
        ("CPython stdlib", &stdlib, 335_544u64),
        ("generated 100k", &tree, 1_000_000),
    ] {
        if !name.contains(only.as_str()) {
            continue;
        }
        if !root.is_dir() {
            eprintln!("skipping {name}: {} is missing", root.display());
            continue;
        }
        for &threads in &thread_counts {
            bench(name, root, budget, threads, runs)?;
        }
    }
    Ok(())
}

fn bench(name: &str, root: &Path, budget: u64, threads: usize, runs: usize) -> Result<(), Error> {
    let config = Config::for_tests(root);
    let req = CollectRequest {
        paths: vec![".".into()],
        budget,
        already_sent: Default::default(),
        ignore: None,
    };
    // Cold: the first request to a freshly started collector (its workers warmed at start, as in
    // the server, but nothing of this corpus seen: the pieces' counts, shared by every thread,
    // are forgotten first).
    let mut cold = Vec::new();
    for _ in 0..5 {
        pieces::memory().clear();
        let fresh = Collector::new(&config.collector())?.with_threads(threads);
        fresh.warm_up();
        fresh.wait_ready();
        let t = Instant::now();
        fresh.collect(&req)?;
        cold.push(t.elapsed());
    }
    let collector = Collector::new(&config.collector())?.with_threads(threads);
    // One warm-up run (page cache, allocator), then the measured runs.
    let mut last: Collected = collector.collect(&req)?;
    let mut times = Vec::with_capacity(runs);
    let cpu_start = cpu_time();
    for _ in 0..runs {
        let t = Instant::now();
        last = collector.collect(&req)?;
        times.push(t.elapsed());
    }
    let cpu_per_run = (cpu_time() - cpu_start) / runs as u32;
    let chosen: Vec<PathBuf> = last.files.iter().map(|f| f.path.clone()).collect();
    let mut read_times = Vec::with_capacity(runs);
    let mut cat_times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        let mut n = 0usize;
        for p in &chosen {
            n += std::fs::read(p)?.len();
        }
        read_times.push(t.elapsed());
        std::hint::black_box(n);
        cat_times.push(floors::cat(&chosen)?);
    }
    // The other floor: listing every directory of the corpus (one thread, the entry types from
    // the listing as the walk takes them, nothing opened), which any walk pays.
    let mut list_times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        std::hint::black_box(list(root)?);
        list_times.push(t.elapsed());
    }
    let seen = last.files.len() + last.skipped.len();
    let med = median(&mut times);
    let cat = median(&mut cat_times);
    let list_floor = median(&mut list_times);
    println!(
        "| {name} | {budget} | {threads} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} / {seen} | {} | {:.1}% | {:.2} | {:.2} | {:.1} | {:.2} | {:.1} |",
        ms(med),
        ms(times[0]),
        ms(times[times.len() - 1]),
        ms(cpu_per_run),
        ms(median(&mut cold)),
        last.files.len(),
        last.tokens,
        100.0 * last.tokens as f64 / budget as f64,
        ms(median(&mut read_times)),
        ms(cat),
        med.as_secs_f64() / cat.as_secs_f64(),
        ms(list_floor),
        med.as_secs_f64() / (cat + list_floor).as_secs_f64(),
    );
    Ok(())
}

/// CPU time of the whole process (every thread) so far.
#[cfg(unix)]
fn cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// CPU time of the whole process (every thread) so far: kernel and user time, in 100 ns units.
#[cfg(windows)]
fn cpu_time() -> Duration {
    use windows_sys::Win32::Foundation::FILETIME;
    use windows_sys::Win32::System::Threading::{GetCurrentProcess, GetProcessTimes};
    let zero = || FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero(), zero(), zero(), zero());
    // SAFETY: the pseudo-handle of the current process is always valid; the four out-pointers
    // are live locals.
    let ok = unsafe {
        GetProcessTimes(
            GetCurrentProcess(),
            &mut created,
            &mut exited,
            &mut kernel,
            &mut user,
        )
    };
    assert!(ok != 0, "GetProcessTimes failed");
    let ticks = |t: FILETIME| (u64::from(t.dwHighDateTime) << 32) | u64::from(t.dwLowDateTime);
    Duration::from_nanos((ticks(kernel) + ticks(user)) * 100)
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

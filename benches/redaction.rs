//! Redaction benchmark (BENCHMARKS.md `## Redaction`): the cost of `redact::redact` on
//! adversarial inputs of every shape in `tests/it/hardening/adversarial.rs` at 100 KB and 1 MB
//! (linear: the ratio is about 10), and on ordinary text (this crate's own sources, 1 MB) for
//! throughput. The frozen earlier engine (`redaction/baseline.rs`) runs in the same process as
//! the baseline: on ordinary text at 1 MB, on adversarial text at 2 KB and 8 KB only (it is
//! quadratic there).
//!
//! Run: `cargo bench --bench redaction` (release build). `REDACTION_BENCH_RUNS` sets the runs per
//! figure (default 5; the median is shown).

#[path = "../tests/it/hardening/adversarial.rs"]
mod adversarial;
#[path = "redaction/baseline.rs"]
mod baseline;

use std::time::{Duration, Instant};

use gemini_mcp_server::redact::redact;

fn main() {
    let runs: usize = std::env::var("REDACTION_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    const KB: usize = 1000;

    println!("## ordinary text (this crate's sources), 1 MB, median of {runs}");
    let ordinary = sources(1000 * KB);
    let new = median(runs, || redact(&ordinary));
    let old = median(runs, || baseline::redact(&ordinary));
    let (new_out, new_n) = redact(&ordinary);
    let (old_out, old_n) = baseline::redact(&ordinary);
    // The linear engine knows more shapes: it redacts every line the baseline did.
    for (o, n) in old_out.lines().zip(new_out.lines()) {
        if o.contains("[REDACTED:") && !n.contains("[REDACTED:") {
            panic!("the baseline redacted a line the linear engine did not: {o}");
        }
    }
    println!("values replaced: linear {new_n}, baseline {old_n}\n");
    println!(
        "| engine | ms | MB/s |\n|---|---|---|\n| linear | {:.2} | {:.0} |\n| baseline | {:.2} | {:.0} |\n",
        ms(new),
        mbps(ordinary.len(), new),
        ms(old),
        mbps(ordinary.len(), old)
    );

    println!("## adversarial text, median of {runs}");
    println!(
        "| shape | linear 100 KB ms | linear 1 MB ms | ratio | baseline 2 KB ms | baseline 8 KB ms | ratio |"
    );
    println!("|---|---|---|---|---|---|---|");
    let small = adversarial::inputs(100 * KB);
    let large = adversarial::inputs(1000 * KB);
    let b5 = adversarial::inputs(2 * KB);
    let b20 = adversarial::inputs(8 * KB);
    for i in 0..small.len() {
        let name = small[i].0;
        let t_small = median(runs, || redact(&small[i].1));
        let t_large = median(runs, || redact(&large[i].1));
        let t_b5 = median(runs, || baseline::redact(&b5[i].1));
        let t_b20 = median(runs, || baseline::redact(&b20[i].1));
        println!(
            "| {name} | {:.2} | {:.2} | {:.1} | {:.2} | {:.2} | {:.1} |",
            ms(t_small),
            ms(t_large),
            ratio(t_large, t_small),
            ms(t_b5),
            ms(t_b20),
            ratio(t_b20, t_b5)
        );
    }
}

/// This crate's `src/**/*.rs`, concatenated and repeated up to `size` bytes.
fn sources(size: usize) -> String {
    let mut files = Vec::new();
    let mut dirs = vec![std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src"
    ))];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(dir).expect("src").flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    files.sort();
    let all: String = files
        .iter()
        .map(|p| std::fs::read_to_string(p).expect("source"))
        .collect();
    let mut s = String::with_capacity(size + all.len());
    while s.len() < size {
        s.push_str(&all);
    }
    let mut end = size;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s
}

fn median<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    let mut times: Vec<Duration> = (0..runs.max(1))
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn mbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64()
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}

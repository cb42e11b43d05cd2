//! The o200k counters side by side (BENCHMARKS.md § The tokenizer): tiktoken-rs, GitHub's
//! `bpe-openai` (linear-time BPE), and this crate's own (`collector::o200k` over
//! `collector::bpe`). One counter per process, so each one's memory is its own:
//!
//! ```sh
//! cargo build --release --example tokenizers
//! for c in tiktoken bpe-openai ours; do target/release/examples/tokenizers $c DIR...; done
//! ```
//!
//! Prints the counter, the time to load it, the resident memory it added, one cold pass over
//! every text file under the directories (nothing counted before) and a warm pass (the same
//! files again), in MB/s, and the total count — equal for all three when they agree.

use std::time::Instant;

type Error = Box<dyn std::error::Error>;

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn texts(dirs: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for dir in dirs {
        for entry in ignore::WalkBuilder::new(dir).build().flatten() {
            if entry.file_type().is_some_and(|t| t.is_file())
                && let Ok(text) = std::fs::read_to_string(entry.path())
            {
                out.push(text);
            }
        }
    }
    out
}

fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let which = args
        .next()
        .ok_or("usage: tokenizers tiktoken|bpe-openai|ours DIR...")?;
    let dirs: Vec<String> = args.collect();
    let files = texts(&dirs);
    let mb = files.iter().map(String::len).sum::<usize>() as f64 / 1e6;
    let before = rss_kb();
    let started = Instant::now();
    let count: Box<dyn Fn(&str) -> u64> = match which.as_str() {
        "tiktoken" => {
            let bpe = tiktoken_rs::o200k_base_singleton();
            Box::new(move |t| bpe.encode_ordinary(t).len() as u64)
        }
        "bpe-openai" => {
            let bpe = bpe_openai::o200k_base();
            let _ = bpe.count("load");
            Box::new(move |t| bpe.count(t) as u64)
        }
        "ours" => {
            let _ = gemini_mcp_server::collector::o200k::count("load");
            Box::new(gemini_mcp_server::collector::o200k::count)
        }
        other => return Err(format!("unknown counter {other}").into()),
    };
    let load = started.elapsed();
    let loaded = rss_kb();
    let pass = || {
        let t = Instant::now();
        let n: u64 = files.iter().map(|f| count(f)).sum();
        (n, t.elapsed())
    };
    let (n, cold) = pass();
    let (n2, warm) = pass();
    assert_eq!(n, n2);
    println!(
        "| {which} | {:.1} ms | {:.1} MB | {:.1} MB/s | {:.1} MB/s | {n} | {:.1} MB |",
        load.as_secs_f64() * 1e3,
        (loaded.saturating_sub(before)) as f64 / 1024.0,
        mb / cold.as_secs_f64(),
        mb / warm.as_secs_f64(),
        rss_kb() as f64 / 1024.0,
    );
    Ok(())
}

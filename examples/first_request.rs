//! The first request of a fresh process, as the server makes it: the collector built, its
//! warm-up (the tokenizer's table, the workers' first pieces, the secret rules) run and waited
//! for, then one collection timed. One process per figure, so nothing of an earlier request is
//! remembered (BENCHMARKS.md § Issue 32). With `WARM_RUNS=n`, n more collections follow (the
//! warm server's figure, their median) and the floors of `benches/collector.rs`: `cat` of the
//! files sent, and listing every directory of the corpus.
//!
//! `cargo run --release --example first_request -- ROOT BUDGET [THREADS]`

use std::path::Path;
use std::time::{Duration, Instant};

use gemini_mcp_server::collector::{CollectRequest, Collector};
use gemini_mcp_server::config::Config;

#[path = "../benches/support/floors.rs"]
mod floors;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: first_request ROOT BUDGET [THREADS]";
    let root = args.next().ok_or(usage)?;
    let budget: u64 = args.next().ok_or(usage)?.parse()?;
    let config = Config::for_tests(Path::new(&root));
    let mut collector = Collector::new(&config.collector())?;
    if let Some(t) = args.next() {
        collector = collector.with_threads(t.parse()?);
    }
    collector.warm_up();
    collector.wait_ready();
    let req = CollectRequest {
        paths: vec![".".into()],
        budget,
        already_sent: Default::default(),
        ignore: None,
    };
    let t = Instant::now();
    let c = collector.collect(&req)?;
    let first = t.elapsed();
    print!(
        "first request {:.2} ms; sent {} files, {} tokens",
        ms(first),
        c.files.len(),
        c.tokens
    );
    let runs: usize = std::env::var("WARM_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    if runs > 0 {
        let mut warm = Vec::with_capacity(runs);
        let mut cat = Vec::with_capacity(runs);
        let mut list = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            std::hint::black_box(collector.collect(&req)?);
            warm.push(t.elapsed());
            let sent: Vec<&Path> = c.files.iter().map(|f| f.path.as_path()).collect();
            cat.push(floors::cat(&sent)?);
            let t = Instant::now();
            std::hint::black_box(floors::list(Path::new(&root))?);
            list.push(t.elapsed());
        }
        let (warm, cat, list) = (median(warm), median(cat), median(list));
        print!(
            "; warm median {:.2} ms, cat {:.2} ms, listing {:.2} ms, warm ÷ (cat + listing) {:.2}",
            ms(warm),
            ms(cat),
            ms(list),
            warm.as_secs_f64() / (cat + list).as_secs_f64()
        );
    }
    println!();
    Ok(())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

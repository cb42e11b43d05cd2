//! The first request of a fresh process, as the server makes it: the collector built, its
//! warm-up (the tokenizer's table, the workers' first pieces, the secret rules) run and waited
//! for, then one collection timed. One process per figure, so nothing of an earlier request is
//! remembered (BENCHMARKS.md § Issue 32).
//!
//! `cargo run --release --example first_request -- ROOT BUDGET [THREADS]` prints the
//! collection's milliseconds and what was sent.

use std::time::Instant;

use gemini_mcp_server::collector::{CollectRequest, Collector};
use gemini_mcp_server::config::Config;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: first_request ROOT BUDGET [THREADS]";
    let root = args.next().ok_or(usage)?;
    let budget: u64 = args.next().ok_or(usage)?.parse()?;
    let config = Config::for_tests(std::path::Path::new(&root));
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
    };
    let t = Instant::now();
    let c = collector.collect(&req)?;
    let wall = t.elapsed().as_secs_f64() * 1e3;
    println!(
        "first request {wall:.2} ms; sent {} files, {} tokens",
        c.files.len(),
        c.tokens
    );
    Ok(())
}

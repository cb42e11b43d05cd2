//! Collects like the server does, from the command line: for whole-process timing (hyperfine)
//! and peak memory (`/usr/bin/time -v`). Loads the tokenizer, collects, prints a summary.
//!
//! `cargo run --release --example collect -- ROOT BUDGET [PATH...]` (PATH defaults to `.`)

use gemini_mcp_server::collector::{CollectRequest, Collector};
use gemini_mcp_server::config::Config;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `GEMINI_MCP_LOG=gemini_mcp_server=debug` shows the collector's own timing and counters.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("GEMINI_MCP_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let mut args = std::env::args().skip(1);
    let root = args.next().ok_or("usage: collect ROOT BUDGET [PATH...]")?;
    let budget: u64 = args
        .next()
        .ok_or("usage: collect ROOT BUDGET [PATH...]")?
        .parse()?;
    let mut paths: Vec<String> = args.collect();
    if paths.is_empty() {
        paths.push(".".into());
    }
    let config = Config::for_tests(std::path::Path::new(&root));
    let mut collector = Collector::new(&config.collector())?;
    if let Some(t) = std::env::var("COLLECT_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
    {
        collector = collector.with_threads(t);
    }
    let req = CollectRequest {
        paths,
        budget,
        already_sent: Default::default(),
        ignore: None,
    };
    // `COLLECT_REPEAT=n` collects n times (the first pays for loading the tokenizer).
    let repeat: usize = std::env::var("COLLECT_REPEAT")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let mut c = collector.collect(&req)?;
    for _ in 1..repeat {
        c = collector.collect(&req)?;
    }
    println!(
        "sent {} files, {} tokens of {budget}; left out {}; {} redactions",
        c.files.len(),
        c.tokens,
        c.skipped.len(),
        c.redactions.total()
    );
    Ok(())
}

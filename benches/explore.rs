//! The explore benchmark (BENCHMARKS.md § Explore): what one step of an investigation costs us.
//!
//! `cargo bench --bench explore` measures, in one run:
//! - `search_text` over the generated 100,000-file tree (sandbox, ignore files, secret names,
//!   redaction, every core) next to `rg` on the same tree and pattern: a pattern found nowhere
//!   (the whole tree is read) and a common one (we stop counting at 1,000 hits, `rg` does not);
//! - `read_file` of a 2,000-line range of a 10,000-line file next to reading and numbering the
//!   same lines with the standard library (the result cap raised so the whole range is read);
//! - building and serialising the request of step 25 of an investigation (25 turns of calls and
//!   8 KB results) next to serialising an already built request.
//!
//! Environment: `BENCH_TREE` (default `/tmp/bench/tree100k`, generated on first use),
//! `BENCH_RUNS` (default 10), `BENCH_RG` (default `rg`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gemini_mcp_server::collector::Collector;
use gemini_mcp_server::config::Config;
use gemini_mcp_server::explore::Explorer;
use gemini_mcp_server::gemini::api::wire::build_request;
use gemini_mcp_server::gemini::{
    Catalogue, Functions, GenerateRequest, Message, Part, Role, ThinkingMode,
};
use serde_json::json;

type Error = Box<dyn std::error::Error>;

#[path = "support/tree.rs"]
mod tree;
use tree::generate_tree;

fn main() -> Result<(), Error> {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let tree =
        PathBuf::from(std::env::var("BENCH_TREE").unwrap_or_else(|_| "/tmp/bench/tree100k".into()));
    if !tree.join(".complete").exists() {
        let t = Instant::now();
        generate_tree(&tree, 100_000)?;
        eprintln!("generated {} in {:.1?}", tree.display(), t.elapsed());
    }
    println!(
        "| measure | ours median ms | min | max | baseline | baseline median ms | ours ÷ baseline |"
    );
    println!("|---|---|---|---|---|---|---|");
    search(&tree, runs)?;
    read(runs)?;
    request(runs)?;
    Ok(())
}

fn search(tree: &Path, runs: usize) -> Result<(), Error> {
    let collector = Collector::new(&Config::for_tests(tree).collector())?;
    let explorer = Explorer::new(Arc::new(collector));
    let rg = std::env::var("BENCH_RG").unwrap_or_else(|_| "rg".into());
    for (what, pattern, glob) in [
        (
            "search_text, found nowhere (whole tree read)",
            "no_such_identifier_anywhere",
            None,
        ),
        (
            "search_text, common (we stop counting at 1,000)",
            "compute(input",
            None,
        ),
        (
            "search_text, glob matching no file (the walk alone)",
            "no_such_identifier_anywhere",
            Some("**/*.none"),
        ),
    ] {
        let args = match glob {
            Some(g) => json!({ "pattern": pattern, "glob": g }),
            None => json!({ "pattern": pattern }),
        };
        // One warm-up run each (page cache), then the measured runs.
        let first = explorer.execute("search_text", &args);
        assert!(first.ok, "{}", first.text);
        let ours = timed(runs, || {
            std::hint::black_box(explorer.execute("search_text", &args));
        });
        let run_rg = || -> Result<(), Error> {
            let mut command = Command::new(&rg);
            command.args(["--fixed-strings", "--count-matches", pattern]);
            if let Some(g) = glob {
                command.args(["--glob", g]);
            }
            let status = command.arg(tree).stdout(Stdio::null()).status()?;
            // rg exits 1 when nothing matched.
            if status.code().is_some_and(|c| c <= 1) {
                Ok(())
            } else {
                Err(format!("{rg} failed: {status}").into())
            }
        };
        run_rg()?;
        let mut baseline = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            run_rg()?;
            baseline.push(t.elapsed());
        }
        let flags = if glob.is_some() { " --glob" } else { "" };
        row(
            what,
            &ours,
            &format!("`rg -F --count-matches{flags}`"),
            &baseline,
        );
    }
    Ok(())
}

fn read(runs: usize) -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let root = std::fs::canonicalize(dir.path())?;
    let body: String = (1..=10_000)
        .map(|n| format!("    let value_{n} = compute(input, offset + {n})?; // step {n}\n"))
        .collect();
    std::fs::write(root.join("big.rs"), &body)?;
    let collector = Collector::new(&Config::for_tests(&root).collector())?;
    // The whole range, not the default 32,000-character cap on one result.
    let explorer = Explorer::new(Arc::new(collector)).with_result_chars(1 << 20);
    let args = json!({ "path": "big.rs", "start_line": 4001, "end_line": 6000 });
    let first = explorer.execute("read_file", &args);
    assert!(first.ok && first.text.contains("6000│"), "{}", first.text);
    let ours = timed(runs * 10, || {
        std::hint::black_box(explorer.execute("read_file", &args));
    });
    let path = root.join("big.rs");
    let baseline = timed(runs * 10, || {
        let text = std::fs::read_to_string(&path).unwrap();
        let mut out = String::new();
        for (i, line) in text.lines().enumerate().skip(4000).take(2000) {
            out.push_str(&format!("{}│ {line}\n", i + 1));
        }
        std::hint::black_box(out);
    });
    row(
        "read_file, lines 4001–6000 of 10,000",
        &ours,
        "read + number the lines (std)",
        &baseline,
    );
    Ok(())
}

fn request(runs: usize) -> Result<(), Error> {
    let model = Catalogue::builtin(
        "pro",
        gemini_mcp_server::gemini::prices::PriceList::default(),
    )
    .resolve("pro")?;
    let result: String = (1..=100)
        .map(|n| format!("{n}│     let value = compute(input, offset)?; // line {n}\n"))
        .collect();
    let mut contents = vec![Message::user(
        "Task: find where the rate limiter admits a request and why bursts pass.",
    )];
    for step in 0..25 {
        contents.push(Message {
            role: Role::Model,
            parts: vec![Part::Recorded(json!({
                "functionCall": {"name": "read_file", "args": {"path": format!("src/m{step}.rs")}},
                "thoughtSignature": "c2lnbmF0dXJl".repeat(40),
            }))],
        });
        contents.push(Message {
            role: Role::User,
            parts: vec![Part::FunctionResponse {
                id: None,
                name: "read_file".into(),
                response: json!({ "output": result }),
            }],
        });
    }
    let req = GenerateRequest {
        model,
        system_instruction: "You are a senior engineer investigating a codebase. ".repeat(60),
        contents,
        thinking: ThinkingMode::High,
        temperature: None,
        response_schema: None,
        web_search: false,
        cache: None,
        previous: None,
        agent: None,
        functions: Some(Functions {
            declarations: Explorer::declarations(),
            allow: true,
        }),
    };
    let mut bytes = 0;
    let ours = timed(runs * 20, || {
        let body = serde_json::to_vec(&build_request(&req)).unwrap();
        bytes = body.len();
        std::hint::black_box(body);
    });
    let built = build_request(&req);
    let baseline = timed(runs * 20, || {
        std::hint::black_box(serde_json::to_vec(&built).unwrap());
    });
    row(
        &format!(
            "request of step 25 built + serialised ({} KB)",
            bytes / 1024
        ),
        &ours,
        "serialise the built request",
        &baseline,
    );
    Ok(())
}

fn timed(runs: usize, mut f: impl FnMut()) -> Vec<Duration> {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect()
}

fn row(what: &str, ours: &[Duration], baseline_name: &str, baseline: &[Duration]) {
    let (o, b) = (median(ours), median(baseline));
    println!(
        "| {what} | {:.2} | {:.2} | {:.2} | {baseline_name} | {:.2} | {:.2} |",
        ms(o),
        ms(*ours.iter().min().unwrap()),
        ms(*ours.iter().max().unwrap()),
        ms(b),
        o.as_secs_f64() / b.as_secs_f64(),
    );
}

fn median(times: &[Duration]) -> Duration {
    let mut t = times.to_vec();
    t.sort();
    t[t.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

//! Benchmark: our overhead around one Gemini CLI call (private files, spawn in a new process
//! group, stdin, pipe readers, JSON parsing, group sweep, cleanup) beyond the CLI's own run time.
//!
//! A stand-in `gemini` (a POSIX shell script, on Windows a batch file, that reads its stdin and
//! prints the 0.61.0 success JSON) is run, interleaved, (a) directly with `std::process::Command` (same argv, prompt on
//! stdin, output read, nothing else) and (b) through `CliBackend::generate`. The difference of
//! the medians is our overhead.
//!
//! ```text
//! cargo run --release --example cli_overhead -- [runs=200]
//! ```

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gemini_mcp_server::config::Config;
use gemini_mcp_server::gemini::headless::CliBackend;
use gemini_mcp_server::gemini::{CallContext, Catalogue, GenerateRequest, Message, ThinkingMode};

/// The 0.61.0 success JSON.
const REPLY: &str = r#"{
  "session_id": "763d5045-1df8-49dc-abf0-0e2f94617d86",
  "response": "FAKE-REPLY: the code is fine",
  "stats": {
    "models": {
      "gemini-3.1-pro-preview": {
        "api": { "totalRequests": 1, "totalErrors": 0, "totalLatencyMs": 46, "errorsByType": {} },
        "tokens": { "input": 20, "prompt": 22, "candidates": 14, "total": 39, "cached": 2, "thoughts": 3, "tool": 0 },
        "roles": { "main": { "totalRequests": 1, "totalErrors": 0, "totalLatencyMs": 46, "tokens": { "input": 20, "prompt": 22, "candidates": 14, "total": 39, "cached": 2, "thoughts": 3, "tool": 0 } } }
      }
    },
    "tools": { "totalCalls": 0, "totalSuccess": 0, "totalFail": 0, "totalDurationMs": 0,
               "totalDecisions": { "accept": 0, "reject": 0, "modify": 0, "auto_accept": 0 }, "byName": {} },
    "files": { "totalLinesAdded": 0, "totalLinesRemoved": 0 }
  }
}
"#;

/// Writes the stand-in `gemini` into `dir`, executable.
#[cfg(unix)]
fn stand_in(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let program = dir.join("gemini");
    let script = format!("#!/bin/sh\ncat > /dev/null\ncat <<'JSON'\n{REPLY}JSON\n");
    std::fs::write(&program, script).expect("write the stand-in");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    program
}

/// Writes the stand-in `gemini.cmd` into `dir`, its reply beside it.
#[cfg(windows)]
fn stand_in(dir: &Path) -> PathBuf {
    let program = dir.join("gemini.cmd");
    std::fs::write(dir.join("reply.json"), REPLY).expect("write the reply");
    let script = "@echo off\r\nfindstr \"^\" > NUL\r\ntype \"%~dp0reply.json\"\r\n";
    std::fs::write(&program, script).expect("write the stand-in");
    program
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let bin = tempfile::tempdir().expect("temp dir");
    let root = tempfile::tempdir().expect("temp dir");
    let program = stand_in(bin.path());
    let config = Config::for_tests(root.path());
    let backend = CliBackend::new(program.clone(), &config.gemini());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let model = Catalogue::builtin(
        "pro",
        gemini_mcp_server::gemini::prices::PriceList::default(),
    )
    .resolve("pro")
    .expect("model");

    println!("runs per case: {runs}; stand-in: {}", program.display());
    for (label, prompt_bytes) in [("10 KB prompt", 10 << 10), ("1 MB prompt", 1 << 20)] {
        let prompt = "x".repeat(prompt_bytes - 1) + "\n";
        let req = GenerateRequest {
            model: model.clone(),
            system_instruction: "You are a careful reviewer.\n".repeat(100),
            contents: vec![
                Message::user("Earlier question."),
                Message::model("Earlier answer."),
                Message::user(prompt.clone()),
            ],
            thinking: ThinkingMode::Medium,
            temperature: None,
            response_schema: None,
            web_search: false,
            cache: None,
            previous: None,
            agent: None,
            functions: None,
        };
        let mut direct = Vec::with_capacity(runs);
        let mut ours = Vec::with_capacity(runs);
        // Warm up both paths (page cache, the runtime's blocking pool).
        run_direct(&program, root.path(), &prompt);
        rt.block_on(backend.generate(&req, &CallContext::default()))
            .expect("call");
        for _ in 0..runs {
            direct.push(run_direct(&program, root.path(), &prompt));
            let t = Instant::now();
            let resp = rt
                .block_on(backend.generate(&req, &CallContext::default()))
                .expect("call");
            ours.push(t.elapsed());
            assert_eq!(resp.text, "FAKE-REPLY: the code is fine");
        }
        let (d, o) = (stats(&mut direct), stats(&mut ours));
        println!("\n{label}");
        println!(
            "  stand-in run directly : median {:>7.3} ms  p90 {:>7.3} ms",
            ms(d.0),
            ms(d.1)
        );
        println!(
            "  through CliBackend    : median {:>7.3} ms  p90 {:>7.3} ms",
            ms(o.0),
            ms(o.1)
        );
        println!(
            "  overhead (median diff): {:>7.3} ms   ratio {:.2}x",
            ms(o.0) - ms(d.0),
            ms(o.0) / ms(d.0)
        );
    }
}

/// The stand-in run as plainly as possible: same argv, prompt on stdin, stdout read, wait.
fn run_direct(program: &Path, cwd: &Path, prompt: &str) -> Duration {
    let t = Instant::now();
    let mut child = Command::new(program)
        .args(["-o", "json", "-m", "gemini-3.1-pro-preview"])
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = prompt.to_string();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read");
    let _ = writer.join();
    child.wait().expect("wait");
    let elapsed = t.elapsed();
    assert!(out.contains("FAKE-REPLY"));
    elapsed
}

/// Median and 90th percentile.
fn stats(v: &mut [Duration]) -> (Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[v.len() * 9 / 10])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

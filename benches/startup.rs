//! Cold start: spawn a server, complete `initialize` + `tools/list` over stdio, and read its peak
//! RSS (VmHWM) right after the `tools/list` answer. Runs our release binary and, when given, other
//! server commands in the same run for a baseline.
//!
//! ```sh
//! cargo bench --bench startup -- [RUNS] [-- NAME=COMMAND ...]
//! cargo bench --bench startup -- 50 -- "peer=/work/peer/venv-early/bin/python /work/peer/early/server.py"
//! ```

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;

struct Sample {
    elapsed: Duration,
    hwm_kb: u64,
    list_bytes: usize,
}

fn run_once(argv: &[String], cwd: &std::path::Path) -> Result<Sample, String> {
    let start = Instant::now();
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(cwd)
        .env("GEMINI_API_KEY", "bench-dummy-key")
        .env("GEMINI_MCP_STORE", "memory")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn {}: {e}", argv[0]))?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let mut line = String::new();
    writeln!(stdin, "{INIT}").map_err(|e| e.to_string())?;
    stdin.flush().map_err(|e| e.to_string())?;
    loop {
        line.clear();
        stdout.read_line(&mut line).map_err(|e| e.to_string())?;
        if line.is_empty() {
            return Err("server closed stdout before answering initialize".into());
        }
        if line.contains("\"id\":0") {
            break;
        }
    }
    writeln!(stdin, "{INITIALIZED}\n{LIST}").map_err(|e| e.to_string())?;
    stdin.flush().map_err(|e| e.to_string())?;
    loop {
        line.clear();
        stdout.read_line(&mut line).map_err(|e| e.to_string())?;
        if line.is_empty() {
            return Err("server closed stdout before answering tools/list".into());
        }
        if line.contains("\"id\":1") {
            break;
        }
    }
    let elapsed = start.elapsed();
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    let hwm_kb = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    drop(stdin);
    let _ = child.wait();
    Ok(Sample {
        elapsed,
        hwm_kb,
        list_bytes: line.len(),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let mut args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let runs: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(30);
    if args.first().is_some_and(|a| a.parse::<usize>().is_ok()) {
        args.remove(0);
    }
    let mut targets: Vec<(String, Vec<String>)> = vec![(
        "gemini-mcp".into(),
        vec![concat!(env!("CARGO_MANIFEST_DIR"), "/target/release/gemini-mcp").into()],
    )];
    for a in args.iter().filter(|a| *a != "--") {
        if let Some((name, cmd)) = a.split_once('=') {
            targets.push((
                name.into(),
                cmd.split_whitespace().map(String::from).collect(),
            ));
        }
    }
    let cwd = std::env::temp_dir();
    println!("{runs} runs each, interleaved; cwd {}", cwd.display());
    let mut results: Vec<Vec<Sample>> = targets.iter().map(|_| Vec::new()).collect();
    for _ in 0..runs {
        for (i, (name, argv)) in targets.iter().enumerate() {
            // A target's own working directory: its script's folder for interpreters.
            let dir = argv
                .get(1)
                .map(std::path::Path::new)
                .and_then(|p| p.parent())
                .filter(|p| p.is_dir())
                .map(|p| p.to_path_buf())
                .unwrap_or_else(|| cwd.clone());
            match run_once(argv, &dir) {
                Ok(s) => results[i].push(s),
                Err(e) => {
                    eprintln!("{name}: {e}");
                    std::process::exit(1);
                }
            }
        }
    }
    let base = median(
        results[0]
            .iter()
            .map(|s| s.elapsed.as_secs_f64() * 1e3)
            .collect(),
    );
    println!(
        "| server | median ms | min ms | max ms | peak RSS MB (median) | tools/list bytes | ratio |"
    );
    println!("|---|---|---|---|---|---|---|");
    for ((name, _), samples) in targets.iter().zip(&results) {
        let ms: Vec<f64> = samples
            .iter()
            .map(|s| s.elapsed.as_secs_f64() * 1e3)
            .collect();
        let min = ms.iter().copied().fold(f64::MAX, f64::min);
        let max = ms.iter().copied().fold(0.0, f64::max);
        let med = median(ms);
        let rss = median(samples.iter().map(|s| s.hwm_kb as f64 / 1024.0).collect());
        println!(
            "| {name} | {med:.2} | {min:.2} | {max:.2} | {rss:.1} | {} | {:.1}x |",
            samples[0].list_bytes,
            med / base
        );
    }
}

//! The release binary serving Streamable HTTP for the HTTP benches (`http_load`, `http_sessions`),
//! and what they read of it from `/proc`: resident memory, CPU time, open descriptors.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The server under test: `GEMINI_MCP_BIN` (to compare two builds in one run), else the
/// release build.
pub fn binary() -> String {
    std::env::var("GEMINI_MCP_BIN").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/target/release/gemini-mcp").into()
    })
}

pub struct Server {
    pub child: Child,
    /// `http://127.0.0.1:<port>/mcp`
    pub url: String,
    /// What the server wrote on stderr after its greeting (the first 50 lines).
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `gemini-mcp serve --http 127.0.0.1:0` against the fake Gemini at `gemini_base`,
/// working in `root`, with a clean environment plus `env`; the memory store unless `redis`
/// names a Redis. `nofile`: the server's soft and hard limit of open files (through
/// `prlimit`), else the bench's own.
pub fn start(
    gemini_base: &str,
    root: &std::path::Path,
    redis: Option<&str>,
    env: &[(&str, String)],
    nofile: Option<u64>,
) -> Server {
    let mut cmd = match nofile {
        Some(n) => {
            let mut c = Command::new("prlimit");
            c.arg(format!("--nofile={n}:{n}")).arg("--").arg(binary());
            c
        }
        None => Command::new(binary()),
    };
    cmd.args(["serve", "--http", "127.0.0.1:0"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", root)
        .env("PROJECT_ROOT", root)
        .env("GEMINI_MCP_STATE_DIR", root.join(".state"))
        .env("GEMINI_API_KEY", "bench-key")
        .env("GEMINI_BASE_URL", gemini_base)
        .env("GEMINI_MCP_LOG", "warn")
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    match redis {
        Some(url) => cmd.env("GEMINI_MCP_STORE", "redis").env("REDIS_URL", url),
        None => cmd.env("GEMINI_MCP_STORE", "memory"),
    };
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .expect("spawn the release gemini-mcp (cargo build --release first)");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("the server printed its address")
            .expect("read stderr");
        if let Some(rest) = line.split("at http://").nth(1) {
            let addr = rest.split("/mcp").next().unwrap_or_default();
            break format!("http://{addr}/mcp");
        }
    };
    // Keep draining stderr so the server never blocks on it; keep the first lines.
    let log = Arc::new(Mutex::new(Vec::new()));
    let kept = log.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
            if kept.len() < 50 {
                kept.push(line);
            }
        }
    });
    // Under prlimit the pid is the server's: prlimit sets the limit and execs it.
    Server { child, url, log }
}

/// (VmRSS, VmHWM) in MB.
pub fn rss(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// CPU time the process has used (user + system), in ms.
pub fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
    let hz = 100.0;
    (ticks(11) + ticks(12)) * 1000.0 / hz
}

/// Open file descriptors of the process.
pub fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

/// Resets the process's peak RSS (VmHWM) to its current RSS.
pub fn reset_peak(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The nearest-rank percentile `p` (0–100) of `v`.
pub fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * (v.len() as f64 - 1.0)).round() as usize;
    v[rank.min(v.len() - 1)]
}

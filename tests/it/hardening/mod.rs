//! The hardening suite (issue 7): the server under hostile input, faults and load, as a client
//! sees it. Every test is named `hardening::…`, so `cargo test --test it hardening::` runs
//! exactly this suite.
//!
//! - `protocol`: raw JSON-RPC lines over stdio (malformed, unknown, wrongly typed, huge, after a
//!   cancel) and a long mixed load with an RSS bound;
//! - `gemini_faults`: concurrent calls against a fake Gemini that answers 429s, 503s, late,
//!   malformed, broken and blocked;
//! - `redis_faults`: concurrent turns while redis-server is killed and restarted;
//! - `git_escape`: git metadata leading outside the root, FIFOs as git and ignore files, vendored
//!   nested repositories;
//! - `paths`: a generated corpus of hostile paths through the sandbox, the collector and the tools;
//! - `process`: SIGINT/SIGTERM to the stdio server, idle and with a call in flight;
//! - `fuzz`: the bodies of the `fuzz/` targets run on stable for a bounded number of inputs;
//! - `setting_files`: the files settings name, pointed at a device, a FIFO, a directory, a huge
//!   file: start-up refused, naming the setting.
//!
//! Long forms run with `GEMINI_MCP_LONG_TESTS=1`; by default (CI) each test is bounded so that
//! the suite stays well under a minute and a half on two cores. Time bounds here only detect
//! hangs: they are generous on purpose and are never performance targets.

pub mod adversarial;
mod fuzz;
pub mod fuzz_bodies;
mod gemini_faults;
mod git_escape;
mod paths;
// Signals; on Windows the counterparts are Ctrl-C and Ctrl-Break to a console process group.
#[cfg(unix)]
mod process;
mod protocol;
mod redis_faults;
mod secrets;
// FIFOs and /dev/zero.
#[cfg(unix)]
mod setting_files;

use std::path::Path;
use std::time::Duration;

use crate::support::fake_gemini::FakeGemini;
use crate::support::mcp::{self, KEY};

/// `GEMINI_MCP_LONG_TESTS=1` (or any non-empty value but `0`) switches on the long forms.
pub fn long_tests() -> bool {
    std::env::var("GEMINI_MCP_LONG_TESTS").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The resident set size of a process, in KiB, from `/proc/<pid>/status`.
#[cfg(not(windows))]
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("VmRSS in /proc status")
}

/// The resident set size (working set) of a process, in KiB, from `GetProcessMemoryInfo`.
#[cfg(windows)]
pub fn rss_kib(pid: u32) -> u64 {
    use windows_sys::Win32::Foundation::CloseHandle;
    use windows_sys::Win32::System::ProcessStatus::{
        GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS,
    };
    use windows_sys::Win32::System::Threading::{
        OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_VM_READ,
    };
    // SAFETY: a handle opened here and closed below; `counters` is a plain C struct of the size
    // given.
    unsafe {
        let process = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION | PROCESS_VM_READ, 0, pid);
        assert!(!process.is_null(), "the process {pid} cannot be opened");
        let mut counters: PROCESS_MEMORY_COUNTERS = std::mem::zeroed();
        let size = std::mem::size_of::<PROCESS_MEMORY_COUNTERS>() as u32;
        let ok = GetProcessMemoryInfo(process, &mut counters, size);
        CloseHandle(process);
        assert!(ok != 0, "no memory counters for {pid}");
        counters.WorkingSetSize as u64 / 1024
    }
}

/// A project directory with a small source file, and a fake Gemini API.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub fake: FakeGemini,
}

impl Env {
    pub fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("main.rs"),
            "fn main() {\n    println!(\"hi\");\n}\n",
        )
        .unwrap();
        Env {
            dir,
            fake: FakeGemini::start(),
        }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// The variables that point the server at the fake, plus `extra`.
    pub fn vars<'a>(
        &'a self,
        base: &'a str,
        extra: &[(&'a str, &'a str)],
    ) -> Vec<(&'a str, &'a str)> {
        let mut v = vec![("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", base)];
        v.extend_from_slice(extra);
        v
    }

    pub async fn client(&self, extra: &[(&str, &str)]) -> mcp::Client {
        let base = self.fake.base_url();
        mcp::start(self.root(), &self.vars(&base, extra)).await
    }
}

/// Awaits `f`, failing the test (instead of hanging it) after `limit`.
pub async fn within<T>(limit: Duration, what: &str, f: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(limit, f).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: no answer within {limit:?} (a hang)"),
    }
}

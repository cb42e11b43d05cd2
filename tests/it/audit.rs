//! The audit log (`GEMINI_MCP_AUDIT_LOG`) as a security team relies on it: one whole line per
//! call from many concurrent clients, each naming its client, with the hashes of what was sent;
//! a writer killed mid-line leaves one torn line that the reader skips and reports. (That no
//! secret value reaches the log is checked by `hardening::secrets`.)

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use gemini_mcp_server::audit::{AuditLog, FileKind, Record, Settings};
use serde_json::json;
use sha2::Digest;

use crate::support::fake_gemini::FakeGemini;
use crate::support::http::{HttpServer, Raw};
use crate::support::mcp::KEY;

fn sha256(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

fn records(log: &Path) -> Vec<Record> {
    std::fs::read_to_string(log)
        .expect("the audit log")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `gemini-mcp audit summary` on `log`: its exit code and stdout.
fn summary(root: &Path, log: &Path, args: &[&str]) -> (i32, String, String) {
    let out = crate::support::mcp::std_command(
        root,
        &[
            ("GEMINI_MCP_AUDIT_LOG", log.to_str().unwrap()),
            ("GEMINI_MCP_STORE", "memory"),
        ],
    )
    .args(["audit", "summary"])
    .args(args)
    .output()
    .expect("run gemini-mcp audit summary");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// 200 calls at once from two tokens: 200 whole lines, 100 per client, each with the file sent
/// (its SHA-256 that of the file's bytes) and the hash of its request exactly as the stand-in
/// Gemini received it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn audit_200_concurrent_http_calls_from_two_tokens_give_200_lines() {
    let dir = crate::support::project::with(&[crate::support::project::MAIN_RS]);
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("audit.jsonl");
    let fake = FakeGemini::start();
    let url = fake.base_url();
    let server = HttpServer::start(
        dir.path(),
        &[
            ("GEMINI_API_KEY", KEY),
            ("GEMINI_BASE_URL", url.as_str()),
            ("GEMINI_MCP_HTTP_TOKEN", "token-a,token-b"),
            ("GEMINI_MCP_HTTP_CLIENT_CONCURRENCY", "200"),
            ("GEMINI_MCP_RATE_LIMITS", "off"),
            ("GEMINI_MCP_AUDIT_LOG", log.to_str().unwrap()),
        ],
    )
    .await;
    let calls: Vec<_> = (0..200u64)
        .map(|i| {
            let token = if i % 2 == 0 { "token-a" } else { "token-b" };
            let client =
                Raw::new(&server.url()).header("authorization", &format!("Bearer {token}"));
            tokio::spawn(async move {
                client
                    .call(
                        i + 1,
                        "chat",
                        json!({"prompt": format!("call {i}"), "files": ["main.rs"]}),
                    )
                    .await
            })
        })
        .collect();
    for c in calls {
        let answer = c.await.unwrap();
        assert!(
            answer.message["result"]["isError"] != true && answer.message["result"].is_object(),
            "{}",
            answer.text
        );
    }
    let records = records(&log);
    assert_eq!(records.len(), 200);
    let mut per_client: HashMap<&str, usize> = HashMap::new();
    for r in &records {
        *per_client.entry(r.client.as_str()).or_default() += 1;
    }
    assert_eq!(
        per_client,
        HashMap::from([("token#1", 100), ("token#2", 100)])
    );
    let sent: std::collections::HashSet<String> = fake
        .requests()
        .iter()
        .filter(|r| r.is_generate())
        .map(|r| sha256(r.raw_body.as_bytes()))
        .collect();
    let main_rs = sha256(crate::support::project::MAIN_RS.1.as_bytes());
    let root = dir.path().canonicalize().unwrap();
    for r in &records {
        assert_eq!(
            (r.tool.as_str(), r.outcome.as_str()),
            ("chat", "ok"),
            "{r:?}"
        );
        assert_eq!(r.project, [root.display().to_string()]);
        assert_eq!(r.files.len(), 1, "{r:?}");
        let f = &r.files[0];
        assert_eq!(
            (f.path.as_str(), f.kind, f.sha256.as_str(), f.bytes),
            ("main.rs", FileKind::File, main_rs.as_str(), 13)
        );
        assert!(f.tokens > 0);
        assert_eq!(r.requests.len(), 1, "{r:?}");
        assert!(
            sent.contains(&r.requests[0]),
            "the request hash is not that of a body Gemini received"
        );
        assert!(r.usage.input > 0 && r.time.ends_with('Z'), "{r:?}");
    }
    // The reader agrees.
    let (code, out, err) = summary(dir.path(), &log, &["--by", "client"]);
    assert_eq!(code, 0, "{err}");
    let row = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(name))
            .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_string())
    };
    assert_eq!(row("token#1").as_deref(), Some("100"), "{out}");
    assert_eq!(row("token#2").as_deref(), Some("100"), "{out}");
    assert_eq!(row("total").as_deref(), Some("200"), "{out}");
    assert!(!out.contains("partial"), "{out}");
}

/// The environment variable that makes [`audit_writer_child`] write.
const CHILD: &str = "GEMINI_MCP_AUDIT_TEST_CHILD";

/// The record the killed writer writes: about 24 MB, so that one write takes long enough to be
/// caught in the middle.
fn huge_record() -> Record {
    let mut r: Record = serde_json::from_value(json!({
        "time": "2026-11-27T08:00:00.000Z", "client": "token#9", "project": ["/p"],
        "tool": "chat", "model": "gemini-3.8-flash", "thread": null, "files": [],
        "redactions": {}, "requests": [], "usage": {"input": 1, "output": 1, "thinking": 0,
        "cached": 0}, "cost_usd": 0.0, "outcome": "ok"
    }))
    .unwrap();
    r.read = (0..400_000)
        .map(|i| format!("src/module_{i:08}/file_{i:08}.rs"))
        .collect();
    r
}

/// Not a test on its own: the writer that [`audit_a_writer_killed_mid_line_leaves_one_partial_line`]
/// runs in a child process and kills. It appends the huge record to the log named by
/// [`CHILD`] through the real writer, until killed; run any other way (`--include-ignored`), it
/// does nothing.
#[test]
#[ignore = "the child process of the kill test; it runs it"]
fn audit_writer_child() {
    let Some(path) = std::env::var_os(CHILD) else {
        return;
    };
    let log = AuditLog::new(Settings {
        path: path.into(),
        max_bytes: u64::MAX,
    });
    let line = serde_json::to_vec(&huge_record()).unwrap();
    loop {
        log.append_line(&line).unwrap();
    }
}

/// Starts [`audit_writer_child`] appending the huge record to `log`.
fn start_writer(log: &Path) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "audit::audit_writer_child",
            "--exact",
            "--ignored",
            "--quiet",
        ])
        .env(CHILD, log)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Kills `child` (and waits for it) once `when` holds for the size of `log`; that size.
fn kill_when(child: &mut std::process::Child, log: &Path, when: impl Fn(u64) -> bool) -> u64 {
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the writer wrote nothing"
        );
        let size = std::fs::metadata(log).map_or(0, |m| m.len());
        if when(size) {
            child.kill().unwrap();
            child.wait().unwrap();
            return size;
        }
        std::thread::yield_now();
    }
}

/// Appends one small `token#1` record after the killed writer, through the real writer.
fn append_after(log: &Path) {
    let after = AuditLog::new(Settings {
        path: log.to_path_buf(),
        max_bytes: u64::MAX,
    });
    let mut last = huge_record();
    last.read.clear();
    last.client = "token#1".into();
    after.append(&last).unwrap();
}

/// `gemini-mcp audit summary --by client` on `log`: what it says, and its count for `client`.
fn summary_by_client(root: &Path, log: &Path) -> (String, impl Fn(&str) -> Option<u64>) {
    let (code, out, err) = summary(root, log, &["--by", "client"]);
    assert_eq!(code, 0, "{err}");
    let said = out.clone();
    let calls = move |name: &str| {
        said.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse::<u64>().ok())
    };
    (out, calls)
}

/// A writer killed with SIGKILL in the middle of a line (seen by the log's size: not a whole
/// number of lines) leaves exactly one torn line; the next writer starts a fresh line after it,
/// and `gemini-mcp audit summary` counts every whole line and reports the torn one. (Windows:
/// the test below.)
#[cfg(unix)]
#[test]
fn audit_a_writer_killed_mid_line_leaves_one_partial_line() {
    let line = serde_json::to_vec(&huge_record()).unwrap().len() as u64 + 1;
    let root = tempfile::tempdir().unwrap();
    // Killed between two writes instead (the write finished between the look and the kill),
    // it is tried again, up to a bound.
    for attempt in 0..10 {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.jsonl");
        let mut child = start_writer(&log);
        // Mid-line, after at least one whole line.
        let torn_at = kill_when(&mut child, &log, |size| {
            size > line && !size.is_multiple_of(line)
        });
        let size = std::fs::metadata(&log).unwrap().len();
        if size.is_multiple_of(line) {
            eprintln!("attempt {attempt}: the write ended before the kill");
            continue;
        }
        assert!(size >= torn_at);
        let whole = size / line;
        // Another writer comes after the killed one.
        append_after(&log);
        let (out, calls) = summary_by_client(root.path(), &log);
        assert!(out.contains("1 partial line skipped"), "{out}");
        assert_eq!(calls("token#9"), Some(whole), "{out}");
        assert_eq!(calls("token#1"), Some(1), "{out}");
        assert_eq!(calls("total"), Some(whole + 1), "{out}");
        return;
    }
    panic!("in 10 attempts the writer was never killed in the middle of a line");
}

/// A writer ended by `TerminateProcess` (`Child::kill`) while it writes: Windows' kill is not
/// seen to tear a line (a `WriteFile` under way is finished first; under Wine the size was
/// never caught mid-line after the kill), so what is checked is what any kill may leave: whole
/// lines and at most one torn line; the next writer's line whole after them; the summary
/// counting every whole line and reporting a torn one if there is one.
#[cfg(windows)]
#[test]
fn audit_a_writer_killed_while_writing_leaves_a_log_the_next_writer_and_the_summary_can_use() {
    let line = serde_json::to_vec(&huge_record()).unwrap().len() as u64 + 1;
    let root = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let mut child = start_writer(&log);
    // After at least one whole line, with the next under way.
    kill_when(&mut child, &log, |size| size > line);
    // Under the log's lock, which the killed writer no longer holds.
    append_after(&log);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Option<Record>> = text
        .split_terminator('\n')
        .map(|l| serde_json::from_str(l).ok())
        .collect();
    let torn = lines.iter().filter(|r| r.is_none()).count() as u64;
    let whole = lines
        .iter()
        .flatten()
        .filter(|r| r.client == "token#9")
        .count() as u64;
    eprintln!("the kill left {whole} whole line(s) and {torn} torn");
    assert!(torn <= 1, "{torn} torn lines");
    assert!(whole >= 1, "no whole line before the kill");
    assert_eq!(
        lines
            .last()
            .and_then(|r| r.as_ref())
            .map(|r| r.client.as_str()),
        Some("token#1"),
        "the next writer's line is not whole at the end"
    );
    let (out, calls) = summary_by_client(root.path(), &log);
    assert_eq!(calls("token#9"), Some(whole), "{out}");
    assert_eq!(calls("token#1"), Some(1), "{out}");
    assert_eq!(calls("total"), Some(whole + 1), "{out}");
    assert_eq!(
        out.contains("1 partial line skipped"),
        torn == 1,
        "the torn line reported iff there is one: {out}"
    );
}

/// The command line records its calls as `cli`: a precommit lists each diff it sent (path,
/// SHA-256 and size of the block as sent), and a call interrupted while Gemini thinks is still
/// recorded, as `abandoned`.
#[cfg(unix)]
#[test]
fn audit_the_command_line_records_its_diffs_and_an_interrupted_call() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let log = root.join(".audit/audit.jsonl");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    let repo = git2::Repository::init(&root).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), "pub fn one() -> u32 {\n    1\n}\n").unwrap();
    let mut index = repo.index().unwrap();
    index.add_path(Path::new("src/lib.rs")).unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("Test", "test@example.com").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "one", &tree, &[])
        .unwrap();
    std::fs::write(root.join("src/lib.rs"), "pub fn one() -> u32 {\n    2\n}\n").unwrap();

    let fake = FakeGemini::start();
    let url = fake.base_url();
    let vars = [
        ("GEMINI_API_KEY", KEY),
        ("GEMINI_BASE_URL", url.as_str()),
        ("GEMINI_MCP_AUDIT_LOG", log.to_str().unwrap()),
    ];
    let out = crate::support::mcp::std_command(&root, &vars)
        .arg("precommit")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let r = &records(&log)[0];
    assert_eq!(
        (r.client.as_str(), r.tool.as_str()),
        ("cli", "precommit"),
        "{stderr}"
    );
    let diff = r
        .files
        .iter()
        .find(|f| f.kind == FileKind::Diff)
        .unwrap_or_else(|| panic!("no diff listed: {r:?}"));
    assert_eq!(diff.path, "src/lib.rs");
    assert!(
        diff.bytes > 0 && diff.tokens > 0 && diff.sha256.len() == 64,
        "{diff:?}"
    );
    let sent = &fake.generate_requests()[0].raw_body;
    assert_eq!(r.requests, [sha256(sent.as_bytes())]);

    // Gemini holds the next call until the command is stopped.
    fake.push(crate::support::fake_gemini::Script::echo().delay_headers(Duration::from_secs(60)));
    let mut child = crate::support::mcp::std_command(&root, &vars)
        .args(["chat", "a question"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while fake.generate_requests().len() < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the request never arrived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(2));
    let records = records(&log);
    assert_eq!(records.len(), 2);
    let r = &records[1];
    assert_eq!(
        (r.client.as_str(), r.tool.as_str(), r.outcome.as_str()),
        ("cli", "chat", "error")
    );
    assert_eq!(r.error.as_deref(), Some("abandoned"));
    assert!(r.requests.is_empty(), "no answer came: {r:?}");
}

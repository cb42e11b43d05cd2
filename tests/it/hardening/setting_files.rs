//! Files the settings name and the server reads whole at start (`GEMINI_MCP_CONFIG`, the token
//! files, `GEMINI_MCP_REDIS_CA_FILE`), pointed at what is not a small regular file: `/dev/zero`
//! (it never ends), a FIFO (its open waits for a writer), a directory and a file past 1 MiB. The
//! real binary refuses to start, naming the setting and what the path is. A harness deadline
//! kills a server that hangs and fails the case: it detects a hang, it is no speed target.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A hang detector, not a performance target.
const BOUND: Duration = Duration::from_secs(60);

/// Starts the stdio server with `vars` (stdin closed: a server that starts reads its end and
/// stops) and returns its exit code and stderr, or `None` when it had not exited within
/// [`BOUND`] (then it is killed).
fn start(root: &Path, vars: &[(&str, &str)]) -> Option<(i32, String)> {
    let mut child = crate::support::mcp::std_command(root, vars)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn gemini-mcp");
    let deadline = Instant::now() + BOUND;
    loop {
        if let Some(status) = child.try_wait().expect("wait for gemini-mcp") {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            return Some((status.code().unwrap_or(-1), err));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn hardening_setting_files_that_are_not_small_regular_files_stop_the_start_naming_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("src")).unwrap();
    let fifo = root.join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let a_dir = root.join("a-directory");
    std::fs::create_dir(&a_dir).unwrap();
    // Valid for each reader (TOML comments, token lines, PEM-looking text), only too long.
    let big = root.join("big");
    let line = "# a-comment-line-that-is-also-a-token\n";
    std::fs::write(&big, line.repeat((1 << 20) / line.len() + 1)).unwrap();
    let targets: [(PathBuf, &str); 4] = [
        ("/dev/zero".into(), "a character device"),
        (fifo, "a named pipe (FIFO)"),
        (a_dir, "a directory"),
        (big, "past the 1 MiB"),
    ];
    // The CA file is read when the store opens: a Redis that is not there is never reached.
    let closed = format!("redis://127.0.0.1:{}/0", crate::support::redis::free_port());
    let settings: [(&str, Vec<(&str, &str)>); 4] = [
        ("GEMINI_MCP_CONFIG", vec![]),
        ("GEMINI_MCP_HTTP_TOKEN_FILE", vec![]),
        ("GEMINI_MCP_METRICS_TOKEN_FILE", vec![]),
        (
            "GEMINI_MCP_REDIS_CA_FILE",
            vec![
                ("GEMINI_MCP_STORE", "redis"),
                ("REDIS_URL", closed.as_str()),
            ],
        ),
    ];
    let mut wrong = Vec::new();
    std::thread::scope(|s| {
        let runs: Vec<_> = settings
            .iter()
            .flat_map(|(setting, extra)| targets.iter().map(move |t| (setting, extra, t)))
            .map(|(setting, extra, (path, what))| {
                s.spawn(move || {
                    let path = path.to_str().unwrap();
                    let mut vars = extra.clone();
                    vars.push((setting, path));
                    let case = format!("{setting}={path}");
                    match start(root, &vars) {
                        None => Some(format!("{case}: still running after {BOUND:?}")),
                        Some((0, err)) => Some(format!("{case}: started (exit 0): {err}")),
                        Some((_, err))
                            if err.contains(setting)
                                && err.contains(path)
                                && err.contains(what) =>
                        {
                            None
                        }
                        Some((code, err)) => Some(format!(
                            "{case}: exit {code}, but stderr does not name the setting, the \
                             path and `{what}`: {err}"
                        )),
                    }
                })
            })
            .collect();
        wrong.extend(runs.into_iter().filter_map(|r| r.join().unwrap()));
    });
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Vertex AI's Application Default Credentials file is read whole by Google's auth library:
/// pointed at what is not a small regular file, the call fails at once, naming the setting and
/// what the path is, instead of hanging (a FIFO) or filling the memory (`/dev/zero`).
#[tokio::test]
async fn hardening_vertex_credentials_that_are_not_a_small_regular_file_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let fifo = root.join("adc-fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let big = root.join("adc-big.json");
    std::fs::write(&big, " ".repeat((1 << 20) + 1)).unwrap();
    let targets: [(PathBuf, &str); 3] = [
        ("/dev/zero".into(), "a character device"),
        (fifo, "a named pipe (FIFO)"),
        (big, "past the 1 MiB"),
    ];
    for (path, what) in targets {
        let path = path.to_str().unwrap();
        let client = crate::support::mcp::start(
            root,
            &[
                ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
                ("GOOGLE_CLOUD_PROJECT", "my-proj"),
                ("GOOGLE_APPLICATION_CREDENTIALS", path),
            ],
        )
        .await;
        let call =
            crate::support::mcp::call(&client, "chat", serde_json::json!({"prompt": "hello"}));
        let r = tokio::time::timeout(BOUND, call)
            .await
            .unwrap_or_else(|_| panic!("{path}: still running after {BOUND:?}"))
            .unwrap();
        let t = crate::support::mcp::text(&r);
        assert_eq!(r.is_error, Some(true), "{path}: {t}");
        assert!(
            t.contains("GOOGLE_APPLICATION_CREDENTIALS") && t.contains(path) && t.contains(what),
            "{path}: {t}"
        );
        client.cancel().await.unwrap();
    }
}

//! The process under signals, as clients stop it: Claude Code sends SIGINT, then SIGTERM 100 ms
//! later, then SIGKILL at 500 ms; Codex sends SIGTERM only. The stdio server must exit on the
//! first signal while its stdin is still open; a call in flight either finishes within the
//! shutdown grace (answered, its turn stored) or is abandoned (no answer, no turn) — a turn is
//! never stored half. The bounds here only detect a process that does not exit: the measured
//! figures are in BENCHMARKS.md.

use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::Env;
use crate::support::fake_gemini::Script;
use crate::support::mcp::{self, call};

/// A process that has not exited this long after a signal is stuck.
const EXIT_BOUND: Duration = Duration::from_secs(2);

/// The stdio server driven by raw lines, its stdin kept open.
struct Served {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Served {
    async fn start(env: &Env, extra: &[(&str, &str)]) -> Served {
        let base = env.fake.base_url();
        let mut child = mcp::command(env.root(), &env.vars(&base, extra))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn gemini-mcp");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut s = Served {
            child,
            stdin,
            lines,
        };
        s.send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "signals", "version": "1"}}}),
        )
        .await;
        let init = s.next().await.expect("an initialize reply");
        assert!(init["result"]["serverInfo"].is_object(), "{init}");
        s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        s
    }

    async fn send(&mut self, v: Value) {
        self.stdin
            .write_all(format!("{v}\n").as_bytes())
            .await
            .unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// The next message, or `None` once stdout is closed.
    async fn next(&mut self) -> Option<Value> {
        let line = self.lines.next_line().await.ok().flatten()?;
        Some(serde_json::from_str(&line).expect("stdout carries only JSON-RPC"))
    }

    fn signal(&self, s: Signal) {
        let pid = self.child.id().expect("still running");
        kill(Pid::from_raw(pid as i32), s).expect("send the signal");
    }

    /// Waits for the exit (stdin still open), failing the test after [`EXIT_BOUND`].
    async fn exit_code(&mut self, what: &str) -> (Option<i32>, Duration) {
        let start = Instant::now();
        match tokio::time::timeout(EXIT_BOUND, self.child.wait()).await {
            Ok(status) => (status.unwrap().code(), start.elapsed()),
            Err(_) => {
                panic!("{what}: the server was still running {EXIT_BOUND:?} after the signal")
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_stdio_server_exits_on_sigint_and_on_sigterm_with_stdin_open() {
    let env = Env::new();
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        let mut server = Served::start(&env, &[]).await;
        // Idle: the handshake is over and the server waits on stdin.
        tokio::time::sleep(Duration::from_millis(100)).await;
        server.signal(signal);
        let (code, _) = server.exit_code(&format!("{signal}")).await;
        assert_eq!(code, Some(0), "{signal}: a clean exit");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_stdio_server_exits_during_its_handshake() {
    let env = Env::new();
    let base = env.fake.base_url();
    // Started but never initialized: stdin open and silent.
    let mut child = mcp::command(env.root(), &env.vars(&base, &[]))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Give it the time to start listening for signals (the default action would also end it,
    // but with a signal instead of an exit code).
    tokio::time::sleep(Duration::from_millis(300)).await;
    kill(Pid::from_raw(child.id().unwrap() as i32), Signal::SIGTERM).unwrap();
    let status = tokio::time::timeout(EXIT_BOUND, child.wait())
        .await
        .expect("exits before the handshake too")
        .unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
}

/// Calls chat, waits until the fake Gemini has the request, signals, and returns the server's
/// answer to the call (if any) and its exit code.
async fn chat_then_signal(env: &Env, signals: &[Signal]) -> (Option<Value>, Option<i32>) {
    let mut server = Served::start(env, &[("GEMINI_MCP_STORE", "embedded")]).await;
    server
        .send(
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "chat", "arguments": {"prompt": "Is this safe?", "files": ["main.rs"]}}}),
        )
        .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while env.fake.generate_requests().is_empty() {
        assert!(Instant::now() < deadline, "the call never reached Gemini");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for (i, s) in signals.iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        server.signal(*s);
    }
    let mut answer = None;
    let read = tokio::time::timeout(EXIT_BOUND, async {
        while let Some(m) = server.next().await {
            if m["id"] == 7 {
                answer = Some(m);
            }
        }
    });
    assert!(
        read.await.is_ok(),
        "stdout still open {EXIT_BOUND:?} after the signal"
    );
    let (code, _) = server.exit_code("with a call in flight").await;
    (answer, code)
}

/// What a fresh server finds in the embedded store: the number of turns of the latest thread
/// (`None`: there is no thread) and the text Gemini is sent when continuing it.
async fn stored_turns(env: &Env) -> (Option<u64>, String) {
    env.fake.push(Script::text("continued"));
    let base = env.fake.base_url();
    let client = mcp::start(
        env.root(),
        &env.vars(&base, &[("GEMINI_MCP_STORE", "embedded")]),
    )
    .await;
    let r = call(
        &client,
        "chat",
        json!({"prompt": "And now?", "continuation_id": "latest"}),
    )
    .await;
    client.cancel().await.unwrap();
    match r {
        Ok(r) if r.is_error != Some(true) => {
            let s = r.structured_content.clone().expect("structured content");
            let left = s["remaining_turns"].as_u64().expect("remaining_turns");
            let sent = env
                .fake
                .generate_requests()
                .last()
                .map(|q| q.messages().into_iter().map(|(_, t)| t).collect::<String>())
                .unwrap_or_default();
            // Twenty calls per thread: the continuation is one of them.
            (Some(20 - left - 1), sent)
        }
        _ => (None, String::new()),
    }
}

/// An abandoned call is never answered as a success: it gets no answer, or (when the cancel is
/// written before the exit) an error saying it was cancelled.
fn assert_abandoned(answer: &Option<Value>) {
    if let Some(a) = answer {
        assert_eq!(a["result"]["isError"], json!(true), "{a}");
        let text = a["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.contains("cancelled"), "{a}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_stdio_shutdown_stores_a_turn_whole_or_not_at_all() {
    // Gemini answers within the shutdown grace: the call is answered and its turn stored whole.
    let env = Env::new();
    env.fake.push(
        Script::text("The whole answer, every word of it.")
            .delay_headers(Duration::from_millis(100)),
    );
    let (answer, code) = chat_then_signal(&env, &[Signal::SIGINT]).await;
    assert_eq!(code, Some(0));
    let answer = answer.expect("a call finishing within the grace is answered");
    assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
    let (turns, sent) = stored_turns(&env).await;
    assert_eq!(turns, Some(1), "the answered call's turn is stored");
    assert!(
        sent.contains("The whole answer, every word of it."),
        "the stored turn is whole: {sent}"
    );

    // Gemini is far slower than the grace: the call is abandoned, and nothing is stored.
    let env = Env::new();
    env.fake
        .push(Script::text("too late").delay_headers(Duration::from_secs(30)));
    let (answer, code) = chat_then_signal(&env, &[Signal::SIGTERM]).await;
    assert_eq!(code, Some(0));
    assert_abandoned(&answer);
    let (turns, _) = stored_turns(&env).await;
    assert_eq!(turns, None, "an abandoned call stores no turn");

    // Claude Code's sequence, SIGINT then SIGTERM: the second signal ends the grace at once.
    let env = Env::new();
    env.fake
        .push(Script::text("too late").delay_headers(Duration::from_secs(30)));
    let (answer, code) = chat_then_signal(&env, &[Signal::SIGINT, Signal::SIGTERM]).await;
    assert_eq!(code, Some(0));
    assert_abandoned(&answer);
    let (turns, _) = stored_turns(&env).await;
    assert_eq!(turns, None);
}

//! Hostile paths: a generated corpus (well over 200 inputs) of encodings, `..` forms, symlink
//! chains and loops out of the root, long names and paths over `PATH_MAX`, NUL bytes, Windows
//! forms, `~`, `/proc/self/root`, `/dev/stdin` and a FIFO, run against the tree of
//! [`fuzz_bodies::Tree`] (a canary secret outside the root):
//!
//! 1. each through `Sandbox::resolve`/`check` and `sandbox::open` ([`fuzz_bodies::check_path`]);
//! 2. each through the whole collector (resolve, walk, read, render): nothing outside is read;
//! 3. a sample through the server's tools (`files`, `images`, precommit's `path`): each call is a
//!    -32001 refusal, a -32602 argument error, or an answer whose files are inside the root (a
//!    clear skip is fine); and the canary never reaches the fake Gemini.
//!
//! Every input must finish within a bound (a FIFO or a symlink loop must not hang anything).

use std::path::{Component, Path};
use std::sync::mpsc;
use std::time::Duration;

use gemini_mcp_server::collector::{CollectError, CollectRequest, Collector};
use gemini_mcp_server::config::Config;
use serde_json::json;

use super::fuzz_bodies::{self, CANARY, Tree};
use super::within;
use crate::support::fake_gemini::FakeGemini;
use crate::support::mcp::{self, KEY, call, text};

/// Longest any one input may take (a hang detector).
const BOUND: Duration = Duration::from_secs(20);

/// Paths that lead (or try to lead) out of the root, as the tree names them.
fn targets(t: &Tree) -> Vec<String> {
    let outside = t.outside.display().to_string();
    let base = t.base.display().to_string();
    let root = t.root.display().to_string();
    vec![
        "../outside/secret.txt".into(),
        format!("{outside}/secret.txt"),
        format!("{root}/../outside/secret.txt"),
        format!("{root}-evil/secret.txt"),
        "../root-evil/secret.txt".into(),
        "esc/secret.txt".into(),
        "esc".into(),
        "esc_file".into(),
        "c1".into(),
        "c2".into(),
        "loop1".into(),
        "self".into(),
        "self/x".into(),
        "sub/up/../outside/secret.txt".into(),
        "sub/up/sub/up/sub/up/../outside".into(),
        format!("slash{base}/outside/secret.txt"),
        format!("procroot{outside}/secret.txt"),
        "procroot/etc/passwd".into(),
        "stdin".into(),
        "fifo".into(),
        format!("/proc/self/root{outside}/secret.txt"),
        "/proc/self/cwd/../../etc/passwd".into(),
        "/proc/self/fd/0".into(),
        "/proc/self/environ".into(),
        "/dev/stdin".into(),
        "/dev/zero".into(),
        "/dev/tty".into(),
        "/etc/passwd".into(),
        "/".into(),
        "~".into(),
        "~/.ssh/id_rsa".into(),
        "~root/.bashrc".into(),
        "$HOME/.ssh/id_rsa".into(),
        "..".into(),
        "../".into(),
        "../..".into(),
    ]
}

/// A named way of rewriting a path.
type Transform = (&'static str, fn(&str) -> String);

/// Ways of writing a path that naive checks mishandle.
fn transforms() -> Vec<Transform> {
    vec![
        ("as is", |p| p.to_string()),
        ("./ prefix", |p| format!("./{p}")),
        ("via a real dir", |p| format!("sub/../{p}")),
        ("doubled slashes", |p| p.replace('/', "//")),
        ("backslashes", |p| p.replace('/', "\\")),
        ("mixed separators", |p| p.replace("../", "..\\/")),
        ("....//", |p| p.replace("../", "....//")),
        ("..././", |p| p.replace("../", "..././")),
        ("percent-encoded", |p| {
            p.replace('.', "%2e").replace('/', "%2f")
        }),
        ("double percent-encoded", |p| {
            p.replace('.', "%252e").replace('/', "%252f")
        }),
        ("overlong UTF-8, URL-encoded", |p| {
            p.replace('.', "%c0%ae").replace('/', "%c0%af")
        }),
        ("fullwidth lookalikes", |p| {
            p.replace('.', "\u{ff0e}").replace('/', "\u{ff0f}")
        }),
        ("two-dot leader, division slash", |p| {
            p.replace("..", "\u{2025}").replace('/', "\u{2215}")
        }),
        ("trailing /.", |p| format!("{p}/.")),
        ("trailing NUL", |p| format!("{p}\0")),
        ("NUL after a real file", |p| format!("main.rs\0{p}")),
        ("file URL", |p| format!("file://{p}")),
        ("trailing space", |p| format!("{p} ")),
    ]
}

/// Inputs that are hostile on their own.
fn specials(t: &Tree) -> Vec<String> {
    let root = t.root.display().to_string();
    let mut v: Vec<String> = vec![
        "C:\\Windows\\win.ini".into(),
        "C:/Windows/win.ini".into(),
        "C:..\\..\\outside\\secret.txt".into(),
        "\\\\?\\C:\\Windows".into(),
        "\\\\?\\UNC\\server\\share\\x".into(),
        "\\\\server\\share\\secret.txt".into(),
        "\\\\.\\pipe\\x".into(),
        "\\\\.\\PhysicalDrive0".into(),
        "//server/share/x".into(),
        "CON".into(),
        "NUL".into(),
        "main.rs::$DATA".into(),
        "main.rs:stream".into(),
        "\0".into(),
        "".into(),
        " ".into(),
        "\n".into(),
        "*".into(),
        "**/*".into(),
        "{main.rs,../outside/secret.txt}".into(),
        "$(cat ../outside/secret.txt)".into(),
        "`id`".into(),
        "main.rs;cat ../outside/secret.txt".into(),
        "-rf".into(),
        "--output=/tmp/x".into(),
        // Long names and paths.
        "n".repeat(255),
        "n".repeat(256),
        "n".repeat(5000),
        "a/".repeat(2100),
        "../".repeat(2000) + "etc/passwd",
        format!("{}{}/secret.txt", "./".repeat(3000), "../outside"),
        format!("{}.rs", "n".repeat(252)),
        format!("{root}/{}.rs", "n".repeat(252)),
        "sub/up/".repeat(500) + "main.rs",
        // Inside, and fine: the corpus must also accept what is legitimate.
        "main.rs".into(),
        "./main.rs".into(),
        "sub/a.rs".into(),
        "sub".into(),
        ".".into(),
        "in1".into(),
        format!("{root}/main.rs"),
        format!("{root}/sub/up/main.rs"),
    ];
    // Every way of writing the root and its parent.
    for p in [&root, &format!("{root}/"), &format!("{root}/.")] {
        v.push(p.clone());
    }
    v
}

fn corpus(t: &Tree) -> Vec<String> {
    let mut all = Vec::new();
    for target in targets(t) {
        for (_, f) in transforms() {
            all.push(f(&target));
        }
    }
    all.extend(specials(t));
    all.sort();
    all.dedup();
    all
}

/// Runs `f` on its own thread and fails the test if it takes longer than [`BOUND`].
fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(BOUND) {
        Ok(Ok(v)) => v,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("{what:?}: still running after {BOUND:?} (a hang)"),
    }
}

fn show(p: &str) -> String {
    let s = p.escape_debug().to_string();
    if s.len() > 120 {
        format!("{}…({} chars)", &s[..120], p.len())
    } else {
        s
    }
}

#[test]
fn hardening_paths_corpus_never_escapes_the_sandbox() {
    if crate::support::links_missing() {
        return;
    }
    let t = fuzz_bodies::tree();
    let corpus = corpus(t);
    assert!(corpus.len() >= 200, "only {} inputs", corpus.len());
    let mut accepted = Vec::new();
    for raw in &corpus {
        let r = raw.clone();
        if bounded(&show(raw), move || {
            let t = fuzz_bodies::tree();
            fuzz_bodies::check_path(t, &t.sandbox(), &r)
        }) {
            accepted.push(show(raw));
        }
    }
    eprintln!(
        "{} hostile paths; accepted (inside the root): {accepted:?}",
        corpus.len()
    );
    // What must be accepted is: the legitimate inputs resolve.
    let through_loop = format!("{}/sub/up/main.rs", t.root.display());
    for ok in ["main.rs", "./main.rs", "sub/a.rs", "in1", &through_loop] {
        assert!(accepted.contains(&show(ok)), "{ok} was refused");
    }
    // What must be refused is: nothing that names the outside resolves.
    for bad in [
        "../outside/secret.txt",
        "esc/secret.txt",
        "esc_file",
        "c1",
        "stdin",
        "/dev/stdin",
        "~",
    ] {
        assert!(!accepted.contains(&show(bad)), "{bad} was accepted");
    }
}

#[test]
fn hardening_paths_corpus_through_the_collector_reads_nothing_outside() {
    if crate::support::links_missing() {
        return;
    }
    let t = fuzz_bodies::tree();
    let corpus = corpus(t);
    let collector =
        std::sync::Arc::new(Collector::new(&Config::for_tests(&t.root).collector()).unwrap());
    let (mut read, mut refused) = (0, 0);
    // The whole root first: the walk meets every symlink, loop and the FIFO.
    let mut inputs = vec![".".to_string()];
    inputs.extend(corpus);
    for raw in inputs {
        let c = collector.clone();
        let root = t.root.clone();
        let what = show(&raw);
        let outcome = bounded(&what, move || {
            c.collect(&CollectRequest {
                paths: vec![raw],
                budget: 200_000,
                already_sent: Default::default(),
                ignore: None,
            })
        });
        match outcome {
            Ok(collected) => {
                for f in &collected.files {
                    assert!(
                        fuzz_bodies::inside(&f.path, &root),
                        "{what}: read {}",
                        f.path.display()
                    );
                    assert!(!f.text.contains(CANARY), "{what}: the canary was read");
                }
                read += collected.files.len();
            }
            Err(CollectError::Sandbox(e)) => {
                assert!(!e.to_string().contains(CANARY));
                refused += 1;
            }
            Err(CollectError::SecretRefused { .. }) => refused += 1,
            Err(other) => panic!("{what}: unexpected {other}"),
        }
    }
    eprintln!("collector: {read} files read (all inside), {refused} requests refused");
    assert!(read > 0 && refused > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_paths_sample_through_the_tools_never_sends_the_canary() {
    if crate::support::links_missing() {
        return;
    }
    let t = fuzz_bodies::tree();
    let corpus = corpus(t);
    let fake = FakeGemini::start();
    let base = fake.base_url();
    let client = mcp::start(
        &t.root,
        &[
            ("GEMINI_API_KEY", KEY),
            ("GEMINI_BASE_URL", base.as_str()),
            // Refusals are expected here: keep rmcp's warning per error out of the output.
            ("GEMINI_MCP_LOG", "error"),
        ],
    )
    .await;
    // Every 6th input, plus the ones that matter most; each as `files` of chat, some as
    // `images`, `files` of codereview and precommit's `path`.
    let mut sample: Vec<String> = corpus.iter().step_by(6).cloned().collect();
    sample.extend(
        [
            "esc/secret.txt",
            "c1",
            "fifo",
            "stdin",
            "loop1",
            ".",
            "sub/up",
        ]
        .map(String::from),
    );
    let (mut answered, mut refused) = (0, 0);
    for (i, raw) in sample.iter().enumerate() {
        let what = show(raw);
        let (tool, args) = match i % 4 {
            0 | 1 => ("chat", json!({"prompt": "read it", "files": [raw]})),
            2 => (
                "codereview",
                json!({"files": [raw], "context": "review it"}),
            ),
            _ => ("chat", json!({"prompt": "look", "images": [raw]})),
        };
        match within(BOUND, &what, call(&client, tool, args)).await {
            Ok(r) => {
                assert_ne!(r.is_error, Some(true), "{what}: {}", text(&r));
                let s = r.structured_content.clone().unwrap_or_default();
                for f in s["files"]["included"].as_array().into_iter().flatten() {
                    let p = f["path"].as_str().unwrap_or_default();
                    assert!(
                        !p.is_empty()
                            && !Path::new(p).components().any(|c| c == Component::ParentDir)
                            && (!Path::new(p).is_absolute() || Path::new(p).starts_with(&t.root)),
                        "{what}: included {p}"
                    );
                }
                answered += 1;
            }
            Err(e) => {
                assert!(e.code.0 == -32001 || e.code.0 == -32602, "{what}: {e:?}");
                assert!(!e.message.contains(CANARY), "{what}: {}", e.message);
                refused += 1;
            }
        }
    }
    for raw in [
        "..",
        "../outside",
        "esc",
        "/proc/self/root",
        "/dev/stdin",
        "~",
    ] {
        let e = within(BOUND, raw, call(&client, "precommit", json!({"path": raw})))
            .await
            .expect_err(raw);
        assert!(e.code.0 == -32001 || e.code.0 == -32602, "{raw}: {e:?}");
    }
    eprintln!("tools: {answered} answered (files inside), {refused} refused");
    assert!(answered > 0 && refused > 0);
    for r in fake.requests() {
        assert!(!r.raw_body.contains(CANARY), "the canary reached Gemini");
    }
    client.cancel().await.unwrap();
}

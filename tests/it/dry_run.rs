//! `--dry-run`: the real binary against the stand-in Gemini. Nothing reaches Gemini (its log
//! stays empty, the model list included); the request body `--show-request` prints is the one
//! the real call then sends; the input tokens are those the daily cap counts for the real call;
//! each redaction is listed by rule, file and line, never by value.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::Hermetic as _;
use crate::support::fake_gemini::FakeGemini;
use crate::support::mcp::KEY;

const SECRET: &str = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    crate::support::project::write(
        root,
        "src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 {\n    a - b\n}\n",
    );
    crate::support::project::write(
        root,
        "src/config.py",
        &format!("DEBUG = True\nTOKEN = \"{SECRET}\"\n"),
    );
    crate::support::project::write(root, "docs/notes.md", "# Notes\n\nAdding is hard.\n");
    dir
}

fn gemini_mcp(root: &Path, fake: &FakeGemini, extra: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gemini-mcp"));
    cmd.hermetic_env()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", root.join(".home"))
        .env("PROJECT_ROOT", root)
        .env("GEMINI_MCP_STORE", "memory")
        .env("GEMINI_MCP_STATE_DIR", root.join(".state"))
        .env("GEMINI_API_KEY", KEY)
        .env("GEMINI_BASE_URL", fake.base_url())
        .env("GEMINI_CLI_PATH", root.join(".no-gemini-cli"))
        .env("NO_COLOR", "1")
        .current_dir(root);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd
}

fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().expect("run gemini-mcp");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_dry_run_sends_nothing_and_shows_what_the_real_call_sends() {
    let dir = project();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let fake = FakeGemini::start();
    let args = [
        "chat",
        "What does add do?",
        "-f",
        "src",
        "-f",
        "docs",
        "--model",
        "flash",
    ];

    // The report as text.
    let (code, text, err) = run(gemini_mcp(&root, &fake, &[]).args(args).arg("--dry-run"));
    assert_eq!(code, 0, "{err}");
    assert!(text.starts_with("Dry run: nothing was sent."), "{text}");
    for wanted in [
        "src/lib.rs",
        "src/config.py",
        "docs/notes.md",
        "Cost: $",
        "Input: ",
    ] {
        assert!(text.contains(wanted), "{wanted} missing from:\n{text}");
    }
    assert!(text.contains("src/config.py:2  github-token"), "{text}");
    assert!(!text.contains(SECRET), "the secret value is shown:\n{text}");

    // As JSON, with the request body.
    let (code, json, err) = run(gemini_mcp(&root, &fake, &[]).args(args).args([
        "--dry-run",
        "--show-request",
        "--format",
        "json",
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(!json.contains(SECRET), "the secret value is in the JSON");
    let preview: Value = serde_json::from_str(&json).expect("one JSON document");
    assert!(
        fake.requests().is_empty(),
        "a dry run reached Gemini: {:?}",
        fake.requests()
            .iter()
            .map(|r| r.path.clone())
            .collect::<Vec<_>>()
    );
    let files: Vec<(&str, &str)> = preview["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap(), f["priority"].as_str().unwrap()))
        .collect();
    assert!(files.contains(&("src/lib.rs", "source")), "{files:?}");
    assert!(files.contains(&("docs/notes.md", "docs")), "{files:?}");
    let redactions = preview["redactions"].as_array().unwrap();
    assert_eq!(redactions.len(), 1, "{preview}");
    assert_eq!(redactions[0]["file"], "src/config.py");
    assert_eq!(redactions[0]["line"], 2);
    assert_eq!(redactions[0]["rule"], "github-token");
    let band = &preview["cost_usd"];
    assert!(
        band["low"].as_f64().unwrap() > 0.0
            && band["high"].as_f64().unwrap() > band["low"].as_f64().unwrap(),
        "{band}"
    );
    let shown = preview["request"].clone();
    assert!(shown.is_object(), "{preview}");

    // The real call sends exactly the body shown.
    let (code, _, err) = run(gemini_mcp(&root, &fake, &[]).args(args));
    assert_eq!(code, 0, "{err}");
    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].body, shown, "the body shown is not the body sent");

    // And the tokens the dry run gives are those the daily cap counts for it.
    let total = preview["input"]["total"].as_u64().unwrap();
    let (code, _, err) =
        run(gemini_mcp(&root, &fake, &[("GEMINI_MCP_DAILY_TOKENS", "1")]).args(args));
    assert_ne!(code, 0);
    assert!(
        err.contains(&format!("needs about {total} tokens of input")),
        "the cap counted other figures than the dry run's {total}: {err}"
    );
    assert_eq!(
        fake.generate_requests().len(),
        1,
        "the capped call was not sent"
    );
}

#[test]
fn a_dry_run_of_precommit_lists_the_diff_and_passes() {
    let dir = project();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let repo = git2::Repository::init(&root).unwrap();
    let mut index = repo.index().unwrap();
    index.add_path(Path::new("src/lib.rs")).unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("T", "t@example.com").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "first", &tree, &[])
        .unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n",
    )
    .unwrap();
    let fake = FakeGemini::start();
    let (code, json, err) = run(gemini_mcp(&root, &fake, &[]).args([
        "precommit",
        "--dry-run",
        "--format",
        "json",
        "--fail-on",
        "low",
    ]));
    assert_eq!(code, 0, "a dry run fails nothing: {err}");
    let preview: Value = serde_json::from_str(&json).expect("one JSON document");
    let diff = preview["diff"]["files"].as_array().unwrap();
    assert!(diff.iter().any(|f| f == "src/lib.rs"), "{preview}");
    assert!(fake.requests().is_empty());
}

// A pseudo-terminal (rustix's pty) is Unix's.
#[cfg(unix)]
#[test]
fn the_per_call_ceiling_refuses_before_gemini_and_asks_on_a_terminal() {
    let dir = project();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let fake = FakeGemini::start();
    let args = ["chat", "What does add do?", "-f", "src", "--model", "flash"];
    let low = [("GEMINI_MCP_CALL_USD", "0.000001")];

    // Piped: refused before Gemini, saying what to narrow.
    let (code, _, err) = run(gemini_mcp(&root, &fake, &low).args(args));
    assert_eq!(code, 2, "{err}");
    for wanted in [
        "over the per-call ceiling",
        "GEMINI_MCP_CALL_USD",
        "Gemini was not called",
        "The largest sent: src/",
        "--dry-run",
    ] {
        assert!(err.contains(wanted), "{wanted} missing: {err}");
    }
    assert!(
        fake.generate_requests().is_empty(),
        "a refused call reached Gemini"
    );

    // Under the ceiling: sent.
    let (code, _, err) =
        run(gemini_mcp(&root, &fake, &[("GEMINI_MCP_CALL_USD", "100")]).args(args));
    assert_eq!(code, 0, "{err}");
    assert_eq!(fake.generate_requests().len(), 1);

    // On a terminal: asked, and `y` sends it.
    let (code, shown) = answered_on_a_terminal(gemini_mcp(&root, &fake, &low).args(args), "y");
    assert_eq!(code, 0, "{shown}");
    assert!(shown.contains("Send it anyway? [y/N]"), "{shown}");
    assert_eq!(fake.generate_requests().len(), 2, "the answer `y` sent it");
    // Anything else does not.
    let (code, shown) = answered_on_a_terminal(gemini_mcp(&root, &fake, &low).args(args), "n");
    assert_eq!(code, 2, "{shown}");
    assert!(shown.contains("not sent"), "{shown}");
    assert_eq!(fake.generate_requests().len(), 2);
}

#[cfg(unix)]
/// Runs `cmd` on a pseudo-terminal (stdin, stdout and stderr), typing `answer` and Enter once it
/// asks; its exit code and everything the terminal showed.
fn answered_on_a_terminal(cmd: &mut Command, answer: &str) -> (i32, String) {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    use std::io::{Read, Write};
    use std::process::Stdio;

    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let name = ptsname(&master, Vec::new()).unwrap();
    let terminal = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name.to_str().unwrap())
        .unwrap();
    let mut child = cmd
        .stdin(terminal.try_clone().unwrap())
        .stdout(terminal.try_clone().unwrap())
        .stderr(terminal)
        .spawn()
        .unwrap();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut master = std::fs::File::from(master);
    let mut typing = master.try_clone().unwrap();
    let answer = format!("{answer}\n");
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let mut typed = false;
        // Linux ends a pty's output with EIO once the other end is closed.
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            if !typed && String::from_utf8_lossy(&got).contains("[y/N]") {
                typing.write_all(answer.as_bytes()).unwrap();
                typed = true;
            }
        }
        got
    });
    let status = child.wait().unwrap();
    let got = reader.join().unwrap();
    (
        status.code().expect("exited normally"),
        String::from_utf8_lossy(&got).into_owned(),
    )
}

//! Git metadata as a way out of the sandbox, and files that block when opened, against the real
//! binary with real repositories built by `git`:
//!
//! - metadata inside the root that leads libgit2 outside it (a `.git` file, `core.worktree`, a
//!   nested `.git` file, a `.git` symlink, `objects/info/alternates`, a config include): the
//!   outside repository's content never reaches Gemini, and the reply names what points outside;
//! - FIFOs as ignore files and git files (for `precommit` and for the walker, and a `.gitignore`
//!   above the root): every call answers;
//! - a nested repository in a vendored folder is named as left out, with how to include it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use super::within;
use crate::support::fake_gemini::FakeGemini;
use crate::support::mcp::{self, KEY, call};

/// A hang detector, not a performance target.
const BOUND: Duration = Duration::from_secs(30);

const COMMITTED: &str = "OUTSIDE-COMMITTED-canary-7d1e";
const MODIFIED: &str = "OUTSIDE-MODIFIED-canary-52aa";
const UNTRACKED: &str = "OUTSIDE-UNTRACKED-canary-c90b";
const INSIDE: &str = "inside_marker_fn";

/// An empty file: git's global configuration here (`/dev/null` is not a file on Windows).
fn no_global_config() -> &'static Path {
    static FILE: std::sync::OnceLock<tempfile::TempPath> = std::sync::OnceLock::new();
    FILE.get_or_init(|| tempfile::NamedTempFile::new().unwrap().into_temp_path())
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=T", "-c", "user.email=t@example.com"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", no_global_config())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[cfg(unix)]
fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let made = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(made.success(), "mkfifo {}", path.display());
}

/// `base/root` (PROJECT_ROOT, with a source file) and `base/outside` (a repository whose
/// committed, modified and untracked content are canaries).
struct Tree {
    _base: tempfile::TempDir,
    #[cfg_attr(not(unix), allow(dead_code))] // The FIFO cases' outer ignore file.
    base: PathBuf,
    root: PathBuf,
    outside: PathBuf,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("root");
    let outside = base.join("outside");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(root.join("main.rs"), format!("fn {INSIDE}() {{}}\n")).unwrap();
    git(&outside, &["init", "-q"]);
    std::fs::write(outside.join("committed.rs"), format!("// {COMMITTED}\n")).unwrap();
    std::fs::write(outside.join("modified.rs"), "// before\n").unwrap();
    git(&outside, &["add", "."]);
    git(&outside, &["commit", "-qm", "outside"]);
    std::fs::write(outside.join("modified.rs"), format!("// {MODIFIED}\n")).unwrap();
    std::fs::write(outside.join("untracked.rs"), format!("// {UNTRACKED}\n")).unwrap();
    Tree {
        _base: dir,
        base,
        root,
        outside,
    }
}

/// Makes the root a repository with `main.rs` committed and then changed.
fn root_repo(t: &Tree) {
    git(&t.root, &["init", "-q"]);
    git(&t.root, &["add", "main.rs"]);
    git(&t.root, &["commit", "-qm", "first"]);
    std::fs::write(
        t.root.join("main.rs"),
        format!("fn {INSIDE}() {{ changed(); }}\n"),
    )
    .unwrap();
}

/// Runs one tool call against the real binary and a fake Gemini: the whole result (or error) as
/// JSON, and everything Gemini received.
async fn run(root: &Path, tool: &'static str, args: Value) -> (String, String) {
    let fake = FakeGemini::start();
    let base = fake.base_url();
    let client = mcp::start(
        root,
        &[("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", base.as_str())],
    )
    .await;
    let reply = within(BOUND, tool, call(&client, tool, args)).await;
    let reply = match reply {
        Ok(r) => serde_json::to_string(&r).unwrap(),
        Err(e) => format!("error {}: {}", e.code.0, e.message),
    };
    client.cancel().await.unwrap();
    let sent: String = fake.requests().iter().map(|r| r.raw_body.clone()).collect();
    (reply, sent)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_git_metadata_never_leads_precommit_outside_the_root() {
    if crate::support::git_missing() {
        return;
    }
    type Setup = fn(&Tree);
    let cases: &[(&str, Setup, &str)] = &[
        (
            "a .git file at the root",
            |t| {
                let target = format!("gitdir: {}\n", t.outside.join(".git").display());
                std::fs::write(t.root.join(".git"), target).unwrap();
            },
            "outside PROJECT_ROOT",
        ),
        (
            "core.worktree outside",
            |t| {
                root_repo(t);
                git(
                    &t.root,
                    &["config", "core.worktree", t.outside.to_str().unwrap()],
                );
            },
            "outside PROJECT_ROOT",
        ),
        (
            "a nested .git file",
            |t| {
                root_repo(t);
                std::fs::create_dir_all(t.root.join("sub")).unwrap();
                let target = format!("gitdir: {}\n", t.outside.join(".git").display());
                std::fs::write(t.root.join("sub/.git"), target).unwrap();
            },
            r#"{"path":"sub","reason":"outside_root"}"#,
        ),
        (
            "a .git symlink",
            |t| crate::support::symlink(t.outside.join(".git"), t.root.join(".git")),
            "outside PROJECT_ROOT",
        ),
        (
            "alternates and HEAD on an outside commit",
            |t| {
                git(&t.root, &["init", "-q"]);
                let head = git(&t.outside, &["rev-parse", "HEAD"]);
                let objects = t.outside.join(".git/objects");
                std::fs::write(
                    t.root.join(".git/objects/info/alternates"),
                    format!("{}\n", objects.display()),
                )
                .unwrap();
                std::fs::write(t.root.join(".git/HEAD"), format!("{head}\n")).unwrap();
            },
            "outside PROJECT_ROOT",
        ),
        (
            "a config include",
            |t| {
                root_repo(t);
                let cfg = t.outside.join("included.cfg");
                std::fs::write(&cfg, "[core]\n\tbare = false\n").unwrap();
                git(&t.root, &["config", "include.path", cfg.to_str().unwrap()]);
            },
            "[include]",
        ),
    ];
    for (name, setup, expected) in cases {
        // The one case that makes a link: left out (and said) where links cannot be made.
        if name.contains("symlink") && crate::support::links_missing() {
            continue;
        }
        let t = tree();
        setup(&t);
        let (reply, sent) = run(&t.root, "precommit", json!({"path": "."})).await;
        for canary in [COMMITTED, MODIFIED, UNTRACKED] {
            assert!(!sent.contains(canary), "{name}: {canary} reached Gemini");
            assert!(!reply.contains(canary), "{name}: {canary} in the reply");
        }
        assert!(
            reply.contains(expected),
            "{name}: the reply does not say `{expected}`: {reply}"
        );
    }
}

// FIFOs; a Windows named pipe lives outside the file tree.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_a_fifo_as_a_git_or_ignore_file_does_not_hang_precommit() {
    if crate::support::git_missing() {
        return;
    }
    for fifo in [
        ".gitignore",
        ".git/info/exclude",
        ".git/config",
        ".git/index",
        "src/.gitignore",
        ".gitattributes",
    ] {
        let t = tree();
        root_repo(&t);
        std::fs::create_dir_all(t.root.join("src")).unwrap();
        std::fs::write(t.root.join("src/lib.rs"), "pub fn lib() {}\n").unwrap();
        mkfifo(&t.root.join(fifo));
        let (reply, _) = run(&t.root, "precommit", json!({"path": "."})).await;
        assert!(reply.contains("FIFO"), "{fifo}: not named: {reply}");
    }
}

// FIFOs; a Windows named pipe lives outside the file tree.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_a_fifo_as_an_ignore_file_does_not_hang_the_walker() {
    if crate::support::git_missing() {
        return;
    }
    type Setup = fn(&Tree);
    let cases: &[(&str, Setup)] = &[
        ("sub/.gitignore", |t| mkfifo(&t.root.join("sub/.gitignore"))),
        ("sub/.ignore", |t| mkfifo(&t.root.join("sub/.ignore"))),
        ("sub/.geminiignore", |t| {
            mkfifo(&t.root.join("sub/.geminiignore"))
        }),
        ("sub/.git/info/exclude", |t| {
            git(&t.root.join("sub"), &["init", "-q"]);
            mkfifo(&t.root.join("sub/.git/info/exclude"));
        }),
        ("root .gitignore", |t| mkfifo(&t.root.join(".gitignore"))),
        ("a .gitignore above the root", |t| {
            mkfifo(&t.base.join(".gitignore"))
        }),
    ];
    for (name, setup) in cases {
        let t = tree();
        std::fs::create_dir_all(t.root.join("sub")).unwrap();
        std::fs::write(t.root.join("sub/lib.rs"), "pub fn sub_marker() {}\n").unwrap();
        setup(&t);
        let (reply, sent) = run(&t.root, "chat", json!({"prompt": "review", "files": ["."]})).await;
        assert!(!reply.contains("\"isError\":true"), "{name}: {reply}");
        assert!(sent.contains(INSIDE), "{name}: main.rs was not sent");
        assert!(
            sent.contains("sub_marker"),
            "{name}: sub/lib.rs was not sent"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_a_vendored_nested_repository_is_not_left_out_silently() {
    if crate::support::git_missing() {
        return;
    }
    let t = tree();
    root_repo(&t);
    let nested = t.root.join("vendor/nested");
    std::fs::create_dir_all(&nested).unwrap();
    git(&nested, &["init", "-q"]);
    std::fs::write(nested.join("patched.rs"), "fn vendored_patch() {}\n").unwrap();
    let (reply, sent) = run(&t.root, "precommit", json!({"path": "."})).await;
    assert!(!reply.contains("\"isError\":true"), "{reply}");
    // Gemini is told, and the reply lists it as skipped with how to include it.
    assert!(sent.contains("vendor/nested"), "Gemini is not told: {sent}");
    let v: Value = serde_json::from_str(&reply).unwrap();
    let structured = v["structuredContent"].to_string();
    assert!(
        structured.contains("\"path\":\"vendor/nested\""),
        "not listed as skipped: {reply}"
    );
    assert!(
        reply.contains("pass its path to review it"),
        "no way to include it: {reply}"
    );
    assert!(
        sent.contains(r#"call precommit with `path: \"vendor/nested\"`"#),
        "Gemini is not told how: {sent}"
    );
}

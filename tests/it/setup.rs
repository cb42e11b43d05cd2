//! What a new user meets before the first call: `--help` offering only the flags that act, the
//! configuration file's misspelled key, `doctor` on Vertex AI off Google Cloud, and the README
//! saying what CI runs.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::Hermetic as _;

fn gemini_mcp(root: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gemini-mcp"));
    cmd.hermetic_env()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", root.join(".home"))
        .env("GEMINI_MCP_STATE_DIR", root.join(".state"))
        .env("GEMINI_MCP_STORE", "memory")
        .env("PROJECT_ROOT", root)
        .current_dir(root);
    cmd
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

/// `--tier` is offered where it acts (serve, the tool commands) and nowhere else.
#[test]
fn tier_is_offered_only_where_it_acts() {
    let dir = tempfile::tempdir().unwrap();
    let help = |args: &[&str]| {
        let out = gemini_mcp(dir.path())
            .args(args)
            .arg("--help")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    for args in [
        &["threads"][..],
        &["threads", "list"],
        &["hook"],
        &["hook", "install"],
        &["doctor"],
    ] {
        let h = help(args);
        assert!(!h.contains("--tier"), "{args:?} offers --tier:\n{h}");
    }
    for args in [&["chat"][..], &["precommit"], &["investigate"], &["serve"]] {
        let h = help(args);
        assert!(h.contains("--tier"), "{args:?} lacks --tier:\n{h}");
    }
    // Given where it does nothing, it is refused rather than ignored.
    let out = gemini_mcp(dir.path())
        .args(["--tier", "flex", "threads", "list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--tier applies to"),
        "{}",
        text(&out.stderr)
    );
}

/// A misspelled key in the TOML file is named, with the file and the setting it resembles.
#[test]
fn a_misspelled_setting_in_the_config_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gemini-mcp.toml");
    std::fs::write(&file, "GEMINI_MODLE = \"flash\"\n").unwrap();
    let out = gemini_mcp(dir.path())
        .env("GEMINI_MCP_CONFIG", &file)
        .args(["chat", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "unknown setting `GEMINI_MODLE` in {}",
            file.display()
        )) && err.contains("did you mean `GEMINI_MODEL`?"),
        "{err}"
    );
    assert!(!err.contains("not valid TOML"), "{err}");
}

/// On Vertex AI with no credential file and no metadata server, `doctor` says so at once and
/// fails the backend, in a message said once.
#[test]
fn doctor_on_vertex_without_credentials_is_quick_and_not_ok() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens there: the metadata server the auth library would ask is absent.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nowhere = closed.local_addr().unwrap().to_string();
    drop(closed);
    let started = Instant::now();
    let out = gemini_mcp(dir.path())
        .env("GOOGLE_GENAI_USE_VERTEXAI", "true")
        .env("GOOGLE_CLOUD_PROJECT", "my-proj")
        .env("GCE_METADATA_HOST", &nowhere)
        .arg("doctor")
        .output()
        .unwrap();
    let took = started.elapsed();
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        took < Duration::from_secs(5),
        "doctor took {took:?}:\n{said}"
    );
    let backend = said
        .lines()
        .find(|l| l.contains("backend:"))
        .unwrap_or_default();
    assert!(backend.starts_with("FAIL"), "{said}");
    assert!(backend.contains("no credentials"), "{said}");
    assert!(!said.contains("might succeed. but"), "{said}");
    assert!(!said.contains("future attempts"), "{said}");
}

/// `.ci/run` runs the README's test command, exactly.
#[test]
fn ci_runs_the_readmes_test_command() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    let block = readme
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .unwrap();
    let test = block
        .lines()
        .find(|l| l.contains("run the tests"))
        .and_then(|l| l.split('#').next())
        .map(str::trim)
        .expect("the README's first commands say how to run the tests");
    assert_eq!(ci.trim_end().lines().last(), Some(test), "{block}");
    // The title and what it is come before any command.
    let before = &readme[..readme.find("```").unwrap()];
    assert!(
        before.starts_with("# gemini-mcp-server\n") && before.contains("second opinion"),
        "{before}"
    );
}

//! This integration-test binary itself, built for Windows, run whole under Wine: every test in
//! it (but this module's, which the Windows build does not have) as the Windows build of the
//! tests, driving the Windows build of the server. It needs the Windows test binary
//! (`cargo test --target x86_64-pc-windows-gnu --test it --no-run`, which builds the `.exe` of
//! the server too) and takes minutes, so it runs only when `GEMINI_MCP_WINE_IT=1`.
//!
//! Wine's prefix has no git, no Redis, no Node clients and no linters, and Wine 8 cannot make
//! symbolic links (its `CreateSymbolicLinkW` is a stub): the tests that need one of those say
//! so and are skipped there (their `GEMINI_MCP_REQUIRE_*` switches and `CI` are not passed to
//! Wine). The run fails on any failed test and on a skip for any other reason, and lists the
//! skips with their reasons.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{fresh_exe, libtest_count, wait_for, wine, wine_env};

/// How long the whole binary may run under Wine.
const LIMIT: Duration = Duration::from_secs(45 * 60);

/// Why a test may be skipped under Wine: what the prefix lacks, as the tests say it.
const WINE_LACKS: &[&str] = &[
    "git not found on PATH",
    "not found on PATH (this test starts a private Redis)",
    "symbolic links cannot be made on this machine",
    // The Node clients (`.ci/install-clients` installs Linux shims, not npm's `.cmd`s).
    "is not installed at",
    // The linters (a Linux virtual environment).
    "nor on PATH (run .ci/run, or pip install",
    // By design on Windows: the release is packaged on Linux.
    "the release is packaged on Linux",
];

/// The newest `deps/it-*.exe`, refused when older than any source of the crate or its tests.
fn it_exe() -> PathBuf {
    // What the binary is compiled from besides the library (the tests' snapshots and fixtures
    // are read as it runs).
    let tests: Vec<PathBuf> =
        crate::support::walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it"))
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
    fresh_exe("it-", &tests).unwrap_or_else(|why| {
        panic!(
            "GEMINI_MCP_WINE_IT=1 but {why} \
             (cargo test --target x86_64-pc-windows-gnu --test it --no-run)"
        )
    })
}

/// The tests that printed a skip, from libtest's `--show-output` sections: (test, reason).
fn skips(out: &str) -> Vec<(String, String)> {
    let mut test = String::new();
    let mut found = Vec::new();
    for line in out.lines() {
        if let Some(name) = line
            .strip_prefix("---- ")
            .and_then(|l| l.strip_suffix(" stdout ----"))
        {
            test = name.to_string();
        } else if line.to_ascii_lowercase().starts_with("skipped") {
            found.push((test.clone(), line.to_string()));
        }
    }
    found
}

#[test]
fn the_integration_tests_built_for_windows_pass_under_wine() {
    if std::env::var("GEMINI_MCP_WINE_IT").as_deref() != Ok("1") {
        eprintln!(
            "skipped: the whole Windows test binary under Wine runs only with GEMINI_MCP_WINE_IT=1"
        );
        return;
    }
    let w = wine().expect("GEMINI_MCP_WINE_IT=1 but Wine or the Windows build is missing");
    let exe = it_exe();
    let logs = tempfile::tempdir().unwrap();
    let (out_log, err_log) = (logs.path().join("it.out"), logs.path().join("it.err"));
    let mut cmd = Command::new(&w.wine);
    // What Wine needs, and where cargo keeps the Gemma model; no GEMINI_MCP_REQUIRE_* nor CI.
    cmd.env_clear();
    for name in [
        "PATH",
        "HOME",
        "USER",
        "CARGO_HOME",
        "GEMMA3_TOKENIZER_MODEL",
    ] {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    cmd.arg(&exe).args(["--test-threads=2", "--show-output"]);
    wine_env(&mut cmd, &w.prefix);
    let started = Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_log).unwrap())
        .stderr(std::fs::File::create(&err_log).unwrap())
        .spawn()
        .expect("start wine64");
    let status = wait_for(child, LIMIT);
    let took = started.elapsed();
    let out = std::fs::read_to_string(&out_log).unwrap_or_default();
    let err = std::fs::read_to_string(&err_log).unwrap_or_default();
    let failures = out
        .split("\nfailures:\n")
        .nth(1)
        .unwrap_or("")
        .chars()
        .take(20_000)
        .collect::<String>();
    assert!(
        status.success(),
        "{} failed under Wine ({status}, {took:?}):\n{failures}\n{}",
        exe.display(),
        out.lines()
            .filter(|l| l.starts_with("test result:"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let passed = libtest_count(&out, "passed").unwrap_or(0);
    let skipped = skips(&out);
    eprintln!(
        "the Windows test binary under Wine: {passed} passed in {took:?}, {} of them skipped:",
        skipped.len()
    );
    for (test, why) in &skipped {
        eprintln!("  {test}: {why}");
    }
    let unexpected: Vec<_> = skipped
        .iter()
        .filter(|(_, why)| !WINE_LACKS.iter().any(|lack| why.contains(lack)))
        .collect();
    assert!(
        unexpected.is_empty(),
        "skipped under Wine for a reason other than what Wine lacks: {unexpected:?}"
    );
    // Skipped tests pass too: what ran is the rest.
    let ran = passed.saturating_sub(skipped.len() as u64);
    assert!(ran >= 150, "only {ran} tests ran (and passed):\n{err}");
}

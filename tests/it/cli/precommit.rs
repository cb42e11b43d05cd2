//! `precommit` as a linter: what passes without a call, the exit codes `--fail-on` sets, the
//! exit 2 of a run that could not review, and a gate that never passes what it could not read.

use serde_json::{Value, json};

use super::{changed_project, fake, gemini_mcp, project, review, review_of, run, vars, with};
use crate::support::fake_gemini::Script;

/// An address nothing answers on: a call to Gemini there fails fast.
const NOWHERE: &str = "http://127.0.0.1:9";

#[test]
fn nothing_to_review_passes_without_calling_gemini() {
    let p = project();
    let vars = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", NOWHERE)];
    let r = run(gemini_mcp(&p.root, &vars).args(["precommit", "--fail-on", "low"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("Nothing to review"), "{}", r.stdout);

    let r = run(gemini_mcp(&p.root, &vars).args(["precommit", "--format", "json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).expect("stdout is one JSON document");
    assert_eq!(v["status"], "nothing_to_review");
    assert_eq!(v["changed_files"], Value::Array(vec![]));
    assert_eq!(v["passed"], true);
    assert_eq!(v["fail_on"], "high");
}

#[test]
fn could_not_run_is_exit_2_with_the_reason_on_stderr() {
    let p = project();
    std::fs::create_dir_all(p.root.join(".home")).unwrap();
    let plain = tempfile::tempdir().unwrap();
    let plain_root = std::fs::canonicalize(plain.path()).unwrap();
    let vars = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", NOWHERE)];

    // Not a repository: a usage error naming --path.
    let r = run(gemini_mcp(&plain_root, &vars).arg("precommit"));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("'--path'"), "{}", r.stderr);
    assert!(
        r.stderr.contains("not inside a git repository"),
        "{}",
        r.stderr
    );
    assert_eq!(r.stdout, "");

    // A ref that names nothing: a usage error naming --compare-to.
    let r = run(gemini_mcp(&p.root, &vars).args(["precommit", "--compare-to", "nope"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("'--compare-to'"), "{}", r.stderr);
    assert_eq!(r.stdout, "");

    // A bad flag value: clap's error, naming the flag.
    let r = run(gemini_mcp(&p.root, &vars).args(["precommit", "--fail-on", "severe"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--fail-on"), "{}", r.stderr);
    assert_eq!(r.stdout, "");

    // Changes but no backend: the reason and what to do.
    p.write(
        "src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 {\n    a - b\n}\n",
    );
    let r = run(gemini_mcp(&p.root, &[]).arg("precommit"));
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(r.stderr.contains("GEMINI_API_KEY"), "{}", r.stderr);
    assert_eq!(r.stdout, "");

    // A path outside PROJECT_ROOT.
    let r = run(gemini_mcp(&p.root, &vars).args(["precommit", "--path", "/"]));
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("outside the project root"),
        "{}",
        r.stderr
    );
}

#[test]
fn exit_codes_follow_fail_on_and_gemini_sees_the_diff() {
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    // Findings: one high, one low.
    for (fail_on, want, failing) in [
        ("critical", 0, 0),
        ("high", 1, 1),
        ("medium", 1, 1),
        ("low", 1, 2),
        ("none", 0, 0),
    ] {
        fake.push(review(
            &[
                ("high", "src/lib.rs", Some(2)),
                ("low", "src/lib.rs", Some(1)),
            ],
            "needs_changes",
        ));
        let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--fail-on", fail_on]));
        assert_eq!(
            r.code, want,
            "--fail-on {fail_on}: {}{}",
            r.stdout, r.stderr
        );
        assert!(r.stdout.contains("[HIGH]"), "{}", r.stdout);
        assert!(r.stdout.contains("continuation_id: "), "{}", r.stdout);
        let outcome = if want == 1 {
            format!("FAIL: {failing} finding(s) at or above {fail_on} (--fail-on {fail_on}).")
        } else if fail_on == "none" {
            String::new()
        } else {
            format!("PASS: no finding at or above {fail_on} (--fail-on {fail_on}).")
        };
        if outcome.is_empty() {
            assert!(
                !r.stdout.contains("PASS") && !r.stdout.contains("FAIL"),
                "{}",
                r.stdout
            );
        } else {
            assert!(r.stdout.contains(&outcome), "{outcome}\n{}", r.stdout);
        }
    }
    // No findings at all passes even --fail-on low. Piped, the output has no colours and
    // stderr no progress indicator.
    fake.push(review(&[], "ready"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--fail-on", "low"]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(!r.stdout.contains('\u{1b}'), "{:?}", r.stdout);
    assert!(!r.stderr.contains('\u{1b}'), "{:?}", r.stderr);
    // Colours can be forced (CLICOLOR_FORCE, as for most terminal tools).
    fake.push(review(&[("high", "src/lib.rs", Some(2))], "needs_changes"));
    let mut forced = with(&v).to_vec();
    forced.push(("CLICOLOR_FORCE", "1"));
    let r = run(gemini_mcp(&p.root, &forced).args(["precommit"]));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("\u{1b}["), "{:?}", r.stdout);

    // What Gemini was sent: the diff, in JSON mode, with precommit's instructions.
    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 7);
    let last = &sent[6];
    assert!(last.json_mode());
    assert!(
        last.system_text().contains("last reviewer before a commit"),
        "{}",
        last.system_text()
    );
    let text = last.last_user_text();
    assert!(
        text.contains("## Unstaged changes (index → work tree)"),
        "{text}"
    );
    assert!(text.contains("-    a + b\n+    a - b"), "{text}");
    assert!(text.contains("- modified: src/lib.rs [unstaged]"), "{text}");
}

#[test]
fn the_gate_never_passes_a_review_it_could_not_read() {
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    let other_words = json!({"summary": "", "verdict": "ready", "findings": [
        {"level": "critical", "path": "src/lib.rs", "line_number": 2, "message": "add subtracts"}]});
    for (answer, unverified, want, shown) in [
        // No findings list: the review was not read.
        (
            json!({"summary": "LGTM", "status": "approved"}),
            false,
            2,
            "findings",
        ),
        (
            json!({"summary": "Bad.", "verdict": "do_not_commit"}),
            false,
            2,
            "findings",
        ),
        // A critical finding in other words is read; quoting no evidence, it is unverified:
        // counted with --fail-on-unverified, else passed over, saying so.
        (other_words.clone(), true, 1, "[CRITICAL]"),
        (
            other_words,
            false,
            0,
            "1 unverified finding(s) at or above high not counted",
        ),
        // The verdict alone blocks.
        (
            json!({"summary": "Do not.", "verdict": "do_not_commit", "findings": []}),
            false,
            1,
            "verdict is do_not_commit",
        ),
        (
            json!({"summary": "Meh.", "verdict": "do_not_commit", "findings": [
                {"severity": "low", "file": "src/lib.rs", "title": "nit", "detail": "nit"}]}),
            false,
            1,
            "verdict is do_not_commit",
        ),
        // What a readable, clean review looks like.
        (
            json!({"summary": "Fine.", "verdict": "ready", "findings": []}),
            false,
            0,
            "PASS",
        ),
    ] {
        fake.push(Script::json(answer.clone()));
        let mut cmd = gemini_mcp(&p.root, &with(&v));
        cmd.args(["precommit", "--fail-on", "high"]);
        if unverified {
            cmd.arg("--fail-on-unverified");
        }
        let r = run(&mut cmd);
        assert_eq!(r.code, want, "{answer}: {}{}", r.stdout, r.stderr);
        assert!(
            format!("{}{}", r.stdout, r.stderr).contains(shown),
            "{answer}: {}{}",
            r.stdout,
            r.stderr
        );
    }
}

/// `--fail-on` counts unverified findings only with `--fail-on-unverified`, and says so.
#[test]
fn unverified_findings_fail_only_when_asked() {
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    let ghost = json!([{"severity": "critical", "file": "src/lib.rs", "line": 40,
        "title": "Ghost", "detail": "Not there.", "evidence": "fn does_not_exist() {}"}]);
    fake.push(review_of(ghost.clone(), "needs_changes"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--fail-on", "high"]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("PASS: no finding at or above high (--fail-on high). 1 unverified finding(s) at or above high not counted (--fail-on-unverified counts them)."),
        "{}",
        r.stdout
    );
    fake.push(review_of(ghost.clone(), "needs_changes"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args([
        "precommit",
        "--fail-on",
        "high",
        "--fail-on-unverified",
    ]));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("FAIL: 1 finding(s) at or above high"),
        "{}",
        r.stdout
    );
    // JSON says what was not counted.
    fake.push(review_of(ghost, "needs_changes"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--format", "json"]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let out: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(out["unverified_not_counted"], 1);
    assert_eq!(out["fail_on_unverified"], false);
    assert_eq!(out["passed"], true);
}

//! What the review formats write when Gemini's findings are hostile: a patch that must still
//! apply whatever one edit holds (a lone CR, a path no patch may name), text output whose
//! every line is one the CLI wrote (a file name or title holding a line break cannot forge a
//! `::error::` workflow command), and Code Quality and SARIF locations only for paths in the
//! project.

use std::process::Command;

use serde_json::{Value, json};

use super::{fake, formats_project, review_of, run, vars, with};
use crate::support::fake_gemini::Script;

/// A line a GitHub runner would take for a workflow command: `::` after leading whitespace.
fn workflow_commands(out: &str) -> Vec<&str> {
    out.lines()
        .filter(|l| l.trim_start().starts_with("::"))
        .collect()
}

/// `--format patch` with several edits, one whose new text holds a lone CR and one of
/// `.git/config`: `git apply --check` (and `patch -p1 --dry-run`) take the patch, and every
/// edit that may be made is made.
#[test]
fn one_edit_never_corrupts_the_patch() {
    if crate::support::git_missing() {
        return;
    }
    let p = formats_project();
    p.write("src/more.rs", "fn more() {\n    one();\n}\n");
    let fake = fake();
    let v = vars(&fake);
    fake.push(review_of(
        json!([
            {"severity": "high", "file": "src/lib.rs", "line": 2, "title": "Subtracts",
             "detail": "d", "evidence": "a - b",
             "edit": {"file": "src/lib.rs", "old": "    a - b\n", "new": "    a + b\n"}},
            {"severity": "low", "file": "src/more.rs", "title": "CR", "detail": "d",
             "edit": {"file": "src/more.rs", "old": "    one();\n", "new": "    one();\r    two();\n"}},
            {"severity": "low", "file": ".git/config", "title": "Config", "detail": "d",
             "edit": {"file": ".git/config", "old": "[core]", "new": "[core]\n\tfsmonitor = touch PWNED"}},
            {"severity": "medium", "file": "src/win.rs", "title": "Two calls", "detail": "d",
             "edit": {"file": "src/win.rs", "old": "    a();\n    b();\n", "new": "    ab();\n"}}
        ]),
        "needs_changes",
    ));
    let r = run(super::gemini_mcp(&p.root, &with(&v)).args(["precommit", "--format", "patch"]));
    assert!(r.code <= 1, "{}{}", r.stdout, r.stderr);
    assert!(!r.stdout.contains(".git/"), "{}", r.stdout);
    assert!(!r.stdout.contains("PWNED"), "{}", r.stdout);
    let patch = p.root.join(".home/the.patch");
    std::fs::create_dir_all(patch.parent().unwrap()).unwrap();
    std::fs::write(&patch, &r.stdout).unwrap();
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .arg(&patch)
            .current_dir(&p.root)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap()
    };
    let check = git(&["apply", "--check"]);
    assert!(
        check.status.success(),
        "{}\n{:?}",
        String::from_utf8_lossy(&check.stderr),
        r.stdout
    );
    // `patch`, where it is installed: a dry run at the project root.
    if let Ok(dry) = Command::new("patch")
        .args(["-p1", "--dry-run", "--batch", "-i"])
        .arg(&patch)
        .current_dir(&p.root)
        .output()
    {
        assert!(
            dry.status.success(),
            "{}{}",
            String::from_utf8_lossy(&dry.stdout),
            String::from_utf8_lossy(&dry.stderr)
        );
    }
    assert!(git(&["apply"]).status.success());
    let read = |rel: &str| std::fs::read_to_string(p.root.join(rel)).unwrap();
    assert_eq!(
        read("src/lib.rs"),
        "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n"
    );
    assert_eq!(read("src/win.rs"), "fn g() {\r\n    ab();\r\n}\r\n");
    // The lone CR's edit, when it is offered, is made as it is (a CR inside the line).
    if r.stdout.contains("src/more.rs") {
        assert_eq!(
            read("src/more.rs"),
            "fn more() {\n    one();\r    two();\n}\n"
        );
    }
    assert!(!read(".git/config").contains("PWNED"));
}

/// A finding whose file name and title hold a line break, and Gemini's own multi-line text
/// (summary, detail, fix) with lines that are workflow commands: the text output keeps the one-
/// line fields to their line, escaped, and no line of stdout or stderr (text, patch, JSON) is a
/// command GitHub's runner would obey.
#[test]
fn a_line_break_in_a_finding_cannot_forge_a_line_of_text_output() {
    let p = formats_project();
    let fake = fake();
    let v = vars(&fake);
    let hostile = json!([
        {"severity": "high", "file": "a.rs\n::error::forged", "line": 1,
         "title": "Title\n::warning file=x::forged title", "detail": "d",
         "evidence": "pub fn add(a: u32, b: u32) -> u32 {",
         "edit": {"file": "a.rs\n::error::forged edit", "old": "x", "new": "y"}},
        {"severity": "low", "file": "src/lib.rs\r::notice::cr", "title": "CR\u{2028}::error::ls",
         "detail": "Lines of its own:\n::error::forged detail\n  ##[warning]legacy form",
         "fix": "x\n\t::add-mask::y"}
    ]);
    for format in ["text", "patch", "json"] {
        fake.push(Script::json(json!({
            "summary": "Checked.\n::error file=src/lib.rs,line=1::forged summary ##[error]x",
            "findings": hostile, "verdict": "needs_changes"})));
        let r = run(super::gemini_mcp(&p.root, &with(&v)).args([
            "precommit",
            "--format",
            format,
            "--fail-on",
            "none",
        ]));
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        assert!(
            workflow_commands(&r.stdout).is_empty() && workflow_commands(&r.stderr).is_empty(),
            "--format {format}: a forged workflow command:\n{}\n---\n{}",
            r.stdout,
            r.stderr
        );
        assert!(
            !r.stdout.contains("##[") && !r.stderr.contains("##["),
            "--format {format}: the older form of a workflow command:\n{}\n---\n{}",
            r.stdout,
            r.stderr
        );
        if format == "text" {
            // The findings are still shown, their line breaks visible, Gemini's own lines kept
            // as text.
            assert!(
                r.stdout.contains("Title\\n::warning file=x::forged title"),
                "{}",
                r.stdout
            );
            assert!(r.stdout.contains("CR\\u{2028}::error::ls"), "{}", r.stdout);
            assert!(
                r.stdout.contains(":\\:error::forged detail"),
                "{}",
                r.stdout
            );
        }
        if format == "json" {
            let out: Value = serde_json::from_str(&r.stdout).unwrap();
            let titles: Vec<&str> = out["findings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["title"].as_str().unwrap())
                .collect();
            assert!(
                titles.contains(&"Title\n::warning file=x::forged title"),
                "the same data: {titles:?}"
            );
        }
    }
}

/// Code Quality and SARIF place a finding only at a path of the project: one that names no file
/// there (nor one of the change: a deleted file's verified finding keeps its path) or holds a
/// control character loses its location; Code Quality leaves it out and says so.
#[test]
fn codequality_and_sarif_keep_only_paths_in_the_project() {
    let p = formats_project();
    let fake = fake();
    let v = vars(&fake);
    let findings = json!([
        {"severity": "high", "file": "src/lib.rs", "line": 2, "title": "Real",
         "detail": "d", "evidence": "a - b"},
        {"severity": "high", "file": "src/lib.rs\n::error::forged", "line": 2, "title": "Newline",
         "detail": "d", "evidence": "a - b"},
        {"severity": "high", "file": "src/never.rs", "line": 1, "title": "Missing",
         "detail": "d", "evidence": "fn never() {}"},
        {"severity": "high", "file": "src/\u{1b}]0;x\u{7}.rs", "line": 1, "title": "Escape",
         "detail": "d"}
    ]);
    fake.push(review_of(findings.clone(), "needs_changes"));
    let r =
        run(super::gemini_mcp(&p.root, &with(&v)).args(["precommit", "--format", "codequality"]));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let report: Value = serde_json::from_str(&r.stdout).unwrap();
    let paths: Vec<&str> = report
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["location"]["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["src/lib.rs"], "{report:#}");
    assert!(
        r.stderr.contains("3 finding(s) without a file"),
        "the left out are said: {}",
        r.stderr
    );
    assert!(workflow_commands(&r.stderr).is_empty(), "{}", r.stderr);

    fake.push(review_of(findings, "needs_changes"));
    let r = run(super::gemini_mcp(&p.root, &with(&v)).args(["precommit", "--format", "sarif"]));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let log: Value = serde_json::from_str(&r.stdout).unwrap();
    let results = log["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 4, "every finding is kept");
    let placed: Vec<(&str, &str)> = results
        .iter()
        .filter_map(|r| {
            let uri = r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].as_str()?;
            Some((r["properties"]["title"].as_str().unwrap(), uri))
        })
        .collect();
    assert_eq!(placed, [("Real", "src/lib.rs")], "{log:#}");
}

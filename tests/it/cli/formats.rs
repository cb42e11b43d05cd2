//! The review's output formats: JSON, SARIF (valid against the vendored 2.1.0 schema, with
//! fixes), GitLab's Code Quality report and a patch `git apply` takes.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use super::{
    changed_project, fake, formats_project, gemini_mcp, review, review_of, run, validate_sarif,
    vars, with,
};

/// The `file:` URI SARIF gives a (canonical) project root: `file:///tmp/x/`, on Windows
/// `file:///C:/…/x/` (no `\\?\`, forward slashes).
fn root_uri(root: &Path) -> String {
    let shown = gemini_mcp_server::collector::sandbox::shown(root)
        .display()
        .to_string()
        .replace('\\', "/");
    let slash = if shown.starts_with('/') { "" } else { "/" };
    format!("file://{slash}{shown}/")
}

#[test]
fn json_output_has_the_reply_findings_and_the_outcome() {
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    fake.push(review(
        &[("medium", "src/lib.rs", Some(2))],
        "needs_changes",
    ));
    let r = run(gemini_mcp(&p.root, &with(&v)).args([
        "precommit",
        "--format",
        "json",
        "--fail-on",
        "medium",
        "--original-request",
        "Make add subtract",
    ]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let out: Value = serde_json::from_str(&r.stdout).expect("stdout is one JSON document");
    assert_eq!(out["status"], "success");
    assert_eq!(out["verdict"], "needs_changes");
    assert_eq!(out["fail_on"], "medium");
    assert_eq!(out["passed"], false);
    let f = &out["findings"][0];
    assert_eq!(f["severity"], "medium");
    assert_eq!(f["file"], "src/lib.rs");
    assert_eq!(f["line"], 2);
    assert_eq!(f["title"], "A medium problem");
    assert_eq!(f["detail"], "Why the medium problem matters.");
    assert_eq!(f["fix"], "The fix.");
    assert_eq!(
        out["changed_files"],
        json!([{"repo": ".", "path": "src/lib.rs", "status": "modified"}])
    );
    let id = out["continuation_id"].as_str().expect("a continuation_id");
    assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");
    assert!(out["model"].is_string(), "{out}");
    assert!(out["usage"]["input"].as_u64().is_some(), "{out}");
    assert!(
        out["text"]
            .as_str()
            .unwrap()
            .contains("**Verdict: needs_changes**")
    );
    // The intent reached Gemini.
    let sent = fake.generate_requests();
    assert!(sent[0].last_user_text().contains("Make add subtract"));
}

#[test]
fn sarif_output_is_valid_and_places_the_findings() {
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    fake.push(review(
        &[
            ("critical", "src/lib.rs", Some(2)),
            ("low", "src/lib.rs", None),
        ],
        "do_not_commit",
    ));
    let r = run(gemini_mcp(&p.root, &with(&v)).args([
        "precommit",
        "--format",
        "sarif",
        "--fail-on",
        "high",
    ]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let log: Value = serde_json::from_str(&r.stdout).expect("stdout is one JSON document");
    validate_sarif(&log).unwrap();
    let run0 = &log["runs"][0];
    assert_eq!(run0["tool"]["driver"]["name"], "gemini-mcp");
    assert_eq!(run0["tool"]["driver"]["version"], env!("CARGO_PKG_VERSION"));
    let results = run0["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["level"], "error");
    assert_eq!(results[0]["ruleId"], "gemini-precommit/critical");
    let loc = &results[0]["locations"][0]["physicalLocation"];
    assert_eq!(loc["artifactLocation"]["uri"], "src/lib.rs");
    assert_eq!(loc["region"]["startLine"], 2);
    assert_eq!(results[1]["level"], "note");
    assert_eq!(run0["properties"]["verdict"], "do_not_commit");
    assert_eq!(
        run0["originalUriBaseIds"]["%SRCROOT%"]["uri"],
        root_uri(&p.root)
    );

    // Run from a subdirectory (PROJECT_ROOT there too), paths stay repository-relative and
    // %SRCROOT% is the repository's top.
    fake.push(review(&[("high", "src/lib.rs", Some(2))], "needs_changes"));
    let sub = p.root.join("src");
    let r = run(gemini_mcp(&sub, &with(&v)).env("PROJECT_ROOT", &sub).args([
        "precommit",
        "--format",
        "sarif",
    ]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let from_sub: Value = serde_json::from_str(&r.stdout).unwrap();
    validate_sarif(&from_sub).unwrap();
    assert_eq!(
        from_sub["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"],
        root_uri(&p.root)
    );
    assert_eq!(
        from_sub["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "src/lib.rs"
    );

    // The validator itself rejects what is missing.
    let mut broken = log.clone();
    broken["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"] = json!({});
    assert!(validate_sarif(&broken).is_err());
    let mut broken = log.clone();
    broken["runs"][0]["tool"]["driver"]["name"] = json!("");
    assert!(validate_sarif(&broken).is_err());
}

/// Findings with a checked edit each (one in the CRLF file), and one whose location is not in
/// what was sent.
fn findings_with_edits() -> Value {
    json!([
        {"severity": "high", "file": "src/lib.rs", "line": 2, "title": "Subtracts",
         "detail": "add subtracts.", "fix": "Add instead.", "evidence": "pub fn add(a: u32, b: u32) -> u32 {\n    a - b",
         "edit": {"file": "src/lib.rs", "old": "    a - b\n", "new": "    a + b\n"}},
        {"severity": "medium", "file": "src/win.rs", "line": 2, "title": "Two calls",
         "detail": "a and b are one call.", "evidence": "a();\n    b();",
         "edit": {"file": "src/win.rs", "old": "    a();\n    b();\n", "new": "    ab();\n"}},
        {"severity": "critical", "file": "src/lib.rs", "line": 40, "title": "Ghost",
         "detail": "Not there.", "evidence": "fn does_not_exist() {}"}
    ])
}

/// `--format patch`: the checked edits as a diff `git apply --check` accepts at the project root
/// (a CRLF file too), and applying it makes the edits; no edit is an empty patch and a note.
#[test]
fn the_patch_format_applies_with_git() {
    if crate::support::git_missing() {
        return;
    }
    let p = formats_project();
    let fake = fake();
    let v = vars(&fake);
    fake.push(review_of(findings_with_edits(), "needs_changes"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--format", "patch"]));
    // Exit by --fail-on as usual (the high finding is verified).
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("--- a/src/lib.rs\n+++ b/src/lib.rs\n"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("-    a();\r\n-    b();\r\n+    ab();\r\n"),
        "{:?}",
        r.stdout
    );
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
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(git(&["apply"]).status.success());
    assert_eq!(
        std::fs::read_to_string(p.root.join("src/lib.rs")).unwrap(),
        "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.root.join("src/win.rs")).unwrap(),
        "fn g() {\r\n    ab();\r\n}\r\n"
    );

    // No applicable edit: an empty patch, a note on stderr, the exit code by --fail-on.
    fake.push(review(&[("high", "src/lib.rs", Some(2))], "needs_changes"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args([
        "precommit",
        "--format",
        "patch",
        "--fail-on",
        "critical",
    ]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.stdout, "");
    assert!(r.stderr.contains("the patch is empty"), "{}", r.stderr);

    // Two edits of one place: the first in the file is kept, the later left out and said.
    p.write(
        "src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 {\n    a - b\n}\n",
    );
    fake.push(review_of(
        json!([
            {"severity": "low", "file": "src/lib.rs", "title": "Later", "detail": "d",
             "edit": {"file": "src/lib.rs", "old": "- b\n}", "new": "+ b\n}"}},
            {"severity": "low", "file": "src/lib.rs", "title": "Earlier", "detail": "d",
             "edit": {"file": "src/lib.rs", "old": "    a - b", "new": "    b + a"}}
        ]),
        "needs_changes",
    ));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--format", "patch"]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("+    b + a\n"), "{}", r.stdout);
    assert!(!r.stdout.contains("+    a + b"), "{}", r.stdout);
    assert!(
        r.stderr.contains(
            "the edit of finding 1 (`src/lib.rs`) was left out: it overlaps the edit of finding 2"
        ),
        "{}",
        r.stderr
    );
}

/// SARIF with fixes validates against the 2.1.0 schema; GitLab's Code Quality report has its
/// shape, the unverified finding's reason in its description.
#[test]
fn sarif_fixes_and_codequality_reports() {
    let p = formats_project();
    let fake = fake();
    let v = vars(&fake);
    fake.push(review_of(findings_with_edits(), "needs_changes"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--format", "sarif"]));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let log: Value = serde_json::from_str(&r.stdout).unwrap();
    validate_sarif(&log).unwrap();
    let results = log["runs"][0]["results"].as_array().unwrap();
    let with_fixes: Vec<&Value> = results
        .iter()
        .filter(|r| r.get("fixes").is_some())
        .collect();
    assert_eq!(with_fixes.len(), 2, "{results:#?}");
    let win = with_fixes
        .iter()
        .find(|r| r["properties"]["title"] == "Two calls")
        .unwrap();
    let change = &win["fixes"][0]["artifactChanges"][0];
    assert_eq!(change["artifactLocation"]["uri"], "src/win.rs");
    assert_eq!(
        change["replacements"][0]["deletedRegion"],
        json!({"startLine": 2, "startColumn": 1, "endLine": 3, "endColumn": 11})
    );
    assert_eq!(
        change["replacements"][0]["insertedContent"]["text"],
        "    ab();\r\n"
    );
    let ghost = results
        .iter()
        .find(|r| r["properties"]["title"] == "Ghost")
        .unwrap();
    assert_eq!(ghost["properties"]["verified"], false);
    assert!(ghost["rank"].as_f64().unwrap() < win["rank"].as_f64().unwrap());

    fake.push(review_of(findings_with_edits(), "needs_changes"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--format", "codequality"]));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let report: Value = serde_json::from_str(&r.stdout).unwrap();
    let issues = report.as_array().unwrap();
    assert_eq!(issues.len(), 3);
    for issue in issues {
        assert!(
            issue["fingerprint"].as_str().unwrap().len() == 64,
            "{issue}"
        );
        assert!(
            ["info", "minor", "major", "critical", "blocker"]
                .contains(&issue["severity"].as_str().unwrap())
        );
        assert!(issue["location"]["lines"]["begin"].as_u64().unwrap() >= 1);
    }
    let ghost = issues
        .iter()
        .find(|i| i["description"].as_str().unwrap().starts_with("Ghost"))
        .unwrap();
    assert!(
        ghost["description"]
            .as_str()
            .unwrap()
            .contains("(unverified: "),
        "{ghost}"
    );
    assert_eq!(ghost["location"]["path"], "src/lib.rs");
}

//! A team's review rules (`.gemini/styleguide.md`, `.gemini/config.yaml`), the operator's
//! (`GEMINI_MCP_REVIEW_RULES`) and the user's own file, through every review path that runs the
//! binary: `precommit`, `codereview` and `analyze` from the terminal, the pre-commit hook under a
//! real `git commit`, Claude Code's `PreToolUse` hook, and `codereview` over MCP (the GitHub
//! Action's run is in `action.rs`). What Gemini receives is read off the stand-in:
//! the rule in the system instruction, an ignored file's content nowhere, findings under the
//! threshold or past the cap not reported; hostile rules files (a link out of the project, 10 MB,
//! one holding a token, a configuration with a bad value) are treated as such files are.

use serde_json::{Value, json};

use super::{Project, changed_project, fake, gemini_mcp, project, review, run, vars, with};
use crate::support::fake_gemini::FakeGemini;

const RULE: &str = "RULE-ZEBRA-7: every public function names the unit of its result.";
const IGNORED: &str = "GENERATED-MARKER-31337";
const TOKEN: &str = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";

/// A project whose work tree changes `src/lib.rs` and a generated file, with the team's rules.
fn team_project(config: &str) -> Project {
    let p = changed_project();
    p.write(
        ".gemini/styleguide.md",
        &format!("# Our rules\n\n- {RULE}\n"),
    );
    p.write(".gemini/config.yaml", config);
    p.write(
        "generated/schema.rs",
        &format!("// {IGNORED}\npub const SCHEMA: &str = \"v1\";\n"),
    );
    p
}

const CONFIG: &str = "have_fun: false\ncode_review:\n  comment_severity_threshold: HIGH\n  max_review_comments: -1\n  pull_request_opened:\n    summary: true\nignore_patterns:\n  - \"generated/\"\n";

/// Everything a request carried, as one text.
fn everything(fake: &FakeGemini) -> String {
    fake.generate_requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect()
}

fn json_out(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn severities(out: &Value) -> Vec<String> {
    out["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no findings: {out}"))
        .iter()
        .map(|f| f["severity"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn precommit_follows_the_style_guide_the_threshold_and_the_ignore_patterns() {
    let p = team_project(CONFIG);
    let fake = fake();
    let v = vars(&fake);
    fake.push(review(
        &[
            ("low", "src/lib.rs", Some(2)),
            ("high", "src/lib.rs", Some(2)),
            ("medium", "src/lib.rs", Some(1)),
        ],
        "ready",
    ));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--format", "json"]));
    assert_eq!(
        r.code, 1,
        "a high finding fails the default gate: {}{}",
        r.stdout, r.stderr
    );
    let out = json_out(&r.stdout);
    assert_eq!(
        severities(&out),
        ["high"],
        "under the team's threshold: {out}"
    );

    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 1);
    let system = sent[0].system_text();
    assert!(system.contains(RULE), "{system}");
    assert!(system.contains(".gemini/styleguide.md"), "{system}");
    assert!(
        !everything(&fake).contains(IGNORED),
        "an ignored file's content is never sent"
    );
    let text = sent[0].last_user_text();
    assert!(
        text.contains("generated/schema.rs"),
        "the change is named: {text}"
    );
    assert!(text.contains("+    a - b"), "{text}");

    let notes = out["notices"].to_string();
    assert!(notes.contains("Review rules applied"), "{notes}");
    assert!(notes.contains("threshold high"), "{notes}");
    assert!(
        notes.contains("not applied here: have_fun, code_review.pull_request_opened"),
        "{notes}"
    );
    assert!(
        out["files"]["skipped"]
            .to_string()
            .contains("generated/schema.rs"),
        "{out}"
    );
}

#[test]
fn codereview_and_analyze_keep_ignored_files_out_and_cap_the_findings() {
    let p = team_project(
        "code_review:\n  max_review_comments: 2\nignore_patterns: [\"generated/**\", \"*.lock\"]\n",
    );
    p.write("Cargo.lock", "# lock IGNORED-LOCK-MARKER\n");
    let fake = fake();
    let v = vars(&fake);
    fake.push(review(
        &[
            ("low", "src/lib.rs", Some(1)),
            ("critical", "src/lib.rs", Some(2)),
            ("medium", "src/lib.rs", Some(1)),
            ("high", "src/lib.rs", Some(2)),
        ],
        "ready",
    ));
    let r = run(gemini_mcp(&p.root, &with(&v)).args([
        "codereview",
        "src",
        "generated",
        "Cargo.lock",
        "--context",
        "Adds numbers",
        "--format",
        "json",
    ]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let out = json_out(&r.stdout);
    assert_eq!(
        severities(&out),
        ["critical", "high"],
        "the two most severe: {out}"
    );
    let notes = out["notices"].to_string();
    assert!(
        notes.contains("2 less severe finding(s) left out"),
        "{notes}"
    );
    assert!(notes.contains("max_review_comments"), "{notes}");
    let skipped = out["files"]["skipped"].to_string();
    assert!(
        skipped.contains("generated/schema.rs") && skipped.contains("Cargo.lock"),
        "{skipped}"
    );

    fake.push(crate::support::fake_gemini::Script::text("FAKE-ANALYSIS"));
    let r =
        run(gemini_mcp(&p.root, &with(&v)).args(["analyze", ".", "--question", "What is here?"]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 2);
    assert!(sent[1].system_text().contains(RULE));
    assert!(
        sent[1].last_user_text().contains("a - b"),
        "the rest is sent"
    );
    let all = everything(&fake);
    assert!(!all.contains(IGNORED) && !all.contains("IGNORED-LOCK-MARKER"));

    // A tool that is not a review follows no rules.
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["chat", "hello"]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(!fake.generate_requests()[2].system_text().contains(RULE));
}

#[tokio::test]
async fn the_git_hook_claude_codes_hook_and_mcp_follow_the_rules_too() {
    if crate::support::git_missing() {
        return;
    }
    let p = team_project(CONFIG);
    let fake = fake();
    let v = vars(&fake);
    let env = with(&v);
    let r = run(gemini_mcp(&p.root, &env).args(["hook", "install", "--fail-on", "high"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    p.stage("src/lib.rs");
    p.stage("generated/schema.rs");
    // A medium finding is under the team's threshold: not reported, so the commit goes through.
    fake.push(review(&[("medium", "src/lib.rs", Some(2))], "ready"));
    let before = p.head();
    let r = p.git(&["commit", "-q", "-m", "subtract"], &env);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_ne!(p.head(), before);
    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 1);
    assert!(sent[0].system_text().contains(RULE));
    assert!(!everything(&fake).contains(IGNORED));

    // Claude Code's PreToolUse hook before the agent commits: the same rules; a high finding
    // (at the team's threshold) stops the command.
    p.write(
        "src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 {\n    a - b\n}\n// again\n",
    );
    fake.push(review(
        &[
            ("medium", "src/lib.rs", Some(2)),
            ("high", "src/lib.rs", Some(2)),
        ],
        "do_not_commit",
    ));
    let event = json!({
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "git commit -am again"},
        "cwd": p.root,
    });
    let mut child = gemini_mcp(&p.root, &env)
        .args(["hook", "claude-code", "--fail-on", "high"])
        .env("CLAUDE_PROJECT_DIR", &p.root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(event.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "blocked: {said}");
    assert!(
        said.contains("[HIGH]") && !said.contains("[MEDIUM]"),
        "{said}"
    );
    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 2);
    assert!(sent[1].system_text().contains(RULE));
    assert!(!everything(&fake).contains(IGNORED));

    // Over MCP (stdio, the real binary): codereview with the same rules.
    fake.push(review(
        &[
            ("low", "src/lib.rs", Some(2)),
            ("critical", "src/lib.rs", Some(2)),
        ],
        "ready",
    ));
    let client = crate::support::mcp::start(&p.root, &env).await;
    let result = crate::support::mcp::call(
        &client,
        "codereview",
        json!({"files": ["src/lib.rs", "generated/schema.rs"], "context": "Adds numbers"}),
    )
    .await
    .expect("a tool result");
    let result = serde_json::to_value(&result).unwrap();
    assert_ne!(result["isError"], true, "{result}");
    let findings = &result["structuredContent"]["findings"];
    assert_eq!(findings.as_array().map(Vec::len), Some(1), "{result}");
    assert_eq!(findings[0]["severity"], "critical");
    let notices = result["structuredContent"]["notices"].to_string();
    assert!(notices.contains("Review rules applied"), "{notices}");
    let sent = fake.generate_requests();
    assert!(sent[2].system_text().contains(RULE));
    assert!(!everything(&fake).contains(IGNORED));

    // The call's own threshold wins over the repository's.
    fake.push(review(
        &[
            ("low", "src/lib.rs", Some(2)),
            ("critical", "src/lib.rs", Some(2)),
        ],
        "ready",
    ));
    let result = crate::support::mcp::call(
        &client,
        "codereview",
        json!({"files": ["src/lib.rs"], "context": "Adds numbers", "severity_filter": "all"}),
    )
    .await
    .expect("a tool result");
    let result = serde_json::to_value(&result).unwrap();
    let findings = result["structuredContent"]["findings"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let found: Vec<&str> = findings
        .iter()
        .map(|f| f["severity"].as_str().unwrap())
        .collect();
    assert_eq!(found, ["critical", "low"], "{result}");
    client.cancel().await.ok();
}

#[test]
fn hostile_rules_files_are_treated_as_such_files_are() {
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("rules.md"), "OUTSIDE-RULE-MARKER\n").unwrap();

    // A style guide that links out of the project: not read, and the reply says so.
    #[cfg(unix)]
    {
        std::fs::create_dir_all(p.root.join(".gemini")).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("rules.md"),
            p.root.join(".gemini/styleguide.md"),
        )
        .unwrap();
        fake.push(review(&[], "ready"));
        let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--format", "json"]));
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        assert!(!everything(&fake).contains("OUTSIDE-RULE-MARKER"));
        let notes = json_out(&r.stdout)["notices"].to_string();
        assert!(
            notes.contains(".gemini/styleguide.md was not applied"),
            "{notes}"
        );
        assert!(notes.contains("outside the project root"), "{notes}");
        std::fs::remove_file(p.root.join(".gemini/styleguide.md")).unwrap();
    }

    // 10 MB: over the cap, not applied, and nothing of it sent.
    let huge = format!("HUGE-RULE-MARKER\n{}", "x".repeat(10 * 1024 * 1024));
    p.write(".gemini/styleguide.md", &huge);
    fake.push(review(&[], "ready"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--format", "json"]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(!everything(&fake).contains("HUGE-RULE-MARKER"));
    let notes = json_out(&r.stdout)["notices"].to_string();
    assert!(notes.contains("over the 64 KiB"), "{notes}");

    // A token in it: redacted like any file, the rest applied.
    p.write(
        ".gemini/styleguide.md",
        &format!("- {RULE}\n- deploy with {TOKEN}\n"),
    );
    fake.push(review(&[], "ready"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--format", "json"]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(!everything(&fake).contains(TOKEN));
    assert!(
        fake.generate_requests()
            .last()
            .unwrap()
            .system_text()
            .contains(RULE)
    );
    assert!(!r.stdout.contains(TOKEN) && !r.stderr.contains(TOKEN));
    let notes = json_out(&r.stdout)["notices"].to_string();
    assert!(notes.contains("in the rules were replaced"), "{notes}");

    // A configuration with a bad value: refused before Gemini, naming the field and the fix.
    let asked = fake.generate_requests().len();
    p.write(
        ".gemini/config.yaml",
        "code_review:\n  comment_severity_threshold: SEVERE\n",
    );
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit"]));
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("code_review.comment_severity_threshold")
            && r.stderr.contains("LOW, MEDIUM, HIGH or CRITICAL"),
        "{}",
        r.stderr
    );
    assert_eq!(fake.generate_requests().len(), asked, "nothing was sent");

    // A configuration that links out of the project: refused, not silently dropped.
    #[cfg(unix)]
    {
        std::fs::remove_file(p.root.join(".gemini/config.yaml")).unwrap();
        std::fs::write(outside.path().join("config.yaml"), "code_review: {}\n").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("config.yaml"),
            p.root.join(".gemini/config.yaml"),
        )
        .unwrap();
        let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit"]));
        assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(".gemini/config.yaml"), "{}", r.stderr);
        assert_eq!(fake.generate_requests().len(), asked, "nothing was sent");
    }
}

#[test]
fn the_operators_and_the_users_rules_come_in_their_order() {
    let p = project();
    p.write(".gemini/styleguide.md", "REPOSITORY-RULE\n");
    p.write(
        "src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 {\n    a - b\n}\n",
    );
    let operator = tempfile::tempdir().unwrap();
    let operator_file = operator.path().join("policy.md");
    std::fs::write(&operator_file, "OPERATOR-RULE\n").unwrap();
    p.write(".home/.config/gemini-mcp/review-rules.md", "USER-RULE\n");
    let fake = fake();
    let v = vars(&fake);
    let mut env = with(&v).to_vec();
    env.push(("GEMINI_MCP_REVIEW_RULES", operator_file.to_str().unwrap()));
    fake.push(review(&[], "ready"));
    let r = run(gemini_mcp(&p.root, &env).args(["precommit", "--format", "json"]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let system = fake.generate_requests()[0].system_text();
    let at = |m: &str| {
        system
            .find(m)
            .unwrap_or_else(|| panic!("{m} missing: {system}"))
    };
    assert!(at("OPERATOR-RULE") < at("REPOSITORY-RULE") && at("REPOSITORY-RULE") < at("USER-RULE"));
    let notes = json_out(&r.stdout)["notices"].to_string();
    assert!(
        notes.contains("policy.md") && notes.contains("review-rules.md"),
        "{notes}"
    );

    // The user can turn their file off; an operator file that is not there is refused at start.
    env.push(("GEMINI_MCP_USER_REVIEW_RULES", "none"));
    fake.push(review(&[], "ready"));
    let r = run(gemini_mcp(&p.root, &env).args(["precommit", "--format", "json"]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        !fake.generate_requests()[1]
            .system_text()
            .contains("USER-RULE")
    );
    let missing = operator.path().join("gone.md");
    let r = run(gemini_mcp(
        &p.root,
        &[
            ("GEMINI_API_KEY", v[0].1.as_str()),
            ("GEMINI_BASE_URL", v[1].1.as_str()),
            ("GEMINI_MCP_REVIEW_RULES", missing.to_str().unwrap()),
        ],
    )
    .args(["precommit"]));
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("GEMINI_MCP_REVIEW_RULES"), "{}", r.stderr);
}

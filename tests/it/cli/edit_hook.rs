//! `hook claude-code-edit` (Claude Code's PostToolUse hook on Edit, MultiEdit and Write) run as
//! Claude Code runs it, with the hook's JSON on stdin: what it sends, what it hands back, and
//! what it refuses to send — a file outside the project (also through a link), a secret file —
//! and that it never blocks (every outcome is exit 0). The real Claude Code drives it in
//! `clients::packages`.

use std::io::Write as _;
use std::process::Stdio;

use serde_json::{Value, json};

use super::{Project, fake, gemini_mcp, project, vars};
use crate::support::fake_gemini::{FakeGemini, Script};

fn hook(p: &Project, fake: &FakeGemini, event: &Value, args: &[&str]) -> (i32, String, String) {
    let v = vars(fake);
    let env = [(v[0].0, v[0].1.as_str()), (v[1].0, v[1].1.as_str())];
    let mut child = gemini_mcp(&p.root, &env)
        .args(["hook", "claude-code-edit"])
        .args(args)
        .env("CLAUDE_PROJECT_DIR", &p.root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(event.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn edit(p: &Project, file: &str, new: &str) -> Value {
    json!({
        "hook_event_name": "PostToolUse",
        "tool_name": "Edit",
        "tool_input": {"file_path": p.root.join(file), "old_string": "a + b", "new_string": new},
        "tool_response": {"success": true},
        "cwd": p.root,
    })
}

fn finding(file: &str) -> Script {
    Script::json(json!({
        "summary": "Subtracts.",
        "findings": [{"severity": "high", "file": file, "line": 2, "title": "HOOK-FINDING",
                      "detail": "add subtracts.", "evidence": "a - b"}]
    }))
}

#[test]
fn an_edit_is_reviewed_once_a_window_and_the_finding_handed_back() {
    let p = project();
    p.write(
        "src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 {\n    a - b\n}\n",
    );
    let fake = fake();
    fake.push(finding("src/lib.rs"));
    let (code, out, err) = hook(&p, &fake, &edit(&p, "src/lib.rs", "a - b"), &[]);
    assert_eq!(code, 0, "{err}");
    let said: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(said["hookSpecificOutput"]["hookEventName"], "PostToolUse");
    let context = said["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(
        context.contains("HOOK-FINDING") && context.contains("src/lib.rs:2"),
        "{context}"
    );
    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 1);
    assert!(
        sent[0].last_user_text().contains("lines 2"),
        "told which lines changed"
    );
    assert_eq!(sent[0].body["serviceTier"], "flex");

    // Within the window: not reviewed again, nothing said, and still exit 0.
    let (code, out, _) = hook(&p, &fake, &edit(&p, "src/lib.rs", "a - b"), &[]);
    assert_eq!((code, out.as_str()), (0, ""));
    assert_eq!(fake.generate_requests().len(), 1);
    // After it (`--every 0`): reviewed, the held edit with it.
    fake.push(Script::json(json!({"summary": "Fine.", "findings": []})));
    let (code, out, _) = hook(
        &p,
        &fake,
        &edit(&p, "src/lib.rs", "a - b"),
        &["--every", "0"],
    );
    assert_eq!((code, out.as_str()), (0, ""), "nothing found, nothing said");
    assert_eq!(fake.generate_requests().len(), 2);
}

#[test]
fn what_lies_outside_the_project_or_is_a_secret_is_never_sent_and_nothing_blocks() {
    let p = project();
    let fake = fake();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("out.rs"),
        "pub fn add() -> u32 {\n    a - b\n}\n",
    )
    .unwrap();
    let outside_file = std::fs::canonicalize(outside.path().join("out.rs")).unwrap();
    let mut cases = vec![json!({
        "tool_name": "Write",
        "tool_input": {"file_path": outside_file, "content": "x"},
        "cwd": p.root,
    })];
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&outside_file, p.root.join("src/link.rs")).unwrap();
        cases.push(edit(&p, "src/link.rs", "a - b"));
    }
    p.write(".env", "API_KEY=a - b\n");
    cases.push(edit(&p, ".env", "a - b"));
    cases
        .push(json!({"tool_name": "Read", "tool_input": {"file_path": p.root.join("src/lib.rs")}}));
    cases.push(json!("not the hook's JSON"));
    for event in &cases {
        fake.push(finding("src/lib.rs"));
        let (code, out, err) = hook(&p, &fake, event, &["--every", "0"]);
        assert_eq!(code, 0, "never blocks: {event} {err}");
        assert!(!out.contains("HOOK-FINDING"), "{event}: {out}");
    }
    let sent: String = fake
        .generate_requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    assert!(sent.is_empty(), "sent: {sent}");

    // Gemini overloaded past the hook's time: the review is given up, nothing said, exit 0.
    let p2 = project();
    p2.write(
        "src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 {\n    a - b\n}\n",
    );
    let gone = FakeGemini::start();
    gone.push(Script::error(503, "UNAVAILABLE", "overloaded"));
    for _ in 0..8 {
        gone.push(Script::error(503, "UNAVAILABLE", "overloaded"));
    }
    let (code, out, _) = hook(
        &p2,
        &gone,
        &edit(&p2, "src/lib.rs", "a - b"),
        &["--timeout", "3"],
    );
    assert_eq!((code, out.as_str()), (0, ""));
}

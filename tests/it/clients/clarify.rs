//! A question asked inside the call, with the real Claude Code: Gemini asks for a file, Claude
//! Code (2026-07-28, form elicitation) is asked within the `codereview` call which to send, its
//! `Elicitation` hook answers (as a user at the dialog would), and the same call continues: the
//! stand-in Gemini's second request holds the file, and Claude's model receives the answer made
//! with it, in one tool result.

use serde_json::json;

use super::Project;
use crate::support::fake_gemini::Script;
use crate::support::scripted_model::{ToolCall, calls_in_order};

const DB_RS: &str = "pub fn connect() -> Pool { Pool::open(\"db-marker-8841\") }\n";
const ANSWER: &str = "REVIEW-WITH-DB: connect() opens a pool per call; share one.";

#[test]
fn claude_code_answers_geminis_question_inside_the_call() {
    let project = Project::new();
    crate::support::project::write(project.dir.path(), "src/db.rs", DB_RS);
    project.gemini.push(Script::json(json!({
        "summary": "",
        "findings": [],
        "clarification": {"question": "How is the pool opened?", "files_needed": ["src/db.rs"]}
    })));
    project.gemini.push(Script::json(json!({
        "summary": ANSWER,
        "verdict": "needs_changes",
        "findings": []
    })));
    // The hook stands in for the user at Claude Code's dialog: it keeps what it was asked and
    // sends the file Gemini named.
    let asked = project.dir.path().join(".elicitation.json");
    let answer = json!({"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "accept",
                        "content": {"files": ["src/db.rs"]}}});
    let hook = format!("cat > '{}'; printf '%s' '{}'", asked.display(), answer);
    let settings = json!({"hooks": {"Elicitation": [{"matcher": "gemini",
        "hooks": [{"type": "command", "command": hook}]}]}});
    let call = ToolCall::new(
        "codereview",
        json!({"files": ["src/lib.rs"], "context": "add() should add two numbers."}),
    );
    let Some((got, log)) = project.drive_claude_with(calls_in_order(vec![call]), settings) else {
        return;
    };
    let asked = std::fs::read_to_string(&asked).unwrap_or_else(|_| {
        panic!(
            "Claude Code's Elicitation hook was not run; its log:\n{}",
            tail(&log)
        )
    });
    assert!(
        asked.contains("How is the pool opened?") && asked.contains("src/db.rs"),
        "the question Claude Code was asked: {asked}"
    );
    assert_eq!(got.len(), 1, "tool results: {got:?}");
    assert!(!got[0].is_error, "{}", got[0].text);
    assert!(
        got[0].text.contains(ANSWER),
        "the answer made with the file did not reach the model; it received:\n{}",
        got[0].text
    );
    let sent = project.gemini.generate_requests();
    assert_eq!(sent.len(), 2, "Gemini requests");
    assert!(
        sent[1].body.to_string().contains("db-marker-8841"),
        "Gemini's second request lacks the file it asked for"
    );
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}

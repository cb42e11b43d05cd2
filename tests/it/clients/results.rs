//! What each client's model receives as the tool result: Gemini's answer and the
//! `continuation_id`, an investigation, a review's summary and findings (many of them, whole), a
//! long answer whole, and a checked edit Claude Code applies with its own edit tool.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Client, Project, locate};
use crate::support::fake_gemini::Script;
use crate::support::scripted_model::{Brain, Received, ToolCall, calls_in_order, find_uuid};

const ANSWER: &str =
    "GEMINI-ANSWER: a trie pays off only above ten thousand routes; keep the sorted vector.";

/// Chat, then a second chat continuing the thread with the `continuation_id` the model read in
/// the first result: the answer and the id reach the model, and the id works.
fn chat_answer_and_continuation(client: Client) {
    let project = Project::new();
    project.gemini.push(Script::text(ANSWER));
    let brain: Brain = Arc::new(|seen: &[Received]| match seen {
        [] => Some(ToolCall::new(
            "chat",
            json!({"prompt": "Is a trie overkill for 200 routes?"}),
        )),
        [first] => {
            let id = find_uuid(&first.text)?;
            Some(ToolCall::new(
                "chat",
                json!({"prompt": "And for 50,000 routes?", "continuation_id": id}),
            ))
        }
        _ => None,
    });
    let Some(got) = project.drive(client, brain) else {
        return;
    };
    report(client, "chat", &got);
    assert!(
        !got.is_empty(),
        "{client:?}: the model received no tool result"
    );
    let first = &got[0];
    assert!(!first.is_error, "{client:?}: {}", first.text);
    assert!(
        first.text.contains(ANSWER),
        "{client:?}: Gemini's answer did not reach the model; it received:\n{}",
        first.text
    );
    let id = find_uuid(&first.text).unwrap_or_else(|| {
        panic!(
            "{client:?}: no continuation_id reached the model; it received:\n{}",
            first.text
        )
    });
    assert_eq!(
        got.len(),
        2,
        "{client:?}: the model did not get to continue the thread: {got:?}"
    );
    // The default answer echoes the number of user turns Gemini was sent: the second call
    // carried the first exchange.
    assert!(
        got[1].text.contains("turns=2"),
        "{client:?}: continuing with {id} did not carry the thread; the model received:\n{}",
        got[1].text
    );
    let sent = project.gemini.generate_requests();
    assert_eq!(sent.len(), 2, "{client:?}: Gemini calls");
    assert!(
        sent[1]
            .messages()
            .iter()
            .any(|(role, text)| role == "model" && text.contains(ANSWER)),
        "{client:?}: the second Gemini call lacks the first answer: {:?}",
        sent[1].messages()
    );
}

/// A review answer in the response schema's shape, with `n` findings on `src/lib.rs`.
fn review(n: usize, detail_chars: usize) -> (Script, Vec<String>) {
    let titles: Vec<String> = (1..=n)
        .map(|i| format!("FINDING-{i:03} add() subtracts in case {i}"))
        .collect();
    let findings: Vec<Value> = titles
        .iter()
        .enumerate()
        .map(|(i, title)| {
            let severity = ["critical", "high", "medium", "low"][i % 4];
            json!({"severity": severity, "file": "src/lib.rs", "line": 2, "title": title,
                   "detail": format!("Evidence {i}: {}", "the body returns a - b. ".repeat(detail_chars / 24 + 1)),
                   "fix": "Return a + b."})
        })
        .collect();
    let script = Script::json(json!({
        "summary": "REVIEW-SUMMARY: add() subtracts instead of adding.",
        "findings": findings,
        "verdict": "needs_changes"
    }));
    (script, titles)
}

/// Claude Code applies a checked edit from a review with its own Edit tool, as it is: the
/// finding's `edit.old`/`edit.new` become the tool's `old_string`/`new_string` (after the Read
/// Claude Code requires before an edit), and the file changes as the edit says.
#[test]
fn claude_code_applies_a_checked_edit_with_its_own_edit_tool() {
    let project = Project::new();
    let Some((bin, path)) = locate(Client::ClaudeCode) else {
        return;
    };
    let file = project.root().join("src/lib.rs");
    project.gemini.push(Script::json(json!({
        "summary": "add() subtracts.",
        "verdict": "needs_changes",
        "findings": [
            {"severity": "high", "file": "src/lib.rs", "line": 7, "title": "add() subtracts",
             "detail": "The body returns a - b.", "evidence": "a - b",
             "fix": "Return the sum.",
             "edit": {"file": "src/lib.rs", "old": "    a - b\n", "new": "    a + b\n"}},
            {"severity": "low", "file": "src/lib.rs", "line": 1, "title": "An edit that cannot apply",
             "detail": "d", "evidence": "pub fn add(a: i32, b: i32) -> i32 {",
             "edit": {"file": "src/lib.rs", "old": "a * b", "new": "a + b"}}
        ]
    })));
    let target = file.display().to_string();
    let brain: Brain = Arc::new(move |seen: &[Received]| match seen.len() {
        0 => Some(codereview_call()),
        1 => Some(ToolCall::new("Read", json!({"file_path": target}))),
        2 => {
            let (old, new) = applicable_edit(&seen[0].text)?;
            Some(ToolCall::new(
                "Edit",
                json!({"file_path": target, "old_string": old, "new_string": new}),
            ))
        }
        _ => None,
    });
    let home = tempfile::tempdir().unwrap();
    let got = project.drive_claude(&bin, &path, home.path(), brain, "mcp__gemini__* Read Edit");
    report(Client::ClaudeCode, "an edit applied", &got);
    assert_eq!(got.len(), 3, "the review, the read and the edit: {got:?}");
    let review = &got[0].text;
    assert!(review.contains("\"applicable\":true"), "{review}");
    assert!(
        review.contains("does not occur"),
        "the edit that cannot apply says why: {review}"
    );
    assert!(!got[2].is_error, "the Edit tool failed: {}", got[2].text);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
    );
}

/// The first applicable edit's `old` and `new` in a review result as Claude Code hands it to
/// its model (the structured content, as JSON text).
fn applicable_edit(text: &str) -> Option<(String, String)> {
    let v: Value = serde_json::from_str(&text[text.find('{')?..]).ok()?;
    v["findings"].as_array()?.iter().find_map(|f| {
        let e = &f["edit"];
        (e["applicable"] == true).then(|| {
            (
                e["old"].as_str().unwrap_or_default().to_string(),
                e["new"].as_str().unwrap_or_default().to_string(),
            )
        })
    })
}

fn codereview_call() -> ToolCall {
    ToolCall::new(
        "codereview",
        json!({"files": ["src/lib.rs"], "context": "add() should add two numbers."}),
    )
}

/// A review's summary and every finding (title, file and line) reach the model.
fn codereview_findings(client: Client, n: usize, detail_chars: usize, label: &str) {
    let project = Project::new();
    let (script, titles) = review(n, detail_chars);
    project.gemini.push(script);
    let Some(got) = project.drive(client, calls_in_order(vec![codereview_call()])) else {
        return;
    };
    report(client, label, &got);
    assert_eq!(got.len(), 1, "{client:?}: tool results received: {got:?}");
    let text = &got[0].text;
    assert!(!got[0].is_error, "{client:?}: {text}");
    assert!(
        text.contains("REVIEW-SUMMARY: add() subtracts instead of adding."),
        "{client:?}: the review's summary did not reach the model; it received:\n{text}"
    );
    let missing: Vec<&String> = titles
        .iter()
        .filter(|t| !text.contains(t.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "{client:?}: {} of {n} findings did not reach the model (first: {:?}); it received {} bytes:\n{}",
        missing.len(),
        missing.first(),
        text.len(),
        text.chars().take(3000).collect::<String>()
    );
    assert!(
        text.contains("src/lib.rs"),
        "{client:?}: the findings' file did not reach the model:\n{text}"
    );
}

/// A consensus review (`models`): each stand-in model plants its findings; the client's model
/// receives the synthesis, the finding both models report at one place with who found it, the
/// one only one model found, and the unverified one kept apart with its one model.
fn consensus_reaches_the_model(client: Client) {
    let project = Project::new();
    project.gemini.respond_with(|r| {
        if r.system_text().contains("You combine the independent answers") {
            return Some(Script::text("CONSENSUS-SYNTHESIS: both reviewers find the subtraction."));
        }
        let own = if r.model.as_deref() == Some("gemini-2.5-pro") {
            json!({"severity": "low", "file": "src/lib.rs", "line": 1, "title": "ONLY-PRO: name the parameters",
                   "detail": "d", "evidence": "pub fn add(a: i32, b: i32) -> i32 {"})
        } else {
            // A quote that is not in the file: unverified, never merged.
            json!({"severity": "low", "file": "src/lib.rs", "line": 1, "title": "ONLY-FLASH: document add",
                   "detail": "d", "evidence": "fn add(a: u64) -> u64"})
        };
        Some(Script::json(json!({"summary": "s", "findings": [
            {"severity": "high", "file": "src/lib.rs", "line": 2, "title": "BOTH: add subtracts",
             "detail": "d", "evidence": "a - b"}, own]})))
    });
    let call = ToolCall::new(
        "codereview",
        json!({"files": ["src/lib.rs"], "context": "add() should add.",
               "models": ["gemini-2.5-pro", "gemini-2.5-flash"]}),
    );
    let Some(got) = project.drive(client, calls_in_order(vec![call])) else {
        return;
    };
    report(client, "consensus", &got);
    assert_eq!(got.len(), 1, "{client:?}: tool results received: {got:?}");
    let text = &got[0].text;
    assert!(!got[0].is_error, "{client:?}: {text}");
    for wanted in [
        "CONSENSUS-SYNTHESIS: both reviewers find the subtraction.",
        "BOTH: add subtracts",
        "ONLY-PRO: name the parameters",
        "ONLY-FLASH: document add",
    ] {
        assert!(
            text.contains(wanted),
            "{client:?}: `{wanted}` did not reach the model:\n{text}"
        );
    }
    // Who found what, as the text says it or as the structured content holds it (each client
    // hands its model one of the two).
    let both = [
        "gemini-2.5-pro, gemini-2.5-flash",
        r#""found_by":["gemini-2.5-pro","gemini-2.5-flash"]"#,
    ];
    let pro = [
        "Found by gemini-2.5-pro only",
        r#""found_by":["gemini-2.5-pro"]"#,
    ];
    let flash = [
        "Found by gemini-2.5-flash only",
        r#""found_by":["gemini-2.5-flash"]"#,
    ];
    for (what, forms) in [
        ("both models", both),
        ("pro alone", pro),
        ("flash alone", flash),
    ] {
        assert!(
            forms.iter().any(|f| text.contains(f)),
            "{client:?}: who found the finding of {what} did not reach the model:\n{text}"
        );
    }
}

const INVESTIGATION: &str =
    "INVESTIGATION-ANSWER: add() subtracts (src/lib.rs:2); every caller gets a - b.";

/// `investigate`: Gemini reads a file itself through a function call, then answers; the client's
/// model receives the answer with its citation, the steps and the `continuation_id`, and Gemini
/// received the file's numbered lines as the function's result.
fn investigation_reaches_the_model(client: Client) {
    let project = Project::new();
    project
        .gemini
        .push(Script::calls(
            &[("read_file", json!({"path": "src/lib.rs"}))],
            "Q2lRQjBlMktUaG91Z2h0LW9uZQ==",
            [100, 5, 5],
        ))
        .push(Script::text(INVESTIGATION));
    let call = ToolCall::new(
        "investigate",
        json!({"task": "Why does add(2, 2) return 0?", "max_steps": 5}),
    );
    let Some(got) = project.drive(client, calls_in_order(vec![call])) else {
        return;
    };
    report(client, "investigate", &got);
    assert_eq!(got.len(), 1, "{client:?}: tool results received: {got:?}");
    let text = &got[0].text;
    assert!(!got[0].is_error, "{client:?}: {text}");
    assert!(
        text.contains(INVESTIGATION),
        "{client:?}: the investigation's answer did not reach the model; it received:\n{text}"
    );
    // The text's footer names the files read; the structured content lists each step.
    assert!(
        text.contains("src/lib.rs")
            && (text.contains("1 step (answered)") || text.contains("read_file")),
        "{client:?}: the steps did not reach the model:\n{text}"
    );
    assert!(
        find_uuid(text).is_some(),
        "{client:?}: no continuation_id reached the model:\n{text}"
    );
    let sent = project.gemini.generate_requests();
    assert_eq!(sent.len(), 2, "{client:?}: Gemini calls");
    assert!(
        sent[1].raw_body.contains("2│     a - b"),
        "{client:?}: Gemini did not get the file it asked for: {}",
        sent[1].raw_body
    );
}

/// Prints the size of what the model received (BENCHMARKS.md, "What each client's model reads").
fn report(client: Client, scenario: &str, got: &[Received]) {
    for (i, r) in got.iter().enumerate() {
        eprintln!(
            "client-bytes {client:?} {scenario} result {}: {} bytes",
            i + 1,
            r.text.len()
        );
    }
}

#[test]
fn claude_code_model_receives_the_chat_answer_and_continuation_id() {
    chat_answer_and_continuation(Client::ClaudeCode);
}

#[test]
fn codex_model_receives_the_chat_answer_and_continuation_id() {
    chat_answer_and_continuation(Client::Codex);
}

#[test]
fn gemini_cli_model_receives_the_chat_answer_and_continuation_id() {
    chat_answer_and_continuation(Client::GeminiCli);
}

/// A Deep Research run (`research`, turned on) reaches the model in each client: the report and
/// every source it cites, after the run was polled to its end in the background.
fn research_reaches_the_model(client: Client) {
    let project = Project::with_settings(&[
        ("GEMINI_MCP_DEEP_RESEARCH", "1"),
        ("GEMINI_MCP_BACKGROUND_POLL_MS", "50"),
    ]);
    project.gemini.push(
        Script::text("RESEARCH-REPORT: use clap 4 for the command line.")
            .sources(&[
                ("https://docs.rs/clap/latest/clap/", "clap - Rust"),
                ("https://github.com/clap-rs/clap/releases", "clap releases"),
            ])
            .delay_headers(std::time::Duration::from_millis(500)),
    );
    let call = ToolCall::new(
        "research",
        json!({"question": "Which argument parser should a Rust CLI use?"}),
    );
    let Some(got) = project.drive(client, calls_in_order(vec![call])) else {
        return;
    };
    report(client, "research", &got);
    assert_eq!(got.len(), 1, "{client:?}: tool results received: {got:?}");
    let text = &got[0].text;
    assert!(!got[0].is_error, "{client:?}: {text}");
    for wanted in [
        "RESEARCH-REPORT: use clap 4 for the command line.",
        "https://docs.rs/clap/latest/clap/",
        "https://github.com/clap-rs/clap/releases",
    ] {
        assert!(
            text.contains(wanted),
            "{client:?}: `{wanted}` did not reach the model:\n{text}"
        );
    }
    let polls = project
        .gemini
        .interaction_requests(crate::support::fake_gemini::InteractionOp::Get);
    assert!(!polls.is_empty(), "{client:?}: the run was polled");
}

#[test]
fn claude_code_model_receives_a_research_report() {
    research_reaches_the_model(Client::ClaudeCode);
}

#[test]
fn codex_model_receives_a_research_report() {
    research_reaches_the_model(Client::Codex);
}

#[test]
fn gemini_cli_model_receives_a_research_report() {
    research_reaches_the_model(Client::GeminiCli);
}

#[test]
fn claude_code_model_receives_a_consensus() {
    consensus_reaches_the_model(Client::ClaudeCode);
}

#[test]
fn codex_model_receives_a_consensus() {
    consensus_reaches_the_model(Client::Codex);
}

#[test]
fn gemini_cli_model_receives_a_consensus() {
    consensus_reaches_the_model(Client::GeminiCli);
}

#[test]
fn claude_code_model_receives_the_investigation() {
    investigation_reaches_the_model(Client::ClaudeCode);
}

#[test]
fn codex_model_receives_the_investigation() {
    investigation_reaches_the_model(Client::Codex);
}

#[test]
fn gemini_cli_model_receives_the_investigation() {
    investigation_reaches_the_model(Client::GeminiCli);
}

#[test]
fn claude_code_model_receives_the_review_summary_and_findings() {
    codereview_findings(Client::ClaudeCode, 3, 80, "codereview");
}

#[test]
fn codex_model_receives_the_review_summary_and_findings() {
    codereview_findings(Client::Codex, 3, 80, "codereview");
}

#[test]
fn gemini_cli_model_receives_the_review_summary_and_findings() {
    codereview_findings(Client::GeminiCli, 3, 80, "codereview");
}

/// A review with many findings stays inline in Claude Code (not saved to a file the model
/// never reads): every finding reaches the model.
#[test]
fn claude_code_model_receives_a_review_with_many_findings_whole() {
    codereview_findings(Client::ClaudeCode, 40, 200, "codereview-40");
}

fn long_answer(n: usize) -> Vec<String> {
    (1..=n)
        .map(|i| format!("LONG-{i:04} the router keeps a sorted vector and a binary search; measured, it stays flat."))
        .collect()
}

/// A long answer stays inline in Claude Code, whole: its last line reaches the model. An answer
/// over the server's size cap is cut by the server and still reaches the model inline, far past
/// any preview of a result saved to a file.
#[test]
fn claude_code_model_receives_a_long_answer_whole() {
    let project = Project::new();
    let lines = long_answer(250);
    let answer = lines.join("\n");
    assert!(answer.len() > 20_000, "{}", answer.len());
    let huge = long_answer(1_000);
    project.gemini.push(Script::text(answer));
    project.gemini.push(Script::text(huge.join("\n")));
    let brain = calls_in_order(vec![
        ToolCall::new("chat", json!({"prompt": "Explain the router in detail."})),
        ToolCall::new("chat", json!({"prompt": "Explain it in even more detail."})),
    ]);
    let Some(got) = project.drive(Client::ClaudeCode, brain) else {
        return;
    };
    report(Client::ClaudeCode, "chat-long", &got);
    assert_eq!(got.len(), 2, "tool results received: {got:?}");
    let cut = &got[1].text;
    assert!(
        cut.contains(&huge[150]) && cut.len() < 50_000,
        "an answer over the cap did not reach the model inline ({} bytes):\n{}",
        cut.len(),
        cut.chars().take(3000).collect::<String>()
    );
    let text = &got[0].text;
    for probe in [&lines[0], &lines[125], &lines[249]] {
        assert!(
            text.contains(probe.as_str()),
            "the long answer did not reach the model whole (missing {probe:?}); it received {} bytes:\n{}",
            text.len(),
            text.chars().take(3000).collect::<String>()
        );
    }
}

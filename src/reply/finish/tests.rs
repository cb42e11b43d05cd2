use super::*;
use crate::collector::{SkipReason, Skipped};
use crate::reply::review::Clarification;
use crate::reply::{ChangedFileView, IncludedFile, ReviewBody, SavedTurn, StepView};

const ID: &str = "0b7f3c1e-5d7a-4a57-9a55-1f0c2b9d8e11";
const CAP: usize = 48_000;

fn finding(i: usize, severity: Severity) -> Finding {
    Finding {
        detail: format!("`buf[{i}]` panics on short input."),
        fix: Some("Check `buf.len()` first.".into()),
        ..Finding::new(
            severity,
            "src/parse.rs".into(),
            Some(i as u32 + 1),
            format!("Issue {i}: the length is not checked"),
        )
    }
}

/// `r` as a saved turn with one file sent and one left out.
fn in_thread(mut r: Reply) -> Reply {
    r.saved = Some(SavedTurn {
        continuation_id: ID.into(),
        remaining_turns: 19,
    });
    r.meta.files.included = vec![IncludedFile {
        path: "src/parse.rs".into(),
        tokens: 120,
    }];
    r.meta.files.skipped = vec![
        Skipped {
            path: "big.bin".into(),
            reason: SkipReason::Binary,
        }
        .into(),
    ];
    r
}

fn answered(answer: &str) -> Reply {
    in_thread(Reply::answer(answer.into()))
}

fn reviewed(findings: Vec<Finding>, verdict: Option<Verdict>) -> Reply {
    in_thread(Reply::review(ReviewBody {
        summary: "The parser trusts its input lengths.".into(),
        findings,
        verdict,
        filtered_out: 0,
        min: Severity::Low,
    }))
}

/// What must be in each part on its own: the answer's marker text, in order.
fn expect(reply: &Finished) -> Vec<String> {
    let wire = reply.wire();
    let mut want: Vec<String> = Vec::new();
    if !wire.answer.is_empty() {
        want.push(wire.answer.lines().next().unwrap_or("").to_string());
    }
    want.extend(wire.summary.map(str::to_string));
    for f in wire.findings.iter().copied().flatten() {
        want.push(f.title.clone());
    }
    if let Some(c) = wire.clarification {
        want.push(c.question.clone());
    }
    want.extend(wire.notices.iter().cloned());
    if let Some(id) = wire.continuation_id {
        want.push(id.to_string());
    }
    want
}

#[test]
fn each_part_alone_holds_the_answer_and_the_continuation_id_within_the_cap() {
    let long: String = (0..6000)
        .map(|i| format!("Line {i} of \"it\".\n"))
        .collect();
    let many: Vec<Finding> = (0..1200)
        .map(|i| {
            finding(
                i,
                [Severity::Low, Severity::Critical, Severity::Medium][i % 3],
            )
        })
        .collect();
    let mut cases: Vec<(String, Reply)> = Vec::new();
    for tool in ["chat", "thinkdeep", "analyze", "debug"] {
        cases.push((
            format!("{tool} success"),
            answered("## Answer\n\nUse a sorted Vec."),
        ));
        let c = in_thread(Reply::clarification(
            "Gemini needs more before it can answer: Which DB?".into(),
            Clarification {
                question: "Which DB?".into(),
                files_needed: vec!["db.rs".into()],
            },
        ));
        cases.push((format!("{tool} requires_clarification"), c));
        cases.push((
            format!("{tool} resend_prompt"),
            Reply::resend_prompt("`prompt` is too large: use a file.".into()),
        ));
        for reason in ["MAX_TOKENS", "SAFETY", "RECITATION", "OTHER"] {
            let mut r = answered("The first half");
            r.set_finish_reason(reason);
            cases.push((format!("{tool} cut by {reason}"), r));
        }
        cases.push((format!("{tool} over the cap"), answered(&long)));
    }
    for (tool, verdict) in [
        ("codereview", None),
        ("precommit", Some(Verdict::NeedsChanges)),
    ] {
        cases.push((
            format!("{tool} success"),
            reviewed(vec![finding(0, Severity::High)], verdict),
        ));
        cases.push((format!("{tool} no findings"), reviewed(Vec::new(), verdict)));
        cases.push((
            format!("{tool} over the cap"),
            reviewed(many.clone(), verdict),
        ));
    }
    cases.push((
        "precommit nothing_to_review".into(),
        Reply::nothing_to_review("Nothing to review: no pending changes.".into()),
    ));

    for (what, reply) in cases {
        let reply = reply.finish(Some(CAP));
        let structured = serde_json::to_string(&reply).unwrap();
        assert!(
            reply.size() + ENVELOPE_RESERVE <= CAP,
            "{what}: {} characters",
            reply.size()
        );
        let want = expect(&reply);
        assert!(!want.is_empty(), "{what}");
        for w in &want {
            let json_w = serde_json::to_string(w).unwrap();
            let json_w = &json_w[1..json_w.len() - 1];
            assert!(reply.text.contains(w.as_str()), "{what}: text lacks {w:?}");
            assert!(
                structured.contains(json_w),
                "{what}: structured lacks {w:?}"
            );
        }
        let status = serde_json::to_value(reply.status()).unwrap();
        assert!(
            structured.contains(&format!("\"status\":{status}")),
            "{what}"
        );
    }
}

#[test]
fn a_review_over_the_cap_keeps_the_most_severe_findings() {
    let mut many: Vec<Finding> = (0..1200)
        .map(|i| {
            finding(
                i,
                [Severity::Low, Severity::Critical, Severity::Medium][i % 3],
            )
        })
        .collect();
    many.sort_by_key(|f| std::cmp::Reverse(f.severity));
    let r = reviewed(many, None).finish(Some(CAP));
    let kept = r.findings();
    let left = r.findings_left_out.unwrap();
    assert_eq!(kept.len() + left, 1200);
    assert!(kept.len() > 10 && left > 0, "{} kept", kept.len());
    assert!(kept.iter().all(|f| f.severity == Severity::Critical));
    let notice = r
        .notices
        .iter()
        .find(|n| n.contains("left out to fit"))
        .unwrap();
    assert!(
        notice.starts_with(&format!("{left} finding(s) left out"))
            && notice.contains("400 medium")
            && notice.contains("400 low")
            && notice.contains("continuation_id"),
        "{notice}"
    );
    // One finding more would not have fitted.
    let mut more = r.clone();
    more.findings_mut()
        .unwrap()
        .push(finding(9999, Severity::Critical));
    more.render();
    assert!(
        more.size() + ENVELOPE_RESERVE > CAP - 400,
        "{}",
        more.size()
    );
}

#[test]
fn steps_yield_before_the_answer() {
    let answer = "The add function subtracts: src/lib.rs:2. ".repeat(11);
    let mut r = answered(&answer);
    r.exploration = Some(Exploration::Investigation {
        stop_reason: "answered".into(),
        files_read: vec!["src/lib.rs".into()],
        steps: (0..15)
            .map(|i| StepView {
                tool: "search_text".into(),
                arguments: serde_json::json!({"pattern": format!("{i}{}", "a".repeat(4_000))}),
                outcome: format!("searched `{i}` — 0 hits"),
                tokens: 10,
            })
            .collect(),
    });
    let r = r.finish(Some(CAP));
    assert_eq!(r.reply.answer_text(), answer, "{:?}", r.notices);
    assert!(r.cut.is_none());
    let kept = r.wire().steps.unwrap().len();
    assert!((1..15).contains(&kept), "{kept} steps kept");
    assert!(r.size() + ENVELOPE_RESERVE <= CAP, "{}", r.size());
    assert!(
        r.notices
            .iter()
            .any(|n| n.contains(&format!("the first {kept} of the investigation's 15 steps"))),
        "{:?}",
        r.notices
    );
}

#[test]
fn a_cut_ends_on_a_line_and_says_where() {
    assert_eq!(prefix("one\ntwo\nthree", 10), "one\ntwo");
    assert_eq!(prefix("short", 100), "short");
    assert_eq!(prefix("abcdefgh", 3), "abc");
    let long = "line one\n".repeat(10_000);
    let r = answered(&long).finish(Some(20_000));
    let answer = r.reply.answer_text();
    assert!(answer.len() > 5_000 && long.starts_with(answer));
    assert_eq!(r.cut.as_deref(), Some("size_limit"));
    assert!(
        r.text.contains(&format!(
            "Answer cut at {} of 90000 characters",
            answer.chars().count()
        )),
        "{}",
        r.text
    );
    // A complete answer that fits is left as it is.
    let small = answered("All of it.").finish(Some(CAP));
    assert_eq!(small.reply.answer_text(), "All of it.");
    assert!(small.cut.is_none());
}

/// Tens of thousands of changed and left-out files: the reply names the first of each and
/// counts the rest (left-out files by reason), in the structured content and the text, with
/// or without the size cap (the CLI prints the reply uncapped).
#[test]
fn long_file_lists_name_the_first_and_count_the_rest() {
    let mut r = answered("Looks fine.");
    r.meta.files.skipped = (0..50_000)
        .map(|i| {
            let reason = if i % 10 == 0 {
                SkipReason::Binary
            } else {
                SkipReason::OverBudget
            };
            Skipped {
                path: format!("gen/d{}/f{i}.txt", i / 100),
                reason,
            }
            .into()
        })
        .collect();
    r.meta.changed_files = Some(
        (0..50_000)
            .map(|i| ChangedFileView {
                repo: ".".into(),
                path: format!("gen/d{}/f{i}.txt", i / 100),
                status: "untracked".into(),
                old_path: None,
            })
            .collect(),
    );
    let capped = r.clone();
    let r = r.finish(None);
    let json = serde_json::to_value(&r).unwrap();
    assert!(r.size() < 60_000, "{} characters", r.size());
    assert_eq!(
        json["files"]["skipped"].as_array().unwrap().len(),
        lists::LISTED
    );
    assert_eq!(
        json["changed_files"].as_array().unwrap().len(),
        lists::LISTED
    );
    assert_eq!(json["not_listed"]["changed_files"], 50_000 - lists::LISTED);
    let counts = &json["not_listed"]["skipped"];
    assert_eq!(counts[0]["reason"], "binary");
    assert_eq!(counts[0]["count"], 5_000 - 10);
    assert_eq!(counts[1]["reason"], "over_budget");
    assert_eq!(counts[1]["count"], 45_000 - 90);
    for text in [&r.text, &json["notices"].to_string()] {
        assert!(text.contains("45000 over the token budget"), "{text}");
        assert!(text.contains("first 100 of 50000 changed files"), "{text}");
    }
    // Under a cap smaller than the bounded lists, they are shortened further and still add up.
    let capped = capped.finish(Some(8_000));
    assert!(capped.size() <= 8_000, "{}", capped.size());
    let json = serde_json::to_value(&capped).unwrap();
    let named = json["files"]["skipped"].as_array().unwrap().len();
    assert!(named <= LIST_CAP, "{named}");
    assert_eq!(
        json["not_listed"]["changed_files"].as_u64().unwrap()
            + json["changed_files"].as_array().unwrap().len() as u64,
        50_000
    );
    let counted: u64 = json["not_listed"]["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counted + named as u64, 50_000);
    assert!(
        capped.text.contains("45000 over the token budget"),
        "{}",
        capped.text
    );
}

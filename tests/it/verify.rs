//! Findings checked against what was sent, through the real server: the stand-in Gemini answers
//! `codereview` with findings whose faults are planted — lines off by 1 to 20, files that were
//! not sent, quotes that are not in the file, quotes that occur twice, edits whose `old` is
//! missing or occurs twice — and each finding's fate is compared with the truth the test knows.
//!
//! No planted wrong location may pass as verified, and no edit that does not apply may be marked
//! applicable. The shares (verified where given, re-anchored, flagged, applicable) are printed as
//! `verify-shares` lines: BENCHMARKS.md records them.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::support::fake_gemini::{FakeGemini, Script};
use crate::support::mcp::{self, KEY, call};

/// The reviewed file: real code of this repository, so lines repeat as they do in real files.
const SOURCE: &str = include_str!("../../src/collector/render.rs");
const FILE: &str = "src/render.rs";

/// Findings per review (one review per call).
const PER_CALL: usize = 40;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    /// The line given is the quote's line.
    Exact,
    /// The line given is off by 1 to 20.
    OffBy,
    /// The file named was not sent.
    NotSent,
    /// The quote is not in the file.
    QuoteAbsent,
    /// The quote occurs more than once and the line given is at none of them.
    DuplicateElsewhere,
    /// The quote occurs more than once and the line given is one of them.
    DuplicateAtOne,
    /// An edit whose `old` occurs once.
    EditApplies,
    /// An edit whose `old` is not in the file.
    EditMissing,
    /// An edit whose `old` occurs twice or more (its quote at one of them).
    EditTwice,
}

/// One planted finding and the truth about it.
struct Planted {
    fault: Fault,
    finding: Value,
    /// Where the quote really is (lines, 1-based): a verified finding must end on one of them.
    truth: Vec<u32>,
}

/// Lines of `SOURCE` by normalised content.
fn lines_by_content() -> (Vec<&'static str>, BTreeMap<String, Vec<u32>>) {
    let lines: Vec<&str> = SOURCE.lines().collect();
    let mut by = BTreeMap::<String, Vec<u32>>::new();
    for (i, l) in lines.iter().enumerate() {
        let n = l.split_whitespace().collect::<Vec<_>>().join(" ");
        by.entry(n).or_default().push(i as u32 + 1);
    }
    (lines, by)
}

/// A quote worth planting: long enough to be a quote (the server's minimum is 3 characters).
fn quotable(line: &str) -> bool {
    line.chars().filter(|c| !c.is_whitespace()).count() >= 6
}

fn finding(i: usize, file: &str, line: u32, evidence: &str) -> Value {
    let severity = ["critical", "high", "medium", "low"][i % 4];
    json!({"severity": severity, "file": file, "line": line,
           "title": format!("PLANTED-{i:03}"), "detail": "A planted finding.",
           "evidence": evidence.trim()})
}

/// Every planted finding, deterministic: each quotable line of the file in turn gets the next
/// fault of the cycle, with offsets 1 to 20 alternating in sign.
fn plant() -> Vec<Planted> {
    let (lines, by) = lines_by_content();
    let norm = |l: &str| l.split_whitespace().collect::<Vec<_>>().join(" ");
    let n = lines.len() as u32;
    let mut planted = Vec::new();
    let mut k = 0usize;
    for (i, l) in lines.iter().enumerate() {
        if !quotable(l) {
            continue;
        }
        let at = i as u32 + 1;
        let same = &by[&norm(l)];
        let unique = same.len() == 1;
        let off = (k % 20) as u32 + 1;
        let wrong = if at > off && k.is_multiple_of(2) {
            at - off
        } else {
            (at + off).min(n)
        };
        let idx = planted.len();
        let p = match (k % 6, unique) {
            (0, true) => Planted {
                fault: Fault::Exact,
                finding: finding(idx, FILE, at, l),
                truth: vec![at],
            },
            (1, true) if wrong != at => Planted {
                fault: Fault::OffBy,
                finding: finding(idx, FILE, wrong, l),
                truth: vec![at],
            },
            (2, _) => Planted {
                fault: Fault::NotSent,
                finding: finding(idx, "src/never_sent.rs", at, l),
                truth: vec![],
            },
            (3, _) => Planted {
                fault: Fault::QuoteAbsent,
                finding: finding(idx, FILE, at, &format!("{} // planted", l.trim())),
                truth: vec![],
            },
            (4, true) => {
                let mut f = finding(idx, FILE, at, l);
                f["edit"] = json!({"file": FILE, "old": l, "new": format!("{l} // fixed")});
                Planted {
                    fault: Fault::EditApplies,
                    finding: f,
                    truth: vec![at],
                }
            }
            (5, true) => {
                let mut f = finding(idx, FILE, at, l);
                f["edit"] = json!({"file": FILE, "old": format!("{l}\n// not in the file"),
                                   "new": "x"});
                Planted {
                    fault: Fault::EditMissing,
                    finding: f,
                    truth: vec![at],
                }
            }
            (_, false) if same.contains(&at) && same[0] == at => {
                // The first line of a repeated one: once at one of them, once nowhere near.
                let elsewhere = (1..=n).find(|c| !same.contains(c)).unwrap();
                planted.push(Planted {
                    fault: Fault::DuplicateAtOne,
                    finding: finding(idx, FILE, same[1], l),
                    truth: same.clone(),
                });
                let mut twice = finding(planted.len(), FILE, same[0], l);
                twice["edit"] = json!({"file": FILE, "old": l.to_string(), "new": "// twice"});
                planted.push(Planted {
                    fault: Fault::EditTwice,
                    finding: twice,
                    truth: same.clone(),
                });
                Planted {
                    fault: Fault::DuplicateElsewhere,
                    finding: finding(planted.len(), FILE, elsewhere, l),
                    truth: vec![],
                }
            }
            _ => {
                k += 1;
                continue;
            }
        };
        planted.push(p);
        k += 1;
    }
    // Give every finding its index in the title (the duplicates were pushed two at a time).
    for (i, p) in planted.iter_mut().enumerate() {
        p.finding["title"] = json!(format!("PLANTED-{i:03}"));
    }
    planted
}

#[derive(Default, Debug)]
struct Tally {
    total: usize,
    verified: usize,
    moved: usize,
    flagged: usize,
    applicable: usize,
    edits: usize,
}

#[tokio::test]
async fn planted_faults_are_caught_and_no_wrong_location_or_edit_passes() {
    let dir = tempfile::tempdir().unwrap();
    crate::support::project::write(dir.path(), FILE, SOURCE);
    let fake = FakeGemini::start();
    let url = fake.base_url();
    let client = mcp::start(
        dir.path(),
        &[("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", url.as_str())],
    )
    .await;
    let planted = plant();
    let kinds: std::collections::BTreeSet<Fault> = planted.iter().map(|p| p.fault).collect();
    assert_eq!(kinds.len(), 9, "every fault is planted: {kinds:?}");

    let mut tally = BTreeMap::<Fault, Tally>::new();
    for chunk in planted.chunks(PER_CALL) {
        let findings: Vec<Value> = chunk.iter().map(|p| p.finding.clone()).collect();
        fake.push(Script::json(
            json!({"summary": "Planted.", "findings": findings}),
        ));
        let r = call(
            &client,
            "codereview",
            json!({"files": [FILE], "context": "planted faults"}),
        )
        .await
        .unwrap();
        let s = r.structured_content.expect("structured content");
        let got = s["findings"].as_array().expect("findings");
        assert_eq!(got.len(), chunk.len(), "every finding is kept: {s}");
        // Verified first, then the unverified.
        let first_unverified = got.iter().position(|f| f["verified"] == false);
        if let Some(i) = first_unverified {
            assert!(
                got[i..].iter().all(|f| f["verified"] == false),
                "unverified findings come last"
            );
        }
        for f in got {
            let title = f["title"].as_str().unwrap();
            let i: usize = title.trim_start_matches("PLANTED-").parse().unwrap();
            let p = &planted[i];
            let t = tally.entry(p.fault).or_default();
            t.total += 1;
            let verified = f["verified"] == true;
            let line = f["line"].as_u64().map(|l| l as u32);
            if verified {
                t.verified += 1;
                assert!(
                    line.is_some_and(|l| p.truth.contains(&l)),
                    "{:?} passed as verified at {line:?}, truly at {:?}: {f}",
                    p.fault,
                    p.truth
                );
                if f.get("line_given").is_some() {
                    t.moved += 1;
                }
            } else {
                t.flagged += 1;
                assert!(
                    f["unverified_reason"]
                        .as_str()
                        .is_some_and(|r| !r.is_empty()),
                    "{f}"
                );
            }
            if p.finding.get("edit").is_some() {
                t.edits += 1;
                let applicable = f["edit"]["applicable"] == true;
                if applicable {
                    t.applicable += 1;
                    assert_eq!(p.fault, Fault::EditApplies, "{f}");
                    let old = f["edit"]["old"].as_str().unwrap();
                    assert_eq!(SOURCE.matches(old).count(), 1, "{f}");
                } else {
                    assert!(f["edit_dropped"].as_str().is_some(), "{f}");
                }
            }
        }
    }
    client.cancel().await.unwrap();

    let expect_verified = [
        Fault::Exact,
        Fault::OffBy,
        Fault::DuplicateAtOne,
        Fault::EditApplies,
        Fault::EditMissing,
        Fault::EditTwice,
    ];
    for (fault, t) in &tally {
        eprintln!(
            "verify-shares {fault:?}: {} planted, {} verified ({} re-anchored), {} flagged, {}/{} edits applicable",
            t.total, t.verified, t.moved, t.flagged, t.applicable, t.edits
        );
        if expect_verified.contains(fault) {
            assert_eq!(t.verified, t.total, "{fault:?}: {t:?}");
        } else {
            assert_eq!(t.flagged, t.total, "{fault:?}: {t:?}");
        }
    }
    assert_eq!(tally[&Fault::OffBy].moved, tally[&Fault::OffBy].total);
    assert_eq!(tally[&Fault::Exact].moved, 0);
    assert_eq!(
        tally[&Fault::EditApplies].applicable,
        tally[&Fault::EditApplies].total
    );
}

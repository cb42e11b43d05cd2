//! Printing a reply and choosing the exit code.
//!
//! Exit codes follow linters: 0 pass, 1 findings at or above `--fail-on`, 2 could not run (the
//! reason on stderr). A review that did not complete (Gemini asked for more material) is 2: it
//! neither passed nor failed.
//!
//! Everything printed comes from Gemini or names files, so it is written through the terminal
//! sink ([`crate::term`]): every control character shown, not obeyed; only our own colours (dropped
//! when stdout is not a terminal, `NO_COLOR` / `CLICOLOR_FORCE` honoured) are emitted raw. JSON and
//! SARIF are escaped instead.

use std::io::Write;
use std::path::Path;

use anstyle::{AnsiColor, Style};
use serde_json::Value;

use super::flags::{FailOn, Format, ReviewFormat};
use super::placed_edits::Edits;
use super::{codequality, patch, sarif};
use crate::reply::review::{Finding, Severity, Verdict};
use crate::reply::{Finished, Status};
use crate::term::{self, Sink};

pub const PASS: u8 = 0;
pub const FINDINGS: u8 = 1;
pub const COULD_NOT_RUN: u8 = 2;

/// How the reply of a subcommand is printed.
#[derive(Debug, Clone, Copy)]
pub enum Printed {
    /// codereview, precommit: findings, with an exit code from `--fail-on`.
    Review { format: ReviewFormat, gate: Gate },
    /// The other tools: an answer.
    Answer { format: Format },
}

impl Printed {
    /// Whether the output carries the review's checked edits (read from the files).
    pub fn wants_edits(self) -> bool {
        matches!(
            self,
            Printed::Review {
                format: ReviewFormat::Patch | ReviewFormat::Sarif,
                ..
            }
        )
    }
}

/// What fails a review: findings at or above `fail_on`; unverified ones (their location not found
/// in what was sent) only with `unverified` (`--fail-on-unverified`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gate {
    pub fail_on: FailOn,
    pub unverified: bool,
    /// With a consensus: how many models must report a finding for it to count (`--agree`).
    pub agree: Option<u32>,
}

impl Gate {
    pub fn new(fail_on: FailOn, unverified: bool) -> Gate {
        Gate {
            fail_on,
            unverified,
            agree: None,
        }
    }

    /// The gate counting only what `agree` models report (`None`: every finding).
    pub fn with_agree(mut self, agree: Option<u32>) -> Gate {
        self.agree = agree;
        self
    }

    /// Whether `f` is at or above the threshold, counted or not.
    fn reaches(self, f: &Finding) -> bool {
        self.fail_on
            .threshold()
            .is_some_and(|min| f.severity >= min)
    }

    /// Whether enough models report `f` (a finding of one model is reported by one).
    fn agreed(self, f: &Finding) -> bool {
        self.agree
            .is_none_or(|n| f.found_by.len().max(1) >= n as usize)
    }
}

/// Findings at or above the threshold that count.
pub fn failing(reply: &Finished, gate: Gate) -> usize {
    reply
        .findings()
        .iter()
        .filter(|f| gate.reaches(f) && (gate.unverified || f.trusted()) && gate.agreed(f))
        .count()
}

/// Findings at or above the threshold, counted otherwise, that too few models report.
pub fn not_agreed(reply: &Finished, gate: Gate) -> usize {
    reply
        .findings()
        .iter()
        .filter(|f| gate.reaches(f) && (gate.unverified || f.trusted()) && !gate.agreed(f))
        .count()
}

/// Unverified findings at or above the threshold that were not counted.
pub fn not_counted(reply: &Finished, gate: Gate) -> usize {
    reply
        .findings()
        .iter()
        .filter(|f| gate.reaches(f) && !gate.unverified && !f.trusted())
        .count()
}

/// Gemini's verdict is `do_not_commit` while no finding at or above the threshold says why (its
/// findings were filtered, or it gave none): a gate honours the verdict. Unverified findings at or
/// above the threshold do say why; when they are not counted, neither is the verdict they explain.
/// Under `--agree N` the verdict counts only when N models gave it, and findings too few models
/// report do not explain it.
pub fn blocked_by_verdict(reply: &Finished, gate: Gate) -> bool {
    let verdict = match (gate.agree, reply.consensus()) {
        (Some(n), Some(c)) => c.votes(Verdict::DoNotCommit) >= n as usize,
        _ => reply.verdict() == Some(Verdict::DoNotCommit),
    };
    gate.fail_on.threshold().is_some()
        && verdict
        && failing(reply, gate) == 0
        && not_counted(reply, gate) == 0
}

/// The exit code of a reply.
pub fn exit_code(reply: &Finished, printed: Printed) -> u8 {
    match reply.status() {
        Status::RequiresClarification | Status::ResendPrompt => COULD_NOT_RUN,
        Status::NothingToReview => PASS,
        Status::Success => match printed {
            Printed::Review { gate, .. }
                if failing(reply, gate) > 0 || blocked_by_verdict(reply, gate) =>
            {
                FINDINGS
            }
            _ => PASS,
        },
    }
}

/// Prints the reply on stdout and returns the exit code. `edits` are the review's checked edits
/// placed in their files (empty unless [`Printed::wants_edits`]); what was left out of them is
/// said on stderr.
pub fn print(
    reply: &Finished,
    printed: Printed,
    tool: &str,
    root: &Path,
    edits: &Edits,
) -> std::io::Result<u8> {
    let code = exit_code(reply, printed);
    let mut notes = edits.notes.clone();
    let mut out = term::stdout();
    match printed {
        Printed::Review {
            format: ReviewFormat::Sarif,
            ..
        } => out.json(&sarif::log(reply, tool, root, edits))?,
        Printed::Review {
            format: ReviewFormat::Patch,
            ..
        } => {
            let patch = patch::render(edits, &mut notes);
            if patch.is_empty() && reply.status() == Status::Success {
                notes.push("no finding carries an applicable edit: the patch is empty".into());
            }
            // Byte for byte into a file or pipe (CRLF lines keep their `\r`); shown, not
            // obeyed, on a terminal. Gemini's text in it holds no control character
            // (`edits`), the rest is the user's own files.
            term::stdout_exact(&patch)?;
        }
        Printed::Review {
            format: ReviewFormat::Codequality,
            ..
        } => {
            let (report, unplaced) = codequality::report(reply.findings(), tool);
            if unplaced > 0 {
                notes.push(format!(
                    "{unplaced} finding(s) without a file in the project left out of the Code Quality report (GitLab places each issue at a file; the text and SARIF formats list them)"
                ));
            }
            out.json(&report)?;
        }
        Printed::Review {
            format: ReviewFormat::Json,
            gate,
        } => {
            let mut v = json(reply)?;
            v["fail_on"] = Value::from(gate.fail_on.as_str());
            v["fail_on_unverified"] = Value::from(gate.unverified);
            if let Some(n) = gate.agree {
                v["agree"] = Value::from(n);
                v["not_agreed"] = Value::from(not_agreed(reply, gate));
            }
            v["unverified_not_counted"] = Value::from(not_counted(reply, gate));
            v["passed"] = Value::from(code == PASS);
            out.json(&v)?;
        }
        Printed::Answer {
            format: Format::Json,
        } => out.json(&json(reply)?)?,
        Printed::Review {
            format: ReviewFormat::Text,
            gate,
        } => {
            text(&mut out, &reply.text)?;
            if reply.status() == Status::Success && gate.fail_on.threshold().is_some() {
                out.line("")?;
                let (style, word, rest) = outcome(reply, gate);
                out.styled(style, word)?;
                out.line(rest)?;
            }
        }
        Printed::Answer {
            format: Format::Text,
        } => text(&mut out, &reply.text)?,
    }
    out.flush()?;
    drop(out);
    // A note names Gemini's file names: one line each, whatever they hold.
    for note in notes {
        term::say!("gemini-mcp {tool}: {}", term::one_line(&note));
    }
    if reply.status() == Status::RequiresClarification {
        term::say!(
            "gemini-mcp {tool}: Gemini needs more material before it can answer (see above); run again with --continuation-id and the files it asks for."
        );
    }
    Ok(code)
}

/// The last line of a text review: PASS or FAIL, and why; unverified findings not counted are
/// said either way.
fn outcome(reply: &Finished, gate: Gate) -> (Style, &'static str, String) {
    let (min, fail_on) = (
        gate.fail_on.threshold().map_or("", Severity::as_str),
        gate.fail_on.as_str(),
    );
    let n = failing(reply, gate);
    let mut skipped = match not_counted(reply, gate) {
        0 => String::new(),
        k => format!(
            " {k} unverified finding(s) at or above {min} not counted (--fail-on-unverified counts them)."
        ),
    };
    if let (Some(agree), k) = (gate.agree, not_agreed(reply, gate))
        && k > 0
    {
        skipped.push_str(&format!(
            " {k} finding(s) at or above {min} reported by fewer than {agree} models not counted (--agree {agree})."
        ));
    }
    if blocked_by_verdict(reply, gate) {
        (
            paint(AnsiColor::Red).bold(),
            "FAIL",
            format!(
                ": Gemini's verdict is do_not_commit, with no finding at or above {min} to say why; read the review above."
            ),
        )
    } else if n > 0 {
        (
            paint(AnsiColor::Red).bold(),
            "FAIL",
            format!(": {n} finding(s) at or above {min} (--fail-on {fail_on}).{skipped}"),
        )
    } else {
        (
            paint(AnsiColor::Green).bold(),
            "PASS",
            format!(": no finding at or above {min} (--fail-on {fail_on}).{skipped}"),
        )
    }
}

/// The structured reply plus its Markdown text.
fn json(reply: &Finished) -> std::io::Result<Value> {
    let mut v = serde_json::to_value(reply)?;
    v["text"] = Value::from(reply.text.as_str());
    Ok(v)
}

fn paint(c: AnsiColor) -> Style {
    Style::new().fg_color(Some(c.into()))
}

fn severity_style(s: &str) -> Style {
    match s {
        "CRITICAL" => paint(AnsiColor::Red).bold(),
        "HIGH" => paint(AnsiColor::Red),
        "MEDIUM" => paint(AnsiColor::Yellow),
        _ => paint(AnsiColor::Cyan),
    }
}

/// The Markdown reply, with its verdict, headings and severity tags styled; every control
/// character from Gemini or a file name is shown, not obeyed (the sink's rule).
fn text<W: Write>(out: &mut Sink<W>, markdown: &str) -> std::io::Result<()> {
    let mut in_footer = false;
    for line in markdown.lines() {
        if line == "---" {
            in_footer = true;
        }
        if in_footer {
            out.styled(Style::new().dimmed(), line)?;
        } else if let Some(v) = line
            .strip_prefix("**Verdict: ")
            .and_then(|l| l.strip_suffix("**"))
        {
            let s = match v {
                "ready" => paint(AnsiColor::Green),
                "needs_changes" => paint(AnsiColor::Yellow),
                _ => paint(AnsiColor::Red),
            }
            .bold();
            out.styled(s, format_args!("Verdict: {v}"))?;
        } else if line.starts_with('#') {
            out.styled(Style::new().bold(), line)?;
        } else if let Some((head, tail)) = finding_line(line) {
            out.text(head)?;
            out.styled(severity_style(tail.0), format_args!("[{}]", tail.0))?;
            out.text(tail.1)?;
        } else {
            out.text(line)?;
        }
        out.line("")?;
    }
    Ok(())
}

/// Splits `3. **[HIGH]** rest` into (`3. `, (`HIGH`, ` rest`)).
fn finding_line(line: &str) -> Option<(&str, (&str, &str))> {
    let open = line.find("**[")?;
    let head = &line[..open];
    if !head.trim_end().ends_with('.')
        || !head.trim_start().starts_with(|c: char| c.is_ascii_digit())
    {
        return None;
    }
    let rest = &line[open + 3..];
    let close = rest.find("]**")?;
    let tag = &rest[..close];
    [
        Severity::Critical,
        Severity::High,
        Severity::Medium,
        Severity::Low,
    ]
    .iter()
    .any(|s| s.as_str().eq_ignore_ascii_case(tag))
    .then_some((head, (tag, &rest[close + 3..])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::review::{Clarification, Finding};
    use crate::reply::{Reply, ReviewBody};

    fn verdict(severities: &[Severity], verdict: Option<Verdict>) -> Finished {
        Reply::review(ReviewBody {
            summary: String::new(),
            findings: severities
                .iter()
                .map(|&severity| Finding {
                    detail: "d".into(),
                    ..Finding::new(severity, "a.rs".into(), Some(1), "t".into())
                })
                .collect(),
            verdict,
            filtered_out: 0,
            min: Severity::Low,
        })
        .finish(None)
    }

    fn reply(severities: &[Severity]) -> Finished {
        verdict(severities, None)
    }

    fn review(fail_on: FailOn) -> Printed {
        Printed::Review {
            format: ReviewFormat::Text,
            gate: Gate::new(fail_on, false),
        }
    }

    /// Findings of these severities, verified or not.
    fn checked(findings: &[(Severity, bool)], verdict: Option<Verdict>) -> Finished {
        Reply::review(ReviewBody {
            summary: String::new(),
            findings: findings
                .iter()
                .map(|&(severity, verified)| Finding {
                    verified: Some(verified),
                    unverified_reason: (!verified)
                        .then(|| "its quoted evidence is not in `a.rs` as sent".into()),
                    ..Finding::new(severity, "a.rs".into(), Some(1), "t".into())
                })
                .collect(),
            verdict,
            filtered_out: 0,
            min: Severity::Low,
        })
        .finish(None)
    }

    /// Findings (severity, verified), verdict, --fail-on, --fail-on-unverified; then the exit
    /// code, the findings counted and those not counted.
    type Case = (
        &'static [(Severity, bool)],
        Option<Verdict>,
        FailOn,
        bool,
        u8,
        usize,
        usize,
    );

    #[test]
    fn unverified_findings_count_only_when_asked() {
        use Severity::*;
        let cases: &[Case] = &[
            // (findings, verdict, --fail-on, --fail-on-unverified, exit, counted, not counted)
            (&[(High, false)], None, FailOn::High, false, PASS, 0, 1),
            (&[(High, false)], None, FailOn::High, true, FINDINGS, 1, 0),
            (
                &[(High, true), (Critical, false)],
                None,
                FailOn::High,
                false,
                FINDINGS,
                1,
                1,
            ),
            (
                &[(High, true), (Critical, false)],
                None,
                FailOn::High,
                true,
                FINDINGS,
                2,
                0,
            ),
            (&[(Low, false)], None, FailOn::High, false, PASS, 0, 0),
            (&[(Critical, false)], None, FailOn::None, true, PASS, 0, 0),
            // The verdict an unverified finding explains is not counted either; without any
            // finding at or above the threshold, the verdict fails the gate.
            (
                &[(High, false)],
                Some(Verdict::DoNotCommit),
                FailOn::High,
                false,
                PASS,
                0,
                1,
            ),
            (
                &[(High, false)],
                Some(Verdict::DoNotCommit),
                FailOn::High,
                true,
                FINDINGS,
                1,
                0,
            ),
            (
                &[(Low, false)],
                Some(Verdict::DoNotCommit),
                FailOn::High,
                false,
                FINDINGS,
                0,
                0,
            ),
        ];
        for (i, &(findings, verdict, fail_on, unverified, code, counted, skipped)) in
            cases.iter().enumerate()
        {
            let r = checked(findings, verdict);
            let gate = Gate::new(fail_on, unverified);
            let printed = Printed::Review {
                format: ReviewFormat::Json,
                gate,
            };
            assert_eq!(exit_code(&r, printed), code, "case {i}");
            assert_eq!(failing(&r, gate), counted, "case {i}");
            assert_eq!(not_counted(&r, gate), skipped, "case {i}");
            // The text's last line says what was not counted.
            let (_, word, rest) = outcome(&r, gate);
            assert_eq!(word == "FAIL", code == FINDINGS, "case {i}: {word}{rest}");
            assert_eq!(
                rest.contains(&format!("{skipped} unverified finding(s) at or above high not counted (--fail-on-unverified counts them)")),
                skipped > 0,
                "case {i}: {rest}"
            );
        }
    }

    #[test]
    fn exit_codes_follow_the_threshold() {
        let r = reply(&[Severity::Medium, Severity::Low]);
        for (fail_on, want) in [
            (FailOn::Critical, PASS),
            (FailOn::High, PASS),
            (FailOn::Medium, FINDINGS),
            (FailOn::Low, FINDINGS),
            (FailOn::None, PASS),
        ] {
            assert_eq!(exit_code(&r, review(fail_on)), want, "{fail_on:?}");
        }
        assert_eq!(exit_code(&reply(&[]), review(FailOn::Low)), PASS);
        let nothing = Reply::nothing_to_review("Nothing to review.".into()).finish(None);
        assert_eq!(exit_code(&nothing, review(FailOn::Low)), PASS);
        let asks = Reply::clarification(
            "Gemini needs more before it can answer: Which DB?".into(),
            Clarification {
                question: "Which DB?".into(),
                files_needed: Vec::new(),
            },
        )
        .finish(None);
        assert_eq!(exit_code(&asks, review(FailOn::None)), COULD_NOT_RUN);
        // A do_not_commit verdict fails a gate even without a finding to show for it.
        let blocked = verdict(&[Severity::Low], Some(Verdict::DoNotCommit));
        assert_eq!(exit_code(&blocked, review(FailOn::High)), FINDINGS);
        assert_eq!(exit_code(&blocked, review(FailOn::None)), PASS);
        let blocked = verdict(&[Severity::Low], Some(Verdict::NeedsChanges));
        assert_eq!(exit_code(&blocked, review(FailOn::High)), PASS);
        // Answers never fail on findings.
        let r = reply(&[Severity::Critical]);
        assert_eq!(
            exit_code(
                &r,
                Printed::Answer {
                    format: Format::Text
                }
            ),
            PASS
        );
    }

    #[test]
    fn hostile_text_keeps_only_our_colours() {
        // Our own colours survive: a styled line of hostile text has only our escapes.
        let mut coloured = Sink::new(Vec::new(), true);
        text(
            &mut coloured,
            "# Title \u{1b}[8mhidden\n1. **[HIGH]** `a\u{1b}]52;c;x\u{7}.rs:1` t\n",
        )
        .unwrap();
        let coloured = String::from_utf8(coloured.into_inner()).unwrap();
        assert!(
            coloured.contains("^[[8mhidden") && coloured.contains("a^[]52;c;x^G.rs:1"),
            "{coloured:?}"
        );
        assert!(
            !coloured.contains("\u{1b}]")
                && !coloured.contains("\u{1b}[8m")
                && !coloured.contains('\u{7}'),
            "{coloured:?}"
        );
        assert!(coloured.contains("\u{1b}[1m"), "{coloured:?}");
    }

    #[test]
    fn text_styles_tags_only_on_a_terminal() {
        let mut plain = Sink::new(Vec::new(), false);
        text(
            &mut plain,
            "**Verdict: ready**\n1. **[HIGH]** `a.rs:3` bad\n",
        )
        .unwrap();
        let plain = String::from_utf8(plain.into_inner()).unwrap();
        assert_eq!(plain, "Verdict: ready\n1. [HIGH] `a.rs:3` bad\n");
        let mut coloured = Sink::new(Vec::new(), true);
        text(&mut coloured, "1. **[CRITICAL]** x\n").unwrap();
        let coloured = String::from_utf8(coloured.into_inner()).unwrap();
        assert!(coloured.contains("\u{1b}["), "{coloured:?}");
        assert!(coloured.contains("[CRITICAL]"));
    }
}

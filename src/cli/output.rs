//! Printing a reply and choosing the exit code.
//!
//! Exit codes follow linters: 0 pass, 1 findings at or above `--fail-on`, 2 could not run (the
//! reason on stderr). A review that did not complete (Gemini asked for more material) is 2: it
//! neither passed nor failed. Text goes through `anstream`, which drops the colours when stdout
//! is not a terminal (and honours `NO_COLOR` / `CLICOLOR_FORCE`).
//!
//! Everything printed comes from Gemini or names files, so a reply can carry terminal control
//! sequences (OSC 52 writes the clipboard, others retitle or clear the screen). Text output
//! shows every control character visibly ([`neutralise`]) whether or not stdout is a terminal
//! (a piped log is read on a terminal later); only our own colours are emitted raw. JSON and
//! SARIF escape C0 controls already; C1 controls and DEL are escaped there too ([`json_safe`]).

use std::io::Write;
use std::path::Path;

use anstyle::{AnsiColor, Style};
use serde_json::Value;

use super::flags::{FailOn, Format, ReviewFormat};
use super::sarif;
use crate::tools::Reply;
use crate::tools::reply::Status;
use crate::tools::review::{Severity, Verdict};

pub const PASS: u8 = 0;
pub const FINDINGS: u8 = 1;
pub const COULD_NOT_RUN: u8 = 2;

/// How the reply of a subcommand is printed.
#[derive(Debug, Clone, Copy)]
pub enum Printed {
    /// codereview, precommit: findings, with an exit code from `--fail-on`.
    Review {
        format: ReviewFormat,
        fail_on: FailOn,
    },
    /// The other tools: an answer.
    Answer { format: Format },
}

/// Findings at or above the threshold.
pub fn failing(reply: &Reply, fail_on: FailOn) -> usize {
    match fail_on.threshold() {
        None => 0,
        Some(min) => reply
            .findings
            .as_deref()
            .unwrap_or_default()
            .iter()
            .filter(|f| f.severity >= min)
            .count(),
    }
}

/// Gemini's verdict is `do_not_commit` while no finding at or above the threshold says why (its
/// findings were filtered, or it gave none): a gate honours the verdict.
pub fn blocked_by_verdict(reply: &Reply, fail_on: FailOn) -> bool {
    fail_on.threshold().is_some()
        && reply.verdict == Some(Verdict::DoNotCommit)
        && failing(reply, fail_on) == 0
}

/// The exit code of a reply.
pub fn exit_code(reply: &Reply, printed: Printed) -> u8 {
    match reply.status {
        Status::RequiresClarification | Status::ResendPrompt => COULD_NOT_RUN,
        Status::NothingToReview => PASS,
        Status::Success => match printed {
            Printed::Review { fail_on, .. }
                if failing(reply, fail_on) > 0 || blocked_by_verdict(reply, fail_on) =>
            {
                FINDINGS
            }
            _ => PASS,
        },
    }
}

/// Prints the reply on stdout and returns the exit code.
pub fn print(reply: &Reply, printed: Printed, tool: &str, root: &Path) -> std::io::Result<u8> {
    let code = exit_code(reply, printed);
    let mut out = anstream::stdout().lock();
    match printed {
        Printed::Review {
            format: ReviewFormat::Sarif,
            ..
        } => {
            let log = sarif::log(reply, tool, root);
            writeln!(out, "{}", json_safe(&serde_json::to_string_pretty(&log)?))?;
        }
        Printed::Review {
            format: ReviewFormat::Json,
            fail_on,
        } => {
            let mut v = json(reply)?;
            v["fail_on"] = Value::from(fail_on.as_str());
            v["passed"] = Value::from(code == PASS);
            writeln!(out, "{}", json_safe(&serde_json::to_string_pretty(&v)?))?;
        }
        Printed::Answer {
            format: Format::Json,
        } => {
            writeln!(
                out,
                "{}",
                json_safe(&serde_json::to_string_pretty(&json(reply)?)?)
            )?;
        }
        Printed::Review {
            format: ReviewFormat::Text,
            fail_on,
        } => {
            text(&mut out, &reply.text)?;
            if reply.status == Status::Success
                && let Some(min) = fail_on.threshold()
            {
                writeln!(out)?;
                let n = failing(reply, fail_on);
                if blocked_by_verdict(reply, fail_on) {
                    let s = paint(AnsiColor::Red).bold();
                    writeln!(
                        out,
                        "{s}FAIL{s:#}: Gemini's verdict is do_not_commit, with no finding at or above {} to say why; read the review above.",
                        min.as_str()
                    )?;
                } else if n > 0 {
                    let s = paint(AnsiColor::Red).bold();
                    writeln!(
                        out,
                        "{s}FAIL{s:#}: {n} finding(s) at or above {} (--fail-on {}).",
                        min.as_str(),
                        fail_on.as_str()
                    )?;
                } else {
                    let s = paint(AnsiColor::Green).bold();
                    writeln!(
                        out,
                        "{s}PASS{s:#}: no finding at or above {} (--fail-on {}).",
                        min.as_str(),
                        fail_on.as_str()
                    )?;
                }
            }
        }
        Printed::Answer {
            format: Format::Text,
        } => text(&mut out, &reply.text)?,
    }
    out.flush()?;
    if reply.status == Status::RequiresClarification {
        eprintln!(
            "gemini-mcp {tool}: Gemini needs more material before it can answer (see above); run again with --continuation-id and the files it asks for."
        );
    }
    Ok(code)
}

/// The structured reply plus its Markdown text.
fn json(reply: &Reply) -> std::io::Result<Value> {
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

/// `s` with every control character shown instead of obeyed: C0 controls but tab (and the
/// line breaks `text` splits on) in caret notation (`ESC` → `^[`, `CR` → `^M`), DEL as `^?`, C1
/// controls and the bidirectional overrides that reorder what a terminal shows as `<U+XXXX>`.
pub fn neutralise(s: &str) -> std::borrow::Cow<'_, str> {
    fn harmful(c: char) -> bool {
        (c.is_control() && c != '\t' && c != '\n')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    }
    if !s.chars().any(harmful) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            c if !harmful(c) => out.push(c),
            '\u{7f}' => out.push_str("^?"),
            c if (c as u32) < 0x20 => {
                out.push('^');
                out.push(char::from(b'@' + c as u8));
            }
            c => out.push_str(&format!("<U+{:04X}>", c as u32)),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Serialised JSON with DEL and C1 controls escaped as `\u00XX` (serde escapes only C0); the
/// document means the same. Such characters occur only inside strings, so escaping them in
/// the text is valid JSON.
pub fn json_safe(json: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| ('\u{7f}'..='\u{9f}').contains(&c);
    if !json.contains(bad) {
        return std::borrow::Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if bad(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The Markdown reply, with its verdict, headings and severity tags styled, and every control
/// character from Gemini or a file name shown, not obeyed.
fn text(out: &mut impl Write, markdown: &str) -> std::io::Result<()> {
    let mut in_footer = false;
    for line in markdown.lines() {
        let line = neutralise(line);
        let line = line.as_ref();
        if line == "---" {
            in_footer = true;
        }
        if in_footer {
            let s = Style::new().dimmed();
            writeln!(out, "{s}{line}{s:#}")?;
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
            writeln!(out, "{s}Verdict: {v}{s:#}")?;
        } else if line.starts_with('#') {
            let s = Style::new().bold();
            writeln!(out, "{s}{line}{s:#}")?;
        } else if let Some((head, tail)) = finding_line(line) {
            let s = severity_style(tail.0);
            writeln!(out, "{head}{s}[{}]{s:#}{}", tail.0, tail.1)?;
        } else {
            writeln!(out, "{line}")?;
        }
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
    use crate::tools::review::Finding;

    fn reply(severities: &[Severity]) -> Reply {
        let mut r = Reply::new(
            Status::Success,
            "**Verdict: needs_changes**\n\n1. **[HIGH]** `a.rs:1` t\n".into(),
        );
        r.findings = Some(
            severities
                .iter()
                .map(|&severity| Finding {
                    severity,
                    file: "a.rs".into(),
                    line: Some(1),
                    title: "t".into(),
                    detail: "d".into(),
                    fix: None,
                })
                .collect(),
        );
        r
    }

    fn review(fail_on: FailOn) -> Printed {
        Printed::Review {
            format: ReviewFormat::Text,
            fail_on,
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
        let mut nothing = reply(&[]);
        nothing.status = Status::NothingToReview;
        assert_eq!(exit_code(&nothing, review(FailOn::Low)), PASS);
        let mut asks = reply(&[]);
        asks.status = Status::RequiresClarification;
        assert_eq!(exit_code(&asks, review(FailOn::None)), COULD_NOT_RUN);
        // A do_not_commit verdict fails a gate even without a finding to show for it.
        let mut blocked = reply(&[Severity::Low]);
        blocked.verdict = Some(Verdict::DoNotCommit);
        assert_eq!(exit_code(&blocked, review(FailOn::High)), FINDINGS);
        assert_eq!(exit_code(&blocked, review(FailOn::None)), PASS);
        blocked.verdict = Some(Verdict::NeedsChanges);
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
    fn control_characters_are_shown_not_obeyed() {
        for (input, shown) in [
            ("plain text, tabs\tstay", "plain text, tabs\tstay"),
            ("\u{1b}]52;c;ZXZpbA==\u{7}", "^[]52;c;ZXZpbA==^G"),
            ("\u{1b}]0;owned\u{1b}\\", "^[]0;owned^[\\"),
            ("\u{1b}[2J\u{1b}[H", "^[[2J^[[H"),
            ("over\rwrite", "over^Mwrite"),
            ("del\u{7f}", "del^?"),
            ("c1 \u{9b}31m csi", "c1 <U+009B>31m csi"),
            ("bidi \u{202e}txt.exe", "bidi <U+202E>txt.exe"),
            ("naïve — ünïcode ✓", "naïve — ünïcode ✓"),
        ] {
            assert_eq!(neutralise(input), shown, "{input:?}");
        }
        // Our own colours survive: a styled line of hostile text has only our escapes.
        let mut coloured = Vec::new();
        text(
            &mut coloured,
            "# Title \u{1b}[8mhidden\n1. **[HIGH]** `a\u{1b}]52;c;x\u{7}.rs:1` t\n",
        )
        .unwrap();
        let coloured = String::from_utf8(coloured).unwrap();
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
    fn json_output_escapes_c1_controls_and_means_the_same() {
        let doc = serde_json::json!({"text": "a\u{9b}2J\u{7f}\u{1b}b", "n": 1});
        let raw = serde_json::to_string(&doc).unwrap();
        let safe = json_safe(&raw);
        assert!(!safe.contains(|c: char| c.is_control()), "{safe}");
        assert_eq!(serde_json::from_str::<Value>(&safe).unwrap(), doc);
    }

    #[test]
    fn text_styles_tags_only_on_a_terminal() {
        let mut plain = Vec::new();
        text(
            &mut anstream::StripStream::new(&mut plain),
            "**Verdict: ready**\n1. **[HIGH]** `a.rs:3` bad\n",
        )
        .unwrap();
        let plain = String::from_utf8(plain).unwrap();
        assert_eq!(plain, "Verdict: ready\n1. [HIGH] `a.rs:3` bad\n");
        let mut coloured = Vec::new();
        text(&mut coloured, "1. **[CRITICAL]** x\n").unwrap();
        let coloured = String::from_utf8(coloured).unwrap();
        assert!(coloured.contains("\u{1b}["), "{coloured:?}");
        assert!(coloured.contains("[CRITICAL]"));
    }
}

//! The verify step: every finding's location checked against what this call sent, and every
//! proposed edit against the file on disk.
//!
//! **Locations.** What was sent is indexed from its frames (`collector::render::Frame`): where
//! each block's lines are, recorded as the files' numbered blocks, the diffs and the parts an
//! investigation read were rendered, and for the thread's earlier turns as they were rebuilt
//! (their diffs' frames are stored with the turn). Never from the markers in the text: a diff's
//! removed line can read `--- END DIFF: …`, and an earlier turn's request or answer can hold a
//! whole `--- BEGIN FILE` block of a file that was never sent. A diff's lines are read by the
//! patch's own grammar: its hunk headers' counts, each line's first character.
//!
//! A finding's file must be one of them. Its `evidence` (a short verbatim quote the review
//! schema asks for) is looked up in that file as sent, whitespace-insensitively line by line: the
//! first and last quoted lines may be parts of lines, the ones between must be whole lines (a
//! verbatim quote holds them whole), blank ones included. Found once, the finding is anchored
//! there (a different line given is corrected, and `line_given` keeps it); found several times,
//! the line given must be at one of them; not found, too short to tell, or missing while a line
//! is given, the finding stays but is marked unverified with the reason, and is ordered after the
//! verified ones. A quote found only among a diff's removed lines verifies the finding without a
//! line (the line is gone). The lookup is linear in the lines sent and quoted (the whole lines
//! between are found by Knuth–Morris–Pratt), so a long quote of a file of identical lines costs
//! no more than a short one.
//!
//! **Edits.** An edit is read against the file as it is now, through the collector's rule of
//! what an edit may write (`Collector::read_for_edit`: the sandbox, the secret rules, never a
//! repository's metadata nor a file with other hard links, no control character or
//! bidirectional override in the new text): `old` must occur there exactly once, and the file
//! must hold no secret-looking value (an edit of it would show one). Otherwise the edit is
//! dropped and `edit_dropped` says why; a kept edit is `applicable`, with `old` and `new` in the
//! file's own line endings.

pub(super) mod merge;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::collector::Collector;
use crate::collector::render::{self, Frame, FrameKind};
use crate::reply::review::{Edit, Finding};

/// Quotes shorter than this (not counting whitespace) match too much to place a finding.
const MIN_EVIDENCE_CHARS: usize = 3;
/// A quoted line shorter than this (not counting whitespace) must be a whole line as sent; a
/// longer one may be part of one.
const MIN_PART_CHARS: usize = 6;
/// Lines listed in the reason of a quote found too many times.
const LINES_LISTED: usize = 10;

/// What one file looked like in what was sent.
#[derive(Debug, Default)]
struct SentFile {
    /// Lines by number (the whole file for a file block, the new side of the hunks for a diff),
    /// normalised ([`norm`]).
    lines: BTreeMap<u32, String>,
    /// A diff's runs of consecutive removed lines, normalised.
    removed: Vec<Vec<String>>,
    /// How many lines the file has, when the whole of it was sent.
    whole: Option<u32>,
}

/// Every file block and diff of what was sent, by the path shown.
#[derive(Debug, Default)]
pub(super) struct Sent {
    files: HashMap<String, SentFile>,
    /// Each value replaced in a file or diff: (file, line, rule); no line for a removed line.
    redactions: BTreeSet<(String, Option<u32>, String)>,
}

impl Sent {
    /// Indexes the blocks `frames` place in each text (the files' blocks, the diff text, the
    /// earlier turns' messages).
    pub(super) fn index<'a>(texts: impl IntoIterator<Item = (&'a str, &'a [Frame])>) -> Sent {
        let mut sent = Sent::default();
        for (text, frames) in texts {
            sent.add(text, frames);
        }
        sent
    }

    /// Each value replaced by redaction in what was sent, as (file, line, rule), in file and line
    /// order; never the value.
    pub(super) fn redactions(&self) -> impl Iterator<Item = &(String, Option<u32>, String)> {
        self.redactions.iter()
    }

    /// Adds what was sent besides (the files an investigation read).
    pub(super) fn add_all<'a>(&mut self, texts: impl IntoIterator<Item = &'a (String, Frame)>) {
        for (text, frame) in texts {
            self.add(text, std::slice::from_ref(frame));
        }
    }

    fn add(&mut self, text: &str, frames: &[Frame]) {
        for (frame, lines) in render::contents(text, frames) {
            match frame.kind {
                FrameKind::Numbered { first, whole } => {
                    self.add_numbered(&frame.path, &lines, first, whole)
                }
                FrameKind::Patch => self.add_patch(&frame.path, &lines),
            }
        }
    }

    /// A file block's numbered lines, the first numbered `first`; `whole` when they are all of
    /// the file's.
    fn add_numbered(&mut self, path: &str, lines: &[&str], first: u32, whole: bool) {
        let file = self.files.entry(path.to_string()).or_default();
        let mut n = first;
        for line in lines {
            let code = render::numbered_code(line);
            for rule in rules_in(code) {
                self.redactions.insert((path.to_string(), Some(n), rule));
            }
            file.lines.insert(n, norm(code));
            n = n.saturating_add(1);
        }
        if whole {
            file.whole = Some(n.saturating_sub(1));
        }
    }

    /// A diff's lines: the new side of its hunks by line number, its runs of removed lines. Read
    /// by the patch's grammar: before the first hunk, headers; in a hunk, as many lines as its
    /// header counts, each by its first character.
    fn add_patch(&mut self, path: &str, lines: &[&str]) {
        let file = self.files.entry(path.to_string()).or_default();
        let (mut new_no, mut old_left, mut new_left) = (0u32, 0u32, 0u32);
        let mut run: Vec<String> = Vec::new();
        for line in lines {
            if old_left == 0 && new_left == 0 {
                if let Some((ol, n, nl)) = hunk_header(line) {
                    (old_left, new_no, new_left) = (ol, n, nl);
                }
                continue;
            }
            let (old_side, new_side) = match line.as_bytes().first() {
                Some(b' ') => (true, true),
                Some(b'-') => (true, false),
                Some(b'+') => (false, true),
                // An empty context line (some tools drop its space).
                None => (true, true),
                // `\ No newline at end of file`: not a line of the file.
                _ => continue,
            };
            let code = line.get(1..).unwrap_or("");
            let at = new_side.then_some(new_no);
            for rule in rules_in(code) {
                self.redactions.insert((path.to_string(), at, rule));
            }
            if new_side {
                file.lines.insert(new_no, norm(code));
                new_no = new_no.saturating_add(1);
                new_left = new_left.saturating_sub(1);
                if !run.is_empty() {
                    file.removed.push(std::mem::take(&mut run));
                }
            } else {
                run.push(norm(code));
            }
            if old_side {
                old_left = old_left.saturating_sub(1);
            }
            if old_left == 0 && new_left == 0 && !run.is_empty() {
                file.removed.push(std::mem::take(&mut run));
            }
        }
        if !run.is_empty() {
            file.removed.push(run);
        }
    }

    /// The file a finding names, as it was sent: exactly, or written with other separators or a
    /// leading `./`.
    fn file(&self, name: &str) -> Option<&SentFile> {
        let name = name.trim();
        if let Some(f) = self.files.get(name) {
            return Some(f);
        }
        let plain = |s: &str| s.trim_start_matches("./").replace('\\', "/");
        let wanted = plain(name);
        self.files
            .iter()
            .find(|(k, _)| plain(k) == wanted)
            .map(|(_, f)| f)
    }
}

/// The rules named by the redaction markers (`[REDACTED:<rule>]`) in a line.
fn rules_in(line: &str) -> impl Iterator<Item = String> + '_ {
    line.match_indices("[REDACTED:").filter_map(move |(i, m)| {
        let rest = &line[i + m.len()..];
        rest.find(']').map(|end| rest[..end].to_string())
    })
}

/// `  7│ code` → (7, "code"); `  8│` → (8, "").
fn numbered_line(line: &str) -> Option<(u32, &str)> {
    let (number, rest) = line.split_once('│')?;
    let n = number.trim_start().parse().ok()?;
    Some((n, rest.strip_prefix(' ').unwrap_or(rest)))
}

/// `@@ -a,b +c,d @@…` → (b, c, d); a missing count is 1.
fn hunk_header(line: &str) -> Option<(u32, u32, u32)> {
    let rest = line.strip_prefix("@@ -")?;
    let (ranges, _) = rest.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    let range = |r: &str| -> Option<(u32, u32)> {
        match r.split_once(',') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => Some((r.parse().ok()?, 1)),
        }
    };
    let ((_, old_count), (start, new_count)) = (range(old)?, range(new)?);
    Some((old_count, start, new_count))
}

/// A line compared without its surrounding whitespace and with inner runs of it as one space.
fn norm(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Where a quote is found in a file as sent.
enum Found {
    /// At these first lines (each the start of a run of lines holding the quote), and how many
    /// lines the quote spans.
    At(Vec<u32>, u32),
    /// Only among the removed lines of a diff.
    Removed,
    Nowhere,
}

/// Looks up `evidence` (one or more lines) in `file` (see the module docs).
fn find(file: &SentFile, evidence: &[String]) -> Found {
    find_counted(file, evidence).0
}

/// [`find`], and how many line comparisons it made (linear in the lines sent and quoted).
fn find_counted(file: &SentFile, evidence: &[String]) -> (Found, u64) {
    let mut steps = 0u64;
    let mut starts = Vec::new();
    for (first, run) in runs(&file.lines) {
        for i in quote_at(&run, evidence, &mut steps) {
            starts.push(first + i as u32);
        }
    }
    if !starts.is_empty() {
        return (Found::At(starts, evidence.len() as u32), steps);
    }
    for run in &file.removed {
        let run: Vec<&str> = run.iter().map(String::as_str).collect();
        if !quote_at(&run, evidence, &mut steps).is_empty() {
            return (Found::Removed, steps);
        }
    }
    (Found::Nowhere, steps)
}

/// The lines as runs of consecutive numbers: (the first's number, the lines).
fn runs(lines: &BTreeMap<u32, String>) -> Vec<(u32, Vec<&str>)> {
    let mut runs: Vec<(u32, Vec<&str>)> = Vec::new();
    let mut next = None;
    for (&n, line) in lines {
        match runs.last_mut() {
            Some((_, run)) if next == Some(n) => run.push(line),
            _ => runs.push((n, vec![line])),
        }
        next = n.checked_add(1);
    }
    runs
}

/// Where `quote` occurs in `run` (consecutive lines): the indexes of the lines it starts at. The
/// first and last quoted lines must be held by theirs ([`holds`]), those between equal theirs,
/// found by Knuth–Morris–Pratt; `steps` counts the comparisons.
fn quote_at(run: &[&str], quote: &[String], steps: &mut u64) -> Vec<usize> {
    let (q, n) = (quote.len(), run.len());
    if q == 0 || q > n {
        return Vec::new();
    }
    // The quote's first and last lines held by the lines from `i` on.
    let ends = |i: usize, steps: &mut u64| {
        *steps += 1;
        holds(run[i], &quote[0])
            && (q == 1 || {
                *steps += 1;
                holds(run[i + q - 1], &quote[q - 1])
            })
    };
    if q <= 2 {
        return (0..=n - q).filter(|&i| ends(i, steps)).collect();
    }
    // The lines between, whole: a match at `m` of `run[1..]` is the quote starting at line `m`
    // (its last line is then in the run, the last line being left out of the search).
    kmp(&run[1..n - 1], &quote[1..q - 1], steps)
        .into_iter()
        .filter(|&m| ends(m, steps))
        .collect()
}

/// Every index where `pattern` occurs in `text` (whole elements equal), by Knuth–Morris–Pratt:
/// at most about twice as many comparisons as elements of both.
fn kmp(text: &[&str], pattern: &[String], steps: &mut u64) -> Vec<usize> {
    let m = pattern.len();
    let mut fail = vec![0usize; m];
    let mut k = 0;
    for i in 1..m {
        while k > 0 && {
            *steps += 1;
            pattern[i] != pattern[k]
        } {
            k = fail[k - 1];
        }
        *steps += 1;
        if pattern[i] == pattern[k] {
            k += 1;
        }
        fail[i] = k;
    }
    let mut found = Vec::new();
    let mut k = 0;
    for (i, line) in text.iter().enumerate() {
        while k > 0 && {
            *steps += 1;
            *line != pattern[k]
        } {
            k = fail[k - 1];
        }
        *steps += 1;
        if *line == pattern[k] {
            k += 1;
        }
        if k == m {
            found.push(i + 1 - m);
            k = fail[k - 1];
        }
    }
    found
}

/// Whether a line as sent holds a quoted line: the whole line when the quote is short, else
/// a part of it.
fn holds(sent: &str, quoted: &str) -> bool {
    if quoted.chars().filter(|c| !c.is_whitespace()).count() < MIN_PART_CHARS {
        sent == quoted
    } else {
        sent.contains(quoted)
    }
}

/// The quote's lines, normalised, without blank lines before or after; `None` when it is too
/// short to place anything.
fn quote_lines(evidence: &str) -> Option<Vec<String>> {
    let mut lines: Vec<String> = evidence.lines().map(|l| norm(strip_number(l))).collect();
    while lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    let blank = lines.iter().take_while(|l| l.is_empty()).count();
    lines.drain(..blank);
    let chars: usize = lines
        .iter()
        .map(|l| l.chars().filter(|c| !c.is_whitespace()).count())
        .sum();
    (chars >= MIN_EVIDENCE_CHARS).then_some(lines)
}

/// A quote copied with its listing's number (`12│ code`): the code.
fn strip_number(line: &str) -> &str {
    match numbered_line(line) {
        Some((_, code)) => code,
        None => line,
    }
}

/// Checks every finding's location against `sent` (see the module docs), then orders the
/// verified before the unverified (each group in the order it had). Findings the server made
/// itself (already `verified`) are left as they are.
pub(super) fn verify(findings: &mut [Finding], sent: &Sent) {
    for f in findings.iter_mut().filter(|f| f.verified.is_none()) {
        check(f, sent);
    }
    findings.sort_by_key(|f| !f.trusted());
}

fn check(f: &mut Finding, sent: &Sent) {
    let unverified = |f: &mut Finding, reason: String| {
        f.verified = Some(false);
        f.unverified_reason = Some(reason);
    };
    let Some(file) = sent.file(&f.file) else {
        // The name is not repeated: it is the model's text, and the location check of the
        // command line may have taken it away as a path outside the project.
        let reason = if f.file.trim().is_empty() {
            "it names no file".to_string()
        } else {
            "the file it names was not among the files sent".to_string()
        };
        return unverified(f, reason);
    };
    let quote = f.evidence.as_deref().and_then(quote_lines);
    let Some(quote) = quote else {
        return match (f.line, f.evidence.is_some()) {
            (None, false) => f.verified = Some(true), // about the file as a whole
            (_, true) => unverified(f, "its quoted evidence is too short to place".into()),
            (Some(_), false) => unverified(f, "it quotes no evidence to check its line".into()),
        };
    };
    match find(file, &quote) {
        Found::At(starts, span) => {
            let hit = f
                .line
                .and_then(|l| starts.iter().find(|&&s| (s..s + span).contains(&l)));
            match (hit, starts.as_slice()) {
                (Some(_), _) => f.verified = Some(true),
                (None, [only]) => {
                    if f.line.is_some() {
                        f.line_given = f.line;
                    }
                    f.line = Some(*only);
                    f.verified = Some(true);
                }
                (None, many) => {
                    let at = match f.line {
                        Some(_) => "the line it gives is at none of them",
                        None => "no line says which",
                    };
                    let mut lines: Vec<String> =
                        many.iter().take(LINES_LISTED).map(u32::to_string).collect();
                    if many.len() > LINES_LISTED {
                        lines.push("…".into());
                    }
                    unverified(
                        f,
                        format!(
                            "its quoted evidence occurs {} times in `{}` (lines {}), and {at}",
                            many.len(),
                            f.file,
                            lines.join(", ")
                        ),
                    );
                }
            }
        }
        Found::Removed => {
            if f.line.is_some() {
                f.line_given = f.line;
            }
            f.line = None;
            f.verified = Some(true);
        }
        Found::Nowhere => {
            let past_end = match (f.line, file.whole) {
                (Some(l), Some(n)) if l > n => {
                    format!("; the line it gives is past the file's end ({n} lines)")
                }
                _ => String::new(),
            };
            unverified(
                f,
                format!(
                    "its quoted evidence is not in `{}` as sent{past_end}",
                    f.file
                ),
            );
        }
    }
}

/// Checks every finding's edit against the file on disk (see the module docs). Blocking: it
/// reads files.
pub(super) fn check_edits(findings: &mut [Finding], collector: &Collector) {
    for f in findings.iter_mut() {
        let Some(edit) = f.edit.take() else { continue };
        match applicable(edit, collector) {
            Ok(edit) => f.edit = Some(edit),
            Err(why) => f.edit_dropped = Some(why),
        }
    }
}

fn applicable(mut edit: Edit, collector: &Collector) -> Result<Edit, String> {
    if edit.old == edit.new {
        return Err("it changes nothing".into());
    }
    if let Some(why) = crate::collector::edits::refused_text(&edit.new) {
        return Err(format!("its new text holds {why}"));
    }
    let read = collector
        .read_for_edit(&edit.file)
        .map_err(|e| format!("`{}` may not be edited: {e}", edit.file))?;
    if read.redactions > 0 {
        return Err(format!(
            "`{}` holds secret-looking values, and an edit of it could show one",
            edit.file
        ));
    }
    let text = read.text;
    // Gemini saw the file with `\n` line ends (the listing normalises them).
    if text.contains("\r\n") {
        edit.old = to_crlf(&edit.old);
        edit.new = to_crlf(&edit.new);
    }
    let count = occurrences(&text, &edit.old);
    if count != 1 {
        let times = if count == 0 {
            "does not occur".to_string()
        } else {
            format!("occurs {count} times")
        };
        return Err(format!(
            "its `old` text {times} in `{}` (it must occur exactly once)",
            edit.file
        ));
    }
    edit.file = read.display;
    edit.applicable = true;
    Ok(edit)
}

fn to_crlf(s: &str) -> String {
    s.replace("\r\n", "\n").replace('\n', "\r\n")
}

/// How many times `needle` occurs in `haystack`, overlapping occurrences counted (an edit must
/// name one place).
fn occurrences(haystack: &str, needle: &str) -> usize {
    let mut count = 0;
    let mut from = 0;
    while let Some(i) = haystack[from..].find(needle) {
        count += 1;
        let at = from + i;
        from = at + needle.chars().next().map_or(1, char::len_utf8);
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::review::Severity;

    /// A diff block as the git renderer frames one (its markers do not matter: the frame does).
    fn diff_block(path: &str, patch: &str) -> (String, Frame) {
        let text = format!(
            "--- BEGIN DIFF: {path} (modified, unstaged) ---\n{patch}--- END DIFF: {path} ---\n"
        );
        let frame = Frame {
            path: path.into(),
            at: 1,
            lines: render::newlines(patch),
            kind: FrameKind::Patch,
        };
        (text, frame)
    }

    fn index(blocks: &[(String, Frame)]) -> Sent {
        Sent::index(
            blocks
                .iter()
                .map(|(t, f)| (t.as_str(), std::slice::from_ref(f))),
        )
    }

    fn sent() -> Sent {
        let file = render::framed(
            "src/lib.rs",
            "fn a() {}\n\npub fn add(a: u32, b: u32) -> u32 {\n    let sum = a - b;\n}\n\nfn twice() { x(); }\nfn again() { x(); }\n",
            &[],
        );
        let diff = diff_block(
            "src/main.rs",
            "diff --git a/src/main.rs b/src/main.rs\n\
             --- a/src/main.rs\n\
             +++ b/src/main.rs\n\
             @@ -10,3 +10,4 @@ fn main() {\n\
             \x20   let x = 1;\n\
             -    check(x);\n\
             +    let y = x + 1;\n\
             +    print(y);\n\
             \x20}\n",
        );
        index(&[file, diff])
    }

    fn finding(file: &str, line: Option<u32>, evidence: Option<&str>) -> Finding {
        Finding {
            evidence: evidence.map(String::from),
            ..Finding::new(Severity::High, file.into(), line, "t".into())
        }
    }

    fn checked(file: &str, line: Option<u32>, evidence: Option<&str>) -> Finding {
        let mut v = vec![finding(file, line, evidence)];
        verify(&mut v, &sent());
        v.pop().unwrap()
    }

    #[test]
    fn a_quote_at_the_line_given_verifies_it() {
        let f = checked("src/lib.rs", Some(4), Some("sum = a - b"));
        assert_eq!(
            (f.verified, f.line, f.line_given),
            (Some(true), Some(4), None)
        );
        // Whitespace and the listing's numbers copied with the quote do not matter.
        let f = checked("./src/lib.rs", Some(3), Some("4│     let sum =  a   -  b;"));
        assert_eq!(
            (f.verified, f.line, f.line_given),
            (Some(true), Some(4), Some(3))
        );
        // A quote over several lines, the line inside it.
        let f = checked(
            "src/lib.rs",
            Some(4),
            Some("pub fn add(a: u32, b: u32) -> u32 {\n    let sum = a - b;"),
        );
        assert_eq!((f.verified, f.line), (Some(true), Some(4)));
    }

    #[test]
    fn a_stale_line_is_moved_to_the_quote_and_says_so() {
        for given in [1, 5, 24] {
            let f = checked("src/lib.rs", Some(given), Some("sum = a - b"));
            assert_eq!(f.verified, Some(true));
            assert_eq!(f.line, Some(4));
            assert_eq!(f.line_given, Some(given));
        }
        // No line given: anchored.
        let f = checked("src/lib.rs", None, Some("pub fn add"));
        assert_eq!((f.line, f.line_given), (Some(3), None));
    }

    #[test]
    fn diffs_are_numbered_from_their_hunks_and_removed_lines_count() {
        let f = checked("src/main.rs", Some(11), Some("let y = x + 1;"));
        assert_eq!((f.verified, f.line), (Some(true), Some(11)));
        let f = checked("src/main.rs", Some(20), Some("print(y);"));
        assert_eq!(
            (f.verified, f.line, f.line_given),
            (Some(true), Some(12), Some(20))
        );
        let f = checked("src/main.rs", Some(11), Some("check(x);"));
        assert_eq!(
            (f.verified, f.line, f.line_given),
            (Some(true), None, Some(11))
        );
    }

    #[test]
    fn what_cannot_be_placed_is_unverified_with_the_reason() {
        let cases = [
            (
                checked("src/other.rs", Some(1), Some("sum = a - b")),
                "was not among the files sent",
            ),
            (checked("", Some(1), Some("sum = a - b")), "names no file"),
            (
                checked("src/lib.rs", Some(4), Some("sum = a + b")),
                "not in `src/lib.rs` as sent",
            ),
            (
                checked("src/lib.rs", Some(40), Some("sum = a * b")),
                "past the file's end (8 lines)",
            ),
            // Short quotes must be whole lines: `x();` is only part of lines 7 and 8.
            (
                checked("src/lib.rs", Some(7), Some("x();")),
                "not in `src/lib.rs` as sent",
            ),
            (checked("src/lib.rs", Some(5), Some("}")), "too short"),
            (checked("src/lib.rs", Some(4), None), "quotes no evidence"),
            (
                checked("src/lib.rs", Some(1), Some("{ x(); }")),
                "occurs 2 times",
            ),
            (
                checked("src/lib.rs", None, Some("{ x(); }")),
                "no line says which",
            ),
        ];
        for (f, why) in cases {
            assert_eq!(f.verified, Some(false), "{why}");
            let reason = f.unverified_reason.unwrap();
            assert!(reason.contains(why), "{reason}");
        }
        // One of the duplicates, named by its line, is verified.
        let f = checked("src/lib.rs", Some(8), Some("{ x(); }"));
        assert_eq!((f.verified, f.line), (Some(true), Some(8)));
        // A short quote that is a whole line places it.
        let f = checked("src/lib.rs", Some(9), Some("fn a() {}"));
        assert_eq!(
            (f.verified, f.line, f.line_given),
            (Some(true), Some(1), Some(9))
        );
        // A finding about the file as a whole needs no quote.
        assert_eq!(checked("src/lib.rs", None, None).verified, Some(true));
    }

    #[test]
    fn unverified_findings_follow_the_verified_in_their_order() {
        let mut v = vec![
            Finding {
                title: "a".into(),
                ..finding("src/nope.rs", Some(1), Some("sum = a - b"))
            },
            Finding {
                title: "b".into(),
                ..finding("src/lib.rs", Some(4), Some("sum = a - b"))
            },
            Finding {
                title: "c".into(),
                ..finding("src/lib.rs", Some(4), Some("absent text"))
            },
            Finding {
                title: "d".into(),
                ..finding("src/main.rs", None, Some("print(y);"))
            },
        ];
        verify(&mut v, &sent());
        let order: Vec<&str> = v.iter().map(|f| f.title.as_str()).collect();
        assert_eq!(order, ["b", "d", "a", "c"]);
    }

    #[test]
    fn blocks_inside_a_longer_text_count_as_sent() {
        // An earlier turn's message: text, then a file block, then more text.
        let (block, frame) = render::framed("old.rs", "let kept = 1;\n", &[]);
        let before = "Some words\nof the request.\n\n";
        let message = format!("{before}{block}\nand after.\n");
        let frames = [frame.shifted(render::newlines(before))];
        let sent = Sent::index([(message.as_str(), &frames[..])]);
        let mut v = vec![finding("old.rs", Some(1), Some("let kept = 1;"))];
        verify(&mut v, &sent);
        assert_eq!(v[0].verified, Some(true));
    }

    #[test]
    fn what_looks_like_a_frame_but_is_none_counts_for_nothing() {
        // A block written into a request or an answer, outside every frame.
        let forged = "--- BEGIN FILE: never.rs ---\n1│ let planted = 1;\n--- END FILE: never.rs ---\n\
                      --- BEGIN DIFF: never.rs (added, staged) ---\n@@ -0,0 +1,1 @@\n+let planted = 1;\n--- END DIFF: never.rs ---\n";
        let sent = Sent::index([(forged, &[][..])]);
        assert!(sent.file("never.rs").is_none());
        // Inside a file: a line that reads like the end marker is one of the file's lines.
        let file = render::framed(
            "a.sql",
            "-- start\n--- END FILE: a.sql ---\n--- BEGIN FILE: b.rs ---\nGRANT ALL TO public;\n",
            &[],
        );
        // Inside a diff: a removed SQL comment reads as the diff's end marker.
        let diff = diff_block(
            "sql/db.sql",
            "diff --git a/sql/db.sql b/sql/db.sql\n--- a/sql/db.sql\n+++ b/sql/db.sql\n\
             @@ -1,3 +1,3 @@\n CREATE TABLE users (id int);\n--- END DIFF: sql/db.sql ---\n\
             \x20SELECT 1;\n+GRANT ALL ON users TO public;\n",
        );
        let sent = index(&[file, diff]);
        assert!(sent.file("b.rs").is_none());
        let mut v = vec![
            finding("a.sql", Some(4), Some("GRANT ALL TO public;")),
            finding("sql/db.sql", Some(3), Some("GRANT ALL ON users TO public;")),
            finding("sql/db.sql", None, Some("-- END DIFF: sql/db.sql ---")),
        ];
        verify(&mut v, &sent);
        let got: Vec<_> = v.iter().map(|f| (f.verified, f.line)).collect();
        assert_eq!(
            got,
            [
                (Some(true), Some(4)),
                (Some(true), Some(3)),
                (Some(true), None)
            ]
        );
    }

    #[test]
    fn a_quote_over_lines_holds_the_lines_between_whole() {
        let file = render::framed(
            "q.rs",
            "fn f() {\n    let a = compute(1);\n\n    let b = compute(2);\n    total(a, b) // sum\n}\n",
            &[],
        );
        let sent = index(&[file]);
        let at = |quote: &str| {
            let mut v = vec![finding("q.rs", None, Some(quote))];
            verify(&mut v, &sent);
            (v[0].verified, v[0].line)
        };
        // The first and last lines in part, the blank line between kept.
        assert_eq!(
            at("a = compute(1);\n\n    let b = compute(2);\n    total(a, b)"),
            (Some(true), Some(2))
        );
        // Blank lines around the quote do not count.
        assert_eq!(at("\n\nlet b = compute(2);\n\n"), (Some(true), Some(4)));
        // A line between given only in part is not a verbatim quote.
        assert_eq!(
            at("fn f() {\n    let a = compute(1);\n\n    b = compute(2);\n    total(a, b)"),
            (Some(false), None)
        );
        // Leaving out the blank line between is not either.
        assert_eq!(
            at("let a = compute(1);\nlet b = compute(2);\ntotal(a, b)"),
            (Some(false), None)
        );
    }

    #[test]
    fn parts_an_investigation_read_count_as_sent_without_an_end() {
        let mut sent = Sent::default();
        let text = "untrusted\n--- BEGIN FILE: x.rs (lines 3–4 of 10) ---\n3│ let first = 1;\n4│ let second = 2;\n--- END FILE: x.rs ---\n".to_string();
        let frame = Frame {
            path: "x.rs".into(),
            at: 2,
            lines: 2,
            kind: FrameKind::Numbered {
                first: 3,
                whole: false,
            },
        };
        sent.add_all(&[(text, frame)]);
        let mut v = vec![
            finding("x.rs", Some(9), Some("let second = 2;")),
            finding("x.rs", Some(9), Some("let third = 3;")),
        ];
        verify(&mut v, &sent);
        assert_eq!((v[0].verified, v[0].line), (Some(true), Some(4)));
        let reason = v[1].unverified_reason.as_deref().unwrap();
        assert!(!reason.contains("past"), "only part was read: {reason}");
    }

    #[test]
    fn redactions_are_listed_by_file_line_and_rule() {
        let block = render::framed(
            "cfg.py",
            "a = 1\nkey = \"[REDACTED:generic-secret]\"\n",
            &[],
        );
        let diff = diff_block(
            "app.env",
            "@@ -1,1 +1,2 @@\n-old=[REDACTED:aws-access-key]\n+x=1\n+token=[REDACTED:github-token]\n",
        );
        let sent = index(&[block, diff]);
        let got: Vec<_> = sent.redactions().cloned().collect();
        assert_eq!(
            got,
            [
                ("app.env".to_string(), None, "aws-access-key".to_string()),
                ("app.env".into(), Some(2), "github-token".into()),
                ("cfg.py".into(), Some(2), "generic-secret".into()),
            ]
        );
    }

    #[test]
    fn evidence_over_many_identical_lines_is_looked_up_in_linear_work() {
        let n = 15_000usize;
        let sent = index(&[render::framed("big.rs", &"    x += 1;\n".repeat(n), &[])]);
        let file = sent.file("big.rs").unwrap();
        for quoted in [1, 2, 3, 100, n / 2, n] {
            let evidence: Vec<String> = (0..quoted).map(|_| "x += 1;".to_string()).collect();
            let started = std::time::Instant::now();
            let (found, steps) = find_counted(file, &evidence);
            eprintln!(
                "evidence-lookup: a {quoted}-line quote over {n} identical lines: {steps} comparisons, {:?}",
                started.elapsed()
            );
            let Found::At(starts, span) = found else {
                panic!("a {quoted}-line quote of identical lines is found");
            };
            assert_eq!((starts.len(), span as usize), (n - quoted + 1, quoted));
            assert!(
                steps <= 4 * (n + quoted) as u64,
                "a {quoted}-line quote over {n} identical lines took {steps} line comparisons"
            );
        }
        // Found that many times, the reason lists the first few lines, not all of them.
        let mut v = vec![finding("big.rs", None, Some("x += 1;\nx += 1;\nx += 1;"))];
        verify(&mut v, &sent);
        let reason = v[0].unverified_reason.as_deref().unwrap();
        assert!(reason.contains("occurs 14998 times"), "{reason}");
        assert!(reason.len() < 200, "{reason}");
    }

    #[test]
    fn occurrences_count_overlaps() {
        assert_eq!(occurrences("aaa", "aa"), 2);
        assert_eq!(occurrences("x.y.x", "x"), 2);
        assert_eq!(occurrences("é-é", "é"), 2);
        assert_eq!(occurrences("abc", "d"), 0);
    }
}

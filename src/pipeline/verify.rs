//! The verify step: every finding's location checked against what this call sent, and every
//! proposed edit against the file on disk.
//!
//! **Locations.** What was sent is held in memory: the files' numbered blocks (`--- BEGIN FILE`),
//! the diffs (`--- BEGIN DIFF`, their new-side lines numbered from the hunk headers) and the
//! thread's earlier turns. A finding's file must be one of them. Its `evidence` (a short verbatim
//! quote the review schema asks for) is looked up in that file as sent, whitespace-insensitively
//! line by line: found once, the finding is anchored there (a different line given is corrected,
//! and `line_given` keeps it); found several times, the line given must be at one of them; not
//! found, too short to tell, or missing while a line is given, the finding stays but is marked
//! unverified with the reason, and is ordered after the verified ones. A quote found only among
//! a diff's removed lines verifies the finding without a line (the line is gone).
//!
//! **Edits.** An edit is read against the file as it is now, through the collector (the sandbox,
//! the secret rules): `old` must occur there exactly once, and the file must hold no secret-looking
//! value (an edit of it would show one). Otherwise the edit is dropped and `edit_dropped` says
//! why; a kept edit is `applicable`, with `old` and `new` in the file's own line endings.

use std::collections::{BTreeMap, HashMap};

use crate::collector::Collector;
use crate::gemini::{Message, Part};
use crate::tools::review::{Edit, Finding};

/// Quotes shorter than this (not counting whitespace) match too much to place a finding.
const MIN_EVIDENCE_CHARS: usize = 3;
/// A quoted line shorter than this (not counting whitespace) must be a whole line as sent; a
/// longer one may be part of one.
const MIN_PART_CHARS: usize = 6;

/// What one file looked like in what was sent.
#[derive(Debug, Default)]
struct SentFile {
    /// Lines by number (the whole file for a file block, the new side of the hunks for a diff),
    /// normalised ([`norm`]).
    lines: BTreeMap<u32, String>,
    /// A diff's removed lines, normalised.
    removed: Vec<String>,
    /// How many lines the file has, when the whole of it was sent.
    whole: Option<u32>,
}

/// Every file block and diff of what was sent, by the path shown.
#[derive(Debug, Default)]
pub(super) struct Sent {
    files: HashMap<String, SentFile>,
    /// Each value replaced in a file or diff: (file, line, rule); no line for a removed line.
    redactions: std::collections::BTreeSet<(String, Option<u32>, String)>,
}

impl Sent {
    /// Indexes `texts` (the files' blocks, the diff text) and the text of `history`.
    pub(super) fn index<'a>(texts: impl IntoIterator<Item = &'a str>, history: &[Message]) -> Sent {
        let mut sent = Sent::default();
        for t in texts {
            sent.add(t);
        }
        for m in history {
            for p in &m.parts {
                if let Part::Text(t) = p {
                    sent.add(t);
                }
            }
        }
        sent
    }

    /// Each value replaced by redaction in what was sent, as (file, line, rule), in file and line
    /// order; never the value.
    pub(super) fn redactions(&self) -> impl Iterator<Item = &(String, Option<u32>, String)> {
        self.redactions.iter()
    }

    /// Adds what was sent besides (the files an investigation read).
    pub(super) fn add_all<'a>(&mut self, texts: impl IntoIterator<Item = &'a String>) {
        for t in texts {
            self.add(t);
        }
    }

    fn add(&mut self, text: &str) {
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if let Some(header) = line.strip_prefix("--- BEGIN FILE: ") {
                // `(lines a–b of n)`: a part of the file, read by an investigation.
                let part = header.contains(" (lines ");
                self.add_file(&mut lines, part);
            } else if line.starts_with("--- BEGIN DIFF: ") {
                self.add_diff(&mut lines);
            }
        }
    }

    /// A file block's numbered lines, up to its end marker (which names the file exactly); `part`
    /// when the block holds only some of the file's lines.
    fn add_file<'a>(&mut self, lines: &mut impl Iterator<Item = &'a str>, part: bool) {
        let mut numbered = BTreeMap::new();
        let mut marked = Vec::new();
        for line in lines.by_ref() {
            if let Some(name) = end_marker(line, "--- END FILE: ") {
                for (n, rule) in marked {
                    self.redactions.insert((name.to_string(), n, rule));
                }
                let whole = numbered.keys().next_back().copied().unwrap_or(0);
                let file = self.files.entry(name.to_string()).or_default();
                if !part {
                    file.whole = Some(whole);
                }
                file.lines.extend(numbered);
                return;
            }
            if let Some((n, text)) = numbered_line(line) {
                marked.extend(rules_in(text).map(|r| (Some(n), r)));
                numbered.insert(n, norm(text));
            }
        }
    }

    /// A diff block: the new side of its hunks by line number, and its removed lines.
    fn add_diff<'a>(&mut self, lines: &mut impl Iterator<Item = &'a str>) {
        let mut new_side = BTreeMap::new();
        let mut removed = Vec::new();
        let mut next: Option<u32> = None;
        let mut marked = Vec::new();
        for line in lines.by_ref() {
            if let Some(name) = end_marker(line, "--- END DIFF: ") {
                for (n, rule) in marked {
                    self.redactions.insert((name.to_string(), n, rule));
                }
                let file = self.files.entry(name.to_string()).or_default();
                file.lines.extend(new_side);
                file.removed.extend(removed);
                return;
            }
            if let Some(start) = hunk_start(line) {
                next = Some(start);
                continue;
            }
            let Some(n) = next else { continue }; // the patch's own headers
            let at = match line.as_bytes().first() {
                Some(b' ') | Some(b'+') => Some(n),
                _ => None,
            };
            marked.extend(rules_in(line).map(|r| (at, r)));
            match line.as_bytes().first() {
                Some(b' ') | Some(b'+') => {
                    new_side.insert(n, norm(&line[1..]));
                    next = Some(n + 1);
                }
                Some(b'-') => removed.push(norm(&line[1..])),
                // An empty context line (some tools drop its space), or `\ No newline`.
                None => {
                    new_side.insert(n, String::new());
                    next = Some(n + 1);
                }
                _ => {}
            }
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

/// `name` from `<prefix><name> ---`.
fn end_marker<'a>(line: &'a str, prefix: &str) -> Option<&'a str> {
    line.strip_prefix(prefix)?.strip_suffix(" ---")
}

/// `  7│ code` → (7, "code"); `  8│` → (8, "").
fn numbered_line(line: &str) -> Option<(u32, &str)> {
    let (number, rest) = line.split_once('│')?;
    let n = number.trim_start().parse().ok()?;
    Some((n, rest.strip_prefix(' ').unwrap_or(rest)))
}

/// `@@ -a,b +c,d @@` → c.
fn hunk_start(line: &str) -> Option<u32> {
    let rest = line.strip_prefix("@@ -")?;
    let plus = rest.split_whitespace().nth(1)?.strip_prefix('+')?;
    plus.split(',').next()?.parse().ok()
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

/// Looks up `evidence` (one or more lines) in `file`: each quoted line must be contained in the
/// line sent at its place, the lines consecutive.
fn find(file: &SentFile, evidence: &[String]) -> Found {
    let mut starts = Vec::new();
    for (&n, first) in &file.lines {
        if !holds(first, &evidence[0]) {
            continue;
        }
        let rest_matches = evidence[1..].iter().zip(1u32..).all(|(quoted, k)| {
            file.lines
                .get(&(n + k))
                .is_some_and(|sent| holds(sent, quoted))
        });
        if rest_matches {
            starts.push(n);
        }
    }
    if !starts.is_empty() {
        return Found::At(starts, evidence.len() as u32);
    }
    let removed = file
        .removed
        .windows(evidence.len())
        .any(|w| w.iter().zip(evidence).all(|(r, q)| holds(r, q)));
    if removed {
        Found::Removed
    } else {
        Found::Nowhere
    }
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

/// The quote's non-empty lines, normalised; `None` when it is too short to place anything.
fn quote_lines(evidence: &str) -> Option<Vec<String>> {
    let lines: Vec<String> = evidence
        .lines()
        .map(|l| norm(strip_number(l)))
        .filter(|l| !l.is_empty())
        .collect();
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
                    let lines: Vec<String> = many.iter().map(u32::to_string).collect();
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
    let read = collector
        .read_text(&edit.file)
        .map_err(|e| format!("`{}` cannot be read: {e}", edit.file))?;
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
    use crate::tools::review::Severity;

    fn sent() -> Sent {
        let file = crate::collector::render::block(
            "src/lib.rs",
            "fn a() {}\n\npub fn add(a: u32, b: u32) -> u32 {\n    let sum = a - b;\n}\n\nfn twice() { x(); }\nfn again() { x(); }\n",
            &[],
        );
        let diff = "--- BEGIN DIFF: src/main.rs (modified, unstaged) ---\n\
                    diff --git a/src/main.rs b/src/main.rs\n\
                    --- a/src/main.rs\n\
                    +++ b/src/main.rs\n\
                    @@ -10,3 +10,4 @@ fn main() {\n\
                    \x20   let x = 1;\n\
                    -    check(x);\n\
                    +    let y = x + 1;\n\
                    +    print(y);\n\
                    \x20}\n\
                    --- END DIFF: src/main.rs ---\n";
        Sent::index([file.as_str(), diff], &[])
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
    fn earlier_turns_count_as_sent() {
        let block = crate::collector::render::block("old.rs", "let kept = 1;\n", &[]);
        let sent = Sent::index([], &[Message::user(block)]);
        let mut v = vec![finding("old.rs", Some(1), Some("let kept = 1;"))];
        verify(&mut v, &sent);
        assert_eq!(v[0].verified, Some(true));
    }

    #[test]
    fn parts_an_investigation_read_count_as_sent_without_an_end() {
        let mut sent = Sent::default();
        sent.add_all(&[
            "untrusted\n--- BEGIN FILE: x.rs (lines 3–4 of 10) ---\n3│ let first = 1;\n4│ let second = 2;\n--- END FILE: x.rs ---\n".to_string(),
        ]);
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
        let block = crate::collector::render::block(
            "cfg.py",
            "a = 1\nkey = \"[REDACTED:generic-secret]\"\n",
            &[],
        );
        let diff = "--- BEGIN DIFF: app.env (added, staged) ---\n@@ -1,1 +1,2 @@\n-old=[REDACTED:aws-access-key]\n+x=1\n+token=[REDACTED:github-token]\n--- END DIFF: app.env ---\n";
        let sent = Sent::index([block.as_str(), diff], &[]);
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
    fn occurrences_count_overlaps() {
        assert_eq!(occurrences("aaa", "aa"), 2);
        assert_eq!(occurrences("x.y.x", "x"), 2);
        assert_eq!(occurrences("é-é", "é"), 2);
        assert_eq!(occurrences("abc", "d"), 0);
    }
}

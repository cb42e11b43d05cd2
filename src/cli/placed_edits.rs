//! The applicable edits of a review, placed in their files for the outputs that carry them
//! (`--format patch`, SARIF's `fixes`).
//!
//! Each file is read once, through the collector's rule of what an edit may write
//! ([`Collector::read_for_edit`]: the sandbox's one `open`, the secret-name rules, never a
//! repository's metadata nor a file with other hard links). Its text is redacted; the verify step already refused an edit of
//! a file holding a secret-looking value, so a file read with no redaction is the file itself — it
//! is checked again here (the file may have changed since), as is that the text is what the bytes
//! were: a file that is not valid UTF-8 was read lossily (U+FFFD in place of its bytes), and a diff
//! or a column of it would not match the file, so a text holding U+FFFD is left out. Each edit's
//! `old` must still occur exactly once. Several edits of one file are taken in the order of their
//! place in it; one overlapping an earlier one is left out, as is one whose new text the same
//! rule refuses (`collector::edits::refused_text`: a control character or a bidirectional
//! override, Gemini's text written byte for byte into a patch). Whatever is left out is said, with the
//! reason, in `notes` (the command line prints them on stderr).

use std::path::{Path, PathBuf};

use crate::collector::Collector;
use crate::reply::review::Finding;

/// One edit placed in its file's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// The index of its finding among the reply's findings.
    pub finding: usize,
    /// The byte range of `old` in the file's text.
    pub start: usize,
    pub end: usize,
    /// What replaces it, in the file's own line endings.
    pub new: String,
}

/// A file with the edits placed in it, in the order of their place, none overlapping.
#[derive(Debug, Clone)]
pub struct FileEdits {
    /// The file's canonical path.
    pub path: PathBuf,
    /// The path relative to the project root, `/`-separated (`None` when the file is under
    /// another root).
    pub relative: Option<String>,
    /// The file as it is on disk.
    pub text: String,
    pub edits: Vec<Placed>,
}

impl FileEdits {
    /// The text with every edit applied.
    pub fn applied(&self) -> String {
        let mut out = String::with_capacity(self.text.len());
        let mut at = 0;
        for e in &self.edits {
            out.push_str(&self.text[at..e.start]);
            out.push_str(&e.new);
            at = e.end;
        }
        out.push_str(&self.text[at..]);
        out
    }
}

/// The applicable edits of a reply's findings, by file (in the order the findings name them),
/// and what was left out.
#[derive(Debug, Clone, Default)]
pub struct Edits {
    pub files: Vec<FileEdits>,
    pub notes: Vec<String>,
}

impl Edits {
    /// The file and placed edit of the finding at `index`, if it has one.
    pub fn of(&self, index: usize) -> Option<(&FileEdits, &Placed)> {
        self.files
            .iter()
            .find_map(|f| f.edits.iter().find(|e| e.finding == index).map(|e| (f, e)))
    }
}

/// Places the applicable edits of `findings` in their files, read through `collector`.
pub fn gather(findings: &[Finding], collector: &Collector) -> Edits {
    let mut edits = Edits::default();
    // Read each file once: the findings' edits grouped by the path they resolve to.
    let mut wanted: Vec<(PathBuf, String, Vec<usize>)> = Vec::new();
    for (i, f) in findings.iter().enumerate() {
        let Some(edit) = f.edit.as_ref().filter(|e| e.applicable) else {
            continue;
        };
        let sandbox = collector.sandbox();
        match sandbox.resolve(&edit.file) {
            Ok(p) => {
                let path = p.as_path().to_path_buf();
                match wanted.iter_mut().find(|(q, _, _)| *q == path) {
                    Some((_, _, list)) => list.push(i),
                    None => wanted.push((path, edit.file.clone(), vec![i])),
                }
            }
            Err(e) => edits
                .notes
                .push(format!("the edit of `{}` was left out: {e}", edit.file)),
        }
    }
    let root = collector.sandbox().roots().first().cloned();
    for (path, shown, indices) in wanted {
        match read(collector, &path, &shown) {
            Ok(text) => {
                let relative = root.as_deref().and_then(|r| relative(r, &path));
                let placed = place(findings, &indices, &text, &shown, &mut edits.notes);
                if !placed.is_empty() {
                    edits.files.push(FileEdits {
                        path,
                        relative,
                        text,
                        edits: placed,
                    });
                }
            }
            Err(why) => {
                let n = indices.len();
                edits
                    .notes
                    .push(format!("{n} edit(s) of `{shown}` left out: {why}"));
            }
        }
    }
    edits
}

/// The file's text, exactly as on disk, or why it cannot be had.
fn read(collector: &Collector, path: &Path, shown: &str) -> Result<String, String> {
    let raw = path
        .to_str()
        .ok_or_else(|| "its path is not valid UTF-8".to_string())?;
    let read = collector
        .read_for_edit(raw)
        .map_err(|e| format!("it may not be edited: {e}"))?;
    if read.redactions > 0 {
        return Err(format!(
            "`{shown}` holds secret-looking values, and an edit of it could show one"
        ));
    }
    if read.text.contains('\u{FFFD}') {
        return Err(
            "it is not valid UTF-8 (or holds U+FFFD), so it cannot be reproduced exactly".into(),
        );
    }
    Ok(read.text)
}

/// `path` below `root`, `/`-separated.
fn relative(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// The edits of `indices` placed in `text`: each `old` found exactly once, taken in the order of
/// their place, those overlapping an earlier one left out.
fn place(
    findings: &[Finding],
    indices: &[usize],
    text: &str,
    shown: &str,
    notes: &mut Vec<String>,
) -> Vec<Placed> {
    let mut found = Vec::new();
    for &i in indices {
        let Some(edit) = findings[i].edit.as_ref() else {
            continue;
        };
        if let Some(why) = crate::collector::edits::refused_text(&edit.new) {
            notes.push(format!(
                "the edit of finding {} (`{shown}`) was left out: its new text holds {why}",
                i + 1
            ));
            continue;
        }
        match once(text, &edit.old) {
            Some(start) => found.push(Placed {
                finding: i,
                start,
                end: start + edit.old.len(),
                new: edit.new.clone(),
            }),
            None => notes.push(format!(
                "the edit of finding {} (`{shown}`) was left out: its `old` text no longer occurs exactly once in the file",
                i + 1
            )),
        }
    }
    found.sort_by_key(|p| (p.start, p.finding));
    let mut kept: Vec<Placed> = Vec::with_capacity(found.len());
    for p in found {
        match kept.last() {
            Some(last) if p.start < last.end => notes.push(format!(
                "the edit of finding {} (`{shown}`) was left out: it overlaps the edit of finding {}",
                p.finding + 1,
                last.finding + 1
            )),
            _ => kept.push(p),
        }
    }
    kept
}

/// Where `needle` occurs in `haystack`, when it occurs exactly once (overlapping occurrences
/// counted).
fn once(haystack: &str, needle: &str) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    let at = haystack.find(needle)?;
    let next = at + needle.chars().next().map_or(1, char::len_utf8);
    haystack[next..].find(needle).is_none().then_some(at)
}

/// A byte offset of `text` as SARIF's line and column (1-based; columns in UTF-16 code units, the
/// default `columnKind`). Lines end at `\n`; a `\r` before it belongs to the line's newline
/// sequence. With `end`, an offset just after a newline is given as the column past that newline
/// on its own line (SARIF's form for the end of a region that ends with its line).
pub fn position(text: &str, offset: usize, end: bool) -> (usize, usize) {
    let before = &text[..offset];
    let (line_start, line) = if end && before.ends_with('\n') {
        let body = &before[..before.len() - 1];
        let start = body.rfind('\n').map_or(0, |i| i + 1);
        (start, body.matches('\n').count() + 1)
    } else {
        let start = before.rfind('\n').map_or(0, |i| i + 1);
        (start, before.matches('\n').count() + 1)
    };
    let column = text[line_start..offset].encode_utf16().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::review::{Edit, Severity};

    fn finding(file: &str, old: &str, new: &str) -> Finding {
        Finding {
            edit: Some(Edit {
                file: file.into(),
                old: old.into(),
                new: new.into(),
                applicable: true,
            }),
            ..Finding::new(Severity::High, file.into(), Some(1), "t".into())
        }
    }

    #[test]
    fn edits_are_taken_in_order_of_place_and_overlaps_left_out() {
        let text = "one\ntwo\nthree\nfour\n";
        let findings = vec![
            finding("a.rs", "three", "3"),
            finding("a.rs", "one", "1"),
            finding("a.rs", "hree\nfo", "x"),
            finding("a.rs", "missing", "m"),
            finding("a.rs", "o", "0"),
            finding("a.rs", "four", "\u{1b}]52;c;x\u{7}"),
        ];
        let mut notes = Vec::new();
        let placed = place(&findings, &[0, 1, 2, 3, 4, 5], text, "a.rs", &mut notes);
        assert_eq!(
            placed.iter().map(|p| p.finding).collect::<Vec<_>>(),
            vec![1, 0]
        );
        assert_eq!(notes.len(), 4, "{notes:?}");
        assert!(
            notes
                .iter()
                .any(|n| n.contains("finding 6") && n.contains("control character")),
            "{notes:?}"
        );
        assert!(
            notes
                .iter()
                .any(|n| n.contains("finding 3") && n.contains("overlaps the edit of finding 1")),
            "{notes:?}"
        );
        assert!(
            notes
                .iter()
                .any(|n| n.contains("finding 4") && n.contains("exactly once")),
            "{notes:?}"
        );
        assert!(
            notes
                .iter()
                .any(|n| n.contains("finding 5") && n.contains("exactly once")),
            "{notes:?}"
        );
        let file = FileEdits {
            path: PathBuf::from("/p/a.rs"),
            relative: Some("a.rs".into()),
            text: text.into(),
            edits: placed,
        };
        assert_eq!(file.applied(), "1\ntwo\n3\nfour\n");
    }

    #[test]
    fn occurrences_are_counted_overlapping() {
        assert_eq!(once("abc", "b"), Some(1));
        assert_eq!(once("aaa", "aa"), None);
        assert_eq!(once("abab", "ab"), None);
        assert_eq!(once("abc", ""), None);
        assert_eq!(once("é!é", "é!"), Some(0));
    }

    #[test]
    fn positions_are_lines_and_utf16_columns() {
        let text = "ab\r\n𝄞é x\r\nlast";
        // Start of the file, and inside a line after a surrogate pair (2 units) and é (1 unit).
        assert_eq!(position(text, 0, false), (1, 1));
        let x = text.find('x').unwrap();
        assert_eq!(position(text, x, false), (2, 5));
        // Just after the first line's CRLF: line 2 column 1 as a start, line 1 past its CRLF as
        // an end.
        assert_eq!(position(text, 4, false), (2, 1));
        assert_eq!(position(text, 4, true), (1, 5));
        assert_eq!(position(text, text.len(), true), (3, 5));
    }

    /// The assumption the module rests on: a text with nothing to redact comes back unchanged,
    /// line endings and all.
    #[test]
    fn unredacted_text_is_the_text() {
        let text = "fn main() {\r\n    let é = \"𝄞\";\r\n}\n\tlast";
        assert_eq!(crate::redact::redact(text), (text.to_string(), 0));
    }
}

//! Where a finding points, checked before it is printed: Gemini's `file` and `line` are text
//! from a model, and a printed location is a link (SARIF viewers, terminals, editors, GitLab's
//! Code Quality widget). A location is kept only for a file inside the roots (after resolving
//! symlinks, through the sandbox), relative to the base the output is relative to, or for a
//! file that is gone (one the change deletes) when the finding was verified against what this
//! call sent of it; URLs, `file://`, `..` escapes, absolute paths elsewhere, names of no file
//! and names holding a control character (a line break would start a line of its own in a log)
//! lose their location. A line past the end of the file is clamped to its last line. The
//! finding itself is always kept.

use std::path::{Component, Path};

use crate::collector::sandbox::{Sandbox, SandboxError};
use crate::reply::Finished;
use crate::reply::review::citation;

/// A finding's location after the check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// Inside the roots: the path relative to the base, and the line (clamped to the file).
    At { file: String, line: Option<u32> },
    /// No usable location (none given, or outside the roots).
    Nowhere,
}

/// Checks `file`/`line` as cited against the roots; relative paths are relative to `base`.
/// `sent`: the finding was verified against what this call sent of the file, so a file no
/// longer on disk (deleted by the change) keeps its path.
pub fn place(file: &str, line: Option<u32>, base: &Path, sandbox: &Sandbox, sent: bool) -> Place {
    let file = file.trim();
    let given = Path::new(file);
    // A prefix only with a root (`C:\x`, not the drive-relative `C:x`); the sandbox judges the
    // absolute forms.
    let drive_relative =
        !given.is_absolute() && matches!(given.components().next(), Some(Component::Prefix(_)));
    if file.is_empty()
        || file.contains(|c: char| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}'))
        || has_scheme(file)
        || drive_relative
        || given
            .components()
            .any(|c| matches!(c, Component::ParentDir))
    {
        return Place::Nowhere;
    }
    let full = if given.is_absolute() {
        given.to_path_buf()
    } else {
        base.join(given)
    };
    let Some(full_str) = full.to_str() else {
        return Place::Nowhere;
    };
    let (path, line) = match sandbox.resolve(full_str) {
        Ok(p) => {
            let line = match (line, crate::collector::line_count(&p)) {
                (Some(l), Ok(n)) => Some(l.min(u32::try_from(n.max(1)).unwrap_or(u32::MAX))),
                // Not text (or unreadable): a line number cannot be checked.
                (Some(_), Err(_)) => None,
                (None, _) => None,
            };
            (p.as_path().to_path_buf(), line)
        }
        // Inside the roots but gone: a file the change deletes, whose finding was verified in
        // what was sent, keeps its path (unchecked); a name of no file loses it.
        Err(SandboxError::NotFound { .. }) if sent => (full, line),
        Err(_) => return Place::Nowhere,
    };
    match path.strip_prefix(base) {
        Ok(rel) if !rel.as_os_str().is_empty() => Place::At {
            // With `/` on every platform, as the sandbox shows a path.
            #[cfg(windows)]
            file: rel.to_string_lossy().replace('\\', "/"),
            #[cfg(not(windows))]
            file: rel.to_string_lossy().into_owned(),
            line,
        },
        _ => Place::Nowhere,
    }
}

/// `scheme:` at the start (`file:`, `https:`, `javascript:`…), not a drive letter.
pub(super) fn has_scheme(s: &str) -> bool {
    let Some((scheme, _)) = s.split_once(':') else {
        return false;
    };
    scheme.len() > 1
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// Checks every finding of `reply`: its `file`/`line` become the checked ones (empty file: no
/// location), and the Markdown text cites the checked location instead of the given one. A file
/// outside the project is not shown where the text or a finding's unverified reason quotes it.
pub fn check(reply: &mut Finished, base: &Path, sandbox: &Sandbox) {
    let Some(findings) = reply.findings_mut() else {
        return;
    };
    // The text's citations, replaced in the findings' order once the findings are checked.
    let mut moved: Vec<(String, String)> = Vec::new();
    let mut hidden: Vec<String> = Vec::new();
    for f in findings {
        let sent = f.verified == Some(true);
        let (file, line) = match place(&f.file, f.line, base, sandbox, sent) {
            Place::At { file, line } => (file, line),
            Place::Nowhere => (String::new(), None),
        };
        if file == f.file && line == f.line {
            continue;
        }
        let shown = if file.is_empty() {
            "(location outside the project, not shown)".to_string()
        } else {
            citation(&file, line)
        };
        // As the Markdown cites it (`review::citation`, the one form of both).
        moved.push((citation(&f.file, f.line), shown));
        if file.is_empty() && !f.file.trim().is_empty() {
            // The verify step's reason names the file as given: not shown either.
            if let Some(why) = f.unverified_reason.as_mut() {
                *why = why.replace(&format!("`{}`", f.file), HIDDEN);
            }
            hidden.push(citation(&f.file, None));
        }
        f.file = file;
        f.line = line;
    }
    for (from, to) in moved {
        reply.text = reply.text.replacen(&from, &to, 1);
    }
    for from in hidden {
        reply.text = reply.text.replace(&from, HIDDEN);
    }
}

/// A file named outside the project, where a reason or the text quoted it.
const HIDDEN: &str = "its file (outside the project, not shown)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_outside_the_roots_are_dropped_and_lines_clamped() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.rs"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(root.join("src/b.rs"), "no newline at the end").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "x\n").unwrap();
        crate::collector::symlink(outside.path().join("secret"), root.join("link"));
        let sandbox = Sandbox::new(vec![root.clone()]);
        let at = |file: &str, line: Option<u32>| Place::At {
            file: file.into(),
            line,
        };
        let abs_a = root.join("src/a.rs").display().to_string();
        for (file, line, want) in [
            ("src/a.rs", Some(2), at("src/a.rs", Some(2))),
            ("./src/a.rs", Some(3), at("src/a.rs", Some(3))),
            (abs_a.as_str(), None, at("src/a.rs", None)),
            ("src/a.rs", Some(4_000_000_000), at("src/a.rs", Some(3))),
            ("src/b.rs", Some(9), at("src/b.rs", Some(1))),
            // A name of no file; one holding a line break or an escape.
            ("src/gone.rs", Some(7), Place::Nowhere),
            ("src/a.rs\n::error::x", Some(1), Place::Nowhere),
            ("src/a\r.rs", Some(1), Place::Nowhere),
            // Whitespace around a name is not part of it.
            ("src/a.rs\r\n", Some(1), at("src/a.rs", Some(1))),
            ("src/\u{1b}]0;t\u{7}a.rs", None, Place::Nowhere),
            ("src/a.rs\u{2028}x", None, Place::Nowhere),
            ("../../etc/passwd", Some(1), Place::Nowhere),
            ("src/../../etc/passwd", Some(1), Place::Nowhere),
            ("/etc/shadow", Some(1), Place::Nowhere),
            ("file:///etc/shadow", Some(1), Place::Nowhere),
            ("https://evil.example/x.rs", Some(1), Place::Nowhere),
            ("javascript:alert(1)", None, Place::Nowhere),
            ("link", Some(1), Place::Nowhere),
            ("", Some(1), Place::Nowhere),
            (".", None, Place::Nowhere),
        ] {
            assert_eq!(
                place(file, line, &root, &sandbox, false),
                want,
                "{file} {line:?}"
            );
        }
        // A file the change deletes, its finding verified in what was sent: inside, unchecked.
        assert_eq!(
            place("src/gone.rs", Some(7), &root, &sandbox, true),
            at("src/gone.rs", Some(7))
        );
        assert_eq!(
            place("../../etc/passwd", Some(1), &root, &sandbox, true),
            Place::Nowhere
        );
        assert_eq!(
            place("src/gone.rs\n::error::x", Some(7), &root, &sandbox, true),
            Place::Nowhere
        );
    }
}

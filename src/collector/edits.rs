//! What an edit may write: the one rule a proposed edit passes before it is offered as
//! applicable (the pipeline's verify step) and again before the command line places it in a
//! patch or a SARIF fix.
//!
//! The file is read as the collector reads any file it names (the sandbox, the secret-name
//! rules), and besides it must not be:
//! - **a repository's metadata**, by any spelling: no name on its canonical path (symlinks
//!   resolved, `..` gone) is `.git`, ASCII case ignored (as a case-insensitive file system opens
//!   it) and trailing dots and spaces ignored (as Windows opens it); and no directory above it,
//!   up to its root, is a git directory by git's own test (a `HEAD` with `objects` and `refs`, or
//!   with `commondir` for a worktree's). So a nested repository's `.git`, a gitfile `.git`, a bare
//!   repository or a separate git directory (where a gitfile points), a worktree's or a
//!   submodule's git directory are refused, reached however. An edit there runs code: a
//!   `core.fsmonitor` or `core.hooksPath` in `config`, a hook — at the next `git status`;
//! - **a file with more than one hard link**: its other names may lie outside the roots, and
//!   nothing seen from this name can prove they do not (the link count is read from the opened
//!   file, so a name swapped after the check is not the file read).
//!
//! And the new text must hold no control character but tab, line feed and carriage return (no
//! NUL, no escape sequence: ESC, CSI, OSC, C1), and no bidirectional override or isolate
//! (U+202A–U+202E, U+2066–U+2069: code that reads other than it runs): it is Gemini's text,
//! written byte for byte into the file, a patch or an agent's edit tool.

use std::path::Path;

use super::{CollectError, Collector, MAX_FILE_BYTES, ReadText, SandboxedPath, read};

/// Why a file may not be edited.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EditRefused {
    #[error(transparent)]
    Read(#[from] CollectError),
    #[error(
        "{path} is {why}: a repository's metadata, which no edit may write (it can make git run a command)"
    )]
    Metadata { path: String, why: String },
    #[error(
        "{path} has {links} hard links: its other names may lie outside the project, so no edit of it is offered"
    )]
    HardLinked { path: String, links: u64 },
}

impl From<super::SandboxError> for EditRefused {
    fn from(e: super::SandboxError) -> EditRefused {
        EditRefused::Read(e.into())
    }
}

impl Collector {
    /// A file an edit may write (see the module docs), read as text and redacted as
    /// [`Collector::read_text`] reads it.
    pub fn read_for_edit(&self, raw: &str) -> Result<ReadText, EditRefused> {
        let p = self.sandbox.resolve(raw)?;
        let display = self.sandbox.display(&p);
        if let Some(why) = metadata(&p, &self.sandbox.roots()[p.root_index()]) {
            return Err(EditRefused::Metadata { path: display, why });
        }
        self.refuse_secret(raw, &p)?;
        let unreadable = |why: super::Unread| CollectError::Unreadable {
            path: display.clone(),
            why: why.to_string(),
        };
        let opened = read::open(&p, MAX_FILE_BYTES).map_err(unreadable)?;
        if opened.links() > 1 {
            return Err(EditRefused::HardLinked {
                path: display,
                links: opened.links(),
            });
        }
        let text = opened.read_text().map_err(unreadable)?;
        Ok(super::redacted(display, text))
    }
}

/// What in an edit's new text may not be written, if anything (see the module docs).
pub fn refused_text(new: &str) -> Option<&'static str> {
    new.chars().find_map(|c| match c {
        '\t' | '\n' | '\r' => None,
        '\0' => Some("a control character (NUL)"),
        '\u{1b}' | '\u{9b}' | '\u{9d}' => Some("a control character (an escape sequence)"),
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => Some("a bidirectional override"),
        c if c.is_control() => Some("a control character"),
        _ => None,
    })
}

/// Why `p` is a repository's metadata, if it is: a `.git` on its path, or a git directory
/// above it up to `root`.
fn metadata(p: &SandboxedPath, root: &Path) -> Option<String> {
    repository_metadata(p.as_path(), root).map(str::to_string)
}

/// Why `path` (absolute; it need not exist yet) lies in a repository's metadata, if it does:
/// a component git takes for `.git` ([`is_dot_git`]), or a git directory above it up to `root`
/// (a nested repository, a gitfile's target, a bare repository, a worktree's git directory).
/// The one rule for every writer: the verify step's edits, the patch, the Gemini CLI agent's
/// changes.
pub fn repository_metadata(path: &Path, root: &Path) -> Option<&'static str> {
    if path.components().any(|c| is_dot_git(c.as_os_str())) {
        return Some("inside a `.git`");
    }
    path.ancestors()
        .skip(1)
        .take_while(|dir| dir.starts_with(root))
        .find(|dir| is_git_dir(dir))
        .map(|_| "inside a git directory")
}

/// Whether a path component names a repository's metadata as git takes it (`verify_path` with
/// `core.protectNTFS` and `core.protectHFS`), as the file systems we run on may open it: `.git`
/// in any ASCII case, with trailing dots or spaces, its 8.3 short name `git~1`, an NTFS stream
/// of it (`.git::$INDEX_ALLOCATION`), and with the characters HFS+ ignores in a name inside it.
pub fn is_dot_git(name: &std::ffi::OsStr) -> bool {
    let seen: String = name
        .to_string_lossy()
        .chars()
        .filter(|c| {
            !matches!(
                c,
                '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}'
            )
        })
        .collect::<String>()
        .to_ascii_lowercase();
    let seen = seen.trim_end_matches(['.', ' ']);
    seen == ".git" || seen == "git~1" || seen.starts_with(".git:")
}

/// Git's own test of a git directory: `HEAD`, with `objects` and `refs` or (a worktree's)
/// `commondir`.
fn is_git_dir(dir: &Path) -> bool {
    dir.join("HEAD").is_file()
        && ((dir.join("objects").is_dir() && dir.join("refs").is_dir())
            || dir.join("commondir").is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_text_with_controls_or_overrides_is_refused() {
        for (text, why) in [
            ("a\0b", Some("a control character (NUL)")),
            (
                "\u{1b}]52;c;eA==\u{7}",
                Some("a control character (an escape sequence)"),
            ),
            (
                "x \u{9b}2J",
                Some("a control character (an escape sequence)"),
            ),
            ("/*\u{202e} } */", Some("a bidirectional override")),
            ("\u{2067}x", Some("a bidirectional override")),
            ("bell\u{7}", Some("a control character")),
            ("del\u{7f}", Some("a control character")),
            ("fine\tand\r\nfine\n", None),
            ("unicode é ✓ \u{200f}", None),
        ] {
            assert_eq!(refused_text(text), why, "{text:?}");
        }
    }

    #[test]
    fn dot_git_is_seen_however_it_is_spelled() {
        for name in [".git", ".GIT", ".Git", ".git.", ".git ", ".git. ."] {
            assert!(is_dot_git(std::ffi::OsStr::new(name)), "{name:?}");
        }
        for name in ["git", ".gitignore", ".github", "x.git", ".git-crypt"] {
            assert!(!is_dot_git(std::ffi::OsStr::new(name)), "{name:?}");
        }
    }
}

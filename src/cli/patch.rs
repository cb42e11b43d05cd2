//! `--format patch`: the applicable edits of a review as one unified diff, for `git apply` (or
//! `patch -p1`) at the project root.
//!
//! Each file's diff is made by `similar` from the file as read ([`super::edits`]) and the same text
//! with its edits applied: paths `a/<file>` and `b/<file>` relative to the project root, three
//! lines of context, lines kept with their own endings (a CRLF file's lines carry their `\r`, which
//! `git apply` matches), `\ No newline at end of file` where a last line has none. The headers are
//! the traditional `---`/`+++` pair without `diff --git`: `git apply` takes such paths relative to
//! the directory it runs in (a `diff --git` path is taken from the repository's top), so the patch
//! applies at the project root even when that is a directory inside a repository.

use similar::TextDiff;

use super::edits::Edits;

/// The unified diff of every file with edits; empty when there is none. Files outside the project
/// root (another root) cannot be named relative to it and are left out, said in `notes`.
pub fn render(edits: &Edits, notes: &mut Vec<String>) -> String {
    let mut out = String::new();
    for file in edits.files.iter().filter(|f| !f.edits.is_empty()) {
        let Some(rel) = file.relative.as_deref() else {
            notes.push(format!(
                "the edits of `{}` were left out of the patch: the file is not under the project root",
                file.path.display()
            ));
            continue;
        };
        let Some(rel) = header_path(rel) else {
            notes.push(format!(
                "the edits of `{}` were left out of the patch: its name cannot be written in a patch header",
                file.path.display()
            ));
            continue;
        };
        let new = file.applied();
        let diff = TextDiff::from_lines(file.text.as_str(), new.as_str());
        out.push_str(
            &diff
                .unified_diff()
                .context_radius(3)
                .header(&format!("a/{rel}"), &format!("b/{rel}"))
                .to_string(),
        );
    }
    out
}

/// A path as a patch header can carry it unquoted: no control characters, no quotes or
/// backslashes, no leading or trailing space (git would quote such names, and `patch` does not
/// read git's quoting).
fn header_path(rel: &str) -> Option<&str> {
    let plain = !rel.is_empty()
        && rel.trim() == rel
        && !rel
            .chars()
            .any(|c| c.is_control() || matches!(c, '"' | '\\'));
    plain.then_some(rel)
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use super::*;
    use crate::cli::edits::{FileEdits, Placed};

    fn file(rel: &str, text: &str, edits: &[(&str, &str)]) -> FileEdits {
        let mut placed: Vec<Placed> = edits
            .iter()
            .enumerate()
            .map(|(i, (old, new))| {
                let start = text.find(old).unwrap();
                Placed {
                    finding: i,
                    start,
                    end: start + old.len(),
                    new: (*new).into(),
                }
            })
            .collect();
        placed.sort_by_key(|p| p.start);
        FileEdits {
            path: PathBuf::from("/p").join(rel),
            relative: Some(rel.into()),
            text: text.into(),
            edits: placed,
        }
    }

    fn git(dir: &Path, args: &[&str]) -> std::process::Output {
        Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .output()
            .expect("git runs")
    }

    /// Writes the files in a fresh repository, then runs `git apply --check` and `git apply` on
    /// the patch in `cwd` (below the repository's top) and returns the files after.
    fn apply(files: &[(&str, &str)], sub: &str, patch: &str) -> Vec<Vec<u8>> {
        let dir = tempfile::tempdir().unwrap();
        assert!(git(dir.path(), &["init", "-q"]).status.success());
        let cwd = dir.path().join(sub);
        for (rel, text) in files {
            let p = cwd.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
        }
        let patch_file = dir.path().join("the.patch");
        std::fs::write(&patch_file, patch).unwrap();
        let p = patch_file.to_str().unwrap();
        let check = git(&cwd, &["apply", "--check", p]);
        assert!(
            check.status.success(),
            "git apply --check refused:\n{}\n{patch}",
            String::from_utf8_lossy(&check.stderr)
        );
        let applied = git(&cwd, &["apply", p]);
        assert!(applied.status.success());
        files
            .iter()
            .map(|(rel, _)| std::fs::read(cwd.join(rel)).unwrap())
            .collect()
    }

    #[test]
    fn the_patch_applies_with_git() {
        let long: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        let crlf = "fn a() {\r\n    old();\r\n}\r\n";
        let no_eol = "first\nlast";
        let cases: Vec<(&str, FileEdits, String)> = vec![
            (
                "two hunks in one file, context of three",
                file(
                    "src/lib.rs",
                    &long,
                    &[("line 3\n", "line three\n"), ("line 25\n", "")],
                ),
                long.replace("line 3\n", "line three\n")
                    .replace("line 25\n", ""),
            ),
            (
                "a CRLF file with a CRLF edit",
                file(
                    "crlf.rs",
                    crlf,
                    &[("    old();\r\n", "    new();\r\n    more();\r\n")],
                ),
                "fn a() {\r\n    new();\r\n    more();\r\n}\r\n".into(),
            ),
            (
                "a last line without a newline",
                file("no eol.txt", no_eol, &[("last", "final")]),
                "first\nfinal".into(),
            ),
            (
                "the whole file removed",
                file("gone.txt", "only\n", &[("only\n", "")]),
                String::new(),
            ),
        ];
        for sub in ["", "inner"] {
            for (what, f, want) in &cases {
                let edits = Edits {
                    files: vec![f.clone()],
                    notes: Vec::new(),
                };
                let mut notes = Vec::new();
                let patch = render(&edits, &mut notes);
                assert!(notes.is_empty(), "{what}: {notes:?}");
                assert!(
                    patch.starts_with(&format!(
                        "--- a/{}\n+++ b/{}\n",
                        f.relative.as_deref().unwrap(),
                        f.relative.as_deref().unwrap()
                    )),
                    "{what}: {patch}"
                );
                let after = apply(&[(f.relative.as_deref().unwrap(), &f.text)], sub, &patch);
                assert_eq!(
                    String::from_utf8(after[0].clone()).unwrap(),
                    *want,
                    "{what} (in `{sub}`)"
                );
            }
        }
        // Several files in one patch.
        let edits = Edits {
            files: vec![cases[0].1.clone(), cases[1].1.clone()],
            notes: Vec::new(),
        };
        let patch = render(&edits, &mut Vec::new());
        let after = apply(&[("src/lib.rs", &long), ("crlf.rs", crlf)], "", &patch);
        assert_eq!(after[0], cases[0].2.as_bytes());
        assert_eq!(after[1], cases[1].2.as_bytes());
        // Three lines of context: the first hunk starts at line 1 (two lines before line 3).
        assert!(patch.contains("@@ -1,6 +1,6 @@"), "{patch}");
    }

    #[test]
    fn no_edit_is_an_empty_patch_and_unnamable_files_are_said() {
        assert_eq!(render(&Edits::default(), &mut Vec::new()), "");
        let mut outside = file("x.rs", "a\n", &[("a\n", "b\n")]);
        outside.relative = None;
        let mut quoted = file("q\"x.rs", "a\n", &[("a\n", "b\n")]);
        quoted.relative = Some("q\"x.rs".into());
        let edits = Edits {
            files: vec![outside, quoted],
            notes: Vec::new(),
        };
        let mut notes = Vec::new();
        assert_eq!(render(&edits, &mut notes), "");
        assert_eq!(notes.len(), 2, "{notes:?}");
    }
}

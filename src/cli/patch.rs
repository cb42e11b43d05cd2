//! `--format patch`: the applicable edits of a review as one unified diff, for `git apply` (or
//! `patch -p1`) at the project root.
//!
//! Each file's diff is rendered on its own, from the file as read ([`super::placed_edits`]) and the same
//! text with its edits applied; one that cannot be rendered is left out and said in `notes`, so it
//! never takes the others with it (`git apply` refuses a whole patch for one bad section). Paths
//! are `a/<file>` and `b/<file>` relative to the project root; a name a patch cannot carry (one
//! git would quote, one `git apply` refuses: `.`/`..` components, a repository's metadata, `.git`
//! in any spelling git takes for it) is such a file. Lines are split at `\n` only, as git and
//! `patch` read them: a lone `\r` stays inside its line (the diff library's own line splitting
//! also breaks at `\r`, which would miscount the hunks), a CRLF file's lines carry their `\r`,
//! which `git apply` matches, and `\ No newline at end of file` follows a last line without `\n`.
//! Three lines of context. The headers are the traditional `---`/`+++` pair without
//! `diff --git`: `git apply` takes such paths relative to the directory it runs in (a
//! `diff --git` path is taken from the repository's top), so the patch applies at the project
//! root even when that is a directory inside a repository.

use std::ops::Range;

use similar::{Algorithm, DiffTag};

use super::placed_edits::{Edits, FileEdits};

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// The unified diff of every file with edits; empty when there is none. A file whose diff cannot
/// be written (outside the project root, a name no patch may carry) is left out, said in `notes`.
pub fn render(edits: &Edits, notes: &mut Vec<String>) -> String {
    let mut out = String::new();
    for file in edits.files.iter().filter(|f| !f.edits.is_empty()) {
        match section(file) {
            Ok(diff) => out.push_str(&diff),
            Err(why) => notes.push(format!(
                "the edits of `{}` were left out of the patch: {why}",
                file.path.display()
            )),
        }
    }
    out
}

/// One file's diff, or why it cannot be written.
fn section(file: &FileEdits) -> Result<String, &'static str> {
    let rel = file
        .relative
        .as_deref()
        .ok_or("the file is not under the project root")?;
    let rel = header_path(rel).ok_or("its name cannot be written in a patch header")?;
    if rel.split('/').any(is_dotgit) {
        return Err("it is in a repository's metadata (`.git`), which no patch may touch");
    }
    Ok(unified(&file.text, &file.applied(), rel))
}

/// A path as a patch header can carry it unquoted and `git apply` takes it: no control
/// characters, no quotes or backslashes, no leading or trailing space (git would quote such
/// names, and `patch` does not read git's quoting), relative, and no empty, `.` or `..`
/// component (git's own rule for a path in a patch).
fn header_path(rel: &str) -> Option<&str> {
    let plain = !rel.is_empty()
        && rel.trim() == rel
        && !rel
            .chars()
            .any(|c| c.is_control() || matches!(c, '"' | '\\'))
        && rel.split('/').all(|c| !matches!(c, "" | "." | ".."));
    plain.then_some(rel)
}

/// Whether a path component names a repository's metadata as git takes it: the collector's
/// one rule.
fn is_dotgit(component: &str) -> bool {
    crate::collector::edits::is_dot_git(std::ffi::OsStr::new(component))
}

/// `text`'s lines as git reads them: split after each `\n`, the last one without it when the
/// text does not end in one.
fn lines(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

/// The unified diff of `old` to `new` under the headers `a/<rel>` and `b/<rel>`; empty when
/// they are the same.
fn unified(old: &str, new: &str, rel: &str) -> String {
    let (a, b) = (lines(old), lines(new));
    let ops = similar::capture_diff_slices(Algorithm::Myers, &a, &b);
    let hunks = similar::group_diff_ops(ops, CONTEXT);
    if hunks.is_empty() {
        return String::new();
    }
    let mut out = format!("--- a/{rel}\n+++ b/{rel}\n");
    for hunk in hunks {
        let (Some(first), Some(last)) = (hunk.first(), hunk.last()) else {
            continue;
        };
        let old_range = first.old_range().start..last.old_range().end;
        let new_range = first.new_range().start..last.new_range().end;
        out.push_str(&format!(
            "@@ -{} +{} @@\n",
            range(&old_range),
            range(&new_range)
        ));
        for op in &hunk {
            let (tag, o, n) = op.as_tag_tuple();
            match tag {
                DiffTag::Equal => a[o].iter().for_each(|l| line(&mut out, ' ', l)),
                DiffTag::Delete => a[o].iter().for_each(|l| line(&mut out, '-', l)),
                DiffTag::Insert => b[n].iter().for_each(|l| line(&mut out, '+', l)),
                DiffTag::Replace => {
                    a[o].iter().for_each(|l| line(&mut out, '-', l));
                    b[n].iter().for_each(|l| line(&mut out, '+', l));
                }
            }
        }
    }
    out
}

/// A hunk header's range: the first line (1-based) and the count; for no line, the line before.
fn range(lines: &Range<usize>) -> String {
    let start = if lines.is_empty() {
        lines.start
    } else {
        lines.start + 1
    };
    format!("{start},{}", lines.len())
}

/// One line of a hunk, with its tag; a last line without `\n` gets git's marker.
fn line(out: &mut String, tag: char, text: &str) {
    out.push(tag);
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push_str("\n\\ No newline at end of file\n");
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use super::*;
    use crate::cli::placed_edits::{FileEdits, Placed};

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

    /// `patch -p1` on `patch` in `dir`: dry run first, then for real; false when `patch` is
    /// not installed (after saying so).
    fn patch_p1(dir: &Path, patch: &str) -> bool {
        let file = dir.join("..").join("p1.patch");
        std::fs::write(&file, patch).unwrap();
        let run = |dry: bool| {
            let mut cmd = Command::new("patch");
            cmd.args(["-p1", "--batch", "--forward", "-i"]).arg(&file);
            if dry {
                cmd.arg("--dry-run");
            }
            cmd.current_dir(dir).output()
        };
        let Ok(dry) = run(true) else {
            eprintln!("skipped: patch is not installed");
            return false;
        };
        assert!(
            dry.status.success(),
            "patch -p1 --dry-run refused:\n{}{}\n{patch}",
            String::from_utf8_lossy(&dry.stdout),
            String::from_utf8_lossy(&dry.stderr)
        );
        assert!(run(false).unwrap().status.success());
        true
    }

    /// A lone CR is no line break for git (nor for `patch`): the diff splits lines at `\n` only,
    /// so a new text holding one keeps the hunk's counts right. An edit whose file cannot be
    /// named in a patch — a repository's metadata, which `git apply` refuses whole — is left out
    /// and said, and every other edit still applies, with `git apply` and with `patch -p1`.
    #[test]
    fn a_lone_cr_or_a_refused_path_never_corrupts_the_other_edits() {
        let long: String = (1..=12).map(|i| format!("line {i}\n")).collect();
        let good = [
            file(
                "src/a.rs",
                "fn a() {\n    one();\n}\n",
                &[("    one();\n", "    one();\r    two();\n")],
            ),
            file(
                "src/b.rs",
                &long,
                &[("line 3\n", "line\rthree\n"), ("line 11\n", "")],
            ),
            file("src/c.rs", "first\nlast", &[("last", "last\r")]),
            file("src/d.rs", "a\rb\nc\n", &[("c\n", "c\nd\n")]),
            file(
                "src/win.rs",
                "fn w() {\r\n    old();\r\n}\r\n",
                &[("    old();\r\n", "    new();\r\n")],
            ),
        ];
        let want: Vec<String> = good.iter().map(FileEdits::applied).collect();
        let refused = [
            ".git/config",
            "sub/.git/hooks/pre-commit",
            ".GIT/config",
            "x/../.git/config",
            "./.git/HEAD",
        ];
        // The refused edits first, between and last: none may end a file's diff early.
        let mut files: Vec<FileEdits> = Vec::new();
        for (i, f) in good.iter().enumerate() {
            let rel = refused[i % refused.len()];
            files.push(file(
                rel,
                "[core]\n",
                &[("[core]\n", "[core]\n\tfsmonitor = touch PWNED\n")],
            ));
            files.push(f.clone());
        }
        files.push(file(refused[4], "ref\n", &[("ref\n", "x\n")]));
        let edits = Edits {
            files,
            notes: Vec::new(),
        };
        let mut notes = Vec::new();
        let patch = render(&edits, &mut notes);
        assert_eq!(notes.len(), good.len() + 1, "{notes:?}");
        for n in &notes {
            let why = if n.contains("/../") || n.contains("/./") {
                "cannot be written in a patch header"
            } else {
                "a repository's metadata"
            };
            assert!(
                n.contains("left out of the patch") && n.contains(why),
                "{n}"
            );
        }
        assert!(
            !patch.contains(".git") && !patch.contains(".GIT"),
            "{patch}"
        );
        let texts: Vec<(&str, &str)> = good
            .iter()
            .map(|f| (f.relative.as_deref().unwrap(), f.text.as_str()))
            .collect();
        let after = apply(&texts, "", &patch);
        for ((f, got), want) in good.iter().zip(&after).zip(&want) {
            assert_eq!(
                String::from_utf8_lossy(got),
                *want,
                "{:?} with git apply",
                f.relative
            );
        }
        // The same patch with `patch -p1`, in a fresh tree.
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("tree");
        for (rel, text) in &texts {
            let p = tree.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
        }
        if patch_p1(&tree, &patch) {
            for (f, want) in good.iter().zip(&want) {
                let rel = f.relative.as_deref().unwrap();
                assert_eq!(
                    std::fs::read_to_string(tree.join(rel)).unwrap(),
                    *want,
                    "{rel} with patch -p1"
                );
            }
        }
    }

    #[test]
    fn the_metadata_is_seen_in_every_spelling_git_takes_for_it() {
        for metadata in [
            ".git",
            ".GIT",
            ".Git.",
            ".git. .",
            "git~1",
            "GIT~1",
            ".g\u{200c}it",
            "\u{feff}.git",
            ".git::$INDEX_ALLOCATION",
        ] {
            assert!(is_dotgit(metadata), "{metadata:?}");
        }
        for other in [
            ".github",
            ".gitignore",
            ".gitmodules",
            "a.git",
            "git",
            ".gi",
            "git~2",
        ] {
            assert!(!is_dotgit(other), "{other:?}");
        }
        for refused in ["/abs", "a//b", "./a", "a/./b", "a/..", " a", "a\tb", "a\\b"] {
            assert_eq!(header_path(refused), None, "{refused:?}");
        }
        assert_eq!(header_path("src/a b.rs"), Some("src/a b.rs"));
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

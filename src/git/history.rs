//! History for an investigation: the commits that touched a path, newest first. The repository
//! is found and checked by [`discover`](super::discover) exactly as for precommit (the guard runs
//! before libgit2 opens it); what is returned is redacted like any text sent.

use std::path::Path;

use git2::{DiffOptions, Sort};

use super::error::GitError;
use super::discover;
use crate::collector::Collector;

/// Commits looked at, at most, to find those that touched the path.
const SCAN_CAP: usize = 5_000;

/// The commits that touched `path` (a file or directory inside the roots), newest first, at
/// most `max`: one line each, `short-id date author: subject`, redacted.
pub fn log(collector: &Collector, path: &str, max: usize) -> Result<String, GitError> {
    let (found, scope, shown) = open_scoped(collector, path)?;
    let err = |e: git2::Error| GitError::git(&shown, &e);
    let repo = &found.repo;
    let mut walk = repo.revwalk().map_err(err)?;
    if walk.push_head().is_err() {
        return Ok(format!("{shown}: the repository has no commits yet.\n"));
    }
    walk.set_sorting(Sort::TIME).map_err(err)?;
    let mut lines = Vec::new();
    let mut scanned = 0;
    for oid in walk {
        let oid = oid.map_err(err)?;
        scanned += 1;
        if lines.len() >= max || scanned > SCAN_CAP {
            break;
        }
        let commit = repo.find_commit(oid).map_err(err)?;
        if !touches(repo, &commit, &scope).map_err(err)? {
            continue;
        }
        let id = oid.to_string();
        let author = commit.author();
        lines.push(format!(
            "{} {} {}: {}",
            &id[..id.len().min(10)],
            date(commit.time().seconds()),
            author.name().unwrap_or("?"),
            commit.summary().ok().flatten().unwrap_or("").trim()
        ));
    }
    let mut text = if lines.is_empty() {
        format!("No commit touched {shown}.\n")
    } else {
        lines.join("\n") + "\n"
    };
    if scanned > SCAN_CAP {
        text.push_str(&format!(
            "(only the newest {SCAN_CAP} commits were looked at)\n"
        ));
    }
    Ok(crate::redact::redact(&text).0)
}

/// Longest patch text of one file shown by [`diff`], in characters.
const FILE_PATCH_CHARS: usize = 20_000;

/// The repository holding `path` (inside the roots), found through discover and the guard,
/// `path` relative to its work tree (the scope every answer here — log, diff, blame — is limited
/// to: a repository whose work tree reaches above the roots shows nothing outside them), and
/// `path` as shown.
pub(super) fn open_scoped(
    collector: &Collector,
    path: &str,
) -> Result<(discover::Found, std::path::PathBuf, String), GitError> {
    let sandbox = collector.sandbox();
    let target = sandbox.resolve(path)?;
    let start = if target.as_path().is_dir() {
        target.as_path().to_path_buf()
    } else {
        target
            .as_path()
            .parent()
            .unwrap_or(target.as_path())
            .to_path_buf()
    };
    let Some(found) = discover::find(sandbox, &start, 0)?.found.into_iter().next() else {
        return Err(GitError::NotARepository {
            path: path.to_string(),
            max_depth: 0,
        });
    };
    let scope = target
        .as_path()
        .strip_prefix(&found.workdir)
        .unwrap_or(Path::new(""))
        .to_path_buf();
    Ok((found, scope, sandbox.display(&target)))
}

/// The changes under `path` between two revisions (`from` → `to`; `to` absent: the work tree),
/// or those one commit made (`from` absent: `to` against its first parent, with the commit's
/// header): a unified patch, redacted; secret files by name and binary files listed without
/// their content, and so are the files a team's `ignore_patterns` match; each file's patch
/// capped.
pub fn diff(
    collector: &Collector,
    path: &str,
    from: Option<&str>,
    to: Option<&str>,
    ignore: Option<&crate::rules::Ignore>,
) -> Result<String, GitError> {
    let (found, scope, shown) = open_scoped(collector, path)?;
    let repo = &found.repo;
    let err = |e: git2::Error| GitError::git(&shown, &e);
    let bad = |rev: &str, e: git2::Error| GitError::Git {
        repo: shown.clone(),
        message: format!(
            "`{rev}` is not a branch, tag or commit here ({})",
            e.message()
        ),
    };
    // Only commits (a branch, tag or commit id): a tree revision such as `HEAD:other` would put
    // another directory's files under the root's own paths.
    let tree_of = |rev: &str| -> Result<git2::Tree<'_>, GitError> {
        repo.revparse_single(rev)
            .and_then(|o| o.peel_to_commit())
            .and_then(|c| c.tree())
            .map_err(|e| bad(rev, e))
    };
    let mut opts = scoped(&scope);
    let mut text = String::new();
    let diff = match (from, to) {
        (None, None) => {
            let head = repo.head().and_then(|h| h.peel_to_tree()).ok();
            repo.diff_tree_to_workdir_with_index(head.as_ref(), Some(&mut opts))
                .map_err(err)?
        }
        (None, Some(rev)) => {
            let commit = repo
                .revparse_single(rev)
                .and_then(|o| o.peel_to_commit())
                .map_err(|e| bad(rev, e))?;
            let id = commit.id().to_string();
            text.push_str(&format!(
                "commit {} {} {}\n\n{}\n\n",
                &id[..id.len().min(10)],
                date(commit.time().seconds()),
                commit.author().name().unwrap_or("?"),
                commit.message().unwrap_or("").trim()
            ));
            let parent = commit.parent(0).and_then(|p| p.tree()).ok();
            let tree = commit.tree().map_err(err)?;
            repo.diff_tree_to_tree(parent.as_ref(), Some(&tree), Some(&mut opts))
                .map_err(err)?
        }
        (Some(a), None) => {
            let a = tree_of(a)?;
            repo.diff_tree_to_workdir_with_index(Some(&a), Some(&mut opts))
                .map_err(err)?
        }
        (Some(a), Some(b)) => {
            let (a, b) = (tree_of(a)?, tree_of(b)?);
            repo.diff_tree_to_tree(Some(&a), Some(&b), Some(&mut opts))
                .map_err(err)?
        }
    };
    let mut files = 0usize;
    for i in 0..diff.deltas().len() {
        files += 1;
        text.push_str(&file_patch(collector, &found, &diff, i, ignore));
    }
    if files == 0 {
        text.push_str(&format!("No changes under `{shown}`.\n"));
    }
    Ok(crate::redact::redact(&text).0)
}

/// One file of a diff: its patch, or a line saying why its content is not shown.
fn file_patch(
    collector: &Collector,
    found: &discover::Found,
    diff: &git2::Diff<'_>,
    index: usize,
    ignore: Option<&crate::rules::Ignore>,
) -> String {
    let Some(delta) = diff.get_delta(index) else {
        return String::new();
    };
    let name = delta
        .new_file()
        .path()
        .or_else(|| delta.old_file().path())
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let secret = [delta.old_file().path(), delta.new_file().path()]
        .into_iter()
        .flatten()
        .find_map(|p| collector.secret_name_rule(&found.workdir.join(p)));
    if let Some(rule) = secret {
        return format!("--- {name}: looks like a secret ({rule}); content not shown\n");
    }
    let ignored = [delta.old_file().path(), delta.new_file().path()]
        .into_iter()
        .flatten()
        .any(|p| ignore.is_some_and(|i| i.ignores(&found.workdir.join(p))));
    if ignored {
        return format!(
            "--- {name}: ignored by the repository's ignore_patterns; content not shown\n"
        );
    }
    if delta.flags().is_binary() {
        return format!("--- {name}: binary; content not shown\n");
    }
    let Ok(Some(mut patch)) = git2::Patch::from_diff(diff, index) else {
        return format!("--- {name}: no textual change\n");
    };
    let Ok(buf) = patch.to_buf() else {
        return format!("--- {name}: the patch could not be read\n");
    };
    let body = String::from_utf8_lossy(&buf);
    if memchr::memchr(0, body.as_bytes()).is_some() {
        return format!("--- {name}: binary; content not shown\n");
    }
    if body.len() <= FILE_PATCH_CHARS {
        return body.into_owned();
    }
    let mut cut = FILE_PATCH_CHARS;
    while !body.is_char_boundary(cut) {
        cut -= 1;
    }
    let kept = &body[..body[..cut].rfind('\n').map_or(cut, |n| n + 1)];
    format!("{kept}(the patch of {name} is cut here: ask for a narrower path)\n")
}

/// Who last changed each line of `start..=end` of a file, whose text as it is now (read through
/// the collector, redacted) is `text`: `line short-id date author │ text`; lines not committed
/// yet say so.
pub fn blame(
    collector: &Collector,
    path: &str,
    text: &str,
    start: usize,
    end: usize,
) -> Result<String, GitError> {
    let (found, scope, shown) = open_scoped(collector, path)?;
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        return Ok(format!("{shown} is empty.\n"));
    }
    let end = end.min(lines.len());
    if start == 0 || start > end {
        return Ok(format!(
            "{shown} has {} lines; ask for start_line between 1 and {} and an end_line not before it.\n",
            lines.len(),
            lines.len()
        ));
    }
    let err = |e: git2::Error| GitError::git(&shown, &e);
    let repo = &found.repo;
    let committed = repo.blame_file(&scope, None).map_err(err)?;
    // The work tree's bytes as read through the sandbox (before redaction) are not kept, so the
    // blame runs on the redacted text: a redacted line shows as changed, which it is not worth
    // telling apart.
    let current = committed.blame_buffer(text.as_bytes()).map_err(err)?;
    let mut out = String::new();
    for n in start..=end {
        let who = match current.get_line(n) {
            Some(h) if !h.final_commit_id().is_zero() => {
                let id = h.final_commit_id().to_string();
                let (when, name) = match h.final_signature() {
                    Some(sig) => (
                        date(sig.when().seconds()),
                        sig.name().unwrap_or("?").to_string(),
                    ),
                    None => ("?".into(), "?".into()),
                };
                format!("{} {when} {name}", &id[..id.len().min(10)])
            }
            _ => "(not committed)".to_string(),
        };
        out.push_str(&format!("{n:>5} {who} │ {}\n", lines[n - 1]));
    }
    Ok(crate::redact::redact(&out).0)
}

/// Whether `commit` changed anything under `scope` (the whole tree when empty) against its
/// first parent (or the empty tree for a root commit).
fn touches(
    repo: &git2::Repository,
    commit: &git2::Commit<'_>,
    scope: &Path,
) -> Result<bool, git2::Error> {
    let tree = commit.tree()?;
    let parent = match commit.parent(0) {
        Ok(p) => Some(p.tree()?),
        Err(_) => None,
    };
    let mut opts = scoped(scope);
    let diff = repo.diff_tree_to_tree(parent.as_ref(), Some(&tree), Some(&mut opts))?;
    Ok(diff.deltas().len() > 0)
}

/// Diff options limited to `scope` (the whole tree when empty), taken literally: a root named
/// `a*p` must not match its sibling `abp`.
fn scoped(scope: &Path) -> DiffOptions {
    let mut opts = DiffOptions::new();
    if !scope.as_os_str().is_empty() {
        opts.pathspec(scope).disable_pathspec_match(true);
    }
    opts
}

/// `YYYY-MM-DD` (UTC) of a Unix time.
pub fn date(seconds: i64) -> String {
    // Days to a civil date (Howard Hinnant's algorithm).
    let z = seconds.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_civil_utc() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(1_763_942_400), "2025-11-24");
        assert_eq!(date(951_782_400), "2000-02-29");
    }
}

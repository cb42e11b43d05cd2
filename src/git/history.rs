//! History for an investigation: the commits that touched a path, newest first. The repository
//! is found and checked by [`discover`](super::discover) exactly as for precommit (the guard runs
//! before libgit2 opens it); what is returned is redacted like any text sent.

use std::path::Path;

use git2::{DiffOptions, Sort};

use super::GitError;
use super::discover;
use crate::collector::Collector;

/// Commits looked at, at most, to find those that touched the path.
const SCAN_CAP: usize = 5_000;

/// The commits that touched `path` (a file or directory inside the roots), newest first, at
/// most `max`: one line each, `short-id date author: subject`, redacted.
pub fn log(collector: &Collector, path: &str, max: usize) -> Result<String, GitError> {
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
    let shown = sandbox.display(&target);
    let err = |e: git2::Error| GitError::git(&shown, &e);
    let scope = target
        .as_path()
        .strip_prefix(&found.workdir)
        .unwrap_or(Path::new(""))
        .to_path_buf();
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
    let mut opts = DiffOptions::new();
    if !scope.as_os_str().is_empty() {
        opts.pathspec(scope);
    }
    let diff = repo.diff_tree_to_tree(parent.as_ref(), Some(&tree), Some(&mut opts))?;
    Ok(diff.deltas().len() > 0)
}

/// `YYYY-MM-DD` (UTC) of a Unix time.
fn date(seconds: i64) -> String {
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

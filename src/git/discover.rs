//! Finding the repositories to review: the one containing the start directory (git's own
//! discovery, upwards), then nested ones below it down to `max_depth`.
//!
//! A nested repository is any directory with a `.git` entry, a directory or a file (submodules
//! and worktrees have a `.git` file), and the walk goes on inside it: repositories nest. The walk
//! uses the `ignore` crate, so folders ignored by `.gitignore`, `.ignore` or `.geminiignore`,
//! hidden folders and vendored folders (`node_modules`, `vendor`, `target`, ...) are not entered;
//! symlinks are not followed, so the walk never leaves the start directory.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use git2::{ErrorCode, Repository, RepositoryOpenFlags};

use super::error::GitError;
use super::guard::{self, Area, Refusal};
use crate::collector::ignores::Ignores;
use crate::collector::{Sandbox, SkipReason};

/// Folders holding other people's code or build output: never searched for repositories.
const VENDORED: &[&str] = &[
    "node_modules",
    "bower_components",
    "vendor",
    "third_party",
    "third-party",
    "target",
    "venv",
    "__pycache__",
    "dist",
    "build",
];

/// A repository to review.
pub(super) struct Found {
    pub repo: Repository,
    /// Canonical work tree.
    pub workdir: PathBuf,
    /// When the start directory lies below the work tree: its path relative to the work tree,
    /// so only changes under it are reviewed.
    pub scope: Option<String>,
}

/// A nested repository not reviewed, with why and how to include it.
pub(super) struct LeftOut {
    pub dir: PathBuf,
    pub reason: SkipReason,
    pub why: String,
}

/// What discovery found.
#[derive(Default)]
pub(super) struct Discovery {
    pub found: Vec<Found>,
    pub left_out: Vec<LeftOut>,
}

/// The containing repository first (if any), then nested ones in path order. Every repository
/// passes [`guard`] before libgit2 opens it: the containing one or the call is refused, a
/// nested one or it is left out (and listed).
pub(super) fn find(
    sandbox: &Sandbox,
    start: &Path,
    max_depth: usize,
) -> Result<Discovery, GitError> {
    let mut out = Discovery::default();
    let mut seen = HashSet::new();
    if let Some(f) = containing(sandbox, start)? {
        seen.insert(f.workdir.clone());
        out.found.push(f);
    }
    if max_depth == 0 {
        return Ok(out);
    }

    // Ignore files are read by `Ignores` (regular files inside the roots only); the crate reads
    // none.
    let ignores = Arc::new(Ignores::new(sandbox, start, true));
    let filter = ignores.clone();
    let vendored = Arc::new(std::sync::Mutex::new(Vec::new()));
    let met = vendored.clone();
    let walk = ignore::WalkBuilder::new(start)
        .max_depth(Some(max_depth))
        .follow_links(false)
        .hidden(true)
        .ignore(false)
        .git_ignore(false)
        .git_exclude(false)
        .git_global(false)
        .parents(false)
        .sort_by_file_name(OsStr::cmp)
        .filter_entry(move |e| {
            if e.depth() == 0 {
                return true;
            }
            if !e.file_type().is_some_and(|t| t.is_dir()) || filter.ignored(e.path(), true) {
                return false;
            }
            if VENDORED.iter().any(|v| e.file_name() == OsStr::new(v)) {
                if let Ok(mut m) = met.lock() {
                    m.push(e.path().to_path_buf());
                }
                return false;
            }
            filter.enter(e.path());
            true
        })
        .build();
    let area = Area {
        sandbox,
        upward: false,
    };
    for entry in walk {
        // An unreadable folder is not fatal: the repositories that can be read are reviewed.
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        let dir = entry.path();
        if std::fs::symlink_metadata(dir.join(".git")).is_err() {
            continue;
        }
        match nested(&area, dir) {
            Ok(Some(f)) => {
                if seen.insert(f.workdir.clone()) {
                    out.found.push(f);
                }
            }
            Ok(None) => {}
            Err(r) => out.left_out.push(LeftOut {
                dir: dir.to_path_buf(),
                reason: if r.outside {
                    SkipReason::OutsideRoot
                } else {
                    SkipReason::NotRegular
                },
                why: r.message,
            }),
        }
    }
    let vendored = vendored.lock().map(|v| v.clone()).unwrap_or_default();
    for v in vendored {
        out.left_out.extend(vendored_repos(sandbox, &v));
    }
    Ok(out)
}

/// The repository containing `start`, found upward as git does (the first `.git` entry that
/// opens), checked before it is opened.
fn containing(sandbox: &Sandbox, start: &Path) -> Result<Option<Found>, GitError> {
    for dir in start.ancestors() {
        if std::fs::symlink_metadata(dir.join(".git")).is_err() {
            continue;
        }
        let area = Area {
            sandbox,
            upward: sandbox.check(dir).is_none(),
        };
        let refused = |r: Refusal| GitError::Unsafe {
            repo: dir.display().to_string(),
            message: r.message,
        };
        guard::check_git(&area, dir).map_err(refused)?;
        let repo = match open(dir) {
            Ok(r) => r,
            Err(e) if e.code() == ErrorCode::NotFound => continue,
            Err(e) => return Err(GitError::git(&dir.display().to_string(), &e)),
        };
        let Some(workdir) = repo.workdir().and_then(|w| std::fs::canonicalize(w).ok()) else {
            return Ok(None);
        };
        // Above the roots, only changes below the start are read: the work tree must hold it.
        if area.upward && !start.starts_with(&workdir) {
            return Err(refused(
                format!(
                    "its work tree is `{}` (core.worktree), which does not contain `{}`; unset core.worktree",
                    workdir.display(),
                    start.display()
                )
                .into(),
            ));
        }
        guard::check_workdir(&area, dir, &workdir).map_err(refused)?;
        let scope_dir = if start.starts_with(&workdir) {
            start
        } else {
            &workdir
        };
        guard::check_worktree(&area, &repo, &workdir, scope_dir).map_err(refused)?;
        let scope = start
            .strip_prefix(&workdir)
            .ok()
            .map(|rel| rel.to_string_lossy().replace('\\', "/"))
            .filter(|rel| !rel.is_empty());
        return Ok(Some(Found {
            repo,
            workdir,
            scope,
        }));
    }
    Ok(None)
}

/// A nested repository in `dir`, checked; `None` if `dir` holds none.
fn nested(area: &Area<'_>, dir: &Path) -> Result<Option<Found>, Refusal> {
    guard::check_git(area, dir)?;
    let repo = match open(dir) {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(dir = %dir.display(), error = %e.message(), "not a repository");
            return Ok(None);
        }
    };
    let Some(workdir) = repo.workdir().and_then(|w| std::fs::canonicalize(w).ok()) else {
        return Ok(None);
    };
    guard::check_workdir(area, dir, &workdir)?;
    guard::check_worktree(area, &repo, &workdir, &workdir)?;
    Ok(Some(Found {
        repo,
        workdir,
        scope: None,
    }))
}

fn open(dir: &Path) -> Result<Repository, git2::Error> {
    Repository::open_ext(
        dir,
        RepositoryOpenFlags::NO_SEARCH,
        std::iter::empty::<&OsStr>(),
    )
}

/// Repositories in a vendored folder (it, or a folder directly in it), listed as left out: the
/// folder is not searched, but a repository there is not passed over without a word.
fn vendored_repos(sandbox: &Sandbox, folder: &Path) -> Vec<LeftOut> {
    let mut dirs = vec![folder.to_path_buf()];
    if let Ok(entries) = std::fs::read_dir(folder) {
        let mut below: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        below.sort();
        dirs.extend(below);
    }
    let name = folder
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    dirs.into_iter()
        .filter(|d| std::fs::symlink_metadata(d.join(".git")).is_ok())
        .map(|dir| {
            let shown = sandbox.display_path(&dir);
            LeftOut {
                why: format!(
                    "nested repository `{shown}` was not reviewed: it is in a vendored folder (`{name}`), which is not searched. To review it, call precommit with `path: \"{shown}\"`."
                ),
                dir,
                reason: SkipReason::NotSearched,
            }
        })
        .collect()
}

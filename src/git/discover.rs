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

use git2::{ErrorCode, Repository, RepositoryOpenFlags};

use super::GitError;

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

/// The containing repository first (if any), then nested ones in path order.
pub(super) fn find(start: &Path, max_depth: usize) -> Result<Vec<Found>, GitError> {
    let mut found = Vec::new();
    let mut seen = HashSet::new();
    match Repository::discover(start) {
        Ok(repo) => {
            if let Some(workdir) = repo.workdir().and_then(|w| std::fs::canonicalize(w).ok()) {
                let scope = start
                    .strip_prefix(&workdir)
                    .ok()
                    .map(|rel| rel.to_string_lossy().replace('\\', "/"))
                    .filter(|rel| !rel.is_empty());
                seen.insert(workdir.clone());
                found.push(Found {
                    repo,
                    workdir,
                    scope,
                });
            }
        }
        Err(e) if e.code() == ErrorCode::NotFound => {}
        Err(e) => return Err(GitError::git(&start.display().to_string(), &e)),
    }
    if max_depth == 0 {
        return Ok(found);
    }

    let walk = ignore::WalkBuilder::new(start)
        .max_depth(Some(max_depth))
        .follow_links(false)
        .hidden(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .parents(true)
        .add_custom_ignore_filename(".geminiignore")
        .sort_by_file_name(OsStr::cmp)
        .filter_entry(|e| {
            e.file_type().is_some_and(|t| t.is_dir())
                && (e.depth() == 0 || !VENDORED.iter().any(|v| e.file_name() == OsStr::new(v)))
        })
        .build();
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
        let repo = match Repository::open_ext(
            dir,
            RepositoryOpenFlags::NO_SEARCH,
            std::iter::empty::<&OsStr>(),
        ) {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(dir = %dir.display(), error = %e.message(), "not a repository");
                continue;
            }
        };
        let Some(workdir) = repo.workdir().and_then(|w| std::fs::canonicalize(w).ok()) else {
            continue;
        };
        // A `.git` file pointing at another work tree must not pull that tree in.
        if !workdir.starts_with(start) || !seen.insert(workdir.clone()) {
            continue;
        }
        found.push(Found {
            repo,
            workdir,
            scope: None,
        });
    }
    Ok(found)
}

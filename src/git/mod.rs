//! The git diff reader for `precommit` (git2, no shelling out): finds the repositories under a
//! path, reads their staged, unstaged and untracked changes (or everything since a ref), and
//! renders them for review under a token budget. Synchronous: called through `spawn_blocking`.
//!
//! Three steps, one module each:
//! - [`discover`]: the repository containing `path` and the nested ones below it (down to
//!   `max_depth`, skipping ignored, hidden and vendored folders). Each is reviewed with its own
//!   relative paths; when `path` is a subdirectory of a repository, only changes under it count
//!   (as `git diff -- <path>` would), which also keeps every read inside the sandbox.
//! - [`changes`]: one pass per repository with git2: HEAD → index (staged), index → work tree
//!   (unstaged, and untracked files as additions, .gitignore respected), or merge-base(`compare_to`,
//!   HEAD) → the pending state. Each changed file becomes a [`changes::FileChange`]: a unified
//!   diff, or only its name (binary, too large, a secret by name, a conflict).
//! - [`render`]: redaction, the token budget (source first, deleted files last), the text sent to
//!   Gemini, and every diff left out listed with its reason. Changed files' full content is added
//!   as context while the budget allows.
//!
//! Files whose names look like secrets (the collector's built-in names and `GEMINI_MCP_SECRET_FILES`) are never read: their
//! content does not leave the machine, and they are named in [`DiffContext::secret_files`] and in
//! the text, since committing one is a finding in itself.

mod at_ref;
mod changes;
mod context;
mod diff_text;
mod discover;
mod error;
mod guard;
mod history;
mod request;

pub use at_ref::rules_file_at;
pub use context::{ChangedFile, DiffContext, SentBlock};
pub use error::GitError;
pub use history::{blame, date, diff, log};
pub use request::DiffRequest;
#[cfg(test)]
mod tests;

use crate::collector::{Collector, SkipReason, Skipped};

/// Finds the repositories and renders their changes for review.
pub fn read_changes(collector: &Collector, req: &DiffRequest) -> Result<DiffContext, GitError> {
    let sandbox = collector.sandbox();
    let start = sandbox.resolve(&req.path)?;
    let start_dir = if start.as_path().is_dir() {
        start.as_path().to_path_buf()
    } else {
        match start.as_path().parent() {
            Some(p) => p.to_path_buf(),
            None => start.as_path().to_path_buf(),
        }
    };
    let discovery = discover::find(sandbox, &start_dir, req.max_depth)?;
    let found = discovery.found;
    if found.is_empty() {
        if let Some(l) = discovery
            .left_out
            .into_iter()
            .find(|l| l.reason != SkipReason::NotSearched)
        {
            return Err(GitError::Unsafe {
                repo: l.dir.display().to_string(),
                message: l.why,
            });
        }
        return Err(GitError::NotARepository {
            path: req.path.clone(),
            max_depth: req.max_depth,
        });
    }
    let multi = found.len() > 1;
    let mut repos = Vec::with_capacity(found.len());
    for f in &found {
        let display = match sandbox.check(&f.workdir) {
            Some(p) => sandbox.display(&p),
            None => f.workdir.display().to_string(),
        };
        repos.push(diff_text::RepoView {
            prefix: if multi && display != "." {
                format!("{display}/")
            } else {
                String::new()
            },
            display,
            ..diff_text::RepoView::default()
        });
    }

    // compare_to must name something in at least one repository; where it names nothing, that
    // repository's uncommitted work is reviewed instead, and the text says so.
    let mut files = Vec::new();
    let mut bad_refs = Vec::new();
    let mut diffs = Vec::with_capacity(found.len());
    for (i, f) in found.iter().enumerate() {
        let c = changes::read(collector, f, &repos[i].display, &repos[i].prefix, req)?;
        repos[i].head = c.head;
        repos[i].sections = c.sections;
        repos[i].notes = c.notes;
        diffs.push(c.diffs);
        bad_refs.extend(c.bad_ref);
        files.extend(c.files.into_iter().map(|mut fc| {
            fc.repo = i;
            fc
        }));
    }
    if bad_refs.len() == found.len()
        && let Some(e) = bad_refs.into_iter().next()
    {
        return Err(e);
    }
    // Nested repositories left out are named in the text and listed as skipped.
    for l in &discovery.left_out {
        let note = match l.reason {
            SkipReason::NotSearched => l.why.clone(),
            _ => format!(
                "nested repository `{}` was not reviewed: {}",
                sandbox.display_path(&l.dir),
                l.why
            ),
        };
        repos[0].notes.push(note);
    }
    // Patches are built as the budget reaches them, never for the files past it.
    let patches = diff_text::Patches {
        build: &|f: &mut changes::FileChange| {
            changes::build(&diffs[f.repo], f).map_err(|e| GitError::git(&repos[f.repo].display, &e))
        },
        bound: &|f: &changes::FileChange| changes::size_bound(&diffs[f.repo], f),
    };
    let mut ctx = diff_text::render(sandbox, &found, &repos, files, req.budget, &patches)?;
    ctx.skipped
        .extend(discovery.left_out.iter().map(|l| Skipped {
            path: sandbox.display_path(&l.dir),
            reason: l.reason,
        }));
    Ok(ctx)
}

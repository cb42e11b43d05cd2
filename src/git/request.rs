//! What precommit asks the reader for: the directory, which changes, the ref to compare to, how
//! deep to look for nested repositories, the budget, and the index to read.

use std::path::PathBuf;

/// What to read.
#[derive(Debug, Clone, Default)]
pub struct DiffRequest {
    /// The directory to review (a user-given path; resolved through the sandbox).
    pub path: String,
    pub include_staged: bool,
    pub include_unstaged: bool,
    pub include_untracked: bool,
    /// Review everything since this ref (branch, tag or commit; merge-base against HEAD).
    pub compare_to: Option<String>,
    /// How deep to look for nested repositories below `path`.
    pub max_depth: usize,
    /// Token budget for the rendered diff.
    pub budget: u64,
    /// The index to read instead of `.git/index` for the repository whose git directory holds
    /// it: a pre-commit hook passes `$GIT_INDEX_FILE`, which `git commit -a` and
    /// `git commit <paths>` point at a temporary index holding what is about to be committed.
    pub index_file: Option<PathBuf>,
    /// A team's `ignore_patterns` (`crate::rules`): a change they match is listed, never read.
    pub ignore: Option<std::sync::Arc<crate::rules::Ignore>>,
}

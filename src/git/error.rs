//! Why the changes or the history could not be read: the sandbox refused the path, no repository,
//! a bad `compare_to`, a git error, or a repository whose metadata is not safe to read.

#[derive(Debug, Clone, thiserror::Error)]
pub enum GitError {
    #[error(transparent)]
    Sandbox(#[from] crate::collector::SandboxError),
    #[error(
        "{path} is not inside a git repository and has none below it (max_depth {max_depth}). Point `path` at a repository."
    )]
    NotARepository { path: String, max_depth: usize },
    #[error("compare_to `{reference}` is not a branch, tag or commit in {repo}: {message}")]
    BadRef {
        reference: String,
        repo: String,
        message: String,
    },
    #[error("git error in {repo}: {message}")]
    Git { repo: String, message: String },
    /// The repository's metadata leads outside the roots, or a file git would read is not a
    /// regular file.
    #[error("the repository at {repo} is not reviewed: {message}")]
    Unsafe { repo: String, message: String },
}

impl GitError {
    pub(super) fn git(repo: &str, e: &git2::Error) -> GitError {
        GitError::Git {
            repo: repo.to_string(),
            message: e.message().to_string(),
        }
    }
}

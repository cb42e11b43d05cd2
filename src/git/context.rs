//! What the reader returns: the rendered changes ([`DiffContext`]), the changed files as listed
//! in the reply, and each file's block as sent.

use serde::{Deserialize, Serialize};

use crate::collector::Skipped;

/// One file's block of the diff text as sent: its path as shown, the SHA-256 (hex), size and
/// tokens of the block after redaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentBlock {
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
    pub tokens: u64,
}

impl SentBlock {
    pub(super) fn of(path: String, text: &str, tokens: u64) -> SentBlock {
        use sha2::Digest;
        SentBlock {
            path,
            sha256: hex::encode(sha2::Sha256::digest(text.as_bytes())),
            bytes: text.len() as u64,
            tokens,
        }
    }
}

/// A changed file, as listed in the reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedFile {
    /// Repository (as shown) the file belongs to.
    pub repo: String,
    /// Path relative to its repository.
    pub path: String,
    /// added, modified, deleted, renamed, copied, untracked, mode_changed, submodule,
    /// type_changed, conflicted.
    pub status: String,
    /// The path before a rename or copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
}

/// The rendered changes, ready for the prompt.
#[derive(Debug, Clone, Default)]
pub struct DiffContext {
    /// The diff text for Gemini: per repository, per file, redacted and budgeted.
    pub text: String,
    pub tokens: u64,
    pub changed: Vec<ChangedFile>,
    /// Diffs left out, with why.
    pub skipped: Vec<Skipped>,
    /// Secret-looking values replaced, per rule.
    pub redactions: crate::redact::Counts,
    /// Each file's diff (and full content, for context) as sent, in the order sent.
    pub sent: Vec<SentBlock>,
    /// Where each diff's lines (and each full content's numbered lines) are in `text`: what the
    /// findings are checked against, never the markers in the text.
    pub frames: Vec<crate::collector::render::Frame>,
    /// Changed files that look like secrets by name (a finding in itself).
    pub secret_files: Vec<String>,
    /// Repositories found.
    pub repos: Vec<String>,
    /// Changed files whose full content was added as context (paths as shown), with tokens.
    pub context_files: Vec<(String, u64)>,
}

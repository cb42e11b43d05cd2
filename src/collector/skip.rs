//! Why a file was left out ([`SkipReason`]), and a file left out with why ([`Skipped`]).

use serde::{Deserialize, Serialize};

/// Why a file was left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// The token budget was full.
    OverBudget,
    /// Not text (a NUL byte in the first 8 KiB).
    Binary,
    /// Over the per-file size cap.
    TooLarge,
    /// A secret by its name (`.env`, keys, credentials).
    Secret,
    /// Excluded by .gitignore, .geminiignore or configured patterns.
    Ignored,
    /// Resolves outside the project roots (e.g. a symlink met while walking).
    OutsideRoot,
    /// A FIFO, socket or device.
    NotRegular,
    /// Missing, vanished while reading, or unreadable.
    Unreadable,
    /// Sent earlier in this thread and unchanged since.
    AlreadySent,
    /// Not a supported image type, or over the image size cap.
    UnsupportedImage,
    /// Changed while being read (size, time or inode moved, or a symlink appeared in its path).
    Changed,
    /// A nested repository in a vendored folder, which is not searched.
    NotSearched,
}

impl SkipReason {
    pub fn describe(self) -> &'static str {
        match self {
            SkipReason::OverBudget => "over the token budget",
            SkipReason::Binary => "binary",
            SkipReason::TooLarge => "too large",
            SkipReason::Secret => "looks like a secret",
            SkipReason::Ignored => "ignored",
            SkipReason::OutsideRoot => "outside the project root",
            SkipReason::NotRegular => "not a regular file",
            SkipReason::Unreadable => "unreadable",
            SkipReason::AlreadySent => "already sent in this thread, unchanged",
            SkipReason::UnsupportedImage => "unsupported image",
            SkipReason::Changed => "changed while being read",
            SkipReason::NotSearched => {
                "in a vendored folder, not searched; pass its path to review it"
            }
        }
    }
}

/// A file left out, with why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// The path as shown to the user.
    pub path: String,
    /// Why it was left out.
    pub reason: SkipReason,
}

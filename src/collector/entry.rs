//! What is sent: a file's block with its hash, size and tokens ([`FileEntry`]), and an image sent
//! inline ([`ImageEntry`]).

use std::path::PathBuf;
use std::sync::Arc;

use super::render;

/// A file that will be sent.
#[derive(Debug, Clone)]
pub struct FileEntry {
    /// Canonical absolute path (the identity used for de-duplication across a thread).
    pub path: PathBuf,
    /// The path as shown to Gemini and the user.
    pub display: String,
    /// Hex SHA-256 of the file's bytes as read.
    pub hash: String,
    /// The file's size in bytes as read.
    pub bytes: u64,
    /// Calibrated token count of `text`.
    pub tokens: u64,
    /// The block sent to Gemini: a path header and numbered lines.
    pub text: String,
    /// Where the numbered lines are in `text`: what the verify step reads them from.
    pub frame: render::Frame,
    /// Invalid UTF-8 was replaced.
    pub lossy: bool,
    /// Secret-looking values replaced in this file, per rule.
    pub redactions: crate::redact::Counts,
}

/// An image to send inline.
#[derive(Debug, Clone)]
pub struct ImageEntry {
    /// Its input as budgeted and estimated ([`super::images::inline_tokens`]), counted once.
    pub tokens: u64,
    pub path: PathBuf,
    pub display: String,
    pub mime: String,
    pub data: Arc<Vec<u8>>,
}

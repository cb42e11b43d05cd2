//! Reading one file through the sandbox: the opened file must be a regular file under the size
//! cap, not binary (no NUL byte in its first 8 KiB), and unchanged while it was read (same
//! inode, size and modification time before and after, and exactly that many bytes read).
//! Invalid UTF-8 is replaced, and said so.

use std::io::Read as _;
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use super::sandbox::{self, SandboxedPath};

/// Files larger than this are never read.
pub const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
/// A NUL byte in this many first bytes makes a file binary.
pub const BINARY_SNIFF: usize = 8 * 1024;

/// A file read as text.
#[derive(Debug)]
pub struct Text {
    pub text: String,
    /// Invalid UTF-8 was replaced with U+FFFD.
    pub lossy: bool,
    /// Hex SHA-256 of the bytes read.
    pub hash: String,
}

/// Why a file could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unread {
    #[error("binary (a NUL byte in its first 8 KiB)")]
    Binary,
    #[error("over the size cap")]
    TooLarge,
    #[error("not a regular file")]
    NotRegular,
    /// Missing (deleted since it was listed) or not readable.
    #[error("missing or unreadable")]
    Unreadable,
    /// Changed while being read (or a symlink appeared in its path).
    #[error("changed while being read")]
    Changed,
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct Stamp {
    /// Device and inode (Unix), volume and file index (Windows).
    id: (u64, u64),
    len: u64,
    modified: Option<SystemTime>,
    /// How many names (hard links) the file has.
    links: u64,
}

fn stamp(file: &std::fs::File, m: &std::fs::Metadata) -> Result<Stamp, Unread> {
    #[cfg(unix)]
    let (id, links) = {
        use std::os::unix::fs::MetadataExt;
        let _ = file;
        ((m.dev(), m.ino()), m.nlink())
    };
    // The file index and link count are not in stable std's metadata on Windows: asked of the
    // handle.
    #[cfg(windows)]
    let (id, links) = super::handle::identity(file).map_err(|_| Unread::Unreadable)?;
    Ok(Stamp {
        id,
        len: m.len(),
        modified: m.modified().ok(),
        links,
    })
}

/// An opened regular file under the size cap, not yet read.
pub struct Opened {
    file: std::fs::File,
    before: Stamp,
}

impl Opened {
    /// Its size when opened.
    pub fn len(&self) -> u64 {
        self.before.len
    }

    /// How many names (hard links) it had when opened.
    pub fn links(&self) -> u64 {
        self.before.links
    }

    /// Reads it as text.
    pub fn read_text(self) -> Result<Text, Unread> {
        self.read_text_with(|| {})
    }

    /// [`Opened::read_text`] with a hook run after the bytes are read and before the file is
    /// checked for changes (tests use it to change the file at exactly that moment).
    pub(crate) fn read_text_with(self, after_read: impl FnOnce()) -> Result<Text, Unread> {
        let bytes = self.read_bytes(MAX_FILE_BYTES, true, after_read)?;
        let hash = hex::encode(Sha256::digest(&bytes));
        let (text, lossy) = match String::from_utf8(bytes) {
            Ok(s) => (s, false),
            Err(e) => (String::from_utf8_lossy(e.as_bytes()).into_owned(), true),
        };
        Ok(Text { text, lossy, hash })
    }

    /// Reads it whole (at most `max` bytes), checking that it did not change meanwhile. With
    /// `sniff`, a NUL byte in the first [`BINARY_SNIFF`] bytes stops the read as binary.
    pub(crate) fn read_bytes(
        mut self,
        max: u64,
        sniff: bool,
        after_read: impl FnOnce(),
    ) -> Result<Vec<u8>, Unread> {
        let before = self.before;
        if before.len > max {
            return Err(Unread::TooLarge);
        }
        // One more byte than expected, to notice a file that grew; never more than the cap + 1.
        let mut bytes = Vec::with_capacity(usize::try_from(before.len + 1).unwrap_or(0));
        let mut reader = (&mut self.file).take(max + 1);
        if sniff {
            let first = before.len.min(BINARY_SNIFF as u64);
            (&mut reader)
                .take(first)
                .read_to_end(&mut bytes)
                .map_err(|_| Unread::Unreadable)?;
            if memchr::memchr(0, &bytes).is_some() {
                return Err(Unread::Binary);
            }
        }
        reader
            .read_to_end(&mut bytes)
            .map_err(|_| Unread::Unreadable)?;
        if bytes.len() as u64 > max {
            return Err(Unread::TooLarge);
        }
        after_read();
        let after = self.file.metadata().map_err(|_| Unread::Unreadable)?;
        if stamp(&self.file, &after)? != before || bytes.len() as u64 != before.len {
            return Err(Unread::Changed);
        }
        Ok(bytes)
    }
}

/// What an error of [`sandbox::open`] means for the file.
#[cfg(unix)]
fn opening_failed(e: &std::io::Error) -> Unread {
    match e.raw_os_error() {
        // A symlink where the canonical path had none: the path changed under us.
        Some(code) if code == rustix::io::Errno::LOOP.raw_os_error() => Unread::Changed,
        Some(code) if code == rustix::io::Errno::NXIO.raw_os_error() => Unread::NotRegular,
        _ => Unread::Unreadable,
    }
}

#[cfg(windows)]
fn opening_failed(e: &std::io::Error) -> Unread {
    use super::handle::{NOT_A_DISK_FILE, NOT_THE_CHECKED_PATH};
    match e.raw_os_error() {
        // A reparse point where the canonical path had none: the path changed under us.
        Some(NOT_THE_CHECKED_PATH) => Unread::Changed,
        Some(NOT_A_DISK_FILE) => Unread::NotRegular,
        _ => Unread::Unreadable,
    }
}

/// Opens `p`: it must (still) be a regular file of at most `max` bytes. Nothing is read yet.
pub fn open(p: &SandboxedPath, max: u64) -> Result<Opened, Unread> {
    let file = sandbox::open(p).map_err(|e| opening_failed(&e))?;
    let meta = file.metadata().map_err(|_| Unread::Unreadable)?;
    if !meta.file_type().is_file() {
        return Err(Unread::NotRegular);
    }
    if meta.len() > max {
        return Err(Unread::TooLarge);
    }
    let before = stamp(&file, &meta)?;
    Ok(Opened { file, before })
}

/// How many lines `p` has (a last line without a newline counts): to check a line number
/// someone cites. Files that cannot be read as text have none.
pub fn line_count(p: &SandboxedPath) -> Result<u64, Unread> {
    let t = open(p, MAX_FILE_BYTES)?.read_text()?.text;
    let breaks = memchr::memchr_iter(b'\n', t.as_bytes()).count() as u64;
    Ok(breaks + u64::from(!t.is_empty() && !t.ends_with('\n')))
}

/// Opens and reads `p` as text.
#[cfg(test)]
pub fn read_text(p: &SandboxedPath) -> Result<Text, Unread> {
    open(p, MAX_FILE_BYTES)?.read_text()
}

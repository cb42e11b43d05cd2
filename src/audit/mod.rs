//! The audit log (`GEMINI_MCP_AUDIT_LOG`): one JSON line per tool call that reached the
//! pipeline, written by its last step — who called, in which project, which tool and model, the
//! files sent (path as shown, SHA-256, size, tokens), the redactions per rule, the hashes of the
//! requests as sent, the usage, the cost and the outcome. Hashes, counts and costs only: never
//! file contents, prompts, answers or secret values (SECURITY.md § The audit log).
//!
//! A sink beside the thread store, owned by the app. Many processes and instances may write one
//! file: each line is appended by one `write` on a descriptor opened with `O_APPEND`
//! (`FILE_APPEND_DATA` on Windows), under an exclusive lock on `<log>.lock` (`flock`;
//! `LockFileEx` on Windows) that also covers rotation. Under the lock a writer that finds the file
//! not ending in a line break (a writer killed mid-line) starts its own line on a fresh one, so a
//! torn line stays alone and the reader skips it ([`summary`]).
//!
//! The log, its lock and its rotated files are regular files of the owner: created `0600` (on
//! Windows a new file takes its directory's ACL: std's `OpenOptions` takes no security
//! descriptor, so the directory decides who reads it), and a symbolic link, a FIFO or a device
//! in their place is refused, never written through or read (`O_NOFOLLOW`, `O_NONBLOCK`, then
//! `fstat`: [`crate::setting_file`]), the error naming `GEMINI_MCP_AUDIT_LOG`.

mod lock;
mod owned;
pub mod summary;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::redact::Counts;
use owned::open_owned;

/// Rotated files kept beside the log: `<log>.1` (the newest) to `<log>.3`.
pub const KEEP: u32 = 3;

/// Where the log is and when it rotates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub path: PathBuf,
    /// The log is renamed to `<log>.1` before a line would take it past this size.
    pub max_bytes: u64,
}

/// One call, as the log keeps it. The field order is the line's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// When the call ended, RFC 3339 in UTC with milliseconds (`2026-11-27T08:27:01.123Z`).
    pub time: String,
    /// Who called: `token#N` (the N-th token of `GEMINI_MCP_HTTP_TOKEN`), `peer:<ip>` over HTTP
    /// without tokens, `stdio`, or `cli`.
    pub client: String,
    /// The project: its roots, canonical.
    pub project: Vec<String>,
    pub tool: String,
    /// The model that answered, else the one asked for (none when the call ended before).
    pub model: Option<String>,
    /// The thread the call's turn belongs to.
    pub thread: Option<String>,
    /// What was sent besides the call's own text.
    pub files: Vec<FileRecord>,
    /// Files an investigation read (paths as shown); their contents went in its requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// Values replaced before anything left, per rule (files, diff and the call's text).
    pub redactions: Counts,
    /// Hex SHA-256 of each request body as sent to the Gemini API and answered, in order.
    pub requests: Vec<String>,
    /// Summed over the requests answered.
    pub usage: Usage,
    /// Estimated, at the price list of the day; `None` for a model without a known price.
    pub cost_usd: Option<f64>,
    /// `ok`, or `error`.
    pub outcome: String,
    /// The kind of error (`gemini_timeout`, `spending_cap`, `abandoned`…), never its message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One file sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    /// The path as shown to Gemini (control characters escaped, secret-looking parts redacted).
    pub path: String,
    pub kind: FileKind,
    /// Hex SHA-256: of the file's bytes as read (`file`, `image`); of the diff block as sent,
    /// after redaction (`diff`).
    pub sha256: String,
    pub bytes: u64,
    pub tokens: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    File,
    Diff,
    Image,
    /// A PDF sent inline (`files` on chat, analyze, thinkdeep).
    Document,
}

/// Tokens, as Gemini reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub thinking: u64,
    pub cached: u64,
}

/// The log could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the audit log {path} (GEMINI_MCP_AUDIT_LOG): {source}")]
pub struct AuditError {
    path: String,
    source: std::io::Error,
}

/// The audit log of one process.
pub struct AuditLog {
    settings: Settings,
    /// Orders this process's writers (the file lock orders processes).
    local: Mutex<()>,
}

impl AuditLog {
    pub fn new(settings: Settings) -> AuditLog {
        AuditLog {
            settings,
            local: Mutex::new(()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.settings.path
    }

    /// Appends `record` as one line. Blocking: call it off the runtime.
    pub fn append(&self, record: &Record) -> Result<(), AuditError> {
        let line = serde_json::to_vec(record).map_err(|e| self.error(e.into()))?;
        self.append_line(&line)
    }

    /// Appends `line` (one JSON document, no line break in it) and a line break with one
    /// `write`, under the lock, rotating first when the line would take the log past its size.
    pub fn append_line(&self, line: &[u8]) -> Result<(), AuditError> {
        let _local = self.local.lock().unwrap_or_else(|p| p.into_inner());
        let _lock =
            lock::Exclusive::take(&lock_path(&self.settings.path)).map_err(|e| self.error(e))?;
        let mut file = open(&self.settings.path).map_err(|e| self.error(e))?;
        let mut size = file.metadata().map_err(|e| self.error(e))?.len();
        let room = line.len() as u64 + 2;
        if size > 0 && size + room > self.settings.max_bytes {
            drop(file);
            rotate(&self.settings.path).map_err(|e| self.error(e))?;
            file = open(&self.settings.path).map_err(|e| self.error(e))?;
            size = 0;
        }
        let mut buf = Vec::with_capacity(line.len() + 2);
        if size > 0 && last_byte(&file, size).map_err(|e| self.error(e))? != b'\n' {
            buf.push(b'\n');
        }
        buf.extend_from_slice(line);
        buf.push(b'\n');
        // One write of the whole line; a short one (a full disk) is finished, never retried
        // from the start.
        let n = file.write(&buf).map_err(|e| self.error(e))?;
        if n < buf.len() {
            file.write_all(&buf[n..]).map_err(|e| self.error(e))?;
        }
        file.flush().map_err(|e| self.error(e))
    }

    fn error(&self, source: std::io::Error) -> AuditError {
        AuditError {
            path: self.settings.path.display().to_string(),
            source,
        }
    }
}

/// What is wrong with `path` as the log's (`GEMINI_MCP_AUDIT_LOG`), checked at start: a
/// directory, a symbolic link or a special file, or a directory that does not exist.
pub fn check_path(path: &Path) -> Result<(), &'static str> {
    if path.is_dir() {
        return Err("names a directory; name the log file");
    }
    if path.symlink_metadata().is_ok_and(|m| !m.is_file()) {
        return Err(
            "names a symbolic link or a special file; name a regular file (the log is never \
             written through a link)",
        );
    }
    if path.parent().is_some_and(|d| !d.is_dir()) {
        return Err("is in a directory that does not exist; create it");
    }
    Ok(())
}

/// The lock file beside the log (never rotated, so every writer locks the same file).
fn lock_path(log: &Path) -> PathBuf {
    with_suffix(log, ".lock")
}

/// `<log><suffix>`.
fn with_suffix(log: &Path, suffix: &str) -> PathBuf {
    let mut name = log.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The rotated file `n` (1 = the newest).
pub fn rotated(log: &Path, n: u32) -> PathBuf {
    with_suffix(log, &format!(".{n}"))
}

fn open(path: &Path) -> std::io::Result<File> {
    open_owned(
        OpenOptions::new().read(true).append(true).create(true),
        path,
    )
}

/// `<log>.2` → `<log>.3`, `<log>.1` → `<log>.2`, `<log>` → `<log>.1` (the oldest dropped).
fn rotate(log: &Path) -> std::io::Result<()> {
    for n in (1..KEEP).rev() {
        match std::fs::rename(rotated(log, n), rotated(log, n + 1)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    std::fs::rename(log, rotated(log, 1))
}

/// The byte at `size - 1`.
fn last_byte(file: &File, size: u64) -> std::io::Result<u8> {
    let mut b = [0u8; 1];
    #[cfg(unix)]
    std::os::unix::fs::FileExt::read_exact_at(file, &mut b, size - 1)?;
    #[cfg(windows)]
    {
        let n = std::os::windows::fs::FileExt::seek_read(file, &mut b, size - 1)?;
        if n != 1 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(b[0])
}

/// `time` as RFC 3339 in UTC, to the millisecond.
pub fn rfc3339(time: SystemTime) -> String {
    let since = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs() as i64;
    let of_day = secs.rem_euclid(86_400);
    format!(
        "{}T{:02}:{:02}:{:02}.{:03}Z",
        crate::git::date(secs),
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
        since.subsec_millis()
    )
}

#[cfg(test)]
mod tests;

//! Files a setting names: opened only when they are regular files, and read up to a bound.
//!
//! `GEMINI_MCP_CONFIG`, the token files (`GEMINI_MCP_HTTP_TOKEN_FILE`,
//! `GEMINI_MCP_METRICS_TOKEN_FILE`), `GEMINI_MCP_REDIS_CA_FILE` and the credentials file `doctor`
//! looks into are read whole at start; the audit log and its rotated files
//! (`GEMINI_MCP_AUDIT_LOG`) are read back by `audit summary`. A path may name anything: a FIFO,
//! whose open waits for a writer forever; a device (`/dev/zero` never ends); a directory; a file
//! of gigabytes. So [`open_regular`] opens without blocking (`O_NONBLOCK`, which changes nothing
//! for a regular file) and checks what it opened on the open descriptor (`fstat`: nothing can be
//! swapped in between the check and the read), and [`read`] reads at most [`MAX_BYTES`]. The
//! errors name the setting, the path and what is wrong, never what the file holds.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// The most read from a file a setting names whole (a config file, a token list, a CA bundle
/// are a few kilobytes).
pub const MAX_BYTES: u64 = 1 << 20;

/// Whether a symbolic link in place of the file is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    Follow,
    /// Refused (`O_NOFOLLOW`; on Windows a reparse point is opened as itself and refused).
    Refuse,
}

/// A file a setting names could not be read: `<setting>: cannot read <path>: <why>`.
#[derive(Debug, thiserror::Error)]
#[error("{setting}: cannot read {}: {why}", path.display())]
pub struct FileError {
    pub setting: &'static str,
    pub path: PathBuf,
    pub why: io::Error,
}

/// Opens `path` for reading if it is a regular file; otherwise an error saying what it is (a
/// FIFO, a device, a directory, a symbolic link when `link` refuses them). Never blocks on the
/// open.
pub fn open_regular(path: &Path, link: Link) -> io::Result<File> {
    open_checked(std::fs::OpenOptions::new().read(true), path, link)
}

/// Opens `path` with `options` (for writing, too: the audit log) as [`open_regular`] does:
/// without blocking, the link followed or refused, and only when it is a regular file. Sets
/// the options' custom flags.
pub fn open_checked(
    options: &mut std::fs::OpenOptions,
    path: &Path,
    link: Link,
) -> io::Result<File> {
    let file = open_nonblocking(options, path, link).map_err(|e| explain_open(path, link, e))?;
    let meta = file.metadata()?;
    if is_reparse_point(&meta) && link == Link::Refuse {
        return Err(not_regular(
            "it is a symbolic link (or another reparse point), not followed",
        ));
    }
    if !meta.file_type().is_file() {
        return Err(not_regular(&format!(
            "it is {}, not a regular file",
            kind(&meta.file_type())
        )));
    }
    Ok(file)
}

/// The bytes of the regular file at `path` (symbolic links followed), at most [`MAX_BYTES`];
/// the error names `setting`.
pub fn read(setting: &'static str, path: &Path) -> Result<Vec<u8>, FileError> {
    let fail = |why: io::Error| FileError {
        setting,
        path: path.to_owned(),
        why,
    };
    let file = open_regular(path, Link::Follow).map_err(fail)?;
    let len = file.metadata().map_err(fail)?.len();
    let mut bytes = Vec::with_capacity(len.min(MAX_BYTES) as usize);
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(fail)?;
    if len > MAX_BYTES || bytes.len() as u64 > MAX_BYTES {
        return Err(fail(too_large(len.max(bytes.len() as u64))));
    }
    Ok(bytes)
}

/// As [`read`], as UTF-8 text.
pub fn read_text(setting: &'static str, path: &Path) -> Result<String, FileError> {
    let bytes = read(setting, path)?;
    String::from_utf8(bytes).map_err(|_| FileError {
        setting,
        path: path.to_owned(),
        why: io::Error::new(io::ErrorKind::InvalidData, "it is not UTF-8 text"),
    })
}

fn not_regular(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why.to_string())
}

fn too_large(len: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "it holds {len} bytes or more, past the {} MiB read from such a file",
            MAX_BYTES >> 20
        ),
    )
}

/// An open that failed on a symbolic link refused says so (the OS says only "too many levels
/// of symbolic links").
fn explain_open(path: &Path, link: Link, e: io::Error) -> io::Error {
    let is_link = path
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink());
    if link == Link::Refuse && is_link && e.kind() != io::ErrorKind::NotFound {
        return not_regular("it is a symbolic link, not followed");
    }
    e
}

#[cfg(unix)]
fn open_nonblocking(
    options: &mut std::fs::OpenOptions,
    path: &Path,
    link: Link,
) -> io::Result<File> {
    use rustix::fs::OFlags;
    use std::os::unix::fs::OpenOptionsExt;
    let mut flags = OFlags::NONBLOCK;
    if link == Link::Refuse {
        flags |= OFlags::NOFOLLOW;
    }
    options.custom_flags(flags.bits() as i32).open(path)
}

#[cfg(windows)]
fn open_nonblocking(
    options: &mut std::fs::OpenOptions,
    path: &Path,
    link: Link,
) -> io::Result<File> {
    use std::os::windows::fs::OpenOptionsExt;
    use windows_sys::Win32::Storage::FileSystem::FILE_FLAG_OPEN_REPARSE_POINT;
    // Opening a file never waits for a writer on Windows; a named pipe's open fails at once
    // when no server instance is free.
    if link == Link::Refuse {
        options.custom_flags(FILE_FLAG_OPEN_REPARSE_POINT);
    }
    options.open(path)
}

#[cfg(windows)]
fn is_reparse_point(meta: &std::fs::Metadata) -> bool {
    use std::os::windows::fs::MetadataExt;
    use windows_sys::Win32::Storage::FileSystem::FILE_ATTRIBUTE_REPARSE_POINT;
    meta.file_attributes() & FILE_ATTRIBUTE_REPARSE_POINT != 0
}

#[cfg(unix)]
fn is_reparse_point(_: &std::fs::Metadata) -> bool {
    // `O_NOFOLLOW` refused the link at the open.
    false
}

/// What a file that is not a regular one is, for messages.
fn kind(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a named pipe (FIFO)";
        }
        if t.is_char_device() {
            return "a character device (such as /dev/zero)";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "a device or another special file"
    }
}

// Its cases are made with Unix tools (mkfifo); `hardening::setting_files` checks the same
// refusals through the binary.
#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// What each kind of path reads as: a regular file's bytes; for anything else an error that
    /// says what it is, each within a harness deadline (a FIFO must not block the open).
    #[test]
    fn only_regular_files_are_read_and_at_most_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let regular = dir.path().join("tokens");
        std::fs::write(&regular, "a\nb\n").unwrap();
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'a'; MAX_BYTES as usize + 1]).unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&regular, &link).unwrap();
        assert_eq!(read_text("S", &regular).unwrap(), "a\nb\n");
        assert_eq!(
            read_text("S", &link).unwrap(),
            "a\nb\n",
            "links are followed"
        );
        let cases: Vec<(PathBuf, &str)> = vec![
            ("/dev/zero".into(), "a character device"),
            (fifo, "a named pipe (FIFO)"),
            (dir.path().to_owned(), "a directory"),
            (big, "past the 1 MiB"),
            (dir.path().join("absent"), "No such file"),
        ];
        for (path, why) in cases {
            let (tx, rx) = std::sync::mpsc::channel();
            let p = path.clone();
            std::thread::spawn(move || tx.send(read("GEMINI_MCP_X", &p).map(|_| ())));
            let outcome = rx
                .recv_timeout(std::time::Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("{}: the read hung", path.display()));
            let e = outcome.expect_err(&path.display().to_string()).to_string();
            assert!(
                e.starts_with(&format!("GEMINI_MCP_X: cannot read {}: ", path.display()))
                    && e.contains(why),
                "{}: {e}",
                path.display()
            );
        }
        let e = open_regular(&link, Link::Refuse).unwrap_err().to_string();
        assert!(e.contains("symbolic link, not followed"), "{e}");
    }
}

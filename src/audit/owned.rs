//! The audit log's files opened for their owner only: created `0600`, and only a regular file,
//! never through a symbolic link (the log and its lock).

use std::fs::{File, OpenOptions};
use std::path::Path;

/// Opens the log or its lock with `options`: created for the owner only (`0600`), and only when
/// it is a regular file, not through a symbolic link.
pub(super) fn open_owned(options: &mut OpenOptions, path: &Path) -> std::io::Result<File> {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(options, 0o600);
    crate::setting_file::open_checked(options, path, crate::setting_file::Link::Refuse)
}

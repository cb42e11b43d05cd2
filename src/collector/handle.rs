//! Opening a file on Windows, proven on the handle: the sandbox's equivalent of Linux's
//! `openat2(RESOLVE_NO_SYMLINKS)`.
//!
//! The file is opened without following a reparse point in its last name
//! (`FILE_FLAG_OPEN_REPARSE_POINT`: a symbolic link, junction or mount point there is opened as
//! itself and refused), must be a file on a disk (`GetFileType`: not a console, a pipe or another
//! device), and the path its handle ends at (`GetFinalPathNameByHandleW`, the same normalised
//! form `std::fs::canonicalize` returns) must be exactly the checked path. A reparse point swapped
//! into any directory of the path after the check, an 8.3 or differently cased alias, a stream,
//! a hard-to-see redirection by the file system: each ends the handle somewhere else, and the
//! open fails. Under Wine, where a Unix symlink shows no reparse attribute, the final path still
//! names the link's target, so the same proof holds there.
//!
//! The handle is shared for reading, writing and deletion, so an editor holding the file is not
//! blocked by a read and the file can still be replaced while we read it (the reader notices:
//! [`file_id`] and the size and time are compared before and after).

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::windows::ffi::OsStringExt;
use std::os::windows::fs::OpenOptionsExt;
use std::os::windows::io::AsRawHandle;
use std::path::{Path, PathBuf};

use windows_sys::Win32::Storage::FileSystem::{
    BY_HANDLE_FILE_INFORMATION, FILE_ATTRIBUTE_REPARSE_POINT, FILE_FLAG_OPEN_REPARSE_POINT,
    FILE_NAME_NORMALIZED, FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE, FILE_TYPE_DISK,
    GetFileInformationByHandle, GetFileType, GetFinalPathNameByHandleW, VOLUME_NAME_DOS,
};

/// The error of an open whose handle did not end at the checked path (a reparse point in the
/// way): `ERROR_CANT_RESOLVE_FILENAME`.
pub const NOT_THE_CHECKED_PATH: i32 = 1921;
/// The error of an open that reached a device or pipe rather than a file on a disk:
/// `ERROR_BAD_FILE_TYPE`.
pub const NOT_A_DISK_FILE: i32 = 222;

/// Opens `path` (canonical: as [`final_path`] would name it) for reading, with the proof in the
/// module docs.
pub fn open_exact(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
        .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)?;
    // SAFETY: the handle is the open file's, valid while `file` lives.
    if unsafe { GetFileType(file.as_raw_handle()) } != FILE_TYPE_DISK {
        return Err(io::Error::from_raw_os_error(NOT_A_DISK_FILE));
    }
    if information(&file)?.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT != 0 {
        return Err(io::Error::from_raw_os_error(NOT_THE_CHECKED_PATH));
    }
    if final_path(&file)? != path {
        return Err(io::Error::from_raw_os_error(NOT_THE_CHECKED_PATH));
    }
    Ok(file)
}

/// The path the handle ends at, normalised, with its drive letter (`\\?\C:\...`).
pub fn final_path(file: &File) -> io::Result<PathBuf> {
    let mut buf = vec![0u16; 512];
    loop {
        let capacity = u32::try_from(buf.len()).unwrap_or(u32::MAX);
        // SAFETY: `buf` holds `capacity` u16s; the handle is valid while `file` lives.
        let n = unsafe {
            GetFinalPathNameByHandleW(
                file.as_raw_handle(),
                buf.as_mut_ptr(),
                capacity,
                FILE_NAME_NORMALIZED | VOLUME_NAME_DOS,
            )
        } as usize;
        if n == 0 {
            return Err(io::Error::last_os_error());
        }
        if n < buf.len() {
            return Ok(PathBuf::from(OsString::from_wide(&buf[..n])));
        }
        // Too small: `n` is the size needed, with its terminating NUL.
        buf.resize(n, 0);
    }
}

/// The file's identity (volume serial number and file index): what the inode and device are
/// on Unix, to notice a file replaced while it was read.
pub fn file_id(file: &File) -> io::Result<(u64, u64)> {
    identity(file).map(|(id, _)| id)
}

/// [`file_id`], and how many names (hard links) the file has.
pub fn identity(file: &File) -> io::Result<((u64, u64), u64)> {
    let info = information(file)?;
    let index = (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow);
    Ok((
        (u64::from(info.dwVolumeSerialNumber), index),
        u64::from(info.nNumberOfLinks),
    ))
}

fn information(file: &File) -> io::Result<BY_HANDLE_FILE_INFORMATION> {
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is writable; the handle is valid while `file` lives.
    if unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_opens_at_its_canonical_path_and_nowhere_else() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("Notes.txt"), "x").unwrap();
        let canonical = std::fs::canonicalize(root.join("notes.TXT")).unwrap();
        assert_eq!(canonical, root.join("Notes.txt"), "the name as stored");
        let file = open_exact(&canonical).unwrap();
        assert_eq!(final_path(&file).unwrap(), canonical);
        // Another spelling of the same file is not the checked path.
        let other = open_exact(&root.join("notes.TXT")).unwrap_err();
        assert_eq!(other.raw_os_error(), Some(NOT_THE_CHECKED_PATH));
        // A directory is not opened as a file.
        assert!(open_exact(&root).is_err());
        // Devices are not files on a disk.
        let nul = open_exact(Path::new("\\\\.\\NUL")).unwrap_err();
        assert_eq!(nul.raw_os_error(), Some(NOT_A_DISK_FILE));
    }

    #[test]
    fn the_identity_follows_the_file_not_the_name() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("a"), "x").unwrap();
        std::fs::write(root.join("b"), "x").unwrap();
        let a = open_exact(&root.join("a")).unwrap();
        let b = open_exact(&root.join("b")).unwrap();
        assert_eq!(file_id(&a).unwrap(), file_id(&a).unwrap());
        assert_ne!(file_id(&a).unwrap(), file_id(&b).unwrap());
    }
}

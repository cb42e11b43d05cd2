//! The audit log's lock across processes: an exclusive advisory lock on the lock file beside the
//! log (`flock` on Unix, `LockFileEx` on Windows), held while one line is written (and the log
//! rotated). Released when dropped (the descriptor closed).

use std::fs::{File, OpenOptions};
use std::path::Path;

/// An exclusive lock, held until dropped.
pub(super) struct Exclusive {
    file: File,
}

impl Exclusive {
    /// Waits for the lock on `path` (created when missing, for the owner only; a symbolic link
    /// or anything but a regular file in its place is refused, as for the log).
    pub(super) fn take(path: &Path) -> std::io::Result<Exclusive> {
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        let file = super::owned::open_owned(&mut options, path)?;
        lock(&file)?;
        Ok(Exclusive { file })
    }
}

#[cfg(unix)]
fn lock(file: &File) -> std::io::Result<()> {
    rustix::fs::flock(file, rustix::fs::FlockOperation::LockExclusive).map_err(Into::into)
}

#[cfg(unix)]
fn unlock(file: &File) {
    let _ = rustix::fs::flock(file, rustix::fs::FlockOperation::Unlock);
}

#[cfg(windows)]
fn lock(file: &File) -> std::io::Result<()> {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::Storage::FileSystem::{LOCKFILE_EXCLUSIVE_LOCK, LockFileEx};
    // SAFETY: the handle is open for the duration of the call and `overlapped` is a zeroed
    // OVERLAPPED (offset 0), as a synchronous lock of the whole range requires.
    let ok = unsafe {
        let mut overlapped: windows_sys::Win32::System::IO::OVERLAPPED = std::mem::zeroed();
        LockFileEx(
            file.as_raw_handle(),
            LOCKFILE_EXCLUSIVE_LOCK,
            0,
            u32::MAX,
            u32::MAX,
            &mut overlapped,
        )
    };
    if ok == 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(windows)]
fn unlock(file: &File) {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::Storage::FileSystem::UnlockFileEx;
    // SAFETY: as in `lock`, on the range locked there.
    unsafe {
        let mut overlapped: windows_sys::Win32::System::IO::OVERLAPPED = std::mem::zeroed();
        UnlockFileEx(file.as_raw_handle(), 0, u32::MAX, u32::MAX, &mut overlapped);
    }
}

impl Drop for Exclusive {
    fn drop(&mut self) {
        unlock(&self.file);
    }
}

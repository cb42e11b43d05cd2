//! Win32 Job objects for [`super::ProcessGroup`]: made, joined by a suspended child that is then
//! resumed, terminated and closed. Its `unsafe` blocks are FFI calls only, whose pointers are to
//! locals alive for the call and whose handles are owned (`OwnedHandle`) by us.

use std::collections::BTreeMap;
use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use tokio::process::Child;
use windows_sys::Win32::Foundation::{ERROR_NO_MORE_FILES, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, TH32CS_SNAPTHREAD, THREADENTRY32, Thread32First, Thread32Next,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JobObjectExtendedLimitInformation,
    SetInformationJobObject, TerminateJobObject,
};
use windows_sys::Win32::System::Threading::{
    GetProcessId, OpenThread, ResumeThread, THREAD_SUSPEND_RESUME,
};

/// The exit code of the processes a kill ends: `taskkill /F`'s.
const KILLED: u32 = 1;

/// A job in [`jobs`], by a number never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct JobId(u64);

/// The jobs of the groups not yet killed. A `ProcessGroup` is a plain value that is copied
/// (the backends keep it in their registries of calls in flight and in their guards), as a Unix
/// process group id is; the handle it stands for lives here, closed once by the first kill.
fn jobs() -> MutexGuard<'static, BTreeMap<JobId, OwnedHandle>> {
    static JOBS: Mutex<BTreeMap<JobId, OwnedHandle>> = Mutex::new(BTreeMap::new());
    JOBS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Puts `child`, started with `CREATE_SUSPENDED`, in a new job that kills its processes when
/// its last handle closes, then resumes it.
pub(super) fn adopt(child: &Child) -> io::Result<JobId> {
    let process = child
        .raw_handle()
        .ok_or_else(|| io::Error::other("the child was already reaped"))?;
    let job = new_job()?;
    // SAFETY: both handles are open: `job` is owned here, `process` by `child`, borrowed for
    // the call.
    if unsafe { AssignProcessToJobObject(job.as_raw_handle(), process) } == 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `process` is open (above); the call takes no pointer.
    let pid = unsafe { GetProcessId(process) };
    if pid == 0 {
        return Err(io::Error::last_os_error());
    }
    resume(pid)?;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let id = JobId(NEXT.fetch_add(1, Ordering::Relaxed));
    jobs().insert(id, job);
    Ok(id)
}

/// A new anonymous job whose processes are killed when its last handle closes.
fn new_job() -> io::Result<OwnedHandle> {
    // SAFETY: null attributes and name ask for the defaults and an unnamed job.
    let raw = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
    if raw.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` was just returned open by `CreateJobObjectW`, and nothing else owns it.
    let job = unsafe { OwnedHandle::from_raw_handle(raw) };
    let mut info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
    info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    // SAFETY: `info` is an initialised value of the type the class names, alive for the call,
    // and its size is passed with it.
    let set = unsafe {
        SetInformationJobObject(
            job.as_raw_handle(),
            JobObjectExtendedLimitInformation,
            (&raw const info).cast(),
            size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
        )
    };
    if set == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(job)
}

/// Resumes every thread of process `pid` (a process started suspended has one, its main
/// thread); fails when none was found suspended.
fn resume(pid: u32) -> io::Result<()> {
    // SAFETY: the call takes no pointer; its handle is checked and owned below.
    let raw = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
    if raw == INVALID_HANDLE_VALUE || raw.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` was just returned open, and nothing else owns it.
    let snapshot = unsafe { OwnedHandle::from_raw_handle(raw) };
    let mut entry = THREADENTRY32 {
        dwSize: size_of::<THREADENTRY32>() as u32,
        ..Default::default()
    };
    let mut resumed = false;
    // SAFETY: the snapshot is open and `entry` is a THREADENTRY32 with its size set, alive for
    // the call.
    let mut more = unsafe { Thread32First(snapshot.as_raw_handle(), &raw mut entry) };
    while more != 0 {
        if entry.th32OwnerProcessID == pid {
            resumed |= resume_thread(entry.th32ThreadID)?;
        }
        // SAFETY: as for `Thread32First`.
        more = unsafe { Thread32Next(snapshot.as_raw_handle(), &raw mut entry) };
    }
    let end = io::Error::last_os_error();
    if end.raw_os_error() != Some(ERROR_NO_MORE_FILES as i32) {
        return Err(end);
    }
    if resumed {
        Ok(())
    } else {
        Err(io::Error::other(
            "no suspended thread of the new process was found",
        ))
    }
}

/// Resumes one thread; `true` when it was suspended.
fn resume_thread(tid: u32) -> io::Result<bool> {
    // SAFETY: the call takes no pointer; its handle is checked and owned below.
    let raw = unsafe { OpenThread(THREAD_SUSPEND_RESUME, 0, tid) };
    if raw.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` was just returned open, and nothing else owns it.
    let thread = unsafe { OwnedHandle::from_raw_handle(raw) };
    // SAFETY: the thread handle is open, with the access the call needs.
    let previous = unsafe { ResumeThread(thread.as_raw_handle()) };
    if previous == u32::MAX {
        return Err(io::Error::last_os_error());
    }
    Ok(previous > 0)
}

/// Ends every process of the job, keeping the job.
pub(super) fn terminate(id: JobId) {
    if let Some(job) = jobs().get(&id) {
        end(job);
    }
}

/// Ends every process of the job and closes our handle (the job goes with its last process).
pub(super) fn kill(id: JobId) {
    let job = jobs().remove(&id);
    if let Some(job) = job {
        end(&job);
    }
}

fn end(job: &OwnedHandle) {
    // SAFETY: the handle is open (owned by the table or by the caller). A failure leaves
    // nothing to do: closing the handle still kills the job's processes.
    unsafe { TerminateJobObject(job.as_raw_handle(), KILLED) };
}

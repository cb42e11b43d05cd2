//! A Gemini CLI process and everything it starts, as one unit: the CLI is a Node program that
//! may relaunch itself and start helpers, and killing only the direct child would orphan them.
//! Both CLI backends (`headless`, `acp`) spawn, stop and kill their processes through this type
//! only.
//!
//! On Unix the child is started as the leader of a process group of its own (its pid is the
//! group id), and the group is signalled whole.
//!
//! On Windows the unit is a Job object (`job`): every process the child starts is in the job
//! too, and the job is ended whole. The child is started suspended (`CREATE_SUSPENDED`), put in
//! the job, then resumed: a child assigned after it started could start a grandchild in the
//! meantime that the job would never hold (npm's `gemini.cmd` shim is `cmd.exe` starting `node`
//! at once). std gives no handle to the child's main thread, so it is resumed through a thread
//! snapshot of its process (the way `process-wrap`, watchexec's process crate, does it). The
//! job is made with `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE` and its handle is held by us until the
//! group is killed: when this process ends, however it ends, Windows closes the handle and kills
//! whatever the CLI left running. The child also gets `CREATE_NO_WINDOW`: its stdio is piped, a
//! server started without a console would otherwise open a console window for each CLI process,
//! and, as on Unix, a terminal's Ctrl-C does not reach it (the backends stop it).

#[cfg(windows)]
mod job;

#[cfg(unix)]
use nix::sys::signal::{Signal, killpg};
#[cfg(unix)]
use nix::unistd::Pid;
use tokio::process::{Child, Command};

/// The process group a spawned CLI leads.
#[cfg(unix)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessGroup(Pid);

/// The Job object a spawned CLI runs in, named by a number never reused: the handle itself is
/// held in `job`'s table until the group is killed, so a copy of this value kept past the kill
/// finds nothing, never another object that reused the handle.
#[cfg(windows)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessGroup(job::JobId);

#[cfg(windows)]
impl ProcessGroup {
    /// Starts `cmd` suspended, puts it in a new Job object, then lets it run. The group is
    /// always `Some` (the `Option` is Unix's, where the child may already be reaped); if the
    /// child cannot be put in a job it is killed before it ran and the spawn fails.
    pub fn spawn(cmd: &mut Command) -> std::io::Result<(Child, Option<ProcessGroup>)> {
        use windows_sys::Win32::System::Threading::{CREATE_NO_WINDOW, CREATE_SUSPENDED};
        let mut child = cmd
            .creation_flags(CREATE_SUSPENDED | CREATE_NO_WINDOW)
            .spawn()?;
        match job::adopt(&child) {
            Ok(id) => Ok((child, Some(ProcessGroup(id)))),
            Err(e) => {
                let _ = child.start_kill();
                Err(std::io::Error::new(
                    e.kind(),
                    format!("could not put the process in a Job object: {e}"),
                ))
            }
        }
    }

    /// Ends every process of the job at once. Windows has no SIGTERM: a console control event
    /// (Ctrl-Break) reaches only processes on our console, which the CLI is not on (and a server
    /// often has none). So this is [`ProcessGroup::kill`] without letting go of the job, and the
    /// grace the backends give after it finds the processes gone.
    pub fn terminate(self) {
        job::terminate(self.0);
    }

    /// Ends every process of the job (exit code 1, as `taskkill /F` gives) and closes our
    /// handle to it, synchronously: also from a shutdown handler just before exiting, or a
    /// destructor. Later calls on a copy do nothing.
    pub fn kill(self) {
        job::kill(self.0);
    }

    /// Kills the job, then reaps its first process.
    pub async fn kill_and_reap(self, leader: &mut Child) {
        self.kill();
        let _ = leader.wait().await;
    }
}

#[cfg(unix)]
impl ProcessGroup {
    /// Starts `cmd` as the leader of a new process group; the group is `None` when the child's
    /// id is already unknown (it was reaped at once).
    pub fn spawn(cmd: &mut Command) -> std::io::Result<(Child, Option<ProcessGroup>)> {
        let child = cmd.process_group(0).spawn()?;
        let group = ProcessGroup::led_by(&child);
        Ok((child, group))
    }

    /// The group `child` leads (it was started by [`ProcessGroup::spawn`]).
    fn led_by(child: &Child) -> Option<ProcessGroup> {
        child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(|id| ProcessGroup(Pid::from_raw(id)))
    }

    /// Asks every process of the group to stop (SIGTERM).
    pub fn terminate(self) {
        self.signal(Signal::SIGTERM);
    }

    /// Kills every process of the group (SIGKILL), synchronously: also from a signal handler
    /// just before exiting, or a destructor.
    pub fn kill(self) {
        self.signal(Signal::SIGKILL);
    }

    /// Kills the group, then reaps its leader.
    pub async fn kill_and_reap(self, leader: &mut Child) {
        self.kill();
        let _ = leader.wait().await;
    }

    fn signal(self, signal: Signal) {
        // ESRCH: the group is already gone.
        let _ = killpg(self.0, signal);
    }
}

//! A Gemini CLI process and everything it starts, as one unit: the CLI is a Node program that
//! may relaunch itself and start helpers, and killing only the direct child would orphan them.
//!
//! On Unix the child is started as the leader of a process group of its own (its pid is the
//! group id), and the group is signalled whole. Both CLI backends (`headless`, `acp`) spawn, stop
//! and kill their processes through this type only. On Windows the unit is a Job object (killed
//! whole, and with `KILL_ON_JOB_CLOSE` when we go), not written yet: there, spawning refuses, so
//! no CLI process is started that could outlive us.

#[cfg(unix)]
use nix::sys::signal::{Signal, killpg};
#[cfg(unix)]
use nix::unistd::Pid;
use tokio::process::{Child, Command};

/// The process group a spawned CLI leads.
#[cfg(unix)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessGroup(Pid);

/// The Job object a spawned CLI would run in: none can be made yet (see the module docs).
#[cfg(windows)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessGroup(std::convert::Infallible);

#[cfg(windows)]
impl ProcessGroup {
    /// Refuses: without a Job object, killing the CLI would orphan the processes it starts.
    pub fn spawn(_cmd: &mut Command) -> std::io::Result<(Child, Option<ProcessGroup>)> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "the Gemini CLI backends do not run on Windows yet (its processes would need a Job \
             object to be stopped whole); use the Gemini API backend (GEMINI_API_KEY)",
        ))
    }

    pub fn terminate(self) {
        match self.0 {}
    }

    pub fn kill(self) {
        match self.0 {}
    }

    pub async fn kill_and_reap(self, _leader: &mut Child) {
        match self.0 {}
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

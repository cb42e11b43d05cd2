//! A Gemini CLI process and everything it starts, as one unit: the CLI is a Node program that
//! may relaunch itself and start helpers, and killing only the direct child would orphan them.
//!
//! On Unix the child is started as the leader of a process group of its own (its pid is the
//! group id), and the group is signalled whole. This type is the seam where Windows job objects
//! will go: both CLI backends (`headless`, `acp`) spawn, stop and kill their processes through it
//! only.

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

/// The process group a spawned CLI leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessGroup(Pid);

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

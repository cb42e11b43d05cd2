//! A warm process that died before a call reached it (killed, crashed while idle) is replaced,
//! once, and the call runs on the fresh one. Only what comes before the prompt is redone
//! (opening, loading or configuring the session); a prompt that may have reached Gemini is
//! never sent twice.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::pool::Pool;
use super::process::Process;
use super::{Key, Kind, lock};
use crate::gemini::vocabulary::{GeminiError, cli_error};

/// How long a failed request may take to show that the process behind it is gone.
const NOTICE: Duration = Duration::from_secs(1);

impl Process {
    /// Whether nothing sent now could reach the process: it exited, or its connection closed
    /// (the connection then refuses to send, so nothing was written).
    fn gone(&self) -> bool {
        !self.alive() || self.cx.is_incoming_closed() || self.cx.termination().is_some()
    }

    /// [`Process::gone`], after giving a failure up to [`NOTICE`] to be seen for what it is.
    async fn gone_within(&self, grace: Duration) -> bool {
        if self.gone() {
            return true;
        }
        let mut closed = self.closed.clone();
        let cx = self.cx.clone();
        let ended = async move {
            tokio::select! {
                _ = closed.wait_for(|c| *c) => {}
                _ = cx.terminated() => {}
            }
        };
        tokio::time::timeout(grace, ended).await.is_ok() || self.gone()
    }
}

/// A process with a call in flight: the reaper leaves it alone, and its idle time starts again
/// when the call ends.
pub(super) struct Busy(Arc<Process>);

impl Busy {
    fn new(process: Arc<Process>) -> Busy {
        process.in_flight.fetch_add(1, Ordering::SeqCst);
        Busy(process)
    }

    pub(super) fn process(&self) -> &Arc<Process> {
        &self.0
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        *lock(&self.0.last_used) = Instant::now();
    }
}

impl Pool {
    /// The session for the prompt (`(id, how)` as [`Pool::session`] gives it) in a process that
    /// is alive as the prompt is sent. A process found gone first — before the session was
    /// opened, while it was, or just after — is replaced once: nothing of the call reached it.
    pub(super) async fn open(
        self: &Arc<Self>,
        key: &Key,
        process: Arc<Process>,
        thread: Option<&str>,
    ) -> Result<(Busy, (String, &'static str)), GeminiError> {
        let mut busy = Busy::new(process);
        for fresh in [false, true] {
            let opened = match busy.0.gone() {
                true => None,
                false => Some(self.session_confirmed(key, &busy.0, thread).await),
            };
            match opened {
                Some(Ok(session)) if !busy.0.gone() => return Ok((busy, session)),
                Some(Err(e)) if fresh || !busy.0.gone_within(NOTICE).await => return Err(e),
                _ if fresh => break,
                _ => {}
            }
            self.drop_process(key, &busy.0);
            tracing::warn!(root = %key.root.display(), "the Gemini CLI (ACP) had exited before the call reached it; running the call on a new one");
            busy = Busy::new(self.process(key).await?);
        }
        Err(cli_error(
            "the Gemini CLI (ACP) exited as soon as it started: run `gemini --acp` by hand to see why",
        ))
    }

    /// [`Pool::session`]; a live session, found without asking the process anything, is
    /// confirmed by a round trip (its mode set again), so that a process that died since its last
    /// call is found out before the prompt is sent rather than after.
    async fn session_confirmed(
        &self,
        key: &Key,
        process: &Arc<Process>,
        thread: Option<&str>,
    ) -> Result<(String, &'static str), GeminiError> {
        let (id, how) = self.session(key, process, thread).await?;
        if let (Kind::Agent(mode), "live") = (key.kind, how) {
            self.set_mode(process, &id, mode.session_mode()).await?;
        }
        Ok((id, how))
    }

    /// Stops `process` and takes it out of the pool, unless another call already replaced it.
    fn drop_process(&self, key: &Key, process: &Arc<Process>) {
        let mut processes = lock(&self.processes);
        if processes.get(key).is_some_and(|p| Arc::ptr_eq(p, process)) {
            processes.remove(key);
        }
        drop(processes);
        process.kill();
    }
}

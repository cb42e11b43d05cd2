//! A call's process group, kept in the backend's registry of calls in flight while it runs, and
//! its pipes, read with caps.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::in_flight::{Live, live};
use super::outcome::{RetryNotice, retry_notice};
use crate::gemini::gemini_cli::ProcessGroup;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Child;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How long the pipes may stay open after the group was swept (a process that left the group).
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// The most of stderr kept: its tail, where the CLI prints the error JSON.
const STDERR_CAP: usize = 64 << 10;
/// Longest stderr line inspected for retry notices.
const LINE_CAP: usize = 4 << 10;

/// Kills the CLI's whole process group when dropped: after a normal exit (helpers the CLI left
/// behind), and when the call is abandoned mid-way (its future dropped).
pub(super) struct GroupGuard {
    pub(super) group: Option<ProcessGroup>,
    pub(super) live: Arc<Mutex<Live>>,
}

impl GroupGuard {
    /// Guards `group`, registered as in flight until the guard drops.
    pub(super) fn new(group: Option<ProcessGroup>, registry: &Arc<Mutex<Live>>) -> GroupGuard {
        if let Some(g) = group {
            live(registry).groups.push(g);
        }
        GroupGuard {
            group,
            live: registry.clone(),
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            group.kill();
            live(&self.live).groups.retain(|g| *g != group);
        }
    }
}

/// SIGTERM to the group, a grace period for the leader, then SIGKILL to the group (helpers that
/// ignored SIGTERM or outlived the leader; the group id stays reserved while any member lives),
/// then the leader reaped.
pub(super) async fn terminate(child: &mut Child, group: GroupGuard, grace: Duration) {
    if let Some(g) = group.group {
        g.terminate();
    }
    let _ = tokio::time::timeout(grace, child.wait()).await;
    drop(group);
    let _ = tokio::time::timeout(grace.max(Duration::from_secs(1)), child.wait()).await;
}

/// The reader and writer tasks of one run; abandoned ones are aborted.
#[derive(Default)]
pub(super) struct Tasks {
    pub(super) stdin: Option<JoinHandle<()>>,
    pub(super) stdout: Option<JoinHandle<String>>,
    pub(super) stderr: Option<JoinHandle<String>>,
}

impl Tasks {
    pub(super) async fn stdout_text(&mut self) -> String {
        join_text(self.stdout.take()).await
    }
    pub(super) async fn stderr_text(&mut self) -> String {
        join_text(self.stderr.take()).await
    }
}

pub(super) async fn join_text(task: Option<JoinHandle<String>>) -> String {
    let Some(mut task) = task else {
        return String::new();
    };
    match tokio::time::timeout(DRAIN_GRACE, &mut task).await {
        Ok(Ok(text)) => text,
        _ => {
            task.abort();
            String::new()
        }
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in [self.stdout.take(), self.stderr.take()]
            .into_iter()
            .flatten()
        {
            t.abort();
        }
        if let Some(t) = self.stdin.take() {
            t.abort();
        }
    }
}

/// Reads a pipe to its end, keeping at most `cap` bytes (the rest is drained and dropped).
pub(super) async fn read_capped(mut r: impl AsyncRead + Unpin, cap: usize) -> String {
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

/// Reads stderr to its end, keeping its last `STDERR_CAP` bytes and reporting each retry notice
/// ("Attempt N failed …") as it arrives.
pub(super) async fn read_stderr(
    mut r: impl AsyncRead + Unpin,
    notices: mpsc::UnboundedSender<RetryNotice>,
) -> String {
    let mut tail: Vec<u8> = Vec::new();
    let mut line: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 8 << 10];
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > 2 * STDERR_CAP {
            tail.drain(..tail.len() - STDERR_CAP);
        }
        for &b in &buf[..n] {
            if b == b'\n' {
                if let Some(notice) = retry_notice(&String::from_utf8_lossy(&line)) {
                    let _ = notices.send(notice);
                }
                line.clear();
            } else if line.len() < LINE_CAP {
                line.push(b);
            }
        }
    }
    if tail.len() > STDERR_CAP {
        tail.drain(..tail.len() - STDERR_CAP);
    }
    String::from_utf8_lossy(&tail).into_owned()
}

//! Task records beside the threads: what an MCP task (a tool call whose reply is delivered
//! later, `server::tasks`) leaves in the store so that any instance on the same store answers
//! for it. The store keeps a record as an opaque JSON `state` written by the instance running
//! the task, its `owner`, a `lease` that instance renews while the task runs, and a `cancel`
//! flag any instance may set; a write of the state never clears the flag. A record is gone at
//! its expiry (`expires_ms`), and so is its place in its owner's listing.
//!
//! [`MemoryTasks`] is the in-process body, used by the memory store; the embedded and Redis
//! stores keep records in a table and in hashes.

use std::collections::HashMap;
use std::sync::Mutex;

use super::now::now_ms;
use super::owner::Owner;

/// A task's id: a UUID, parsed once at the edge (an id that is not one names no task).
pub type TaskId = uuid::Uuid;

/// One task record as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEntry {
    pub id: TaskId,
    pub owner: Owner,
    /// When the task was created (ms since the epoch): the listing's order.
    pub created_ms: u64,
    /// The task's state, JSON written by the instance running it.
    pub state: String,
    /// Until when (ms since the epoch) the instance running the task vouches for it.
    pub lease_ms: u64,
    /// Whether any instance was asked to cancel the task.
    pub cancel: bool,
}

/// The in-process task records (the memory store's). A std mutex: no await while it is held.
#[derive(Default)]
pub struct MemoryTasks {
    records: Mutex<HashMap<TaskId, (TaskEntry, u64)>>,
}

impl MemoryTasks {
    fn records(&self) -> std::sync::MutexGuard<'_, HashMap<TaskId, (TaskEntry, u64)>> {
        let mut g = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let now = now_ms();
        g.retain(|_, (_, expires)| *expires > now);
        g
    }

    pub fn put(&self, entry: &TaskEntry, expires_ms: u64) {
        let mut g = self.records();
        let cancel = g.get(&entry.id).is_some_and(|(e, _)| e.cancel);
        let mut entry = entry.clone();
        entry.cancel = cancel;
        g.insert(entry.id, (entry, expires_ms));
    }

    pub fn claim(&self, entry: &TaskEntry, lapsed_lease_ms: u64, expires_ms: u64) -> bool {
        let mut g = self.records();
        let Some((old, _)) = g.get(&entry.id) else {
            return false;
        };
        if old.lease_ms != lapsed_lease_ms {
            return false;
        }
        let mut entry = entry.clone();
        entry.cancel = old.cancel;
        g.insert(entry.id, (entry, expires_ms));
        true
    }

    pub fn get(&self, id: TaskId) -> Option<TaskEntry> {
        self.records().get(&id).map(|(e, _)| e.clone())
    }

    pub fn cancel(&self, id: TaskId) {
        if let Some((e, _)) = self.records().get_mut(&id) {
            e.cancel = true;
        }
    }

    pub fn list(&self, owner: &Owner, limit: usize) -> Vec<TaskEntry> {
        let mut all: Vec<TaskEntry> = self
            .records()
            .values()
            .filter(|(e, _)| &e.owner == owner)
            .map(|(e, _)| e.clone())
            .collect();
        all.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then(b.id.cmp(&a.id)));
        all.truncate(limit);
        all
    }
}

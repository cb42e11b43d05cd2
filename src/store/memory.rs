//! The in-memory thread store: for tests and for users who ask for it. Threads die with the
//! process. A std mutex suffices: no await happens while it is held.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::tasks::{MemoryTasks, TaskEntry, TaskId};
use super::fronts::{MemoryFronts, SeenFront};
use super::owner::Owner;
use super::{Thread, ThreadError, ThreadId, ThreadStore, ThreadSummary, Turn};
use crate::caps::{Day, SpendKey, Spent};

struct Entry {
    thread: Thread,
    expires: Instant,
    /// Monotonic write counter, for `latest`.
    written: u64,
}

pub struct MemoryStore {
    ttl: Duration,
    max_turns: u32,
    spend: Mutex<HashMap<(SpendKey, Day), Spent>>,
    inner: Mutex<(HashMap<ThreadId, Entry>, u64)>,
    tasks: MemoryTasks,
    fronts: MemoryFronts,
}

impl MemoryStore {
    pub fn new(ttl: Duration, max_turns: u32) -> MemoryStore {
        MemoryStore {
            ttl,
            max_turns,
            inner: Mutex::new((HashMap::new(), 0)),
            spend: Mutex::default(),
            tasks: MemoryTasks::default(),
            fronts: MemoryFronts::default(),
        }
    }
}

#[async_trait::async_trait]
impl ThreadStore for MemoryStore {
    async fn load(&self, id: ThreadId) -> Result<Thread, ThreadError> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        g.0.retain(|_, e| e.expires > now);
        g.0.get(&id)
            .map(|e| e.thread.clone())
            .ok_or_else(|| ThreadError::NotFound {
                id: id.to_string(),
                ttl_hours: self.ttl.as_secs_f64() / 3600.0,
            })
    }

    async fn latest(&self, project: &str, owner: &Owner) -> Result<Option<ThreadId>, ThreadError> {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        Ok(g.0
            .iter()
            .filter(|(_, e)| {
                e.expires > now && e.thread.project == project && e.thread.owner == *owner
            })
            .max_by_key(|(_, e)| e.written)
            .map(|(id, _)| *id))
    }

    async fn append(
        &self,
        id: ThreadId,
        project: &str,
        owner: &Owner,
        turn: &Turn,
    ) -> Result<u32, ThreadError> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.1 += 1;
        let written = g.1;
        let now = Instant::now();
        g.0.retain(|_, e| e.expires > now);
        let entry = g.0.entry(id).or_insert_with(|| Entry {
            thread: Thread {
                id,
                project: project.to_string(),
                owner: owner.clone(),
                turns: Vec::new(),
            },
            expires: now,
            written,
        });
        if entry.thread.owner != *owner {
            return Err(ThreadError::Foreign { id: id.to_string() });
        }
        if entry.thread.turns.len() as u32 >= self.max_turns {
            return Err(ThreadError::Full {
                id: id.to_string(),
                max: self.max_turns,
            });
        }
        entry.thread.turns.push(turn.clone());
        entry.expires = now + self.ttl;
        entry.written = written;
        Ok(entry.thread.turns.len() as u32)
    }

    async fn list(
        &self,
        project: &str,
        owner: &Owner,
        limit: usize,
    ) -> Result<Vec<ThreadSummary>, ThreadError> {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let mut live: Vec<&Entry> = g
            .0
            .values()
            .filter(|e| e.expires > now && e.thread.project == project && e.thread.owner == *owner)
            .collect();
        live.sort_by_key(|e| std::cmp::Reverse(e.written));
        Ok(live
            .into_iter()
            .take(limit)
            .map(|e| ThreadSummary::of(&e.thread))
            .collect())
    }

    async fn delete(&self, id: ThreadId, owner: &Owner) -> Result<bool, ThreadError> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        g.0.retain(|_, e| e.expires > now);
        match g.0.get(&id) {
            None => Ok(false),
            Some(e) if e.thread.owner != *owner => Err(ThreadError::Foreign { id: id.to_string() }),
            Some(_) => {
                g.0.remove(&id);
                Ok(true)
            }
        }
    }

    async fn add_spend(&self, key: &SpendKey, day: Day, add: Spent) -> Result<Spent, ThreadError> {
        let mut g = self.spend.lock().unwrap_or_else(|e| e.into_inner());
        g.retain(|(_, d), _| *d >= day);
        let e = g.entry((key.clone(), day)).or_default();
        e.tokens += add.tokens;
        e.micro_usd += add.micro_usd;
        Ok(*e)
    }

    async fn spent(&self, key: &SpendKey, day: Day) -> Result<Spent, ThreadError> {
        let g = self.spend.lock().unwrap_or_else(|e| e.into_inner());
        Ok(g.get(&(key.clone(), day)).copied().unwrap_or_default())
    }

    async fn ping(&self) -> Result<(), ThreadError> {
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "memory"
    }

    async fn put_task(&self, entry: &TaskEntry, expires_ms: u64) -> Result<(), ThreadError> {
        self.tasks.put(entry, expires_ms);
        Ok(())
    }

    async fn claim_task(
        &self,
        entry: &TaskEntry,
        lapsed_lease_ms: u64,
        expires_ms: u64,
    ) -> Result<bool, ThreadError> {
        Ok(self.tasks.claim(entry, lapsed_lease_ms, expires_ms))
    }

    async fn get_task(&self, id: TaskId) -> Result<Option<TaskEntry>, ThreadError> {
        Ok(self.tasks.get(id))
    }

    async fn cancel_task(&self, id: TaskId) -> Result<(), ThreadError> {
        self.tasks.cancel(id);
        Ok(())
    }

    async fn list_tasks(&self, owner: &Owner, limit: usize) -> Result<Vec<TaskEntry>, ThreadError> {
        Ok(self.tasks.list(owner, limit))
    }

    async fn seen_front(&self, key: &str) -> Result<Option<SeenFront>, ThreadError> {
        Ok(self.fronts.get(key))
    }

    async fn keep_front(
        &self,
        key: &str,
        front: &SeenFront,
        expires_ms: u64,
    ) -> Result<(), ThreadError> {
        self.fronts.put(key, front, expires_ms);
        Ok(())
    }
}

//! A thread store that counts its failures: [`Counted`] wraps the store the app opened and
//! passes every operation through, counting those that fail for the store's own reasons
//! (`Unavailable`, `Corrupt`) in the metrics by operation. Refusals that are answers — an
//! unknown or expired thread, another client's, a full one — are not store errors.

use std::sync::Arc;

use super::tasks::{TaskEntry, TaskId};
use super::fronts::SeenFront;
use super::owner::Owner;
use super::{Thread, ThreadError, ThreadId, ThreadStore, ThreadSummary, Turn};
use crate::metrics::Metrics;
use crate::caps::{Day, SpendKey, Spent};

/// `inner`, its failures counted in `metrics`.
pub struct Counted {
    inner: Arc<dyn ThreadStore>,
    metrics: Arc<Metrics>,
}

impl Counted {
    pub fn new(inner: Arc<dyn ThreadStore>, metrics: Arc<Metrics>) -> Counted {
        Counted { inner, metrics }
    }

    /// `result` of operation `op`, counted when it is the store's failure.
    fn count<T>(&self, op: &'static str, result: Result<T, ThreadError>) -> Result<T, ThreadError> {
        let error = match &result {
            Err(ThreadError::Unavailable { .. }) => "unavailable",
            Err(ThreadError::Corrupt { .. }) => "corrupt",
            _ => return result,
        };
        self.metrics.store_error(self.inner.kind(), op, error);
        result
    }
}

#[async_trait::async_trait]
impl ThreadStore for Counted {
    async fn load(&self, id: ThreadId) -> Result<Thread, ThreadError> {
        self.count("load", self.inner.load(id).await)
    }

    async fn latest(&self, project: &str, owner: &Owner) -> Result<Option<ThreadId>, ThreadError> {
        self.count("latest", self.inner.latest(project, owner).await)
    }

    async fn append(
        &self,
        id: ThreadId,
        project: &str,
        owner: &Owner,
        turn: &Turn,
    ) -> Result<u32, ThreadError> {
        self.count("append", self.inner.append(id, project, owner, turn).await)
    }

    async fn list(
        &self,
        project: &str,
        owner: &Owner,
        limit: usize,
    ) -> Result<Vec<ThreadSummary>, ThreadError> {
        self.count("list", self.inner.list(project, owner, limit).await)
    }

    async fn delete(&self, id: ThreadId, owner: &Owner) -> Result<bool, ThreadError> {
        self.count("delete", self.inner.delete(id, owner).await)
    }

    async fn add_spend(&self, key: &SpendKey, day: Day, add: Spent) -> Result<Spent, ThreadError> {
        self.count("add_spend", self.inner.add_spend(key, day, add).await)
    }

    async fn spent(&self, key: &SpendKey, day: Day) -> Result<Spent, ThreadError> {
        self.count("spent", self.inner.spent(key, day).await)
    }

    async fn ping(&self) -> Result<(), ThreadError> {
        self.count("ping", self.inner.ping().await)
    }

    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    async fn put_task(&self, entry: &TaskEntry, expires_ms: u64) -> Result<(), ThreadError> {
        self.count("put_task", self.inner.put_task(entry, expires_ms).await)
    }

    async fn claim_task(
        &self,
        entry: &TaskEntry,
        lapsed_lease_ms: u64,
        expires_ms: u64,
    ) -> Result<bool, ThreadError> {
        let claimed = self.inner.claim_task(entry, lapsed_lease_ms, expires_ms).await;
        self.count("claim_task", claimed)
    }

    async fn get_task(&self, id: TaskId) -> Result<Option<TaskEntry>, ThreadError> {
        self.count("get_task", self.inner.get_task(id).await)
    }

    async fn cancel_task(&self, id: TaskId) -> Result<(), ThreadError> {
        self.count("cancel_task", self.inner.cancel_task(id).await)
    }

    async fn list_tasks(&self, owner: &Owner, limit: usize) -> Result<Vec<TaskEntry>, ThreadError> {
        self.count("list_tasks", self.inner.list_tasks(owner, limit).await)
    }

    async fn seen_front(&self, key: &str) -> Result<Option<SeenFront>, ThreadError> {
        self.count("seen_front", self.inner.seen_front(key).await)
    }

    async fn keep_front(
        &self,
        key: &str,
        front: &SeenFront,
        expires_ms: u64,
    ) -> Result<(), ThreadError> {
        let kept = self.inner.keep_front(key, front, expires_ms).await;
        self.count("keep_front", kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store that is down.
    struct Down;

    #[async_trait::async_trait]
    impl ThreadStore for Down {
        async fn load(&self, id: ThreadId) -> Result<Thread, ThreadError> {
            Err(ThreadError::NotFound {
                id: id.to_string(),
                ttl_hours: 3.0,
            })
        }
        async fn latest(&self, _: &str, _: &Owner) -> Result<Option<ThreadId>, ThreadError> {
            Err(down())
        }
        async fn append(
            &self,
            _: ThreadId,
            _: &str,
            _: &Owner,
            _: &Turn,
        ) -> Result<u32, ThreadError> {
            Err(down())
        }
        async fn list(
            &self,
            _: &str,
            _: &Owner,
            _: usize,
        ) -> Result<Vec<ThreadSummary>, ThreadError> {
            Err(down())
        }
        async fn delete(&self, _: ThreadId, _: &Owner) -> Result<bool, ThreadError> {
            Ok(false)
        }
        async fn add_spend(&self, _: &SpendKey, _: Day, _: Spent) -> Result<Spent, ThreadError> {
            Err(down())
        }
        async fn spent(&self, _: &SpendKey, _: Day) -> Result<Spent, ThreadError> {
            Err(down())
        }
        async fn ping(&self) -> Result<(), ThreadError> {
            Err(down())
        }
        fn kind(&self) -> &'static str {
            "memory"
        }
        async fn put_task(&self, _: &TaskEntry, _: u64) -> Result<(), ThreadError> {
            Err(down())
        }
        async fn claim_task(&self, _: &TaskEntry, _: u64, _: u64) -> Result<bool, ThreadError> {
            Err(down())
        }
        async fn get_task(&self, _: TaskId) -> Result<Option<TaskEntry>, ThreadError> {
            Err(down())
        }
        async fn cancel_task(&self, _: TaskId) -> Result<(), ThreadError> {
            Err(down())
        }
        async fn list_tasks(&self, _: &Owner, _: usize) -> Result<Vec<TaskEntry>, ThreadError> {
            Err(down())
        }
        async fn seen_front(&self, _: &str) -> Result<Option<SeenFront>, ThreadError> {
            Err(down())
        }
        async fn keep_front(&self, _: &str, _: &SeenFront, _: u64) -> Result<(), ThreadError> {
            Err(down())
        }
    }

    fn down() -> ThreadError {
        ThreadError::Unavailable {
            store: "memory",
            message: "down".into(),
        }
    }

    /// Failures of the store are counted per operation; answers (not found) and successes are
    /// not.
    #[tokio::test]
    async fn only_the_stores_own_failures_are_counted() {
        let metrics = Arc::new(Metrics::new());
        let store = Counted::new(Arc::new(Down), metrics.clone());
        let _ = store.load(ThreadId::new()).await;
        let _ = store.delete(ThreadId::new(), &Owner::local()).await;
        let _ = store.ping().await;
        let _ = store.ping().await;
        let _ = store.list("/p", &Owner::local(), 5).await;
        assert_eq!(store.kind(), "memory");
        let text = metrics.encode(crate::metrics::Sampled::default(), false);
        let mut errors: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("gemini_mcp_store_errors_total{"))
            .collect();
        errors.sort_unstable();
        assert_eq!(
            errors,
            [
                r#"gemini_mcp_store_errors_total{store="memory",op="list",error="unavailable"} 1"#,
                r#"gemini_mcp_store_errors_total{store="memory",op="ping",error="unavailable"} 2"#,
            ],
            "{text}"
        );
    }
}

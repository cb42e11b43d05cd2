//! A cluster's reads of a project index. The index lives in a slot of its own, apart from the
//! threads it names, so no script can read both: `latest` and a listing read a page of the
//! index, then its threads (each thread's keys in one pipeline, the threads at once), and drop
//! the entries whose thread has expired or was deleted, as the one-server scripts do inside
//! Redis. Bounded like them: `latest` looks at [`LATEST_SCAN`] entries at most, a listing at
//! the index's cap.

use futures::future::join_all;
use redis::{RedisResult, Value};

use super::{INDEX_CAP, LATEST_SCAN, RedisStore};
use crate::store::{ThreadError, ThreadSummary};

/// Index entries read at once by `latest`.
const LATEST_PAGE: usize = 10;

impl RedisStore {
    /// The id of the newest live thread in `index`, if any.
    pub(super) async fn latest_from_index(
        &self,
        index: &str,
    ) -> Result<Option<String>, ThreadError> {
        let mut dead = Vec::new();
        let mut start = 0;
        let found = 'pages: loop {
            if start >= LATEST_SCAN {
                break None;
            }
            let ids = self.index_page(index, start, LATEST_PAGE).await?;
            if ids.is_empty() {
                break None;
            }
            start += ids.len();
            let alive = join_all(ids.iter().map(|id| self.thread_exists(id))).await;
            for (id, alive) in ids.into_iter().zip(alive) {
                if alive? {
                    break 'pages Some(id);
                }
                dead.push(id);
            }
        };
        self.unindex(index, &dead).await;
        Ok(found)
    }

    /// The live threads of `index`, newest first, at most `limit`.
    pub(super) async fn list_from_index(
        &self,
        index: &str,
        limit: usize,
    ) -> Result<Vec<ThreadSummary>, ThreadError> {
        let mut out = Vec::new();
        let mut dead = Vec::new();
        let mut start = 0;
        while out.len() < limit && start < INDEX_CAP as usize {
            let want = (limit - out.len()).clamp(1, 100);
            let ids = self.index_page(index, start, want).await?;
            if ids.is_empty() {
                break;
            }
            start += ids.len();
            let rows = join_all(ids.iter().map(|id| self.summary_of(id))).await;
            for (id, row) in ids.into_iter().zip(rows) {
                match row? {
                    Some(summary) => out.push(summary),
                    None => dead.push(id),
                }
            }
        }
        self.unindex(index, &dead).await;
        Ok(out)
    }

    /// Entries `start..start + count` of `index`, newest first. A value of another type where
    /// the index should be is `Corrupt`.
    async fn index_page(
        &self,
        index: &str,
        start: usize,
        count: usize,
    ) -> Result<Vec<String>, ThreadError> {
        let page: RedisResult<Vec<String>> = self
            .run(|mut c| async move {
                let r: RedisResult<Vec<String>> = redis::cmd("ZREVRANGE")
                    .arg(index)
                    .arg(start)
                    .arg(start + count - 1)
                    .query_async(&mut c)
                    .await;
                match r {
                    Err(e) if e.code() == Some("WRONGTYPE") => Ok(Err(e)),
                    other => other.map(Ok),
                }
            })
            .await?;
        page.map_err(|_| {
            self.corrupt(
                index,
                "the project index holds a value of another type, not a sorted set",
            )
        })
    }

    async fn thread_exists(&self, id: &str) -> Result<bool, ThreadError> {
        let header = self.header_key(id);
        self.run(|mut c| {
            let header = header.clone();
            async move { redis::cmd("EXISTS").arg(header).query_async(&mut c).await }
        })
        .await
    }

    /// A thread's listing row, from its header and its turns' count (one pipeline, one slot);
    /// `None` when it is gone.
    async fn summary_of(&self, id: &str) -> Result<Option<ThreadSummary>, ThreadError> {
        let (header, turns) = (self.header_key(id), self.turns_key(id));
        let (fields, count): (Vec<Option<String>>, u64) = self
            .run(|mut c| {
                let mut pipe = redis::pipe();
                pipe.cmd("HMGET")
                    .arg(&header)
                    .arg(&["tools", "first_ms", "last_ms", "title", "created_ms"][..])
                    .cmd("LLEN")
                    .arg(&turns);
                async move { pipe.query_async(&mut c).await }
            })
            .await?;
        let [tools, first, last, title, created] = <[Option<String>; 5]>::try_from(fields)
            .map_err(|_| self.corrupt(id, "Redis answered the listing with too few fields"))?;
        let Some(created) = created else {
            return Ok(None);
        };
        let ms = |v: Option<String>| v.unwrap_or_else(|| created.clone()).parse().unwrap_or(0);
        Ok(Some(ThreadSummary {
            id: id.to_string(),
            tools: tools
                .unwrap_or_default()
                .split(' ')
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .collect(),
            turns: count as u32,
            created_ms: ms(first),
            last_ms: ms(last),
            title: title.unwrap_or_default(),
        }))
    }

    /// Drops `ids` from `index` (threads found gone, or deleted). A failure is logged: the next
    /// reader finds them gone again.
    pub(super) async fn unindex(&self, index: &str, ids: &[String]) {
        if ids.is_empty() {
            return;
        }
        let removed: Result<Value, ThreadError> = self
            .run(|mut c| async move {
                redis::cmd("ZREM")
                    .arg(index)
                    .arg(ids)
                    .query_async(&mut c)
                    .await
            })
            .await;
        if let Err(e) = removed {
            tracing::warn!(error = %e, "could not drop gone threads from a project index");
        }
    }
}

//! Task records on Redis (`store::tasks`): under the key prefix `P`,
//! - `P:task:<uuid>`: a hash (`owner`, `created`, `state`, `lease`, `cancel`), expiring with the
//!   record;
//! - `P:tasks:<sha256(owner)[..32]>`: a sorted set of the owner's task ids scored by creation,
//!   for `tasks/list`; entries whose record expired are dropped when read, and the set expires a
//!   day after its last write (no task outlives that: `server::tasks` caps the TTL).
//!
//! Every command names one key, so the same commands serve one server and a cluster. The state
//! and the lease are written together (one `HSET`, then the expiry, in one `MULTI` on that one
//! key); the cancel flag is written by a script that sets it only on a record that exists, so a
//! cancel after expiry leaves nothing behind.

use std::collections::HashMap;

use redis::Value;
use sha2::{Digest, Sha256};

use super::RedisStore;
use crate::store::tasks::{TaskEntry, TaskId};
use crate::store::ThreadError;
use crate::store::owner::Owner;

/// How long an owner's listing outlives its last write.
const INDEX_TTL_MS: u64 = 86_400_000;

/// Sets the cancel flag of a record that exists.
const CANCEL: &str = "if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], 'cancel', '1') end return 0";

/// Writes the state and lease of a record whose lease is still the one read (`ARGV[1]`), and
/// its expiry: 1 when written, 0 when another instance claimed it first or it is gone.
const CLAIM: &str = "if redis.call('HGET', KEYS[1], 'lease') == ARGV[1] then \
    redis.call('HSET', KEYS[1], 'state', ARGV[2], 'lease', ARGV[3]) \
    redis.call('PEXPIREAT', KEYS[1], ARGV[4]) return 1 end return 0";

impl RedisStore {
    fn task_key(&self, id: TaskId) -> String {
        format!("{}:task:{}", self.prefix, id.hyphenated())
    }

    fn task_index_key(&self, owner: &Owner) -> String {
        let digest = Sha256::digest(owner.as_str().as_bytes());
        format!("{}:tasks:{}", self.prefix, &hex::encode(digest)[..32])
    }

    pub(super) async fn put_task_record(
        &self,
        entry: &TaskEntry,
        expires_ms: u64,
    ) -> Result<(), ThreadError> {
        let key = self.task_key(entry.id);
        let index = self.task_index_key(&entry.owner);
        let _: () = self
            .run(|mut c| {
                let mut pipe = redis::pipe();
                pipe.atomic()
                    .cmd("HSET")
                    .arg(&key)
                    .arg("owner")
                    .arg(entry.owner.as_str())
                    .arg("created")
                    .arg(entry.created_ms)
                    .arg("state")
                    .arg(&entry.state)
                    .arg("lease")
                    .arg(entry.lease_ms)
                    .ignore()
                    .cmd("PEXPIREAT")
                    .arg(&key)
                    .arg(expires_ms)
                    .ignore();
                async move { pipe.query_async(&mut c).await }
            })
            .await?;
        let _: () = self
            .run(|mut c| {
                let mut pipe = redis::pipe();
                pipe.atomic()
                    .cmd("ZADD")
                    .arg(&index)
                    .arg(entry.created_ms)
                    .arg(entry.id.hyphenated().to_string())
                    .ignore()
                    .cmd("PEXPIRE")
                    .arg(&index)
                    .arg(INDEX_TTL_MS)
                    .ignore();
                async move { pipe.query_async(&mut c).await }
            })
            .await?;
        Ok(())
    }

    pub(super) async fn get_task_record(
        &self,
        id: TaskId,
    ) -> Result<Option<TaskEntry>, ThreadError> {
        let key = self.task_key(id);
        let fields: HashMap<String, String> = self
            .run(|mut c| {
                let key = key.clone();
                async move { redis::cmd("HGETALL").arg(key).query_async(&mut c).await }
            })
            .await?;
        Ok(entry_of(id, &fields))
    }

    pub(super) async fn cancel_task_record(&self, id: TaskId) -> Result<(), ThreadError> {
        let key = self.task_key(id);
        let script = redis::Script::new(CANCEL);
        let _: Value = self
            .run(|mut c| {
                let mut inv = script.prepare_invoke();
                inv.key(&key);
                async move { inv.invoke_async(&mut c).await }
            })
            .await?;
        Ok(())
    }

    pub(super) async fn claim_task_record(
        &self,
        entry: &TaskEntry,
        lapsed_lease_ms: u64,
        expires_ms: u64,
    ) -> Result<bool, ThreadError> {
        let key = self.task_key(entry.id);
        let script = redis::Script::new(CLAIM);
        let claimed: i64 = self
            .run(|mut c| {
                let mut inv = script.prepare_invoke();
                inv.key(&key)
                    .arg(lapsed_lease_ms)
                    .arg(&entry.state)
                    .arg(entry.lease_ms)
                    .arg(expires_ms);
                async move { inv.invoke_async(&mut c).await }
            })
            .await?;
        Ok(claimed == 1)
    }

    pub(super) async fn list_task_records(
        &self,
        owner: &Owner,
        limit: usize,
    ) -> Result<Vec<TaskEntry>, ThreadError> {
        let index = self.task_index_key(owner);
        let ids: Vec<String> = self
            .run(|mut c| {
                let index = index.clone();
                async move {
                    redis::cmd("ZREVRANGE")
                        .arg(index)
                        .arg(0)
                        .arg(999)
                        .query_async(&mut c)
                        .await
                }
            })
            .await?;
        let mut out = Vec::new();
        let mut dead = Vec::new();
        for raw in ids {
            if out.len() >= limit {
                break;
            }
            let Ok(id) = raw.parse::<TaskId>() else {
                dead.push(raw);
                continue;
            };
            match self.get_task_record(id).await? {
                Some(e) if &e.owner == owner => out.push(e),
                _ => dead.push(raw),
            }
        }
        if !dead.is_empty() {
            let _: Result<(), ThreadError> = self
                .run(|mut c| {
                    let (index, dead) = (index.clone(), dead.clone());
                    async move {
                        redis::cmd("ZREM")
                            .arg(index)
                            .arg(dead)
                            .query_async(&mut c)
                            .await
                    }
                })
                .await;
        }
        Ok(out)
    }
}

/// A record read back from its hash; `None` when there is none (or it is not ours).
fn entry_of(id: TaskId, fields: &HashMap<String, String>) -> Option<TaskEntry> {
    let number = |name: &str| fields.get(name).and_then(|v| v.parse::<u64>().ok());
    Some(TaskEntry {
        id,
        owner: Owner::stored(Some(fields.get("owner")?)),
        created_ms: number("created")?,
        state: fields.get("state")?.clone(),
        lease_ms: number("lease")?,
        cancel: fields.get("cancel").is_some_and(|v| v == "1"),
    })
}

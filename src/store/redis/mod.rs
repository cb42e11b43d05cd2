//! The Redis thread store, for threads shared by several servers (and restarts), on one Redis
//! server or a Redis Cluster (Valkey the same); `REDIS_URL`'s form says which
//! ([`connection`]).
//!
//! Layout, under the configured key prefix `P` (one prefix per deployment sharing a Redis):
//! - `P:thread:<uuid>`: a hash, the thread's header (`v` format version, `project`, `owner`,
//!   `created_ms`; a header without `owner`, written before owners existed, is `local`; the
//!   listing's summary: `tools`, `first_ms`, `last_ms`, `title`);
//! - `P:thread:<uuid>:turns`: a list, one JSON [`Turn`] per element, oldest first;
//! - `P:project:<sha256(project root)[..32]>` (local threads; `sha256(owner \n project)` for an
//!   HTTP client's): a sorted set of the project's thread ids of one owner, scored by
//!   a per-project write counter, for `continuation_id: "latest"` and listings (pruned of
//!   expired threads when read, capped at [`INDEX_CAP`] entries, and expiring with its newest
//!   thread);
//! - `P:spend:<day>:<sha256(key)[..32]>`: a hash (`tokens`, `micro_usd`) of what a project or
//!   an HTTP client spent that day (UTC), for the daily caps; expires two days later.
//! - `P:front:<sha256>`: a string, a front a call sent and the context cache made of it
//!   (`store::fronts`), expiring with the cache.
//!
//! On a cluster the thread's two keys carry its id as a hash tag, `P:thread:{<uuid>}` and
//! `P:thread:{<uuid>}:turns`, so they live in one slot and an append stays one atomic script;
//! every other key is a single key per command and needs no tag. A single server keeps the
//! untagged names above: what it stored before reads as it always did, no migration. (Moving a
//! deployment from one server to a cluster starts its threads afresh; they live hours.)
//!
//! An append is one Lua script over the thread's keys, so it is atomic: it checks the keys'
//! types (a foreign value is reported as `Corrupt`, never overwritten), refuses another owner's
//! thread (`Foreign`) and a thread that already holds `max_turns`, pushes the turn and refreshes
//! the TTL of both thread keys. Each turn has an id, the digest of its JSON, and the header
//! keeps its position (`turn:<id>`): a turn whose id is there already is not pushed again, since
//! that is the same append retried after its answer was lost (a failover), and it answers as the
//! first did, wherever later turns of other writers put it (a turn stored before turns had ids
//! is recognised as the thread's last one, as before). On one server the same script also updates the project index;
//! on a cluster the index (another slot) is updated by a second script right after, and a
//! listing or `latest` reads the index, then the threads (docs/decisions/0031 says why and
//! what a failure between the two steps leaves). A load is one pipelined round trip
//! (`HGETALL` + `LRANGE`), whatever the number of turns.
//!
//! Durability: Redis replicates asynchronously, so by default a turn is acknowledged once its
//! master has it. With `GEMINI_MCP_REDIS_WAIT_REPLICAS=N` the append is followed, on the same
//! connection, by `WAIT N`: the turn is acknowledged only once N replicas have it, else the
//! call says it could not be saved. N = the replicas of each master means a failover (a master
//! killed, one of its replicas promoted) loses no acknowledged turn.
//!
//! Faults: Redis not answering at start is a startup error naming `REDIS_URL` (no silent
//! fallback). Redis lost later makes calls fail with `Unavailable` while the client reconnects
//! (and, on a cluster, follows `MOVED`/`ASK` and the new topology) in the background; the server
//! keeps serving and works again once Redis is back. On a cluster an attempt that timed out (a
//! master that stopped answering, already replaced by its replica) makes the client read the
//! topology again, and an operation that may be carried out twice without harm (a read, an
//! append) is tried once more; a delete and a daily count added to are not ([`Again`]). The URL (it may hold a password) never
//! appears in a log or an error: only hosts, ports and db.

pub mod connection;
mod fronts;
mod index;
mod scripts;
mod tasks;

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use redis::{RedisError, RedisResult, Script, Value};
use sha2::{Digest, Sha256};

use self::connection::{Connection, Target, Topology, scrub};
use super::tasks::{TaskEntry, TaskId};
use super::now::now_ms;
use super::owner::Owner;
use super::{Thread, ThreadError, ThreadId, ThreadStore, ThreadSummary, Turn};
use crate::secret::Secret;
use crate::caps::{Day, SpendKey, Spent};

/// Format version of the thread header; a header with another version is reported as corrupt.
const FORMAT: &str = "1";
/// Most threads remembered per project for `latest` (the newest are kept).
pub const INDEX_CAP: u32 = 1_000;
/// Deadline for one store operation, reconnection included.
const OP_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for `GEMINI_MCP_REDIS_WAIT_REPLICAS` replicas to confirm a turn.
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(2);
/// Index entries a cluster's `latest` looks at, at most (as the one-server script).
const LATEST_SCAN: usize = 100;

/// What the Redis store is opened with, beside the URL.
#[derive(Debug, Clone)]
pub struct Options {
    pub prefix: String,
    pub ttl: Duration,
    pub max_turns: u32,
    /// Replicas that must confirm a turn before it is acknowledged (0: its master only).
    pub wait_replicas: u32,
    /// PEM roots TLS trusts instead of the system's (`GEMINI_MCP_REDIS_CA_FILE`).
    pub ca_pem: Option<Vec<u8>>,
}

pub struct RedisStore {
    conn: Connection,
    topology: Topology,
    prefix: String,
    ttl: Duration,
    max_turns: u32,
    wait_replicas: u32,
    /// `host:port/db` or the cluster's seed nodes, for messages (never the URL).
    place: String,
    /// The password, to scrub from any error text the driver produces.
    password: Option<String>,
    append: Script,
    index: Script,
    latest: Script,
    list: Script,
    delete: Script,
}

impl RedisStore {
    /// Connects to `url` (one server or a cluster) and checks that Redis answers. Fails with a
    /// message naming `REDIS_URL` (never its value) when the URL is invalid or Redis does not
    /// answer.
    pub async fn connect(url: &Secret, options: Options) -> Result<RedisStore, ThreadError> {
        let target = Target::parse(url.expose()).map_err(|e| ThreadError::Unavailable {
            store: "redis",
            message: e.to_string(),
        })?;
        let place = target.place.clone();
        let startup_error = |e: String| ThreadError::Unavailable {
            store: "redis",
            message: format!(
                "cannot reach Redis at {place} (from REDIS_URL): {e}. Start Redis or correct REDIS_URL; or unset REDIS_URL (or set GEMINI_MCP_STORE=embedded) to keep threads in the embedded store instead"
            ),
        };
        let scrub =
            |e: &RedisError| scrub(&e.to_string(), url.expose(), target.password.as_deref());
        let conn = match tokio::time::timeout(OP_TIMEOUT, target.connect(options.ca_pem.as_deref()))
            .await
        {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(startup_error(scrub(&e))),
            Err(_) => return Err(startup_error("no answer within 10 s".into())),
        };
        let (append, delete) = match target.topology {
            Topology::Single => (scripts::APPEND, scripts::DELETE),
            Topology::Cluster => (scripts::APPEND_THREAD, scripts::DELETE_THREAD),
        };
        let store = RedisStore {
            conn,
            topology: target.topology,
            prefix: options.prefix.clone(),
            ttl: options.ttl,
            max_turns: options.max_turns,
            wait_replicas: options.wait_replicas,
            place: place.clone(),
            password: target.password.clone(),
            append: Script::new(append),
            index: Script::new(scripts::INDEX),
            latest: Script::new(scripts::LATEST),
            list: Script::new(scripts::LIST),
            delete: Script::new(delete),
        };
        store.ping().await.map_err(|e| match e {
            ThreadError::Unavailable { message, .. } => startup_error(message),
            other => other,
        })?;
        tracing::info!(redis = %place, prefix = options.prefix, "Redis thread store connected");
        Ok(store)
    }

    /// The thread's header: tagged with its id on a cluster, so its turns share its slot.
    fn header_key(&self, id: &str) -> String {
        match self.topology {
            Topology::Single => format!("{}:thread:{id}", self.prefix),
            Topology::Cluster => format!("{}:thread:{{{id}}}", self.prefix),
        }
    }

    fn turns_key(&self, id: &str) -> String {
        format!("{}:turns", self.header_key(id))
    }

    /// What `key` (a project or a client) spent on `day`: a hash, expiring two days later.
    fn spend_key(&self, key: &SpendKey, day: Day) -> String {
        spend_key(&self.prefix, key, day)
    }

    /// The `latest` index of `owner`'s threads in `project` (local threads keep the key they had
    /// before owners existed).
    fn index_key(&self, project: &str, owner: &Owner) -> String {
        let digest = if owner.is_local() {
            Sha256::digest(project.as_bytes())
        } else {
            Sha256::digest(format!("{}\n{project}", owner.as_str()).as_bytes())
        };
        format!("{}:project:{}", self.prefix, &hex::encode(digest)[..32])
    }

    fn ttl_hours(&self) -> f64 {
        self.ttl.as_secs_f64() / 3600.0
    }

    fn unavailable(&self, e: &RedisError) -> ThreadError {
        let detail = scrub(&e.to_string(), "", self.password.as_deref());
        tracing::warn!(redis = %self.place, error = %detail, "Redis thread store failed");
        ThreadError::Unavailable {
            store: "redis",
            message: format!(
                "Redis at {} did not answer ({detail}). The server keeps serving and reconnects by itself: try again shortly (a call without continuation_id still gets an answer, but it can be continued only once Redis is back)",
                self.place
            ),
        }
    }

    fn corrupt(&self, id: impl ToString, why: impl Into<String>) -> ThreadError {
        let message = why.into();
        tracing::warn!(thread = %id.to_string(), %message, "unreadable thread in Redis");
        ThreadError::Corrupt {
            id: id.to_string(),
            message,
        }
    }

    /// Runs `op` on a clone of the connection under [`OP_TIMEOUT`]: an operation that may be
    /// carried out twice without harm (a read, an append recognised by its turn's id). When the
    /// connection was refused (Redis was down at the last attempt, so nothing was sent) it tries
    /// once more: the client reconnects on the first failure, and the retry uses the fresh
    /// connection. When the attempt timed out on a cluster, it tries once more after the client
    /// read the topology again (a master that stopped answering was replaced: `connection`).
    async fn run<T, F, Fut>(&self, op: F) -> Result<T, ThreadError>
    where
        F: Fn(Connection) -> Fut,
        Fut: Future<Output = Result<T, RedisError>>,
    {
        self.run_as(Again::AfterTimeout, op).await
    }

    /// As [`run`](Self::run), for an operation that must not be carried out twice (a delete
    /// that answers whether it found the thread, a count added to): not sent again after a
    /// timeout, since its first attempt may have been carried out.
    async fn run_once<T, F, Fut>(&self, op: F) -> Result<T, ThreadError>
    where
        F: Fn(Connection) -> Fut,
        Fut: Future<Output = Result<T, RedisError>>,
    {
        self.run_as(Again::Never, op).await
    }

    async fn run_as<T, F, Fut>(&self, again: Again, op: F) -> Result<T, ThreadError>
    where
        F: Fn(Connection) -> Fut,
        Fut: Future<Output = Result<T, RedisError>>,
    {
        let attempt = || async {
            match tokio::time::timeout(OP_TIMEOUT, op(self.conn.clone())).await {
                Ok(r) => r.map_err(Some),
                Err(_) => Err(None),
            }
        };
        let generation = self.conn.generation();
        let result = match attempt().await {
            Err(Some(e)) if e.is_connection_refusal() => attempt().await,
            Err(e)
                if again == Again::AfterTimeout
                    && e.as_ref().is_none_or(RedisError::is_timeout)
                    && self.conn.renew(generation).await =>
            {
                attempt().await
            }
            other => other,
        };
        result.map_err(|e| match e {
            Some(e) => self.unavailable(&e),
            None => ThreadError::Unavailable {
                store: "redis",
                message: format!(
                    "Redis at {} did not answer within {} s; try again shortly",
                    self.place,
                    OP_TIMEOUT.as_secs()
                ),
            },
        })
    }

    /// Runs the append script (`EVALSHA`, loading the script where a node lacks it, as a
    /// promoted replica does) and, with `wait_replicas`, `WAIT` right behind it on the same
    /// connection (a pipeline goes to the script's node as one unit). Returns the script's
    /// answer and how many replicas confirmed it.
    async fn append_and_wait(
        &self,
        keys: &[&str],
        args: &AppendArgs<'_>,
    ) -> Result<(Vec<Value>, Option<i64>), ThreadError> {
        let mut eval = redis::cmd("EVALSHA");
        eval.arg(self.append.get_hash()).arg(keys.len()).arg(keys);
        eval.arg(args);
        let mut pipe = redis::pipe();
        pipe.ignore_errors().add_command(eval);
        if self.wait_replicas > 0 {
            pipe.cmd("WAIT")
                .arg(self.wait_replicas)
                .arg(WAIT_TIMEOUT.as_millis() as u64);
        }
        let replies: Vec<RedisResult<Value>> = self
            .run(|mut c| {
                let pipe = &pipe;
                async move {
                    let replies: Vec<RedisResult<Value>> = pipe.query_async(&mut c).await?;
                    match replies.first() {
                        Some(Err(e)) if e.code() == Some("NOSCRIPT") => {
                            self.append.load_async(&mut c).await?;
                            pipe.query_async(&mut c).await
                        }
                        _ => Ok(replies),
                    }
                }
            })
            .await?;
        let mut replies = replies.into_iter();
        let answer = match replies.next() {
            Some(Ok(v)) => redis::from_redis_value(v)
                .map_err(|_| self.corrupt("append", "unexpected answer from the append script"))?,
            Some(Err(e)) => return Err(self.unavailable(&e)),
            None => Vec::new(),
        };
        let confirmed = match replies.next() {
            Some(Ok(Value::Int(n))) => Some(n),
            Some(Err(e)) => return Err(self.unavailable(&e)),
            _ => None,
        };
        Ok((answer, confirmed))
    }

    /// A cluster's second step of an append: the thread put first in its project's index. A
    /// failure is logged, not returned: the turn is stored and its thread can be continued by
    /// id; it is missing from `latest` and listings only until its next turn indexes it again.
    async fn index_after_append(&self, index: &str, args: &AppendArgs<'_>) {
        let outcome: Result<Vec<Value>, ThreadError> = self
            .run(|mut c| {
                let mut inv = self.index.prepare_invoke();
                inv.key(index);
                inv.arg(args.without_turn());
                async move { inv.invoke_async(&mut c).await }
            })
            .await;
        let failed = match &outcome {
            Ok(reply) => match reply.first() {
                Some(v)
                    if redis::from_redis_value_ref::<String>(v).ok().as_deref() == Some("ok") =>
                {
                    return;
                }
                _ => format!("{:?}", reply.get(1)),
            },
            Err(e) => e.to_string(),
        };
        tracing::warn!(
            thread = args.id,
            error = %failed,
            "the turn is stored, but its project index was not updated; the thread is left out of \
             `latest` and listings until its next turn"
        );
    }
}

/// Whether an operation is sent again after an attempt that timed out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Again {
    /// Once, after a cluster's topology was read again: carrying it out twice does no harm.
    AfterTimeout,
    /// Never: its first attempt may have been carried out.
    Never,
}

/// The arguments of the append scripts (ARGV), in their order.
#[derive(Clone, Copy)]
struct AppendArgs<'a> {
    project: &'a str,
    json: &'a str,
    max_turns: u32,
    ttl_ms: u64,
    id: &'a str,
    created_ms: u64,
    owner: &'a str,
    tool: &'a str,
    at_ms: u64,
    title: &'a str,
    /// The turn's id: the digest of its JSON, the same for every attempt of one append.
    turn_id: &'a str,
}

impl<'a> AppendArgs<'a> {
    /// The same, without the turn's text (the index script does not read it).
    fn without_turn(&self) -> AppendArgs<'a> {
        AppendArgs {
            json: "",
            title: "",
            ..*self
        }
    }
}

/// The script's ARGV, in order.
impl redis::ToRedisArgs for AppendArgs<'_> {
    fn write_redis_args<W>(&self, out: &mut W)
    where
        W: ?Sized + redis::RedisWrite,
    {
        self.project.write_redis_args(out);
        self.json.write_redis_args(out);
        self.max_turns.write_redis_args(out);
        self.ttl_ms.write_redis_args(out);
        self.id.write_redis_args(out);
        self.created_ms.write_redis_args(out);
        FORMAT.write_redis_args(out);
        INDEX_CAP.write_redis_args(out);
        self.owner.write_redis_args(out);
        self.tool.write_redis_args(out);
        self.at_ms.write_redis_args(out);
        self.title.write_redis_args(out);
        self.turn_id.write_redis_args(out);
    }

    fn num_of_args(&self) -> usize {
        13
    }
}

#[async_trait::async_trait]
impl ThreadStore for RedisStore {
    async fn load(&self, id: ThreadId) -> Result<Thread, ThreadError> {
        let header_key = self.header_key(&id.to_string());
        let turns_key = self.turns_key(&id.to_string());
        let replies: Vec<redis::RedisResult<Value>> = self
            .run(|mut c| {
                let mut pipe = redis::pipe();
                pipe.ignore_errors()
                    .cmd("HGETALL")
                    .arg(&header_key)
                    .cmd("LRANGE")
                    .arg(&turns_key)
                    .arg(0)
                    .arg(-1);
                async move { pipe.query_async(&mut c).await }
            })
            .await?;
        let mut replies = replies.into_iter();
        let (Some(header), Some(turns)) = (replies.next(), replies.next()) else {
            return Err(self.corrupt(id, "Redis answered the load with too few replies"));
        };
        let wrong_type = |e: RedisError, what: &str| {
            if e.code() == Some("WRONGTYPE") {
                self.corrupt(id, format!("its {what} key holds a value of another type"))
            } else {
                self.unavailable(&e)
            }
        };
        let header: HashMap<String, String> = match header {
            Ok(v) => redis::from_redis_value(v)
                .map_err(|e| self.corrupt(id, format!("unreadable header: {e}")))?,
            Err(e) => return Err(wrong_type(e, "header")),
        };
        let turns: Vec<Vec<u8>> = match turns {
            Ok(v) => redis::from_redis_value(v)
                .map_err(|e| self.corrupt(id, format!("unreadable turns: {e}")))?,
            Err(e) => return Err(wrong_type(e, "turns")),
        };
        if header.is_empty() {
            if turns.is_empty() {
                return Err(ThreadError::NotFound {
                    id: id.to_string(),
                    ttl_hours: self.ttl_hours(),
                });
            }
            return Err(self.corrupt(id, "it has turns but no header"));
        }
        if header.get("v").map(String::as_str) != Some(FORMAT) {
            return Err(self.corrupt(id, "its header has an unknown format version"));
        }
        let Some(project) = header.get("project") else {
            return Err(self.corrupt(id, "its header names no project"));
        };
        if turns.is_empty() {
            return Err(self.corrupt(id, "its header has no turns"));
        }
        let owner = Owner::stored(header.get("owner").map(String::as_str));
        let turns = turns
            .iter()
            .enumerate()
            .map(|(i, raw)| {
                serde_json::from_slice::<Turn>(raw)
                    .map_err(|e| self.corrupt(id, format!("turn {} is not a turn: {e}", i + 1)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Thread {
            id,
            project: project.clone(),
            owner,
            turns,
        })
    }

    async fn latest(&self, project: &str, owner: &Owner) -> Result<Option<ThreadId>, ThreadError> {
        let index = self.index_key(project, owner);
        let id = match self.topology {
            Topology::Cluster => self.latest_from_index(&index).await?,
            Topology::Single => {
                let thread_prefix = format!("{}:thread:", self.prefix);
                let reply: Vec<String> = self
                    .run(|mut c| {
                        let mut inv = self.latest.prepare_invoke();
                        inv.key(&index).arg(&thread_prefix);
                        async move { inv.invoke_async(&mut c).await }
                    })
                    .await?;
                match reply.as_slice() {
                    [status, id] if status == "ok" => Some(id.clone()),
                    [status] if status == "none" => None,
                    [status, why] if status == "corrupt" => {
                        return Err(self.corrupt(&index, why.as_str()));
                    }
                    _ => {
                        return Err(
                            self.corrupt(&index, "unexpected answer from the latest-thread script")
                        );
                    }
                }
            }
        };
        id.map(|id| {
            id.parse::<ThreadId>().map_err(|_| {
                self.corrupt(
                    &id,
                    "the project index holds an entry that is not a thread id",
                )
            })
        })
        .transpose()
    }

    async fn append(
        &self,
        id: ThreadId,
        project: &str,
        owner: &Owner,
        turn: &Turn,
    ) -> Result<u32, ThreadError> {
        let json = serde_json::to_string(turn)
            .map_err(|e| self.corrupt(id, format!("the turn cannot be encoded: {e}")))?;
        let thread = id.to_string();
        let (header, turns, index) = (
            self.header_key(&thread),
            self.turns_key(&thread),
            self.index_key(project, owner),
        );
        let title = super::title_of(&turn.request);
        let turn_id = turn_id(&json);
        let args = AppendArgs {
            project,
            json: &json,
            max_turns: self.max_turns,
            ttl_ms: self.ttl.as_millis().max(1) as u64,
            id: &thread,
            created_ms: now_ms(),
            owner: owner.as_str(),
            tool: &turn.tool,
            at_ms: turn.at_ms,
            title: &title,
            turn_id: &turn_id,
        };
        let keys: &[&str] = match self.topology {
            Topology::Single => &[&header, &turns, &index],
            Topology::Cluster => &[&header, &turns],
        };
        let (reply, confirmed) = self.append_and_wait(keys, &args).await?;
        let status = reply
            .first()
            .and_then(|v| redis::from_redis_value_ref::<String>(v).ok());
        let detail = reply.get(1);
        let count = match (status.as_deref(), detail) {
            (Some("ok"), Some(Value::Int(n))) => *n as u32,
            (Some("foreign"), _) => return Err(ThreadError::Foreign { id: thread }),
            (Some("full"), _) => {
                return Err(ThreadError::Full {
                    id: thread,
                    max: self.max_turns,
                });
            }
            (Some("corrupt"), Some(v)) => {
                return Err(self.corrupt(
                    id,
                    redis::from_redis_value_ref::<String>(v)
                        .unwrap_or_else(|_| "unreadable".into()),
                ));
            }
            _ => return Err(self.corrupt(id, "unexpected answer from the append script")),
        };
        if self.topology == Topology::Cluster {
            self.index_after_append(&index, &args).await;
        }
        if let Some(confirmed) = confirmed
            && confirmed < i64::from(self.wait_replicas)
        {
            tracing::warn!(redis = %self.place, confirmed, wanted = self.wait_replicas, "a turn was not confirmed by enough replicas");
            return Err(ThreadError::Unavailable {
                store: "redis",
                message: format!(
                    "the turn reached Redis at {} but only {confirmed} of {} replica(s) confirmed it within {} ms (GEMINI_MCP_REDIS_WAIT_REPLICAS), so a failover could lose it; try again shortly, or set GEMINI_MCP_REDIS_WAIT_REPLICAS to at most the replicas each master has",
                    self.place,
                    self.wait_replicas,
                    WAIT_TIMEOUT.as_millis()
                ),
            });
        }
        Ok(count)
    }

    async fn list(
        &self,
        project: &str,
        owner: &Owner,
        limit: usize,
    ) -> Result<Vec<ThreadSummary>, ThreadError> {
        let index = self.index_key(project, owner);
        if self.topology == Topology::Cluster {
            return self.list_from_index(&index, limit).await;
        }
        let thread_prefix = format!("{}:thread:", self.prefix);
        let reply: Vec<Value> = self
            .run(|mut c| {
                let mut inv = self.list.prepare_invoke();
                inv.key(&index).arg(&thread_prefix).arg(limit);
                async move { inv.invoke_async(&mut c).await }
            })
            .await?;
        let text = |v: &Value| redis::from_redis_value_ref::<String>(v).unwrap_or_default();
        match reply.first().map(text).as_deref() {
            Some("ok") => {}
            Some("corrupt") => {
                let why = reply.get(1).map(text).unwrap_or_default();
                return Err(self.corrupt(&index, why.as_str()));
            }
            _ => return Err(self.corrupt(&index, "unexpected answer from the listing script")),
        }
        reply[1..]
            .iter()
            .map(|row| match row {
                Value::Array(f) => Ok(summary(f)),
                _ => Err(self.corrupt(&index, "the listing script returned a bad row")),
            })
            .collect()
    }

    async fn delete(&self, id: ThreadId, owner: &Owner) -> Result<bool, ThreadError> {
        // The index is the owner's own; a foreign thread is refused before it is touched.
        let thread = id.to_string();
        let header = self.header_key(&thread);
        let stored: Option<String> = self
            .run(|mut c| {
                let header = header.clone();
                async move {
                    redis::cmd("HGET")
                        .arg(header)
                        .arg("project")
                        .query_async(&mut c)
                        .await
                }
            })
            .await?;
        let Some(project) = stored else {
            return Ok(false);
        };
        let (turns, index) = (self.turns_key(&thread), self.index_key(&project, owner));
        let reply: Vec<Value> = self
            .run_once(|mut c| {
                let mut inv = self.delete.prepare_invoke();
                inv.key(&header).key(&turns);
                if self.topology == Topology::Single {
                    inv.key(&index);
                }
                inv.arg(owner.as_str()).arg(&thread);
                async move { inv.invoke_async(&mut c).await }
            })
            .await?;
        match reply
            .first()
            .and_then(|v| redis::from_redis_value_ref::<String>(v).ok())
            .as_deref()
        {
            Some("ok") => {
                if self.topology == Topology::Cluster {
                    self.unindex(&index, &[thread]).await;
                }
                Ok(true)
            }
            Some("none") => Ok(false),
            Some("foreign") => Err(ThreadError::Foreign { id: thread }),
            _ => Err(self.corrupt(id, "unexpected answer from the delete script")),
        }
    }

    async fn add_spend(&self, key: &SpendKey, day: Day, add: Spent) -> Result<Spent, ThreadError> {
        let k = self.spend_key(key, day);
        let (tokens, micro): (u64, u64) = self
            .run_once(|mut c| {
                let k = k.clone();
                async move {
                    let mut p = redis::pipe();
                    p.atomic()
                        .cmd("HINCRBY")
                        .arg(&k)
                        .arg("tokens")
                        .arg(add.tokens)
                        .cmd("HINCRBY")
                        .arg(&k)
                        .arg("micro_usd")
                        .arg(add.micro_usd)
                        .cmd("EXPIRE")
                        .arg(&k)
                        .arg(2 * 86_400)
                        .ignore();
                    p.query_async(&mut c).await
                }
            })
            .await?;
        Ok(Spent {
            tokens,
            micro_usd: micro,
        })
    }

    async fn spent(&self, key: &SpendKey, day: Day) -> Result<Spent, ThreadError> {
        let k = self.spend_key(key, day);
        let (tokens, micro): (Option<u64>, Option<u64>) = self
            .run(|mut c| {
                let k = k.clone();
                async move {
                    redis::cmd("HMGET")
                        .arg(k)
                        .arg("tokens")
                        .arg("micro_usd")
                        .query_async(&mut c)
                        .await
                }
            })
            .await?;
        Ok(Spent {
            tokens: tokens.unwrap_or(0),
            micro_usd: micro.unwrap_or(0),
        })
    }

    async fn ping(&self) -> Result<(), ThreadError> {
        let pong: String = self
            .run(|mut c| async move { redis::cmd("PING").query_async(&mut c).await })
            .await?;
        if pong == "PONG" {
            Ok(())
        } else {
            Err(ThreadError::Unavailable {
                store: "redis",
                message: format!("Redis at {} answered PING with something else", self.place),
            })
        }
    }

    fn kind(&self) -> &'static str {
        "redis"
    }

    async fn put_task(&self, entry: &TaskEntry, expires_ms: u64) -> Result<(), ThreadError> {
        self.put_task_record(entry, expires_ms).await
    }

    async fn claim_task(
        &self,
        entry: &TaskEntry,
        lapsed_lease_ms: u64,
        expires_ms: u64,
    ) -> Result<bool, ThreadError> {
        self.claim_task_record(entry, lapsed_lease_ms, expires_ms)
            .await
    }

    async fn get_task(&self, id: TaskId) -> Result<Option<TaskEntry>, ThreadError> {
        self.get_task_record(id).await
    }

    async fn cancel_task(&self, id: TaskId) -> Result<(), ThreadError> {
        self.cancel_task_record(id).await
    }

    async fn list_tasks(&self, owner: &Owner, limit: usize) -> Result<Vec<TaskEntry>, ThreadError> {
        self.list_task_records(owner, limit).await
    }

    async fn seen_front(
        &self,
        key: &str,
    ) -> Result<Option<super::fronts::SeenFront>, ThreadError> {
        self.get_front(key).await
    }

    async fn keep_front(
        &self,
        key: &str,
        front: &super::fronts::SeenFront,
        expires_ms: u64,
    ) -> Result<(), ThreadError> {
        self.put_front(key, front, expires_ms).await
    }
}

/// A listing's row, `{id, turns, tools, first_ms, last_ms, title}`, as the listing script and
/// a cluster's listing both make it.
fn summary(f: &[Value]) -> ThreadSummary {
    let text = |v: &Value| redis::from_redis_value_ref::<String>(v).unwrap_or_default();
    let get = |i: usize| f.get(i).map(text).unwrap_or_default();
    let num = |i: usize| match f.get(i) {
        Some(Value::Int(n)) => (*n).max(0) as u64,
        Some(v) => text(v).parse().unwrap_or(0),
        None => 0,
    };
    ThreadSummary {
        id: get(0),
        turns: num(1) as u32,
        tools: get(2)
            .split(' ')
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect(),
        created_ms: num(3),
        last_ms: num(4),
        title: get(5),
    }
}

/// A turn's id, `hex(sha256(json))[..32]`: an append sent twice (its first answer lost) carries
/// the same id, and the script stores the turn once. Two turns alike to the byte (the same
/// request, answer, model, usage and millisecond) are one turn.
fn turn_id(json: &str) -> String {
    hex::encode(Sha256::digest(json.as_bytes()))[..32].to_string()
}

/// The hash of what `key` spent on `day` under `prefix`: the digest of the key's stored form.
fn spend_key(prefix: &str, key: &SpendKey, day: Day) -> String {
    format!(
        "{prefix}:spend:{day}:{}",
        &hex::encode(Sha256::digest(key.stored().as_bytes()))[..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Redis keys of the daily counts are those of the string keys before them: a day
    /// counted by an earlier version keeps counting.
    #[test]
    fn spend_keys_are_the_ones_stored_before() {
        let day = Day::of_ms(1_763_942_400_000);
        assert_eq!(
            spend_key("gm", &SpendKey::Project("/p".into()), day),
            "gm:spend:2025-11-24:98811ff0f591d31b3e9ad19d0aad55a0"
        );
        assert_eq!(
            spend_key("gm", &SpendKey::Client("abc".into()), day),
            "gm:spend:2025-11-24:b3829a463c0a715f98f20be8a7c5646c"
        );
    }

    #[tokio::test]
    async fn invalid_url_names_the_setting_not_the_value() {
        let url = Secret::new("notaurl://:topsecret@@");
        let options = Options {
            prefix: "p".into(),
            ttl: Duration::from_secs(60),
            max_turns: 5,
            wait_replicas: 0,
            ca_pem: None,
        };
        let Err(e) = RedisStore::connect(&url, options).await else {
            panic!("an invalid URL was accepted");
        };
        let msg = e.to_string();
        assert!(msg.contains("REDIS_URL"), "{msg}");
        assert!(!msg.contains("topsecret"), "{msg}");
    }
}

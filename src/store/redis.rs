//! The Redis thread store, for threads shared by several servers (and restarts).
//!
//! Layout, under the configured key prefix `P` (one prefix per deployment sharing a Redis):
//! - `P:thread:<uuid>`: a hash, the thread's header (`v` format version, `project`, `owner`,
//!   `created_ms`; a header without `owner`, written before owners existed, is `local`);
//! - `P:thread:<uuid>:turns`: a list, one JSON [`Turn`] per element, oldest first;
//! - `P:project:<sha256(project root)[..32]>` (local threads; `sha256(owner \n project)` for an
//!   HTTP client's): a sorted set of the project's thread ids of one owner, scored by
//!   a per-project write counter, for `continuation_id: "latest"` (pruned of expired threads
//!   when read, capped at [`INDEX_CAP`] entries, and expiring with its newest thread);
//! - `P:spend:<day>:<sha256(key)[..32]>`: a hash (`tokens`, `micro_usd`) of what a project or
//!   an HTTP client spent that day (UTC), for the daily caps; expires two days later.
//!
//! An append is one Lua script, so it is atomic: it checks the keys' types (a foreign value is
//! reported as `Corrupt`, never overwritten), refuses another owner's thread (`Foreign`) and a
//! thread that already holds `max_turns`,
//! pushes the turn, refreshes the TTL of both thread keys and updates the project index. A load is
//! one pipelined round trip (`HGETALL` + `LRANGE`), whatever the number of turns.
//!
//! Faults: Redis not answering at start is a startup error naming `REDIS_URL` (no silent
//! fallback). Redis lost later makes calls fail with `Unavailable` while the connection manager
//! reconnects in the background; the server keeps serving and works again once Redis is back.
//! The URL (it may hold a password) never appears in a log or an error: only host, port and db.
//! Redis Cluster is not supported (the `latest` script reads keys it derives from the index).

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, Script, Value};
use sha2::{Digest, Sha256};

use super::{Owner, Thread, ThreadError, ThreadId, ThreadStore, ThreadSummary, Turn, now_ms};
use crate::secret::Secret;
use crate::spend::{Day, SpendKey, Spent};

/// Format version of the thread header; a header with another version is reported as corrupt.
const FORMAT: &str = "1";
/// Most threads remembered per project for `latest` (the newest are kept).
pub const INDEX_CAP: u32 = 1_000;
/// Deadline for one store operation, reconnection included.
const OP_TIMEOUT: Duration = Duration::from_secs(10);
/// Deadline for one connection attempt.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Deadline for one command's answer on an open connection.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Appends one turn. KEYS: header, turns, project index. ARGV: project, turn JSON, max turns,
/// TTL in ms, thread id, created_ms, format version, index cap, owner, the turn's tool, its time
/// (ms), the title. The header keeps a listing's summary: `tools` (space-separated, first use
/// first), `last_ms`, `title` and `first_ms` (set by the first turn).
/// Returns `{"ok", count}`, `{"full", count}`, `{"foreign"}` or `{"corrupt", why}`.
const APPEND: &str = r#"
local header_t = redis.call('TYPE', KEYS[1])['ok']
local turns_t = redis.call('TYPE', KEYS[2])['ok']
local index_t = redis.call('TYPE', KEYS[3])['ok']
if header_t ~= 'none' and header_t ~= 'hash' then
  return {'corrupt', 'its key holds a ' .. header_t .. ', not a thread header'}
end
if turns_t ~= 'none' and turns_t ~= 'list' then
  return {'corrupt', 'its turns key holds a ' .. turns_t .. ', not a list of turns'}
end
if index_t ~= 'none' and index_t ~= 'zset' then
  return {'corrupt', 'the project index holds a ' .. index_t .. ', not a sorted set'}
end
if header_t == 'none' then
  if turns_t ~= 'none' then
    return {'corrupt', 'it has turns but no header'}
  end
  redis.call('HSET', KEYS[1], 'v', ARGV[7], 'project', ARGV[1], 'created_ms', ARGV[6], 'owner', ARGV[9])
else
  if redis.call('HGET', KEYS[1], 'v') ~= ARGV[7] then
    return {'corrupt', 'its header has an unknown format version'}
  end
  local owner = redis.call('HGET', KEYS[1], 'owner')
  if not owner or owner == '' then owner = 'local' end
  if owner ~= ARGV[9] then
    return {'foreign'}
  end
  if turns_t == 'none' then
    return {'corrupt', 'its header has no turns'}
  end
end
local n = redis.call('LLEN', KEYS[2])
if n >= tonumber(ARGV[3]) then
  return {'full', n}
end
n = redis.call('RPUSH', KEYS[2], ARGV[2])
local tools = redis.call('HGET', KEYS[1], 'tools') or ''
if not string.find(' ' .. tools .. ' ', ' ' .. ARGV[10] .. ' ', 1, true) then
  if tools == '' then tools = ARGV[10] else tools = tools .. ' ' .. ARGV[10] end
end
redis.call('HSET', KEYS[1], 'tools', tools, 'last_ms', ARGV[11])
if redis.call('HEXISTS', KEYS[1], 'title') == 0 then
  redis.call('HSET', KEYS[1], 'title', ARGV[12], 'first_ms', ARGV[11])
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
local top = redis.call('ZREVRANGE', KEYS[3], 0, 0, 'WITHSCORES')
local score = 1
if top[2] then score = tonumber(top[2]) + 1 end
redis.call('ZADD', KEYS[3], score, ARGV[5])
redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -(tonumber(ARGV[8]) + 1))
redis.call('PEXPIRE', KEYS[3], ARGV[4])
return {'ok', n}
"#;

/// The newest live thread of a project. KEYS: project index. ARGV: thread key prefix.
/// Drops index entries whose thread has expired. Returns `{"ok", id}`, `{"none"}` or
/// `{"corrupt", why}`.
const LATEST: &str = r#"
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then return {'none'} end
if t ~= 'zset' then
  return {'corrupt', 'the project index holds a ' .. t .. ', not a sorted set'}
end
for _ = 1, 100 do
  local top = redis.call('ZREVRANGE', KEYS[1], 0, 0)
  if not top[1] then return {'none'} end
  if redis.call('EXISTS', ARGV[1] .. top[1]) == 1 then return {'ok', top[1]} end
  redis.call('ZREM', KEYS[1], top[1])
end
return {'none'}
"#;

/// A listing. KEYS: project index. ARGV: thread key prefix, limit. Newest first; drops index
/// entries whose thread has expired. Returns `{"ok", {id, turns, tools, first_ms, last_ms,
/// title}…}` or `{"corrupt", why}`. Bounded: one pass over at most the index's cap.
const LIST: &str = r#"
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then return {'ok'} end
if t ~= 'zset' then
  return {'corrupt', 'the project index holds a ' .. t .. ', not a sorted set'}
end
local out = {'ok'}
local limit = tonumber(ARGV[2])
for _, id in ipairs(redis.call('ZREVRANGE', KEYS[1], 0, -1)) do
  if #out - 1 >= limit then break end
  local h = ARGV[1] .. id
  if redis.call('EXISTS', h) == 0 then
    redis.call('ZREM', KEYS[1], id)
  else
    local f = redis.call('HMGET', h, 'tools', 'first_ms', 'last_ms', 'title', 'created_ms')
    local n = redis.call('LLEN', h .. ':turns')
    table.insert(out, {id, n, f[1] or '', f[2] or f[5] or '0', f[3] or f[5] or '0', f[4] or ''})
  end
end
return out
"#;

/// Deletes a thread. KEYS: header, turns, project index. ARGV: owner, thread id.
/// Returns `{"ok"}`, `{"none"}` or `{"foreign"}`.
const DELETE: &str = r#"
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then return {'none'} end
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner or owner == '' then owner = 'local' end
if owner ~= ARGV[1] then return {'foreign'} end
redis.call('DEL', KEYS[1], KEYS[2])
if redis.call('TYPE', KEYS[3])['ok'] == 'zset' then redis.call('ZREM', KEYS[3], ARGV[2]) end
return {'ok'}
"#;

pub struct RedisStore {
    conn: ConnectionManager,
    prefix: String,
    ttl: Duration,
    max_turns: u32,
    /// `host:port/db`, for messages (never the URL: it may hold a password).
    place: String,
    /// The password, to scrub from any error text the driver produces.
    password: Option<String>,
    append: Script,
    latest: Script,
    list: Script,
    delete: Script,
}

impl RedisStore {
    /// Connects to `url` and checks that Redis answers. Fails with a message naming `REDIS_URL`
    /// (never its value) when the URL is invalid or Redis does not answer.
    pub async fn connect(
        url: &Secret,
        prefix: &str,
        ttl: Duration,
        max_turns: u32,
    ) -> Result<RedisStore, ThreadError> {
        let client = redis::Client::open(url.expose()).map_err(|_| ThreadError::Unavailable {
            store: "redis",
            message: "REDIS_URL is not a valid Redis URL; expected redis://[user:password@]host:port/db (or rediss:// for TLS)".into(),
        })?;
        let info = client.get_connection_info();
        let place = format!("{}/{}", info.addr(), info.redis_settings().db());
        let password = info
            .redis_settings()
            .password()
            .filter(|p| !p.is_empty())
            .map(String::from);
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(100))
            .set_max_delay(Duration::from_secs(1));
        let startup_error = |e: String| ThreadError::Unavailable {
            store: "redis",
            message: format!(
                "cannot reach Redis at {place} (from REDIS_URL): {e}. Start Redis or correct REDIS_URL; or unset REDIS_URL (or set GEMINI_MCP_STORE=embedded) to keep threads in the embedded store instead"
            ),
        };
        let scrub = |e: &RedisError| scrub(&e.to_string(), url.expose(), password.as_deref());
        let conn = match tokio::time::timeout(
            OP_TIMEOUT,
            ConnectionManager::new_with_config(client, config),
        )
        .await
        {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(startup_error(scrub(&e))),
            Err(_) => return Err(startup_error("no answer within 10 s".into())),
        };
        let store = RedisStore {
            conn,
            prefix: prefix.to_string(),
            ttl,
            max_turns,
            place: place.clone(),
            password,
            append: Script::new(APPEND),
            latest: Script::new(LATEST),
            list: Script::new(LIST),
            delete: Script::new(DELETE),
        };
        store.ping().await.map_err(|e| match e {
            ThreadError::Unavailable { message, .. } => startup_error(message),
            other => other,
        })?;
        tracing::info!(redis = %place, prefix, "Redis thread store connected");
        Ok(store)
    }

    fn header_key(&self, id: ThreadId) -> String {
        format!("{}:thread:{id}", self.prefix)
    }

    fn turns_key(&self, id: ThreadId) -> String {
        format!("{}:thread:{id}:turns", self.prefix)
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

    /// Runs `op` on a clone of the managed connection under [`OP_TIMEOUT`]. When the connection
    /// was refused (Redis was down at the last attempt, so nothing was sent) it tries once more:
    /// the manager reconnects on the first failure, and the retry uses the fresh connection.
    async fn run<T, F, Fut>(&self, op: F) -> Result<T, ThreadError>
    where
        F: Fn(ConnectionManager) -> Fut,
        Fut: Future<Output = Result<T, RedisError>>,
    {
        let attempt = || async {
            match tokio::time::timeout(OP_TIMEOUT, op(self.conn.clone())).await {
                Ok(r) => r.map_err(Some),
                Err(_) => Err(None),
            }
        };
        let result = match attempt().await {
            Err(Some(e)) if e.is_connection_refusal() => attempt().await,
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
}

#[async_trait::async_trait]
impl ThreadStore for RedisStore {
    async fn load(&self, id: ThreadId) -> Result<Thread, ThreadError> {
        let header_key = self.header_key(id);
        let turns_key = self.turns_key(id);
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
        let thread_prefix = format!("{}:thread:", self.prefix);
        let reply: Vec<String> = self
            .run(|mut c| {
                let mut inv = self.latest.prepare_invoke();
                inv.key(&index).arg(&thread_prefix);
                async move { inv.invoke_async(&mut c).await }
            })
            .await?;
        match reply.as_slice() {
            [status, id] if status == "ok" => id.parse::<ThreadId>().map(Some).map_err(|_| {
                self.corrupt(
                    id,
                    "the project index holds an entry that is not a thread id",
                )
            }),
            [status] if status == "none" => Ok(None),
            [status, why] if status == "corrupt" => Err(self.corrupt(&index, why.as_str())),
            _ => Err(self.corrupt(&index, "unexpected answer from the latest-thread script")),
        }
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
        let (header, turns, index) = (
            self.header_key(id),
            self.turns_key(id),
            self.index_key(project, owner),
        );
        let ttl_ms = self.ttl.as_millis().max(1) as u64;
        let created = now_ms();
        let title = super::title_of(&turn.request);
        let reply: Vec<Value> = self
            .run(|mut c| {
                let mut inv = self.append.prepare_invoke();
                inv.key(&header)
                    .key(&turns)
                    .key(&index)
                    .arg(project)
                    .arg(&json)
                    .arg(self.max_turns)
                    .arg(ttl_ms)
                    .arg(id.to_string())
                    .arg(created)
                    .arg(FORMAT)
                    .arg(INDEX_CAP)
                    .arg(owner.as_str())
                    .arg(&turn.tool)
                    .arg(turn.at_ms)
                    .arg(&title);
                async move { inv.invoke_async(&mut c).await }
            })
            .await?;
        let status = reply
            .first()
            .and_then(|v| redis::from_redis_value_ref::<String>(v).ok());
        let detail = reply.get(1);
        match (status.as_deref(), detail) {
            (Some("ok"), Some(Value::Int(n))) => Ok(*n as u32),
            (Some("foreign"), _) => Err(ThreadError::Foreign { id: id.to_string() }),
            (Some("full"), _) => Err(ThreadError::Full {
                id: id.to_string(),
                max: self.max_turns,
            }),
            (Some("corrupt"), Some(v)) => Err(self.corrupt(
                id,
                redis::from_redis_value_ref::<String>(v).unwrap_or_else(|_| "unreadable".into()),
            )),
            _ => Err(self.corrupt(id, "unexpected answer from the append script")),
        }
    }

    async fn list(
        &self,
        project: &str,
        owner: &Owner,
        limit: usize,
    ) -> Result<Vec<ThreadSummary>, ThreadError> {
        let index = self.index_key(project, owner);
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
        let mut out = Vec::new();
        for row in &reply[1..] {
            let Value::Array(f) = row else {
                return Err(self.corrupt(&index, "the listing script returned a bad row"));
            };
            let get = |i: usize| f.get(i).map(text).unwrap_or_default();
            let num = |i: usize| match f.get(i) {
                Some(Value::Int(n)) => (*n).max(0) as u64,
                Some(v) => text(v).parse().unwrap_or(0),
                None => 0,
            };
            out.push(ThreadSummary {
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
            });
        }
        Ok(out)
    }

    async fn delete(&self, id: ThreadId, owner: &Owner) -> Result<bool, ThreadError> {
        // The index is the owner's own; a foreign thread is refused before it is touched.
        let header = self.header_key(id);
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
        let (turns, index) = (self.turns_key(id), self.index_key(&project, owner));
        let reply: Vec<Value> = self
            .run(|mut c| {
                let mut inv = self.delete.prepare_invoke();
                inv.key(&header)
                    .key(&turns)
                    .key(&index)
                    .arg(owner.as_str())
                    .arg(id.to_string());
                async move { inv.invoke_async(&mut c).await }
            })
            .await?;
        match reply
            .first()
            .and_then(|v| redis::from_redis_value_ref::<String>(v).ok())
            .as_deref()
        {
            Some("ok") => Ok(true),
            Some("none") => Ok(false),
            Some("foreign") => Err(ThreadError::Foreign { id: id.to_string() }),
            _ => Err(self.corrupt(id, "unexpected answer from the delete script")),
        }
    }

    async fn add_spend(&self, key: &SpendKey, day: Day, add: Spent) -> Result<Spent, ThreadError> {
        let k = self.spend_key(key, day);
        let (tokens, micro): (u64, u64) = self
            .run(|mut c| {
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
}

/// `text` with the URL and the password replaced by `***` (driver errors should not hold them,
/// but nothing that reaches a log or a reply is trusted to).
fn scrub(text: &str, url: &str, password: Option<&str>) -> String {
    let mut out = text.to_string();
    if !url.is_empty() {
        out = out.replace(url, "***");
    }
    if let Some(p) = password.filter(|p| p.len() >= 3) {
        out = out.replace(p, "***");
    }
    out
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

    #[test]
    fn scrub_hides_url_and_password() {
        let s = scrub(
            "failed redis://:hunter22@h:1/0 auth hunter22",
            "redis://:hunter22@h:1/0",
            Some("hunter22"),
        );
        assert_eq!(s, "failed *** auth ***");
    }

    #[tokio::test]
    async fn invalid_url_names_the_setting_not_the_value() {
        let url = Secret::new("notaurl://:topsecret@@");
        let Err(e) = RedisStore::connect(&url, "p", Duration::from_secs(60), 5).await else {
            panic!("an invalid URL was accepted");
        };
        let msg = e.to_string();
        assert!(msg.contains("REDIS_URL"), "{msg}");
        assert!(!msg.contains("topsecret"), "{msg}");
    }
}

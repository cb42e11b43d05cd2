//! Legacy MCP sessions (`Mcp-Session-Id`, protocol versions before 2026-07-28) shared by every
//! instance through Redis: rmcp's `SessionStore`.
//!
//! rmcp keeps a live session in the memory of the instance that answered `initialize`; with a
//! session store it also saves the client's `initialize` parameters, and an instance that gets a
//! request for a session it does not know loads them and replays the handshake, so the client
//! never notices that another instance answered. That is all a session holds for this server:
//! conversations live in the thread store, and progress notifications travel on the request's
//! own response stream. (The standalone `GET` stream is per instance: a server-initiated message
//! would only reach a client connected to the instance that sent it. This server sends none.)
//!
//! Key: `<prefix>:mcp-session:<id>`, a JSON string, expiring [`SESSION_TTL`] after its last
//! load: one key per command, so a Redis Cluster serves it as one server does (through the
//! store's connection, [`Target`]). Used when the thread store is Redis; with the embedded or
//! memory store, sessions stay per instance (a load balancer then needs sticky sessions for
//! legacy clients only).
//!
//! A session belongs to the client that opened it ([`Owner`], a digest of its token): the owner
//! is saved beside the `initialize` parameters, read from [`REQUEST_OWNER`] (rmcp saves the
//! session from inside the `initialize` request, where the `/mcp` guard set it). A session
//! without an owner (saved before owners existed) or with another owner is never restored: the
//! client gets 404 and initializes again. [`SessionOwners`] holds the owners of the sessions live
//! on this instance, answers 404 to any other client presenting one of their ids (as for an
//! unknown session: nothing says the id exists), and keeps each client to
//! `GEMINI_MCP_HTTP_MAX_SESSIONS_PER_CLIENT` live sessions by closing its least recently used
//! idle one. Evicting rather than refusing: a client that restarts in a loop or leaks sessions
//! keeps working (the session it abandoned goes first). A session answering a request ([`Busy`])
//! is never evicted: closing it would cut the answer off after Gemini was called and paid for.
//! When every session of the client is busy, the new one is refused ([`OverCap`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{
    SessionManager, SessionState, SessionStore, SessionStoreError,
};
use serde_json::Value;

use crate::config::Secret;
use crate::store::Owner;
use crate::store::redis::connection::{Connection, Target};

tokio::task_local! {
    /// The owner of the `/mcp` request being served (set by the guard around rmcp's handling).
    pub static REQUEST_OWNER: Owner;
}

/// The owners of the legacy sessions live on this instance, and the per-client cap.
pub struct SessionOwners {
    live: Mutex<Live>,
    shared: Option<Arc<RedisSessions>>,
    manager: Arc<LocalSessionManager>,
    cap: usize,
}

#[derive(Default)]
struct Live {
    sessions: HashMap<String, Entry>,
    clock: u64,
}

/// A live session: its owner, when it was last used (a tick of `clock`: a request began or
/// ended), and how many requests it is answering.
struct Entry {
    owner: Owner,
    used: u64,
    busy: usize,
}

/// A request being answered in a session: while one lives, the session is not evicted. Dropped
/// when the answer has been sent (or the client went away); that counts as a use.
pub struct Busy {
    owners: Arc<SessionOwners>,
    id: String,
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut live = self.owners.live();
        let now = live.tick();
        if let Some(e) = live.sessions.get_mut(&self.id) {
            e.busy = e.busy.saturating_sub(1);
            e.used = now;
        }
    }
}

/// A client opened a session while each of its `cap` others was answering a request: none can
/// be closed without cutting a call off.
#[derive(Debug)]
pub struct OverCap {
    pub cap: usize,
}

impl std::fmt::Display for OverCap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "too many sessions: this client already has {} live session(s) on this server \
             (GEMINI_MCP_HTTP_MAX_SESSIONS_PER_CLIENT), each answering a request; wait for one \
             to finish, reuse or close (DELETE) a session, or raise the setting",
            self.cap
        )
    }
}

impl Live {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }
}

impl SessionOwners {
    pub fn new(
        manager: Arc<LocalSessionManager>,
        shared: Option<Arc<RedisSessions>>,
        cap: usize,
    ) -> SessionOwners {
        SessionOwners {
            live: Mutex::new(Live::default()),
            shared,
            manager,
            cap: cap.max(1),
        }
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `owner` may present session `id`: `None` for another client's session (answer
    /// 404). Otherwise the session is marked busy until the returned [`Busy`] is dropped (also
    /// for an id nobody opened, where it marks nothing: rmcp answers 404 itself).
    pub async fn enter(self: &Arc<Self>, id: &str, owner: &Owner) -> Option<Busy> {
        match self.claim(id, owner) {
            Some(true) => return Some(self.busy(id)),
            Some(false) => return None,
            None => {}
        }
        let Some(shared) = &self.shared else {
            return Some(self.busy(id));
        };
        // Opened on another instance: its owner is in Redis (and checked again on restore).
        match shared.owner_of(id).await {
            Ok(Some(o)) if o == *owner => {
                // Restored here: over the cap only when every other session is busy, and then
                // this one, which exists already, is served all the same.
                let _ = self.opened(id, owner).await;
                self.claim(id, owner).unwrap_or(true).then(|| self.busy(id))
            }
            Ok(Some(_)) => None,
            Ok(None) => Some(self.busy(id)),
            Err(e) => {
                tracing::warn!(error = %e, "could not read a session's owner");
                Some(self.busy(id))
            }
        }
    }

    /// For a session live here: whether `owner` opened it, and if so it is marked busy and used.
    /// `None` when it is not live here.
    fn claim(&self, id: &str, owner: &Owner) -> Option<bool> {
        let mut live = self.live();
        let now = live.tick();
        let e = live.sessions.get_mut(id)?;
        if e.owner != *owner {
            return Some(false);
        }
        e.used = now;
        e.busy += 1;
        Some(true)
    }

    fn busy(self: &Arc<Self>, id: &str) -> Busy {
        Busy {
            owners: self.clone(),
            id: id.to_string(),
        }
    }

    /// `owner` opened (or restored) session `id` here: records it, and closes the owner's least
    /// recently used idle sessions beyond the cap. `Err` when the owner would still be over the
    /// cap because all its other sessions are answering requests; the caller decides (a new
    /// session is then closed again and refused).
    pub async fn opened(&self, id: &str, owner: &Owner) -> Result<(), OverCap> {
        let theirs: Vec<(String, u64, usize)> = {
            let mut live = self.live();
            let now = live.tick();
            live.sessions.entry(id.to_string()).or_insert(Entry {
                owner: owner.clone(),
                used: now,
                busy: 0,
            });
            live.sessions
                .iter()
                .filter(|(k, e)| e.owner == *owner && k.as_str() != id)
                .map(|(k, e)| (k.clone(), e.used, e.busy))
                .collect()
        };
        if theirs.len() < self.cap {
            return Ok(());
        }
        // Sessions rmcp has already ended (idle, closed) go first, then the least recently used
        // of those answering nothing.
        let mut alive = Vec::with_capacity(theirs.len());
        for (sid, used, busy) in theirs {
            if self
                .manager
                .has_session(&sid.as_str().into())
                .await
                .unwrap_or(false)
            {
                alive.push((sid, used, busy));
            } else {
                self.live().sessions.remove(&sid);
            }
        }
        let mut excess = (alive.len() + 1).saturating_sub(self.cap);
        alive.sort_by_key(|(_, used, _)| *used);
        for (sid, _, _) in alive {
            if excess == 0 {
                break;
            }
            // Checked again under the lock: a request may have begun since.
            {
                let mut live = self.live();
                if live.sessions.get(&sid).is_none_or(|e| e.busy > 0) {
                    continue;
                }
                live.sessions.remove(&sid);
            }
            excess -= 1;
            tracing::info!(
                "closing a client's least recently used idle session: over the per-client cap"
            );
            self.close(&sid).await;
        }
        if excess > 0 {
            return Err(OverCap { cap: self.cap });
        }
        Ok(())
    }

    /// Closes session `id` here and in Redis.
    pub async fn close(&self, id: &str) {
        self.live().sessions.remove(id);
        let _ = self.manager.close_session(&id.into()).await;
        if let Some(shared) = &self.shared
            && let Err(e) = shared.delete(id).await
        {
            tracing::warn!(error = %e, "could not delete a closed session from Redis");
        }
    }

    /// Session `id` was closed (`DELETE`).
    pub fn closed(&self, id: &str) {
        self.live().sessions.remove(id);
    }
}

/// How long a session is remembered after its last use on an instance that did not know it.
pub const SESSION_TTL: Duration = Duration::from_secs(24 * 3600);
/// Deadline for one store operation.
const OP_TIMEOUT: Duration = Duration::from_secs(5);
/// Session ids are UUIDs; anything much longer is not one of ours.
const MAX_ID_LEN: usize = 128;

pub struct RedisSessions {
    conn: Connection,
    prefix: String,
}

/// A store failure, without the URL (it may hold a password).
#[derive(Debug, thiserror::Error)]
#[error("Redis session store: {0}")]
struct StoreError(String);

fn failure(e: redis::RedisError) -> SessionStoreError {
    Box::new(StoreError(format!("{:?}", e.kind())))
}

fn timeout() -> SessionStoreError {
    Box::new(StoreError("no answer within 5 s".into()))
}

impl RedisSessions {
    /// Connects to `url` (the thread store's Redis, one server or a cluster, already known to
    /// answer); `ca_file` as for the thread store.
    pub async fn connect(
        url: &Secret,
        prefix: &str,
        ca_file: Option<&std::path::Path>,
    ) -> Result<RedisSessions, String> {
        let target = Target::parse(url.expose()).map_err(|e| e.to_string())?;
        let ca_pem = match ca_file {
            Some(path) => Some(crate::store::read_ca_file(path.to_owned()).await?),
            None => None,
        };
        let conn = tokio::time::timeout(OP_TIMEOUT, target.connect(ca_pem.as_deref()))
            .await
            .map_err(|_| "cannot reach Redis (from REDIS_URL) within 5 s".to_string())?
            .map_err(|e| format!("cannot reach Redis (from REDIS_URL): {:?}", e.kind()))?;
        Ok(RedisSessions {
            conn,
            prefix: prefix.to_string(),
        })
    }

    fn key(&self, id: &str) -> String {
        format!("{}:mcp-session:{id}", self.prefix)
    }

    /// The owner saved with session `id`; `None` when there is no such session or it has none.
    pub async fn owner_of(&self, id: &str) -> Result<Option<Owner>, SessionStoreError> {
        if id.is_empty() || id.len() > MAX_ID_LEN {
            return Ok(None);
        }
        let mut conn = self.conn.clone();
        let cmd = redis::cmd("GET").arg(self.key(id)).to_owned();
        let raw: Option<String> = tokio::time::timeout(OP_TIMEOUT, cmd.query_async(&mut conn))
            .await
            .map_err(|_| timeout())?
            .map_err(failure)?;
        Ok(raw.and_then(|json| stored_owner(&json)))
    }
}

/// The owner in a saved session's JSON, if any.
fn stored_owner(json: &str) -> Option<Owner> {
    let v: Value = serde_json::from_str(json).ok()?;
    v.get("owner")
        .and_then(Value::as_str)
        .filter(|o| !o.is_empty())
        .map(|o| Owner::stored(Some(o)))
}

#[async_trait::async_trait]
impl SessionStore for RedisSessions {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        if session_id.is_empty() || session_id.len() > MAX_ID_LEN {
            return Ok(None);
        }
        let mut conn = self.conn.clone();
        let cmd = redis::cmd("GETEX")
            .arg(self.key(session_id))
            .arg("EX")
            .arg(SESSION_TTL.as_secs())
            .to_owned();
        let raw: Option<String> = tokio::time::timeout(OP_TIMEOUT, cmd.query_async(&mut conn))
            .await
            .map_err(|_| timeout())?
            .map_err(failure)?;
        let Some(json) = raw else {
            return Ok(None);
        };
        // Only the client that opened a session may have it restored; a session saved without
        // an owner is not restored either. Unknown to this caller: the client initializes again.
        let asking = REQUEST_OWNER.try_with(Owner::clone).ok();
        match (stored_owner(&json), asking) {
            (Some(stored), Some(asking)) if stored == asking => {}
            _ => return Ok(None),
        }
        // A value we cannot read is treated as unknown, too.
        Ok(serde_json::from_str(&json).ok())
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let owner = REQUEST_OWNER
            .try_with(Owner::clone)
            .map_err(|_| Box::new(StoreError("no owner known for the new session".into())))?;
        let mut value = serde_json::to_value(state)?;
        if let Value::Object(map) = &mut value {
            map.insert("owner".into(), Value::String(owner.as_str().to_string()));
        }
        let json = serde_json::to_string(&value)?;
        let mut conn = self.conn.clone();
        let cmd = redis::cmd("SET")
            .arg(self.key(session_id))
            .arg(json)
            .arg("EX")
            .arg(SESSION_TTL.as_secs())
            .to_owned();
        tokio::time::timeout(OP_TIMEOUT, cmd.query_async::<()>(&mut conn))
            .await
            .map_err(|_| timeout())?
            .map_err(failure)
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        let mut conn = self.conn.clone();
        let cmd = redis::cmd("DEL").arg(self.key(session_id)).to_owned();
        tokio::time::timeout(OP_TIMEOUT, cmd.query_async::<()>(&mut conn))
            .await
            .map_err(|_| timeout())?
            .map_err(failure)
    }
}

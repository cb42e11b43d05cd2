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
//! load. Used when the thread store is Redis; with the embedded or memory store, sessions stay
//! per instance (a load balancer then needs sticky sessions for legacy clients only).

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};

use crate::config::Secret;

/// How long a session is remembered after its last use on an instance that did not know it.
pub const SESSION_TTL: Duration = Duration::from_secs(24 * 3600);
/// Deadline for one store operation.
const OP_TIMEOUT: Duration = Duration::from_secs(5);
/// Session ids are UUIDs; anything much longer is not one of ours.
const MAX_ID_LEN: usize = 128;

pub struct RedisSessions {
    conn: ConnectionManager,
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
    /// Connects to `url` (the thread store's Redis, already known to answer).
    pub async fn connect(url: &Secret, prefix: &str) -> Result<RedisSessions, String> {
        let client = redis::Client::open(url.expose())
            .map_err(|_| "REDIS_URL is not a valid Redis URL".to_string())?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(OP_TIMEOUT))
            .set_number_of_retries(2);
        let conn = tokio::time::timeout(
            OP_TIMEOUT,
            ConnectionManager::new_with_config(client, config),
        )
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
        match raw {
            None => Ok(None),
            // A value we cannot read is treated as unknown: the client initializes again.
            Some(json) => Ok(serde_json::from_str(&json).ok()),
        }
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let json = serde_json::to_string(state)?;
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

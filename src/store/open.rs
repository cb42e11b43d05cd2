//! Which store, and opening it: [`StoreChoice`] and the [`Settings`] the store is configured with,
//! and [`open`], which picks Redis, the embedded store or memory and never falls back silently.

use std::sync::Arc;

use super::{ThreadError, ThreadStore, embedded, memory, redis};
use crate::secret::Secret;

/// Where conversation threads live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreChoice {
    /// Redis when `REDIS_URL` is set, else the embedded on-disk store.
    #[default]
    Auto,
    Redis,
    Embedded,
    Memory,
}

/// What the thread store is configured with (`GEMINI_MCP_STORE`, `REDIS_URL`,
/// `GEMINI_MCP_KEY_PREFIX`, `GEMINI_MCP_REDIS_WAIT_REPLICAS`, `GEMINI_MCP_REDIS_CA_FILE`,
/// `GEMINI_MCP_STATE_DIR`, `CONVERSATION_TIMEOUT_HOURS`, `MAX_CONVERSATION_TURNS`).
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub store: StoreChoice,
    pub redis_url: Option<Secret>,
    /// Prefix of every Redis key, one per deployment.
    pub key_prefix: String,
    /// Replicas that must confirm a turn before Redis's append is acknowledged.
    pub redis_wait_replicas: u32,
    /// PEM file of the roots TLS to Redis trusts instead of the system's.
    pub redis_ca_file: Option<std::path::PathBuf>,
    /// Directory of the embedded store.
    pub state_dir: std::path::PathBuf,
    /// A thread's lifetime after its last turn.
    pub ttl: std::time::Duration,
    pub max_turns: u32,
}

/// The store `config` asks for: Redis when `REDIS_URL` is set (or `GEMINI_MCP_STORE=redis`), the
/// embedded store otherwise, memory only when asked for. An explicit `GEMINI_MCP_STORE=embedded`
/// wins over `REDIS_URL`.
///
/// Never falls back silently: when Redis is configured but does not answer, this fails with an
/// error naming `REDIS_URL` (a fallback would split one deployment's threads over two stores).
pub async fn open(config: &Settings) -> Result<Arc<dyn ThreadStore>, ThreadError> {
    let store: Arc<dyn ThreadStore> = match (config.store, &config.redis_url) {
        (StoreChoice::Memory, _) => {
            Arc::new(memory::MemoryStore::new(config.ttl, config.max_turns))
        }
        (StoreChoice::Redis | StoreChoice::Auto, Some(url)) => {
            Arc::new(redis::RedisStore::connect(url, redis_options(config).await?).await?)
        }
        (StoreChoice::Redis, None) => {
            return Err(ThreadError::Unavailable {
                store: "redis",
                message: "GEMINI_MCP_STORE=redis needs REDIS_URL".into(),
            });
        }
        (StoreChoice::Auto | StoreChoice::Embedded, _) => Arc::new(
            embedded::EmbeddedStore::open(&config.state_dir, config.ttl, config.max_turns).await?,
        ),
    };
    tracing::info!(store = store.kind(), "thread store opened");
    Ok(store)
}

/// `GEMINI_MCP_REDIS_CA_FILE`'s bytes (a regular file of at most 1 MiB), read off the runtime.
pub async fn read_ca_file(path: std::path::PathBuf) -> Result<Vec<u8>, String> {
    tokio::task::spawn_blocking(move || {
        crate::setting_file::read("GEMINI_MCP_REDIS_CA_FILE", &path).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| format!("GEMINI_MCP_REDIS_CA_FILE: the read stopped: {e}"))?
}

/// The Redis store's options; the CA file read here, once.
async fn redis_options(config: &Settings) -> Result<redis::Options, ThreadError> {
    let ca_pem = match &config.redis_ca_file {
        None => None,
        Some(path) => Some(read_ca_file(path.clone()).await.map_err(|e| {
            ThreadError::Unavailable {
                store: "redis",
                message: format!(
                    "{e}; point it at a PEM file of the CA that signed Redis's certificate, or unset it to trust the system's roots"
                ),
            }
        })?),
    };
    Ok(redis::Options {
        prefix: config.key_prefix.clone(),
        ttl: config.ttl,
        max_turns: config.max_turns,
        wait_replicas: config.redis_wait_replicas,
        ca_pem,
    })
}

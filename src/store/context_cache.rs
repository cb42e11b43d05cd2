//! The record of an explicit context cache at Google (`pipeline::cache`), as the stores keep it:
//! on a thread's last turn, and in a front seen (`fronts`).

use serde::{Deserialize, Serialize};

/// An explicit context cache serving a thread: which cache at Google, for which model, holding
/// what (the system instruction and the first `covers` messages of the thread's requests, whose
/// digest it keeps), until when. A request uses it only when its own front has the same digest:
/// a file changed since is never answered from the cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextCache {
    /// The cache's resource name at Google.
    pub name: String,
    /// The model it was made for (a cache serves that model only).
    pub model: String,
    /// How many of the request's first messages it holds.
    pub covers: usize,
    /// Hex SHA-256 of what it holds ([`crate::gemini::GenerateRequest::front_digest`]).
    pub digest: String,
    /// Hex SHA-256 of its messages alone, without the system instruction: a request of another
    /// tool whose first messages are these is served by it too, its own instructions sent in its
    /// turn. Empty for a cache stored before (it serves its own tool only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub messages_digest: String,
    /// The tokens it holds, as Gemini counted them.
    pub tokens: u64,
    /// When Google drops it (ms since the epoch).
    pub expires_ms: u64,
}

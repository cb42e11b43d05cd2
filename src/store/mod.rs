//! Conversation threads behind one async trait: Redis when configured (`redis`), an embedded
//! SQLite store by default (`embedded`), memory for tests (`memory`); `history` turns a stored
//! thread back into prompt messages; `counted` wraps the store the app opened to count its
//! failures in the metrics. A thread is named by a `ThreadId` (UUID) and holds turns; any
//! tool continues a thread started by any other.
//!
//! A thread belongs to the client that started it ([`Owner`]: `local` on stdio and the command
//! line, a digest of the bearer token over HTTP, never the token) and to a project (the roots it
//! was started under). Both are written with its first turn and checked by every store in the
//! same atomic step as each append; the pipeline checks them again when it loads the thread, so
//! that the refusal says why. Threads written before owners existed have none and are read as
//! `local`: a token client over HTTP cannot take them over.
//!
//! A turn is one call: the request the tool rendered, the files sent with their content hashes,
//! and Gemini's answer. Turns are appended atomically and never rewritten; every store enforces
//! `max_turns` inside the same atomic step as the append, so concurrent writers can neither lose
//! a turn nor overshoot the limit.

mod context_cache;
pub mod counted;
pub mod embedded;
pub mod fronts;
pub mod memory;
mod now;
mod open;
mod owner;
pub mod redis;
pub mod tasks;

pub use context_cache::ContextCache;
pub use now::now_ms;
pub use open::{Settings, StoreChoice, open, read_ca_file};
pub use owner::{LOCAL_OWNER, Owner};

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::caps::{Day, SpendKey, Spent};

/// A thread's id: a UUID, parsed once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ThreadId(pub uuid::Uuid);

impl ThreadId {
    pub fn new() -> ThreadId {
        ThreadId(uuid::Uuid::new_v4())
    }
}

impl Default for ThreadId {
    fn default() -> Self {
        ThreadId::new()
    }
}

impl fmt::Display for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl FromStr for ThreadId {
    type Err = uuid::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        uuid::Uuid::parse_str(s.trim()).map(ThreadId)
    }
}

/// A file sent with a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRef {
    /// Canonical absolute path.
    pub path: String,
    /// Hex SHA-256 of the content sent.
    pub hash: String,
    pub tokens: u64,
}

/// The tokens a turn took, as stored with it. The thread's own type: what the stores keep does
/// not follow the Gemini client's types.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens, cached ones included.
    pub input: u64,
    /// Answer tokens, thinking excluded.
    pub output: u64,
    /// Thinking tokens.
    pub thinking: u64,
    /// Prompt tokens served from Gemini's cache.
    pub cached: u64,
    /// The service tier the turn is priced at (the one that served it); standard for turns
    /// stored before tiers were kept.
    #[serde(default, skip_serializing_if = "is_standard")]
    pub tier: crate::gemini::ServiceTier,
}

fn is_standard(tier: &crate::gemini::ServiceTier) -> bool {
    *tier == crate::gemini::ServiceTier::Standard
}

impl From<crate::gemini::Usage> for Usage {
    fn from(u: crate::gemini::Usage) -> Usage {
        Usage {
            input: u.input,
            output: u.output,
            thinking: u.thinking,
            cached: u.cached,
            tier: crate::gemini::ServiceTier::Standard,
        }
    }
}

/// Back to Gemini's, for pricing a stored turn.
impl From<Usage> for crate::gemini::Usage {
    fn from(u: Usage) -> crate::gemini::Usage {
        crate::gemini::Usage {
            input: u.input,
            output: u.output,
            thinking: u.thinking,
            cached: u.cached,
        }
    }
}

/// One call in a thread: the request and Gemini's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// The tool that made the call.
    pub tool: String,
    /// The text of the user message after its file blocks, exactly as sent: the diff, the note of
    /// files left out, and the request the tool rendered. History re-renders the user message as
    /// the file blocks (re-read) followed by this text, byte for byte.
    pub request: String,
    /// The files sent with this turn, in the order they were sent.
    pub files: Vec<FileRef>,
    /// Gemini's answer as text.
    pub response: String,
    /// The model that answered.
    pub model: String,
    pub usage: Usage,
    /// Unix time in milliseconds.
    pub at_ms: u64,
    /// Tokens of `request`, counted when the turn was saved (0: count again when needed).
    #[serde(default)]
    pub request_tokens: u64,
    /// Tokens of `response`, counted when the turn was saved (0: count again when needed).
    #[serde(default)]
    pub response_tokens: u64,
    /// Where the diff's blocks are in `request` (it begins with the diff): what a later turn's
    /// findings are checked against. Turns stored without it offer no diff to check against.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<crate::collector::render::Frame>,
    /// The explicit context cache at Google that holds the front of the thread's next request,
    /// as this turn left it (`pipeline::cache`); the latest turn's is the thread's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_cache: Option<ContextCache>,
    /// What the call spent besides `usage`, in USD: context caches (their creation and storage)
    /// and, in a consensus, the requests of the models other than the one `usage` is of. Part of
    /// the thread's cost. Stored under its first name, `cache_usd`.
    #[serde(default, rename = "cache_usd", skip_serializing_if = "is_zero")]
    pub extra_usd: f64,
    /// The interaction Google stored for this turn's answer (the Interactions API with
    /// `GEMINI_MCP_INTERACTIONS_STORE=1`), which the thread's next turn may continue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interaction: Option<StoredInteraction>,
}

/// An interaction Google stored for a thread: its chain holds the first `covers` messages of the
/// thread's next request, whose digest it keeps (system instruction left out: each request
/// sends its own). The next request continues it only when its own first messages digest the
/// same, so a file changed since, or an earlier turn left out, sends the whole history instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredInteraction {
    /// The interaction's id at Google.
    pub id: String,
    /// The model that answered it.
    pub model: String,
    /// How many messages its chain holds.
    pub covers: usize,
    /// Hex SHA-256 of those messages ([`crate::gemini::messages_digest`] with no system text).
    pub digest: String,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// One thread in a listing: what it is about and how far it went, without its turns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadSummary {
    pub id: String,
    /// The tools of its turns, in the order first used.
    pub tools: Vec<String>,
    pub turns: u32,
    /// Unix time in milliseconds of its first and last turns.
    pub created_ms: u64,
    pub last_ms: u64,
    /// The opening words of its first request.
    pub title: String,
}

/// Longest title kept for a listing, in characters.
pub const TITLE_CHARS: usize = 80;

/// The opening words of a request as a tool rendered it: its first line of text that is not a
/// Markdown heading, cut on a word within [`TITLE_CHARS`].
pub fn title_of(request: &str) -> String {
    let line = request
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .unwrap_or("");
    if line.chars().count() <= TITLE_CHARS {
        return line.to_string();
    }
    let cut: String = line.chars().take(TITLE_CHARS).collect();
    let cut = match cut.rfind(' ') {
        Some(i) if i > TITLE_CHARS / 2 => &cut[..i],
        _ => cut.as_str(),
    };
    format!("{cut}…")
}

impl ThreadSummary {
    /// The summary of a whole thread (stores that hold the turns at hand).
    pub fn of(thread: &Thread) -> ThreadSummary {
        let mut tools: Vec<String> = Vec::new();
        for t in &thread.turns {
            if !tools.contains(&t.tool) {
                tools.push(t.tool.clone());
            }
        }
        ThreadSummary {
            id: thread.id.to_string(),
            tools,
            turns: thread.turns.len() as u32,
            created_ms: thread.turns.first().map_or(0, |t| t.at_ms),
            last_ms: thread.turns.last().map_or(0, |t| t.at_ms),
            title: thread
                .turns
                .first()
                .map(|t| title_of(&t.request))
                .unwrap_or_default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thread {
    pub id: ThreadId,
    /// The project the thread belongs to: its roots (see `App::project`).
    pub project: String,
    /// The client that started it.
    pub owner: Owner,
    pub turns: Vec<Turn>,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum ThreadError {
    #[error(
        "continuation_id {} is unknown or has expired (threads live {ttl_hours} h after their last turn). Call again without continuation_id to start a new thread.",
        crate::echo::echo(.id)
    )]
    NotFound { id: String, ttl_hours: f64 },
    /// Another client's thread. The message never says whose.
    #[error(
        "continuation_id {} belongs to another client: a thread can be continued only with the token that started it. Call again without continuation_id to start a new thread.",
        crate::echo::echo(.id)
    )]
    Foreign { id: String },
    #[error(
        "continuation_id {} was started in another project ({project}); threads stay in their project unless GEMINI_MCP_SHARE_THREADS_ACROSS_PROJECTS=1. Call again without continuation_id to start a new thread here.",
        crate::echo::echo(.id)
    )]
    OtherProject { id: String, project: String },
    #[error(
        "no earlier thread in this project to continue (continuation_id \"latest\"). Call again without continuation_id to start one."
    )]
    NoLatest,
    #[error(
        "thread {id} has reached its limit of {max} turns (MAX_CONVERSATION_TURNS). Call again without continuation_id to start a new thread, summarising what matters."
    )]
    Full { id: String, max: u32 },
    #[error(
        "thread {id} holds a value this server cannot read ({message}); start a new thread without continuation_id."
    )]
    Corrupt { id: String, message: String },
    /// The store did not answer. `message` says what failed and what to do; it never holds a
    /// secret (no `REDIS_URL` password).
    #[error("the thread store ({store}) is unavailable: {message}")]
    Unavailable {
        store: &'static str,
        message: String,
    },
}

/// The thread store. Implementations are cheap to share (`Arc<dyn ThreadStore>`).
#[async_trait::async_trait]
pub trait ThreadStore: Send + Sync {
    /// Loads a thread, all its turns. `NotFound` for unknown or expired ids.
    async fn load(&self, id: ThreadId) -> Result<Thread, ThreadError>;

    /// The most recently written thread of `project` started by `owner`, if any.
    async fn latest(&self, project: &str, owner: &Owner) -> Result<Option<ThreadId>, ThreadError>;

    /// Appends one turn atomically, creating the thread (owned by `owner`, in `project`) when it
    /// does not exist, refreshing its TTL, refusing (`Full`) when it already holds `max_turns`
    /// and (`Foreign`) when another owner started it. Returns the turn count after.
    async fn append(
        &self,
        id: ThreadId,
        project: &str,
        owner: &Owner,
        turn: &Turn,
    ) -> Result<u32, ThreadError>;

    /// The live threads of `project` started by `owner`, newest first, at most `limit`.
    async fn list(
        &self,
        project: &str,
        owner: &Owner,
        limit: usize,
    ) -> Result<Vec<ThreadSummary>, ThreadError>;

    /// Deletes a thread of `owner`: `Ok(false)` when there is none by that id, `Foreign` when
    /// another owner started it.
    async fn delete(&self, id: ThreadId, owner: &Owner) -> Result<bool, ThreadError>;

    /// Adds to what `key` spent on `day` (UTC) and returns the new totals; shared by every
    /// instance on the store. Kept under `key.stored()` and `day` as `YYYY-MM-DD`.
    async fn add_spend(&self, key: &SpendKey, day: Day, add: Spent) -> Result<Spent, ThreadError>;

    /// What `key` spent on `day`.
    async fn spent(&self, key: &SpendKey, day: Day) -> Result<Spent, ThreadError>;

    /// Checks that the store answers (for readiness probes): `Unavailable` when it does not.
    async fn ping(&self) -> Result<(), ThreadError>;

    /// A short name for replies and `listmodels`: `redis`, `embedded`, `memory`.
    fn kind(&self) -> &'static str;

    /// Writes a task's record (`tasks`), kept until `expires_ms`; a cancel request already
    /// recorded for it stays.
    async fn put_task(&self, entry: &tasks::TaskEntry, expires_ms: u64) -> Result<(), ThreadError>;

    /// Writes `entry` over a record whose lease is still `lapsed_lease_ms` as it was read (no
    /// other instance claimed the task since): `true` when written, `false` when the record
    /// changed or is gone. One instance takes up a task whose instance stopped.
    async fn claim_task(
        &self,
        entry: &tasks::TaskEntry,
        lapsed_lease_ms: u64,
        expires_ms: u64,
    ) -> Result<bool, ThreadError>;

    /// A task's record; `None` when there is none by that id (or it expired).
    async fn get_task(&self, id: tasks::TaskId) -> Result<Option<tasks::TaskEntry>, ThreadError>;

    /// Records a cancel request for a task, if it exists.
    async fn cancel_task(&self, id: tasks::TaskId) -> Result<(), ThreadError>;

    /// The live tasks of `owner`, newest first, at most `limit`.
    async fn list_tasks(
        &self,
        owner: &Owner,
        limit: usize,
    ) -> Result<Vec<tasks::TaskEntry>, ThreadError>;

    /// The front a call kept under `key` ([`fronts::SeenFront`]); `None` when there is none (or
    /// it expired).
    async fn seen_front(&self, key: &str) -> Result<Option<fronts::SeenFront>, ThreadError>;

    /// Keeps `front` under `key` until `expires_ms`, in place of what was there.
    async fn keep_front(
        &self,
        key: &str,
        front: &fronts::SeenFront,
        expires_ms: u64,
    ) -> Result<(), ThreadError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stored form of a turn, byte for byte: what the SQLite rows, Redis values and memory
    /// store hold. A turn stored by an earlier version reads back unchanged and writes the same
    /// bytes, so a renamed field anywhere else cannot change it unnoticed.
    #[test]
    fn the_stored_turn_format_is_pinned() {
        const STORED: &str = r#"{"tool":"codereview","request":"Request:\nReview it","files":[{"path":"/p/src/lib.rs","hash":"ab12","tokens":42}],"response":"Fine.","model":"gemini-2.5-pro","usage":{"input":1200,"output":80,"thinking":300,"cached":1000},"at_ms":1763942400000,"request_tokens":9,"response_tokens":3}"#;
        let turn: Turn = serde_json::from_str(STORED).unwrap();
        assert_eq!(turn.usage.thinking, 300);
        assert_eq!(turn.files[0].path, "/p/src/lib.rs");
        assert_eq!(serde_json::to_string(&turn).unwrap(), STORED);
        // Turns stored before the token counts were kept still read (counted again later).
        let older = r#"{"tool":"chat","request":"hi","files":[],"response":"hello","model":"m","usage":{"input":1,"output":1,"thinking":0,"cached":0},"at_ms":1}"#;
        let turn: Turn = serde_json::from_str(older).unwrap();
        assert_eq!((turn.request_tokens, turn.response_tokens), (0, 0));
    }
}

//! The embedded thread store, the default: one SQLite database (`threads.sqlite3`) in the state
//! directory (`$XDG_STATE_HOME/gemini-mcp/`, created 0700), shared by every server process and
//! the CLI of the user, so a thread started by a git hook can be continued from an editor.
//!
//! Sharing: WAL mode (readers never wait for the writer), a busy timeout (a writer waits for
//! another process's write instead of failing), and every append in one `BEGIN IMMEDIATE`
//! transaction that reads the turn count, refuses at `max_turns`, inserts the turn and refreshes
//! the expiry, so concurrent writers in any number of processes lose nothing and never overshoot.
//! Expired threads are invisible at once and deleted on open and then every [`CLEANUP_EVERY`].
//!
//! Owners: the `owner` column came after the first schema; a database without it gets it on open
//! (`ALTER TABLE`, default `local`, in the same write transaction as the schema), so threads
//! stored before are local and older binaries keep working on the same file.
//!
//! rusqlite is synchronous, so each store owns one connection on a dedicated thread (not the
//! async runtime's, and not `spawn_blocking`'s pool, where waiting for another process's lock
//! would hold a pool thread): callers send it a job and await the answer on a oneshot channel.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::tasks::{TaskEntry, TaskId};
use super::fronts::{self, SeenFront};
use super::now::now_ms;
use super::owner::{LOCAL_OWNER, Owner};
use super::{Thread, ThreadError, ThreadId, ThreadStore, ThreadSummary, Turn, title_of};
use crate::caps::{Day, SpendKey, Spent};

/// The database file inside the state directory.
pub const FILE_NAME: &str = "threads.sqlite3";
/// How long a write waits for another process's write before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// How often expired threads are deleted (they are invisible as soon as they expire).
pub const CLEANUP_EVERY: Duration = Duration::from_secs(600);
/// Schema version in `PRAGMA user_version`.
const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS threads (
    id         TEXT PRIMARY KEY,
    project    TEXT NOT NULL,
    owner      TEXT NOT NULL DEFAULT 'local',
    created_ms INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL,
    turns      INTEGER NOT NULL,
    written    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS threads_by_project ON threads (project, written);
CREATE INDEX IF NOT EXISTS threads_by_expiry ON threads (expires_ms);
CREATE TABLE IF NOT EXISTS turns (
    thread TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    body   TEXT NOT NULL,
    PRIMARY KEY (thread, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS spend (
    key       TEXT NOT NULL,
    day       TEXT NOT NULL,
    tokens    INTEGER NOT NULL,
    micro_usd INTEGER NOT NULL,
    PRIMARY KEY (key, day)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS counter (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    n   INTEGER NOT NULL
);
INSERT OR IGNORE INTO counter (one, n) VALUES (1, 0);
CREATE TABLE IF NOT EXISTS tasks (
    id         TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    state      TEXT NOT NULL,
    lease_ms   INTEGER NOT NULL,
    cancel     INTEGER NOT NULL DEFAULT 0,
    expires_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_by_owner ON tasks (owner, created_ms);
";

type Job = Box<dyn FnOnce(&mut Worker) + Send>;

/// The connection and its housekeeping, owned by the store's thread.
struct Worker {
    conn: Connection,
    last_cleanup: Instant,
}

pub struct EmbeddedStore {
    jobs: mpsc::Sender<Job>,
    path: PathBuf,
    ttl: Duration,
    max_turns: u32,
}

impl EmbeddedStore {
    /// Opens (creating when needed) the store in `dir`. Errors name the path and what to do.
    pub async fn open(
        dir: &Path,
        ttl: Duration,
        max_turns: u32,
    ) -> Result<EmbeddedStore, ThreadError> {
        let dir = dir.to_path_buf();
        let path = dir.join(FILE_NAME);
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let (jobs, rx) = mpsc::channel::<Job>();
        let db = path.clone();
        std::thread::Builder::new()
            .name("thread-store".into())
            .spawn(move || {
                let mut worker = match open_db(&dir, &db) {
                    Ok(conn) => {
                        let _ = ready_tx.send(Ok(()));
                        Worker {
                            conn,
                            last_cleanup: Instant::now(),
                        }
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                // Ends when the store (the only sender) is dropped.
                for job in rx {
                    job(&mut worker);
                }
            })
            .map_err(|e| unavailable(&path, format!("cannot start its thread: {e}")))?;
        ready_rx
            .await
            .map_err(|_| unavailable(&path, "its thread stopped while opening".into()))??;
        let store = EmbeddedStore {
            jobs,
            path,
            ttl,
            max_turns,
        };
        store
            .call(|w| {
                cleanup(&w.conn, now_ms())?;
                Ok(())
            })
            .await?;
        tracing::info!(path = %store.path.display(), "embedded thread store opened");
        Ok(store)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the store's thread and awaits its result.
    async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Worker) -> Result<T, DbError> + Send + 'static,
    ) -> Result<T, ThreadError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.jobs
            .send(Box::new(move |w: &mut Worker| {
                let _ = tx.send(f(w));
            }))
            .map_err(|_| unavailable(&self.path, "its thread has stopped".into()))?;
        let result = rx
            .await
            .map_err(|_| unavailable(&self.path, "its thread has stopped".into()))?;
        result.map_err(|e| match e {
            DbError::Sqlite(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "embedded thread store failed");
                unavailable(&self.path, sqlite_advice(&e))
            }
            DbError::Thread(t) => t,
        })
    }

    fn not_found(&self, id: ThreadId) -> ThreadError {
        ThreadError::NotFound {
            id: id.to_string(),
            ttl_hours: self.ttl.as_secs_f64() / 3600.0,
        }
    }
}

/// A failure inside a job: SQLite's, or one of ours decided there.
enum DbError {
    Sqlite(rusqlite::Error),
    Thread(ThreadError),
}

impl From<rusqlite::Error> for DbError {
    fn from(e: rusqlite::Error) -> Self {
        DbError::Sqlite(e)
    }
}

fn unavailable(path: &Path, message: String) -> ThreadError {
    ThreadError::Unavailable {
        store: "embedded",
        message: format!("{} ({message})", path.display()),
    }
}

fn sqlite_advice(e: &rusqlite::Error) -> String {
    let busy = matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    );
    if busy {
        format!(
            "another process held the database for over {} s: {e}; try again",
            BUSY_TIMEOUT.as_secs()
        )
    } else {
        e.to_string()
    }
}

/// Creates the directory (0700), opens the database and prepares it for sharing.
fn open_db(dir: &Path, db: &Path) -> Result<Connection, ThreadError> {
    create_private_dir(dir).map_err(|e| {
        unavailable(
            db,
            format!("cannot create the state directory: {e}; set GEMINI_MCP_STATE_DIR to a writable directory"),
        )
    })?;
    let fail = |e: rusqlite::Error| {
        unavailable(
            db,
            format!(
                "cannot open the thread database: {e}; move the file away to start afresh, or set GEMINI_MCP_STATE_DIR"
            ),
        )
    };
    let conn = Connection::open(db).map_err(fail)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(fail)?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(fail)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(unavailable(
            db,
            format!("the database cannot use WAL mode (it is in {mode} mode)"),
        ));
    }
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(fail)?;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(fail)?;
    if version > SCHEMA_VERSION {
        return Err(unavailable(
            db,
            format!(
                "the database was written by a newer gemini-mcp (schema {version}); upgrade, or set GEMINI_MCP_STATE_DIR to another directory"
            ),
        ));
    }
    let mut conn = conn;
    migrate(&mut conn).map_err(fail)?;
    Ok(conn)
}

/// Creates the schema, and adds the `owner` column to a database written before it existed.
fn migrate(conn: &mut Connection) -> Result<(), rusqlite::Error> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(SCHEMA)?;
    tx.execute_batch(super::fronts::SQLITE_TABLE)?;
    let has_owner: bool = tx.query_row(
        "SELECT count(*) > 0 FROM pragma_table_info('threads') WHERE name = 'owner'",
        [],
        |r| r.get(0),
    )?;
    if !has_owner {
        tx.execute_batch(&format!(
            "ALTER TABLE threads ADD COLUMN owner TEXT NOT NULL DEFAULT '{LOCAL_OWNER}';"
        ))?;
    }
    tx.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION};"))?;
    tx.commit()
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// Deletes expired threads and their turns.
fn cleanup(conn: &Connection, now: u64) -> Result<usize, rusqlite::Error> {
    let now = now as i64;
    conn.execute(
        "DELETE FROM turns WHERE thread IN (SELECT id FROM threads WHERE expires_ms <= ?1)",
        [now],
    )?;
    let n = conn.execute("DELETE FROM threads WHERE expires_ms <= ?1", [now])?;
    if n > 0 {
        tracing::debug!(threads = n, "expired threads deleted");
    }
    Ok(n)
}

#[async_trait::async_trait]
impl ThreadStore for EmbeddedStore {
    async fn load(&self, id: ThreadId) -> Result<Thread, ThreadError> {
        let key = id.to_string();
        let found = self
            .call(move |w| {
                // One read transaction: the header and the turns seen at the same instant.
                let tx = w.conn.transaction()?;
                let header: Option<(String, Option<String>)> = tx
                    .query_row(
                        "SELECT project, owner FROM threads WHERE id = ?1 AND expires_ms > ?2",
                        params![key, now_ms() as i64],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()?;
                let Some((project, owner)) = header else {
                    return Ok(None);
                };
                let mut stmt =
                    tx.prepare_cached("SELECT body FROM turns WHERE thread = ?1 ORDER BY seq")?;
                let bodies = stmt
                    .query_map([&key], |r| r.get::<_, String>(0))?
                    .collect::<Result<Vec<_>, _>>()?;
                drop(stmt);
                tx.commit()?;
                Ok(Some((project, owner, bodies)))
            })
            .await?;
        let Some((project, owner, bodies)) = found else {
            return Err(self.not_found(id));
        };
        let turns = bodies
            .iter()
            .enumerate()
            .map(|(i, body)| {
                serde_json::from_str::<Turn>(body).map_err(|e| ThreadError::Corrupt {
                    id: id.to_string(),
                    message: format!("turn {} is not a turn: {e}", i + 1),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if turns.is_empty() {
            return Err(ThreadError::Corrupt {
                id: id.to_string(),
                message: "it has no turns".into(),
            });
        }
        Ok(Thread {
            id,
            project,
            owner: Owner::stored(owner.as_deref()),
            turns,
        })
    }

    async fn latest(&self, project: &str, owner: &Owner) -> Result<Option<ThreadId>, ThreadError> {
        let project = project.to_string();
        let owner = owner.as_str().to_string();
        let found = self
            .call(move |w| {
                Ok(w.conn
                    .query_row(
                        "SELECT id FROM threads WHERE project = ?1 AND owner = ?3 AND expires_ms > ?2 ORDER BY written DESC LIMIT 1",
                        params![project, now_ms() as i64, owner],
                        |r| r.get::<_, String>(0),
                    )
                    .optional()?)
            })
            .await?;
        match found {
            None => Ok(None),
            Some(raw) => raw
                .parse::<ThreadId>()
                .map(Some)
                .map_err(|_| ThreadError::Corrupt {
                    id: raw,
                    message: "the thread table holds an id that is not a UUID".into(),
                }),
        }
    }

    async fn list(
        &self,
        project: &str,
        owner: &Owner,
        limit: usize,
    ) -> Result<Vec<ThreadSummary>, ThreadError> {
        let project = project.to_string();
        let owner = owner.as_str().to_string();
        let limit = limit.min(i64::MAX as usize) as i64;
        type Row = (
            String,
            i64,
            Option<String>,
            Option<i64>,
            Option<i64>,
            Option<String>,
        );
        let rows: Vec<Row> = self
            .call(move |w| {
                let mut stmt = w.conn.prepare_cached(
                    "SELECT t.id, t.turns,
                        (SELECT group_concat(tool, ' ') FROM
                            (SELECT json_extract(body, '$.tool') AS tool FROM turns
                             WHERE thread = t.id ORDER BY seq)),
                        (SELECT json_extract(body, '$.at_ms') FROM turns WHERE thread = t.id ORDER BY seq LIMIT 1),
                        (SELECT json_extract(body, '$.at_ms') FROM turns WHERE thread = t.id ORDER BY seq DESC LIMIT 1),
                        (SELECT substr(json_extract(body, '$.request'), 1, 4000) FROM turns WHERE thread = t.id ORDER BY seq LIMIT 1)
                     FROM threads t
                     WHERE t.project = ?1 AND t.owner = ?2 AND t.expires_ms > ?3
                     ORDER BY t.written DESC LIMIT ?4",
                )?;
                let rows = stmt
                    .query_map(params![project, owner, now_ms() as i64, limit], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
                    })?
                    .collect::<Result<Vec<Row>, _>>()?;
                Ok(rows)
            })
            .await?;
        Ok(rows
            .into_iter()
            .map(|(id, turns, tools, first, last, request)| {
                let mut seen: Vec<String> = Vec::new();
                for t in tools
                    .unwrap_or_default()
                    .split(' ')
                    .filter(|t| !t.is_empty())
                {
                    if !seen.iter().any(|s| s == t) {
                        seen.push(t.to_string());
                    }
                }
                ThreadSummary {
                    id,
                    tools: seen,
                    turns: turns.max(0) as u32,
                    created_ms: first.unwrap_or(0).max(0) as u64,
                    last_ms: last.unwrap_or(0).max(0) as u64,
                    title: title_of(&request.unwrap_or_default()),
                }
            })
            .collect())
    }

    async fn delete(&self, id: ThreadId, owner: &Owner) -> Result<bool, ThreadError> {
        let key = id.to_string();
        let owner = owner.as_str().to_string();
        let found = self
            .call(move |w| {
                let tx = w
                    .conn
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
                let stored: Option<String> = tx
                    .query_row(
                        "SELECT owner FROM threads WHERE id = ?1 AND expires_ms > ?2",
                        params![key, now_ms() as i64],
                        |r| r.get(0),
                    )
                    .optional()?;
                let outcome = match stored {
                    None => None,
                    Some(o) if o != owner => Some(false),
                    Some(_) => {
                        tx.execute("DELETE FROM turns WHERE thread = ?1", [&key])?;
                        tx.execute("DELETE FROM threads WHERE id = ?1", [&key])?;
                        Some(true)
                    }
                };
                tx.commit()?;
                Ok(outcome)
            })
            .await?;
        match found {
            None => Ok(false),
            Some(false) => Err(ThreadError::Foreign { id: id.to_string() }),
            Some(true) => Ok(true),
        }
    }

    async fn append(
        &self,
        id: ThreadId,
        project: &str,
        owner: &Owner,
        turn: &Turn,
    ) -> Result<u32, ThreadError> {
        let owner = owner.as_str().to_string();
        let body = serde_json::to_string(turn).map_err(|e| ThreadError::Corrupt {
            id: id.to_string(),
            message: format!("the turn cannot be encoded: {e}"),
        })?;
        let key = id.to_string();
        let project = project.to_string();
        let ttl_ms = self.ttl.as_millis().min(i64::MAX as u128) as i64;
        let max = self.max_turns;
        self.call(move |w| {
            let now = now_ms() as i64;
            if w.last_cleanup.elapsed() >= CLEANUP_EVERY {
                w.last_cleanup = Instant::now();
                cleanup(&w.conn, now as u64)?;
            }
            // IMMEDIATE: take the write lock before reading the count, so no other writer (in
            // this or another process) can append between the check and the insert.
            let tx = w
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let existing: Option<(i64, i64, Option<String>)> = tx
                .query_row(
                    "SELECT turns, expires_ms, owner FROM threads WHERE id = ?1",
                    [&key],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()?;
            let count = match existing {
                Some((_, expires, ref stored))
                    if expires > now && Owner::stored(stored.as_deref()).as_str() != owner =>
                {
                    return Err(DbError::Thread(ThreadError::Foreign { id: key.clone() }));
                }
                Some((n, expires, _)) if expires > now => n,
                Some(_) => {
                    // Expired but not yet cleaned up: the id starts afresh.
                    tx.execute("DELETE FROM turns WHERE thread = ?1", [&key])?;
                    tx.execute("DELETE FROM threads WHERE id = ?1", [&key])?;
                    0
                }
                None => 0,
            };
            if count >= i64::from(max) {
                return Err(DbError::Thread(ThreadError::Full {
                    id: key.clone(),
                    max,
                }));
            }
            let written: i64 =
                tx.query_row("UPDATE counter SET n = n + 1 RETURNING n", [], |r| r.get(0))?;
            tx.execute(
                "INSERT INTO turns (thread, seq, body) VALUES (?1, ?2, ?3)",
                params![key, count, body],
            )?;
            let expires = now.saturating_add(ttl_ms);
            tx.execute(
                "INSERT INTO threads (id, project, created_ms, expires_ms, turns, written, owner)
                 VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6)
                 ON CONFLICT (id) DO UPDATE SET
                    expires_ms = excluded.expires_ms, turns = turns + 1, written = excluded.written",
                params![key, project, now, expires, written, owner],
            )?;
            tx.commit()?;
            Ok((count + 1) as u32)
        })
        .await
    }

    async fn add_spend(&self, key: &SpendKey, day: Day, add: Spent) -> Result<Spent, ThreadError> {
        let (key, day) = (key.stored(), day.to_string());
        let (tokens, micro) = (add.tokens as i64, add.micro_usd as i64);
        self.call(move |w| {
            let tx = w.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            tx.execute("DELETE FROM spend WHERE day < ?1", [&day])?;
            tx.execute(
                "INSERT INTO spend (key, day, tokens, micro_usd) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (key, day) DO UPDATE SET tokens = tokens + ?3, micro_usd = micro_usd + ?4",
                params![key, day, tokens, micro],
            )?;
            let total: (i64, i64) = tx.query_row(
                "SELECT tokens, micro_usd FROM spend WHERE key = ?1 AND day = ?2",
                params![key, day],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            tx.commit()?;
            Ok(Spent {
                tokens: total.0.max(0) as u64,
                micro_usd: total.1.max(0) as u64,
            })
        })
        .await
    }

    async fn spent(&self, key: &SpendKey, day: Day) -> Result<Spent, ThreadError> {
        let (key, day) = (key.stored(), day.to_string());
        let row: Option<(i64, i64)> = self
            .call(move |w| {
                Ok(w.conn
                    .query_row(
                        "SELECT tokens, micro_usd FROM spend WHERE key = ?1 AND day = ?2",
                        params![key, day],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()?)
            })
            .await?;
        Ok(row.map_or_else(Spent::default, |(t, m)| Spent {
            tokens: t.max(0) as u64,
            micro_usd: m.max(0) as u64,
        }))
    }

    async fn ping(&self) -> Result<(), ThreadError> {
        self.call(|w| Ok(w.conn.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))?))
            .await
            .map(|_| ())
    }

    fn kind(&self) -> &'static str {
        "embedded"
    }

    async fn put_task(&self, entry: &TaskEntry, expires_ms: u64) -> Result<(), ThreadError> {
        let e = entry.clone();
        self.call(move |w| {
            let now = now_ms() as i64;
            w.conn
                .execute("DELETE FROM tasks WHERE expires_ms <= ?1", [now])?;
            w.conn.execute(
                "INSERT INTO tasks (id, owner, created_ms, state, lease_ms, expires_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (id) DO UPDATE SET state = ?4, lease_ms = ?5, expires_ms = ?6",
                params![
                    e.id.to_string(),
                    e.owner.as_str(),
                    e.created_ms as i64,
                    e.state,
                    e.lease_ms as i64,
                    expires_ms as i64
                ],
            )?;
            Ok(())
        })
        .await
    }

    async fn claim_task(
        &self,
        entry: &TaskEntry,
        lapsed_lease_ms: u64,
        expires_ms: u64,
    ) -> Result<bool, ThreadError> {
        let e = entry.clone();
        self.call(move |w| {
            let changed = w.conn.execute(
                "UPDATE tasks SET state = ?1, lease_ms = ?2, expires_ms = ?3
                 WHERE id = ?4 AND lease_ms = ?5 AND expires_ms > ?6",
                params![
                    e.state,
                    e.lease_ms as i64,
                    expires_ms as i64,
                    e.id.to_string(),
                    lapsed_lease_ms as i64,
                    now_ms() as i64
                ],
            )?;
            Ok(changed == 1)
        })
        .await
    }

    async fn get_task(&self, id: TaskId) -> Result<Option<TaskEntry>, ThreadError> {
        self.call(move |w| {
            Ok(w.conn
                .query_row(
                    &format!("{TASK_COLUMNS} WHERE id = ?1 AND expires_ms > ?2"),
                    params![id.to_string(), now_ms() as i64],
                    task_row,
                )
                .optional()?
                .flatten())
        })
        .await
    }

    async fn cancel_task(&self, id: TaskId) -> Result<(), ThreadError> {
        self.call(move |w| {
            w.conn.execute(
                "UPDATE tasks SET cancel = 1 WHERE id = ?1",
                [id.to_string()],
            )?;
            Ok(())
        })
        .await
    }

    async fn list_tasks(&self, owner: &Owner, limit: usize) -> Result<Vec<TaskEntry>, ThreadError> {
        let owner = owner.as_str().to_string();
        self.call(move |w| {
            let mut stmt = w.conn.prepare(&format!(
                "{TASK_COLUMNS} WHERE owner = ?1 AND expires_ms > ?2 ORDER BY created_ms DESC, id DESC LIMIT ?3"
            ))?;
            let rows = stmt.query_map(
                params![owner, now_ms() as i64, limit as i64],
                task_row,
            )?;
            let mut out = Vec::new();
            for row in rows {
                out.extend(row?);
            }
            Ok(out)
        })
        .await
    }

    async fn seen_front(&self, key: &str) -> Result<Option<SeenFront>, ThreadError> {
        let key = key.to_string();
        self.call(move |w| Ok(fronts::sqlite_get(&w.conn, &key)?))
            .await
    }

    async fn keep_front(
        &self,
        key: &str,
        front: &SeenFront,
        expires_ms: u64,
    ) -> Result<(), ThreadError> {
        let (key, front) = (key.to_string(), front.clone());
        self.call(move |w| Ok(fronts::sqlite_put(&w.conn, &key, &front, expires_ms)?))
            .await
    }
}

/// The columns a task record is read from, in [`task_row`]'s order.
const TASK_COLUMNS: &str = "SELECT id, owner, created_ms, state, lease_ms, cancel FROM tasks";

/// A task record read back; a row whose id is not a UUID (not written by us) is skipped.
fn task_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Option<TaskEntry>> {
    let id: String = r.get(0)?;
    let Ok(id) = id.parse::<TaskId>() else {
        return Ok(None);
    };
    Ok(Some(TaskEntry {
        id,
        owner: Owner::stored(Some(&r.get::<_, String>(1)?)),
        created_ms: r.get::<_, i64>(2)?.max(0) as u64,
        state: r.get(3)?,
        lease_ms: r.get::<_, i64>(4)?.max(0) as u64,
        cancel: r.get::<_, i64>(5)? != 0,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A day's count stored by an earlier version (keys and days as strings) keeps counting:
    /// the typed key and day read and add to the same row.
    #[tokio::test]
    async fn spend_counted_before_the_typed_keys_keeps_counting() {
        let tmp = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(tmp.path(), Duration::from_secs(60), 5)
            .await
            .unwrap();
        let day = Day::of_ms(1_763_942_400_000);
        Connection::open(store.path())
            .unwrap()
            .execute(
                "INSERT INTO spend (key, day, tokens, micro_usd) VALUES ('project\n/p', '2025-11-24', 5, 7)",
                [],
            )
            .unwrap();
        let key = SpendKey::Project("/p".into());
        let earlier = Spent {
            tokens: 5,
            micro_usd: 7,
        };
        assert_eq!(store.spent(&key, day).await.unwrap(), earlier);
        let added = Spent {
            tokens: 1,
            micro_usd: 1,
        };
        let total = store.add_spend(&key, day, added).await.unwrap();
        assert_eq!(
            total,
            Spent {
                tokens: 6,
                micro_usd: 8
            }
        );
        let client = SpendKey::Client("5f1d".into());
        assert_eq!(store.spent(&client, day).await.unwrap(), Spent::default());
    }

    #[tokio::test]
    async fn creates_the_state_directory_private() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b/gemini-mcp");
        let store = EmbeddedStore::open(&dir, Duration::from_secs(60), 5)
            .await
            .unwrap();
        assert!(store.path().is_file());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{mode:o}");
        }
    }

    #[tokio::test]
    async fn a_file_that_is_not_a_database_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join(FILE_NAME),
            "not sqlite at all, just text ".repeat(100),
        )
        .unwrap();
        let Err(e) = EmbeddedStore::open(tmp.path(), Duration::from_secs(60), 5).await else {
            panic!("a text file was accepted as the database");
        };
        let msg = e.to_string();
        assert!(msg.contains(FILE_NAME), "{msg}");
        assert!(msg.contains("GEMINI_MCP_STATE_DIR"), "{msg}");
    }

    #[tokio::test]
    async fn expired_threads_are_deleted_on_open() {
        let tmp = tempfile::tempdir().unwrap();
        let id = ThreadId::new();
        {
            let store = EmbeddedStore::open(tmp.path(), Duration::from_millis(1), 5)
                .await
                .unwrap();
            store
                .append(id, "/p", &Owner::local(), &turn())
                .await
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(5));
        let _reopened = EmbeddedStore::open(tmp.path(), Duration::from_secs(60), 5)
            .await
            .unwrap();
        let conn = Connection::open(tmp.path().join(FILE_NAME)).unwrap();
        let rows: i64 = conn
            .query_row(
                "SELECT (SELECT count(*) FROM threads) + (SELECT count(*) FROM turns)",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(rows, 0);
    }

    /// A database written before owners existed gets the column on open; its threads are local.
    #[tokio::test]
    async fn threads_stored_before_owners_are_local() {
        let tmp = tempfile::tempdir().unwrap();
        let id = ThreadId::new();
        {
            let conn = Connection::open(tmp.path().join(FILE_NAME)).unwrap();
            // Before owners there were no tasks either: the schema up to the tasks' table.
            let before_tasks = SCHEMA.split("CREATE TABLE IF NOT EXISTS tasks").next().unwrap();
            let old_schema =
                before_tasks.replace("    owner      TEXT NOT NULL DEFAULT 'local',\n", "");
            assert!(!old_schema.contains("owner"));
            conn.execute_batch(&old_schema).unwrap();
            let body = serde_json::to_string(&turn()).unwrap();
            conn.execute(
                "INSERT INTO threads (id, project, created_ms, expires_ms, turns, written) VALUES (?1, '/p', 0, ?2, 1, 1)",
                params![id.to_string(), i64::MAX],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO turns (thread, seq, body) VALUES (?1, 0, ?2)",
                params![id.to_string(), body],
            )
            .unwrap();
        }
        let store = EmbeddedStore::open(tmp.path(), Duration::from_secs(60), 5)
            .await
            .unwrap();
        assert_eq!(store.load(id).await.unwrap().owner, Owner::local());
        let stranger = Owner::for_token(b"t");
        let err = store
            .append(id, "/p", &stranger, &turn())
            .await
            .unwrap_err();
        assert!(matches!(err, ThreadError::Foreign { .. }), "{err:?}");
        assert_eq!(
            store
                .append(id, "/p", &Owner::local(), &turn())
                .await
                .unwrap(),
            2
        );
        // Opening again (the column now exists) changes nothing.
        drop(store);
        let store = EmbeddedStore::open(tmp.path(), Duration::from_secs(60), 5)
            .await
            .unwrap();
        assert_eq!(store.load(id).await.unwrap().turns.len(), 2);
    }

    fn turn() -> Turn {
        Turn {
            tool: "chat".into(),
            request: "hi".into(),
            files: Vec::new(),
            response: "hello".into(),
            model: "m".into(),
            usage: Default::default(),
            at_ms: 1,
            request_tokens: 1,
            response_tokens: 1,
            frames: Vec::new(),
            context_cache: None,
            extra_usd: 0.0,
            interaction: None,
        }
    }
}

//! Fronts seen beside the threads: what a first call sent before its request (its system
//! instruction and its files), kept under a digest of its owner, its model and those bytes, so
//! that a later call sending the same front — a review re-run over unchanged files — finds it.
//! The pipeline's cache step (`pipeline::cache`) makes a context cache of a front on its second
//! sighting and records it here, so the third and later calls read that cache; every instance on
//! the store shares the record. A record is gone at its expiry (`expires_ms`), which the
//! pipeline sets to the cache's own at Google.
//!
//! [`MemoryFronts`] is the in-process body, used by the memory store; [`sqlite_get`] and
//! [`sqlite_put`] the embedded store's (its `fronts` table); the Redis store keeps a record as
//! one string value with its expiry.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::context_cache::ContextCache;
use super::now::now_ms;

/// One front as stored: seen by a call, and the cache made of it once one was.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SeenFront {
    /// The cache holding it at Google; `None` while it was only seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<ContextCache>,
}

impl SeenFront {
    /// The stored form (JSON).
    pub fn stored(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }

    /// A stored form read back; one that is not ours reads as unseen.
    pub fn read(text: &str) -> Option<SeenFront> {
        serde_json::from_str(text).ok()
    }
}

/// The in-process records (the memory store's). A std mutex: no await while it is held.
#[derive(Default)]
pub struct MemoryFronts {
    records: Mutex<HashMap<String, (SeenFront, u64)>>,
}

impl MemoryFronts {
    fn records(&self) -> std::sync::MutexGuard<'_, HashMap<String, (SeenFront, u64)>> {
        let mut g = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let now = now_ms();
        g.retain(|_, (_, expires)| *expires > now);
        g
    }

    pub fn get(&self, key: &str) -> Option<SeenFront> {
        self.records().get(key).map(|(f, _)| f.clone())
    }

    pub fn put(&self, key: &str, front: &SeenFront, expires_ms: u64) {
        self.records()
            .insert(key.to_string(), (front.clone(), expires_ms));
    }
}

/// The embedded store's table of fronts (created with the rest of its schema).
pub const SQLITE_TABLE: &str = "
CREATE TABLE IF NOT EXISTS fronts (
    key        TEXT PRIMARY KEY,
    front      TEXT NOT NULL,
    expires_ms INTEGER NOT NULL
) WITHOUT ROWID;
";

/// The front under `key` in the embedded store, while it is kept.
pub fn sqlite_get(
    conn: &rusqlite::Connection,
    key: &str,
) -> Result<Option<SeenFront>, rusqlite::Error> {
    use rusqlite::OptionalExtension;
    let text: Option<String> = conn
        .query_row(
            "SELECT front FROM fronts WHERE key = ?1 AND expires_ms > ?2",
            rusqlite::params![key, now_ms() as i64],
            |r| r.get(0),
        )
        .optional()?;
    Ok(text.as_deref().and_then(SeenFront::read))
}

/// Keeps `front` under `key` in the embedded store until `expires_ms` (expired records go with
/// the write).
pub fn sqlite_put(
    conn: &rusqlite::Connection,
    key: &str,
    front: &SeenFront,
    expires_ms: u64,
) -> Result<(), rusqlite::Error> {
    conn.execute(
        "DELETE FROM fronts WHERE expires_ms <= ?1",
        [now_ms() as i64],
    )?;
    conn.execute(
        "INSERT INTO fronts (key, front, expires_ms) VALUES (?1, ?2, ?3)
         ON CONFLICT (key) DO UPDATE SET front = ?2, expires_ms = ?3",
        rusqlite::params![key, front.stored(), expires_ms as i64],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_front_reads_back_and_a_foreign_one_is_unseen() {
        let seen = SeenFront::default();
        assert_eq!(seen.stored(), "{}");
        assert_eq!(SeenFront::read("{}"), Some(seen));
        assert_eq!(SeenFront::read("not json"), None);
    }
}

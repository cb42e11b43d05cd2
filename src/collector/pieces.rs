//! The o200k counts of pre-tokenizer pieces already merged, remembered for every thread at once
//! in a fixed amount of memory.
//!
//! Counting a piece of more than one token means running the byte-pair merge; source code
//! repeats its pieces (identifiers, indentation), so each is merged once and remembered. The
//! memory is shared by all threads rather than kept per thread: a piece merged by one collector
//! worker (or by the warm-up) is known to the others and to the runtime's blocking threads,
//! and the memory held does not grow with the number of threads. It is split into shards, each
//! behind its own lock (two workers rarely want the same one), and each shard is a fixed table
//! of slots with an arena for the pieces' bytes: [`BYTES`] in all, allocated as first used,
//! never more. A full shard is emptied and starts again.

use std::hash::Hasher;
use std::sync::Mutex;

/// Shards (a power of two), chosen by a piece's hash.
const SHARDS: usize = 16;
/// Slots per shard (a power of two); a shard is emptied once three quarters are taken.
const SLOTS: usize = 1 << 12;
/// Bytes of pieces per shard.
const ARENA: usize = 1 << 16;
/// Pieces longer than this are not remembered (they are rare and cost an arena's room).
pub const LONGEST: usize = 48;
/// The memory the pieces' counts may take, all shards full: slots and arenas.
pub const BYTES: usize = SHARDS * (SLOTS * 8 + ARENA);

/// A slot: 0 when empty, else the piece's count (8 bits), length (8), offset in the arena (16),
/// and the top 32 bits of its hash.
const COUNT_SHIFT: u32 = 0;
const LEN_SHIFT: u32 = 8;
const OFFSET_SHIFT: u32 = 16;
const TAG_SHIFT: u32 = 32;

struct Shard {
    slots: Vec<u64>,
    arena: Vec<u8>,
    taken: usize,
}

/// A piece memory: [`SHARDS`] shards, each allocated as first used.
pub struct Pieces {
    shards: [Mutex<Shard>; SHARDS],
}

impl Default for Pieces {
    fn default() -> Pieces {
        Pieces::new()
    }
}

/// The process's piece memory.
static MEMORY: Pieces = Pieces::new();

fn hash(piece: &[u8]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    h.write(piece);
    h.finish()
}

fn field(v: u64, shift: u32) -> usize {
    ((v >> shift) & 0xff) as usize
}

impl Shard {
    /// The slot holding `piece`, or the empty slot where it would go.
    fn find(&self, piece: &[u8], h: u64) -> (usize, Option<u32>) {
        let tag = h >> TAG_SHIFT << TAG_SHIFT;
        let mut i = (h as usize >> SHARDS.trailing_zeros()) & (SLOTS - 1);
        loop {
            let v = self.slots[i];
            if v == 0 {
                return (i, None);
            }
            if v >> TAG_SHIFT << TAG_SHIFT == tag && field(v, LEN_SHIFT) == piece.len() {
                let at = ((v >> OFFSET_SHIFT) & 0xffff) as usize;
                if &self.arena[at..at + piece.len()] == piece {
                    return (i, Some(field(v, COUNT_SHIFT) as u32));
                }
            }
            i = (i + 1) & (SLOTS - 1);
        }
    }

    fn empty(&mut self) {
        self.slots.fill(0);
        self.arena.clear();
        self.taken = 0;
    }
}

impl Pieces {
    pub const fn new() -> Pieces {
        Pieces {
            shards: [const {
                Mutex::new(Shard {
                    slots: Vec::new(),
                    arena: Vec::new(),
                    taken: 0,
                })
            }; SHARDS],
        }
    }

    fn shard(&self, h: u64) -> std::sync::MutexGuard<'_, Shard> {
        // The low bits choose the shard, the next ones the slot.
        self.shards[h as usize & (SHARDS - 1)]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// The remembered count of `piece`, if it was merged before.
    pub fn get(&self, piece: &[u8]) -> Option<u32> {
        if piece.len() > LONGEST {
            return None;
        }
        let h = hash(piece);
        let shard = self.shard(h);
        if shard.slots.is_empty() {
            return None;
        }
        shard.find(piece, h).1
    }

    /// Remembers that `piece` is `count` tokens (a piece longer than [`LONGEST`] is not kept).
    pub fn put(&self, piece: &[u8], count: u32) {
        let Ok(count) = u8::try_from(count) else {
            return;
        };
        if piece.len() > LONGEST {
            return;
        }
        let h = hash(piece);
        let mut shard = self.shard(h);
        if shard.slots.is_empty() {
            shard.slots = vec![0; SLOTS];
            shard.arena = Vec::with_capacity(ARENA);
        }
        if shard.taken >= SLOTS / 4 * 3 || shard.arena.len() + piece.len() > ARENA {
            shard.empty();
        }
        let (i, known) = shard.find(piece, h);
        if known.is_some() {
            return;
        }
        let at = shard.arena.len();
        shard.arena.extend_from_slice(piece);
        shard.slots[i] = h >> TAG_SHIFT << TAG_SHIFT
            | (at as u64) << OFFSET_SHIFT
            | (piece.len() as u64) << LEN_SHIFT
            | u64::from(count) << COUNT_SHIFT;
        shard.taken += 1;
    }

    /// Forgets every piece.
    pub fn clear(&self) {
        for shard in &self.shards {
            shard.lock().unwrap_or_else(|p| p.into_inner()).empty();
        }
    }

    /// The memory the shards hold now, in bytes (at most [`BYTES`]).
    pub fn held(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let s = s.lock().unwrap_or_else(|p| p.into_inner());
                s.slots.capacity() * 8 + s.arena.capacity()
            })
            .sum()
    }
}

/// The process's piece memory, shared by every thread.
pub fn memory() -> &'static Pieces {
    &MEMORY
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_remembered_and_the_memory_stays_within_its_bound() {
        let memory = Pieces::new();
        assert_eq!(memory.held(), 0);
        // Distinct pieces, many more than fit: every shard fills and is emptied again.
        for n in 0..200_000u32 {
            let piece = format!("piece_{n:07}_of_many");
            memory.put(piece.as_bytes(), n % 7 + 2);
            assert_eq!(memory.get(piece.as_bytes()), Some(n % 7 + 2), "{piece}");
            if n % 1000 == 0 {
                assert!(memory.held() <= BYTES, "{} > {BYTES}", memory.held());
            }
        }
        assert_eq!(memory.held(), BYTES);
        // What is remembered is right; the first were forgotten when their shard filled.
        let remembered = (0..200_000u32)
            .filter(|n| {
                let piece = format!("piece_{n:07}_of_many");
                let count = memory.get(piece.as_bytes());
                assert!(count.is_none_or(|c| c == n % 7 + 2), "{piece}: {count:?}");
                count.is_some()
            })
            .count();
        assert!(
            remembered > 0 && remembered < SHARDS * SLOTS,
            "{remembered}"
        );
        assert_eq!(memory.get(b"piece_0000000_of_many"), None);
        // Too long to keep, or too many tokens for a slot: not remembered, never wrong.
        let long = "x".repeat(LONGEST + 1);
        memory.put(long.as_bytes(), 9);
        assert_eq!(memory.get(long.as_bytes()), None);
        memory.put(b"abc", 300);
        assert_eq!(memory.get(b"abc"), None);
        memory.clear();
        assert_eq!(memory.get(b"piece_0199999_of_many"), None);
        assert_eq!(memory.held(), BYTES);
    }
}

//! The o200k byte-pair encoder, for counting: exactly tiktoken's counts, in a twentieth of its
//! memory.
//!
//! tiktoken-rs keeps the vocabulary as hash maps both ways plus a sorted copy of every token
//! (about 45 MB once loaded, parsed from base64 at start). Counting needs only "the rank of these
//! bytes, if they are a token". Here the vocabulary is the one the build wrote (`build.rs`: every
//! token's bytes in rank order, in the binary's read-only data, never copied), and one
//! open-addressing table maps a token's bytes to its rank: 2 MiB, built in a few milliseconds.
//!
//! A piece of text is encoded as tiktoken's `byte_pair_merge` does: start from single bytes, and
//! merge, again and again, the adjacent pair whose joined bytes have the lowest rank (the leftmost
//! on a tie) until no adjacent pair is a token. The number of parts left is the count. The
//! exactness tests (`o200k`) compare with tiktoken-rs's `encode_ordinary`.

use std::cell::RefCell;
use std::hash::Hasher;
use std::sync::OnceLock;

/// `build.rs`'s output: the token count, each rank's end offset, then the tokens' bytes.
static DATA: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k.bin"));

/// Slots of the table (a power of two, 76% full: probes are longer than at 38% but stay in one
/// or two cache lines, as a slot is checked without leaving the table; 2 MiB rather than 4 cost
/// ~2% of a collection's time, BENCHMARKS.md).
const SLOTS: usize = 1 << 18;

pub struct Vocab {
    /// The token whose bytes hash to the slot (after probing), packed by [`slot`]; 0 = empty.
    /// The slot holds what is compared first (length, more bits of the hash) and where the
    /// bytes are, so a lookup touches the table and, on a likely hit only, the token's bytes.
    slots: Box<[u64]>,
    tokens: u32,
}

/// Bits of a slot: `rank + 1` (18), the token's length (8), its offset in the arena (24), the
/// top bits of its hash (14).
const RANK_BITS: u32 = 18;
const LEN_BITS: u32 = 8;
const OFFSET_BITS: u32 = 24;
const TAG_SHIFT: u32 = RANK_BITS + LEN_BITS + OFFSET_BITS;

/// A slot for the token of `rank`, `len` bytes at `offset` in the arena, whose hash is `h`.
fn slot(rank: u32, len: usize, offset: usize, h: u64) -> u64 {
    u64::from(rank + 1)
        | (len as u64) << RANK_BITS
        | (offset as u64) << (RANK_BITS + LEN_BITS)
        | (h >> TAG_SHIFT) << TAG_SHIFT
}

fn field(v: u64, shift: u32, bits: u32) -> usize {
    ((v >> shift) & ((1 << bits) - 1)) as usize
}

static VOCAB: OnceLock<Vocab> = OnceLock::new();

/// The vocabulary, its table built on first use.
pub fn vocab() -> &'static Vocab {
    VOCAB.get_or_init(Vocab::build)
}

thread_local! {
    /// The parts of the piece being merged: (start offset, rank of it joined with the next part).
    static PARTS: RefCell<Vec<(u32, u32)>> = const { RefCell::new(Vec::new()) };
}

fn word(i: usize) -> u32 {
    u32::from_le_bytes(DATA[4 * i..4 * i + 4].try_into().expect("four bytes"))
}

fn hash(bytes: &[u8]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    h.write(bytes);
    h.finish()
}

impl Vocab {
    fn build() -> Vocab {
        let tokens = word(0);
        assert!((tokens as usize) < SLOTS / 5 * 4, "the table is too small");
        assert!(tokens < 1 << RANK_BITS, "too many tokens for a slot");
        let mut vocab = Vocab {
            slots: vec![0u64; SLOTS].into_boxed_slice(),
            tokens,
        };
        for rank in 0..tokens {
            let bytes = vocab.token(rank);
            let offset = vocab.offset(rank);
            assert!(
                bytes.len() < 1 << LEN_BITS && offset < 1 << OFFSET_BITS,
                "a token does not fit a slot"
            );
            let h = hash(bytes);
            let mut i = h as usize & (SLOTS - 1);
            while vocab.slots[i] != 0 {
                i = (i + 1) & (SLOTS - 1);
            }
            vocab.slots[i] = slot(rank, bytes.len(), offset, h);
        }
        vocab
    }

    fn arena(&self) -> usize {
        4 * (1 + self.tokens as usize)
    }

    /// Where the token of `rank` starts in the arena.
    fn offset(&self, rank: u32) -> usize {
        if rank == 0 {
            0
        } else {
            word(rank as usize) as usize
        }
    }

    /// The bytes of the token of `rank`.
    fn token(&self, rank: u32) -> &'static [u8] {
        let arena = self.arena();
        let end = word(rank as usize + 1) as usize;
        &DATA[arena + self.offset(rank)..arena + end]
    }

    /// The rank of the token made of exactly `bytes`, if there is one.
    pub fn rank(&self, bytes: &[u8]) -> Option<u32> {
        let h = hash(bytes);
        let tag = (h >> TAG_SHIFT) << TAG_SHIFT;
        let mut i = h as usize & (SLOTS - 1);
        loop {
            let v = self.slots[i];
            if v == 0 {
                return None;
            }
            if v & (u64::MAX << TAG_SHIFT) == tag && field(v, RANK_BITS, LEN_BITS) == bytes.len() {
                let start = self.arena() + field(v, RANK_BITS + LEN_BITS, OFFSET_BITS);
                if &DATA[start..start + bytes.len()] == bytes {
                    return Some(field(v, 0, RANK_BITS) as u32 - 1);
                }
            }
            i = (i + 1) & (SLOTS - 1);
        }
    }

    /// The number of o200k tokens of one pre-tokenizer piece.
    pub fn count(&self, piece: &[u8]) -> usize {
        if piece.len() < 2 {
            return piece.len();
        }
        if self.rank(piece).is_some() {
            return 1;
        }
        PARTS.with(|parts| self.merge(piece, &mut parts.borrow_mut()))
    }

    fn merge(&self, piece: &[u8], parts: &mut Vec<(u32, u32)>) -> usize {
        let n = piece.len();
        parts.clear();
        parts.extend((0..n - 1).map(|i| (i as u32, self.rank_or_max(&piece[i..i + 2]))));
        parts.push(((n - 1) as u32, u32::MAX));
        parts.push((n as u32, u32::MAX));
        loop {
            // The lowest-ranked pair, the leftmost of equals (the last part has no pair).
            let mut best = (u32::MAX, 0);
            for (i, &(_, rank)) in parts[..parts.len() - 1].iter().enumerate() {
                if rank < best.0 {
                    best = (rank, i);
                }
            }
            let (rank, i) = best;
            if rank == u32::MAX {
                break;
            }
            // Part i swallows part i + 1; the pairs it now makes with its neighbours are ranked
            // before i + 1 goes (the part after the merged one is then i + 3).
            parts[i].1 = self.joined_rank(piece, parts, i);
            if i > 0 {
                parts[i - 1].1 = self.joined_rank(piece, parts, i - 1);
            }
            parts.remove(i + 1);
        }
        parts.len() - 1
    }

    /// The rank of part `i` joined with the part after the next (which is being merged in).
    fn joined_rank(&self, piece: &[u8], parts: &[(u32, u32)], i: usize) -> u32 {
        match parts.get(i + 3) {
            Some(&(end, _)) => self.rank_or_max(&piece[parts[i].0 as usize..end as usize]),
            None => u32::MAX,
        }
    }

    fn rank_or_max(&self, bytes: &[u8]) -> u32 {
        self.rank(bytes).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_token_is_found_at_its_rank_and_counts_one() {
        let v = vocab();
        assert_eq!(v.tokens, 199_998);
        for rank in (0..v.tokens).step_by(97).chain([0, 255, v.tokens - 1]) {
            let bytes = v.token(rank);
            assert_eq!(v.rank(bytes), Some(rank), "{bytes:?}");
            assert_eq!(v.count(bytes), 1);
        }
        assert_eq!(v.rank(b""), None);
        assert_eq!(v.rank("\u{1F980}never-a-token\u{1F980}".as_bytes()), None);
    }

    #[test]
    fn pieces_count_as_tiktoken_encodes_them() {
        let bpe = tiktoken_rs::o200k_base_singleton();
        let v = vocab();
        for piece in [
            "a",
            " hello",
            "Supercalifragilisticexpialidocious",
            "    ",
            "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
            "\u{00e9}t\u{00e9}",
            "\u{4f60}\u{597d}\u{4e16}\u{754c}",
            "\u{1F980}\u{1F980}",
            "=================================================",
        ] {
            assert_eq!(
                v.count(piece.as_bytes()),
                bpe.encode_ordinary(piece).len(),
                "{piece:?}"
            );
        }
    }
}

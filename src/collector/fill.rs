//! Filling the budget: reads, redacts, numbers and counts the candidates in priority order, on
//! every core, and stops reading once the budget is full.
//!
//! Workers (the collector's persistent thread pool: each thread remembers the o200k pieces it has
//! merged, and the pre-tokenizer's automaton is built lazily, so fresh threads per request would
//! pay that again each time) claim candidates in priority order and process them in parallel;
//! results are committed strictly in that order under one lock, so what is sent never depends on
//! timing.
//! A file is sent when it fits in what is left after the files before it. Work that cannot fit is
//! avoided: a file whose size alone implies more tokens than are left is not opened, counting
//! stops as soon as a file's running count exceeds what is left, and nothing more is opened once
//! less than [`stop_threshold`] is left. Each of these checks reads the budget left *now*, which
//! can only be larger than what will be left when the file's turn to commit comes, so a file
//! skipped early would have been skipped at its commit too: the outcome is deterministic.
//!
//! Workers do not run far ahead of the commits either: a file opened but not yet committed
//! reserves an expected share of the budget ([`expected`]), and a worker whose file is not at
//! the head of the queue waits while the reservations would fill what is left. Waiting changes
//! only when work happens, never what is sent.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use super::read::{self, Unread};
use super::walk::Candidate;
use super::entry::FileEntry;
use super::skip::{SkipReason, Skipped};
use super::{render, tokens};

/// The fewest tokens any rendered file takes (an empty file with a one-letter name); checked
/// by a test against the counter.
pub const MIN_BLOCK_TOKENS: u64 = 12;

/// Bytes per calibrated token above which no real text goes (measured; BENCHMARKS.md).
pub const MAX_BYTES_PER_TOKEN: u64 = 8;

/// A lower estimate of a file's tokens from its size, used to avoid opening files that cannot
/// fit. Real files take at least this many (see [`MAX_BYTES_PER_TOKEN`]).
pub fn estimate(size: u64) -> u64 {
    MIN_BLOCK_TOKENS + size / MAX_BYTES_PER_TOKEN
}

/// The tokens a file of `size` bytes is expected to take (typical source: about 0.3 per byte
/// with numbering; deliberately a little low, so read-ahead is held back, not stopped).
pub fn expected(size: u64) -> u64 {
    size / 4
}

/// Once less than this is left, the budget is full and nothing more is opened.
pub fn stop_threshold(budget: u64) -> u64 {
    MIN_BLOCK_TOKENS.max(budget / 200)
}

/// What a worker found; `size` is the file's size when it was opened (if it was).
enum Outcome {
    Entry(FileEntry, u64),
    AlreadySent,
    OverBudget(Option<u64>),
    Unread(Unread, Option<u64>),
}

impl Outcome {
    fn size(&self) -> Option<u64> {
        match self {
            Outcome::Entry(_, s) => Some(*s),
            Outcome::AlreadySent => None,
            Outcome::OverBudget(s) | Outcome::Unread(_, s) => *s,
        }
    }
}

/// A finished outcome and the budget it reserved while in flight.
struct Done {
    outcome: Outcome,
    reserved: u64,
}

struct Commit {
    next: usize,
    slots: Vec<Option<Done>>,
    left: u64,
    files: Vec<FileEntry>,
    skipped: Vec<Skipped>,
}

/// What the fill produced, in priority order.
pub struct Filled {
    pub files: Vec<FileEntry>,
    pub skipped: Vec<Skipped>,
    /// Files opened and read.
    pub opened: usize,
    /// Bytes of rendered text handed to the token counter (including abandoned counts).
    pub counted_bytes: usize,
}

#[derive(Default)]
struct Stats {
    opened: AtomicUsize,
    counted_bytes: AtomicUsize,
}

/// What earlier calls learnt about the files.
#[derive(Clone, Copy)]
pub struct Prior<'a> {
    /// Sent earlier in the thread: canonical path -> content hash (skipped if unchanged).
    pub already_sent: &'a HashMap<PathBuf, String>,
    /// Counted earlier: canonical path -> (content hash, tokens), reused if unchanged.
    pub counted: &'a HashMap<PathBuf, (String, u64)>,
}

/// Fills `budget` with `items` (sorted by priority, de-duplicated).
pub fn fill(
    items: &[Candidate],
    budget: u64,
    prior: Prior<'_>,
    pool: Option<&rayon::ThreadPool>,
) -> Filled {
    let stop = stop_threshold(budget);
    let left = AtomicU64::new(budget);
    let reserved = AtomicU64::new(0);
    let progress = Condvar::new();
    let next = AtomicUsize::new(0);
    let stats = Stats::default();
    let commit = Mutex::new(Commit {
        next: 0,
        slots: (0..items.len()).map(|_| None).collect(),
        left: budget,
        files: Vec::new(),
        skipped: Vec::new(),
    });
    // Workers blocked in `progress.wait`; a commit wakes them only if there are any (a wake is
    // a system call, and most commits have no one waiting). Changed under the `commit` lock.
    let waiting = AtomicUsize::new(0);
    let wake = || {
        if waiting.load(Ordering::Relaxed) > 0 {
            progress.notify_all();
        }
    };
    let flight = Flight {
        left: &left,
        reserved: &reserved,
        stop,
        stats: &stats,
    };
    let work = || {
        loop {
            // Once the budget is full it stays full: what is left is skipped in one go, with
            // no reading, no waiting and one commit.
            if left.load(Ordering::Relaxed) < stop {
                let start = next.swap(items.len(), Ordering::Relaxed);
                if start >= items.len() {
                    break;
                }
                let done: Vec<Done> = items[start..]
                    .iter()
                    .map(|item| process(item, prior, &flight))
                    .collect();
                let Ok(mut c) = commit.lock() else { break };
                for (slot, done) in c.slots[start..].iter_mut().zip(done) {
                    *slot = Some(done);
                }
                advance(&mut c, items, stop, &left, &reserved);
                drop(c);
                wake();
                break;
            }
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(i) else { break };
            // Hold back while the files in flight ahead of this one may fill what is left. The
            // worker on the lowest index never waits, so the commits always move on.
            let Ok(mut c) = commit.lock() else { break };
            while c.next < i && c.left.saturating_sub(reserved.load(Ordering::Relaxed)) < stop {
                waiting.fetch_add(1, Ordering::Relaxed);
                c = match progress.wait(c) {
                    Ok(c) => c,
                    Err(p) => p.into_inner(),
                };
                waiting.fetch_sub(1, Ordering::Relaxed);
            }
            drop(c);
            let done = process(item, prior, &flight);
            let Ok(mut c) = commit.lock() else { break };
            c.slots[i] = Some(done);
            advance(&mut c, items, stop, &left, &reserved);
            drop(c);
            wake();
        }
    };
    match pool {
        Some(pool) if items.len() > 1 => {
            pool.broadcast(|_| work());
        }
        _ => work(),
    }
    let c = commit.into_inner().unwrap_or_else(|p| p.into_inner());
    Filled {
        files: c.files,
        skipped: c.skipped,
        opened: stats.opened.into_inner(),
        counted_bytes: stats.counted_bytes.into_inner(),
    }
}

/// Commits every finished result at the head of the queue.
fn advance(c: &mut Commit, items: &[Candidate], stop: u64, left: &AtomicU64, reserved: &AtomicU64) {
    while let Some(done) = c.slots.get_mut(c.next).and_then(Option::take) {
        let item = &items[c.next];
        c.next += 1;
        reserved.fetch_sub(done.reserved, Ordering::Relaxed);
        let outcome = done.outcome;
        let too_big = outcome.size().is_some_and(|s| estimate(s) > c.left);
        let reason = match outcome {
            Outcome::AlreadySent => SkipReason::AlreadySent,
            _ if c.left < stop => SkipReason::OverBudget,
            Outcome::Unread(Unread::TooLarge, _) => SkipReason::TooLarge,
            _ if too_big => SkipReason::OverBudget,
            Outcome::Entry(e, _) if e.tokens <= c.left => {
                c.left -= e.tokens;
                left.store(c.left, Ordering::Relaxed);
                c.files.push(e);
                continue;
            }
            Outcome::Entry(..) | Outcome::OverBudget(_) => SkipReason::OverBudget,
            Outcome::Unread(u, _) => match u {
                Unread::Binary => SkipReason::Binary,
                Unread::TooLarge => SkipReason::TooLarge,
                Unread::NotRegular => SkipReason::NotRegular,
                Unread::Unreadable => SkipReason::Unreadable,
                Unread::Changed => SkipReason::Changed,
            },
        };
        c.skipped.push(Skipped {
            path: item.display.clone(),
            reason,
        });
    }
}

/// What a worker needs to know about the budget while it works.
struct Flight<'a> {
    /// Budget left after the files committed so far.
    left: &'a AtomicU64,
    /// Expected tokens of the files opened and not yet committed.
    reserved: &'a AtomicU64,
    stop: u64,
    stats: &'a Stats,
}

fn process(item: &Candidate, prior: Prior<'_>, f: &Flight<'_>) -> Done {
    let mut reserved = 0;
    let outcome = outcome(item, prior, f, &mut reserved);
    Done { outcome, reserved }
}

fn outcome(item: &Candidate, prior: Prior<'_>, f: &Flight<'_>, reserved: &mut u64) -> Outcome {
    let left_now = || f.left.load(Ordering::Relaxed);
    let sent = prior.already_sent.get(item.path.as_path());
    // A file sent earlier is read whatever the budget: if unchanged it costs nothing.
    if sent.is_none() && left_now() < f.stop {
        return Outcome::OverBudget(None);
    }
    f.stats.opened.fetch_add(1, Ordering::Relaxed);
    let file = match read::open(&item.path, read::MAX_FILE_BYTES) {
        Ok(file) => file,
        Err(u) => return Outcome::Unread(u, None),
    };
    let size = file.len();
    let cannot_fit = || {
        let l = left_now();
        l < f.stop || estimate(size) > l
    };
    if sent.is_none() && cannot_fit() {
        return Outcome::OverBudget(Some(size));
    }
    *reserved = expected(size);
    f.reserved.fetch_add(*reserved, Ordering::Relaxed);
    let text = match file.read_text() {
        Ok(t) => t,
        Err(u) => return Outcome::Unread(u, Some(size)),
    };
    if sent == Some(&text.hash) {
        return Outcome::AlreadySent;
    }
    if cannot_fit() {
        return Outcome::OverBudget(Some(size));
    }
    let counted = prior
        .counted
        .get(item.path.as_path())
        .filter(|(hash, _)| *hash == text.hash)
        .map(|(_, tokens)| *tokens);
    entry(item, text, size, counted, &left_now, f.stats)
}

/// Redacts, renders and counts (unless the count of this very content is known).
fn entry(
    item: &Candidate,
    text: read::Text,
    size: u64,
    counted: Option<u64>,
    limit: &dyn Fn() -> u64,
    stats: &Stats,
) -> Outcome {
    let (redacted, redactions) = crate::redact::redact_counted(&text.text);
    let mut notes = Vec::new();
    if text.lossy {
        notes.push("invalid UTF-8 replaced with U+FFFD".to_string());
    }
    if redactions.total() > 0 {
        notes.push(format!(
            "{} secret-looking value(s) redacted",
            redactions.total()
        ));
    }
    let (block, frame) = render::framed(&item.display, &redacted, &notes);
    let tokens = match counted {
        Some(n) => (n <= limit()).then_some(n),
        None => {
            stats
                .counted_bytes
                .fetch_add(block.len(), Ordering::Relaxed);
            tokens::count_within(&block, limit)
        }
    };
    match tokens {
        Some(tokens) => Outcome::Entry(
            FileEntry {
                path: item.path.as_path().to_path_buf(),
                display: item.display.clone(),
                hash: text.hash,
                bytes: size,
                tokens,
                text: block,
                frame,
                lossy: text.lossy,
                redactions,
            },
            size,
        ),
        None => Outcome::OverBudget(Some(size)),
    }
}

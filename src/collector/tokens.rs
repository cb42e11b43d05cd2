//! Token counting: o200k (exactly as tiktoken counts it: [`super::o200k`]) calibrated to Gemini's
//! tokenizer, plus a margin, so a budget counted here is not overrun when Gemini counts it.
//!
//! The calibration (measured on 15,308 files, 278 MB of Python, Rust, C, assembly, Markdown,
//! TOML and JSON, rendered as sent; BENCHMARKS.md § Token calibration): Gemini's tokenizer
//! (Gemma-3 SentencePiece) spells every ASCII digit as a token of its own, where o200k takes up
//! to three digits per token. So digits are counted exactly, and only the other o200k tokens are
//! scaled:
//!
//! `gemini ≈ GEMINI_PER_O200K × (o200k − o200k digit tokens) + digits`, then `× (1 + MARGIN)`.
//!
//! A single factor over all o200k tokens spreads per-file errors over ±35% (a numeric table or
//! line-numbered text counts far more in Gemini); the digit-exact form keeps the main languages
//! within ±4% of Gemini's count in aggregate.
//!
//! Text is counted in chunks cut at line ends (at most [`CHUNK`] bytes; a longer line is cut
//! before a space, or at a character boundary after [`LONG_PIECE`] bytes). Chunking bounds two
//! costs of o200k on hostile input: the byte-pair merge is quadratic in the length of one
//! pre-tokenizer piece (1 MB of `a` takes over a second), and the pattern's backtracking gives up
//! on a megabyte of spaces. Cutting only adds tokens, so the count stays an upper estimate.

use std::panic::{AssertUnwindSafe, catch_unwind};

/// Gemini tokens per o200k token, digits aside (measured; see BENCHMARKS.md).
pub const GEMINI_PER_O200K: f64 = 1.122;
/// Safety margin over the calibrated estimate.
pub const MARGIN: f64 = 0.10;

/// Largest chunk counted at once.
pub const CHUNK: usize = 4096;
/// Longest piece of a line without spaces counted at once.
pub const LONG_PIECE: usize = 1024;

/// Builds the o200k vocabulary's table (milliseconds) and warms this thread: the pre-tokenizer's
/// and the secret rules' automata are built lazily, and [`super::o200k`] remembers merged pieces
/// per thread. Counting and redacting some of this crate's own source (Rust, with prose, numbers
/// and Unicode in it) does both, so the first request does not pay for them.
pub fn warm_up() {
    const SAMPLES: &[&str] = &[
        include_str!("fill.rs"),
        include_str!("secrets.rs"),
        include_str!("../../ARCHITECTURE.md"),
        "def handle(self, request, *args, **kwargs):\n    return {'status': 200, 'items': [1, 2, 3]}\n",
        "const App = () => { const [n, setN] = useState(0); return <div>{n}</div>; };\n",
    ];
    for sample in SAMPLES {
        let _ = o200k(&super::render::block("warm-up", sample, &[]));
        // The secret rules' lazy DFAs too: every file read is redacted before it is counted.
        let _ = crate::redact::redact(sample);
    }
}

/// The o200k_base token count of `text` (ordinary: special-token text counts as text).
pub fn o200k(text: &str) -> u64 {
    chunks(text).map(o200k_chunk).sum()
}

/// Calibrated token count of `text` as Gemini would count it (an upper estimate).
pub fn count(text: &str) -> u64 {
    count_within(text, &|| u64::MAX).unwrap_or(u64::MAX)
}

/// Like [`count`], but gives up as soon as the count exceeds `limit()` (read again after every
/// chunk, so a limit that shrinks meanwhile is honoured). `None` means "more than the limit".
pub fn count_within(text: &str, limit: &dyn Fn() -> u64) -> Option<u64> {
    let mut estimate = 0.0f64;
    for chunk in chunks(text) {
        estimate += gemini_estimate(chunk);
        if calibrated(estimate) > limit() {
            return None;
        }
    }
    Some(calibrated(estimate))
}

/// The uncalibrated Gemini estimate of one chunk: digits exactly, other tokens scaled.
fn gemini_estimate(chunk: &str) -> f64 {
    let (digits, digit_tokens) = digit_runs(chunk);
    let other = o200k_chunk(chunk).saturating_sub(digit_tokens);
    GEMINI_PER_O200K * other as f64 + digits as f64
}

fn calibrated(estimate: f64) -> u64 {
    (estimate * (1.0 + MARGIN)).ceil() as u64
}

/// ASCII digits in `s`, and the o200k tokens they take (a run of n digits is split into
/// ⌈n/3⌉ pieces of up to three digits, each a single token).
fn digit_runs(s: &str) -> (u64, u64) {
    let (mut digits, mut tokens, mut run) = (0u64, 0u64, 0u64);
    for b in s.bytes() {
        if b.is_ascii_digit() {
            run += 1;
        } else if run > 0 {
            digits += run;
            tokens += run.div_ceil(3);
            run = 0;
        }
    }
    (digits + run, tokens + run.div_ceil(3))
}

fn o200k_chunk(chunk: &str) -> u64 {
    // A panic in the counter must not take the server down. Every token is at least one byte,
    // so the byte length is a safe stand-in.
    catch_unwind(AssertUnwindSafe(|| super::o200k::count(chunk))).unwrap_or(chunk.len() as u64)
}

/// Splits `text` into pieces of at most [`CHUNK`] bytes, cut after a `\n` where possible.
pub fn chunks(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let cut = cut_point(rest);
        let (head, tail) = rest.split_at(cut);
        rest = tail;
        Some(head)
    })
}

fn cut_point(s: &str) -> usize {
    if s.len() <= CHUNK {
        return s.len();
    }
    let b = s.as_bytes();
    if let Some(i) = memchr::memrchr(b'\n', &b[..CHUNK]) {
        return i + 1;
    }
    // One long line: cut before a space within the first LONG_PIECE bytes, else at a char
    // boundary (a space starts the next o200k piece, so cutting before it changes little).
    let window = floor_char_boundary(s, LONG_PIECE);
    if let Some(i) = memchr::memrchr(b' ', &b[..window]).filter(|&i| i > 0) {
        return i;
    }
    window.max(next_char_boundary(s, 1))
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn next_char_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_text_and_respect_the_limits() {
        let long_word = "é".repeat(3000);
        let mut text = String::new();
        for i in 0..2000 {
            text.push_str(&format!("line {i} with some words\n"));
        }
        text.push_str(&long_word);
        text.push_str(&" spaced".repeat(1000));
        let parts: Vec<&str> = chunks(&text).collect();
        assert_eq!(parts.concat(), text);
        assert!(
            parts.iter().all(|p| p.len() <= CHUNK),
            "a chunk is too long"
        );
        assert!(parts.len() > text.len() / CHUNK);
    }

    #[test]
    fn hostile_input_is_counted_without_panicking() {
        // A megabyte of spaces defeats the pattern's backtracking when counted in one piece.
        let spaces = " ".repeat(1_000_000);
        let n = o200k(&spaces);
        assert!(n > 0 && n <= 1_000_000, "{n}");
        let letters = "a".repeat(200_000);
        assert!(o200k(&letters) >= 200_000 / 16);
    }

    #[test]
    fn digits_are_counted_as_gemini_spells_them() {
        assert_eq!(digit_runs(""), (0, 0));
        assert_eq!(digit_runs("abc"), (0, 0));
        assert_eq!(digit_runs("1"), (1, 1));
        assert_eq!(digit_runs("x = 1234567;"), (7, 3));
        assert_eq!(digit_runs("12 345 6"), (6, 3));
        // A table of numbers costs Gemini one token per digit: the count must follow.
        let table: String = (0..500)
            .map(|i| format!("{},{}\n", i * 7919, i * 31))
            .collect();
        let digits = table.bytes().filter(u8::is_ascii_digit).count() as u64;
        assert!(count(&table) as f64 >= digits as f64 * (1.0 + MARGIN));
    }

    #[test]
    fn calibrated_count_exceeds_raw_count() {
        let src = "fn main() {\n    println!(\"hello, world\");\n}\n";
        let raw = o200k(src);
        assert!(raw > 5);
        assert!(count(src) > raw);
        assert_eq!(count(""), 0);
    }

    #[test]
    fn count_within_stops_at_the_limit() {
        let text = "word ".repeat(20_000);
        let full = count(&text);
        assert_eq!(count_within(&text, &|| full), Some(full));
        assert_eq!(count_within(&text, &|| full - 1), None);
        assert_eq!(count_within(&text, &|| 10), None);
    }
}

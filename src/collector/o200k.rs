//! Exact o200k token counts, fast: each pre-tokenizer piece counted once by [`super::bpe`] (the
//! byte-pair encoder over the vocabulary in the binary) and remembered.
//!
//! tiktoken splits text into pieces with a regex (o200k's pattern, [`PATTERN`]) and byte-pair
//! encodes each piece on its own, so a text's count is the sum of its pieces' counts. The regex
//! needs `fancy-regex` for one lookahead (`\s+(?!\S)`) and runs at about 25–30 MB/s. For ASCII
//! text this module splits with a hand-written scanner that follows the regex alternative by
//! alternative (the regex's Unicode classes reduce to six byte classes on ASCII); other text is
//! split by the regex itself. A piece that is one token is found in the vocabulary's table at
//! once; a longer one is merged and its count remembered for every thread
//! ([`super::pieces`], a fixed amount of memory). Source code repeats its pieces (keywords,
//! identifiers, indentation), so few are merged twice.
//!
//! The scanner knows ASCII and `│` (the line-number separator of every rendered file, an "other"
//! symbol to the regex). Text is cut into runs of lines at line ends where no piece can cross
//! (the next line is not blank and does not start with `/`); runs holding any other non-ASCII
//! character go to the regex.
//!
//! Exactness is tested against tiktoken-rs's `encode_ordinary` on this crate's sources, on random
//! strings over every ASCII class and on random Unicode text, and (BENCHMARKS.md) on 56,776 files
//! of real source and text (1.3 GB raw and rendered): no difference.

use std::sync::OnceLock;

use super::bpe::Vocab;
use super::pieces::{self, Pieces};

/// o200k_base's pre-tokenizer pattern (tiktoken's `O200K_BASE_PAT_STR`; a test compares them).
pub const PATTERN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|",
    r"\p{N}{1,3}",
    "|",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    "|",
    r"\s*[\r\n]+",
    "|",
    r"\s+(?!\S)",
    "|",
    r"\s+"
);

/// The line-number separator, the one non-ASCII character the scanner knows.
const BAR: &[u8] = "│".as_bytes();

fn regex() -> &'static fancy_regex::Regex {
    static REGEX: OnceLock<fancy_regex::Regex> = OnceLock::new();
    REGEX.get_or_init(|| fancy_regex::Regex::new(PATTERN).expect("o200k's pattern compiles"))
}

/// The o200k count of `text`, exactly as tiktoken's `encode_ordinary(text).len()`.
pub fn count(text: &str) -> u64 {
    count_with(text, pieces::memory())
}

/// [`count`], remembering merged pieces in `memory`.
fn count_with(text: &str, memory: &Pieces) -> u64 {
    let vocab = super::bpe::vocab();
    let mut total = 0u64;
    for (segment, scannable) in segments(text) {
        total += if scannable {
            let mut n = 0u64;
            for_each_piece(segment.as_bytes(), |piece| {
                n += u64::from(piece_count(vocab, memory, piece))
            });
            n
        } else {
            split_by_regex(vocab, memory, segment)
        };
    }
    total
}

/// Counts a segment the scanner does not know, split by the regex. The regex gives up on
/// pathological input (its backtracking limit); every token is at least one byte, so the byte
/// length then stands in, an upper bound.
fn split_by_regex(vocab: &Vocab, memory: &Pieces, segment: &str) -> u64 {
    let mut total = 0u64;
    for piece in regex().find_iter(segment) {
        match piece {
            Ok(p) => total += u64::from(piece_count(vocab, memory, p.as_str().as_bytes())),
            Err(e) => {
                tracing::debug!("o200k pattern gave up ({e}); counting the segment's bytes");
                return segment.len() as u64;
            }
        }
    }
    total
}

fn piece_count(vocab: &Vocab, memory: &Pieces, piece: &[u8]) -> u32 {
    if piece.len() < 2 || vocab.rank(piece).is_some() {
        return piece.len().min(1) as u32;
    }
    if let Some(n) = memory.get(piece) {
        return n;
    }
    let n = u32::try_from(vocab.count(piece)).unwrap_or(u32::MAX);
    memory.put(piece, n);
    n
}

/// Whether the scanner knows every character of `s` (ASCII and `│`).
fn scannable(s: &[u8]) -> bool {
    let mut i = 0;
    while i < s.len() {
        if s[i] < 0x80 {
            i += 1;
        } else if s[i..].starts_with(BAR) {
            i += BAR.len();
        } else {
            return false;
        }
    }
    true
}

/// Cuts `text` into runs of whole lines, each scannable or not, at line ends no piece crosses.
fn segments(text: &str) -> Vec<(&str, bool)> {
    let s = text.as_bytes();
    let mut out: Vec<(&str, bool)> = Vec::new();
    let (mut start, mut kind) = (0, true);
    let mut line = 0;
    while line < s.len() {
        let end = memchr::memchr(b'\n', &s[line..]).map_or(s.len(), |i| line + i + 1);
        let this = scannable(&s[line..end]);
        if line > start && this != kind && boundary(s, line) {
            out.push((&text[start..line], kind));
            (start, kind) = (line, this);
        } else {
            kind &= this;
            if line == start {
                kind = this;
            }
        }
        line = end;
    }
    if start < s.len() {
        out.push((&text[start..], kind));
    }
    out
}

/// No piece crosses position `j` (just after a `\n`): `[\r\n/]*` cannot go on, and the
/// whitespace that follows holds no further line end (which `\s*[\r\n]+` would reach).
fn boundary(s: &[u8], j: usize) -> bool {
    if matches!(s.get(j), None | Some(b'\r' | b'\n' | b'/')) {
        return false;
    }
    let ws_end = run(s, j, |c| matches!(c, Class::Space | Class::Newline));
    !s[j..ws_end].iter().any(|&b| b == b'\r' || b == b'\n')
}

/// Byte classes: on ASCII, o200k's `\p{Lu}`-and-friends, `\p{Ll}`-and-friends, `\p{N}`,
/// `[\r\n]`, other `\s`, and everything else.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    Upper,
    Lower,
    Digit,
    Newline,
    Space,
    Other,
}

fn class(b: u8) -> Class {
    match b {
        b'A'..=b'Z' => Class::Upper,
        b'a'..=b'z' => Class::Lower,
        b'0'..=b'9' => Class::Digit,
        b'\r' | b'\n' => Class::Newline,
        // Unicode White_Space on ASCII: \t, \v, \f and the space (\r\n above).
        b' ' | b'\t' | 0x0b | 0x0c => Class::Space,
        // Everything else, and the bytes of `│` (the only non-ASCII the scanner is given).
        _ => Class::Other,
    }
}

fn is_letter(c: Class) -> bool {
    matches!(c, Class::Upper | Class::Lower)
}

fn run(s: &[u8], mut i: usize, want: impl Fn(Class) -> bool) -> usize {
    while i < s.len() && want(class(s[i])) {
        i += 1;
    }
    i
}

/// Calls `f` with each piece of `s` (ASCII and `│` only), in order; the pieces cover `s`.
pub fn for_each_piece(s: &[u8], mut f: impl FnMut(&[u8])) {
    let mut p = 0;
    while p < s.len() {
        let end = piece_end(s, p);
        f(&s[p..end]);
        p = end;
    }
}

/// Where the o200k piece starting at `p` ends. The alternatives of the regex, in its order:
///
/// 1. `[^\r\n\p{L}\p{N}]?[\p{Lu}..]*[\p{Ll}..]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
/// 2. `[^\r\n\p{L}\p{N}]?[\p{Lu}..]+[\p{Ll}..]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
/// 3. `\p{N}{1,3}`
/// 4. ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
/// 5. `\s*[\r\n]+`
/// 6. `\s+(?!\S)`
/// 7. `\s+`
fn piece_end(s: &[u8], p: usize) -> usize {
    let c = class(s[p]);
    // The first character is one byte, or the three of `│`.
    let width = if s[p] < 0x80 { 1 } else { BAR.len() };
    let next = s.get(p + width).map(|&b| class(b));
    // 1 and 2: letters, after at most one char that is not \r, \n, a letter or a digit. On ASCII
    // the upper and lower sets are disjoint, so the greedy runs need no backtracking: 1 matches
    // when lower-case letters follow the upper-case run, else 2 takes the upper-case run.
    if is_letter(c) || (matches!(c, Class::Other | Class::Space) && next.is_some_and(is_letter)) {
        let start = if is_letter(c) { p } else { p + width };
        let upper = run(s, start, |c| c == Class::Upper);
        let lower = run(s, upper, |c| c == Class::Lower);
        return contraction(s, lower.max(upper));
    }
    // 3: one to three digits.
    if c == Class::Digit {
        return run(s, p, |c| c == Class::Digit).min(p + 3);
    }
    // 4: other characters, after an optional space, then any \r, \n and / (so `};\n\n///`
    // is one piece: the slashes after the line ends belong to it).
    if c == Class::Other || (s[p] == b' ' && next == Some(Class::Other)) {
        let start = if c == Class::Other { p } else { p + 1 };
        let mut end = run(s, start, |c| c == Class::Other);
        while end < s.len() && matches!(s[end], b'\r' | b'\n' | b'/') {
            end += 1;
        }
        return end;
    }
    // 5, 6, 7: whitespace. With a line end in the run, up to its last line end; otherwise the
    // run, less its last character when a non-space follows (the lookahead of 6), unless that
    // would leave nothing (then 7 takes the one character).
    let end = run(s, p, |c| matches!(c, Class::Space | Class::Newline));
    if let Some(last_nl) = (p..end).rev().find(|&i| class(s[i]) == Class::Newline) {
        return last_nl + 1;
    }
    if end == s.len() || end - p == 1 {
        end
    } else {
        end - 1
    }
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)?` at `i`.
fn contraction(s: &[u8], i: usize) -> usize {
    if s.get(i) != Some(&b'\'') {
        return i;
    }
    let a = s.get(i + 1).map(u8::to_ascii_lowercase);
    let b = s.get(i + 2).map(u8::to_ascii_lowercase);
    match (a, b) {
        (Some(b's' | b't' | b'm' | b'd'), _) => i + 2,
        (Some(b'r' | b'v'), Some(b'e')) | (Some(b'l'), Some(b'l')) => i + 3,
        _ => i,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(text: &str) -> u64 {
        tiktoken_rs::o200k_base_singleton()
            .encode_ordinary(text)
            .len() as u64
    }

    fn pieces(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for_each_piece(text.as_bytes(), |p| {
            out.push(String::from_utf8_lossy(p).into_owned())
        });
        out
    }

    #[test]
    fn pieces_follow_the_regex() {
        for (text, expect) in [
            ("Hello world", vec!["Hello", " world"]),
            ("HTTPServer isOK", vec!["HTTPServer", " is", "OK"]),
            ("ABC def", vec!["ABC", " def"]),
            ("don't I'LL we're", vec!["don't", " I'LL", " we're"]),
            ("x = 12345;", vec!["x", " =", " ", "123", "45", ";"]),
            ("    return a\n", vec!["   ", " return", " a", "\n"]),
            ("):\n\n  x", vec!["):\n\n", " ", " x"]),
            ("a  \n\n b", vec!["a", "  \n\n", " b"]),
            ("__init__(self)", vec!["__", "init", "__(", "self", ")"]),
            ("\t(x)", vec!["\t", "(x", ")"]),
            ("  ", vec!["  "]),
            ("a //b", vec!["a", " //", "b"]),
            ("x\r\n", vec!["x", "\r\n"]),
            ("};\n\n/// doc", vec!["};\n\n///", " doc"]),
        ] {
            assert_eq!(pieces(text), expect, "{text:?}");
            assert_eq!(regex_pieces(text), expect, "{text:?}: the regex disagrees");
        }
    }

    static REGEX: std::sync::LazyLock<fancy_regex::Regex> = std::sync::LazyLock::new(|| {
        fancy_regex::Regex::new(tiktoken_rs::O200K_BASE_PAT_STR).unwrap()
    });

    /// The pieces of tiktoken's own regex.
    fn regex_pieces(text: &str) -> Vec<String> {
        REGEX
            .find_iter(text)
            .map(|m| m.unwrap().as_str().to_string())
            .collect()
    }

    #[test]
    fn counts_equal_tiktoken_on_random_ascii() {
        const ALPHABET: &[u8] = b"aAzZqQ09 5 \t\n\r\x0b\x0c'sStTlLdDmMrReEvV/()_-.,;:!?\"#{}[]<>=+*&|\\^%$@~`\x00\x1f\x7f";
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for case in 0..20_000 {
            let len = (rand() % 120) as usize;
            let text: String = (0..len)
                .map(|_| char::from(ALPHABET[(rand() % ALPHABET.len() as u64) as usize]))
                .collect();
            assert_eq!(pieces(&text), regex_pieces(&text), "case {case}: {text:?}");
            assert_eq!(count(&text), reference(&text), "case {case}: {text:?}");
        }
    }

    #[test]
    fn counts_equal_tiktoken_on_this_crates_sources() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = 0;
        for entry in ignore::Walk::new(root).flatten() {
            if entry.file_type().is_some_and(|t| t.is_file())
                && let Ok(text) = std::fs::read_to_string(entry.path())
            {
                if text.is_ascii() {
                    assert_eq!(
                        pieces(&text),
                        regex_pieces(&text),
                        "{}",
                        entry.path().display()
                    );
                }
                assert_eq!(count(&text), reference(&text), "{}", entry.path().display());
                files += 1;
            }
        }
        assert!(files > 30);
    }

    #[test]
    fn counts_equal_tiktoken_on_random_text_with_lines_and_unicode() {
        const CHARS: &[&str] = &[
            "a", "Z", "7", " ", "  ", "\t", "\n", "\n\n", "\r\n", "/", "//", "'s", "(", ")", "│",
            "│ ", "é", "猫", "\u{a0}", "\u{85}", "\u{301}", "ǅ", "x = 1;", "    ", "fn", "Ab",
        ];
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for case in 0..20_000 {
            let len = (rand() % 60) as usize;
            let text: String = (0..len)
                .map(|_| CHARS[(rand() % CHARS.len() as u64) as usize])
                .collect();
            assert_eq!(count(&text), reference(&text), "case {case}: {text:?}");
        }
    }

    #[test]
    fn a_cold_start_remembers_the_pieces_of_more_than_one_token() {
        let text = "fn cold_start_example(alpha: u32, beta: u32) -> u32 {\n    alpha * beta + 17\n}\n\
                    let zxqvjk_wibble_frobnicate = 1;\n";
        let memory = Pieces::new();
        assert_eq!(count_with(text, &memory), reference(text));
        let vocab = crate::collector::bpe::vocab();
        let mut merged = 0;
        for_each_piece(text.as_bytes(), |p| {
            if vocab.rank(p).is_none() && p.len() > 1 {
                merged += 1;
                assert!(
                    memory.get(p).is_some(),
                    "{:?} not remembered",
                    String::from_utf8_lossy(p)
                );
            } else {
                // Only pieces of more than one token are kept; single tokens are in the
                // vocabulary.
                assert_eq!(memory.get(p), None, "{:?}", String::from_utf8_lossy(p));
            }
        });
        assert!(
            merged > 0,
            "the example has no piece of more than one token"
        );
        assert_eq!(count_with(text, &memory), reference(text));
    }

    #[test]
    fn the_pattern_is_tiktokens() {
        assert_eq!(PATTERN, tiktoken_rs::O200K_BASE_PAT_STR);
    }

    #[test]
    fn rendered_blocks_are_scanned() {
        let block = crate::collector::render::block("a.rs", "fn main() {\n\n    x();\n}\n", &[]);
        assert!(scannable(block.as_bytes()));
        assert_eq!(count(&block), reference(&block));
        assert_eq!(segments(&block).len(), 1);
        // A line with other Unicode is split by the regex, the lines around it by the scanner.
        let mixed = "a = 1\nb = \"café\"\nc = 3\n";
        let kinds: Vec<bool> = segments(mixed).iter().map(|(_, k)| *k).collect();
        assert_eq!(kinds, vec![true, false, true]);
        assert_eq!(count(mixed), reference(mixed));
    }

    #[test]
    fn non_ascii_text_is_counted_exactly() {
        for text in [
            "café crème",
            "猫はソファで寝ています",
            "a\u{a0}b",
            "x\u{85}y",
            "ǅemal",
        ] {
            assert_eq!(count(text), reference(text), "{text:?}");
        }
    }
}

//! Exact o200k token counts, fast: tiktoken-rs's `encode_ordinary`, applied once per distinct
//! pre-tokenizer piece instead of once per text.
//!
//! tiktoken splits text into pieces with a regex (o200k's `O200K_BASE_PAT_STR`) and byte-pair
//! encodes each piece on its own, so a text's count is the sum of its pieces' counts. The regex
//! needs `fancy-regex` for one lookahead (`\s+(?!\S)`), and together with the per-piece hash
//! lookups it caps tiktoken at about 25–30 MB/s. For ASCII text this module splits with a
//! hand-written scanner that follows the regex alternative by alternative (the regex's Unicode
//! classes reduce to six byte classes on ASCII), and counts each distinct piece once per thread
//! with `encode_ordinary`, remembering it. Source code repeats its pieces (keywords,
//! identifiers, indentation), so most pieces are looked up, not encoded.
//!
//! The scanner knows ASCII and `│` (the line-number separator of every rendered file, an "other"
//! symbol to the regex). Text is cut into runs of lines at line ends where no piece can cross
//! (the next line is not blank and does not start with `/`); runs holding any other non-ASCII
//! character go to `encode_ordinary` whole.
//!
//! Exactness is tested against `encode_ordinary` on this crate's sources, on random strings over
//! every ASCII class, and (BENCHMARKS.md) on 56,776 files of real source and text (1.3 GB raw
//! and rendered): no difference.

use std::cell::RefCell;

use rustc_hash::FxHashMap;

/// Pieces up to this long are remembered.
const CACHED_PIECE: usize = 48;
/// Up to this many pieces not seen yet (or a sixth of them) are encoded one by one; more, and
/// the whole segment is encoded.
const FEW_UNKNOWN: usize = 8;
/// Distinct pieces remembered per thread before the memory is cleared.
const CACHE_ENTRIES: usize = 1 << 17;

thread_local! {
    static PIECES: RefCell<FxHashMap<Box<[u8]>, u32>> = RefCell::new(FxHashMap::default());
}

/// The line-number separator, the one non-ASCII character the scanner knows.
const BAR: &[u8] = "│".as_bytes();

/// The o200k count of `text`, exactly as `encode_ordinary(text).len()`.
pub fn count(text: &str) -> u64 {
    let bpe = tiktoken_rs::o200k_base_singleton();
    PIECES.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() > CACHE_ENTRIES {
            cache.clear();
        }
        let mut total = 0u64;
        for (segment, scannable) in segments(text) {
            total += if scannable {
                scanned(bpe, &mut cache, segment)
            } else {
                bpe.encode_ordinary(segment).len() as u64
            };
        }
        total
    })
}

/// Counts a scannable segment from remembered pieces. Pieces not seen yet are encoded one by one,
/// unless they are many (a cold start: encoding one piece costs about six times its share of
/// encoding the whole segment); then the segment is encoded once and each piece's share of the
/// tokens is remembered (tiktoken encodes piece by piece, so its tokens fall on piece
/// boundaries).
fn scanned(
    bpe: &tiktoken_rs::CoreBPE,
    cache: &mut FxHashMap<Box<[u8]>, u32>,
    segment: &str,
) -> u64 {
    let bytes = segment.as_bytes();
    let (mut known, mut unknown, mut pieces) = (0u64, 0usize, 0usize);
    for_each_piece(bytes, |piece| {
        pieces += 1;
        match cache.get(piece) {
            Some(&n) => known += u64::from(n),
            None => unknown += 1,
        }
    });
    if unknown == 0 {
        return known;
    }
    if unknown <= FEW_UNKNOWN.max(pieces / 6) {
        let mut total = 0u64;
        for_each_piece(bytes, |piece| {
            total += u64::from(piece_count(bpe, cache, piece))
        });
        return total;
    }
    let tokens = bpe.encode_ordinary(segment);
    let mut lengths = bpe
        ._decode_native_and_split(tokens.clone())
        .map(|t| t.len());
    let mut aligned = true;
    for_each_piece(bytes, |piece| {
        let (mut covered, mut n) = (0usize, 0u32);
        while covered < piece.len() {
            match lengths.next() {
                Some(len) => {
                    covered += len;
                    n += 1;
                }
                None => break,
            }
        }
        aligned &= covered == piece.len();
        if aligned && piece.len() <= CACHED_PIECE {
            cache.insert(piece.into(), n);
        }
    });
    if !aligned {
        // Never seen: tokens always fall on piece boundaries. Forget what this segment taught.
        tracing::warn!("o200k tokens did not align with pieces; piece counts not remembered");
        cache.clear();
    }
    tokens.len() as u64
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

fn piece_count(
    bpe: &tiktoken_rs::CoreBPE,
    cache: &mut FxHashMap<Box<[u8]>, u32>,
    piece: &[u8],
) -> u32 {
    if let Some(&n) = cache.get(piece) {
        return n;
    }
    // ASCII, so always valid UTF-8.
    let n = std::str::from_utf8(piece).map_or(piece.len(), |s| bpe.encode_ordinary(s).len());
    let n = u32::try_from(n).unwrap_or(u32::MAX);
    if piece.len() <= CACHED_PIECE {
        cache.insert(piece.into(), n);
    }
    n
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
    fn a_cold_start_learns_every_piece() {
        let text =
            "fn cold_start_example(alpha: u32, beta: u32) -> u32 {\n    alpha * beta + 17\n}\n";
        PIECES.with(|c| c.borrow_mut().clear());
        assert_eq!(count(text), reference(text));
        let learnt = PIECES.with(|c| c.borrow().len());
        assert!(learnt > FEW_UNKNOWN, "{learnt}");
        // Every piece is now known, and the count unchanged.
        let mut unknown = 0;
        PIECES.with(|c| {
            for_each_piece(text.as_bytes(), |p| {
                unknown += usize::from(!c.borrow().contains_key(p))
            })
        });
        assert_eq!(unknown, 0);
        assert_eq!(count(text), reference(text));
    }

    #[test]
    fn rendered_blocks_are_scanned() {
        let block = crate::collector::render::block("a.rs", "fn main() {\n\n    x();\n}\n", &[]);
        assert!(scannable(block.as_bytes()));
        assert_eq!(count(&block), reference(&block));
        assert_eq!(segments(&block).len(), 1);
        // A line with other Unicode is counted by tiktoken, the lines around it by the scanner.
        let mixed = "a = 1\nb = \"café\"\nc = 3\n";
        let kinds: Vec<bool> = segments(mixed).iter().map(|(_, k)| *k).collect();
        assert_eq!(kinds, vec![true, false, true]);
        assert_eq!(count(mixed), reference(mixed));
    }

    #[test]
    fn non_ascii_text_is_counted_by_tiktoken() {
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

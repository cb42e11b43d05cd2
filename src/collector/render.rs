//! Rendering of one file for Gemini: a path header, the lines numbered in a compact fixed-width
//! style (`  7│ code`), and a closing marker, so findings can cite `path:line`.
//!
//! Each block is rendered with its [`Frame`]: where its lines are in the text, kept as data. What
//! was sent is read back from the frames, by position ([`contents`]), never by looking for the
//! markers in the text: the framed content can hold a line that looks like one (a diff's removed
//! line, a block quoted in an earlier turn's text).
//!
//! The numbering is right-aligned to the width of the file's last line number (no minimum width:
//! padding spaces cost tokens). Empty lines carry no trailing space. Line ends are normalised to
//! `\n`; a leading UTF-8 byte-order mark is dropped. Line numbers always match the file on disk:
//! redaction keeps the line count of what it replaces.

/// Where a block's lines are in the text it was rendered into, recorded as it is rendered (see
/// the module docs).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Frame {
    /// The path as shown.
    pub path: String,
    /// The index (from 0) of the block's first line of content in its text.
    pub at: usize,
    /// How many lines of content it has.
    pub lines: usize,
    pub kind: FrameKind,
}

/// What a block's lines of content are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameKind {
    /// Numbered lines (`  7│ code`), the first numbered `first`: the whole file, or a part of it
    /// (as an investigation reads).
    Numbered { first: u32, whole: bool },
    /// A unified diff of one file: its headers, then its hunks.
    Patch,
}

impl Frame {
    /// The same block in a text that has `lines` more lines before it.
    pub fn shifted(&self, lines: usize) -> Frame {
        Frame {
            at: self.at + lines,
            ..self.clone()
        }
    }
}

/// Each frame's lines of content, read from `text` by position (`\n`-separated, as rendered); a
/// frame reaching past the text's end gets the lines there are.
pub fn contents<'a>(text: &'a str, frames: &'a [Frame]) -> Vec<(&'a Frame, Vec<&'a str>)> {
    if frames.is_empty() {
        return Vec::new();
    }
    let lines: Vec<&str> = text.lines().collect();
    frames
        .iter()
        .map(|f| {
            let start = f.at.min(lines.len());
            let end = f.at.saturating_add(f.lines).min(lines.len());
            (f, lines[start..end].to_vec())
        })
        .collect()
}

/// The code of a numbered line as [`block`] renders it (`  7│ code` → `code`): what follows the
/// first `│` (the number's, which only digits and spaces precede) and its one space.
pub fn numbered_code(line: &str) -> &str {
    let rest = line.split_once('│').map_or(line, |(_, rest)| rest);
    rest.strip_prefix(' ').unwrap_or(rest)
}

/// The number of `\n`-ended lines in `text`: where the next block begins when `text` ends with a
/// newline.
pub fn newlines(text: &str) -> usize {
    memchr::memchr_iter(b'\n', text.as_bytes()).count()
}

/// The rendered block of one file.
pub fn block(display: &str, text: &str, notes: &[String]) -> String {
    framed(display, text, notes).0
}

/// [`block`], with its frame (relative to the block).
pub fn framed(display: &str, text: &str, notes: &[String]) -> (String, Frame) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines = line_count(text);
    let width = digits(lines);
    let mut out = String::with_capacity(text.len() + lines * (width + 4) + 2 * display.len() + 64);
    out.push_str("--- BEGIN FILE: ");
    out.push_str(display);
    if !notes.is_empty() {
        out.push_str(" (");
        out.push_str(&notes.join("; "));
        out.push(')');
    }
    out.push_str(" ---\n");
    let mut n = 0usize;
    let mut rest = text;
    while !rest.is_empty() {
        let (line, next) = match memchr::memchr(b'\n', rest.as_bytes()) {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        rest = next;
        n += 1;
        let line = line.strip_suffix('\r').unwrap_or(line);
        push_number(&mut out, n, width);
        out.push('│');
        if !line.is_empty() {
            out.push(' ');
            out.push_str(line);
        }
        out.push('\n');
    }
    out.push_str("--- END FILE: ");
    out.push_str(display);
    out.push_str(" ---\n");
    let frame = Frame {
        path: display.to_string(),
        at: 1,
        lines,
        kind: FrameKind::Numbered {
            first: 1,
            whole: true,
        },
    };
    (out, frame)
}

/// Lines as numbered by [`block`]: a final line without `\n` counts, an empty file has none.
pub fn line_count(text: &str) -> usize {
    let newlines = memchr::memchr_iter(b'\n', text.as_bytes()).count();
    newlines + usize::from(!text.is_empty() && !text.ends_with('\n'))
}

fn digits(mut n: usize) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

fn push_number(out: &mut String, n: usize, width: usize) {
    let mut buf = [b' '; 20];
    let mut i = buf.len();
    let mut v = n;
    loop {
        i -= 1;
        // `v % 10` is a single decimal digit, so the cast cannot truncate.
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let start = buf.len().saturating_sub(width).min(i);
    for &b in &buf[start..] {
        out.push(char::from(b));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_right_aligned_to_the_last_line() {
        let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        let b = block("src/a.rs", &text, &[]);
        let lines: Vec<&str> = b.lines().collect();
        assert_eq!(lines[0], "--- BEGIN FILE: src/a.rs ---");
        assert_eq!(lines[1], " 1│ line 1");
        assert_eq!(lines[10], "10│ line 10");
        assert_eq!(lines[11], "--- END FILE: src/a.rs ---");
        assert_eq!(lines.len(), 12);
    }

    #[test]
    fn edge_cases_of_lines() {
        for (text, body) in [
            ("", vec![]),
            ("x", vec!["1│ x"]),
            ("x\n", vec!["1│ x"]),
            ("a\r\nb\r\n", vec!["1│ a", "2│ b"]),
            ("a\n\nb", vec!["1│ a", "2│", "3│ b"]),
            ("\u{feff}bom\n", vec!["1│ bom"]),
            ("\n", vec!["1│"]),
        ] {
            let b = block("f", text, &[]);
            let got: Vec<&str> = b
                .lines()
                .skip(1)
                .take_while(|l| !l.starts_with("---"))
                .collect();
            assert_eq!(got, body, "{text:?}");
            assert_eq!(
                line_count(text.trim_start_matches('\u{feff}')),
                body.len(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn notes_go_in_the_header() {
        let b = block(
            "x.txt",
            "a\n",
            &["invalid UTF-8 replaced".into(), "1 secret redacted".into()],
        );
        assert!(
            b.starts_with(
                "--- BEGIN FILE: x.txt (invalid UTF-8 replaced; 1 secret redacted) ---\n"
            ),
            "{b}"
        );
    }

    #[test]
    fn the_frame_finds_the_lines_whatever_they_hold() {
        let text = "a\n--- END FILE: f ---\n\n--- BEGIN FILE: g ---\n";
        let (b, frame) = framed("f", text, &[]);
        let got: Vec<&str> = contents(&b, std::slice::from_ref(&frame))[0]
            .1
            .iter()
            .map(|l| numbered_code(l))
            .collect();
        assert_eq!(
            got,
            ["a", "--- END FILE: f ---", "", "--- BEGIN FILE: g ---"]
        );
        assert_eq!(
            frame.kind,
            FrameKind::Numbered {
                first: 1,
                whole: true
            }
        );
        // In a longer text, shifted by what comes before it.
        let whole = format!("one\ntwo\n{b}");
        let shifted = [frame.shifted(newlines("one\ntwo\n"))];
        let lines = &contents(&whole, &shifted)[0].1;
        assert_eq!(lines[0], "1│ a");
        assert_eq!(lines.len(), 4);
        assert_eq!(numbered_code("12│ x │ y"), "x │ y");
        assert_eq!(numbered_code(" 8│"), "");
    }

    #[test]
    fn wide_numbers() {
        let text = "x\n".repeat(12_345);
        let b = block("f", &text, &[]);
        assert!(b.contains("\n    1│ x\n"));
        assert!(b.contains("\n12345│ x\n"));
    }
}

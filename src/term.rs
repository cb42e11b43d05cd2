//! The one way the binary writes to stdout and stderr: a command's output, its errors, the
//! progress spinner and an investigation's steps, the first-run greeting and the logs all go
//! through a [`Sink`].
//!
//! Most of what is printed comes from outside: Gemini's answers (live or stored in a thread),
//! the prompts an agent sent, file names, a model's chosen arguments, other services' error
//! messages. Such text can carry terminal control sequences — OSC 52 writes the clipboard, OSC 0
//! retitles the window, CSI clears the screen, and a C1 control (U+009B) is a CSI on some
//! terminals — so a sink shows every control character instead of obeying it ([`neutralise`]),
//! whether or not the stream is a terminal (a piped log is read on one later). A CI log is read
//! by its runner too: a line GitHub's runner would take for a workflow command (`::error::…`
//! after white space, `##[` anywhere) is written with a `\` that keeps it text. Writing to a sink
//! in any way (its methods, `write!`, `io::Write`) neutralises: the only escapes that leave raw
//! are ours, as typed values — a [`Style`] around a span (dropped when colours are off: not a
//! terminal, `NO_COLOR`; `CLICOLOR_FORCE` honoured, as `anstream` decides) and the spinner's
//! [`Sink::clear_line`]. JSON is escaped rather than shown ([`json_safe`]), so it means the same.
//! Neutralising is the same on every platform; on Windows a console obeys our escapes only once
//! its virtual terminal processing is on, which [`obeys_escapes`] switches on (Windows Terminal
//! has it on already, the classic console of `cmd.exe` and PowerShell not until a program asks),
//! and a console that refuses gets no escapes at all.
//!
//! `tests/structure/` holds the rest of the source to it: no print macro and no
//! `std::io::stdout`/`stderr` outside this module.

use std::borrow::Cow;
use std::fmt::Display;
use std::io::{self, IsTerminal, Write};

use anstyle::Style;

/// A stream that shows control characters instead of obeying them; see the module's doc.
pub struct Sink<W: Write> {
    raw: W,
    colour: bool,
    /// Where the text written so far stands on its line ([`Line`]).
    line: Line,
}

/// What a CI runner could still read as a workflow command in the line being written: GitHub's
/// runner takes a line whose first characters after white space are `::` for one
/// (`::error::…`, `::add-mask::…`), and `##[` anywhere in a line for one of its older form.
#[derive(Debug, Clone, Copy)]
struct Line {
    /// Nothing but white space since the line began.
    blank: bool,
    /// That white space and then one `:`.
    colon: bool,
    /// How many `#` were just written (at most 2).
    hashes: u8,
}

impl Line {
    const START: Line = Line {
        blank: true,
        colon: false,
        hashes: 0,
    };

    /// `text` with a `\` before the second `:` of a line's leading `::` and before the `[` of
    /// `##[`: the runner reads no command there, a reader sees what was written.
    fn defuse<'a>(&mut self, text: &'a str) -> Cow<'a, str> {
        let mut out: Option<String> = None;
        for (i, c) in text.char_indices() {
            let escape = (c == ':' && self.colon) || (c == '[' && self.hashes >= 2);
            if escape {
                out.get_or_insert_with(|| text[..i].to_string()).push('\\');
            }
            if let Some(o) = out.as_mut() {
                o.push(c);
            }
            *self = match c {
                '\n' => Line::START,
                ':' if self.blank && !self.colon => Line {
                    blank: false,
                    colon: true,
                    hashes: 0,
                },
                c if c.is_whitespace() && self.blank => *self,
                '#' => Line {
                    blank: false,
                    colon: false,
                    hashes: (self.hashes + 1).min(2),
                },
                _ => Line {
                    blank: false,
                    colon: false,
                    hashes: 0,
                },
            };
        }
        out.map_or(Cow::Borrowed(text), Cow::Owned)
    }
}

/// The sink on stdout (locked while it lives).
pub fn stdout() -> Sink<io::StdoutLock<'static>> {
    let raw = io::stdout();
    let colour = colour(&raw);
    Sink::new(raw.lock(), colour)
}

/// The sink on stderr (locked while it lives). Also the logs' writer.
pub fn stderr() -> Sink<io::StderrLock<'static>> {
    let raw = io::stderr();
    let colour = colour(&raw);
    Sink::new(raw.lock(), colour)
}

/// The logs' writer (`main.rs` hands it to the log's formatter): one event's line, held until
/// the event is formatted, then passed through the secret rules (`redact::scrub`) and the
/// stderr sink. Our own messages name settings, never values; this is the net for what the
/// dependencies log in their own words at `debug` and `trace` (a token in a request rmcp
/// logs, an `Authorization: Basic …` or a URL's password in an HTTP client's line), which no
/// call site of ours can scrub. What the rules cannot see (a URL's authority printed without
/// its scheme) is kept out at the source: no client is handed credentials in a URL
/// (`secret::without_user_info`).
pub fn log() -> LogLine {
    LogLine(Vec::new())
}

/// One log event's text, written out scrubbed when dropped ([`log`]).
pub struct LogLine(Vec<u8>);

impl Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LogLine {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&self.0);
        let _ = stderr().write_all(crate::redact::scrub(&text).as_bytes());
    }
}

/// Writes `text` to stdout byte for byte when stdout is not a terminal: output that must reach a
/// file exactly (a patch, whose CRLF lines carry the `\r` that `git apply` matches). On a terminal
/// it goes through the sink like any text, every control character shown, not obeyed.
pub fn stdout_exact(text: &str) -> io::Result<()> {
    let raw = io::stdout();
    if raw.is_terminal() {
        let mut sink = stdout();
        sink.text(text)?;
        return sink.flush();
    }
    let mut raw = raw.lock();
    raw.write_all(text.as_bytes())?;
    raw.flush()
}

/// Whether our styles go to `stream`: as `anstream` decides, and on a terminal only if it obeys
/// them (a pipe with `CLICOLOR_FORCE` gets them as they are).
fn colour<S: anstream::stream::RawStream + Console>(stream: &S) -> bool {
    anstream::AutoStream::choice(stream) != anstream::ColorChoice::Never
        && (!stream.is_terminal() || obeys_escapes(stream))
}

/// Whether stderr is a terminal that obeys our escapes (the spinner shows only there).
pub fn stderr_is_terminal() -> bool {
    let err = io::stderr();
    err.is_terminal() && obeys_escapes(&err)
}

/// A standard stream that may be a console: on Windows, its handle.
#[cfg(windows)]
trait Console: std::os::windows::io::AsRawHandle {}
#[cfg(windows)]
impl<S: std::os::windows::io::AsRawHandle> Console for S {}
#[cfg(not(windows))]
trait Console {}
#[cfg(not(windows))]
impl<S> Console for S {}

/// Whether `stream`, a terminal, obeys escape sequences: on Windows once its console's virtual
/// terminal processing is on (switched on here if it is not), elsewhere always.
#[cfg(windows)]
fn obeys_escapes(stream: &impl Console) -> bool {
    use windows_sys::Win32::System::Console::{
        CONSOLE_MODE, ENABLE_VIRTUAL_TERMINAL_PROCESSING, GetConsoleMode, SetConsoleMode,
    };
    let handle = stream.as_raw_handle();
    let mut mode: CONSOLE_MODE = 0;
    // SAFETY: `handle` is this process's standard stream, open while `stream` is borrowed; the
    // calls read and set its console mode, and fail harmlessly on a handle that is no console.
    unsafe {
        GetConsoleMode(handle, &mut mode) != 0
            && (mode & ENABLE_VIRTUAL_TERMINAL_PROCESSING != 0
                || SetConsoleMode(handle, mode | ENABLE_VIRTUAL_TERMINAL_PROCESSING) != 0)
    }
}

/// Whether `stream`, a terminal, obeys escape sequences: on Windows once its console's virtual
/// terminal processing is on (switched on here if it is not), elsewhere always.
#[cfg(not(windows))]
fn obeys_escapes(_stream: &impl Console) -> bool {
    true
}

/// One line on stderr through the sink; a failure to write there is ignored (there is nowhere
/// left to say it). Used by [`say!`].
pub fn say_line(line: impl Display) {
    let mut err = stderr();
    let _ = err.line(line);
    let _ = err.flush();
}

/// `eprintln!` through the sink: one neutralised line on stderr.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::term::say_line(format_args!($($arg)*))
    };
}
pub(crate) use say;

impl<W: Write> Sink<W> {
    /// A sink over `raw`; `colour`: whether our styles are emitted.
    pub fn new(raw: W, colour: bool) -> Sink<W> {
        Sink {
            raw,
            colour,
            line: Line::START,
        }
    }

    /// `text`, every control character shown, not obeyed.
    pub fn text(&mut self, text: impl Display) -> io::Result<()> {
        write!(self, "{text}")
    }

    /// `text` and a line break.
    pub fn line(&mut self, text: impl Display) -> io::Result<()> {
        writeln!(self, "{text}")
    }

    /// `text` in one of our styles (when colours are on); the text itself is neutralised.
    pub fn styled(&mut self, style: Style, text: impl Display) -> io::Result<()> {
        if self.colour {
            write!(self.raw, "{}", style.render())?;
        }
        self.text(text)?;
        if self.colour {
            write!(self.raw, "{}", style.render_reset())?;
        }
        Ok(())
    }

    /// `value` as pretty JSON and a line break, every control character escaped ([`json_safe`]).
    pub fn json(&mut self, value: &impl serde::Serialize) -> io::Result<()> {
        let text = serde_json::to_string_pretty(value)?;
        self.line(json_safe(&text))
    }

    /// Clears the terminal's current line (the spinner's): carriage return, erase line.
    pub fn clear_line(&mut self) -> io::Result<()> {
        self.line = Line::START;
        self.raw.write_all(b"\r\x1b[2K")
    }

    /// The stream under the sink (for tests).
    pub fn into_inner(self) -> W {
        self.raw
    }
}

impl<W: Write> Write for Sink<W> {
    /// Writes `buf` with every control character shown ([`neutralise`]) and no workflow command
    /// a CI runner would obey ([`Line`]); bytes that are not UTF-8 are shown as U+FFFD.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let shown = neutralise(&text);
        self.raw.write_all(self.line.defuse(&shown).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.raw.flush()
    }
}

/// A character a terminal would obey or reorder by: C0 controls but tab and line feed, DEL, C1
/// controls, and the bidirectional overrides and isolates.
fn harmful(c: char) -> bool {
    (c.is_control() && c != '\t' && c != '\n')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with every control character shown instead of obeyed: C0 controls but tab and line feed
/// in caret notation (`ESC` → `^[`, `CR` → `^M`), DEL as `^?`, C1 controls and the bidirectional
/// overrides that reorder what a terminal shows as `<U+XXXX>`.
pub fn neutralise(s: &str) -> Cow<'_, str> {
    if !s.chars().any(harmful) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            c if !harmful(c) => out.push(c),
            '\u{7f}' => out.push_str("^?"),
            c if (c as u32) < 0x20 => {
                out.push('^');
                out.push(char::from(b'@' + c as u8));
            }
            c => out.push_str(&format!("<U+{:04X}>", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// A field that belongs on one line (a file name, a title, a reason), with every character that
/// would end the line escaped as Rust writes it (`\n`, `\r`, `\u{2028}`): line feed, carriage
/// return, vertical tab, form feed, NEL and the Unicode line and paragraph separators. Text from
/// outside (Gemini's, a file's name) put in such a field cannot start a line of its own — one a
/// CI runner reads as a command (`::error::…`) or a reader as ours. Other control characters are
/// the sink's to show ([`neutralise`]).
pub fn one_line(s: &str) -> Cow<'_, str> {
    let breaks = |c: char| {
        matches!(
            c,
            '\n' | '\r' | '\u{b}' | '\u{c}' | '\u{85}' | '\u{2028}' | '\u{2029}'
        )
    };
    if !s.contains(breaks) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if breaks(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Serialised JSON with every character [`neutralise`] would show (DEL, C1 controls, the
/// bidirectional controls; serde escapes C0 itself) escaped as `\uXXXX`, and the `[` of a `##[`
/// (a workflow command to GitHub's runner, [`Line`]) too: the document means the same, and a
/// sink passes it unchanged. Such characters occur only inside strings (`##` is never JSON's own
/// syntax), so escaping them in the text is valid JSON.
pub fn json_safe(json: &str) -> Cow<'_, str> {
    if !json.contains(harmful) && !json.contains("##[") {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if harmful(c) || (c == '[' && out.ends_with("##")) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_not_obeyed() {
        for (input, shown) in [
            ("plain text, tabs\tstay", "plain text, tabs\tstay"),
            ("\u{1b}]52;c;ZXZpbA==\u{7}", "^[]52;c;ZXZpbA==^G"),
            ("\u{1b}]0;owned\u{1b}\\", "^[]0;owned^[\\"),
            ("\u{1b}[2J\u{1b}[H", "^[[2J^[[H"),
            ("over\rwrite", "over^Mwrite"),
            ("del\u{7f}", "del^?"),
            ("c1 \u{9b}31m csi", "c1 <U+009B>31m csi"),
            ("bidi \u{202e}txt.exe", "bidi <U+202E>txt.exe"),
            ("naïve — ünïcode ✓", "naïve — ünïcode ✓"),
        ] {
            assert_eq!(neutralise(input), shown, "{input:?}");
        }
    }

    #[test]
    fn every_way_into_a_sink_neutralises_but_our_styles() {
        let hostile = "a\u{1b}]52;c;eA==\u{7}b\u{9b}2J\r";
        let mut sink = Sink::new(Vec::new(), true);
        sink.text(hostile).unwrap();
        sink.line(format_args!(" {hostile}")).unwrap();
        write!(sink, "{hostile}").unwrap();
        sink.write_all(hostile.as_bytes()).unwrap();
        sink.styled(Style::new().bold(), hostile).unwrap();
        let out = String::from_utf8(sink.into_inner()).unwrap();
        assert!(!out.contains(['\u{7}', '\u{9b}', '\r']), "{out:?}");
        // The only escapes are the style's own, around the neutralised text.
        assert_eq!(out.matches('\u{1b}').count(), 2, "{out:?}");
        assert!(
            out.ends_with("\u{1b}[1ma^[]52;c;eA==^Gb<U+009B>2J^M\u{1b}[0m"),
            "{out:?}"
        );
        // Colours off: no escape at all.
        let mut plain = Sink::new(Vec::new(), false);
        plain.styled(Style::new().bold(), "x").unwrap();
        assert_eq!(plain.into_inner(), b"x");
    }

    #[test]
    fn a_one_line_field_cannot_break_its_line() {
        for (input, shown) in [
            ("src/a.rs", "src/a.rs"),
            ("tab\tstays, ünïcode ✓", "tab\tstays, ünïcode ✓"),
            ("a.rs\n::error::forged", "a.rs\\n::error::forged"),
            ("a\r\nb\rc", "a\\r\\nb\\rc"),
            ("v\u{b}f\u{c}nel\u{85}", "v\\u{b}f\\u{c}nel\\u{85}"),
            ("ls\u{2028}ps\u{2029}", "ls\\u{2028}ps\\u{2029}"),
            // The sink shows the rest.
            ("\u{1b}]52;c;x\u{7}", "\u{1b}]52;c;x\u{7}"),
        ] {
            let got = one_line(input);
            assert_eq!(got, shown, "{input:?}");
            assert_eq!(got.lines().count(), 1, "{input:?}");
        }
    }

    /// A line as GitHub's runner reads it: a command when it starts with `::` after white
    /// space, or holds `##[` anywhere.
    fn a_workflow_command(line: &str) -> bool {
        line.trim_start().starts_with("::") || line.contains("##[")
    }

    #[test]
    fn workflow_commands_are_shown_not_obeyed() {
        let mut sink = Sink::new(Vec::new(), false);
        for text in [
            "::error::forged\n",
            "   ::warning file=a.rs::forged\n",
            "\t\u{a0}::add-mask::x\n",
            "inline ##[error]forged\n",
            "###[x] ::not at the start\n",
        ] {
            sink.text(text).unwrap();
        }
        // Split across writes, and after our own clear of the line.
        sink.text("  :").unwrap();
        sink.text(":error::split\n#").unwrap();
        sink.text("#").unwrap();
        sink.text("[error]split\n").unwrap();
        sink.clear_line().unwrap();
        sink.line("::notice::after a clear").unwrap();
        let out = String::from_utf8(sink.into_inner()).unwrap();
        let commands: Vec<&str> = out.lines().filter(|l| a_workflow_command(l)).collect();
        assert!(commands.is_empty(), "{commands:?} in\n{out}");
        assert!(out.contains(":\\:error::forged"), "{out}");
        assert!(out.contains("inline ##\\[error]forged"), "{out}");
        // What is no command is left alone.
        assert!(out.contains("###\\[x] ::not at the start"), "{out}");
        let mut plain = Sink::new(Vec::new(), false);
        plain.text("a::b c: :d # [e]\n").unwrap();
        assert_eq!(plain.into_inner(), b"a::b c: :d # [e]\n");
    }

    #[test]
    fn json_output_escapes_controls_and_means_the_same() {
        let doc = serde_json::json!({
            "text": "a\u{9b}2J\u{7f}\u{1b}b\u{202e}c\r",
            "n": 1,
            "title": "##[error]forged",
            "list": ["::error::x"]
        });
        let mut sink = Sink::new(Vec::new(), true);
        sink.json(&doc).unwrap();
        let out = String::from_utf8(sink.into_inner()).unwrap();
        assert!(!out.contains(|c: char| harmful(c)), "{out}");
        assert!(out.contains("\\u009b") && out.contains("\\u202e"), "{out}");
        assert!(out.contains("##\\u005berror]"), "{out}");
        assert!(!out.lines().any(a_workflow_command), "{out}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&out).unwrap(),
            doc
        );
    }
}

//! `gemini-mcp audit summary`: the log and its rotated files read back, the calls since a time
//! grouped by client, tool, model or day, with their tokens and cost. A line that is not a whole
//! record (a writer killed mid-line) is skipped and counted, never guessed at.
//!
//! Bounded: only regular files are read (a FIFO or a device in a file's place is refused before
//! it can block or never end: [`crate::setting_file::open_regular`]), each up to the size it had
//! when opened, a line up to [`MAX_LINE`] (a longer one is skipped and counted, never held);
//! sums stop at the largest count and say they overflowed, never wrap.

use std::io::{BufRead, Read};
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::{KEEP, Record, rfc3339, rotated};
use crate::setting_file::{FileError, Link, open_regular};

/// The longest line read as a record (records are a few kilobytes; a call with thousands of
/// files, a few megabytes).
pub const MAX_LINE: usize = 16 << 20;

/// What the calls are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    Client,
    Tool,
    Model,
    Day,
}

impl By {
    /// `client`, `tool`, `model` or `day`.
    pub fn parse(s: &str) -> Result<By, String> {
        match s {
            "client" => Ok(By::Client),
            "tool" => Ok(By::Tool),
            "model" => Ok(By::Model),
            "day" => Ok(By::Day),
            other => Err(format!(
                "`{}` is not a grouping; use client, tool, model or day",
                crate::echo::echo(other)
            )),
        }
    }

    fn name(self) -> &'static str {
        match self {
            By::Client => "client",
            By::Tool => "tool",
            By::Model => "model",
            By::Day => "day",
        }
    }

    fn key(self, r: &Record) -> String {
        match self {
            By::Client => r.client.clone(),
            By::Tool => r.tool.clone(),
            By::Model => r.model.clone().unwrap_or_else(|| "-".into()),
            By::Day => r.time.get(..10).unwrap_or(&r.time).to_string(),
        }
    }
}

/// The calls of one group.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Group {
    pub key: String,
    pub calls: u64,
    pub errors: u64,
    pub input: u64,
    /// Output and thinking tokens.
    pub output: u64,
    pub cost_usd: f64,
    /// Calls of models without a known price (their cost is not in `cost_usd`).
    pub unpriced: u64,
    /// A sum passed the largest count (or cost) and stopped there: the figures are lower bounds
    /// of counts no real log holds.
    pub overflowed: bool,
}

impl Group {
    fn add(&mut self, r: &Record) {
        let mut sum = |total: &mut u64, n: u64| match total.checked_add(n) {
            Some(t) => *total = t,
            None => {
                *total = u64::MAX;
                self.overflowed = true;
            }
        };
        sum(&mut self.calls, 1);
        sum(&mut self.errors, u64::from(r.outcome != "ok"));
        sum(&mut self.input, r.usage.input);
        sum(
            &mut self.output,
            r.usage.output.saturating_add(r.usage.thinking),
        );
        let output_overflowed = r.usage.output.checked_add(r.usage.thinking).is_none();
        match r.cost_usd {
            Some(c) => {
                let total = self.cost_usd + c;
                if total.is_finite() {
                    self.cost_usd = total;
                } else {
                    self.cost_usd = f64::MAX;
                    self.overflowed = true;
                }
            }
            None => sum(&mut self.unpriced, u64::from(r.usage.input > 0)),
        }
        self.overflowed |= output_overflowed;
    }
}

/// What the log holds since the time asked for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// By key.
    pub groups: Vec<Group>,
    pub total: Group,
    /// Lines skipped: not a whole record.
    pub partial: usize,
    /// Lines skipped: longer than [`MAX_LINE`].
    pub oversized: usize,
}

/// The first time a `--since` value admits, as RFC 3339 (records compare as strings): a date
/// (`2026-11-01`, from its midnight UTC) or a duration back from `now` (`90m`, `24h`, `7d`).
pub fn since(arg: &str, now: SystemTime) -> Result<String, String> {
    let arg = arg.trim();
    if crate::clock::days_from_iso(arg).is_some() && arg.len() == 10 {
        return Ok(arg.to_string());
    }
    let unit = arg.chars().last().unwrap_or(' ');
    let secs = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        'w' => 7 * 86_400,
        _ => 0,
    };
    let n: Option<u64> = arg[..arg.len() - unit.len_utf8().min(arg.len())]
        .parse()
        .ok();
    match n {
        Some(n) if secs > 0 => Ok(rfc3339(
            now.checked_sub(Duration::from_secs(n.saturating_mul(secs)))
                .unwrap_or(SystemTime::UNIX_EPOCH),
        )),
        _ => Err(format!(
            "`{}` is neither a date (2026-11-01) nor a duration (90m, 24h, 7d, 2w)",
            crate::echo::echo(arg)
        )),
    }
}

/// The log at `log` and its rotated files, oldest first, read from `since` on (RFC 3339 or a
/// date), grouped `by`. The error names `GEMINI_MCP_AUDIT_LOG` and the file.
pub fn read(log: &Path, since: Option<&str>, by: By) -> Result<Summary, FileError> {
    let mut summary = Summary::default();
    let mut groups: std::collections::BTreeMap<String, Group> = Default::default();
    let mut files: Vec<_> = (1..=KEEP).rev().map(|n| rotated(log, n)).collect();
    files.push(log.to_path_buf());
    let mut any = false;
    for path in files {
        let fail = |why: std::io::Error| FileError {
            setting: "GEMINI_MCP_AUDIT_LOG",
            path: path.clone(),
            why,
        };
        let file = match open_regular(&path, Link::Refuse) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(fail(e)),
        };
        any = true;
        // As long as it was when opened: a file that grows while it is read ends there.
        let size = file.metadata().map_err(fail)?.len();
        let mut reader = std::io::BufReader::new(file.take(size));
        let mut line = Vec::new();
        loop {
            let whole = match next_line(&mut reader, &mut line, MAX_LINE).map_err(fail)? {
                Line::End => break,
                Line::TooLong => {
                    summary.oversized += 1;
                    continue;
                }
                Line::Whole => true,
                Line::Unended => false,
            };
            let Some(record) = whole
                .then(|| serde_json::from_slice::<Record>(&line).ok())
                .flatten()
            else {
                summary.partial += usize::from(line.iter().any(|b| !b.is_ascii_whitespace()));
                continue;
            };
            if since.is_some_and(|s| record.time.as_str() < s) {
                continue;
            }
            let key = by.key(&record);
            let group = groups.entry(key.clone()).or_insert_with(|| Group {
                key,
                ..Group::default()
            });
            group.add(&record);
            summary.total.add(&record);
        }
    }
    if !any {
        return Err(FileError {
            setting: "GEMINI_MCP_AUDIT_LOG",
            path: log.to_path_buf(),
            why: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "there is no audit log there, nor a rotated one",
            ),
        });
    }
    summary.total.key = "total".into();
    summary.groups = groups.into_values().collect();
    Ok(summary)
}

/// What [`next_line`] read.
enum Line {
    End,
    /// A line with its line break, in the buffer.
    Whole,
    /// The last bytes of the file, without a line break, in the buffer.
    Unended,
    /// A line longer than the bound, read past and dropped.
    TooLong,
}

/// The next line of `reader` into `line` (cleared first), holding at most `max` bytes of it.
fn next_line(reader: &mut impl BufRead, line: &mut Vec<u8>, max: usize) -> std::io::Result<Line> {
    line.clear();
    let mut too_long = false;
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::End,
                (false, false) => Line::Unended,
            });
        }
        let (take, ended) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        if !too_long && line.len() + take > max {
            too_long = true;
            line.clear();
        }
        if !too_long {
            line.extend_from_slice(&available[..take]);
        }
        reader.consume(take);
        if ended {
            return Ok(if too_long { Line::TooLong } else { Line::Whole });
        }
    }
}

/// The summary as a table: one row per group and the total, then the lines skipped.
pub fn render(summary: &Summary, by: By) -> String {
    let head = [by.name(), "calls", "errors", "input", "output", "cost_usd"];
    let row = |g: &Group| {
        let cost = if g.unpriced > 0 {
            format!("{:.4} (+{} unpriced)", g.cost_usd, g.unpriced)
        } else {
            format!("{:.4}", g.cost_usd)
        };
        let key = if g.overflowed {
            format!("{} (overflowed)", g.key)
        } else {
            g.key.clone()
        };
        [
            key,
            g.calls.to_string(),
            g.errors.to_string(),
            g.input.to_string(),
            g.output.to_string(),
            cost,
        ]
    };
    let mut rows: Vec<[String; 6]> = vec![head.map(String::from)];
    rows.extend(summary.groups.iter().map(row));
    rows.push(row(&summary.total));
    let widths: Vec<usize> = (0..6)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                if c == 0 {
                    format!("{cell:<w$}", w = widths[c])
                } else {
                    format!("{cell:>w$}", w = widths[c])
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    if summary.partial > 0 {
        out.push_str(&format!(
            "{} partial line{} skipped (a writer stopped mid-line)\n",
            summary.partial,
            plural(summary.partial)
        ));
    }
    if summary.oversized > 0 {
        out.push_str(&format!(
            "{} line{} over {} MiB skipped (no record is that long)\n",
            summary.oversized,
            plural(summary.oversized),
            MAX_LINE >> 20
        ));
    }
    if summary.total.overflowed {
        out.push_str(
            "the sums of the rows marked (overflowed) passed the largest count and stop there: \
             the log holds counts no real call reports\n",
        );
    }
    out
}

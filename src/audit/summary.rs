//! `gemini-mcp audit summary`: the log and its rotated files read back, the calls since a time
//! grouped by client, tool, model or day, with their tokens and cost. A line that is not a whole
//! record (a writer killed mid-line) is skipped and counted, never guessed at.

use std::io::BufRead;
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::{KEEP, Record, rfc3339, rotated};

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
}

impl Group {
    fn add(&mut self, r: &Record) {
        self.calls += 1;
        self.errors += u64::from(r.outcome != "ok");
        self.input += r.usage.input;
        self.output += r.usage.output + r.usage.thinking;
        match r.cost_usd {
            Some(c) => self.cost_usd += c,
            None => self.unpriced += u64::from(r.usage.input > 0),
        }
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
/// date), grouped `by`.
pub fn read(log: &Path, since: Option<&str>, by: By) -> std::io::Result<Summary> {
    let mut summary = Summary::default();
    let mut groups: std::collections::BTreeMap<String, Group> = Default::default();
    let mut files: Vec<_> = (1..=KEEP).rev().map(|n| rotated(log, n)).collect();
    files.push(log.to_path_buf());
    let mut any = false;
    for path in files {
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        any = true;
        let mut reader = std::io::BufReader::new(file);
        let mut line = Vec::new();
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line)? == 0 {
                break;
            }
            let whole = line.last() == Some(&b'\n');
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
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no audit log at {}", log.display()),
        ));
    }
    summary.total.key = "total".into();
    summary.groups = groups.into_values().collect();
    Ok(summary)
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
        [
            g.key.clone(),
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
    if summary.partial > 0 {
        let s = if summary.partial == 1 { "" } else { "s" };
        out.push_str(&format!(
            "{} partial line{s} skipped (a writer stopped mid-line)\n",
            summary.partial
        ));
    }
    out
}

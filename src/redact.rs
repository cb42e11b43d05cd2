//! Secret-looking values in text about to leave the machine, replaced by a marker: file contents,
//! diffs, the call's own text, file names, and the messages of errors. One body of rules for
//! every part (the names of secret files are the collector's).
//!
//! Rules: well-known key and token shapes (private key blocks, AWS, GitHub, GitLab, Hugging Face,
//! Google API keys and OAuth tokens, Slack, SendGrid, Stripe, OpenAI/Anthropic, JWTs, kubeconfig
//! client keys, certificates and tokens, docker `config.json` auths, Azure keys, HTTP Basic and
//! bearer credentials, passwords in URLs; the table is [`rules`]) and generic
//! `password = "..."`-style assignments. Each rule has keywords, literals every match of it holds:
//! one Aho-Corasick pass finds them all, and a rule is run only where its keywords are
//! ([`search`]), so text without them costs that one pass. A replacement
//! keeps the line count of what it replaces, so line numbers still match the file. Generic
//! assignments need a value that looks like a secret (no code punctuation, letters and digits or
//! enough entropy), so ordinary code such as `token = next_token()` is left alone.

use std::sync::LazyLock;

use regex::Regex;

mod keywords;
mod rules;
mod search;
use rules::RULES;
#[cfg(test)]
use search::COMPILED;
use search::{Rules, accepted};

/// How many values were replaced, per rule (the rule's marker name: `aws-access-key`,
/// `password`, …). Never the values: only names and numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Counts(std::collections::BTreeMap<String, usize>);

impl Counts {
    /// `n` more values replaced by `rule`.
    pub fn add(&mut self, rule: &str, n: usize) {
        if n > 0 {
            *self.0.entry(rule.to_string()).or_default() += n;
        }
    }

    /// Adds every count of `other`.
    pub fn merge(&mut self, other: &Counts) {
        for (rule, n) in &other.0 {
            self.add(rule, *n);
        }
    }

    /// Values replaced, all rules together.
    pub fn total(&self) -> usize {
        self.0.values().sum()
    }

    /// Each rule with its count, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, usize)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }
}

/// Replaces secret-looking values; returns the text and how many were replaced. Fails closed:
/// if the rules could not be compiled (a bug caught by the tests), the whole text is withheld.
///
/// Linear in the text (see [`search`]).
pub fn redact(text: &str) -> (String, usize) {
    let (text, counts) = redact_counted(text);
    (text, counts.total())
}

/// [`redact`], counting the replaced values per rule.
pub fn redact_counted(text: &str) -> (String, Counts) {
    redact_with(text, Marker::Kind).unwrap_or_else(|| {
        tracing::error!("secret rules do not compile; withholding text");
        let lines = text.matches('\n').count();
        let mut counts = Counts::default();
        counts.add("unavailable", 1);
        (
            format!("[REDACTED:unavailable]{}", "\n".repeat(lines)),
            counts,
        )
    })
}

/// The same rules for a message (an error, a line of a subprocess's output): every value replaced
/// by `[redacted]`, with no rule named and no line kept.
pub fn scrub(text: &str) -> String {
    redact_with(text, Marker::Plain).map_or_else(|| "[redacted]".into(), |(text, _)| text)
}

/// How a replaced value is shown.
#[derive(Clone, Copy)]
enum Marker {
    /// `[REDACTED:<rule>]`, and as many line breaks as the value held.
    Kind,
    /// `[redacted]`.
    Plain,
}

/// `None` if the rules did not compile.
fn redact_with(text: &str, marker: Marker) -> Option<(String, Counts)> {
    let (rules, spans) = accepted(text)?;
    Some(replace(rules, spans, text, marker))
}

/// `text` with the values at `spans` (`(start, end, rule)`) replaced.
fn replace(
    rules: &Rules,
    mut spans: Vec<(usize, usize, usize)>,
    text: &str,
    marker: Marker,
) -> (String, Counts) {
    let mut counts = Counts::default();
    if spans.is_empty() {
        return (text.to_string(), counts);
    }
    // Overlapping values are replaced as one; the marker names the earliest (then the most
    // specific) rule.
    spans.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut spans = spans.into_iter().peekable();
    while let Some((start, mut end, rule)) = spans.next() {
        while let Some(&(s, e, _)) = spans.peek() {
            if s >= end {
                break;
            }
            end = end.max(e);
            spans.next();
        }
        out.push_str(&text[copied..start]);
        match marker {
            Marker::Kind => {
                out.push_str("[REDACTED:");
                out.push_str(rules.kind(rule));
                out.push(']');
                for _ in memchr::memchr_iter(b'\n', &text.as_bytes()[start..end]) {
                    out.push('\n');
                }
            }
            Marker::Plain => out.push_str("[redacted]"),
        }
        copied = end;
        counts.add(rules.kind(rule), 1);
    }
    out.push_str(&text[copied..]);
    (out, counts)
}

/// The private key blocks of a file, as 1-based inclusive line ranges: from each BEGIN line to
/// its END line, or to the last line when the block is not closed.
pub fn key_blocks(content: &str) -> Vec<(u32, u32)> {
    static KEY: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(RULES[0].pattern).ok());
    if memchr::memmem::find(content.as_bytes(), b"PRIVATE KEY").is_none() {
        return Vec::new();
    }
    let Some(key) = KEY.as_ref() else {
        // Fail closed, as `redact` does: every line counts as key material.
        let lines = u32::try_from(content.lines().count()).unwrap_or(u32::MAX);
        return vec![(1, lines.max(1))];
    };
    let mut blocks = Vec::new();
    // Line numbers by a running count, so the whole pass stays linear.
    let (mut line, mut counted) = (1u32, 0usize);
    let mut line_at = |at: usize| {
        line += u32::try_from(memchr::memchr_iter(b'\n', &content.as_bytes()[counted..at]).count())
            .unwrap_or(u32::MAX);
        counted = at;
        line
    };
    for m in key.find_iter(content) {
        let first = line_at(m.start());
        // The END line itself, not the line after a block that ends with its newline.
        let last = line_at(m.end().saturating_sub(1).max(m.start()));
        blocks.push((first, last));
    }
    blocks
}

/// Replaces the lines of a unified diff (`patch`) that lie inside a private key block of the
/// file's old version (`old`, lines as numbered in the hunks' `-` side) or new version (`new`,
/// the `+` side), as found by [`key_blocks`] on the whole file. A hunk that changes one line in
/// the middle of a key shows neither its BEGIN nor its END line, so the text alone cannot tell.
/// Each such line keeps its diff prefix and becomes a marker, so the hunk still adds up; hunk
/// headers lose their heading. Returns the text and how many runs of lines were replaced.
pub fn redact_diff_keys(patch: &str, old: &[(u32, u32)], new: &[(u32, u32)]) -> (String, usize) {
    if old.is_empty() && new.is_empty() {
        return (patch.to_string(), 0);
    }
    let inside = |blocks: &[(u32, u32)], n: u32| blocks.iter().any(|&(a, b)| a <= n && n <= b);
    let mut out = String::with_capacity(patch.len());
    let mut count = 0;
    // Line numbers on each side, and lines left in the current hunk on each side.
    let (mut old_no, mut new_no, mut old_left, mut new_left) = (0u32, 0u32, 0u32, 0u32);
    let mut in_run = false;
    for line in patch.split_inclusive('\n') {
        let in_hunk = old_left > 0 || new_left > 0;
        if !in_hunk {
            in_run = false;
            if let Some((o, ol, n, nl, heading)) = hunk_header(line) {
                (old_no, old_left, new_no, new_left) = (o, ol, n, nl);
                // git shows the nearest earlier line that starts with a letter after the
                // ranges (meant for a function name): in a file with a key, that may be a
                // key line.
                out.push_str(&line[..heading]);
                out.push('\n');
                continue;
            }
            out.push_str(line);
            continue;
        }
        let (old_side, new_side) = match line.as_bytes().first() {
            Some(b' ') => (true, true),
            Some(b'-') => (true, false),
            Some(b'+') => (false, true),
            // `\ No newline at end of file` and anything unexpected: not a file line.
            _ => {
                out.push_str(line);
                continue;
            }
        };
        let secret = (old_side && inside(old, old_no)) || (new_side && inside(new, new_no));
        if old_side {
            old_no = old_no.saturating_add(1);
            old_left = old_left.saturating_sub(1);
        }
        if new_side {
            new_no = new_no.saturating_add(1);
            new_left = new_left.saturating_sub(1);
        }
        if secret {
            out.push_str(&line[..1]);
            out.push_str("[REDACTED:private-key]");
            if line.ends_with('\n') {
                out.push('\n');
            }
            if !in_run {
                count += 1;
            }
            in_run = true;
        } else {
            in_run = false;
            out.push_str(line);
        }
    }
    (out, count)
}

/// `@@ -a,b +c,d @@…` as (a, b, c, d, where the heading after the ranges starts); a missing
/// count is 1.
fn hunk_header(line: &str) -> Option<(u32, u32, u32, u32, usize)> {
    let rest = line.strip_prefix("@@ -")?;
    let (ranges, _) = rest.split_once(" @@")?;
    let heading = "@@ -".len() + ranges.len() + " @@".len();
    let (old, new) = ranges.split_once(" +")?;
    let range = |r: &str| -> Option<(u32, u32)> {
        match r.split_once(',') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => Some((r.parse().ok()?, 1)),
        }
    };
    let (a, b) = range(old)?;
    let (c, d) = range(new)?;
    Some((a, b, c, d, heading))
}

#[cfg(test)]
mod equivalence;
#[cfg(test)]
mod reference;
#[cfg(test)]
pub(crate) mod tests;

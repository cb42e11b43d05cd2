//! Secret-looking values in text about to leave the machine, replaced by a marker: file contents,
//! diffs, the call's own text, file names, and the messages of errors. One body of rules for
//! every part (the names of secret files are the collector's).
//!
//! Rules: well-known key and token shapes (private key blocks, AWS, GitHub, GitLab, Hugging Face,
//! Google API keys and OAuth tokens, Slack, SendGrid, Stripe, OpenAI/Anthropic, JWTs, kubeconfig
//! client keys, certificates and tokens, docker `config.json` auths, Azure keys, HTTP Basic and
//! bearer credentials, passwords in URLs; the table is [`rules`]) and generic
//! `password = "..."`-style assignments. One combined regex finds candidates in a single pass; the rule that matched is
//! then identified on the candidate alone, so text without secrets costs one scan. A replacement
//! keeps the line count of what it replaces, so line numbers still match the file. Generic
//! assignments need a value that looks like a secret (no code punctuation, letters and digits or
//! enough entropy), so ordinary code such as `token = next_token()` is left alone.

use std::sync::{LazyLock, Mutex};

use regex::Regex;
use regex_automata::meta;
use regex_automata::util::captures::Captures;
use regex_automata::{Input, Span};

mod rules;
use rules::{FIRST_GROUP, RULES};

/// A value-shape rule: a name for the marker, a pattern, the capture group to replace (0 = the
/// whole match) and a check the captured value must pass.
struct Rule {
    kind: &'static str,
    re: meta::Regex,
    group: usize,
    check: fn(&str) -> bool,
}

/// The rules, compiled once and shared by every thread; each search brings its own [`Caches`].
struct Rules {
    /// Every rule at once (leftmost first, earlier rules first): the one pass over a text.
    any: meta::Regex,
    /// Each rule alone, anchored at the start: which rule a candidate of `any` is.
    anchored: Vec<meta::Regex>,
    /// Each rule alone: for the inside of a candidate.
    each: Vec<Rule>,
    /// Every rule but the generic assignments at once: whether a stretch inside a candidate
    /// needs searching at all.
    inner: meta::Regex,
}

/// The match-time state of each of the [`Rules`]' regexes (their lazy DFAs' states above all),
/// used by one search at a time. Each is made when its regex is first used (a cache starts at
/// tens of kilobytes to a megabyte, and text without candidates uses only `any`'s).
#[derive(Default)]
struct Caches {
    any: Option<meta::Cache>,
    anchored: Vec<Option<meta::Cache>>,
    each: Vec<Option<meta::Cache>>,
    inner: Option<meta::Cache>,
}

impl Caches {
    fn new(rules: &Rules) -> Caches {
        Caches {
            anchored: rules.anchored.iter().map(|_| None).collect(),
            each: rules.each.iter().map(|_| None).collect(),
            ..Caches::default()
        }
    }
}

/// The cache in `slot` for `re`, made on first use.
fn cache<'a>(slot: &'a mut Option<meta::Cache>, re: &meta::Regex) -> &'a mut meta::Cache {
    slot.get_or_insert_with(|| re.create_cache())
}

/// Whether `re` matches anywhere in `hay`.
fn is_match(re: &meta::Regex, cache: &mut meta::Cache, hay: &str) -> bool {
    re.search_half_with(cache, &Input::new(hay).earliest(true))
        .is_some()
}

/// The leftmost match of `re` in `hay` starting at or after `at` (what is before `at` is still
/// seen by look-around, as `Regex::find_at`).
fn find_at(re: &meta::Regex, cache: &mut meta::Cache, hay: &str, at: usize) -> Option<Span> {
    re.search_with(cache, &Input::new(hay).span(at..hay.len()))
        .map(|m| m.span())
}

/// The groups of the leftmost match of `re` in `hay` at or after `at`, if any.
fn captures_at(
    re: &meta::Regex,
    cache: &mut meta::Cache,
    hay: &str,
    at: usize,
) -> Option<Captures> {
    let mut caps = re.create_captures();
    re.search_captures_with(cache, &Input::new(hay).span(at..hay.len()), &mut caps);
    caps.is_match().then_some(caps)
}

/// The whole match of `caps` and the value to replace: `group`, or the first group that took
/// part ([`FIRST_GROUP`]), or the whole match when that group did not take part.
fn whole_and_value(caps: &Captures, group: usize) -> Option<(Span, Span)> {
    let whole = caps.get_group(0)?;
    let value = if group == FIRST_GROUP {
        caps.iter().skip(1).flatten().next()
    } else {
        caps.get_group(group)
    };
    Some((whole, value.unwrap_or(whole)))
}

/// The lazy DFA's cache per regex and cache set ([`Caches`]). The default (2 MiB) is too small for the combined
/// rules: on ordinary source the cache filled and was cleared again and again, and building DFA
/// states was most of the collector's time (BENCHMARKS.md § The tokenizer and the collector).
/// The cache grows only as far as the text needs.
const DFA_CACHE: usize = 16 << 20;

/// As `regex::RegexBuilder` would build it (its size limits), with caches we hold ourselves.
fn compile(pattern: &str) -> Result<meta::Regex, Box<meta::BuildError>> {
    const SIZE_LIMIT: usize = 10 << 20;
    meta::Regex::builder()
        .configure(
            meta::Config::new()
                .nfa_size_limit(Some(SIZE_LIMIT))
                .onepass_size_limit(Some(SIZE_LIMIT))
                .dfa_size_limit(Some(SIZE_LIMIT))
                .hybrid_cache_capacity(DFA_CACHE),
        )
        .build(pattern)
        .map_err(Box::new)
}

static COMPILED: LazyLock<Result<Rules, Box<meta::BuildError>>> = LazyLock::new(|| {
    let mut each = Vec::with_capacity(RULES.len());
    for (kind, pattern, group, check) in RULES {
        each.push(Rule {
            kind,
            re: compile(pattern)?,
            group: *group,
            check: *check,
        });
    }
    let any = RULES
        .iter()
        .map(|(_, p, _, _)| format!("(?:{p})"))
        .collect::<Vec<_>>()
        .join("|");
    let anchored = RULES
        .iter()
        .map(|(_, p, _, _)| compile(&format!("^(?:{p})")))
        .collect::<Result<_, _>>()?;
    let inner = RULES
        .iter()
        .filter(|(kind, ..)| *kind != GENERIC)
        .map(|(_, p, _, _)| format!("(?:{p})"))
        .collect::<Vec<_>>()
        .join("|");
    Ok(Rules {
        any: compile(&any)?,
        anchored,
        each,
        inner: compile(&inner)?,
    })
});

/// Caches for the rules, each used by one search at a time and put back after it, so the states
/// their lazy DFAs have built outlive the thread that built them (the collector's walks run on
/// fresh threads). They are held here rather than in the regexes' own pools, which keep a
/// thread's caches by its id: a fresh thread found none and built its DFAs again.
#[allow(
    clippy::vec_box,
    reason = "a cache set is kilobytes, moved in and out on every search: boxed, the 100k-file \
              walk (a search per name) measured faster"
)]
static SPARE: Mutex<Vec<Box<Caches>>> = Mutex::new(Vec::new());
/// Caches kept: more than the threads that redact at once only costs memory.
const SPARE_COPIES: usize = 8;

/// Runs `f` with the rules and caches for them (`None` if the rules did not compile).
fn with_rules<R>(f: impl FnOnce(&Rules, &mut Caches) -> R) -> Option<R> {
    let rules = COMPILED.as_ref().ok()?;
    let spare = SPARE.lock().unwrap_or_else(|p| p.into_inner()).pop();
    let mut caches = spare.unwrap_or_else(|| Box::new(Caches::new(rules)));
    let out = f(rules, &mut caches);
    let mut spare = SPARE.lock().unwrap_or_else(|p| p.into_inner());
    if spare.len() < SPARE_COPIES {
        spare.push(caches);
    }
    Some(out)
}

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
/// Linear in the text (see [`candidates`]).
pub fn redact(text: &str) -> (String, usize) {
    let (text, counts) = redact_counted(text);
    (text, counts.total())
}

/// [`redact`], counting the replaced values per rule.
pub fn redact_counted(text: &str) -> (String, Counts) {
    with_rules(|rules, caches| redact_with(rules, caches, text, Marker::Kind)).unwrap_or_else(
        || {
            tracing::error!("secret rules do not compile; withholding text");
            let lines = text.matches('\n').count();
            let mut counts = Counts::default();
            counts.add("unavailable", 1);
            (
                format!("[REDACTED:unavailable]{}", "\n".repeat(lines)),
                counts,
            )
        },
    )
}

/// The same rules for a message (an error, a line of a subprocess's output): every value replaced
/// by `[redacted]`, with no rule named and no line kept.
pub fn scrub(text: &str) -> String {
    with_rules(|rules, caches| redact_with(rules, caches, text, Marker::Plain).0)
        .unwrap_or_else(|| "[redacted]".into())
}

/// How a replaced value is shown.
#[derive(Clone, Copy)]
enum Marker {
    /// `[REDACTED:<rule>]`, and as many line breaks as the value held.
    Kind,
    /// `[redacted]`.
    Plain,
}

fn redact_with(rules: &Rules, caches: &mut Caches, text: &str, marker: Marker) -> (String, Counts) {
    let mut counts = Counts::default();
    if !is_match(&rules.any, cache(&mut caches.any, &rules.any), text) {
        return (text.to_string(), counts);
    }
    let mut spans = Vec::new();
    candidates(rules, caches, text, &mut spans);
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
                out.push_str(rules.each[rule].kind);
                out.push(']');
                for _ in memchr::memchr_iter(b'\n', &text.as_bytes()[start..end]) {
                    out.push('\n');
                }
            }
            Marker::Plain => out.push_str("[redacted]"),
        }
        copied = end;
        counts.add(rules.each[rule].kind, 1);
    }
    out.push_str(&text[copied..]);
    (out, counts)
}

/// The marker of the generic `name = value` rules.
const GENERIC: &str = "password";

/// Bytes past a stretch that the check before searching it sees.
const INNER_SLACK: usize = 512;

/// The accepted values in `text`, as `(start, end, rule)`.
///
/// One pass of the combined regex finds candidates. After a candidate the search goes on from
/// its end when it was replaced, else from its value (a rejected `name = value` may hold a
/// shape in its value, e.g. `aws_access_key_id=AKIA…`), never from the candidate's next
/// character: that made a long run of name characters before a rejected value cost quadratic
/// time. What the pass steps over without replacing (the name part of a candidate, or a
/// rejected whole-match candidate) is searched by each other rule, within that stretch only.
/// Those stretches do not overlap, so the whole costs at most one pass per rule, and one pass
/// in all on text without candidates.
fn candidates(
    rules: &Rules,
    caches: &mut Caches,
    text: &str,
    spans: &mut Vec<(usize, usize, usize)>,
) {
    let mut at = 0;
    while at < text.len() {
        let Some(m) = find_at(&rules.any, cache(&mut caches.any, &rules.any), text, at) else {
            break;
        };
        let next = m.start + text[m.start..].chars().next().map_or(1, char::len_utf8);
        let here = &text[m.start..];
        let anchored = rules.anchored.iter().zip(caches.anchored.iter_mut());
        let Some((i, whole, value)) = anchored.enumerate().find_map(|(i, (r, slot))| {
            let caps = captures_at(r, cache(slot, r), here, 0)?;
            let (whole, value) = whole_and_value(&caps, rules.each[i].group)?;
            let shift = |x: Span| (m.start + x.start, m.start + x.end);
            Some((i, shift(whole), shift(value)))
        }) else {
            at = m.end.max(next);
            continue;
        };
        let rule = &rules.each[i];
        let accepted = (rule.check)(&text[value.0..value.1]);
        if accepted {
            spans.push((value.0, value.1, i));
        }
        // Where the pass goes on, and the stretch the other rules search: what the pass steps
        // over without replacing, and a generic value (a known shape there names the marker).
        let (resume, skipped_end) = match (accepted, value.0 > whole.0) {
            (true, true) => (whole.1, value.1),
            (true, false) => (whole.1, whole.0),
            (false, true) => (value.0, value.0),
            (false, false) => (whole.1, whole.1),
        };
        // A generic assignment inside a candidate would end at the same value: only the other
        // rules search there, and only when one of them matches near it (a value starting
        // inside is at most a few hundred bytes long before it has matched).
        let mut near = (skipped_end + INNER_SLACK).min(text.len());
        while !text.is_char_boundary(near) {
            near += 1;
        }
        if skipped_end > next
            && is_match(
                &rules.inner,
                cache(&mut caches.inner, &rules.inner),
                &text[next..near],
            )
        {
            for j in (0..rules.each.len()).filter(|&j| j != i && rules.each[j].kind != GENERIC) {
                values(rules, caches, j, text, next..skipped_end, spans);
            }
        }
        at = resume.max(next);
    }
}

/// The values rule `index` accepts that start in `region` of `text`. The search sees only the
/// region (so a stretch costs its own length, never the rest of the text); a candidate reaching
/// the region's end is matched again, anchored, on the whole text, to see all of it. After a
/// candidate the search goes on from its value or end, as in [`candidates`].
fn values(
    rules: &Rules,
    caches: &mut Caches,
    index: usize,
    text: &str,
    region: std::ops::Range<usize>,
    spans: &mut Vec<(usize, usize, usize)>,
) {
    let rule = &rules.each[index];
    let hay = &text[..region.end];
    let pick = |caps: &Captures| {
        whole_and_value(caps, rule.group).map(|(whole, value)| (whole.range(), value.range()))
    };
    let mut at = region.start;
    while at < region.end {
        let each = cache(&mut caches.each[index], &rule.re);
        let Some(caps) = captures_at(&rule.re, each, hay, at) else {
            break;
        };
        let Some((mut whole, mut value)) = pick(&caps) else {
            break;
        };
        if whole.end == region.end && region.end < text.len() {
            let anchored = &rules.anchored[index];
            let slot = cache(&mut caches.anchored[index], anchored);
            let Some(full) =
                captures_at(anchored, slot, &text[whole.start..], 0).and_then(|c| pick(&c))
            else {
                break;
            };
            let shift = whole.start;
            whole = shift + full.0.start..shift + full.0.end;
            value = shift + full.1.start..shift + full.1.end;
        }
        let accepted = (rule.check)(&text[value.clone()]);
        if accepted {
            spans.push((value.start, value.end, index));
        }
        at = if !accepted && value.start > whole.start {
            value.start
        } else {
            whole.end
        }
        .max(whole.start + 1);
        while !text.is_char_boundary(at) {
            at += 1;
        }
    }
}

/// The private key blocks of a file, as 1-based inclusive line ranges: from each BEGIN line to
/// its END line, or to the last line when the block is not closed.
pub fn key_blocks(content: &str) -> Vec<(u32, u32)> {
    static KEY: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(RULES[0].1).ok());
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
pub(crate) mod tests;

//! Secret-looking values in text about to leave the machine, replaced by a marker: file contents,
//! diffs, the call's own text, file names, and the messages of errors. One body of rules for
//! every part (the names of secret files are the collector's).
//!
//! Rules: well-known key and token shapes (private key blocks, AWS, GitHub, GitLab, Hugging Face,
//! Google API keys and OAuth tokens, Slack, SendGrid, Stripe, OpenAI/Anthropic, JWTs, Azure keys,
//! HTTP Basic and bearer credentials, passwords in URLs) and generic `password = "..."`-style
//! assignments. One combined regex finds candidates in a single pass; the rule that matched is
//! then identified on the candidate alone, so text without secrets costs one scan. A replacement
//! keeps the line count of what it replaces, so line numbers still match the file. Generic
//! assignments need a value that looks like a secret (no code punctuation, letters and digits or
//! enough entropy), so ordinary code such as `token = next_token()` is left alone.

use std::sync::{LazyLock, Mutex};

use regex::Regex;
use regex_automata::meta;
use regex_automata::util::captures::Captures;
use regex_automata::{Input, Span};

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

/// A rule as written: marker name, pattern, group to replace, check on the value.
type RuleSpec = (&'static str, &'static str, usize, fn(&str) -> bool);

/// Shape rules, most specific first (where two overlap, the marker names the earlier rule).
/// Runs of name characters are bounded (`{0,64}`), so a candidate is short and finding which
/// rule it is costs little even inside a megabyte of identifier characters.
/// SECURITY.md lists them; keep the two in step.
const RULES: &[RuleSpec] = &[
    (
        "private-key",
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?s:.)*?(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\z)",
        0,
        always,
    ),
    (
        "aws-access-key",
        r"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}(?-u:\b)",
        0,
        always,
    ),
    (
        "github-token",
        r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})",
        0,
        always,
    ),
    (
        "gitlab-token",
        r"(?-u:\b)(?:glpat|gldt|glrt|glptt|glsoat|glft|glcbt)-[0-9A-Za-z_\-]{20,255}",
        0,
        always,
    ),
    (
        "huggingface-token",
        r"(?-u:\b)hf_[A-Za-z0-9]{30,255}(?-u:\b)",
        0,
        mixed_case,
    ),
    (
        "google-api-key",
        r"(?-u:\b)AIza[0-9A-Za-z_\-]{35}",
        0,
        always,
    ),
    (
        "google-oauth-token",
        r"(?-u:\b)ya29\.[0-9A-Za-z_\-.]+",
        0,
        always,
    ),
    (
        "google-oauth-client-secret",
        r"(?-u:\b)GOCSPX-[0-9A-Za-z_\-]{20,255}",
        0,
        always,
    ),
    (
        "slack-token",
        r"(?-u:\b)xox[abposr]-[0-9A-Za-z\-]{10,250}",
        0,
        letters_and_digits,
    ),
    (
        "slack-webhook",
        r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]{20,}",
        0,
        always,
    ),
    (
        "sendgrid-key",
        r"(?-u:\b)SG\.[0-9A-Za-z_\-]{16,32}\.[0-9A-Za-z_\-]{30,64}",
        0,
        always,
    ),
    (
        "stripe-key",
        r"(?-u:\b)(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}",
        0,
        always,
    ),
    (
        "api-key",
        r"(?-u:\b)sk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
        0,
        letters_and_digits,
    ),
    (
        "jwt",
        r"(?-u:\b)eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        0,
        always,
    ),
    (
        "azure-key",
        r"(?i)(?-u:\b)(?:AccountKey|SharedAccessKey)[ \t]*=[ \t]*([A-Za-z0-9+/]{20,}={0,2})",
        1,
        always,
    ),
    (
        "basic-auth",
        r"(?i)(?-u:\b)basic[ \t]+([A-Za-z0-9+/]{8,}={0,2})",
        1,
        basic_credentials,
    ),
    (
        "bearer-token",
        r"(?i)(?-u:\b)bearer[ \t]+([A-Za-z0-9_\-.=+/~]{16,})",
        1,
        always,
    ),
    (
        "url-password",
        r"(?i)(?-u:\b)[a-z][a-z0-9+.\-]{0,31}://[^\s/:@'\x22]{0,256}:([^\s/@'\x22]{3,256})@",
        1,
        not_placeholder,
    ),
    (
        "password",
        r#"(?i)[a-z0-9_.\-]{0,64}(?:password|passwd|pwd|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|credential)[a-z0-9_.\-]{0,64}["']?[ \t]*(?::=|=>|:|=)[ \t]*(?:"([A-Za-z0-9!#%&+\-./:=?@_~]{6,200})"|'([A-Za-z0-9!#%&+\-./:=?@_~]{6,200})')"#,
        FIRST_GROUP,
        secret_looking,
    ),
    (
        "password",
        r#"(?i)[a-z0-9_.\-]{0,64}(?:password|passwd|pwd|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|credential)[a-z0-9_.\-]{0,64}[ \t]*(?::=|=>|:|=)[ \t]*([A-Za-z0-9!%&+\-./=?@_~]{8,200})[ \t]*(?:[,;]|\r?\n|\z)"#,
        1,
        unquoted_secret_looking,
    ),
];

/// Replace the first capture group that took part in the match.
const FIRST_GROUP: usize = usize::MAX;

fn always(_: &str) -> bool {
    true
}

fn letters_and_digits(v: &str) -> bool {
    v.bytes().any(|b| b.is_ascii_digit()) && v.bytes().any(|b| b.is_ascii_alphabetic())
}

/// Random-looking letters: upper and lower case mixed (an identifier seldom is, past 30).
fn mixed_case(v: &str) -> bool {
    v.bytes().any(|b| b.is_ascii_uppercase()) && v.bytes().any(|b| b.is_ascii_lowercase())
}

/// HTTP Basic credentials: base64 of `user:password`.
fn basic_credentials(v: &str) -> bool {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(v)
        .is_ok_and(|raw| raw.contains(&b':') && raw.iter().all(|b| !b.is_ascii_control()))
}

fn not_placeholder(v: &str) -> bool {
    !(v.starts_with('$')
        || v.starts_with('<')
        || v.starts_with('{')
        || v.bytes().all(|b| b == b'*'))
}

/// A generic assigned value that looks like a secret: not a URL or a path, and either letters
/// and digits mixed or high entropy.
fn secret_looking(v: &str) -> bool {
    if v.contains("://") || v.starts_with('/') || v.starts_with('.') {
        return false;
    }
    let lower = v.to_ascii_lowercase();
    if ["true", "false", "null", "none", "required", "optional"].contains(&lower.as_str()) {
        return false;
    }
    letters_and_digits(v) || entropy(v) >= 3.0
}

/// An unquoted value could be an identifier in code (`token = self.tokenizer`): it must mix
/// letters and digits.
fn unquoted_secret_looking(v: &str) -> bool {
    secret_looking(v) && letters_and_digits(v)
}

/// Shannon entropy in bits per byte.
fn entropy(v: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in v.bytes() {
        counts[usize::from(b)] += 1;
    }
    let n = v.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
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

/// Replaces secret-looking values; returns the text and how many were replaced. Fails closed:
/// if the rules could not be compiled (a bug caught by the tests), the whole text is withheld.
///
/// Linear in the text (see [`candidates`]).
pub fn redact(text: &str) -> (String, usize) {
    with_rules(|rules, caches| redact_with(rules, caches, text, Marker::Kind)).unwrap_or_else(
        || {
            tracing::error!("secret rules do not compile; withholding text");
            let lines = text.matches('\n').count();
            (format!("[REDACTED:unavailable]{}", "\n".repeat(lines)), 1)
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

fn redact_with(rules: &Rules, caches: &mut Caches, text: &str, marker: Marker) -> (String, usize) {
    if !is_match(&rules.any, cache(&mut caches.any, &rules.any), text) {
        return (text.to_string(), 0);
    }
    let mut spans = Vec::new();
    candidates(rules, caches, text, &mut spans);
    // Overlapping values are replaced as one; the marker names the earliest (then the most
    // specific) rule.
    spans.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut count = 0;
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
        count += 1;
    }
    out.push_str(&text[copied..]);
    (out, count)
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
pub(crate) mod tests {
    use super::*;

    #[test]
    fn the_rules_compile() {
        assert!(COMPILED.is_ok(), "{:?}", COMPILED.as_ref().err());
    }

    /// One body for every part: what the Gemini CLI backend's messages were scrubbed of (short
    /// OAuth tokens, bearer values of letters alone) is redacted everywhere, and a message is
    /// scrubbed by the same rules as a file.
    #[test]
    fn messages_and_files_share_the_rules() {
        let text = "token ya29.a0AfH6SMBxyz and Bearer abcdefghijklmnopqrstu and \
                    AIzaSyA1234567890abcdefghijklmnopqrstuv";
        let (redacted, n) = redact(text);
        assert_eq!(n, 3, "{redacted}");
        assert!(
            redacted.contains("[REDACTED:google-oauth-token]"),
            "{redacted}"
        );
        assert!(redacted.contains("[REDACTED:bearer-token]"), "{redacted}");
        let scrubbed = scrub(text);
        assert_eq!(
            scrubbed,
            "token [redacted] and Bearer [redacted] and [redacted]"
        );
    }

    #[test]
    fn key_blocks_are_found_by_line() {
        let text = "a\n-----BEGIN PRIVATE KEY-----\nb1\nb2\n-----END PRIVATE KEY-----\nc\n\
                    -----BEGIN OPENSSH PRIVATE KEY-----\nd1\n";
        assert_eq!(key_blocks(text), vec![(2, 5), (7, 8)]);
        let closed_at_eof = "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----";
        assert_eq!(key_blocks(closed_at_eof), vec![(1, 3)]);
        assert_eq!(key_blocks("no keys here\n"), vec![]);
    }

    #[test]
    fn diff_lines_inside_key_blocks_are_redacted_on_both_sides() {
        // Old: key on lines 2-9; new: key on lines 2-10 (one line added after line 5, line 7
        // removed, line 8 changed).
        let patch = "diff --git a/k.rs b/k.rs\n--- a/k.rs\n+++ b/k.rs\n\
                     @@ -3,7 +3,8 @@ fn x\n b1\n b2\n b3\n+ADDED\n b4\n-b5\n-b6\n+b6new\n+b6more\n b7\n\
                     @@ -20,2 +21,2 @@\n-old\n+new\n\\ No newline at end of file\n";
        let (out, n) = redact_diff_keys(patch, &[(2, 9)], &[(2, 10)]);
        assert_eq!(
            out,
            "diff --git a/k.rs b/k.rs\n--- a/k.rs\n+++ b/k.rs\n\
             @@ -3,7 +3,8 @@\n [REDACTED:private-key]\n [REDACTED:private-key]\n \
             [REDACTED:private-key]\n+[REDACTED:private-key]\n [REDACTED:private-key]\n\
             -[REDACTED:private-key]\n-[REDACTED:private-key]\n+[REDACTED:private-key]\n\
             +[REDACTED:private-key]\n [REDACTED:private-key]\n\
             @@ -20,2 +21,2 @@\n-old\n+new\n\\ No newline at end of file\n"
        );
        assert_eq!(n, 1);
        // Only the new side has a key: a removed line outside it stays, context inside goes.
        let patch = "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n";
        let (out, n) = redact_diff_keys(patch, &[], &[(2, 3)]);
        assert_eq!(
            out,
            "@@ -1,3 +1,3 @@\n a\n-b\n+[REDACTED:private-key]\n [REDACTED:private-key]\n"
        );
        assert_eq!(n, 1);
        assert_eq!(redact_diff_keys(patch, &[], &[]), (patch.to_string(), 0));
    }

    #[test]
    fn a_rejected_candidate_hides_no_secret() {
        // The generic rule rejects the value, yet the shapes inside and after it are found.
        for (text, kind) in [
            ("aws_access_key_id=AKIAQ3EGVP7MZL2XK4RT\n", "aws-access-key"),
            (
                "token_url=https://x.io/t,AKIAQ3EGVP7MZL2XK4RT\n",
                "aws-access-key",
            ),
            ("password=\"required\" secret=\"hunter2hunter\"", "password"),
            (
                "aaaaaaaaaaaaaaaapassword=\"required\" api_key=\"f8a9c2d1e4b7a6c5\"",
                "password",
            ),
        ] {
            let (out, n) = redact(text);
            assert_eq!(n, 1, "{text} -> {out}");
            assert!(
                out.contains(&format!("[REDACTED:{kind}]")),
                "{text} -> {out}"
            );
        }
    }

    /// Realistic fake secrets (random-looking, right shapes; none is a real credential).
    pub const FAKE: &[(&str, &str)] = &[
        (
            "private-key",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\nVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n-----END RSA PRIVATE KEY-----",
        ),
        (
            "private-key",
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----",
        ),
        ("aws-access-key", "AKIAQ3EGVP7MZL2XK4RT"),
        ("github-token", "ghp_4Kx9Qm2Lp7Zr8Wv3Ty6Ub1Nc5Hd0Jf2Ga8Se"),
        (
            "github-token",
            "github_pat_11ABCDE2Y0q8ZkLmNoPqRs_TuVwXyZ0123456789abcdefGHIJKLmnopQRstu",
        ),
        ("google-api-key", "AIzaSyD3x7Kq9-LmZ2pR8vT1wY4uB6nC0eF5gHj"),
        (
            "slack-token",
            "xoxb-2943872165-4820917364815-Zq8Lm3Pw7Xr2Tn5Vb9Ky1Hc4",
        ),
        (
            "api-key",
            "sk-proj-Q7mZ2xL9pR4vT8wY1uB6nC3eF5gHjK0dS2aL7qW9eR4tY6uI8oP1",
        ),
        (
            "api-key",
            "sk-ant-api03-Zx8Cv7Bn6Mq5Lw4Ke3Jr2Ht1Gy0Fu9Di8So7Ap6Qz5Wx4Ec3Rv2Tb1Yn0Um9Ik8Ol7Pp6-AbCdEf",
        ),
        (
            "jwt",
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkphbmUifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        ),
        ("stripe-key", "sk_live_51Hx7Qm2Lp7Zr8Wv3Ty6Ub1Nc5"),
        ("gitlab-token", "glpat-Zq8Lm3Pw7Xr2Tn5Vb9Ky"),
        ("huggingface-token", "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"),
        (
            "google-oauth-client-secret",
            "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",
        ),
        (
            "sendgrid-key",
            "SG.Zq8Lm3Pw7Xr2Tn5Vb9Ky1H.c4AbCdEf6Gh8Ij0Kl2Mn4Op6Qr8St0Uv2Wx4Yz6Ab8Cd",
        ),
        (
            "azure-key",
            "AccountKey=Zq8Lm3Pw7Xr2Tn5Vb9Ky1Hc4AbCdEf6Gh8Ij0Kl2Mn4Op6Qr8==",
        ),
        ("basic-auth", "Basic YWxpY2U6czNjcjN0LXBhc3N3b3Jk"),
    ];

    #[test]
    fn known_shapes_are_redacted_and_counted() {
        for (kind, secret) in FAKE {
            let text = format!("before\nconst X = \"{secret}\";\nafter\n");
            let (out, n) = redact(&text);
            assert_eq!(n, 1, "{kind}: {out}");
            assert!(!out.contains(secret), "{kind} leaked: {out}");
            assert!(out.contains(&format!("[REDACTED:{kind}]")), "{kind}: {out}");
            assert_eq!(
                out.lines().count(),
                text.lines().count(),
                "{kind}: line count changed"
            );
            assert!(
                out.starts_with("before\n") && out.ends_with("after\n"),
                "{out}"
            );
        }
    }

    #[test]
    fn generic_assignments_are_redacted() {
        for line in [
            "DB_PASSWORD=s3cr3tP4ssw0rd",
            "password: \"correct-horse-battery-staple\"",
            "secret: 'Xk29dLq7Pw'",
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "\"api_key\": \"f8a9c2d1e4b7a6c5\"",
            "export GITHUB_TOKEN=abc123def456ghi789",
            "client.login(password=\"hunter2hunter\")",
            "redis://:pw0rd@cache.internal:6379/0",
            "Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        ] {
            let (out, n) = redact(line);
            assert_eq!(n, 1, "{line} -> {out}");
            assert!(out.contains("[REDACTED:"), "{line} -> {out}");
        }
        // The key stays, so the reader still sees what was there.
        let (out, _) = redact("DB_PASSWORD=s3cr3tP4ssw0rd\n");
        assert_eq!(out, "DB_PASSWORD=[REDACTED:password]\n");
    }

    #[test]
    fn ordinary_code_is_left_alone() {
        for line in [
            "let token = next_token();",
            "max_tokens = 4096",
            "password = get_password()",
            "self.password = password",
            "api_key: Option<Secret>,",
            "pub secret_globs: Vec<String>,",
            "token_type = \"bearer\"",
            "password_file = \"/etc/app/password.txt\"",
            "token_url = \"https://oauth2.googleapis.com/token\"",
            "TOKEN_RE = re.compile(r\"[a-z]+\")",
            "author = \"Jane Doe <jane@example.com>\"",
            "if secret is None: return",
            "password: str = Field(default=None)",
            "key = \"AIzaSyTESTKEY-never-printed\"",
            "the sk-learn library",
            "password = \"xxxxxxxx\"",
            "api_key = ${API_KEY}",
        ] {
            let (out, n) = redact(line);
            assert_eq!((out.as_str(), n), (line, 0), "{line}");
        }
    }

    #[test]
    fn an_unterminated_private_key_is_redacted_to_the_end() {
        let text = "a\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nMIIEvQ\n";
        let (out, n) = redact(text);
        assert_eq!(n, 1);
        assert_eq!(out, "a\n[REDACTED:private-key]\n\n\n");
    }

    #[test]
    fn several_secrets_are_all_counted() {
        let text = FAKE
            .iter()
            .map(|(_, s)| format!("x = {s}\n"))
            .collect::<String>();
        let (out, n) = redact(&text);
        assert_eq!(n, FAKE.len(), "{out}");
        for (_, s) in FAKE {
            assert!(!out.contains(s));
        }
    }
}

//! Finding the values the rules accept in a text: the rules compiled once, their search caches
//! pooled across threads, and the search itself, run only where a rule's keywords are.
//!
//! Each rule is its own regex (`regex-automata`'s meta regex, the engine under `regex`). One
//! Aho-Corasick pass over the text finds every rule's keywords ([`super::keywords`]); a rule with
//! none is not run at all, and the others are run only on the lines holding one (or, for a
//! private key block, anchored at its `-----BEGIN`). What the search finds is exactly what one
//! regex of all the rules together (leftmost first, earlier rules first) found over the whole
//! text, as before: a rule's match holds one of its keywords, and lies within that keyword's
//! line ([`Reach`]), so the lines without one hold no match of it; the leftmost match of all the
//! rules is the leftmost of each rule's leftmost, the earlier rule on a tie. A test runs that
//! earlier engine beside this one on generated text (`reference.rs`).

use std::ops::Range;
use std::sync::{LazyLock, Mutex};

use regex_automata::meta;
use regex_automata::util::captures::Captures;
use regex_automata::{Anchored, Input, Span};

use super::keywords::{Hits, Keywords};
use super::rules::{FIRST_GROUP, RULES, Reach};

/// A value-shape rule: a name for the marker, a pattern, the capture group to replace (0 = the
/// whole match), a check the captured value must pass, and where its matches lie.
struct Rule {
    kind: &'static str,
    re: meta::Regex,
    group: usize,
    glue: bool,
    check: fn(&str) -> bool,
    reach: Reach,
}

/// The rules, compiled once and shared by every thread; each search brings its own [`Caches`].
pub(super) struct Rules {
    each: Vec<Rule>,
    keywords: Keywords,
}

impl Rules {
    /// The marker name of rule `i`.
    pub(super) fn kind(&self, i: usize) -> &'static str {
        self.each[i].kind
    }
}

/// The match-time state of each rule's regex (its lazy DFA's states above all), used by one
/// search at a time. Each is made when its rule is first run.
pub(super) struct Caches {
    each: Vec<Option<meta::Cache>>,
}

impl Caches {
    fn new(rules: &Rules) -> Caches {
        Caches {
            each: rules.each.iter().map(|_| None).collect(),
        }
    }
}

/// The cache in `slot` for `re`, made on first use.
pub(super) fn cache<'a>(
    slot: &'a mut Option<meta::Cache>,
    re: &meta::Regex,
) -> &'a mut meta::Cache {
    slot.get_or_insert_with(|| re.create_cache())
}

/// The groups of the leftmost match of `re` in `input`, if any.
fn captures(re: &meta::Regex, cache: &mut meta::Cache, input: &Input) -> Option<Captures> {
    let mut caps = re.create_captures();
    re.search_captures_with(cache, input, &mut caps);
    caps.is_match().then_some(caps)
}

/// The whole match of `caps` (found in `hay`) and the value to replace: `group`, or the first
/// group that took part ([`FIRST_GROUP`]), or the whole match when that group did not take
/// part. For a rule that takes glue (`Spec::glue`), a `_` the match begins with is not part
/// of it.
pub(super) fn whole_and_value(
    caps: &Captures,
    group: usize,
    glue: bool,
    hay: &str,
) -> Option<(Span, Span)> {
    let mut whole = caps.get_group(0)?;
    if glue && hay.as_bytes().get(whole.start) == Some(&b'_') {
        whole.start += 1;
    }
    let value = match group {
        0 => Some(whole),
        FIRST_GROUP => caps.iter().skip(1).flatten().next(),
        group => caps.get_group(group),
    };
    Some((whole, value.unwrap_or(whole)))
}

/// The largest a rule's lazy DFA cache may grow (it grows only as far as the text needs; when
/// full it is cleared and reused). One rule's DFA is run on the lines holding its keywords only,
/// and holds no other rule's states: on ordinary source each stays far below this
/// (BENCHMARKS.md § Issue 32). A search set holds at most one per rule.
const DFA_CACHE: usize = 2 << 20;

/// As `regex::RegexBuilder` would build it (its size limits), with caches we hold ourselves.
fn compile(pattern: &str) -> Result<meta::Regex, Box<meta::BuildError>> {
    compile_with(pattern, DFA_CACHE)
}

/// [`compile`] with a lazy DFA cache of at most `dfa_cache` bytes.
///
/// Without the one-pass DFA: it only speeds up reading a match's groups, which happens once per
/// candidate, while building it for the URL credentials rule (a Unicode class repeated up to 256
/// times) took 4 MB and half of that rule's build time on every first call (BENCHMARKS.md §
/// Lighter and sooner). A match's groups are then read by the bounded backtracker or the
/// PikeVM, on the span the lazy DFA already found.
pub(super) fn compile_with(
    pattern: &str,
    dfa_cache: usize,
) -> Result<meta::Regex, Box<meta::BuildError>> {
    const SIZE_LIMIT: usize = 10 << 20;
    meta::Regex::builder()
        .configure(
            meta::Config::new()
                .nfa_size_limit(Some(SIZE_LIMIT))
                .onepass(false)
                .dfa_size_limit(Some(SIZE_LIMIT))
                .hybrid_cache_capacity(dfa_cache),
        )
        .build(pattern)
        .map_err(Box::new)
}

type Compiled = Result<Rules, Box<dyn std::error::Error + Send + Sync>>;

pub(super) static COMPILED: LazyLock<Compiled> = LazyLock::new(|| {
    let mut each = Vec::with_capacity(RULES.len());
    for spec in RULES {
        each.push(Rule {
            kind: spec.kind,
            re: compile(spec.pattern)?,
            group: spec.group,
            glue: spec.glue,
            check: spec.check,
            reach: spec.reach,
        });
    }
    Ok(Rules {
        each,
        keywords: Keywords::new(RULES)?,
    })
});

/// Caches for the rules, each set used by one search at a time and put back after it, so the
/// states their lazy DFAs have built outlive the thread that built them (the collector's walks
/// run on fresh threads). They are held here rather than in the regexes' own pools, which keep a
/// thread's caches by its id: a fresh thread found none and built its DFAs again.
#[allow(
    clippy::vec_box,
    reason = "a cache set is moved in and out on every search: boxed, the 100k-file walk (a \
              search per name) measured faster"
)]
static SPARE: Mutex<Vec<Box<Caches>>> = Mutex::new(Vec::new());
/// Cache sets kept: more than the threads that redact at once only costs memory.
const SPARE_COPIES: usize = 8;

/// Runs `f` with a cache set for `rules`, taken from the spare ones and put back after.
fn with_caches<R>(rules: &Rules, f: impl FnOnce(&mut Caches) -> R) -> R {
    let spare = SPARE.lock().unwrap_or_else(|p| p.into_inner()).pop();
    let mut caches = spare.unwrap_or_else(|| Box::new(Caches::new(rules)));
    let out = f(&mut caches);
    let mut spare = SPARE.lock().unwrap_or_else(|p| p.into_inner());
    if spare.len() < SPARE_COPIES {
        spare.push(caches);
    }
    out
}

/// An accepted value: its start, its end and the rule's index.
pub(super) type Value = (usize, usize, usize);

/// A candidate told apart: the rule, its whole match and the value in it, as byte ranges.
type Told = (usize, (usize, usize), (usize, usize));

/// The marker of the generic `name = value` rules.
const GENERIC: &str = "password";

/// Bytes past a stretch that the check before searching it sees.
const INNER_SLACK: usize = 512;

/// What is known of a rule's next match.
#[derive(Clone, Copy)]
enum Next {
    /// Not searched yet, or its match lies behind the search.
    Unknown,
    /// None at or after where it was last searched from.
    None,
    /// This one, the leftmost at or after where it was searched from.
    At(Span),
}

/// One text's search.
struct Search<'a> {
    rules: &'a Rules,
    text: &'a str,
    hits: Hits,
    /// The rules with a keyword in the text, in the table's order.
    active: Vec<usize>,
    next: Vec<Next>,
    /// Per rule, the line it last searched (start, and end after its `\n`).
    line: Vec<Range<usize>>,
    run: Runner<'a>,
}

/// The rules' regexes with their caches.
struct Runner<'a> {
    rules: &'a Rules,
    caches: &'a mut Caches,
    /// How often each rule's regex was run (tests).
    #[cfg(test)]
    runs: Vec<usize>,
}

impl<'a> Runner<'a> {
    /// Rule `i`'s regex and cache.
    fn regex(&mut self, i: usize) -> (&'a meta::Regex, &mut meta::Cache) {
        #[cfg(test)]
        {
            self.runs[i] += 1;
        }
        let rules: &'a Rules = self.rules;
        let re = &rules.each[i].re;
        (re, cache(&mut self.caches.each[i], re))
    }
}

/// How often each rule's regex was run on `text`, by rule.
#[cfg(test)]
pub(super) fn runs(text: &str) -> Vec<(&'static str, usize)> {
    let rules = COMPILED.as_ref().expect("the rules compile");
    with_caches(rules, |caches| {
        let hits = rules.keywords.find(text);
        let mut search = Search::new(rules, caches, text, hits);
        let mut spans = Vec::new();
        search.candidates(&mut spans);
        let runs = search.run.runs.clone();
        (0..rules.each.len())
            .map(|i| (rules.kind(i), runs[i]))
            .collect()
    })
}

/// The rules, and the values they accept in `text` as `(start, end, rule)`, in no particular
/// order (`None` if the rules did not compile). Text without keywords takes no cache set.
pub(super) fn accepted(text: &str) -> Option<(&'static Rules, Vec<Value>)> {
    let rules = COMPILED.as_ref().ok()?;
    let hits = rules.keywords.find(text);
    let mut spans = Vec::new();
    if !hits.is_empty() {
        with_caches(rules, |caches| {
            Search::new(rules, caches, text, hits).candidates(&mut spans)
        });
    }
    Some((rules, spans))
}

impl<'a> Search<'a> {
    fn new(rules: &'a Rules, caches: &'a mut Caches, text: &'a str, hits: Hits) -> Search<'a> {
        let n = rules.each.len();
        Search {
            active: (0..n).filter(|&i| !hits.from(i, 0).is_empty()).collect(),
            rules,
            text,
            hits,
            next: vec![Next::Unknown; n],
            line: vec![0..0; n],
            run: Runner {
                rules,
                caches,
                #[cfg(test)]
                runs: vec![0; n],
            },
        }
    }

    /// The accepted values, as `(start, end, rule)`.
    ///
    /// Candidates are found leftmost first, all rules together ([`Search::next_any`]). After a
    /// candidate the search goes on from the end of its value when it was replaced (what the
    /// match holds after the value — a closing quote, a separator, the `_` a token is glued to
    /// — may begin the next one: `AKIA…_AKIA…`), else from its value (a rejected
    /// `name = value` may hold a shape in its value, e.g. `aws_access_key_id=AKIA…`),
    /// never from the candidate's next character: that made a long run of name characters
    /// before a rejected value cost quadratic time. What the pass steps over without replacing
    /// (the name part of a candidate, or a rejected whole-match candidate) is searched by each
    /// other rule, within that stretch only. Those stretches do not overlap, so the whole costs
    /// at most one pass per rule over the lines holding its keywords.
    fn candidates(&mut self, spans: &mut Vec<Value>) {
        let (text, rules) = (self.text, self.rules);
        let mut at = 0;
        while at < text.len() {
            let Some(m) = self.next_any(at) else {
                break;
            };
            let next = m.start + text[m.start..].chars().next().map_or(1, char::len_utf8);
            let Some((i, whole, value)) = self.which(m.start) else {
                at = m.end.max(next);
                continue;
            };
            let rule = &rules.each[i];
            let accepted = (rule.check)(&text[value.0..value.1]);
            if accepted {
                spans.push((value.0, value.1, i));
            }
            // Where the pass goes on, and the stretch the other rules search: what the pass
            // steps over without replacing, and a generic value (a known shape there names the
            // marker).
            let (resume, skipped_end) = match (accepted, value.0 > whole.0) {
                (true, true) => (value.1, value.1),
                (true, false) => (value.1, whole.0),
                (false, true) => (value.0, value.0),
                (false, false) => (whole.1, whole.1),
            };
            // A generic assignment inside a candidate would end at the same value: only the
            // other rules search there, and only when one of them matches near it (a value
            // starting inside is at most a few hundred bytes long before it has matched).
            let mut near = (skipped_end + INNER_SLACK).min(text.len());
            while !text.is_char_boundary(near) {
                near += 1;
            }
            if skipped_end > next && self.inner_match(next..near) {
                for j in 0..rules.each.len() {
                    if j != i && rules.each[j].kind != GENERIC {
                        self.values(j, next..skipped_end, spans);
                    }
                }
            }
            at = resume.max(next);
        }
    }

    /// The leftmost match of any rule at or after `at` (the earlier rule's on a tie): what one
    /// regex of all the rules, leftmost first, finds from `at`.
    fn next_any(&mut self, at: usize) -> Option<Span> {
        let mut best: Option<Span> = None;
        for k in 0..self.active.len() {
            let i = self.active[k];
            let found = match self.next[i] {
                Next::At(m) if m.start >= at => Some(m),
                Next::None => None,
                Next::At(_) | Next::Unknown => {
                    let m = self.next_match(i, at);
                    self.next[i] = m.map_or(Next::None, Next::At);
                    m
                }
            };
            if let Some(m) = found
                && best.is_none_or(|b| m.start < b.start)
            {
                best = Some(m);
            }
        }
        best
    }

    /// Rule `i`'s leftmost match at or after `at`. Every match holds a keyword at or after its
    /// start, so only the keywords from `at` on are looked at.
    fn next_match(&mut self, i: usize, at: usize) -> Option<Span> {
        let text = self.text;
        let hits = self.hits.from(i, at);
        match self.rules.each[i].reach {
            Reach::FromKeyword => hits.iter().find_map(|&(k, _)| {
                let input = Input::new(text).span(k..text.len()).anchored(Anchored::Yes);
                let (re, cache) = self.run.regex(i);
                re.search_with(cache, &input).map(|m| m.span())
            }),
            Reach::Line => {
                let mut rest = hits;
                while let Some(&(k, _)) = rest.first() {
                    let line = line_around(text, k, &mut self.line[i]);
                    let input = Input::new(text).span(at.max(line.start)..line.end);
                    let (re, cache) = self.run.regex(i);
                    if let Some(m) = re.search_with(cache, &input) {
                        return Some(m.span());
                    }
                    rest = &rest[rest.partition_point(|&(s, _)| s < line.end)..];
                }
                None
            }
        }
    }

    /// Which rule a candidate starting at `start` is: the first that matches there, seen from
    /// there on (as `^(?:rule)` on the rest of the text), with its match and value.
    fn which(&mut self, start: usize) -> Option<Told> {
        let here = &self.text[start..];
        for k in 0..self.active.len() {
            let i = self.active[k];
            if self.hits.from(i, start).is_empty() {
                continue;
            }
            let (group, glue) = (self.rules.each[i].group, self.rules.each[i].glue);
            let (re, cache) = self.run.regex(i);
            let input = Input::new(here).anchored(Anchored::Yes);
            let Some((whole, value)) =
                captures(re, cache, &input).and_then(|c| whole_and_value(&c, group, glue, here))
            else {
                continue;
            };
            let shift = |x: Span| (start + x.start, start + x.end);
            return Some((i, shift(whole), shift(value)));
        }
        None
    }

    /// Whether any rule but the generic ones matches in `range` of the text, seen alone.
    fn inner_match(&mut self, range: Range<usize>) -> bool {
        let hay = &self.text[range.clone()];
        for k in 0..self.active.len() {
            let j = self.active[k];
            if self.rules.each[j].kind == GENERIC || !self.hits.within(j, range.clone()) {
                continue;
            }
            let (re, cache) = self.run.regex(j);
            if re
                .search_half_with(cache, &Input::new(hay).earliest(true))
                .is_some()
            {
                return true;
            }
        }
        false
    }

    /// The values rule `index` accepts that start in `region` of the text. The search sees only
    /// the region (so a stretch costs its own length, never the rest of the text); a candidate
    /// reaching the region's end is matched again, anchored, on the whole text, to see all of
    /// it. After a candidate the search goes on from its value or end, as in
    /// [`Search::candidates`].
    fn values(&mut self, index: usize, region: Range<usize>, spans: &mut Vec<Value>) {
        if !self.hits.within(index, region.clone()) {
            return;
        }
        let (text, rules) = (self.text, self.rules);
        let rule = &rules.each[index];
        let hay = &text[..region.end];
        let pick = |caps: &Captures, hay: &str| {
            whole_and_value(caps, rule.group, rule.glue, hay)
                .map(|(whole, value)| (whole.range(), value.range()))
        };
        let mut at = region.start;
        while at < region.end {
            let (re, cache) = self.run.regex(index);
            let Some(caps) = captures(re, cache, &Input::new(hay).span(at..hay.len())) else {
                break;
            };
            let Some((mut whole, mut value)) = pick(&caps, hay) else {
                break;
            };
            if whole.end == region.end && region.end < text.len() {
                let rest = &text[whole.start..];
                let input = Input::new(rest).anchored(Anchored::Yes);
                let (re, cache) = self.run.regex(index);
                let Some(full) = captures(re, cache, &input).and_then(|c| pick(&c, rest)) else {
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
            at = if accepted {
                value.end
            } else if value.start > whole.start {
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
}

/// The line of `text` holding byte `k`: from after the `\n` before it to after the `\n` that
/// ends it (or the text's end). `last` is the line found before, reused when `k` is in it.
fn line_around(text: &str, k: usize, last: &mut Range<usize>) -> Range<usize> {
    if !last.contains(&k) {
        let bytes = text.as_bytes();
        let start = memchr::memrchr(b'\n', &bytes[..k]).map_or(0, |p| p + 1);
        let end = memchr::memchr(b'\n', &bytes[k..]).map_or(bytes.len(), |p| k + p + 1);
        *last = start..end;
    }
    last.clone()
}

//! The engine before keywords (issue 32), kept as the reference the keyword search is checked
//! against: one regex of all the rules, leftmost first, run over the whole text, then each rule
//! anchored to tell which it was. Same table, same steps; only how candidates are found differs.

use std::sync::{LazyLock, Mutex};

use regex_automata::meta;
use regex_automata::util::captures::Captures;
use regex_automata::{Input, Span};

use super::rules::RULES;
use super::search::{cache, compile_with, whole_and_value};

/// A value-shape rule: a name for the marker, a pattern, the capture group to replace (0 = the
/// whole match) and a check the captured value must pass.
struct Rule {
    kind: &'static str,
    re: meta::Regex,
    group: usize,
    glue: bool,
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

/// The lazy DFA's cache per regex and cache set ([`Caches`]). The default (2 MiB) is too small for the combined
/// rules: on ordinary source the cache filled and was cleared again and again, and building DFA
/// states was most of the collector's time (BENCHMARKS.md § The tokenizer and the collector).
/// The cache grows only as far as the text needs.
const DFA_CACHE: usize = 16 << 20;

/// As the engine before keywords built it: the search's compiler with this engine's cache.
fn compile(pattern: &str) -> Result<meta::Regex, Box<meta::BuildError>> {
    compile_with(pattern, DFA_CACHE)
}

static COMPILED: LazyLock<Result<Rules, Box<meta::BuildError>>> = LazyLock::new(|| {
    let mut each = Vec::with_capacity(RULES.len());
    for spec in RULES {
        each.push(Rule {
            kind: spec.kind,
            re: compile(spec.pattern)?,
            group: spec.group,
            glue: spec.glue,
            check: spec.check,
        });
    }
    let any = RULES
        .iter()
        .map(|spec| format!("(?:{})", spec.pattern))
        .collect::<Vec<_>>()
        .join("|");
    let anchored = RULES
        .iter()
        .map(|spec| compile(&format!("^(?:{})", spec.pattern)))
        .collect::<Result<_, _>>()?;
    let inner = RULES
        .iter()
        .filter(|spec| spec.kind != GENERIC)
        .map(|spec| format!("(?:{})", spec.pattern))
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

/// The marker of the generic `name = value` rules.
const GENERIC: &str = "password";

/// Bytes past a stretch that the check before searching it sees.
const INNER_SLACK: usize = 512;

/// The accepted values in `text`, as `(start, end, rule)`.
///
/// One pass of the combined regex finds candidates. After a candidate the search goes on from
/// the end of its value when it was replaced (what follows the value in the match may begin
/// the next), else from its value (a rejected `name = value` may hold a
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
            let rule = &rules.each[i];
            let (whole, value) = whole_and_value(&caps, rule.group, rule.glue, here)?;
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
            (true, true) => (value.1, value.1),
            (true, false) => (value.1, whole.0),
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
    let pick = |caps: &Captures, hay: &str| {
        whole_and_value(caps, rule.group, rule.glue, hay)
            .map(|(whole, value)| (whole.range(), value.range()))
    };
    let mut at = region.start;
    while at < region.end {
        let each = cache(&mut caches.each[index], &rule.re);
        let Some(caps) = captures_at(&rule.re, each, hay, at) else {
            break;
        };
        let Some((mut whole, mut value)) = pick(&caps, hay) else {
            break;
        };
        if whole.end == region.end && region.end < text.len() {
            let anchored = &rules.anchored[index];
            let slot = cache(&mut caches.anchored[index], anchored);
            let rest = &text[whole.start..];
            let Some(full) = captures_at(anchored, slot, rest, 0).and_then(|c| pick(&c, rest))
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

/// The accepted values in `text` as the earlier engine found them, as `(start, end, rule)`,
/// sorted; and the bytes its caches held after.
pub(super) fn accepted(text: &str) -> (Vec<(usize, usize, usize)>, usize) {
    with_rules(|rules, caches| {
        let mut spans = Vec::new();
        if is_match(&rules.any, cache(&mut caches.any, &rules.any), text) {
            candidates(rules, caches, text, &mut spans);
        }
        spans.sort_unstable();
        (spans, caches.memory_usage())
    })
    .expect("the rules compile")
}

impl Caches {
    fn memory_usage(&self) -> usize {
        let all = [&self.any, &self.inner]
            .into_iter()
            .chain(&self.anchored)
            .chain(&self.each);
        all.flatten().map(meta::Cache::memory_usage).sum()
    }
}

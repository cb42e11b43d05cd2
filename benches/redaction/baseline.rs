//! The value redaction as it was before it was made linear (frozen copy), kept only as the
//! benchmark's same-run baseline. Quadratic on adversarial input: run it on small inputs only.

use std::sync::LazyLock;

use regex::Regex;

#[derive(Clone)]
struct Rule {
    kind: &'static str,
    re: Regex,
    group: usize,
    check: fn(&str) -> bool,
}

#[derive(Clone)]
struct Rules {
    any: Regex,
    each: Vec<Rule>,
}

/// A rule as written: marker name, pattern, group to replace, check on the value.
type RuleSpec = (&'static str, &'static str, usize, fn(&str) -> bool);

/// Shape rules, most specific first (the combined regex prefers earlier rules).
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
        "google-api-key",
        r"(?-u:\b)AIza[0-9A-Za-z_\-]{35}",
        0,
        always,
    ),
    (
        "google-oauth-token",
        r"(?-u:\b)ya29\.[0-9A-Za-z_\-]{20,}",
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
        "bearer-token",
        r"(?i)(?-u:\b)bearer[ \t]+([A-Za-z0-9_\-.=+/~]{20,})",
        1,
        letters_and_digits,
    ),
    (
        "url-password",
        r"(?i)(?-u:\b)[a-z][a-z0-9+.\-]*://[^\s/:@'\x22]*:([^\s/@'\x22]{3,})@",
        1,
        not_placeholder,
    ),
    (
        "password",
        r#"(?i)[a-z0-9_.\-]*(?:password|passwd|pwd|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|credential)[a-z0-9_.\-]*["']?[ \t]*(?::=|=>|:|=)[ \t]*(?:"([A-Za-z0-9!#%&+\-./:=?@_~]{6,200})"|'([A-Za-z0-9!#%&+\-./:=?@_~]{6,200})')"#,
        FIRST_GROUP,
        secret_looking,
    ),
    (
        "password",
        r#"(?i)[a-z0-9_.\-]*(?:password|passwd|pwd|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|credential)[a-z0-9_.\-]*[ \t]*(?::=|=>|:|=)[ \t]*([A-Za-z0-9!%&+\-./=?@_~]{8,200})[ \t]*(?:[,;]|\r?\n|\z)"#,
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

static COMPILED: LazyLock<Result<Rules, regex::Error>> = LazyLock::new(|| {
    let mut each = Vec::with_capacity(RULES.len());
    for (kind, pattern, group, check) in RULES {
        each.push(Rule {
            kind,
            re: Regex::new(&format!("^(?:{pattern})"))?,
            group: *group,
            check: *check,
        });
    }
    let any = RULES
        .iter()
        .map(|(_, p, _, _)| format!("(?:{p})"))
        .collect::<Vec<_>>()
        .join("|");
    Ok(Rules {
        any: Regex::new(&any)?,
        each,
    })
});

thread_local! {
    /// Each thread's own copy: a regex's match-time caches sit in a pool that only its first
    /// user reaches without a lock, so threads sharing one regex contend.
    static LOCAL: Option<Rules> = COMPILED.as_ref().ok().cloned();
}

/// Replaces secret-looking values; returns the text and how many were replaced.
pub fn redact(text: &str) -> (String, usize) {
    LOCAL.with(|rules| redact_with(rules.as_ref().expect("the rules compile"), text))
}

fn redact_with(rules: &Rules, text: &str) -> (String, usize) {
    if !rules.any.is_match(text) {
        return (text.to_string(), 0);
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut count = 0;
    let mut at = 0;
    while let Some(m) = rules.any.find_at(text, at) {
        at = m.end().max(m.start() + 1);
        // Which rule matched: the first one that matches here (anchored, so each try is short).
        let here = &text[m.start()..];
        let Some((rule, caps)) = rules
            .each
            .iter()
            .find_map(|r| r.re.captures(here).map(|c| (r, c)))
        else {
            continue;
        };
        let value = if rule.group == FIRST_GROUP {
            caps.iter().skip(1).flatten().next()
        } else {
            caps.get(rule.group)
        };
        let Some(value) = value else { continue };
        let (start, end) = (m.start() + value.start(), m.start() + value.end());
        if start < copied {
            continue;
        }
        if !(rule.check)(value.as_str()) {
            // A rejected candidate (a generic `name = value` whose value does not look secret)
            // may cover a specific shape inside it, e.g. `aws_access_key_id=AKIA…`: look
            // again from the next character instead of skipping the whole candidate.
            at = m.start() + here.chars().next().map_or(1, char::len_utf8);
            continue;
        }
        out.push_str(&text[copied..start]);
        out.push_str("[REDACTED:");
        out.push_str(rule.kind);
        out.push(']');
        for _ in 0..memchr::memchr_iter(b'\n', value.as_str().as_bytes()).count() {
            out.push('\n');
        }
        copied = end;
        count += 1;
    }
    out.push_str(&text[copied..]);
    (out, count)
}

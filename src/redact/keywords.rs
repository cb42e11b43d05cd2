//! Which rules a text can match, and where to look: every rule's keywords (literals each of its
//! matches contains, [`super::rules::Spec::keywords`]) found in one Aho-Corasick pass over the
//! text, as the dedicated secret scanners (gitleaks, trufflehog) do. A rule none of whose
//! keywords occurs is never run; the others are run only where a keyword is (their line, or the
//! keyword itself: [`super::rules::Reach`]).
//!
//! Keywords of a `(?i)` rule match in any case. The regex engine folds case by Unicode's simple
//! case folding, under which two characters outside ASCII are an ASCII letter's other case:
//! `ſ` (U+017F) is an `s` and `K` (U+212A, the Kelvin sign) a `k`. So such a keyword is also
//! searched with each `s` and `k` spelled either way, and `(?i)password` finds `paſſword` as the
//! regex does (a test checks that no other character folds to ASCII). A keyword of a rule without
//! `(?i)` must match in its own case.

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use super::rules::Spec;

/// A pattern's owners: each rule it is a keyword of, with the bytes a hit must equal (`None`:
/// any case, for a `(?i)` rule).
type Owners = Vec<(usize, Option<&'static [u8]>)>;

/// The keywords of every rule, in one automaton.
pub(super) struct Keywords {
    automaton: AhoCorasick,
    /// For each of the automaton's patterns, its owners.
    owners: Vec<Owners>,
    rules: usize,
}

/// Where each rule's keywords occur in one text: per rule, `(start, end)` of each occurrence,
/// sorted by start (nothing allocated for a text without any).
pub(super) struct Hits {
    by_rule: Vec<Vec<(usize, usize)>>,
}

/// Whether `pattern` is matched without regard to case (its flags say so for all of it).
pub(super) fn ignores_case(pattern: &str) -> bool {
    pattern.starts_with("(?i)")
}

/// Every spelling of `keyword` that `(?i)` matches, ASCII case aside: each `s` also as `ſ`,
/// each `k` also as `K`.
fn spellings(keyword: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    for c in keyword.chars() {
        let other = match c.to_ascii_lowercase() {
            's' => Some('\u{17F}'),
            'k' => Some('\u{212A}'),
            _ => None,
        };
        let mut next = Vec::with_capacity(out.len() * 2);
        for prefix in &out {
            next.push(format!("{prefix}{c}"));
            if let Some(o) = other {
                next.push(format!("{prefix}{o}"));
            }
        }
        out = next;
    }
    out
}

impl Keywords {
    pub(super) fn new(rules: &[Spec]) -> Result<Keywords, aho_corasick::BuildError> {
        // One pattern per spelling (ASCII case folded by the automaton), shared by the rules
        // that have it.
        let mut patterns: Vec<String> = Vec::new();
        let mut owners: Vec<Owners> = Vec::new();
        for (rule, spec) in rules.iter().enumerate() {
            let any_case = ignores_case(spec.pattern);
            for &keyword in spec.keywords {
                let forms = if any_case {
                    spellings(keyword)
                } else {
                    vec![keyword.to_string()]
                };
                for form in forms {
                    let folded = form.to_ascii_lowercase();
                    let id = match patterns.iter().position(|p| *p == folded) {
                        Some(id) => id,
                        None => {
                            patterns.push(folded);
                            owners.push(Vec::new());
                            patterns.len() - 1
                        }
                    };
                    let exact = (!any_case).then_some(keyword.as_bytes());
                    owners[id].push((rule, exact));
                }
            }
        }
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .kind(Some(AhoCorasickKind::DFA))
            .build(&patterns)?;
        Ok(Keywords {
            automaton,
            owners,
            rules: rules.len(),
        })
    }

    /// Every occurrence of every rule's keywords in `text` (overlapping ones too).
    pub(super) fn find(&self, text: &str) -> Hits {
        let mut by_rule: Vec<Vec<(usize, usize)>> = Vec::new();
        let bytes = text.as_bytes();
        for m in self.automaton.find_overlapping_iter(text) {
            let (start, end) = (m.start(), m.end());
            for &(rule, exact) in &self.owners[m.pattern().as_usize()] {
                if exact.is_none_or(|e| &bytes[start..end] == e) {
                    if by_rule.is_empty() {
                        by_rule.resize(self.rules, Vec::new());
                    }
                    by_rule[rule].push((start, end));
                }
            }
        }
        for hits in &mut by_rule {
            // Reported in order of their ends; a rule's keywords of different lengths may end
            // in another order than they start.
            hits.sort_unstable();
        }
        Hits { by_rule }
    }
}

impl Hits {
    /// Whether no rule's keyword occurs.
    pub(super) fn is_empty(&self) -> bool {
        self.by_rule.is_empty()
    }

    /// The occurrences of rule `rule`'s keywords that start at or after `at`.
    pub(super) fn from(&self, rule: usize, at: usize) -> &[(usize, usize)] {
        let Some(hits) = self.by_rule.get(rule) else {
            return &[];
        };
        &hits[hits.partition_point(|&(s, _)| s < at)..]
    }

    /// Whether a keyword of rule `rule` lies wholly within `range`.
    pub(super) fn within(&self, rule: usize, range: std::ops::Range<usize>) -> bool {
        // Keywords are short: one whose start is in the range but runs past its end is
        // rare, so look at the few that start there.
        self.from(rule, range.start)
            .iter()
            .take_while(|&&(s, _)| s < range.end)
            .any(|&(_, e)| e <= range.end)
    }
}

#[cfg(test)]
mod tests {
    use super::super::rules::{RULES, Reach};
    use super::*;

    fn rule(kind: &str) -> usize {
        RULES.iter().position(|r| r.kind == kind).unwrap()
    }

    fn found(text: &str) -> Vec<&'static str> {
        let hits = Keywords::new(RULES).unwrap().find(text);
        let mut kinds: Vec<&str> = (0..RULES.len())
            .filter(|&i| !hits.from(i, 0).is_empty())
            .map(|i| RULES[i].kind)
            .collect();
        kinds.dedup();
        kinds
    }

    /// A rule's `(?i)` flag is the one the keywords are matched by: no pattern turns case
    /// folding on or off anywhere else.
    #[test]
    fn case_folding_is_set_for_the_whole_pattern_only() {
        for spec in RULES {
            let rest = spec.pattern.strip_prefix("(?i)").unwrap_or(spec.pattern);
            assert!(
                !rest.contains("(?i") && !rest.contains("(?-i") && !rest.contains("(?u"),
                "{}: {}",
                spec.kind,
                spec.pattern
            );
            assert!(!spec.keywords.is_empty(), "{} has no keyword", spec.kind);
        }
    }

    /// The only characters outside ASCII that the regex engine takes for an ASCII letter under
    /// `(?i)` are `ſ` (an `s`) and `K` (a `k`): the keywords' spellings cover the rest.
    #[test]
    fn only_two_characters_fold_to_ascii_letters() {
        let letter = regex::Regex::new(r"(?i)^[a-z]$").unwrap();
        let mut folding = Vec::new();
        for c in (0x80..=0x10FFFFu32).filter_map(char::from_u32) {
            if letter.is_match(c.encode_utf8(&mut [0; 4])) {
                let ascii = (b'a'..=b'z')
                    .map(char::from)
                    .find(|a| {
                        regex::Regex::new(&format!("(?i)^{a}$"))
                            .unwrap()
                            .is_match(c.encode_utf8(&mut [0; 4]))
                    })
                    .unwrap();
                folding.push((c, ascii));
            }
        }
        assert_eq!(folding, [('\u{17F}', 's'), ('\u{212A}', 'k')]);
    }

    #[test]
    fn keywords_of_a_rule_that_ignores_case_match_in_any_case() {
        for text in [
            "Authorization: BEARER x",
            "authorization: bearer x",
            "Authorization: BeArEr x",
        ] {
            assert!(found(text).contains(&"bearer-token"), "{text}");
        }
        // Spelled with the characters Unicode folds to `s` and `k`.
        assert!(found("PAſſWORD = x").contains(&"password"));
        assert!(found("api_\u{212A}ey = x").contains(&"password"));
        assert!(found("ACCOUNT\u{212A}EY=x").contains(&"azure-key"));
    }

    #[test]
    fn keywords_of_a_case_sensitive_rule_match_in_its_case_only() {
        assert!(found("AKIAQ3EGVP7MZL2XK4RT").contains(&"aws-access-key"));
        assert!(!found("akiaq3egvp7mzl2xk4rt").contains(&"aws-access-key"));
        assert!(found("x eyJhbGciOi").contains(&"jwt"));
        assert!(!found("x EYJHBGCIOI").contains(&"jwt"));
        // `token:` is the kubeconfig rule's (case-sensitive); any case is the generic rules'.
        let upper = found("TOKEN: abc");
        assert!(upper.contains(&"password") && !upper.contains(&"token"));
        assert!(found("token: abc").contains(&"token"));
    }

    #[test]
    fn overlapping_keywords_are_all_found() {
        let hits = Keywords::new(RULES)
            .unwrap()
            .find("\"identitytoken\": x, access-key");
        // `"identitytoken"` holds `token` (the token rule and the generic ones).
        assert_eq!(hits.by_rule[rule("docker-auth") + 1], vec![(0, 15)]);
        assert_eq!(hits.by_rule[rule("token")], vec![(9, 14)]);
        assert_eq!(
            hits.by_rule[rule("password")],
            vec![(9, 14), (20, 30)],
            "token, access-key"
        );
        assert!(hits.within(rule("password"), 20..30));
        assert!(!hits.within(rule("password"), 21..30));
        assert_eq!(hits.from(rule("password"), 10), &[(20, 30)]);
    }

    #[test]
    fn only_the_private_key_rule_runs_past_its_line() {
        let multi_line: Vec<&str> = RULES
            .iter()
            .filter(|r| r.reach == Reach::FromKeyword)
            .map(|r| r.kind)
            .collect();
        assert_eq!(multi_line, ["private-key"]);
        // It starts with its keyword.
        let key = &RULES[rule("private-key")];
        assert!(key.pattern.starts_with(key.keywords[0]));
    }
}

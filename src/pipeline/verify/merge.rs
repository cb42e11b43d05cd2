//! The findings of several models merged by verified location (consensus). Findings of
//! different models at the same place become one, `found_by` naming each model in the order they
//! were named: the same file, and lines that overlap (a finding spans its quoted evidence from
//! its line; one about removed lines, which has none, is placed by its quote). A finding whose
//! location did not verify has no known place: it is never merged, stays apart after the
//! verified ones, and names its one model. Two findings of one model are never merged with each
//! other.

use crate::reply::review::Finding;

/// Where a verified finding stands: its file, and its lines or its quote.
#[derive(Debug, PartialEq)]
enum Place<'a> {
    Lines(&'a str, u32, u32),
    Quote(&'a str, String),
    /// About the file as a whole, without a quote: no place to meet another at.
    Nowhere,
}

fn place(f: &Finding) -> Place<'_> {
    let quote_lines = f
        .evidence
        .as_deref()
        .map_or(1, |e| e.trim_matches('\n').lines().count().max(1)) as u32;
    match (f.line, f.evidence.as_deref()) {
        (Some(l), _) => Place::Lines(&f.file, l, l + quote_lines - 1),
        (None, Some(q)) => Place::Quote(&f.file, normalised(q)),
        (None, None) => Place::Nowhere,
    }
}

fn normalised(q: &str) -> String {
    q.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn meets(a: &Place<'_>, b: &Place<'_>) -> bool {
    match (a, b) {
        (Place::Lines(fa, a0, a1), Place::Lines(fb, b0, b1)) => fa == fb && a0 <= b1 && b0 <= a1,
        (Place::Quote(fa, qa), Place::Quote(fb, qb)) => fa == fb && qa == qb,
        _ => false,
    }
}

/// One merged finding in the making: its members, each with the model that gave it.
struct Cluster {
    members: Vec<(usize, Finding)>,
}

/// `answers` (each model's name and its verified findings, in the order the models were named)
/// merged: verified findings once per place, most severe first and, at one severity, those more
/// models found first; then the unverified ones.
pub(crate) fn merge(answers: Vec<(String, Vec<Finding>)>) -> Vec<Finding> {
    let names: Vec<String> = answers.iter().map(|(n, _)| n.clone()).collect();
    let mut clusters: Vec<Cluster> = Vec::new();
    let mut apart: Vec<Finding> = Vec::new();
    for (model, (_, findings)) in answers.into_iter().enumerate() {
        for f in findings {
            if !f.trusted() || f.verified.is_none() {
                apart.push(Finding {
                    found_by: vec![names[model].clone()],
                    ..f
                });
                continue;
            }
            let at = place(&f);
            let joined = clusters.iter_mut().find(|c| {
                c.members.iter().all(|(m, _)| *m != model)
                    && c.members.iter().any(|(_, g)| meets(&place(g), &at))
            });
            match joined {
                Some(c) => c.members.push((model, f)),
                None => clusters.push(Cluster {
                    members: vec![(model, f)],
                }),
            }
        }
    }
    let mut merged: Vec<Finding> = clusters.into_iter().map(|c| one(c, &names)).collect();
    merged.sort_by_key(|f| {
        (
            std::cmp::Reverse(f.severity),
            std::cmp::Reverse(f.found_by.len()),
        )
    });
    apart.sort_by_key(|f| std::cmp::Reverse(f.severity));
    merged.extend(apart);
    merged
}

/// A cluster as one finding: the most severe member's (the first named at a tie), naming every
/// model that found it, saying the severities when they differ, with an edit if any member had
/// a checked one.
fn one(c: Cluster, names: &[String]) -> Finding {
    let mut members = c.members;
    members.sort_by_key(|(m, _)| *m);
    let found_by: Vec<String> = members.iter().map(|(m, _)| names[*m].clone()).collect();
    let severities: Vec<String> = members
        .iter()
        .map(|(m, f)| format!("{} {}", names[*m], f.severity.as_str()))
        .collect();
    let differ = members.windows(2).any(|w| w[0].1.severity != w[1].1.severity);
    let best = members
        .iter()
        .enumerate()
        .max_by_key(|(i, (_, f))| (f.severity, std::cmp::Reverse(*i)))
        .map_or(0, |(i, _)| i);
    let edit = members[best]
        .1
        .edit
        .clone()
        .or_else(|| members.iter().find_map(|(_, f)| f.edit.clone()));
    let mut f = members.swap_remove(best).1;
    if differ {
        f.detail = format!(
            "{} (Severity given: {}.)",
            f.detail.trim_end(),
            severities.join(", ")
        );
    }
    f.edit = edit;
    f.found_by = found_by;
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::review::Severity;

    fn at(sev: Severity, file: &str, line: Option<u32>, evidence: &str, verified: bool) -> Finding {
        Finding {
            evidence: (!evidence.is_empty()).then(|| evidence.to_string()),
            verified: Some(verified),
            ..Finding::new(sev, file.into(), line, format!("{file}:{line:?}"))
        }
    }

    #[test]
    fn the_same_place_is_one_finding_naming_every_model() {
        let a = vec![
            at(Severity::High, "src/lib.rs", Some(10), "let a = 1;\nlet b = 2;", true),
            at(Severity::Low, "src/lib.rs", Some(40), "x()", true),
        ];
        let b = vec![
            // Line 11 is inside a's quote (lines 10 and 11).
            at(Severity::Critical, "src/lib.rs", Some(11), "let b = 2;", true),
            at(Severity::Medium, "src/main.rs", Some(40), "x()", true),
        ];
        let c = vec![at(Severity::Medium, "src/lib.rs", Some(10), "let a = 1;", true)];
        let merged = merge(vec![("a".into(), a), ("b".into(), b), ("c".into(), c)]);
        let summary: Vec<(String, Vec<String>, Severity)> = merged
            .iter()
            .map(|f| (f.file.clone(), f.found_by.clone(), f.severity))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("src/lib.rs".into(), vec!["a".into(), "b".into(), "c".into()], Severity::Critical),
                ("src/main.rs".into(), vec!["b".into()], Severity::Medium),
                ("src/lib.rs".into(), vec!["a".into()], Severity::Low),
            ]
        );
        // The most severe member's text, with the severities each model gave.
        assert_eq!(merged[0].line, Some(11));
        assert!(
            merged[0].detail.ends_with("(Severity given: a high, b critical, c medium.)"),
            "{}",
            merged[0].detail
        );
    }

    #[test]
    fn unverified_findings_stay_apart_and_one_model_never_merges_with_itself() {
        let a = vec![
            at(Severity::High, "src/lib.rs", Some(10), "let a = 1;", true),
            at(Severity::Medium, "src/lib.rs", Some(10), "let a = 1;", true),
        ];
        let b = vec![
            at(Severity::Critical, "src/lib.rs", Some(10), "let a = 1;", false),
            at(Severity::Low, "src/lib.rs", None, "removed();", true),
        ];
        let c = vec![at(Severity::Low, "src/lib.rs", None, "removed();  ", true)];
        let merged = merge(vec![("a".into(), a), ("b".into(), b), ("c".into(), c)]);
        let by: Vec<(Vec<String>, Option<bool>)> = merged
            .iter()
            .map(|f| (f.found_by.clone(), f.verified))
            .collect();
        assert_eq!(
            by,
            vec![
                (vec!["a".to_string()], Some(true)),
                (vec!["a".to_string()], Some(true)),
                (vec!["b".to_string(), "c".to_string()], Some(true)),
                // Unverified: after the verified, whatever its severity, never merged.
                (vec!["b".to_string()], Some(false)),
            ]
        );
        assert_eq!(merged[3].severity, Severity::Critical);
    }
}

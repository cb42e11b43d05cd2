//! `--format codequality`: GitLab's Code Quality report, a JSON array of issues
//! (`description`, `check_name`, `fingerprint`, `severity`, `location.path`,
//! `location.lines.begin`), for a CI job's `artifacts:reports:codequality`.
//!
//! GitLab places each issue at a file of the repository: paths are the findings' checked paths,
//! relative to the same base as SARIF's (the repository's top for precommit). A finding with no
//! location in the project (`locations`: no such file, a name holding a control character, a
//! path outside the roots) cannot be placed and is left out (said on stderr). An unverified
//! finding is kept, its reason in the description. The fingerprint, which GitLab compares between
//! the base and the head of a merge request, is the SHA-256 of the tool, file, line and title.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::reply::review::{Finding, Severity};

/// GitLab's severities: info, minor, major, critical, blocker.
fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "critical",
        Severity::High => "major",
        Severity::Medium => "minor",
        Severity::Low => "info",
    }
}

/// The report of `findings` (their locations already checked), and how many had no location.
pub fn report(findings: &[Finding], tool: &str) -> (Value, usize) {
    let mut issues = Vec::new();
    let mut unplaced = 0;
    for f in findings {
        let file = f.file.trim();
        if file.is_empty() {
            unplaced += 1;
            continue;
        }
        let line = f.line.unwrap_or(1).max(1);
        let mut description = f.title.clone();
        if !f.trusted() {
            let why = f
                .unverified_reason
                .as_deref()
                .unwrap_or("its location could not be checked");
            description.push_str(&format!(" (unverified: {why})"));
        }
        issues.push(json!({
            "type": "issue",
            "description": description,
            "check_name": format!("gemini-{tool}/{}", f.severity.as_str()),
            "categories": ["Bug Risk"],
            "fingerprint": fingerprint(tool, file, line, &f.title),
            "severity": severity(f.severity),
            "location": {"path": file.replace('\\', "/"), "lines": {"begin": line}}
        }));
    }
    (Value::Array(issues), unplaced)
}

/// Stable across runs for the same finding at the same place.
fn fingerprint(tool: &str, file: &str, line: u32, title: &str) -> String {
    let mut h = Sha256::new();
    for part in [tool, file, &line.to_string(), title] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issues_have_gitlabs_shape() {
        let verified = Finding {
            verified: Some(true),
            ..Finding::new(
                Severity::High,
                "src/a.rs".into(),
                Some(7),
                "Off by one".into(),
            )
        };
        let unverified = Finding {
            verified: Some(false),
            unverified_reason: Some("its quoted evidence is not in `src/b.rs` as sent".into()),
            ..Finding::new(Severity::Critical, "src/b.rs".into(), None, "Leak".into())
        };
        let nowhere = Finding::new(Severity::Low, String::new(), None, "Style".into());
        let (report, unplaced) = report(&[verified.clone(), unverified, nowhere], "precommit");
        assert_eq!(unplaced, 1);
        let issues = report.as_array().unwrap();
        assert_eq!(issues.len(), 2);
        for issue in issues {
            for key in ["description", "check_name", "fingerprint", "severity"] {
                assert!(
                    issue[key].as_str().is_some_and(|s| !s.is_empty()),
                    "{key}: {issue}"
                );
            }
            assert!(issue["location"]["path"].is_string());
            assert!(issue["location"]["lines"]["begin"].as_u64().unwrap() >= 1);
            assert_eq!(issue["fingerprint"].as_str().unwrap().len(), 64);
        }
        assert_eq!(issues[0]["severity"], "major");
        assert_eq!(issues[0]["location"]["path"], "src/a.rs");
        assert_eq!(issues[0]["location"]["lines"]["begin"], 7);
        assert_eq!(issues[0]["description"], "Off by one");
        assert_eq!(issues[1]["severity"], "critical");
        assert_eq!(issues[1]["location"]["lines"]["begin"], 1);
        assert_eq!(
            issues[1]["description"],
            "Leak (unverified: its quoted evidence is not in `src/b.rs` as sent)"
        );
        // Stable for the same finding, different for another line or tool.
        let (again, _) = super::report(std::slice::from_ref(&verified), "precommit");
        assert_eq!(again[0]["fingerprint"], issues[0]["fingerprint"]);
        let moved = Finding {
            line: Some(8),
            ..verified.clone()
        };
        let (moved, _) = super::report(&[moved], "precommit");
        assert_ne!(moved[0]["fingerprint"], issues[0]["fingerprint"]);
        let (other, _) = super::report(&[verified], "codereview");
        assert_ne!(other[0]["fingerprint"], issues[0]["fingerprint"]);
    }
}

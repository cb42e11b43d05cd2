//! SARIF 2.1.0 output of a review, for code-scanning UIs (GitHub code scanning, GitLab, IDEs).
//!
//! Written with `serde_json` rather than a SARIF crate: the subset needed (one run, four rules —
//! one per severity —, results with a location) is a few dozen lines, and the generated SARIF
//! type crates are large for what they add. The integration tests check every field the 2.1.0
//! schema requires.

use std::path::Path;

use serde_json::{Value, json};

use crate::tools::reply::Finished;
use crate::tools::review::{Finding, Severity};

pub const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// Most severe first: the rule index of a severity is its position here.
const SEVERITIES: [Severity; 4] = [
    Severity::Critical,
    Severity::High,
    Severity::Medium,
    Severity::Low,
];

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Critical | Severity::High => "error",
        Severity::Medium => "warning",
        Severity::Low => "note",
    }
}

fn rule_id(tool: &str, s: Severity) -> String {
    format!("gemini-{tool}/{}", s.as_str())
}

/// The SARIF log of one review. `root` is the project root paths are relative to.
pub fn log(reply: &Finished, tool: &str, root: &Path) -> Value {
    let rules: Vec<Value> = SEVERITIES
        .iter()
        .map(|&s| {
            json!({
                "id": rule_id(tool, s),
                "name": format!("{}Finding", capitalise(s.as_str())),
                "shortDescription": {"text": format!("A {} finding of Gemini's {tool} review", s.as_str())},
                "fullDescription": {"text": format!("Gemini's {tool} review reported an issue it rates {}; the message says what and how to fix it.", s.as_str())},
                "defaultConfiguration": {"level": level(s)},
                "properties": {"severity": s.as_str()}
            })
        })
        .collect();
    let results: Vec<Value> = reply
        .findings()
        .iter()
        .map(|f| result(f, tool, root))
        .collect();
    let mut properties = serde_json::Map::new();
    properties.insert("status".into(), json!(reply.status()));
    if let Some(v) = reply.verdict() {
        properties.insert("verdict".into(), json!(v.as_str()));
    }
    if let Some(id) = reply.continuation_id() {
        properties.insert("continuation_id".into(), json!(id));
    }
    if let Some(m) = reply.model() {
        properties.insert("model".into(), json!(m));
    }
    json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "gemini-mcp",
                "version": env!("CARGO_PKG_VERSION"),
                "semanticVersion": env!("CARGO_PKG_VERSION"),
                "rules": rules
            }},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": dir_uri(root)}},
            "columnKind": "unicodeCodePoints",
            "results": results,
            "properties": properties
        }]
    })
}

fn result(f: &Finding, tool: &str, root: &Path) -> Value {
    let index = SEVERITIES
        .iter()
        .position(|&s| s == f.severity)
        .unwrap_or(0);
    let mut text = f.title.clone();
    if f.detail != f.title {
        text.push_str("\n\n");
        text.push_str(&f.detail);
    }
    if let Some(fix) = &f.fix {
        text.push_str("\n\nFix: ");
        text.push_str(fix);
    }
    let mut r = json!({
        "ruleId": rule_id(tool, f.severity),
        "ruleIndex": index,
        "level": level(f.severity),
        "message": {"text": text},
        "properties": {"severity": f.severity.as_str(), "title": f.title}
    });
    if let Some(location) = artifact(&f.file, root) {
        // SARIF needs a region for the result to be placed; a finding without a line is placed
        // at the top of its file and says so in its properties.
        let line = f.line.unwrap_or(1).max(1);
        r["locations"] = json!([{"physicalLocation": {
            "artifactLocation": location,
            "region": {"startLine": line}
        }}]);
        if f.line.is_none() {
            r["properties"]["lineUnknown"] = json!(true);
        }
    }
    r
}

/// The artifact location of a finding's file: relative to the project root when it can be.
fn artifact(file: &str, root: &Path) -> Option<Value> {
    let file = file.trim();
    if file.is_empty() {
        return None;
    }
    let path = Path::new(file);
    // Locations were checked against the roots (`locations`); this only never writes a URI
    // that leaves %SRCROOT%, whatever it is given.
    if super::locations::has_scheme(file)
        || path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return None;
    }
    if path.is_absolute() {
        let rel = path.strip_prefix(root).ok()?;
        return Some(json!({"uri": encode(&rel.to_string_lossy()), "uriBaseId": "%SRCROOT%"}));
    }
    let rel = file.trim_start_matches("./");
    Some(json!({"uri": encode(rel), "uriBaseId": "%SRCROOT%"}))
}

fn dir_uri(root: &Path) -> String {
    let mut s = format!("file://{}", encode(&root.to_string_lossy()));
    if !s.ends_with('/') {
        s.push('/');
    }
    s
}

/// Percent-encodes what a URI path may not hold as is (RFC 3986: unreserved, sub-delims, `/`,
/// `:`, `@` stay).
fn encode(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.replace('\\', "/").bytes() {
        match b {
            b'A'..=b'Z'
            | b'a'..=b'z'
            | b'0'..=b'9'
            | b'-'
            | b'.'
            | b'_'
            | b'~'
            | b'/'
            | b'!'
            | b'$'
            | b'&'
            | b'\''
            | b'('
            | b')'
            | b'*'
            | b'+'
            | b','
            | b';'
            | b'='
            | b':'
            | b'@' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

// The root `/proj` is a Unix absolute path (its URI `file:///proj/`); on Windows the same with
// `C:\proj` and `file:///C:/proj/`.
#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::tools::reply::{Reply, ReviewBody};

    fn finding(severity: Severity, file: &str, line: Option<u32>) -> Finding {
        Finding {
            detail: "panics on empty input".into(),
            fix: Some("use get()".into()),
            ..Finding::new(severity, file.into(), line, "Unchecked index".into())
        }
    }

    #[test]
    fn results_carry_rule_level_message_and_location() {
        let reply = Reply::review(ReviewBody {
            summary: String::new(),
            findings: vec![
                finding(Severity::High, "src/my file.rs", Some(12)),
                finding(Severity::Low, "/proj/lib/x.rs", None),
                finding(Severity::Medium, "", None),
                finding(Severity::High, "/etc/shadow", Some(1)),
                finding(Severity::High, "file:///etc/shadow", Some(1)),
                finding(Severity::High, "../../etc/passwd", Some(1)),
            ],
            verdict: None,
            filtered_out: 0,
            min: Severity::Low,
        })
        .finish(None);
        let log = log(&reply, "precommit", Path::new("/proj"));
        assert_eq!(log["version"], "2.1.0");
        let run = &log["runs"][0];
        assert_eq!(run["tool"]["driver"]["rules"].as_array().unwrap().len(), 4);
        assert_eq!(
            run["originalUriBaseIds"]["%SRCROOT%"]["uri"],
            "file:///proj/"
        );
        let r = &run["results"];
        assert_eq!(r[0]["ruleId"], "gemini-precommit/high");
        assert_eq!(r[0]["ruleIndex"], 1);
        assert_eq!(
            run["tool"]["driver"]["rules"][1]["id"],
            "gemini-precommit/high"
        );
        assert_eq!(r[0]["level"], "error");
        let loc = &r[0]["locations"][0]["physicalLocation"];
        assert_eq!(loc["artifactLocation"]["uri"], "src/my%20file.rs");
        assert_eq!(loc["region"]["startLine"], 12);
        assert!(
            r[0]["message"]["text"]
                .as_str()
                .unwrap()
                .contains("Fix: use get()")
        );
        assert_eq!(r[1]["level"], "note");
        assert_eq!(
            r[1]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            "lib/x.rs"
        );
        assert_eq!(r[1]["properties"]["lineUnknown"], true);
        assert!(r[2].get("locations").is_none());
        // Never a location outside %SRCROOT%; the finding stays.
        for outside in &r.as_array().unwrap()[3..] {
            assert!(outside.get("locations").is_none(), "{outside}");
            assert_eq!(outside["level"], "error");
        }
    }
}

//! SARIF 2.1.0 output of a review, for code-scanning UIs (GitHub code scanning, GitLab, IDEs).
//!
//! Written with `serde_json` rather than a SARIF crate: the subset needed (one run, four rules —
//! one per severity —, results with a location, fixes) is a few dozen lines, and the generated
//! SARIF type crates are large for what they add. The tests validate it against the OASIS 2.1.0
//! schema (`fixtures/sarif/`).
//!
//! A finding whose location could not be verified carries `properties.verified: false` and its
//! `unverified_reason`, and a lower `rank` (SARIF's 0–100 priority): a verified (or unchecked)
//! finding ranks by severity — critical 90, high 70, medium 50, low 30 —, an unverified one a
//! quarter of that (22.5, 17.5, 12.5, 7.5), below every verified finding. A finding moved to
//! where its evidence is keeps the line Gemini gave in `properties.line_given`. A checked edit is
//! a `fix`: one artifact change replacing the region of `old` (lines and columns in UTF-16 code
//! units, the run's explicit `columnKind`, counted in the file as read by [`super::placed_edits`]) by
//! `new`.

use std::path::Path;

use serde_json::{Value, json};

use super::placed_edits::{Edits, FileEdits, Placed, position};
use crate::reply::Finished;
use crate::reply::review::{Finding, Severity};

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
pub fn log(reply: &Finished, tool: &str, root: &Path, edits: &Edits) -> Value {
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
        .enumerate()
        .map(|(i, f)| {
            let mut r = result(f, tool, root);
            if let Some(fix) = edits.of(i).and_then(|(file, e)| fix(f, file, e, root)) {
                r["fixes"] = json!([fix]);
            }
            r
        })
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
            "columnKind": "utf16CodeUnits",
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
        "rank": rank(f),
        "message": {"text": text},
        "properties": {"severity": f.severity.as_str(), "title": f.title}
    });
    if !f.trusted() {
        r["properties"]["verified"] = json!(false);
        if let Some(why) = &f.unverified_reason {
            r["properties"]["unverified_reason"] = json!(why);
        }
    }
    if let Some(given) = f.line_given {
        r["properties"]["line_given"] = json!(given);
    }
    if !f.found_by.is_empty() {
        // A consensus: the models that reported it at this place.
        r["properties"]["found_by"] = json!(f.found_by);
    }
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

/// SARIF's `rank` (0–100) of a finding: by severity, and a quarter of that when unverified.
fn rank(f: &Finding) -> f64 {
    let by_severity = match f.severity {
        Severity::Critical => 90.0,
        Severity::High => 70.0,
        Severity::Medium => 50.0,
        Severity::Low => 30.0,
    };
    if f.trusted() {
        by_severity
    } else {
        by_severity / 4.0
    }
}

/// A checked edit as a SARIF `fix`: the region of `old` in the file, replaced by `new`.
fn fix(f: &Finding, file: &FileEdits, e: &Placed, root: &Path) -> Option<Value> {
    let location = artifact(file.path.to_str()?, root)?;
    let (start_line, start_column) = position(&file.text, e.start, false);
    let (end_line, end_column) = position(&file.text, e.end, true);
    Some(json!({
        "description": {"text": f.fix.clone().unwrap_or_else(|| format!("Fix: {}", f.title))},
        "artifactChanges": [{
            "artifactLocation": location,
            "replacements": [{
                "deletedRegion": {
                    "startLine": start_line,
                    "startColumn": start_column,
                    "endLine": end_line,
                    "endColumn": end_column
                },
                "insertedContent": {"text": e.new}
            }]
        }]
    }))
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

/// The `file:` URI of a directory: `file:///home/x/`, `file:///C:/Users/x/` (a Windows path
/// without its `\\?\`), `file://server/share/` (a network path).
fn dir_uri(root: &Path) -> String {
    let path = encode(&crate::collector::sandbox::shown(root).to_string_lossy());
    let mut s = if path.starts_with("//") {
        format!("file:{path}")
    } else if path.starts_with('/') {
        format!("file://{path}")
    } else {
        format!("file:///{path}")
    };
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::reply::review::Edit;
    use crate::reply::{Reply, ReviewBody};

    /// What the OASIS SARIF 2.1.0 schema (vendored: `fixtures/sarif/`) finds wrong with `log`.
    pub(crate) fn schema_errors(log: &Value) -> Vec<String> {
        let schema: Value =
            serde_json::from_str(include_str!("../../fixtures/sarif/sarif-schema-2.1.0.json"))
                .unwrap();
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft4)
            .should_validate_formats(true)
            .build(&schema)
            .expect("the SARIF schema compiles");
        validator
            .iter_errors(log)
            .map(|e| format!("{e} (at {})", e.instance_path()))
            .collect()
    }

    /// The byte offset of a SARIF line and UTF-16 column in `text`.
    fn offset(text: &str, line: u64, column: u64) -> usize {
        let start: usize = text
            .split_inclusive('\n')
            .take(line as usize - 1)
            .map(str::len)
            .sum();
        let mut units = 0;
        for (i, c) in text[start..].char_indices() {
            if units == column as usize - 1 {
                return start + i;
            }
            units += c.len_utf16();
        }
        assert_eq!(units, column as usize - 1, "column past the text");
        text.len()
    }

    fn edit(file: &str, old: &str, new: &str) -> Option<Edit> {
        Some(Edit {
            file: file.into(),
            old: old.into(),
            new: new.into(),
            applicable: true,
        })
    }

    /// Unverified and re-anchored findings are marked, checked edits become fixes whose regions
    /// (UTF-16 columns, CRLF lines) replace exactly `old`, and the log is valid SARIF 2.1.0.
    #[test]
    fn the_source_root_is_a_file_uri_on_every_platform() {
        assert_eq!(
            dir_uri(Path::new("/home/zoë/p")),
            "file:///home/zo%C3%AB/p/"
        );
        assert_eq!(
            dir_uri(Path::new("C:\\Users\\x\\p")),
            "file:///C:/Users/x/p/"
        );
        assert_eq!(
            dir_uri(Path::new("\\\\server\\share\\p")),
            "file://server/share/p/"
        );
    }

    #[test]
    fn fixes_and_verification_validate_against_the_schema() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("src")).unwrap();
        let lib = "fn f() {\n    let s = \"𝄞é\"; old(s);\n}\n";
        let win = "fn g() {\r\n    a();\r\n    b();\r\n}\r\n";
        std::fs::write(root.join("src/lib.rs"), lib).unwrap();
        std::fs::write(root.join("win.rs"), win).unwrap();
        let collector =
            crate::collector::Collector::new(&crate::config::Config::for_tests(&root).collector())
                .unwrap();
        let findings = vec![
            Finding {
                verified: Some(true),
                edit: edit("src/lib.rs", "old(s);", "new(s);"),
                fix: Some("Call new".into()),
                ..Finding::new(
                    Severity::High,
                    "src/lib.rs".into(),
                    Some(2),
                    "Old call".into(),
                )
            },
            Finding {
                verified: Some(false),
                unverified_reason: Some(
                    "its quoted evidence is not in `src/lib.rs` as sent".into(),
                ),
                ..Finding::new(
                    Severity::Critical,
                    "src/lib.rs".into(),
                    Some(9),
                    "Ghost".into(),
                )
            },
            Finding {
                verified: Some(true),
                line_given: Some(7),
                edit: edit("win.rs", "    a();\r\n    b();\r\n", "    c();\r\n"),
                ..Finding::new(
                    Severity::Medium,
                    "win.rs".into(),
                    Some(2),
                    "Two calls".into(),
                )
            },
            Finding {
                verified: Some(true),
                // Starts inside the first edit's `old`: the later one is left out.
                edit: edit("src/lib.rs", "s);\n}\n", "s);\n}\n// end\n"),
                ..Finding::new(
                    Severity::Low,
                    "src/lib.rs".into(),
                    Some(2),
                    "Overlaps".into(),
                )
            },
        ];
        let reply = Reply::review(ReviewBody {
            summary: String::new(),
            findings,
            verdict: None,
            filtered_out: 0,
            min: Severity::Low,
        })
        .finish(None);
        let edits = crate::cli::placed_edits::gather(reply.findings(), &collector);
        assert_eq!(edits.notes.len(), 1, "{:?}", edits.notes);
        assert!(edits.notes[0].contains("overlaps"), "{:?}", edits.notes);
        let log = log(&reply, "codereview", &root, &edits);
        let errors = schema_errors(&log);
        assert!(errors.is_empty(), "{errors:#?}");
        let run = &log["runs"][0];
        assert_eq!(run["columnKind"], "utf16CodeUnits");
        let results = run["results"].as_array().unwrap();
        let by_title = |t: &str| {
            results
                .iter()
                .find(|r| r["properties"]["title"] == t)
                .unwrap_or_else(|| panic!("{t}"))
        };
        let ghost = by_title("Ghost");
        assert_eq!(ghost["properties"]["verified"], false);
        assert!(
            ghost["properties"]["unverified_reason"]
                .as_str()
                .unwrap()
                .contains("not in")
        );
        assert_eq!(ghost["rank"], 22.5);
        assert!(ghost.get("fixes").is_none());
        let old_call = by_title("Old call");
        assert_eq!(old_call["rank"], 70.0);
        assert!(old_call["properties"].get("verified").is_none());
        assert_eq!(old_call["fixes"][0]["description"]["text"], "Call new");
        assert_eq!(by_title("Two calls")["properties"]["line_given"], 7);
        assert!(by_title("Overlaps").get("fixes").is_none());
        // Every unverified finding ranks below every verified one.
        let lowest_verified = results
            .iter()
            .filter(|r| r["properties"].get("verified").is_none())
            .map(|r| r["rank"].as_f64().unwrap())
            .fold(f64::MAX, f64::min);
        assert!(ghost["rank"].as_f64().unwrap() < lowest_verified);
        // Each fix's region, read back in the file, is exactly the edit's `old`.
        for (title, file, text, old, new) in [
            ("Old call", "src/lib.rs", lib, "old(s);", "new(s);"),
            (
                "Two calls",
                "win.rs",
                win,
                "    a();\r\n    b();\r\n",
                "    c();\r\n",
            ),
        ] {
            let change = &by_title(title)["fixes"][0]["artifactChanges"][0];
            assert_eq!(change["artifactLocation"]["uri"], file);
            let r = &change["replacements"][0];
            let d = &r["deletedRegion"];
            let at =
                |l: &str, c: &str| offset(text, d[l].as_u64().unwrap(), d[c].as_u64().unwrap());
            assert_eq!(
                &text[at("startLine", "startColumn")..at("endLine", "endColumn")],
                old,
                "{title}: {d}"
            );
            assert_eq!(r["insertedContent"]["text"], new);
        }
        // The columns count UTF-16 units: `old(s);` starts after `    let s = "𝄞é"; ` (19 units).
        let d = &by_title("Old call")["fixes"][0]["artifactChanges"][0]["replacements"][0]["deletedRegion"];
        assert_eq!(
            (d["startLine"].as_u64(), d["startColumn"].as_u64()),
            (Some(2), Some(20))
        );
        // The schema check can fail.
        let mut broken = log.clone();
        broken["runs"][0]["results"][0]["rank"] = json!(150.0);
        assert!(!schema_errors(&broken).is_empty());
        let mut broken = log.clone();
        broken["runs"][0]["columnKind"] = json!("bytes");
        assert!(!schema_errors(&broken).is_empty());
    }

    #[cfg(unix)]
    fn finding(severity: Severity, file: &str, line: Option<u32>) -> Finding {
        Finding {
            detail: "panics on empty input".into(),
            fix: Some("use get()".into()),
            ..Finding::new(severity, file.into(), line, "Unchecked index".into())
        }
    }

    // The root `/proj` is a Unix absolute path (its URI `file:///proj/`); on Windows the same
    // with `C:\proj` and `file:///C:/proj/`.
    #[cfg(unix)]
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
        let log = log(&reply, "precommit", Path::new("/proj"), &Edits::default());
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

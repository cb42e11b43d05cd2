//! Structured reviews: the JSON schema Gemini answers `codereview` and `precommit` against, a
//! tolerant parser for its answers, the local severity filter, and the Markdown rendering.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::term::one_line;

/// How serious a finding is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Low,
    Medium,
    High,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
            Severity::Critical => "critical",
        }
    }

    fn parse_loose(s: &str) -> Option<Severity> {
        match s.trim().to_ascii_lowercase().as_str() {
            "critical" | "blocker" | "severe" => Some(Severity::Critical),
            "high" | "major" | "error" => Some(Severity::High),
            "medium" | "moderate" | "warning" => Some(Severity::Medium),
            "low" | "minor" | "info" | "nit" | "suggestion" => Some(Severity::Low),
            _ => None,
        }
    }
}

/// The `severity_filter` parameter: the lowest severity to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SeverityFilter {
    Critical,
    High,
    Medium,
    All,
}

impl SeverityFilter {
    pub fn min(self) -> Severity {
        match self {
            SeverityFilter::Critical => Severity::Critical,
            SeverityFilter::High => Severity::High,
            SeverityFilter::Medium => Severity::Medium,
            SeverityFilter::All => Severity::Low,
        }
    }
}

/// One issue found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Finding {
    /// critical, high, medium or low.
    pub severity: Severity,
    /// File path as shown in the request.
    pub file: String,
    /// Line number (1-based), when the finding has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// One line: what is wrong.
    pub title: String,
    /// Why it matters, with evidence.
    pub detail: String,
    /// The concrete change that fixes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// A short verbatim quote of the code the finding is about, as it was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// The fix as one replacement in one file, when it is one (checked before it is offered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit: Option<Edit>,
    /// Whether the location was checked against what was sent and holds (set by the server;
    /// absent on findings made before the check existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    /// Why the location could not be verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unverified_reason: Option<String>,
    /// The line Gemini gave, when the server moved the finding to where its evidence is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_given: Option<u32>,
    /// Why the edit Gemini proposed was dropped (it would not apply as it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit_dropped: Option<String>,
    /// The models that reported it here (consensus).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub found_by: Vec<String>,
}

impl Finding {
    /// A finding as Gemini gives it, before any check.
    pub fn new(severity: Severity, file: String, line: Option<u32>, title: String) -> Finding {
        Finding {
            severity,
            file,
            line,
            detail: title.clone(),
            title,
            fix: None,
            evidence: None,
            edit: None,
            verified: None,
            unverified_reason: None,
            line_given: None,
            edit_dropped: None,
            found_by: Vec::new(),
        }
    }

    /// Verified, or made before verification existed: counted by `--fail-on` without
    /// `--fail-on-unverified`.
    pub fn trusted(&self) -> bool {
        self.verified != Some(false)
    }
}

/// A replacement in one file: `old`, which occurs exactly once in the file, becomes `new`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Edit {
    /// The file, as in the file header.
    pub file: String,
    /// The text replaced, verbatim (it occurs exactly once in the file).
    pub old: String,
    /// What replaces it.
    pub new: String,
    /// Checked against the file on disk: it applies as it is (set by the server).
    #[serde(default)]
    pub applicable: bool,
}

/// Whether the change can be committed as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Nothing blocks the commit.
    Ready,
    /// Fix the findings first.
    NeedsChanges,
    /// Serious problems: do not commit.
    DoNotCommit,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ready => "ready",
            Verdict::NeedsChanges => "needs_changes",
            Verdict::DoNotCommit => "do_not_commit",
        }
    }
}

/// Gemini asks for more material before it can answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Clarification {
    /// What Gemini needs to know.
    pub question: String,
    /// Files Gemini asks to see.
    pub files_needed: Vec<String>,
}

/// A parsed review.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Review {
    pub summary: String,
    pub findings: Vec<Finding>,
    pub verdict: Option<Verdict>,
    pub clarification: Option<Clarification>,
}

/// The JSON Schema sent as `responseJsonSchema` (kept to the subset Gemini accepts).
pub fn response_schema(verdict: bool) -> Value {
    let mut props = json!({
        "summary": {"type": "string", "description": "Two to five sentences: overall assessment and the most important points."},
        "findings": {"type": "array", "description": "Every issue found, most severe first.", "items": {
            "type": "object",
            "properties": {
                "severity": {"type": "string", "enum": ["critical", "high", "medium", "low"]},
                "file": {"type": "string", "description": "Path exactly as in the file header."},
                "line": {"type": "integer", "description": "Line number from the numbered listing."},
                "title": {"type": "string", "description": "One line: what is wrong."},
                "detail": {"type": "string", "description": "Why it matters, with evidence."},
                "fix": {"type": "string", "description": "The concrete change that fixes it."},
                "evidence": {"type": "string", "description": "One to three lines copied verbatim from the listing (without the line numbers) that show the problem; it is checked against the file."},
                "edit": {"type": "object", "description": "Only when the fix is one replacement in one file: `old` copied verbatim from the file (without line numbers, long enough to occur exactly once), `new` the text that replaces it.", "properties": {
                    "file": {"type": "string"},
                    "old": {"type": "string"},
                    "new": {"type": "string"}
                }, "required": ["file", "old", "new"]}
            },
            "required": ["severity", "file", "title", "detail", "evidence"]
        }},
        "clarification": {"type": "object", "description": "Only when you cannot review without more material.", "properties": {
            "question": {"type": "string"},
            "files_needed": {"type": "array", "items": {"type": "string"}}
        }, "required": ["question", "files_needed"]}
    });
    let mut required = vec!["summary", "findings"];
    if verdict {
        props["verdict"] = json!({"type": "string", "enum": ["ready", "needs_changes", "do_not_commit"],
            "description": "ready: nothing blocks the commit; needs_changes: fix first; do_not_commit: serious problems."});
        required.push("verdict");
    }
    json!({"type": "object", "properties": props, "required": required})
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the review is not valid JSON of the expected shape: {0}")]
pub struct ReviewParseError(pub String);

/// Parses Gemini's JSON-mode answer. Tolerant: code fences, text around the object, unknown
/// fields, severities in other words, lines as strings. Findings with no recognisable severity
/// are kept as `medium` rather than dropped.
pub fn parse(text: &str) -> Result<Review, ReviewParseError> {
    let value =
        extract_json(text).ok_or_else(|| ReviewParseError("no JSON object found".into()))?;
    let obj = value
        .as_object()
        .ok_or_else(|| ReviewParseError("the answer is not a JSON object".into()))?;
    let summary = obj
        .get("summary")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim()
        .to_string();
    let mut findings = Vec::new();
    let items = obj
        .get("findings")
        .or_else(|| obj.get("issues"))
        .and_then(Value::as_array);
    if let Some(items) = items {
        for item in items {
            let Some(f) = item.as_object() else { continue };
            // The first of these fields that holds text: Gemini sometimes names them otherwise.
            let s = |keys: &[&str]| {
                keys.iter().find_map(|k| {
                    f.get(*k)
                        .and_then(Value::as_str)
                        .map(str::trim)
                        .filter(|v| !v.is_empty())
                        .map(String::from)
                })
            };
            let severity = s(&["severity", "level", "priority", "risk"])
                .and_then(|v| Severity::parse_loose(&v))
                .unwrap_or(Severity::Medium);
            let line = match f.get("line").or_else(|| f.get("line_number")) {
                Some(Value::Number(n)) => n
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .filter(|n| *n > 0),
                Some(Value::String(v)) => v
                    .trim()
                    .split(['-', ':', ','])
                    .next()
                    .and_then(|n| n.trim().parse().ok())
                    .filter(|n| *n > 0),
                _ => None,
            };
            let title = s(&["title", "issue", "name", "message"]);
            let detail = s(&["detail", "description", "explanation", "message"]);
            let (title, detail) = match (title, detail) {
                (Some(t), Some(d)) => (t, d),
                (Some(t), None) => (t.clone(), t),
                (None, Some(d)) => (d.lines().next().unwrap_or("").to_string(), d),
                (None, None) => continue,
            };
            let file = s(&["file", "path", "filename"]).unwrap_or_default();
            let evidence = f
                .get("evidence")
                .or_else(|| f.get("quote"))
                .or_else(|| f.get("snippet"))
                .and_then(Value::as_str)
                .filter(|e| !e.trim().is_empty())
                .map(String::from);
            let edit = f
                .get("edit")
                .and_then(Value::as_object)
                .and_then(|e| edit_from(e, &file));
            findings.push(Finding {
                detail,
                fix: s(&["fix", "suggestion", "recommendation"]),
                evidence,
                edit,
                ..Finding::new(severity, file, line, title)
            });
        }
    }
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    let verdict = obj.get("verdict").and_then(Value::as_str).and_then(|v| {
        match v.trim().to_ascii_lowercase().as_str() {
            "ready" | "pass" | "approve" => Some(Verdict::Ready),
            "needs_changes" | "needs changes" | "fix_first" => Some(Verdict::NeedsChanges),
            "do_not_commit" | "do not commit" | "block" | "blocked" | "reject" => {
                Some(Verdict::DoNotCommit)
            }
            _ => None,
        }
    });
    let clarification = obj
        .get("clarification")
        .and_then(Value::as_object)
        .or_else(|| {
            (obj.get("status").and_then(Value::as_str) == Some("requires_clarification"))
                .then_some(obj)
        })
        .and_then(clarification_from);
    // Without findings, only a question for more material is a review: anything else (a
    // verdict alone, a status of its own) was not read, and must not pass as "no findings".
    if items.is_none() && clarification.is_none() {
        return Err(ReviewParseError("no `findings` list".into()));
    }
    Ok(Review {
        summary,
        findings,
        verdict,
        clarification,
    })
}

/// An edit as Gemini gives it: `old` and `new` verbatim (no trimming: whitespace is part of
/// the replacement); the finding's file when the edit names none.
fn edit_from(e: &serde_json::Map<String, Value>, file: &str) -> Option<Edit> {
    let text = |k: &str| e.get(k).and_then(Value::as_str).map(String::from);
    let old = text("old").or_else(|| text("old_string"))?;
    let new = text("new").or_else(|| text("new_string"))?;
    if old.is_empty() {
        return None;
    }
    let file = text("file")
        .map(|f| f.trim().to_string())
        .filter(|f| !f.is_empty())
        .unwrap_or_else(|| file.to_string());
    Some(Edit {
        file,
        old,
        new,
        applicable: false,
    })
}

fn clarification_from(o: &serde_json::Map<String, Value>) -> Option<Clarification> {
    let question = o
        .get("question")
        .and_then(Value::as_str)?
        .trim()
        .to_string();
    if question.is_empty() {
        return None;
    }
    let files_needed = o
        .get("files_needed")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    Some(Clarification {
        question,
        files_needed,
    })
}

/// A free-text answer that is only the `requires_clarification` JSON of the system prompts.
pub fn clarification_in_text(text: &str) -> Option<Clarification> {
    let t = text.trim();
    let body = strip_fence(t);
    if !body.starts_with('{') || !body.ends_with('}') {
        return None;
    }
    let v: Value = serde_json::from_str(body).ok()?;
    let o = v.as_object()?;
    if o.get("status").and_then(Value::as_str) != Some("requires_clarification") {
        return None;
    }
    clarification_from(o)
}

fn strip_fence(t: &str) -> &str {
    let t = t.trim();
    if let Some(rest) = t.strip_prefix("```") {
        let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
        if let Some(inner) = rest.strip_suffix("```") {
            return inner.trim();
        }
    }
    t
}

fn extract_json(text: &str) -> Option<Value> {
    let body = strip_fence(text);
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return Some(v);
    }
    let start = body.find('{')?;
    let end = body.rfind('}')?;
    if end <= start {
        return None;
    }
    serde_json::from_str(&body[start..=end]).ok()
}

/// Keeps findings at `min` and above. Returns how many were filtered out.
pub fn filter(review: &mut Review, min: Severity) -> usize {
    let before = review.findings.len();
    review.findings.retain(|f| f.severity >= min);
    before - review.findings.len()
}

/// Renders a review as Markdown for the agent.
pub fn render(review: &Review, filtered_out: usize, min: Severity) -> String {
    render_parts(
        review.verdict,
        &review.summary,
        &review.findings,
        filtered_out,
        min,
    )
}

/// `text` in a fenced block, at the margin (copied as it is: no indentation is added to it),
/// with a fence longer than any run of backticks inside.
fn fenced(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let body = text.strip_suffix('\n').unwrap_or(text);
    format!("{fence}\n{body}\n{fence}\n")
}

/// Where a finding points, as the Markdown cites it: `` `file:line` `` (or `` `file` ``), on one
/// line whatever the file name holds ([`one_line`]: Gemini's text).
pub fn citation(file: &str, line: Option<u32>) -> String {
    let file = one_line(file);
    match line {
        Some(l) => format!("`{file}:{l}`"),
        None => format!("`{file}`"),
    }
}

/// [`render`] from a review's parts (a reply keeps them in its own fields). The fields that stand
/// on one line (file, title, reasons) are kept to it ([`one_line`]); the summary, detail and fix
/// are Markdown of their own lines.
pub fn render_parts(
    verdict: Option<Verdict>,
    summary: &str,
    findings: &[Finding],
    filtered_out: usize,
    min: Severity,
) -> String {
    let mut out = String::new();
    if let Some(v) = verdict {
        out.push_str(&format!("**Verdict: {}**\n\n", v.as_str()));
    }
    if !summary.is_empty() {
        out.push_str(summary);
        out.push_str("\n\n");
    }
    if findings.is_empty() {
        out.push_str("No findings");
        if filtered_out > 0 {
            out.push_str(&format!(" at {} or above", min.as_str()));
        }
        out.push_str(".\n");
    } else {
        out.push_str(&format!("## Findings ({})\n", findings.len()));
        for (i, f) in findings.iter().enumerate() {
            out.push_str(&format!(
                "\n{}. **[{}]** {} {}\n",
                i + 1,
                f.severity.as_str().to_uppercase(),
                citation(&f.file, f.line),
                one_line(&f.title)
            ));
            if let Some(reason) = &f.unverified_reason {
                out.push_str(&format!("   *Unverified: {}.*\n", one_line(reason)));
            } else if let Some(given) = f.line_given {
                out.push_str(&format!(
                    "   *Line corrected from {given} to where the quoted code is.*\n"
                ));
            }
            match f.found_by.as_slice() {
                [] => {}
                [one] => out.push_str(&format!("   *Found by {} only.*\n", one_line(one))),
                many => out.push_str(&format!(
                    "   *Found by {} models: {}.*\n",
                    many.len(),
                    one_line(&many.join(", "))
                )),
            }
            if f.detail != f.title {
                out.push_str(&format!("   {}\n", f.detail.replace('\n', "\n   ")));
            }
            if let Some(fix) = &f.fix {
                out.push_str(&format!("   Fix: {}\n", fix.replace('\n', "\n   ")));
            }
            match (&f.edit, &f.edit_dropped) {
                (Some(e), _) if e.applicable => {
                    out.push_str(&format!(
                        "   Edit (checked: applies as it is) in `{}`, replace:\n{}   with:\n{}",
                        one_line(&e.file),
                        fenced(&e.old),
                        fenced(&e.new)
                    ));
                }
                (_, Some(why)) => {
                    out.push_str(&format!("   (Edit not offered: {}.)\n", one_line(why)));
                }
                _ => {}
            }
        }
    }
    if filtered_out > 0 {
        out.push_str(&format!(
            "\n({filtered_out} finding(s) below {} not shown: severity_filter.)\n",
            min.as_str()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tolerantly_and_sorts() {
        let text = "```json\n{\"summary\":\"ok\",\"findings\":[\
            {\"severity\":\"LOW\",\"file\":\"a.rs\",\"line\":\"12-14\",\"title\":\"nit\",\"detail\":\"d\"},\
            {\"severity\":\"Critical\",\"file\":\"b.rs\",\"line\":3,\"title\":\"bad\",\"detail\":\"worse\",\"fix\":\"f\",\"extra\":1},\
            {\"severity\":\"weird\",\"file\":\"c.rs\",\"description\":\"only a description\"},\
            {\"severity\":\"high\"}],\"verdict\":\"needs_changes\"}\n```";
        let r = parse(text).unwrap();
        assert_eq!(r.summary, "ok");
        assert_eq!(r.verdict, Some(Verdict::NeedsChanges));
        let sev: Vec<_> = r.findings.iter().map(|f| f.severity).collect();
        assert_eq!(
            sev,
            vec![Severity::Critical, Severity::Medium, Severity::Low]
        );
        assert_eq!(r.findings[2].line, Some(12));
        assert_eq!(r.findings[1].title, "only a description");
    }

    #[test]
    fn shapeless_reviews_are_errors_and_other_field_names_are_read() {
        for shapeless in [
            r#"{"summary":"LGTM","status":"approved"}"#,
            r#"{"summary":"","verdict":"do_not_commit"}"#,
            r#"{"summary":"","findings":"none","clarification":{"question":""}}"#,
            r#"{"status":"requires_clarification"}"#,
        ] {
            assert!(parse(shapeless).is_err(), "{shapeless}");
        }
        let r = parse(r#"{"findings":[{"level":"critical","path":"src/db.rs","line_number":4,"message":"SQL built from input","suggestion":"bind it"}]}"#).unwrap();
        assert_eq!(
            r.findings,
            vec![Finding {
                fix: Some("bind it".into()),
                ..Finding::new(
                    Severity::Critical,
                    "src/db.rs".into(),
                    Some(4),
                    "SQL built from input".into()
                )
            }]
        );
        let asks = parse(r#"{"status":"requires_clarification","question":"Which DB?","files_needed":["db.rs"]}"#).unwrap();
        assert!(asks.clarification.is_some() && asks.findings.is_empty());
    }

    #[test]
    fn filter_keeps_at_or_above() {
        let mut r = parse(r#"{"summary":"","findings":[{"severity":"low","file":"a","title":"t","detail":"d"},{"severity":"high","file":"a","title":"t","detail":"d"}]}"#).unwrap();
        assert_eq!(filter(&mut r, Severity::High), 1);
        assert_eq!(r.findings.len(), 1);
        let md = render(&r, 1, Severity::High);
        assert!(
            md.contains("[HIGH]") && md.contains("1 finding(s) below high"),
            "{md}"
        );
    }

    #[test]
    fn clarification_is_recognised() {
        let c = clarification_in_text("```json\n{\"status\":\"requires_clarification\",\"question\":\"Which DB?\",\"files_needed\":[\"db.rs\"]}\n```").unwrap();
        assert_eq!(c.files_needed, vec!["db.rs"]);
        assert!(
            clarification_in_text("Here is {\"status\":\"requires_clarification\"} inline")
                .is_none()
        );
        let r = parse(
            r#"{"summary":"","findings":[],"clarification":{"question":"q","files_needed":[]}}"#,
        )
        .unwrap();
        assert!(r.clarification.is_some());
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(parse("I think it is fine").is_err());
        assert!(parse("[1,2]").is_err());
        assert!(parse(r#"{"summary":"x"}"#).is_err());
    }
}

//! The review rules a team keeps in its repository, as Gemini Code Assist reads them:
//! `.gemini/styleguide.md` (conventions, free text) and `.gemini/config.yaml` (among others the
//! severity threshold, the ignore patterns and the cap on comments), plus the operator's rules
//! (`GEMINI_MCP_REVIEW_RULES`) and the user's own file. Both repository files are project files:
//! the collector reads them through the sandbox, the secret rules and redaction
//! (`Collector::rules_file`); here they are parsed and turned into what the review applies —
//! one section of the system instruction ([`Rules::prompt`]), the threshold and the cap on the
//! findings, and the patterns of files never sent ([`Ignore`]).
//!
//! Of `config.yaml`, what applies to a review we make is applied and the rest is named as not
//! applied (docs/rules.md): `code_review.comment_severity_threshold`,
//! `code_review.max_review_comments` and `ignore_patterns` apply; `have_fun`, `memory_config`,
//! `code_review.disable` and `code_review.pull_request_opened` belong to the Code Assist app's
//! pull-request events and are not read. A value of the wrong type or out of range refuses the
//! review, naming the field and what it takes: a team's threshold silently dropped would pass
//! what the team asked to see.

use std::path::Path;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use serde_json::Value;

/// A severity as `comment_severity_threshold` names it (the review's own severities map onto
/// these one to one; kept here so the collector and the git reader, which apply the ignore
/// patterns, need nothing of the reply).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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
}

/// The team's style guide, relative to the project root.
pub const STYLEGUIDE: &str = ".gemini/styleguide.md";
/// The team's configuration, relative to the project root.
pub const CONFIG: &str = ".gemini/config.yaml";
/// The largest rules file read; a larger one is not applied, and the reply says so.
pub const MAX_RULES_BYTES: u64 = 64 * 1024;

/// Where a set of rules comes from, in the order of precedence (the first wins a conflict).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The server's operator (`GEMINI_MCP_REVIEW_RULES`).
    Operator,
    /// The repository's `.gemini/styleguide.md`.
    Repository,
    /// The user's own file (`<config dir>/gemini-mcp/review-rules.md`).
    User,
}

impl Origin {
    fn title(self) -> &'static str {
        match self {
            Origin::Operator => "The operator's rules",
            Origin::Repository => "The repository's style guide",
            Origin::User => "The user's rules",
        }
    }
}

/// One text of rules, redacted.
#[derive(Debug, Clone)]
pub struct Source {
    pub origin: Origin,
    /// Where it was read, as shown.
    pub shown: String,
    pub text: String,
}

/// A rules file that was found and not applied, with why (too large, a link out of the
/// project, not a regular file, not text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotApplied {
    pub shown: String,
    pub why: String,
}

/// A `config.yaml` that cannot be applied: the field and what it takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {field}: {message}")]
pub struct ConfigError {
    pub file: String,
    pub field: String,
    pub message: String,
}

/// What `config.yaml` asks of a review.
#[derive(Debug, Clone, Default)]
pub struct RepoConfig {
    /// `code_review.comment_severity_threshold`: the least severity reported.
    pub threshold: Option<Severity>,
    /// `code_review.max_review_comments` (`-1` or absent: no cap).
    pub max_findings: Option<usize>,
    /// `ignore_patterns`, as written.
    pub ignore_patterns: Vec<String>,
    /// Those patterns compiled at the project root (`None` when there are none).
    pub ignore: Option<std::sync::Arc<Ignore>>,
    /// The fields it sets that a review of ours does not apply, as dotted paths.
    pub not_read: Vec<String>,
}

/// The severities `comment_severity_threshold` takes, as Code Assist spells them.
const THRESHOLDS: &str = "LOW, MEDIUM, HIGH or CRITICAL";

impl RepoConfig {
    /// Parses `text` (the file shown as `file`), its ignore patterns compiled at `root` (the
    /// project root).
    pub fn parse(file: &str, text: &str, root: &Path) -> Result<RepoConfig, ConfigError> {
        let err = |field: &str, message: String| ConfigError {
            file: file.to_string(),
            field: field.to_string(),
            message,
        };
        let value: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            yaml_serde::from_str(text).map_err(|e| {
                err(
                    "(the file)",
                    format!("is not YAML Code Assist could read ({e})"),
                )
            })?
        };
        let top = match value {
            Value::Null => return Ok(RepoConfig::default()),
            Value::Object(m) => m,
            other => {
                return Err(err(
                    "(the file)",
                    format!("must be a mapping of fields, not {}", kind(&other)),
                ));
            }
        };
        let mut config = RepoConfig::default();
        for (key, v) in &top {
            match key.as_str() {
                "ignore_patterns" => config.ignore_patterns = patterns(v, &err)?,
                "code_review" => config.code_review(v, &err)?,
                // Code Assist's app fields (`have_fun`, `memory_config`), or one it may add.
                k => config.not_read.push(k.to_string()),
            }
        }
        // The patterns must compile; the error names the one that does not.
        if !config.ignore_patterns.is_empty() {
            let ignore =
                Ignore::new(root, &config.ignore_patterns).map_err(|e| err("ignore_patterns", e))?;
            config.ignore = Some(std::sync::Arc::new(ignore));
        }
        Ok(config)
    }

    fn code_review(
        &mut self,
        v: &Value,
        err: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        let m = match v {
            Value::Null => return Ok(()),
            Value::Object(m) => m,
            other => {
                return Err(err(
                    "code_review",
                    format!("must be a mapping, not {}", kind(other)),
                ));
            }
        };
        for (key, v) in m {
            match key.as_str() {
                "comment_severity_threshold" => {
                    let field = "code_review.comment_severity_threshold";
                    let Value::String(s) = v else {
                        return Err(err(field, format!("must be {THRESHOLDS}, not {}", kind(v))));
                    };
                    self.threshold = Some(threshold(s).ok_or_else(|| {
                        err(field, format!("\"{s}\" is not a severity; use {THRESHOLDS}"))
                    })?);
                }
                "max_review_comments" => {
                    let field = "code_review.max_review_comments";
                    let n = v.as_i64().ok_or_else(|| {
                        err(
                            field,
                            format!("must be a whole number (-1 for no cap), not {}", kind(v)),
                        )
                    })?;
                    self.max_findings = match n {
                        -1 => None,
                        n if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                        n => {
                            return Err(err(
                                field,
                                format!("{n} is not a cap; use a number of 0 or more, or -1 for none"),
                            ));
                        }
                    };
                }
                // `disable` and `pull_request_opened`: the app's pull-request events.
                k => self.not_read.push(format!("code_review.{k}")),
            }
        }
        Ok(())
    }
}

fn threshold(s: &str) -> Option<Severity> {
    match s.trim().to_ascii_uppercase().as_str() {
        "LOW" => Some(Severity::Low),
        "MEDIUM" => Some(Severity::Medium),
        "HIGH" => Some(Severity::High),
        "CRITICAL" => Some(Severity::Critical),
        _ => None,
    }
}

fn patterns(
    v: &Value,
    err: &impl Fn(&str, String) -> ConfigError,
) -> Result<Vec<String>, ConfigError> {
    let field = "ignore_patterns";
    match v {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, p)| match p {
                Value::String(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
                other => Err(err(
                    &format!("{field}[{i}]"),
                    format!("must be a glob pattern, not {}", kind(other)),
                )),
            })
            .collect(),
        other => Err(err(
            field,
            format!("must be a list of glob patterns, not {}", kind(other)),
        )),
    }
}

/// What a YAML value is, for an error.
fn kind(v: &Value) -> String {
    match v {
        Value::Null => "empty".into(),
        Value::Bool(b) => format!("{b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the text \"{}\"", s.chars().take(40).collect::<String>()),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "a mapping".into(),
    }
}

/// The files a team's `ignore_patterns` keep out of every review: never read, never sent,
/// named among the skipped. Patterns are read as lines of a `.gitignore` at the project root
/// (a pattern without a slash matches a name at any depth; `dir/` a directory; `!` re-includes).
#[derive(Debug, Clone)]
pub struct Ignore {
    root: std::path::PathBuf,
    matcher: Gitignore,
}

impl Ignore {
    /// The patterns as rules at `root` (the project root, canonical).
    pub fn new(root: &Path, patterns: &[String]) -> Result<Ignore, String> {
        let mut b = GitignoreBuilder::new(root);
        // File names are case-insensitive on Windows: so are the patterns there.
        b.case_insensitive(cfg!(windows))
            .map_err(|e| e.to_string())?;
        for p in patterns {
            b.add_line(None, p)
                .map_err(|e| format!("\"{p}\" is not a pattern: {e}"))?;
        }
        let matcher = b.build().map_err(|e| e.to_string())?;
        Ok(Ignore {
            root: root.to_path_buf(),
            matcher,
        })
    }

    /// Whether the file shown as `shown` (relative to the project root, as the collector shows
    /// it) is ignored.
    pub fn ignores_shown(&self, shown: &str) -> bool {
        self.ignores(&self.root.join(shown))
    }

    /// Whether the file at `path` (absolute) is ignored; a path outside the root never is.
    pub fn ignores(&self, path: &Path) -> bool {
        let Ok(rel) = path.strip_prefix(&self.root) else {
            return false;
        };
        if rel.as_os_str().is_empty() {
            return false;
        }
        self.matcher
            .matched_path_or_any_parents(rel, false)
            .is_ignore()
    }
}

/// Every rule a review applies: the texts in their order of precedence, the repository's
/// configuration, and what was found but not applied.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    pub sources: Vec<Source>,
    pub config: Option<(String, RepoConfig)>,
    pub ignore: Option<std::sync::Arc<Ignore>>,
    pub not_applied: Vec<NotApplied>,
    /// Secret-looking values replaced in the texts.
    pub redactions: usize,
}

impl Rules {
    /// The system instruction's section of rules, or `None` when there are none.
    pub fn prompt(&self) -> Option<String> {
        if self.sources.is_empty() {
            return None;
        }
        let mut s = String::from(
            "# Review rules\n\nApply these rules in this review as well as the ones above. A finding that breaks one names the rule it breaks. Where they conflict, the operator's rules win over the repository's, and the repository's over the user's.\n",
        );
        for src in &self.sources {
            s.push_str(&format!("\n## {} ({})\n\n", src.origin.title(), src.shown));
            s.push_str(src.text.trim_end());
            s.push('\n');
        }
        Some(s)
    }

    /// The least severity the repository reports, if it sets one.
    pub fn threshold(&self) -> Option<Severity> {
        self.config.as_ref().and_then(|(_, c)| c.threshold)
    }

    /// The cap on the findings reported, if the repository sets one.
    pub fn max_findings(&self) -> Option<usize> {
        self.config.as_ref().and_then(|(_, c)| c.max_findings)
    }

    /// The reply's note of which rules applied, and which were found and not applied.
    pub fn note(&self) -> Option<String> {
        let mut applied: Vec<String> = self.sources.iter().map(|s| s.shown.clone()).collect();
        if let Some((shown, c)) = &self.config {
            let mut what = Vec::new();
            if let Some(t) = c.threshold {
                what.push(format!("threshold {}", t.as_str()));
            }
            if let Some(n) = c.max_findings {
                what.push(format!("at most {n} finding(s)"));
            }
            if !c.ignore_patterns.is_empty() {
                what.push(format!("{} ignore pattern(s)", c.ignore_patterns.len()));
            }
            if !c.not_read.is_empty() {
                what.push(format!("not applied here: {}", c.not_read.join(", ")));
            }
            applied.push(if what.is_empty() {
                shown.clone()
            } else {
                format!("{shown} ({})", what.join("; "))
            });
        }
        let mut parts = Vec::new();
        if !applied.is_empty() {
            parts.push(format!("Review rules applied: {}.", applied.join(", ")));
        }
        for n in &self.not_applied {
            parts.push(format!("{} was not applied: {}.", n.shown, n.why));
        }
        if self.redactions > 0 {
            parts.push(format!(
                "{} secret-looking value(s) in the rules were replaced by a marker.",
                self.redactions
            ));
        }
        (!parts.is_empty()).then(|| parts.join(" "))
    }
}

/// Keeps the `max` most severe of `findings` (the order kept among equals); how many were
/// dropped.
pub fn cap<T, S: Ord>(findings: &mut Vec<T>, max: usize, severity: impl Fn(&T) -> S) -> usize {
    if findings.len() <= max {
        return 0;
    }
    let mut order: Vec<usize> = (0..findings.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(severity(&findings[i])));
    let mut keep = vec![false; findings.len()];
    for &i in order.iter().take(max) {
        keep[i] = true;
    }
    let before = findings.len();
    let mut k = keep.into_iter();
    findings.retain(|_| k.next().unwrap_or(false));
    before - findings.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<RepoConfig, ConfigError> {
        RepoConfig::parse(CONFIG, text, Path::new("/project"))
    }

    #[test]
    fn code_assists_own_example_is_read() {
        let c = parse(
            "have_fun: false\nmemory_config:\n  disabled: false\ncode_review:\n  disable: false\n  comment_severity_threshold: HIGH\n  max_review_comments: 5\n  pull_request_opened:\n    help: false\n    summary: true\n    code_review: true\n    include_drafts: true\nignore_patterns: [\"generated/**\", \"*.lock\"]\n",
        )
        .unwrap();
        assert_eq!(c.threshold, Some(Severity::High));
        assert_eq!(c.max_findings, Some(5));
        assert_eq!(c.ignore_patterns, ["generated/**", "*.lock"]);
        assert_eq!(
            c.not_read,
            [
                "have_fun",
                "memory_config",
                "code_review.disable",
                "code_review.pull_request_opened"
            ]
        );
        let unlimited = parse("code_review:\n  max_review_comments: -1\n").unwrap();
        assert_eq!(unlimited.max_findings, None);
        assert!(parse("").unwrap().threshold.is_none());
    }

    #[test]
    fn a_bad_value_names_its_field_and_what_it_takes() {
        let cases = [
            (
                "code_review:\n  comment_severity_threshold: SEVERE\n",
                "code_review.comment_severity_threshold",
                "LOW, MEDIUM, HIGH or CRITICAL",
            ),
            (
                "code_review:\n  max_review_comments: -4\n",
                "code_review.max_review_comments",
                "-1 for none",
            ),
            (
                "code_review:\n  max_review_comments: many\n",
                "code_review.max_review_comments",
                "whole number",
            ),
            ("ignore_patterns: \"*.lock\"\n", "ignore_patterns", "a list"),
            ("ignore_patterns: [3]\n", "ignore_patterns[0]", "glob pattern"),
            ("ignore_patterns: [\"a/{b\"]\n", "ignore_patterns", "not a pattern"),
            ("- a\n- b\n", "(the file)", "mapping"),
            ("code_review: [\n", "(the file)", "not YAML"),
        ];
        for (text, field, says) in cases {
            let e = parse(text).expect_err(text);
            assert_eq!(e.field, field, "{text}");
            assert!(e.to_string().contains(says), "{text}: {e}");
            assert!(e.to_string().starts_with(CONFIG), "{e}");
        }
    }

    #[test]
    fn an_alias_bomb_is_refused_not_expanded() {
        // Nine levels of nine aliases: 9^9 strings if expanded.
        let mut doc = String::from("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
        let names = ["b", "c", "d", "e", "f", "g", "h", "i"];
        let mut prev = "a";
        for n in names {
            doc.push_str(&format!("{n}: &{n} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"));
            prev = n;
        }
        doc.push_str("ignore_patterns: *i\n");
        assert!(doc.len() < MAX_RULES_BYTES as usize);
        let e = parse(&doc).expect_err("refused");
        assert!(e.to_string().contains(CONFIG), "{e}");
    }

    #[test]
    fn patterns_match_as_a_gitignore_at_the_root() {
        let root = Path::new("/project");
        let i = Ignore::new(
            root,
            &["generated/".into(), "*.lock".into(), "docs/**/*.md".into(), "!docs/keep.md".into()],
        )
        .unwrap();
        assert!(i.ignores(Path::new("/project/generated/a.rs")));
        assert!(i.ignores(Path::new("/project/sub/Cargo.lock")));
        assert!(i.ignores(Path::new("/project/docs/a/b.md")));
        assert!(!i.ignores(Path::new("/project/docs/keep.md")));
        assert!(!i.ignores(Path::new("/project/src/lib.rs")));
        assert!(!i.ignores(Path::new("/elsewhere/generated/a.rs")));
    }

    #[test]
    fn the_cap_keeps_the_most_severe_in_their_order() {
        let mut f = vec![
            Severity::Low,
            Severity::Critical,
            Severity::Medium,
            Severity::High,
            Severity::Critical,
        ];
        assert_eq!(cap(&mut f, 3, |s| *s), 2);
        assert_eq!(f, [Severity::Critical, Severity::High, Severity::Critical]);
        assert_eq!(cap(&mut f, 3, |s| *s), 0);
    }

    #[test]
    fn the_prompt_holds_every_source_in_precedence_order() {
        let rules = Rules {
            sources: vec![
                Source {
                    origin: Origin::Operator,
                    shown: "/etc/rules.md".into(),
                    text: "OPERATOR-RULE".into(),
                },
                Source {
                    origin: Origin::Repository,
                    shown: STYLEGUIDE.into(),
                    text: "TEAM-RULE".into(),
                },
            ],
            ..Rules::default()
        };
        let p = rules.prompt().unwrap();
        assert!(p.find("OPERATOR-RULE").unwrap() < p.find("TEAM-RULE").unwrap());
        assert!(p.contains(STYLEGUIDE));
        assert!(Rules::default().prompt().is_none());
        assert!(rules.note().unwrap().contains(STYLEGUIDE));
    }
}

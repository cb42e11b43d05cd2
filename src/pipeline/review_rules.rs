//! The review rules step: before a review (`codereview`, `precommit`, `analyze`) is built, the
//! rules it follows are gathered in their order of precedence — the operator's file
//! (`GEMINI_MCP_REVIEW_RULES`), the repository's `.gemini/styleguide.md` and `.gemini/config.yaml`
//! (read by the collector, as the project files they are), the user's own file — and handed to
//! the prompt in one place (`crate::rules::Rules::prompt`). A review against a base
//! (`compare_to`, the Action's pull requests) reads the repository's files as the base commit
//! holds them. Other tools follow none.

use std::path::{Path, PathBuf};

use super::blocking::blocking;
use super::services::Services;
use crate::collector::Collector;
use crate::collector::rules_file::RulesFile;
use crate::rules::{
    CONFIG, ConfigError, MAX_RULES_BYTES, NotApplied, Origin, RepoConfig, Rules, STYLEGUIDE,
    Source,
};
use crate::tools::{Plan, Tool, ToolError};

/// The rules `plan` follows; a repository configuration that cannot be applied refuses it.
pub(super) async fn gather(services: &Services, plan: &Plan) -> Result<Rules, ToolError> {
    if !matches!(plan.tool, Tool::CodeReview | Tool::Precommit | Tool::Analyze) {
        return Ok(Rules::default());
    }
    let collector = services.collector.clone();
    let calls = services.config.calls.clone();
    // A review against a base follows the base's rules: the change under review cannot loosen
    // its own review.
    let base = plan.git.as_ref().and_then(|g| g.compare_to.clone());
    Ok(blocking(move || read(&collector, &calls, base.as_deref())).await??)
}

/// The rules a review of the project would follow (blocking: it reads files), as [`gather`]
/// reads them; for `gemini-mcp doctor` too.
pub fn read(
    collector: &Collector,
    calls: &crate::config::CallSettings,
    base: Option<&str>,
) -> Result<Rules, ConfigError> {
    let own = Own {
        operator: calls.review_rules.clone(),
        user: calls.user_rules.clone(),
    };
    read_all(collector, own, base)
}

/// The rules files outside the project: the operator's and the user's.
struct Own {
    operator: Option<PathBuf>,
    user: Option<PathBuf>,
}

/// A repository rules file: as the base commit holds it when the review has one (and it names a
/// commit here), else as the work tree does.
fn repository_file(collector: &Collector, base: Option<&str>, rel: &str) -> RulesFile {
    base.and_then(|b| {
        crate::git::rules_file_at(collector, b, rel, MAX_RULES_BYTES)
            .ok()
            .flatten()
    })
    .unwrap_or_else(|| collector.rules_file(rel, MAX_RULES_BYTES))
}

fn read_all(collector: &Collector, own: Own, base: Option<&str>) -> Result<Rules, ConfigError> {
    let Own { operator, user } = own;
    let mut rules = Rules::default();
    if let Some(path) = operator {
        own_file(&mut rules, Origin::Operator, &path, true);
    }
    match repository_file(collector, base, STYLEGUIDE) {
        RulesFile::Absent => {}
        RulesFile::Read {
            shown,
            text,
            redactions,
        } => {
            rules.redactions += redactions;
            if !text.trim().is_empty() {
                rules.sources.push(Source {
                    origin: Origin::Repository,
                    shown,
                    text,
                });
            }
        }
        RulesFile::NotApplied { shown, why } => rules.not_applied.push(NotApplied { shown, why }),
    }
    match repository_file(collector, base, CONFIG) {
        RulesFile::Absent => {}
        RulesFile::Read { shown, text, .. } => {
            let config = RepoConfig::parse(&shown, &text, &collector.sandbox().roots()[0])?;
            rules.ignore = config.ignore.clone();
            rules.config = Some((shown, config));
        }
        // A configuration the team wrote and we cannot read: its threshold and ignore patterns
        // would be dropped without a word, so the review is refused instead.
        RulesFile::NotApplied { shown, why } => {
            return Err(ConfigError {
                file: shown,
                field: "(the file)".into(),
                message: format!("cannot be applied: {why}; fix it or remove it"),
            });
        }
    }
    if let Some(path) = user {
        own_file(&mut rules, Origin::User, &path, false);
    }
    Ok(rules)
}

/// The operator's or the user's own file (outside the project, so not through the sandbox),
/// redacted like any text sent. A missing user file is no rule; a missing operator file is
/// named as not applied (it was checked at start, and has gone since).
fn own_file(rules: &mut Rules, origin: Origin, path: &Path, required: bool) {
    let shown = path.display().to_string();
    let text = match read_capped(path) {
        Ok(Some(text)) => text,
        Ok(None) if !required => return,
        Ok(None) => {
            rules.not_applied.push(NotApplied {
                shown,
                why: "it does not exist".into(),
            });
            return;
        }
        Err(why) => {
            rules.not_applied.push(NotApplied { shown, why });
            return;
        }
    };
    let (text, n) = crate::redact::redact(&text);
    rules.redactions += n;
    if !text.trim().is_empty() {
        rules.sources.push(Source {
            origin,
            shown,
            text,
        });
    }
}

/// A file of at most [`MAX_RULES_BYTES`] as UTF-8 text; `None` when there is none.
fn read_capped(path: &Path) -> Result<Option<String>, String> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("it cannot be read ({e})")),
    };
    if !meta.is_file() {
        return Err("it is not a regular file".into());
    }
    if meta.len() > MAX_RULES_BYTES {
        return Err(format!(
            "it is over the {} KiB a rules file may hold",
            MAX_RULES_BYTES / 1024
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("it cannot be read ({e})"))?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| "it is not UTF-8 text".into())
}

//! Who decides what the Gemini CLI's agent may do: the server, by mode and by where a tool call
//! reaches, never the caller alone.
//!
//! The agent asks (`session/request_permission`) before a tool call it will not run on its own.
//! We answer from the mode the server allowed and from the call's kind and locations:
//!
//! | kind | `plan`, `default` | `autoEdit` | `yolo` |
//! |---|---|---|---|
//! | read, search | inside the roots, not a secret | same | same |
//! | think | allowed | allowed | allowed |
//! | edit, delete, move | rejected | inside the roots, not a secret, not a repository's metadata (`.git`) | same |
//! | execute | rejected | rejected | allowed (a directory it names inside the roots) |
//! | fetch, switch mode, other | rejected | rejected | allowed |
//!
//! In `autoEdit` and `yolo` the CLI's session itself runs in its `default` mode
//! ([`AgentMode::session_mode`]), so that it asks before every edit and command rather than running
//! them unasked as its own `autoEdit` and `yolo` do.
//!
//! Only `allow_once` is ever chosen: `allow_always` would make the agent stop asking for that
//! tool, and the next call would skip this policy.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, ToolKind,
};
use serde::Serialize;

use crate::collector::Collector;
use crate::gemini::agent_mode::AgentMode;

/// What we answered to one permission request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The tool call's title as the agent gave it.
    pub tool: String,
    pub allowed: bool,
    /// Why, in a few words.
    pub reason: String,
}

impl Decision {
    /// A decision as it is recorded and shown: the agent's title and our reason (which may
    /// quote its paths) pass the secret redaction, as everything of the agent's does.
    fn new(tool: &str, allowed: bool, reason: &str) -> Decision {
        Decision {
            tool: crate::redact::redact(tool).0,
            allowed,
            reason: crate::redact::redact(reason).0,
        }
    }
}

/// What one process's permission requests are judged by.
pub struct Judge {
    pub mode: AgentMode,
    /// The roots and secret names paths are checked against.
    pub collector: Arc<Collector>,
    /// Directories no change may reach, inside the roots or not: the CLI's own working directory
    /// (the settings its next session reads) and our state directory.
    pub protected: Vec<PathBuf>,
}

impl Judge {
    pub fn new(mode: AgentMode, collector: Arc<Collector>, protected: &[&Path]) -> Judge {
        let protected = protected
            .iter()
            .filter(|p| !p.as_os_str().is_empty())
            .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()))
            .collect();
        Judge {
            mode,
            collector,
            protected,
        }
    }

    /// The protected directory `path` (as the agent named it: resolved on disk, or by its parent
    /// for a file about to be made) lies in.
    fn protected_dir(&self, path: &Path) -> Option<&Path> {
        let resolved = std::fs::canonicalize(path).ok().or_else(|| {
            let parent = std::fs::canonicalize(path.parent()?).ok()?;
            Some(parent.join(path.file_name()?))
        })?;
        self.protected
            .iter()
            .find(|p| resolved.starts_with(p))
            .map(PathBuf::as_path)
    }
}

/// Decides `request` under the judge's mode, with paths checked against the collector's roots,
/// secret names and the protected directories; returns the answer in the format the CLI requires
/// and the decision to record.
pub fn answer(
    judge: &Judge,
    request: &RequestPermissionRequest,
) -> (RequestPermissionResponse, Decision) {
    let (mode, collector) = (judge.mode, judge.collector.as_ref());
    let call = &request.tool_call.fields;
    let tool = call
        .title
        .clone()
        .or_else(|| call.name.clone())
        .unwrap_or_else(|| "a tool call".into());
    let kind = call.kind.unwrap_or(ToolKind::Other);
    let mut paths: Vec<PathBuf> = call
        .locations
        .iter()
        .flatten()
        .map(|l| l.path.clone())
        .collect();
    if let Some(raw) = &call.raw_input {
        for key in [
            "file_path",
            "absolute_path",
            "path",
            "dir_path",
            "directory",
        ] {
            if let Some(p) = raw.get(key).and_then(|v| v.as_str()) {
                paths.push(PathBuf::from(p));
            }
        }
    }
    let changes = matches!(
        kind,
        ToolKind::Edit | ToolKind::Delete | ToolKind::Move | ToolKind::Execute
    );
    let guarded = paths
        .iter()
        .filter(|p| p.is_absolute())
        .find_map(|p| judge.protected_dir(p).map(|dir| (p, dir)));
    let (allowed, reason) = match guarded {
        Some((p, dir)) if changes => (
            false,
            format!(
                "{} is in {}, the Gemini CLI's working directory or this server's state, which no change may reach",
                p.display(),
                dir.display()
            ),
        ),
        _ => decide(mode, kind, &paths, collector),
    };
    (
        respond(&request.options, allowed),
        Decision::new(&tool, allowed, &reason),
    )
}

/// The answer where no tool may run at all (the CLI backend's plain calls): rejected.
pub fn refuse(request: &RequestPermissionRequest) -> (RequestPermissionResponse, Decision) {
    let call = &request.tool_call.fields;
    let tool = call
        .title
        .clone()
        .or_else(|| call.name.clone())
        .unwrap_or_else(|| "a tool call".into());
    let decision = Decision::new(
        &tool,
        false,
        "Gemini answers as a plain model here, without tools",
    );
    (respond(&request.options, false), decision)
}

fn decide(
    mode: AgentMode,
    kind: ToolKind,
    paths: &[PathBuf],
    collector: &Collector,
) -> (bool, String) {
    let inside = |what: &str| -> (bool, String) {
        for p in paths {
            if let Err(why) = reachable(collector, p) {
                return (false, why);
            }
        }
        (true, format!("{what} inside the project"))
    };
    match kind {
        ToolKind::Think => (true, "no side effects".into()),
        ToolKind::Read | ToolKind::Search => {
            if paths.is_empty() && kind == ToolKind::Read {
                return (false, "a read that names no path".into());
            }
            inside(if kind == ToolKind::Read {
                "a read"
            } else {
                "a search"
            })
        }
        ToolKind::Edit | ToolKind::Delete | ToolKind::Move => {
            if !mode.writes() {
                return (false, format!("mode {} does not change files", mode.id()));
            }
            if paths.is_empty() {
                return (false, "a change that names no path".into());
            }
            if let Some(p) = paths
                .iter()
                .find(|p| in_repository_metadata(p, collector.sandbox().roots()))
            {
                return (
                    false,
                    format!(
                        "{} is a repository's metadata (.git): an edit there can run commands",
                        p.display()
                    ),
                );
            }
            inside("a change")
        }
        ToolKind::Execute if mode == AgentMode::Yolo => {
            if paths.is_empty() {
                return (true, "mode yolo runs commands".into());
            }
            inside("a command")
        }
        _ if mode == AgentMode::Yolo => (true, "mode yolo allows it".into()),
        ToolKind::Execute => (false, format!("mode {} does not run commands", mode.id())),
        ToolKind::Fetch => (
            false,
            format!("mode {} does not fetch from the network", mode.id()),
        ),
        ToolKind::SwitchMode => (false, "the server chose the mode".into()),
        _ => (false, format!("mode {} allows only reads", mode.id())),
    }
}

/// Whether `path` (absolute, or relative to the first root) lies in a repository's metadata, by
/// the collector's one rule: a `.git` component however git may spell it, or a git directory
/// between it and its root.
fn in_repository_metadata(path: &Path, roots: &[PathBuf]) -> bool {
    let abs = match roots.first() {
        Some(first) if path.is_relative() => first.join(path),
        _ => path.to_path_buf(),
    };
    let root = roots.iter().find(|r| abs.starts_with(r)).unwrap_or(&abs);
    crate::collector::edits::repository_metadata(&abs, root).is_some()
}

/// `Ok` when `path` (absolute, or relative to the first root) is inside the roots and not a
/// secret by name.
fn reachable(collector: &Collector, path: &Path) -> Result<(), String> {
    let raw = path.to_string_lossy();
    let resolved = match collector.sandbox().resolve(&raw) {
        Ok(p) => p,
        // A path the agent is about to create: its parent must be inside.
        Err(_) => match path.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(parent)
                if collector
                    .sandbox()
                    .resolve(&parent.to_string_lossy())
                    .is_ok() =>
            {
                let name = path.file_name().map(PathBuf::from).unwrap_or_default();
                return match collector.secret_name_rule(&name) {
                    Some(rule) => Err(format!("{raw} looks like a secret ({rule})")),
                    None => Ok(()),
                };
            }
            _ => return Err(format!("{raw} is outside the project")),
        },
    };
    match collector.secret_name_rule(resolved.as_path()) {
        Some(rule) => Err(format!("{raw} looks like a secret ({rule})")),
        None => Ok(()),
    }
}

/// The answer in the format the current CLI requires: `{"outcome": {"outcome": "selected",
/// "optionId": …}}`, choosing by the option's kind, never by its position or name.
fn respond(options: &[PermissionOption], allowed: bool) -> RequestPermissionResponse {
    let wanted: &[PermissionOptionKind] = if allowed {
        &[PermissionOptionKind::AllowOnce]
    } else {
        &[
            PermissionOptionKind::RejectOnce,
            PermissionOptionKind::RejectAlways,
        ]
    };
    let chosen = wanted
        .iter()
        .find_map(|k| options.iter().find(|o| o.kind == *k));
    RequestPermissionResponse::new(match chosen {
        Some(o) => {
            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(o.option_id.clone()))
        }
        None => RequestPermissionOutcome::Cancelled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_metadata_is_found_however_it_is_spelled() {
        for (path, inside) in [
            ("/p/.git/config", true),
            ("/p/.git/hooks/pre-commit", true),
            ("/p/vendor/lib/.git/config", true),
            ("/p/.GIT/config", true),
            (".Git/hooks/post-checkout", true),
            ("/p/.git./config", true),
            ("/p/.gitignore", false),
            ("/p/src/git/mod.rs", false),
            ("/p/.github/workflows/ci.yml", false),
        ] {
            assert_eq!(
                in_repository_metadata(Path::new(path), &[PathBuf::from("/p")]),
                inside,
                "{path}"
            );
        }
    }

    #[test]
    fn the_modes_that_write_ask_in_the_clis_default_mode() {
        for mode in AgentMode::ALL {
            assert!(!mode.session_mode().writes(), "{mode:?}");
            assert_eq!(mode.writes(), !mode.cli_tools().is_empty(), "{mode:?}");
            // Only yolo gets the shell.
            assert_eq!(
                mode.cli_tools().contains(&"run_shell_command"),
                mode == AgentMode::Yolo
            );
        }
    }
}

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
//! | edit, delete, move | rejected | inside the roots, not a secret | same |
//! | execute, fetch, switch mode, other | rejected | rejected | allowed |
//!
//! Only `allow_once` is ever chosen: `allow_always` would make the agent stop asking for that
//! tool, and the next call would skip this policy.

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, ToolKind,
};
use serde::Serialize;

use crate::collector::Collector;

/// How much the agent may do, as ACP session modes name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Mode {
    /// Read-only: the agent plans and reads (the default).
    #[serde(rename = "plan")]
    Plan,
    /// The agent asks before every action; we answer as for `plan`.
    #[serde(rename = "default")]
    Default,
    /// Edits inside the roots are allowed; commands are not.
    #[serde(rename = "autoEdit")]
    AutoEdit,
    /// Everything is allowed, commands included.
    #[serde(rename = "yolo")]
    Yolo,
}

impl Mode {
    pub const ALL: [Mode; 4] = [Mode::Plan, Mode::Default, Mode::AutoEdit, Mode::Yolo];

    /// The ACP mode id.
    pub fn id(self) -> &'static str {
        match self {
            Mode::Plan => "plan",
            Mode::Default => "default",
            Mode::AutoEdit => "autoEdit",
            Mode::Yolo => "yolo",
        }
    }

    /// Reads an ACP mode id, or the CLI's spelling (`auto_edit`).
    pub fn parse(s: &str) -> Option<Mode> {
        match s.trim() {
            "plan" => Some(Mode::Plan),
            "default" => Some(Mode::Default),
            "autoEdit" | "auto_edit" => Some(Mode::AutoEdit),
            "yolo" => Some(Mode::Yolo),
            _ => None,
        }
    }

    /// Whether the mode changes files or runs commands, so the configuration must allow it.
    pub fn writes(self) -> bool {
        matches!(self, Mode::AutoEdit | Mode::Yolo)
    }

    /// One line for the reply: which policy applied.
    pub fn describe(self) -> &'static str {
        match self {
            Mode::Plan => {
                "plan (read-only): reads inside the project allowed, everything else rejected"
            }
            Mode::Default => {
                "default: every action asked for; reads inside the project allowed, everything else rejected"
            }
            Mode::AutoEdit => {
                "autoEdit: reads and edits inside the project allowed, commands rejected"
            }
            Mode::Yolo => "yolo: everything allowed, commands included",
        }
    }
}

/// What we answered to one permission request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The tool call's title as the agent gave it.
    pub tool: String,
    pub allowed: bool,
    /// Why, in a few words.
    pub reason: String,
}

/// Decides `request` under `mode`, with paths checked against the collector's roots and secret
/// names; returns the answer in the format the CLI requires and the decision to record.
pub fn answer(
    mode: Mode,
    collector: &Collector,
    request: &RequestPermissionRequest,
) -> (RequestPermissionResponse, Decision) {
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
    let (allowed, reason) = decide(mode, kind, &paths, collector);
    let decision = Decision {
        tool,
        allowed,
        reason,
    };
    (respond(&request.options, allowed), decision)
}

/// The answer where no tool may run at all (the CLI backend's plain calls): rejected.
pub fn refuse(request: &RequestPermissionRequest) -> (RequestPermissionResponse, Decision) {
    let call = &request.tool_call.fields;
    let tool = call
        .title
        .clone()
        .or_else(|| call.name.clone())
        .unwrap_or_else(|| "a tool call".into());
    let decision = Decision {
        tool,
        allowed: false,
        reason: "Gemini answers as a plain model here, without tools".into(),
    };
    (respond(&request.options, false), decision)
}

fn decide(mode: Mode, kind: ToolKind, paths: &[PathBuf], collector: &Collector) -> (bool, String) {
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
            inside("a change")
        }
        _ if mode == Mode::Yolo => (true, "mode yolo allows it".into()),
        ToolKind::Execute => (false, format!("mode {} does not run commands", mode.id())),
        ToolKind::Fetch => (
            false,
            format!("mode {} does not fetch from the network", mode.id()),
        ),
        ToolKind::SwitchMode => (false, "the server chose the mode".into()),
        _ => (false, format!("mode {} allows only reads", mode.id())),
    }
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

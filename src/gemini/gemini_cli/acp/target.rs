//! What one of the agent's tool calls reached, as the caller is shown it: the files ACP reports
//! (`locations`, `{path, line}`), the input it reports (`rawInput`; for an MCP tool the CLI 0.61.0
//! sends none and puts the arguments' JSON in the call's content instead), and one line naming
//! the target. Paths are shown as the collector shows every path (relative to the root when
//! there is one root, escaped); every string passes the secret redaction of [`crate::redact`].

use std::path::Path;

use agent_client_protocol::v1::schema::{ContentBlock, ToolCallContent, ToolCallLocation};
use serde::Serialize;
use serde_json::Value;

use crate::collector::Collector;

/// A file a tool call touched, as shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Location {
    pub path: String,
    /// 1-based, when the agent named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

/// Input keys that name a file or directory.
const PATH_KEYS: [&str; 6] = [
    "path",
    "file_path",
    "absolute_path",
    "dir_path",
    "directory",
    "paths",
];

/// Input keys that say what was looked for or run, in the order they are named.
const WHAT_KEYS: [&str; 5] = ["pattern", "glob", "query", "command", "url"];

/// How a tool call's reports are shown: paths by the collector's rule, values redacted.
#[derive(Clone, Copy)]
pub(super) struct Shown<'a> {
    pub(super) collector: Option<&'a Collector>,
}

impl Shown<'_> {
    /// A path as the collector shows it (relative to the root when there is one), else as given;
    /// redacted either way.
    pub(super) fn path(&self, raw: &str) -> String {
        let shown = match self.collector {
            Some(c) => c.sandbox().display_path(Path::new(raw)),
            None => raw.to_string(),
        };
        self.text(&shown)
    }

    /// A text with secret-looking values replaced.
    pub(super) fn text(&self, raw: &str) -> String {
        crate::redact::redact(raw).0
    }

    pub(super) fn locations(&self, reported: &[ToolCallLocation]) -> Vec<Location> {
        reported
            .iter()
            .map(|l| Location {
                path: self.path(&l.path.to_string_lossy()),
                line: l.line,
            })
            .collect()
    }

    /// The input as shown: every string redacted, and under a key naming a path, shown as a path.
    pub(super) fn input(&self, raw: &Value) -> Value {
        self.value(raw, false)
    }

    fn value(&self, v: &Value, is_path: bool) -> Value {
        match v {
            Value::String(s) if is_path => Value::String(self.path(s)),
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|i| self.value(i, is_path)).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (self.text(k), self.value(v, PATH_KEYS.contains(&k.as_str()))))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// The input a tool call reports: its `rawInput`, else the JSON object its content holds (how the
/// CLI reports an MCP tool's arguments).
pub(super) fn reported_input(raw: Option<&Value>, content: &[ToolCallContent]) -> Option<Value> {
    if let Some(v) = raw.filter(|v| !v.is_null()) {
        return Some(v.clone());
    }
    content.iter().find_map(|c| match c {
        ToolCallContent::Content(c) => match &c.content {
            ContentBlock::Text(t) => serde_json::from_str::<Value>(t.text.trim())
                .ok()
                .filter(Value::is_object),
            _ => None,
        },
        _ => None,
    })
}

/// One line naming what a call reached, from what is already shown: its files (`path:line`)
/// and what it looked for or ran.
pub(super) fn target(locations: &[Location], input: Option<&Value>) -> String {
    let mut parts: Vec<String> = reached(locations, input)
        .into_iter()
        .map(|l| match l.line {
            Some(n) => format!("{}:{n}", l.path),
            None => l.path,
        })
        .collect();
    if let Some(Value::Object(map)) = input {
        for key in WHAT_KEYS {
            if let Some(s) = map.get(key).and_then(Value::as_str) {
                parts.push(format!("{key} `{s}`"));
            }
        }
    }
    parts.join(" ")
}

/// The files a call reached, as shown: its locations, else those its input names under a path
/// key (the first with the input's `start_line`).
pub(super) fn reached(locations: &[Location], input: Option<&Value>) -> Vec<Location> {
    if !locations.is_empty() {
        return locations.to_vec();
    }
    let Some(Value::Object(map)) = input else {
        return Vec::new();
    };
    let mut paths: Vec<&str> = Vec::new();
    for key in PATH_KEYS {
        match map.get(key) {
            Some(Value::String(s)) => paths.push(s),
            Some(Value::Array(items)) => paths.extend(items.iter().filter_map(Value::as_str)),
            _ => {}
        }
    }
    let start = map
        .get("start_line")
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok());
    paths
        .into_iter()
        .enumerate()
        .map(|(i, p)| Location {
            path: p.to_string(),
            line: if i == 0 { start } else { None },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_target_names_the_files_and_what_was_looked_for() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let collector =
            Collector::new(&crate::config::Config::for_tests(&root).collector()).unwrap();
        let s = Shown {
            collector: Some(&collector),
        };
        let abs = root.join("src/lib.rs").display().to_string();
        let locations = s.locations(&[ToolCallLocation::new(&abs).line(2)]);
        assert_eq!(
            locations,
            [Location {
                path: "src/lib.rs".into(),
                line: Some(2)
            }]
        );
        assert_eq!(target(&locations, None), "src/lib.rs:2");
        // An MCP tool's arguments, as the CLI reports them in the call's content.
        let content = [ToolCallContent::from(
            r#"{"path":"src/lib.rs","start_line":3}"#,
        )];
        let input = s.input(&reported_input(None, &content).unwrap());
        assert_eq!(target(&[], Some(&input)), "src/lib.rs:3");
        let search = s.input(&json!({"pattern": "fn add", "path": abs}));
        assert_eq!(search["path"], "src/lib.rs");
        assert_eq!(target(&[], Some(&search)), "src/lib.rs pattern `fn add`");
        // A secret in an argument is redacted, wherever it is.
        let token = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789";
        let leaked = s.input(&json!({"pattern": token, "extra": [token]}));
        assert!(!leaked.to_string().contains(token), "{leaked}");
        assert!(!target(&[], Some(&leaked)).contains(token));
        // Text that is not a JSON object is not taken for input.
        assert_eq!(
            reported_input(None, &[ToolCallContent::from("reading a file")]),
            None
        );
    }
}

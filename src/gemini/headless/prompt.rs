//! The prompt, the system prompt file and the tool policy of one call, in its private directory.

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::outcome::cli_error;
use super::{Live, live};

use crate::gemini::{GeminiError, GenerateRequest, Message, Part, Role};

/// The conversation as one prompt text. A single message is sent as it is; a longer
/// conversation is framed with one marker line per message, so the model can tell the turns
/// apart and knows which request to answer.
pub fn render_prompt(contents: &[Message]) -> String {
    let text_of = |m: &Message| {
        m.parts
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(t.as_str()),
                Part::Image { .. } | Part::Recorded(_) | Part::FunctionResponse { .. } => None,
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    };
    match contents {
        [] => String::new(),
        [only] => text_of(only),
        [earlier @ .., last] => {
            let mut out = String::from(
                "This conversation continues. Its earlier messages follow, oldest first, each under a \
                 `=== … ===` marker line; answer the new request at the end.\n",
            );
            let mut turn = 0;
            for m in earlier {
                let who = match m.role {
                    Role::User => {
                        turn += 1;
                        "user"
                    }
                    Role::Model => "you (Gemini)",
                };
                out.push_str(&format!("\n=== turn {} · {who} ===\n", turn.max(1)));
                out.push_str(&text_of(m));
                out.push('\n');
            }
            out.push_str("\n=== the new request · user ===\n");
            out.push_str(&text_of(last));
            out
        }
    }
}

/// The system prompt, with the JSON answer format stated when JSON mode was asked for (the CLI
/// has no flag for a response schema).
pub fn system_prompt(req: &GenerateRequest) -> String {
    let mut s = req.system_instruction.clone();
    if let Some(schema) = &req.response_schema {
        let schema = serde_json::to_string_pretty(schema).unwrap_or_else(|_| schema.to_string());
        s.push_str(
            "\n\n# Answer format\n\nAnswer with exactly one JSON object and nothing else: no prose before or after \
             it, no Markdown fences. The object must match this JSON Schema:\n\n",
        );
        s.push_str(&schema);
        s.push('\n');
    }
    s
}

/// The CLI policy for one call: every tool denied (denied tools are not even declared to the
/// model), except Google Search when the request asked for web search.
pub fn policy(web_search: bool) -> String {
    let mut p = String::from(
        "# Written by gemini-mcp-server for one call: Gemini answers as a plain model, without tools.\n\
         [[rule]]\ntoolName = \"*\"\ndecision = \"deny\"\npriority = 998\n",
    );
    if web_search {
        p.push_str(
            "\n[[rule]]\ntoolName = \"google_web_search\"\ndecision = \"allow\"\npriority = 999\n",
        );
    }
    p
}

/// Where a private directory holds [`system_settings`]: the settings of the CLI's workspace when
/// the directory is its working directory. (The CLI reads a system settings file only when root
/// owns it and every directory above it, which no temporary directory is.)
pub const SETTINGS: &str = ".gemini/settings.json";

/// Our settings for the CLI: no workspace tree in the session context, and no memory boundary
/// markers (the CLI then looks for context files in its working directory only, not up to a
/// git root above it and down from there); `core_tools`, when given, is the allow-list of the
/// CLI's own tools. No setting stops the CLI's context files (`context.fileName` adds names and
/// keeps `GEMINI.md`), so the CLI also runs outside the project, in a directory of ours holding
/// none, these settings as its workspace's: see [`super::confine`] and [`workspace`].
pub fn system_settings(core_tools: Option<&[&str]>) -> String {
    let mut settings = serde_json::json!({"context": {
        "includeDirectoryTree": false,
        "memoryBoundaryMarkers": [],
    }});
    if let Some(core) = core_tools {
        settings["tools"] = serde_json::json!({ "core": core });
    }
    settings.to_string()
}

/// The CLI's working directory for runs of one kind (`plain`, `agent`):
/// `<state>/gemini-cli/<kind>`, private (0700, this user's, not a link), holding only our
/// `settings` as its workspace's ([`SETTINGS`]). Stable, so the CLI keeps one record of it under
/// `~/.gemini` (its projects, chats and history are keyed by the working directory) rather than
/// one per run. The settings are replaced whole on each use: concurrent writers leave one of two
/// identical files.
pub fn workspace(state: &Path, kind: &str, settings: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let dir = state.join("gemini-cli").join(kind);
    let dot = dir.join(".gemini");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dot)?;
    let mut file = tempfile::NamedTempFile::new_in(&dot)?;
    // The file was just made by this process: its owner is who we run as.
    let me = file.as_file().metadata()?.uid();
    for d in [&dir, &dot] {
        let m = std::fs::symlink_metadata(d)?;
        if !m.is_dir() || m.uid() != me {
            return Err(std::io::Error::other(format!(
                "{} is not a directory of this user",
                d.display()
            )));
        }
        if m.mode() & 0o077 != 0 {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    std::io::Write::write_all(&mut file, settings.as_bytes())?;
    file.persist(dir.join(SETTINGS)).map_err(|e| e.error)?;
    Ok(dir)
}

/// [`workspace`] off the runtime; `fallback` (a private temporary directory already holding the
/// settings) when there is no state directory.
pub async fn workspace_or(
    state: PathBuf,
    kind: &'static str,
    settings: String,
    fallback: PathBuf,
) -> Result<PathBuf, GeminiError> {
    if state.as_os_str().is_empty() {
        return Ok(fallback);
    }
    tokio::task::spawn_blocking(move || workspace(&state, kind, &settings))
        .await
        .map_err(|e| {
            cli_error(
                None,
                format!("preparing the Gemini CLI's working directory failed: {e}"),
            )
        })?
        .map_err(|e| {
            cli_error(
                None,
                format!(
                    "cannot prepare the Gemini CLI's working directory under the state directory \
                     (GEMINI_MCP_STATE_DIR): {e}"
                ),
            )
        })
}

/// The call's private directory: `system.md`, `policy.toml`, `settings.json`, the CLI's
/// `TMPDIR` and its working directory.
pub(super) struct CallFiles {
    pub(super) dir: Option<tempfile::TempDir>,
    pub(super) path: PathBuf,
    pub(super) live: Arc<Mutex<Live>>,
}

impl CallFiles {
    pub(super) async fn create(
        system: String,
        policy: String,
        registry: &Arc<Mutex<Live>>,
    ) -> Result<CallFiles, GeminiError> {
        let made = tokio::task::spawn_blocking(move || -> std::io::Result<tempfile::TempDir> {
            let dir = tempfile::Builder::new()
                .prefix("gemini-mcp-cli-")
                .permissions(std::fs::Permissions::from_mode(0o700))
                .tempdir()?;
            let settings = system_settings(None);
            for (name, text) in [
                ("system.md", system),
                ("policy.toml", policy),
                (SETTINGS, settings),
            ] {
                if let Some(parent) = dir.path().join(name).parent() {
                    std::fs::create_dir_all(parent)?;
                }
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(dir.path().join(name))?;
                std::io::Write::write_all(&mut f, text.as_bytes())?;
            }
            Ok(dir)
        })
        .await
        .map_err(|e| cli_error(None, format!("preparing the Gemini CLI call failed: {e}")))?
        .map_err(|e| {
            cli_error(
                None,
                format!(
                    "cannot write the Gemini CLI's private temporary files: {e}. Check that TMPDIR \
                     (or /tmp) is writable"
                ),
            )
        })?;
        let path = made.path().to_path_buf();
        live(registry).dirs.push(path.clone());
        Ok(CallFiles {
            path,
            dir: Some(made),
            live: registry.clone(),
        })
    }

    pub(super) fn dir(&self) -> &Path {
        &self.path
    }
    pub(super) fn system_path(&self) -> PathBuf {
        self.path.join("system.md")
    }
    pub(super) fn policy_path(&self) -> PathBuf {
        self.path.join("policy.toml")
    }

    /// Removes the directory off the runtime's threads.
    pub(super) async fn remove(mut self) {
        live(&self.live).dirs.retain(|d| *d != self.path);
        if let Some(dir) = self.dir.take() {
            let path = self.path.clone();
            let removed = tokio::task::spawn_blocking(move || dir.close()).await;
            if !matches!(removed, Ok(Ok(()))) {
                tracing::warn!(dir = %path.display(), "could not remove the Gemini CLI's temporary directory");
            }
        }
    }
}

impl Drop for CallFiles {
    /// The call was abandoned (its future dropped): remove the directory in the background.
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            live(&self.live).dirs.retain(|d| *d != self.path);
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    rt.spawn_blocking(move || drop(dir));
                }
                Err(_) => drop(dir),
            }
        }
    }
}

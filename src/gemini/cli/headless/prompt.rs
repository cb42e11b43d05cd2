//! The prompt, the system prompt file and the tool policy of one call, in its private directory.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::outcome::cli_error;
use super::{Live, live};

use crate::gemini::cli::{SETTINGS, system_settings};
use crate::gemini::vocabulary::{GeminiError, GenerateRequest, Message, Part, Role};

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
            let mut builder = tempfile::Builder::new();
            builder.prefix("gemini-mcp-cli-");
            // Windows has no mode bits: the directory inherits the ACL of the temporary
            // directory, `%LOCALAPPDATA%\Temp` by default, the user's own.
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                builder.permissions(std::fs::Permissions::from_mode(0o700));
            }
            let dir = builder.tempdir()?;
            let settings = system_settings(None);
            for (name, text) in [
                ("system.md", system),
                ("policy.toml", policy),
                (SETTINGS, settings),
            ] {
                if let Some(parent) = dir.path().join(name).parent() {
                    std::fs::create_dir_all(parent)?;
                }
                let mut options = std::fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
                let mut f = options.open(dir.path().join(name))?;
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

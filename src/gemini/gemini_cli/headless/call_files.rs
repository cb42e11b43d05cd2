//! The system prompt file and the tool policy of one call, in its private directory.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::in_flight::{Live, live};
use super::outcome::cli_error;

use crate::gemini::gemini_cli::{SETTINGS, system_settings};
use crate::gemini::vocabulary::GeminiError;

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

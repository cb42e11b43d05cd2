//! One running `gemini --acp`: its connection, its sessions, its private directory, and its
//! process group, killed whole when it goes. How the pool starts one: `start.rs`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use agent_client_protocol::Agent;
use agent_client_protocol::v1::ConnectionTo;

use super::rpc::Routes;
use crate::gemini::gemini_cli::ProcessGroup;
use crate::gemini::vocabulary::{GeminiError, cli_error};

/// One running `gemini --acp`.
pub(super) struct Process {
    pub(super) cx: ConnectionTo<Agent>,
    pub(super) routes: Routes,
    pub(super) group: Option<ProcessGroup>,
    /// Sessions this process holds, by our thread id.
    pub(super) sessions: Mutex<HashMap<String, String>>,
    pub(super) last_used: Mutex<Instant>,
    pub(super) in_flight: std::sync::atomic::AtomicUsize,
    /// Fires when the connection ends (exit, crash or kill).
    pub(super) closed: tokio::sync::watch::Receiver<bool>,
    pub(super) load_session: bool,
    /// Sessions started in this process.
    pub(super) started: std::sync::atomic::AtomicUsize,
    /// The process's private directory (policy, settings, TMPDIR; a plain process's system
    /// prompt), removed when the process goes: held, never read.
    pub(super) _files: Option<tempfile::TempDir>,
    /// Where the process and its sessions work: a stable private directory under our settings
    /// (`gemini_cli::workspace`), never the project.
    pub(super) cwd: PathBuf,
}

impl Process {
    pub(super) fn alive(&self) -> bool {
        !*self.closed.borrow()
    }

    pub(super) fn kill(&self) {
        if let Some(group) = self.group {
            group.kill();
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A process's private directory (0700): `files`, and its TMPDIR.
pub(super) async fn private_dir(
    files: Vec<(&'static str, String)>,
) -> Result<tempfile::TempDir, GeminiError> {
    let io = |e: std::io::Error| {
        cli_error(format!(
            "could not prepare the Gemini CLI's private directory: {e}"
        ))
    };
    tokio::task::spawn_blocking(move || {
        let dir = tempfile::Builder::new()
            .prefix("gemini-mcp-acp-")
            .tempdir()
            .map_err(io)?;
        // On Windows the directory inherits the temporary directory's ACL (by default under
        // `%LOCALAPPDATA%`, the user's own).
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
                .map_err(io)?;
        }
        for (name, text) in files {
            let path = dir.path().join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(io)?;
            }
            std::fs::write(path, text).map_err(io)?;
        }
        Ok(dir)
    })
    .await
    .map_err(|e| {
        cli_error(format!(
            "could not prepare the Gemini CLI's private directory: {e}"
        ))
    })?
}

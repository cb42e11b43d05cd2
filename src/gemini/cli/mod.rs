//! The two Gemini CLI backends, for people who use Gemini through the CLI's Google login: the
//! headless CLI, one process per call (`headless`), and the warm agent over the Agent Client
//! Protocol (`acp`), which also serves `investigate`'s `engine: "gemini-cli"`.
//!
//! What they share: finding the executable ([`locate`]), the process group every CLI process
//! leads ([`ProcessGroup`], where Windows job objects will go), and the CLI's surroundings
//! (`workspace`: its policy, our settings, and the private directory it runs in).

pub mod acp;
pub mod headless;
mod process_group;
mod workspace;

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub use process_group::ProcessGroup;
pub(crate) use workspace::confine;
pub use workspace::{SETTINGS, policy, system_settings, workspace, workspace_or};

/// A server name no one uses: the MCP allow-list then admits no configured server.
pub(crate) const NO_MCP_SERVER: &str = "gemini-mcp-server-allows-none";

/// Finds the CLI: a path with a directory part is taken as is (made absolute), a bare name is
/// looked up in the `PATH` value. Only executable regular files (symlinks followed) count.
pub fn locate(program: &Path, path_var: Option<&OsStr>) -> Option<PathBuf> {
    if program.as_os_str().is_empty() {
        return None;
    }
    if program.components().count() > 1 {
        return is_executable(program)
            .then(|| std::fs::canonicalize(program).unwrap_or_else(|_| program.to_path_buf()));
    }
    std::env::split_paths(path_var?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

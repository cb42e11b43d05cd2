//! The Gemini CLI's surroundings, shared by both CLI backends: the policy file that denies its
//! tools, our settings for it, and the private working directory it runs in (never the project).

use std::path::{Path, PathBuf};

use tokio::process::Command;

use crate::gemini::vocabulary::{GeminiError, cli_error};

/// Runs a CLI process that answers as a plain model in `dir`, its private directory, under our
/// settings (written there by [`system_settings`], as the workspace's): no workspace tree, and no
/// context file of the project or its ancestors, since the CLI reads `GEMINI.md` from its working
/// directory up whatever its settings say. A plain model needs nothing of the project; the
/// directory is ours, so it is trusted (its settings are then read; the project's trust is not
/// asked). `home`, the CLI's home as it would pick it, is named to it (`GEMINI_CLI_HOME`): the
/// home whose records of our sessions `records` removes.
pub(crate) fn confine(cmd: &mut Command, dir: &Path, home: Option<&Path>) {
    cmd.current_dir(dir)
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true");
    if let Some(home) = home {
        cmd.env("GEMINI_CLI_HOME", home);
    }
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
/// none, these settings as its workspace's: see [`confine`] and [`workspace`].
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
/// one per run; the chats of our sessions there are removed after each call (`records`). The settings are replaced whole on each use: concurrent writers leave one of two
/// identical files.
#[cfg(unix)]
pub fn workspace(state: &Path, kind: &str, settings: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
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

/// [`workspace`] on Windows: the same directory and settings file, replaced the same way. Windows
/// has no mode bits: the directories inherit the ACL of the state directory they are made in,
/// which under the user's profile (`%LOCALAPPDATA%`) admits only the user, SYSTEM and the
/// administrators; a state directory anywhere more open is as open. A directory on the way that
/// is a reparse point (a symbolic link or a junction) is refused, as a link is on Unix.
#[cfg(windows)]
pub fn workspace(state: &Path, kind: &str, settings: &str) -> std::io::Result<PathBuf> {
    use std::os::windows::fs::MetadataExt;
    /// `FILE_ATTRIBUTE_REPARSE_POINT`.
    const REPARSE_POINT: u32 = 0x400;
    let dir = state.join("gemini-cli").join(kind);
    let dot = dir.join(".gemini");
    std::fs::create_dir_all(&dot)?;
    for d in [&dir, &dot] {
        let m = std::fs::symlink_metadata(d)?;
        if !m.is_dir() || m.file_type().is_symlink() || m.file_attributes() & REPARSE_POINT != 0 {
            return Err(std::io::Error::other(format!(
                "{} is not a plain directory (a link or a junction?)",
                d.display()
            )));
        }
    }
    let mut file = tempfile::NamedTempFile::new_in(&dot)?;
    std::io::Write::write_all(&mut file, settings.as_bytes())?;
    let target = dir.join(SETTINGS);
    match file.persist(&target) {
        Ok(_) => Ok(dir),
        // Replacing a file another process holds open without sharing its deletion (a scanner,
        // a concurrent writer) fails on Windows; the same settings already there will do.
        Err(e) if std::fs::read(&target).is_ok_and(|t| t == settings.as_bytes()) => {
            drop(e);
            Ok(dir)
        }
        Err(e) => Err(e.error),
    }
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
            cli_error(format!(
                "preparing the Gemini CLI's working directory failed: {e}"
            ))
        })?
        .map_err(|e| {
            cli_error(format!(
                "cannot prepare the Gemini CLI's working directory under the state directory \
                 (GEMINI_MCP_STATE_DIR): {e}"
            ))
        })
}

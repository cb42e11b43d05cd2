//! The two Gemini CLI backends, for people who use Gemini through the CLI's own login ([`LOGIN`]
//! says which still work): the headless CLI, one process per call (`headless`), and the warm
//! agent over the Agent Client Protocol (`acp`), which also serves `investigate`'s
//! `engine: "gemini-cli"`.
//!
//! What they share: finding the executable ([`locate`]: on Windows under `PATHEXT`, so npm's
//! `gemini.cmd` is found), the process group every CLI process leads ([`ProcessGroup`]: a Job
//! object on Windows), the CLI's surroundings (`workspace`: its policy, our settings, and the
//! private directory it runs in), the removal of its own record of each session (`records`),
//! and what its login can and cannot do ([`LOGIN`], [`login_refused`]).

pub mod acp;
mod conversation;
pub mod headless;
mod process_group;
mod records;
mod workspace;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::gemini::vocabulary::GeminiError;

pub use conversation::{render_prompt, system_prompt};
pub use process_group::ProcessGroup;
pub(crate) use records::Cleanup;
pub(crate) use workspace::confine;
pub use workspace::{SETTINGS, policy, system_settings, workspace, workspace_or};

/// A server name no one uses: the MCP allow-list then admits no configured server.
pub(crate) const NO_MCP_SERVER: &str = "gemini-mcp-server-allows-none";

/// Which logins the Gemini CLI can still use: said wherever we point to the CLI (`doctor`, the
/// "no Gemini backend" errors, a CLI that is not signed in).
pub const LOGIN: &str = "the Gemini CLI signs in with a Gemini API key (GEMINI_API_KEY in its environment), \
Vertex AI, a Google Workspace account or a Gemini Code Assist Standard or Enterprise licence; since 2026-06-18 \
Google refuses its Login with Google for individual accounts (free, Google AI Pro, Google AI Ultra)";

/// Whether the CLI's output is Google's refusal of Login with Google for an individual account:
/// `IneligibleTierError`, reason `UNSUPPORTED_CLIENT`, "This client is no longer supported for
/// Gemini Code Assist for individuals" (headless: on stderr, exit 1; ACP: `session/new` fails
/// with -32000 and that message).
pub(crate) fn login_refused(text: &str) -> bool {
    text.contains("UNSUPPORTED_CLIENT")
        || text.contains("no longer supported for Gemini Code Assist for individuals")
}

/// That refusal, explained: what happened and the ways that still work.
pub(crate) fn login_refused_error(exit_code: Option<i32>) -> GeminiError {
    GeminiError::cli(
        exit_code,
        "Google refused the Gemini CLI's Login with Google (UNSUPPORTED_CLIENT): the signed-in account is an \
         individual one (free, Google AI Pro or Ultra), which Google no longer serves through the Gemini CLI \
         since 2026-06-18. Use this server's API backend with a key instead (GEMINI_API_KEY from \
         https://aistudio.google.com/apikey, or Vertex AI: GOOGLE_GENAI_USE_VERTEXAI=true), or sign the Gemini \
         CLI in with an API key, Vertex AI, a Google Workspace account or a Gemini Code Assist Standard or \
         Enterprise licence",
    )
}

/// Finds the CLI: a path with a directory part is taken as is (made absolute), a bare name is
/// looked up in the `PATH` value, each directory in turn. Only regular files (symlinks followed)
/// that can be started count: on Unix, executable ones; on Windows, those [`windows_names`]
/// gives for `program` under `pathext` (the `PATHEXT` value; unused on Unix), so `gemini` finds
/// npm's `gemini.cmd` and never npm's extensionless `gemini`, a shell script Windows cannot run.
pub fn locate(
    program: &Path,
    path_var: Option<&OsStr>,
    pathext: Option<&OsStr>,
) -> Option<PathBuf> {
    if program.as_os_str().is_empty() {
        return None;
    }
    #[cfg(unix)]
    let names = {
        let _ = pathext;
        vec![program.to_path_buf()]
    };
    #[cfg(windows)]
    let names = windows_names(program, pathext);
    if program.components().count() > 1 {
        return names.into_iter().find(|p| is_executable(p)).map(absolute);
    }
    search(std::env::split_paths(path_var?), &names, is_executable)
}

/// The first `dir/name` that is `runnable`, directories first, then names in their order;
/// relative directories are skipped (they would depend on our working directory).
fn search(
    dirs: impl IntoIterator<Item = PathBuf>,
    names: &[PathBuf],
    runnable: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    dirs.into_iter()
        .filter(|dir| dir.is_absolute())
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|candidate| runnable(candidate))
}

/// The extensions Windows can start a program under through `std::process::Command`:
/// `CreateProcess` starts `.exe` and `.com` images, and std runs `.bat` and `.cmd` files through
/// `cmd.exe` (quoting their arguments safely since Rust 1.77).
const RUNNABLE: [&str; 4] = [".com", ".exe", ".bat", ".cmd"];

/// The names `program` is tried under on Windows, in order: as given when its extension is one
/// of [`RUNNABLE`]; otherwise with each extension of `pathext` (`PATHEXT`, `;`-separated) that is
/// runnable, in its order, or with all four (`PATHEXT`'s default order) when it names none.
/// Extensions `PATHEXT` may add that `cmd.exe` opens through another program (`.js`, `.ps1`,
/// `.vbs`) are left out: they cannot be started directly. Pure, so tested on every platform.
pub fn windows_names(program: &Path, pathext: Option<&OsStr>) -> Vec<PathBuf> {
    let runnable = |ext: &str| RUNNABLE.iter().any(|r| r.eq_ignore_ascii_case(ext));
    let has = program
        .extension()
        .and_then(OsStr::to_str)
        .is_some_and(|ext| runnable(&format!(".{ext}")));
    if has {
        return vec![program.to_path_buf()];
    }
    let listed: Vec<String> = pathext
        .and_then(OsStr::to_str)
        .unwrap_or_default()
        .split(';')
        .map(str::trim)
        .filter(|ext| runnable(ext))
        .map(str::to_ascii_lowercase)
        .collect();
    let exts = if listed.is_empty() {
        RUNNABLE.iter().map(|e| e.to_string()).collect()
    } else {
        listed
    };
    exts.into_iter()
        .map(|ext| {
            let mut name = program.as_os_str().to_os_string();
            name.push(ext);
            PathBuf::from(name)
        })
        .collect()
}

/// An explicit path made absolute, its links resolved.
#[cfg(unix)]
fn absolute(path: PathBuf) -> PathBuf {
    std::fs::canonicalize(&path).unwrap_or(path)
}

/// An explicit path made absolute, not canonicalised: `canonicalize` gives a `\\?\` path, which
/// `cmd.exe` cannot run a batch file from.
#[cfg(windows)]
fn absolute(path: PathBuf) -> PathBuf {
    std::path::absolute(&path).unwrap_or(path)
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A regular file: Windows has no executable bit; the name's extension ([`windows_names`]) says
/// whether it can be started.
#[cfg(windows)]
fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn names(program: &str, pathext: Option<&str>) -> Vec<String> {
        windows_names(Path::new(program), pathext.map(OsStr::new))
            .into_iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn windows_names_follow_pathext_among_the_extensions_that_can_be_started() {
        let all = ["gemini.com", "gemini.exe", "gemini.bat", "gemini.cmd"];
        let cases: [(&str, Option<&str>, &[&str]); 8] = [
            // npm's shims: `gemini` (a shell script), `gemini.cmd`, `gemini.ps1`.
            ("gemini", Some(".COM;.EXE;.BAT;.CMD;.VBS;.JS;.PS1"), &all),
            (
                "gemini",
                Some(".PS1;.CMD;.EXE"),
                &["gemini.cmd", "gemini.exe"],
            ),
            (
                "gemini",
                Some(" .Cmd ; ;.exe;"),
                &["gemini.cmd", "gemini.exe"],
            ),
            ("gemini", None, &all),
            ("gemini", Some(".PS1;.JS"), &all),
            ("gemini.CMD", Some(".EXE"), &["gemini.CMD"]),
            ("C:\\npm\\gemini.exe", None, &["C:\\npm\\gemini.exe"]),
            (
                "gemini.js",
                Some(".EXE;.CMD"),
                &["gemini.js.exe", "gemini.js.cmd"],
            ),
        ];
        for (program, pathext, want) in cases {
            assert_eq!(names(program, pathext), want, "{program} under {pathext:?}");
        }
    }

    #[test]
    fn the_search_takes_directories_first_then_names_and_skips_relative_ones() {
        let first = tempfile::tempdir().unwrap();
        let second = tempfile::tempdir().unwrap();
        for (dir, file) in [
            (&first, "gemini"),
            (&first, "gemini.ps1"),
            (&first, "gemini.cmd"),
            (&second, "gemini.exe"),
        ] {
            std::fs::write(dir.path().join(file), "").unwrap();
        }
        let names = windows_names(Path::new("gemini"), Some(OsStr::new(".EXE;.CMD")));
        let is_file = |p: &Path| p.is_file();
        let dirs = || vec![first.path().to_path_buf(), second.path().to_path_buf()];
        assert_eq!(
            search(dirs(), &names, is_file),
            Some(first.path().join("gemini.cmd"))
        );
        let only_second = vec![PathBuf::from("relative"), second.path().to_path_buf()];
        assert_eq!(
            search(only_second, &names, is_file),
            Some(second.path().join("gemini.exe"))
        );
        let none = windows_names(Path::new("gemini"), Some(OsStr::new(".BAT")));
        assert_eq!(search(dirs(), &none, is_file), None);
    }

    #[cfg(unix)]
    #[test]
    fn on_unix_pathext_is_not_used() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let cmd = dir.path().join("gemini.cmd");
        std::fs::write(&cmd, "").unwrap();
        std::fs::set_permissions(&cmd, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = OsString::from(dir.path());
        assert_eq!(
            locate(Path::new("gemini"), Some(&path), Some(OsStr::new(".CMD"))),
            None
        );
        assert_eq!(
            locate(Path::new("gemini.cmd"), Some(&path), None),
            Some(cmd)
        );
    }

    #[cfg(windows)]
    #[test]
    fn on_windows_a_bare_or_extensionless_name_finds_the_cmd_shim_not_the_shell_script() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("gemini"), "#!/bin/sh\n").unwrap();
        std::fs::write(dir.path().join("gemini.cmd"), "@echo off\r\n").unwrap();
        let path = OsString::from(dir.path());
        let pathext = OsStr::new(".COM;.EXE;.BAT;.CMD;.PS1");
        let found = locate(Path::new("gemini"), Some(&path), Some(pathext));
        assert_eq!(found, Some(dir.path().join("gemini.cmd")));
        let explicit = locate(&dir.path().join("gemini"), None, Some(pathext));
        assert_eq!(explicit, Some(dir.path().join("gemini.cmd")));
        let named = locate(&dir.path().join("gemini.cmd"), None, None);
        assert_eq!(named, Some(dir.path().join("gemini.cmd")));
        std::fs::remove_file(dir.path().join("gemini.cmd")).unwrap();
        assert_eq!(
            locate(Path::new("gemini"), Some(&path), Some(pathext)),
            None
        );
    }
}

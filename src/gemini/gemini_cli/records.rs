//! The Gemini CLI's own record of a session, removed once our call is done with it.
//!
//! The CLI records every session it runs under its home (`GEMINI_CLI_HOME`, else the user's
//! home): `.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl` holds the prompt (our whole
//! request, the files we sent included), every answer and every tool result, with the session's
//! logs, tool outputs and plans beside it (`logs/session-<id>.jsonl`, `tool-outputs/session-<id>/`,
//! `<id>/`, `chats/<id>/`: `packages/core/src/utils/sessionOperations.ts`). The files are made
//! with the user's umask (0644) and kept for 30 days; no setting of the CLI 0.61.0 stops them.
//! Our thread store is the conversation's record, so after each call the CLI's copy of its
//! session is removed ([`Cleanup`]), and the project's directory there is made private (0700)
//! for the next call's copy while it lives.
//!
//! `<project>` is the short name the CLI gave its working directory (ours, never the project:
//! `gemini_cli::workspace`), found by the `.project_root` marker the CLI writes into it
//! (`packages/core/src/config/projectRegistry.ts`).

use std::path::{Path, PathBuf};

/// The marker naming the directory a project's records belong to.
const MARKER: &str = ".project_root";

/// The CLI's directory of records for `workdir` under `home`, if it made one.
fn project_dir(home: &Path, workdir: &Path) -> Option<PathBuf> {
    // Headless, the CLI names the directory it runs in as the system gives it (`process.cwd()`,
    // links resolved); over ACP, as the session's `cwd` names it (ours, as given).
    let canonical = std::fs::canonicalize(workdir).ok()?;
    let tmp = home.join(".gemini").join("tmp");
    std::fs::read_dir(tmp).ok()?.flatten().find_map(|entry| {
        let marker = std::fs::read_to_string(entry.path().join(MARKER)).ok()?;
        let named = Path::new(marker.trim());
        (same_path(named, &canonical) || same_path(named, workdir)).then(|| entry.path())
    })
}

/// On Windows both sides as shown (no `\\?\` prefix), ASCII case ignored: the CLI writes
/// `process.cwd()`, a canonical path has the verbatim prefix.
#[cfg(windows)]
fn same_path(a: &Path, b: &Path) -> bool {
    let (a, b) = (
        crate::collector::sandbox::shown(a),
        crate::collector::sandbox::shown(b),
    );
    a.to_string_lossy()
        .eq_ignore_ascii_case(&b.to_string_lossy())
}

#[cfg(not(windows))]
fn same_path(a: &Path, b: &Path) -> bool {
    a == b
}

/// A session id as the CLI writes it into a file name (`sanitizeFilenamePart`); `None` for one
/// that could name a directory of the project's own.
fn file_part(session: &str) -> Option<String> {
    let part: String = session
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let reserved = ["chats", "logs", "tool-outputs"];
    (!part.is_empty() && !reserved.iter().any(|r| r.eq_ignore_ascii_case(&part))).then_some(part)
}

/// Removes what the CLI recorded of `session` for `workdir` under `home`; returns how many
/// entries went. Missing files are not an error: a call that failed early recorded nothing.
pub(crate) fn remove_session(home: &Path, workdir: &Path, session: &str) -> usize {
    let (Some(dir), Some(part)) = (project_dir(home, workdir), file_part(session)) else {
        return 0;
    };
    private(&dir);
    let mut gone = 0;
    let chats = dir.join("chats");
    let short: String = part.chars().take(8).collect();
    for entry in std::fs::read_dir(&chats).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = name.starts_with("session-")
            && (name.ends_with(&format!("-{short}.jsonl"))
                || name.ends_with(&format!("-{short}.json")))
            && names_session(&entry.path(), session);
        if ours && std::fs::remove_file(entry.path()).is_ok() {
            gone += 1;
        }
    }
    for path in [
        chats.join(&part),
        dir.join("logs").join(format!("session-{part}.jsonl")),
        dir.join("tool-outputs").join(format!("session-{part}")),
        dir.join(&part),
    ] {
        let removed = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path),
            Ok(_) => std::fs::remove_file(&path),
            Err(_) => continue,
        };
        if removed.is_ok() {
            gone += 1;
        }
    }
    gone
}

/// Whether a record whose name carries `session`'s short id is that session's: its first line
/// names the session, or names none (the CLI re-creates a removed file with the records it
/// appends next, and all the sessions of our working directory are ours).
fn names_session(path: &Path, session: &str) -> bool {
    use std::io::{BufRead, Read};
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let mut first = String::new();
    // A metadata line is short; a longer one is a message, which names no session.
    let mut reader = std::io::BufReader::new(file).take(64 << 10);
    if reader.read_line(&mut first).is_err() {
        return true;
    }
    match serde_json::from_str::<serde_json::Value>(&first) {
        Ok(v) => v
            .get("sessionId")
            .and_then(|s| s.as_str())
            .is_none_or(|s| s == session),
        Err(_) => true,
    }
}

/// The project's directory of records made private, so the next call's record is this user's
/// alone while it lives.
fn private(dir: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(m) = std::fs::symlink_metadata(dir)
            && m.is_dir()
            && m.permissions().mode() & 0o077 != 0
        {
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
}

/// Removes one session's record when the call is done: [`Cleanup::run`] at its end, or, for a
/// call dropped mid-way, when it is dropped (off the runtime in both cases).
pub(crate) struct Cleanup {
    what: Option<(PathBuf, PathBuf, String)>,
}

impl Cleanup {
    /// The record of `session`, run in `workdir` under `home` (`None`: the CLI's home is
    /// unknown, nothing to remove).
    pub(crate) fn new(home: Option<&Path>, workdir: &Path, session: &str) -> Cleanup {
        Cleanup {
            what: home.map(|h| (h.to_path_buf(), workdir.to_path_buf(), session.to_string())),
        }
    }

    /// Removes the record now.
    pub(crate) async fn run(mut self) {
        if let Some((home, workdir, session)) = self.what.take() {
            let _ = tokio::task::spawn_blocking(move || removed(&home, &workdir, &session)).await;
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some((home, workdir, session)) = self.what.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn_blocking(move || removed(&home, &workdir, &session));
        }
    }
}

fn removed(home: &Path, workdir: &Path, session: &str) {
    let n = remove_session(home, workdir, session);
    tracing::debug!(
        session,
        entries = n,
        "removed the Gemini CLI's record of the session"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as the CLI 0.61.0 leaves it: the marker, the chat, its logs and tool outputs.
    fn recorded(home: &Path, workdir: &Path, slug: &str, session: &str) -> PathBuf {
        let dir = home.join(".gemini/tmp").join(slug);
        std::fs::create_dir_all(dir.join("chats")).unwrap();
        std::fs::write(
            dir.join(MARKER),
            std::fs::canonicalize(workdir)
                .unwrap()
                .display()
                .to_string(),
        )
        .unwrap();
        let chat = dir.join(format!(
            "chats/session-2026-12-01T10-00-{}.jsonl",
            &session[..8]
        ));
        std::fs::write(
            &chat,
            format!("{{\"sessionId\":\"{session}\",\"projectHash\":\"h\"}}\n{{\"id\":\"m\",\"type\":\"user\",\"content\":[{{\"text\":\"TASK\"}}]}}\n"),
        )
        .unwrap();
        std::fs::create_dir_all(dir.join(format!("tool-outputs/session-{session}"))).unwrap();
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        std::fs::write(dir.join(format!("logs/session-{session}.jsonl")), "TASK").unwrap();
        chat
    }

    #[test]
    fn a_sessions_record_goes_and_only_its_own() {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let ours = "0123abcd-1111-2222-3333-444455556666";
        let next = "0123abcd-9999-2222-3333-444455556666";
        let chat = recorded(home.path(), work.path(), "plain", ours);
        // Another session of ours with the same short id, and another project's session.
        let sibling = home
            .path()
            .join(".gemini/tmp/plain/chats/session-2026-12-01T11-00-0123abcd.jsonl");
        std::fs::write(&sibling, format!("{{\"sessionId\":\"{next}\"}}\n")).unwrap();
        let theirs = recorded(home.path(), other.path(), "other", ours);

        assert_eq!(remove_session(home.path(), work.path(), ours), 3);
        assert!(!chat.exists());
        let dir = home.path().join(".gemini/tmp/plain");
        assert!(!dir.join(format!("tool-outputs/session-{ours}")).exists());
        assert!(!dir.join(format!("logs/session-{ours}.jsonl")).exists());
        assert!(
            sibling.exists(),
            "another session of the directory was removed"
        );
        assert!(theirs.exists(), "another project's record was removed");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        // Nothing recorded, or a session id naming a directory of the project's own: nothing.
        assert_eq!(remove_session(home.path(), work.path(), ours), 0);
        assert_eq!(remove_session(home.path(), work.path(), "chats"), 0);
        assert!(dir.join("chats").exists());
    }
}

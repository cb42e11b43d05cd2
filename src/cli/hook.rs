//! `gemini-mcp hook install|uninstall`: the git pre-commit hook.
//!
//! The hook is a small POSIX shell script marked as ours by its second line, so `uninstall`
//! removes only our hook and `install` replaces only our hook unless `--force` is given (the
//! foreign hook is then kept as `pre-commit.bak`). It goes where git looks: `core.hooksPath` when
//! set (relative to the work tree), else the `hooks` folder of the common git directory (shared
//! by worktrees).
//!
//! The hook reviews what is about to be committed: `precommit --staged-only --max-depth 0`, with
//! `--index-file "$GIT_INDEX_FILE"` so that `git commit -a` and `git commit <paths>` (which stage
//! into a temporary index) are reviewed as committed. `git commit --no-verify` skips it once.

use std::path::{Path, PathBuf};

use git2::Repository;
use std::io::Write as _;

use super::flags::FailOn;

/// The line that marks a hook as ours.
pub const MARKER: &str = "# gemini-mcp pre-commit hook";

#[derive(Debug, Clone, clap::Subcommand)]
pub enum HookCommand {
    /// Write the git pre-commit hook (into core.hooksPath when set, else .git/hooks).
    Install {
        /// Fail the commit when a finding is at or above this severity.
        #[arg(long, value_enum, value_name = "SEVERITY", default_value_t = FailOn::High)]
        fail_on: FailOn,
        /// Replace an existing pre-commit hook that is not ours (it is kept as pre-commit.bak).
        #[arg(long)]
        force: bool,
        /// Ask several models for each review and merge their findings (precommit's --models).
        #[arg(long, value_name = "MODEL[:STANCE]", value_delimiter = ',')]
        models: Option<Vec<String>>,
        /// With --models: fail only on findings N of the models report (precommit's --agree).
        #[arg(long, value_name = "N", requires = "models", value_parser = clap::value_parser!(u32).range(2..=5))]
        agree: Option<u32>,
        /// The repository (or a directory in it).
        #[arg(long, short = 'p', value_name = "PATH", default_value = ".")]
        path: PathBuf,
    },
    /// Claude Code's PreToolUse hook on its Bash tool (the plugin's precommit review): reads the
    /// hook's JSON on stdin; before a `git commit`, Gemini reviews the pending changes and the
    /// command is stopped on findings at or above --fail-on (exit 2). Other commands pass (exit 0).
    ClaudeCode {
        /// Stop the commit when a finding is at or above this severity.
        #[arg(long, value_enum, value_name = "SEVERITY", default_value_t = FailOn::High)]
        fail_on: FailOn,
    },
    /// Claude Code's PostToolUse hook on Edit, MultiEdit and Write (the plugin's review while
    /// editing): Gemini reviews the lines just changed, on the flex tier, at most once a window
    /// per file, under a ceiling; its findings reach Claude as additional context. Never blocks
    /// (always exit 0).
    ClaudeCodeEdit(super::edit_hook::EditReview),
    /// Remove the pre-commit hook, if it is ours.
    Uninstall {
        /// The repository (or a directory in it).
        #[arg(long, short = 'p', value_name = "PATH", default_value = ".")]
        path: PathBuf,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("{path} is not in a git repository: {message}")]
    NotARepository { path: String, message: String },
    #[error("{path} is a bare repository: it has no commits to hook into")]
    Bare { path: String },
    #[error(
        "{path} already exists and is not a gemini-mcp hook; pass --force to replace it (it will be kept as {backup})"
    )]
    Exists { path: String, backup: String },
    #[error("{path} is not a gemini-mcp hook; it was left in place")]
    NotOurs { path: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot read the git configuration: {0}")]
    Config(String),
    #[error("--models: {0}")]
    Models(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> HookError + '_ {
    move |source| HookError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// What `install` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Installed {
    Written(PathBuf),
    /// Our earlier hook was replaced.
    Updated(PathBuf),
    /// A foreign hook was replaced (`--force`); it was moved to the second path.
    Replaced(PathBuf, PathBuf),
}

/// Where git runs hooks from for the repository containing `path`.
pub fn hooks_dir(path: &Path) -> Result<PathBuf, HookError> {
    let repo = Repository::discover(path).map_err(|e| HookError::NotARepository {
        path: path.display().to_string(),
        message: e.message().to_string(),
    })?;
    let Some(workdir) = repo.workdir().map(Path::to_path_buf) else {
        return Err(HookError::Bare {
            path: path.display().to_string(),
        });
    };
    let config = repo
        .config()
        .map_err(|e| HookError::Config(e.message().to_string()))?;
    match config.get_path("core.hooksPath") {
        Ok(p) if p.is_absolute() => Ok(p),
        Ok(p) => Ok(workdir.join(p)),
        Err(_) => Ok(repo.commondir().join("hooks")),
    }
}

/// What fails the commit: findings at or above `fail_on`, and with several models (`models`,
/// checked when the hook is installed), only those `agree` of them report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookGate {
    pub fail_on: FailOn,
    pub models: Vec<String>,
    pub agree: Option<u32>,
}

impl HookGate {
    /// One model, failing at `fail_on`.
    pub fn plain(fail_on: FailOn) -> HookGate {
        HookGate {
            fail_on,
            models: Vec::new(),
            agree: None,
        }
    }

    /// The gate `hook install` was given: the models checked as precommit would check them.
    fn of(fail_on: FailOn, models: Option<Vec<String>>, agree: Option<u32>) -> Result<HookGate, HookError> {
        let models = models.unwrap_or_default();
        if !models.is_empty() {
            crate::seats::parse(&models).map_err(|e| HookError::Models(e.message))?;
        }
        Ok(HookGate {
            fail_on,
            models,
            agree,
        })
    }

    /// The flags the hook adds to `precommit`, quoted for the shell.
    fn flags(&self) -> String {
        let mut out = String::new();
        if !self.models.is_empty() {
            out.push_str(&format!(" --models '{}'", self.models.join(",").replace('\'', r"'\''")));
        }
        if let Some(n) = self.agree {
            out.push_str(&format!(" --agree {n}"));
        }
        out
    }
}

/// The hook script. `exe` is this binary; when it has moved, `gemini-mcp` on PATH is used.
pub fn script(exe: &Path, gate: &HookGate) -> String {
    script_for(&exe.display().to_string(), gate, cfg!(windows))
}

/// The hook for `exe`. On Windows git runs hooks with its own POSIX shell (Git for Windows'
/// bash), where `$PWD` is `/c/...`, a path our Windows build cannot read: the work tree is asked
/// for in Windows' form (`pwd -W`, `C:/...`) and the executable named with forward slashes.
fn script_for(exe: &str, gate: &HookGate, windows: bool) -> String {
    let exe = if windows {
        exe.replace('\\', "/")
    } else {
        exe.to_string()
    };
    let quoted = format!("'{}'", exe.replace('\'', r"'\''"));
    let here = if windows { "$(pwd -W)" } else { "$PWD" };
    format!(
        "#!/bin/sh\n\
         {MARKER}: installed by `gemini-mcp hook install`, removed by `gemini-mcp hook uninstall`.\n\
         # Reviews what is about to be committed with Gemini; fails on findings at or above {fail}.\n\
         # Unverified findings (their location not found in what was sent) are not counted; the\n\
         # review says how many. Add --fail-on-unverified to the command below to count them.\n\
         # Skip it once with `git commit --no-verify`.\n\
         bin={quoted}\n\
         [ -x \"$bin\" ] || bin=gemini-mcp\n\
         # git runs the hook at the top of the work tree: that is the project.\n\
         PROJECT_ROOT=\"{here}\"; export PROJECT_ROOT\n\
         # The flex tier (cheaper, slower) unless GEMINI_SERVICE_TIER says otherwise.\n\
         : \"${{GEMINI_SERVICE_TIER:=flex}}\"; export GEMINI_SERVICE_TIER\n\
         if [ -n \"$GIT_INDEX_FILE\" ]; then set -- --index-file \"$GIT_INDEX_FILE\"; else set --; fi\n\
         # GEMINI_MCP_DRY_RUN=1 git commit: show what would be sent, send nothing, commit.\n\
         [ -n \"$GEMINI_MCP_DRY_RUN\" ] && set -- \"$@\" --dry-run\n\
         exec \"$bin\" precommit --path . --staged-only --max-depth 0 --fail-on {fail}{more} \"$@\"\n",
        fail = gate.fail_on.as_str(),
        more = gate.flags(),
    )
}

fn is_ours(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|s| s.lines().take(3).any(|l| l.starts_with(MARKER)))
}

/// Writes the hook for the repository containing `path`.
pub fn install(
    path: &Path,
    gate: &HookGate,
    force: bool,
    exe: &Path,
) -> Result<Installed, HookError> {
    let dir = hooks_dir(path)?;
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let hook = dir.join("pre-commit");
    let mut outcome = Installed::Written(hook.clone());
    if std::fs::symlink_metadata(&hook).is_ok() {
        if is_ours(&hook) {
            outcome = Installed::Updated(hook.clone());
        } else {
            let backup = free_backup(&dir);
            if !force {
                return Err(HookError::Exists {
                    path: hook.display().to_string(),
                    backup: backup.display().to_string(),
                });
            }
            std::fs::rename(&hook, &backup).map_err(io(&hook))?;
            outcome = Installed::Replaced(hook.clone(), backup);
        }
    }
    // Write beside it, then rename: a half-written hook never runs.
    let tmp = dir.join(".pre-commit.gemini-mcp.tmp");
    std::fs::write(&tmp, script(exe, gate)).map_err(io(&tmp))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).map_err(io(&tmp))?;
    }
    std::fs::rename(&tmp, &hook).map_err(io(&hook))?;
    Ok(outcome)
}

fn free_backup(dir: &Path) -> PathBuf {
    let first = dir.join("pre-commit.bak");
    if std::fs::symlink_metadata(&first).is_err() {
        return first;
    }
    (1..)
        .map(|n| dir.join(format!("pre-commit.bak.{n}")))
        .find(|p| std::fs::symlink_metadata(p).is_err())
        .unwrap_or(first)
}

/// Removes our hook. `Ok(None)`: there was none.
pub fn uninstall(path: &Path) -> Result<Option<PathBuf>, HookError> {
    let hook = hooks_dir(path)?.join("pre-commit");
    if std::fs::symlink_metadata(&hook).is_err() {
        return Ok(None);
    }
    if !is_ours(&hook) {
        return Err(HookError::NotOurs {
            path: hook.display().to_string(),
        });
    }
    std::fs::remove_file(&hook).map_err(io(&hook))?;
    Ok(Some(hook))
}

/// Runs `hook install|uninstall`, printing what was done; returns the exit code.
pub fn run(cmd: HookCommand) -> u8 {
    let outcome = match cmd {
        HookCommand::ClaudeCode { fail_on } => return super::agent_hook::run(fail_on),
        HookCommand::ClaudeCodeEdit(opts) => return super::edit_hook::run(&opts),
        HookCommand::Install {
            fail_on,
            force,
            path,
            models,
            agree,
        } => {
            let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("gemini-mcp"));
            HookGate::of(fail_on, models, agree)
                .and_then(|gate| install(&path, &gate, force, &exe))
                .map(|done| match done {
                Installed::Written(p) => format!(
                    "Installed {} (fails the commit on findings at or above {}).",
                    p.display(),
                    fail_on.as_str()
                ),
                Installed::Updated(p) => format!(
                    "Updated {} (fails the commit on findings at or above {}).",
                    p.display(),
                    fail_on.as_str()
                ),
                Installed::Replaced(p, backup) => format!(
                    "Installed {}; the previous hook was moved to {}.",
                    p.display(),
                    backup.display()
                ),
            })
        }
        HookCommand::Uninstall { path } => uninstall(&path).map(|done| match done {
            Some(p) => format!("Removed {}.", p.display()),
            None => "No pre-commit hook is installed; nothing to remove.".to_string(),
        }),
    };
    match outcome {
        Ok(message) => {
            let mut out = crate::term::stdout();
            if out.line(&message).and_then(|()| out.flush()).is_err() {
                return super::output::COULD_NOT_RUN;
            }
            super::output::PASS
        }
        Err(e) => {
            crate::term::say!("gemini-mcp hook: {e}");
            super::output::COULD_NOT_RUN
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> (tempfile::TempDir, Repository) {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        (dir, repo)
    }

    #[test]
    fn on_windows_the_hook_names_the_work_tree_and_the_binary_as_windows_programs_read_them() {
        let text = script_for(
            r"C:\Users\Zoë O'Neil\bin\gemini-mcp.exe",
            &HookGate::plain(FailOn::High),
            true,
        );
        assert!(
            text.contains(r"bin='C:/Users/Zoë O'\''Neil/bin/gemini-mcp.exe'"),
            "{text}"
        );
        assert!(text.contains("PROJECT_ROOT=\"$(pwd -W)\""), "{text}");
        assert!(!text.contains("$PWD"), "{text}");
        let unix = script_for("/opt/gemini-mcp", &HookGate::plain(FailOn::High), false);
        assert!(!unix.contains("--models"), "{unix}");
        let gate = HookGate::of(FailOn::Medium, Some(vec!["pro:for".into(), "fl'ash".into()]), Some(2)).unwrap();
        let agreeing = script_for("/opt/gemini-mcp", &gate, false);
        assert!(
            agreeing.contains("--fail-on medium --models 'pro:for,fl'\\''ash' --agree 2 \"$@\""),
            "{agreeing}"
        );
        let e = HookGate::of(FailOn::High, Some(vec!["pro".into()]), None).unwrap_err();
        assert!(e.to_string().contains("at least two models"), "{e}");
        assert!(unix.contains("PROJECT_ROOT=\"$PWD\""), "{unix}");
        assert!(unix.contains("bin='/opt/gemini-mcp'"), "{unix}");
    }

    #[test]
    fn installs_replaces_only_its_own_and_uninstalls_only_its_own() {
        let (dir, repo) = repo();
        let exe = Path::new("/opt/it's here/gemini-mcp");
        let hook = repo.path().join("hooks/pre-commit");
        assert_eq!(
            install(dir.path(), &HookGate::plain(FailOn::High), false, exe).unwrap(),
            Installed::Written(hook.clone())
        );
        let text = std::fs::read_to_string(&hook).unwrap();
        assert!(text.starts_with("#!/bin/sh\n"));
        assert!(text.contains("--fail-on high"), "{text}");
        // The default gate leaves unverified findings out, and the script says how to count them.
        assert!(
            !text.contains("--fail-on high --fail-on-unverified"),
            "{text}"
        );
        assert!(
            text.contains(
                "# Unverified findings (their location not found in what was sent) are not counted"
            ),
            "{text}"
        );
        assert!(
            text.contains(r"bin='/opt/it'\''s here/gemini-mcp'"),
            "{text}"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&hook).unwrap().permissions().mode();
            assert_eq!(mode & 0o111, 0o111, "{mode:o}");
        }
        // Our own hook is updated in place.
        assert_eq!(
            install(dir.path(), &HookGate::plain(FailOn::Critical), false, exe).unwrap(),
            Installed::Updated(hook.clone())
        );
        assert!(
            std::fs::read_to_string(&hook)
                .unwrap()
                .contains("--fail-on critical")
        );
        assert_eq!(uninstall(dir.path()).unwrap(), Some(hook.clone()));
        assert!(!hook.exists());
        assert_eq!(uninstall(dir.path()).unwrap(), None);

        // A foreign hook is refused, kept by uninstall, and backed up by --force.
        std::fs::write(&hook, "#!/bin/sh\nrun-my-linter\n").unwrap();
        let err = install(dir.path(), &HookGate::plain(FailOn::High), false, exe).unwrap_err();
        assert!(matches!(err, HookError::Exists { .. }), "{err}");
        assert!(err.to_string().contains("--force"), "{err}");
        assert_eq!(
            std::fs::read_to_string(&hook).unwrap(),
            "#!/bin/sh\nrun-my-linter\n"
        );
        assert!(matches!(
            uninstall(dir.path()).unwrap_err(),
            HookError::NotOurs { .. }
        ));
        assert!(hook.exists());
        let backup = repo.path().join("hooks/pre-commit.bak");
        assert_eq!(
            install(dir.path(), &HookGate::plain(FailOn::High), true, exe).unwrap(),
            Installed::Replaced(hook.clone(), backup.clone())
        );
        assert_eq!(
            std::fs::read_to_string(&backup).unwrap(),
            "#!/bin/sh\nrun-my-linter\n"
        );
        assert!(is_ours(&hook));
    }

    #[test]
    fn core_hooks_path_is_respected() {
        let (dir, repo) = repo();
        repo.config()
            .unwrap()
            .set_str("core.hooksPath", ".githooks")
            .unwrap();
        let sub = dir.path().join("src");
        std::fs::create_dir_all(&sub).unwrap();
        let done = install(&sub, &HookGate::plain(FailOn::Medium), false, Path::new("/bin/gemini-mcp")).unwrap();
        let want = std::fs::canonicalize(dir.path())
            .unwrap()
            .join(".githooks/pre-commit");
        let Installed::Written(got) = done else {
            panic!("{done:?}")
        };
        assert_eq!(std::fs::canonicalize(got).unwrap(), want);
        assert!(!repo.path().join("hooks/pre-commit").exists());
    }

    #[test]
    fn not_a_repository_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = install(dir.path(), &HookGate::plain(FailOn::High), false, Path::new("/x")).unwrap_err();
        assert!(matches!(err, HookError::NotARepository { .. }), "{err}");
    }
}

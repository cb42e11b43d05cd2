//! `gemini-mcp hook claude-code`: Claude Code's `PreToolUse` hook on its Bash tool (the plugin's
//! precommit review). Before the agent runs a command that commits with git, Gemini reviews the
//! pending changes of that repository (`precommit`, everything not yet committed: the agent often
//! stages and commits in one command) and findings at or above `--fail-on` stop the command —
//! Claude Code hands the review to the agent (exit 2). Any other command passes at once (exit 0).
//! A review that cannot run (no key, Gemini unreachable) does not stop the agent: the user is told
//! why (exit 1, Claude Code's non-blocking error).
//!
//! The agent's `--no-verify` does not skip it: the agent is the one typing it. The user turns the
//! review off in the plugin's settings. Only the project's repository (`CLAUDE_PROJECT_DIR`, else
//! the hook's directory: inside it, or the repository holding it) is reviewed: a commit elsewhere
//! (`git -C ~/other commit`) is not sent to Gemini, and the user is told.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::flags::FailOn;

/// Claude Code: exit 0 lets the tool run, 2 blocks it and shows stderr to the model, anything
/// else is a non-blocking error shown to the user.
const LET_RUN: u8 = 0;
const NOT_REVIEWED: u8 = 1;
const BLOCK: u8 = 2;

/// The hook's input is a small JSON object; more than this is not Claude Code's.
const MAX_INPUT: u64 = 1 << 20;

pub fn run(fail_on: FailOn) -> u8 {
    let mut input = String::new();
    if let Err(e) = std::io::stdin().take(MAX_INPUT).read_to_string(&mut input) {
        crate::term::say!("gemini-mcp hook claude-code: cannot read the hook's input: {e}");
        return NOT_REVIEWED;
    }
    let event: serde_json::Value = match serde_json::from_str(&input) {
        Ok(v) => v,
        Err(e) => {
            crate::term::say!(
                "gemini-mcp hook claude-code: the input is not Claude Code's hook JSON: {e}"
            );
            return NOT_REVIEWED;
        }
    };
    if event["tool_name"] != "Bash" {
        return LET_RUN;
    }
    let (Some(command), Some(cwd)) = (
        event["tool_input"]["command"].as_str(),
        event["cwd"].as_str(),
    ) else {
        return LET_RUN;
    };
    let Some(dir) = commit_in(command) else {
        return LET_RUN;
    };
    let dir = Path::new(cwd).join(dir.unwrap_or_default());
    // Not a repository: git will say so itself.
    let Some(top) = git2::Repository::discover(&dir)
        .ok()
        .and_then(|r| r.workdir().map(Path::to_path_buf))
    else {
        return LET_RUN;
    };
    // Only the project's own repository is sent to Gemini: a `git -C ~/elsewhere commit` must not
    // ship another repository's changes out of the machine.
    let project =
        std::env::var_os("CLAUDE_PROJECT_DIR").map_or_else(|| PathBuf::from(cwd), PathBuf::from);
    if !same_project(&top, &project) {
        crate::term::say!(
            "gemini-mcp: the commit in {} was not reviewed: it is outside the project {}",
            top.display(),
            project.display()
        );
        return NOT_REVIEWED;
    }
    review(&top, fail_on)
}

/// Whether the work tree `top` is the project's: inside it, or the repository that holds it.
fn same_project(top: &Path, project: &Path) -> bool {
    match (top.canonicalize(), project.canonicalize()) {
        (Ok(top), Ok(project)) => top.starts_with(&project) || project.starts_with(&top),
        _ => false,
    }
}

/// Runs `gemini-mcp precommit` on the work tree `top` (its own sandbox root) and turns its exit
/// code into the hook's.
fn review(top: &Path, fail_on: FailOn) -> u8 {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("gemini-mcp"));
    let out = Command::new(exe)
        .args([
            "precommit",
            "--path",
            ".",
            "--max-depth",
            "0",
            "--format",
            "text",
        ])
        .args(["--fail-on", fail_on.as_str()])
        .env("PROJECT_ROOT", top)
        .env("NO_COLOR", "1")
        .current_dir(top)
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            crate::term::say!("gemini-mcp hook claude-code: cannot run the review: {e}");
            return NOT_REVIEWED;
        }
    };
    let said = String::from_utf8_lossy(&out.stdout);
    match out.status.code().map(|c| c as u8) {
        Some(super::output::PASS) => LET_RUN,
        Some(super::output::FINDINGS) => {
            crate::term::say!(
                "{said}\nThe commit was stopped: Gemini's review of the pending changes found \
                 issues at or above `{}`. Fix them and commit again (the review runs again), or \
                 ask the user to turn the plugin's precommit review off.",
                fail_on.as_str()
            );
            BLOCK
        }
        _ => {
            crate::term::say!(
                "gemini-mcp: the pending changes were not reviewed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            NOT_REVIEWED
        }
    }
}

/// Whether the shell `command` runs `git commit`: `Some` with the directory given by `git -C`
/// (relative to the command's directory), if any. A heuristic over the command's words (no shell
/// is run): commands joined by `&&`, `||`, `;`, `|` or newlines, each maybe behind variable
/// assignments and `env`/`command`/`sudo`/`time`/`nice`/`exec`, with git's global options before
/// the subcommand.
fn commit_in(command: &str) -> Option<Option<String>> {
    command
        .split(['\n', ';', '|', '&', '(', ')'])
        .find_map(|segment| {
            let words: Vec<&str> = segment
                .split_whitespace()
                .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
                .collect();
            git_commit(&words)
        })
}

fn git_commit(words: &[&str]) -> Option<Option<String>> {
    const WRAPPERS: [&str; 6] = ["env", "command", "sudo", "time", "nice", "exec"];
    let start = words
        .iter()
        .position(|w| !w.contains('=') && !WRAPPERS.contains(w))?;
    if Path::new(words[start]).file_name()? != "git" {
        return None;
    }
    let mut dir = None;
    let mut rest = words[start + 1..].iter();
    while let Some(&w) = rest.next() {
        match w {
            "-C" => dir = rest.next().map(|d| d.to_string()),
            "-c" | "--git-dir" | "--work-tree" | "--namespace" => {
                rest.next();
            }
            w if w.starts_with('-') => {}
            "commit" => return Some(dir),
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_projects_own_repository_is_reviewed() {
        let dir = tempfile::tempdir().unwrap();
        let (project, sub, other) = (
            dir.path().join("project"),
            dir.path().join("project/sub"),
            dir.path().join("other"),
        );
        for d in [&sub, &other] {
            std::fs::create_dir_all(d).unwrap();
        }
        assert!(same_project(&project, &project));
        assert!(
            same_project(&sub, &project),
            "a repository inside the project"
        );
        assert!(
            same_project(&project, &sub),
            "the repository holding the project"
        );
        assert!(!same_project(&other, &project));
        assert!(!same_project(&project.join("../other"), &project));
        assert!(!same_project(&dir.path().join("missing"), &project));
    }

    #[test]
    fn commits_are_found_behind_chains_wrappers_and_global_options() {
        for (command, dir) in [
            ("git commit -m 'fix'", None),
            ("git add -A && git commit -m \"x\"", None),
            ("cd sub; GIT_AUTHOR_NAME=a git commit -am x", None),
            ("git -C ../other commit -m x", Some("../other")),
            ("git -c user.name=x --no-pager commit --amend", None),
            ("/usr/bin/git commit", None),
            ("env FOO=1 git commit -m x", None),
            ("cargo test\ngit commit -m done", None),
        ] {
            assert_eq!(commit_in(command), Some(dir.map(String::from)), "{command}");
        }
        for command in [
            "git status",
            "git log --grep commit",
            "echo git commit",
            "git show HEAD -- commit",
            "cargo commit",
            "gitk commit",
        ] {
            assert_eq!(commit_in(command), None, "{command}");
        }
    }
}

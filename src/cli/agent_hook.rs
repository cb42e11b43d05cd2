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
        Some(super::output::PASS) => {
            // Passed with unverified findings left uncounted: the user is told (stdout, shown
            // in Claude Code's transcript), the commit goes on.
            if let Some(line) = uncounted(&said) {
                let mut out = crate::term::stdout();
                let _ = out.line(format_args!(
                    "gemini-mcp: the commit was reviewed and passed; {line}"
                ));
            }
            LET_RUN
        }
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

/// The part of the review's last line that says how many unverified findings were not counted
/// (the gate's default), if any.
fn uncounted(review: &str) -> Option<&str> {
    review
        .lines()
        .rev()
        .find_map(|l| l.find(" unverified finding(s)").map(|_| l))
        .and_then(|l| l.split_once(").").map(|(_, rest)| rest.trim()))
        .filter(|rest| !rest.is_empty())
}

/// Whether the shell `command` runs `git commit`: `Some` with the directory given by `git -C`
/// (relative to the command's directory), if any. A heuristic over the command's words (no shell
/// is run, nothing is expanded): commands joined by `&&`, `||`, `;`, `|`, `&` or newlines, inside
/// `( … )`, `{ …; }`, `if`/`while`/`until`/`for` bodies, command substitutions and the `-c`
/// string of a shell (or `eval`'s words), each maybe behind variable assignments and prefixes
/// (`env`, `command`, `sudo`, `time`, `nice`, `nohup`, `timeout`, `xargs`, …), with git's global
/// options before the subcommand, including an alias given there (`-c alias.ci=commit`). What it
/// cannot see — a script that commits, an alias in git's configuration, a computed string — is
/// for git's own pre-commit hook (`gemini-mcp hook install`).
fn commit_in(command: &str) -> Option<Option<String>> {
    commit_in_depth(command, 0)
}

/// Shell strings nested deeper than this (`bash -c "sh -c '…'"`) are not looked into.
const MAX_NESTING: usize = 8;

fn commit_in_depth(command: &str, depth: usize) -> Option<Option<String>> {
    if depth > MAX_NESTING {
        return None;
    }
    let tokens = words::split(command);
    for segment in tokens.split(|t| t.is_none()) {
        let words: Vec<&words::Word> = segment.iter().flatten().collect();
        // A command substitution runs wherever it appears.
        for sub in words.iter().flat_map(|w| &w.subs) {
            if let Some(dir) = commit_in_depth(sub, depth + 1) {
                return Some(dir);
            }
        }
        if let Some(dir) = simple_command(&words, depth) {
            return Some(dir);
        }
    }
    None
}

/// Prefixes that run the command after them: the name, its options that take a value as the
/// next word, and how many operands come before the command.
const WRAPPERS: &[(&str, &[&str], usize)] = &[
    (
        "env",
        &["-u", "--unset", "-C", "--chdir", "-S", "--split-string"],
        0,
    ),
    ("command", &[], 0),
    ("builtin", &[], 0),
    ("exec", &["-a"], 0),
    (
        "sudo",
        &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"],
        0,
    ),
    ("doas", &["-u", "-C"], 0),
    ("time", &["-f", "-o", "--format", "--output"], 0),
    ("nice", &["-n", "--adjustment"], 0),
    ("ionice", &["-c", "-n", "-p"], 0),
    ("nohup", &[], 0),
    ("setsid", &[], 0),
    ("stdbuf", &["-i", "-o", "-e"], 0),
    ("timeout", &["-s", "--signal", "-k", "--kill-after"], 1),
    (
        "xargs",
        &[
            "-a",
            "-d",
            "-E",
            "-e",
            "-I",
            "-i",
            "-L",
            "-l",
            "-n",
            "-P",
            "-s",
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-procs",
            "--max-lines",
            "--max-chars",
        ],
        0,
    ),
];

/// Words that open or continue a compound command; what follows is a command.
const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "while", "until", "do", "!", "{", "}",
];

/// Shells whose `-c` string is a command.
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish"];

/// One command's words: `Some` when it runs `git commit`, directly or through a shell string.
fn simple_command(words: &[&words::Word], depth: usize) -> Option<Option<String>> {
    let mut rest = words;
    loop {
        let (first, tail) = rest.split_first()?;
        let name = first.text.as_str();
        if KEYWORDS.contains(&name) || is_assignment(name) {
            rest = tail;
        } else if let Some((_, valued, operands)) =
            WRAPPERS.iter().find(|(w, ..)| Some(*w) == base_name(name))
        {
            rest = skip_options(tail, valued, *operands);
        } else if name == "eval" {
            let text: Vec<&str> = tail.iter().map(|w| w.text.as_str()).collect();
            return commit_in_depth(&text.join(" "), depth + 1);
        } else if base_name(name).is_some_and(|n| SHELLS.contains(&n)) {
            return shell_string(tail).and_then(|s| commit_in_depth(s, depth + 1));
        } else if is_git(first) {
            return git_commit(tail, depth);
        } else {
            return None;
        }
    }
}

/// `NAME=value` before a command.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.bytes().all(|b| b == b'_' || b.is_ascii_alphanumeric())
            && !name.as_bytes()[0].is_ascii_digit()
    })
}

/// The last component of a command word (`/usr/bin/git` → `git`).
fn base_name(word: &str) -> Option<&str> {
    Path::new(word).file_name()?.to_str()
}

/// Whether the command word is git: by name, or the output of `$(which git)`,
/// `$(command -v git)` and the like.
fn is_git(word: &words::Word) -> bool {
    if base_name(&word.text) == Some("git") {
        return true;
    }
    let [sub] = word.subs.as_slice() else {
        return false;
    };
    let inner: Vec<String> = words::split(sub)
        .into_iter()
        .flatten()
        .map(|w| w.text)
        .collect();
    matches!(
        inner
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice(),
        ["which" | "type" | "whereis", .., "git"] | ["command", "-v" | "-V", "git"]
    )
}

/// The words after a prefix's options and operands.
fn skip_options<'a>(
    mut words: &'a [&'a words::Word],
    valued: &[&str],
    mut operands: usize,
) -> &'a [&'a words::Word] {
    while let Some((w, tail)) = words.split_first() {
        let w = w.text.as_str();
        if w == "--" {
            words = tail;
            break;
        }
        if w.starts_with('-') && w.len() > 1 {
            words = if valued.contains(&w) && !tail.is_empty() {
                &tail[1..]
            } else {
                tail
            };
        } else if is_assignment(w) || operands > 0 {
            operands = operands.saturating_sub(usize::from(!is_assignment(w)));
            words = tail;
        } else {
            break;
        }
    }
    words
}

/// A shell's command string: the first operand after an option word holding `c`
/// (`-c`, `-lc`, `-ec`), or `None` when the shell runs a script or reads its input.
fn shell_string<'a>(args: &'a [&'a words::Word]) -> Option<&'a str> {
    let mut saw_c = false;
    for w in args {
        let w = w.text.as_str();
        if w.starts_with("--") {
            continue;
        }
        if (w.starts_with('-') || w.starts_with('+')) && w.len() > 1 {
            saw_c |= w[1..].contains('c');
            continue;
        }
        return saw_c.then_some(w);
    }
    None
}

/// After `git`: its global options, then the subcommand. `Some` when it is `commit` (or an alias
/// given with `-c alias.X=…` that commits), with the `-C` directories joined.
fn git_commit(words: &[&words::Word], depth: usize) -> Option<Option<String>> {
    let mut dir: Option<std::path::PathBuf> = None;
    let mut aliases: Vec<(String, String)> = Vec::new();
    let mut rest = words.iter().map(|w| w.text.as_str());
    while let Some(w) = rest.next() {
        match w {
            "-C" => {
                let d = rest.next()?;
                dir = Some(dir.map_or_else(|| d.into(), |p| p.join(d)));
            }
            "-c" => {
                if let Some((key, value)) = rest.next().and_then(|kv| kv.split_once('='))
                    && let Some(name) = key.strip_prefix("alias.")
                {
                    aliases.push((name.to_string(), value.to_string()));
                }
            }
            "--git-dir" | "--work-tree" | "--namespace" | "--config-env" | "--super-prefix"
            | "--exec-path" => {
                rest.next();
            }
            w if w.starts_with('-') => {}
            sub => {
                let dir = || dir.as_ref().map(|d| d.to_string_lossy().into_owned());
                if sub == "commit" {
                    return Some(dir());
                }
                let (_, value) = aliases.iter().rev().find(|(n, _)| n == sub)?;
                if let Some(shell) = value.strip_prefix('!') {
                    return commit_in_depth(shell, depth + 1);
                }
                let first = words::split(value).into_iter().flatten().next()?;
                return (first.text == "commit").then(dir);
            }
        }
    }
    None
}

/// A small shell-word splitter for [`commit_in`]: quotes, escapes, comments, command
/// substitutions and the operators that end a command. Crates that split shell words
/// (`shlex`, `shell-words`) treat `;`, `&&`, `|` and `$(…)` as ordinary characters, which is
/// what this must see.
mod words {
    /// A word with its quotes removed, and the commands substituted in it (`$(…)`, `` `…` ``).
    #[derive(Debug, Default)]
    pub struct Word {
        pub text: String,
        pub subs: Vec<String>,
    }

    /// The words of `command`; `None` where an operator ends a command (`;`, `&`, `|`, `(`,
    /// `)`, a newline, and the `&&`, `||`, `;;` they make).
    pub fn split(command: &str) -> Vec<Option<Word>> {
        let mut out = Vec::new();
        let mut word: Option<Word> = None;
        let mut redirect = false;
        let chars: Vec<char> = command.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            match c {
                ' ' | '\t' => finish(&mut word, &mut out, &mut redirect),
                '\n' | ';' | '&' | '|' | '(' | ')' => {
                    finish(&mut word, &mut out, &mut redirect);
                    out.push(None);
                }
                '<' | '>' => {
                    // `2>&1`, `> file`, `<<EOF`: the fd number and the target are not words of
                    // the command.
                    if word
                        .as_ref()
                        .is_some_and(|w| w.text.bytes().all(|b| b.is_ascii_digit()))
                    {
                        word = None;
                    }
                    finish(&mut word, &mut out, &mut redirect);
                    while i + 1 < chars.len() && matches!(chars[i + 1], '<' | '>' | '&' | '-') {
                        i += 1;
                    }
                    redirect = true;
                }
                '#' if word.is_none() => {
                    while i + 1 < chars.len() && chars[i + 1] != '\n' {
                        i += 1;
                    }
                }
                '\\' => {
                    if let Some(&next) = chars.get(i + 1) {
                        i += 1;
                        if next != '\n' {
                            word.get_or_insert_with(Word::default).text.push(next);
                        }
                    }
                }
                '\'' => {
                    let w = word.get_or_insert_with(Word::default);
                    i += 1;
                    while i < chars.len() && chars[i] != '\'' {
                        w.text.push(chars[i]);
                        i += 1;
                    }
                }
                '"' => {
                    let w = word.get_or_insert_with(Word::default);
                    i += 1;
                    while i < chars.len() && chars[i] != '"' {
                        match chars[i] {
                            '\\' if matches!(chars.get(i + 1), Some('"' | '\\' | '$' | '`')) => {
                                i += 1;
                                w.text.push(chars[i]);
                            }
                            '$' | '`' => i = substitution(&chars, i, w) - 1,
                            c => w.text.push(c),
                        }
                        i += 1;
                    }
                }
                '$' | '`' => {
                    let w = word.get_or_insert_with(Word::default);
                    i = substitution(&chars, i, w) - 1;
                }
                c => word.get_or_insert_with(Word::default).text.push(c),
            }
            i += 1;
        }
        finish(&mut word, &mut out, &mut redirect);
        out
    }

    /// Ends the word being read: a command's word, or the target of a redirection (dropped).
    fn finish(word: &mut Option<Word>, out: &mut Vec<Option<Word>>, redirect: &mut bool) {
        if let Some(w) = word.take()
            && !std::mem::take(redirect)
        {
            out.push(Some(w));
        }
    }

    /// At `$` or `` ` `` in `chars[i]`: a command substitution is recorded in `w` (its text kept
    /// in the word as written); anything else is the character itself. Returns the index after it.
    fn substitution(chars: &[char], i: usize, w: &mut Word) -> usize {
        let (open, body_start) = match (chars[i], chars.get(i + 1)) {
            ('`', _) => ('`', i + 1),
            ('$', Some('(')) => ('(', i + 2),
            _ => {
                w.text.push(chars[i]);
                return i + 1;
            }
        };
        let end = if open == '`' {
            (body_start..chars.len())
                .find(|&j| chars[j] == '`' && chars[j - 1] != '\\')
                .unwrap_or(chars.len())
        } else {
            closing_paren(chars, body_start)
        };
        let body: String = chars[body_start..end].iter().collect();
        w.text.extend(&chars[i..(end + 1).min(chars.len())]);
        w.subs.push(body);
        end + 1
    }

    /// The index of the `)` closing a `$(` whose body starts at `start` (quotes and nested
    /// parentheses skipped), or the end of the text.
    fn closing_paren(chars: &[char], start: usize) -> usize {
        let (mut depth, mut j) = (0usize, start);
        while j < chars.len() {
            match chars[j] {
                '\\' => j += 1,
                '\'' => {
                    j += 1;
                    while j < chars.len() && chars[j] != '\'' {
                        j += 1;
                    }
                }
                '"' => {
                    j += 1;
                    while j < chars.len() && chars[j] != '"' {
                        j += usize::from(chars[j] == '\\') + 1;
                    }
                }
                '(' => depth += 1,
                ')' if depth == 0 => return j,
                ')' => depth -= 1,
                _ => {}
            }
            j += 1;
        }
        chars.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncounted_unverified_findings_are_found_in_the_review() {
        let review = "1. [HIGH] `a.rs:3` x\n\nPASS: no finding at or above high (--fail-on high). 2 unverified finding(s) at or above high not counted (--fail-on-unverified counts them).\n";
        assert_eq!(
            uncounted(review),
            Some(
                "2 unverified finding(s) at or above high not counted (--fail-on-unverified counts them)."
            )
        );
        assert_eq!(
            uncounted("PASS: no finding at or above high (--fail-on high).\n"),
            None
        );
    }

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

    /// The forms agents write that run `git commit` inside another command: a shell's `-c`
    /// string, grouping and compound commands, command substitution, an alias given on the
    /// command line, and the usual prefixes.
    #[test]
    fn wrapped_commits_are_found() {
        let mut missed = Vec::new();
        for (command, dir) in [
            ("bash -c \"git commit -m x\"", None),
            ("sh -c 'git commit -m x'", None),
            ("bash -lc 'cd sub && git commit -m x'", None),
            ("bash -lc 'git commit -am x'", None),
            ("zsh -e -c \"git commit\"", None),
            ("{ git commit -m x; }", None),
            ("{ git add .; git commit -m x; }", None),
            ("if cargo test; then git commit -am ok; fi", None),
            (
                "while false; do :; done; until true; do git commit; done",
                None,
            ),
            ("git -c alias.ci=commit ci -m x", None),
            ("git -c 'alias.ci=!git commit -q' ci", None),
            ("git ls-files -m | xargs git commit -m x", None),
            ("xargs -0 -n 1 git commit -m x < list", None),
            ("$(which git) commit -m x", None),
            ("`command -v git` commit -m x", None),
            ("echo \"$(git commit -m x)\"", None),
            ("nohup git commit -m x &", None),
            ("time git commit -m x", None),
            ("command git commit -m x", None),
            ("env -u HOME GIT_EDITOR=true git commit", None),
            ("timeout 60 git commit -m x", None),
            ("sudo -u bob git commit -m x", None),
            ("eval \"git commit -m x\"", None),
            ("! git commit -m x", None),
            ("(cd sub && git commit -m x)", None),
            ("bash -c \"sh -c 'git -C ../o commit'\"", Some("../o")),
            ("g\\it com\"mit\" -m x", None),
            ("git --git-dir=.git -C a -C b commit", Some("a/b")),
            ("git add . \\\n  && git commit -m x", None),
        ] {
            let found = commit_in(command);
            // A directory is joined as the platform joins paths.
            #[cfg(windows)]
            let found = found.map(|d| d.map(|d| d.replace('\\', "/")));
            if found != Some(dir.map(String::from)) {
                missed.push(format!("{command:?} -> {found:?}"));
            }
        }
        for command in [
            "bash -c 'git status'",
            "echo 'git commit'",
            "echo \"git commit\"",
            "grep -r 'git commit' docs # git commit",
            "git -c alias.ci=status ci",
            "xargs echo git commit",
            "printf '%s' \"$(git log --grep commit)\"",
            "cat <<'EOF' > notes.txt\nsee the commit\nEOF",
            "bash script.sh commit",
        ] {
            if let Some(dir) = commit_in(command) {
                missed.push(format!("{command:?} is no commit, yet -> {dir:?}"));
            }
        }
        assert!(missed.is_empty(), "{}", missed.join("\n"));
    }
}

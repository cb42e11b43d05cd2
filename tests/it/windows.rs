//! The Windows build (`x86_64-pc-windows-gnu`, cross-built by `.ci/run`) run under Wine: the
//! handshake and the tool list over stdio, and the exit when stdin closes; `chat` against the
//! stand-in Gemini on 127.0.0.1 with a thread continued by a second process (the embedded store
//! under a Windows path); the sandbox's Windows cases; precommit on a real repository.
//!
//! What Wine cannot make meaningful, and where it is covered instead: Wine shows a Unix symbolic
//! link as a plain file (no reparse attribute) and cannot make junctions (`mklink /J`) or
//! alternate data streams, so "a reparse point is never followed out of the roots" is checked
//! here only through the handle's final path (which names the link's target under Wine too), and
//! the refusal of streams, device names, trailing dots, device namespaces and drive-relative paths
//! is checked by their form (`collector::windows_path`'s unit tests, which run on every platform,
//! and the cases below, which go through the real Windows build).
//!
//! The Gemini CLI backend: `gemini` found on `PATH` as npm's `gemini.cmd` (Wine runs it with its
//! `cmd.exe`), started in a Job object, the prompt on its stdin, its answer in the `chat` reply;
//! a helper it left running ended with the job when it exited, and the CLI and its helper ended
//! when the server ends with the call in flight.
//!
//! The tests own their Wine prefix (`target/wine/prefix`), made once by `wineboot` and given the
//! stand-in `bcryptprimitives.dll` (`windows/bcryptprimitives.c`, built with mingw-w64), which
//! Wine 8 lacks and Rust's std needs. Wine's background processes inherit the first program's
//! stdout and stderr, so Wine's own output goes to files and the tests wait on the process, never
//! on the end of a pipe. A test whose `.exe`, `wine64` or mingw-w64 is missing prints why and
//! passes, unless `GEMINI_MCP_REQUIRE_WINDOWS=1` or `CI=true`, where their absence is a failure.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::fake_gemini::FakeGemini;

mod it_binary;

/// How long Wine may take to start the server and answer, or to end it, before the test fails.
const LIMIT: Duration = Duration::from_secs(120);

const MINGW_GCC: &str = "x86_64-w64-mingw32-gcc";

/// The cargo target directory the integration tests were built in.
fn target_dir() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_gemini-mcp"));
    bin.ancestors().nth(2).expect("target dir").to_path_buf()
}

pub(crate) fn required() -> bool {
    std::env::var("GEMINI_MCP_REQUIRE_WINDOWS").as_deref() == Ok("1")
        || std::env::var("CI").as_deref() == Ok("true")
}

/// `None` (after saying why) when `what` is missing and not required.
fn missing(what: String) -> Option<Wine> {
    if required() {
        panic!("GEMINI_MCP_REQUIRE_WINDOWS=1 or CI=true but {what}");
    }
    eprintln!("skipped: {what}");
    None
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Wine with the tests' prefix, and the `.exe` under test.
pub(crate) struct Wine {
    pub(crate) wine: PathBuf,
    pub(crate) prefix: PathBuf,
    pub(crate) exe: PathBuf,
}

/// The `.exe`, `wine64` (Debian installs it outside `PATH`) and the prepared prefix.
pub(crate) fn wine() -> Option<Wine> {
    let target = target_dir();
    let exe = target.join("x86_64-pc-windows-gnu/debug/gemini-mcp.exe");
    if !exe.is_file() {
        return missing(format!(
            "{} is not built (cargo build --target x86_64-pc-windows-gnu --bin gemini-mcp)",
            exe.display()
        ));
    }
    let Some(wine) = on_path("wine64").or_else(|| {
        let p = PathBuf::from("/usr/lib/wine/wine64");
        p.is_file().then_some(p)
    }) else {
        return missing("wine64 is not installed (apt-get install wine64)".into());
    };
    let Some(gcc) = on_path(MINGW_GCC) else {
        return missing(format!(
            "{MINGW_GCC} is not installed (apt-get install gcc-mingw-w64-x86-64)"
        ));
    };
    let prefix = target.join("wine/prefix");
    prepare(&wine, &gcc, &prefix);
    Some(Wine { wine, prefix, exe })
}

/// Makes the prefix once (`wineboot`), then builds the stand-in DLL into its `system32`.
fn prepare(wine: &Path, gcc: &Path, prefix: &Path) {
    let dll = prefix.join("drive_c/windows/system32/bcryptprimitives.dll");
    if dll.is_file() {
        return;
    }
    std::fs::create_dir_all(prefix).unwrap();
    let logs = prefix.parent().unwrap();
    let mut boot = Command::new(wine);
    boot.arg("wineboot").arg("-i");
    let status = run_logged(boot, prefix, &logs.join("wineboot"));
    assert!(status.success(), "wineboot failed: {status}");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/windows/bcryptprimitives.c");
    let built = dll.with_extension("dll.part");
    let out = Command::new(gcc)
        .args(["-shared", "-O2", "-o"])
        .arg(&built)
        .arg(&source)
        .arg("-ladvapi32")
        .output()
        .expect("run mingw-w64 gcc");
    assert!(
        out.status.success(),
        "building the stand-in bcryptprimitives.dll failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(&built, &dll).unwrap();
}

/// Wine's environment: the tests' prefix, no debug channels, no Mono or Gecko installer, and a
/// UTF-8 locale (Wine decodes Unix file names by the locale's charset).
pub(crate) fn wine_env(cmd: &mut Command, prefix: &Path) {
    cmd.env("WINEPREFIX", prefix)
        .env("LANG", "C.UTF-8")
        .env("WINEDEBUG", "-all")
        .env("WINEDLLOVERRIDES", "mscoree,mshtml=");
}

/// Runs `cmd` under Wine with its output in `<log>.out`/`<log>.err`, waiting on the process.
pub(crate) fn run_logged(mut cmd: Command, prefix: &Path, log: &Path) -> ExitStatus {
    wine_env(&mut cmd, prefix);
    let out = std::fs::File::create(log.with_extension("out")).unwrap();
    let err = std::fs::File::create(log.with_extension("err")).unwrap();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("start wine64");
    wait(child)
}

/// Waits for the process itself (not for its pipes to close), failing the test past [`LIMIT`].
fn wait(mut child: Child) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            panic!("the Wine process did not end within {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A Windows path for a Unix one, through Wine's `Z:` drive.
fn windows_path(p: &Path) -> String {
    format!("Z:{}", p.display()).replace('/', "\\")
}

/// The Windows server under Wine, spoken to over stdio.
struct Server {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    replies: mpsc::Receiver<String>,
    stderr: PathBuf,
    next_id: u64,
}

impl Server {
    /// Starts the `.exe` on `root` (the project) with `vars` over the tests' defaults (an empty
    /// value removes the variable), and completes the MCP handshake.
    fn start(w: &Wine, root: &Path, vars: &[(&str, String)]) -> Server {
        let mut cmd = Command::new(&w.wine);
        cmd.arg(&w.exe)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", root.join(".home"))
            .env("GEMINI_MCP_STATE_DIR", windows_path(&root.join(".state")))
            .env("PROJECT_ROOT", windows_path(root))
            .env("GEMINI_MCP_LOG", "warn")
            .env("GEMINI_API_KEY", crate::support::mcp::KEY)
            .env(
                "GEMINI_CLI_PATH",
                windows_path(&root.join(".no-gemini-cli")),
            )
            .current_dir(root);
        for (k, v) in vars {
            if v.is_empty() {
                cmd.env_remove(k);
            } else {
                cmd.env(k, v);
            }
        }
        wine_env(&mut cmd, &w.prefix);
        let stderr = root.join(format!(".server-{}.err", std::process::id()));
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("start wine64");
        // Lines read off the server's stdout; the reader never waits for the pipe's end.
        let (lines, replies) = mpsc::channel::<String>();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut server = Server {
            child,
            stdin,
            replies,
            stderr,
            next_id: 1,
        };
        let init = server.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "wine-test", "version": "1"}}),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "gemini-mcp-server");
        assert_eq!(
            init["result"]["serverInfo"]["version"],
            env!("CARGO_PKG_VERSION")
        );
        server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, m: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{m}").and_then(|()| stdin.flush()).unwrap();
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Sends a request and returns its reply (the whole JSON-RPC message).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let start = Instant::now();
        loop {
            let left = LIMIT.saturating_sub(start.elapsed());
            let line = self.replies.recv_timeout(left).unwrap_or_else(|_| {
                panic!("no reply {id} within {LIMIT:?}; stderr: {}", self.stderr())
            });
            let m: Value = serde_json::from_str(&line).expect("a JSON-RPC line on stdout");
            if m["id"] == json!(id) {
                return m;
            }
        }
    }

    /// Calls a tool; the reply (a result or an error).
    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
    }

    /// Closes stdin and waits for the server to end; it must end cleanly.
    fn close(mut self) {
        drop(self.stdin.take());
        let status = wait(self.child);
        assert!(
            status.success(),
            "the server did not end cleanly when stdin closed: {status}; stderr: {}",
            std::fs::read_to_string(&self.stderr).unwrap_or_default()
        );
    }
}

/// A tool result's text blocks, joined.
fn text(reply: &Value) -> String {
    reply["result"]["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[test]
fn the_windows_build_answers_initialize_and_tools_list_and_ends_when_stdin_closes() {
    let Some(w) = wine() else { return };
    let dir = crate::support::project::with(&[crate::support::project::MAIN_RS]);
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let mut server = Server::start(&w, &root, &[("GEMINI_MCP_STORE", "memory".into())]);
    let list = server.request("tools/list", json!({}));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "analyze",
            "chat",
            "codereview",
            "debug",
            "investigate",
            "listmodels",
            "precommit",
            "thinkdeep"
        ]
    );
    server.close();
}

#[test]
fn chat_reaches_the_stand_in_gemini_and_threads_are_shared_by_two_live_processes() {
    let Some(w) = wine() else { return };
    let fake = FakeGemini::start();
    // A project under a non-ASCII name; the store where Windows keeps it by default
    // (%LOCALAPPDATA%, which Wine sets to its prefix's user folder).
    let base = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(base.path())
        .unwrap()
        .join("Zoë-проект");
    crate::support::project::write(
        &root,
        "src/main.rs",
        "fn main() { println!(\"wine-marker-7f3a\"); }\n",
    );
    let vars = [
        ("GEMINI_BASE_URL", fake.base_url()),
        ("GEMINI_MCP_STATE_DIR", String::new()),
    ];

    // Both processes live at once, on one store.
    let mut first = Server::start(&w, &root, &vars);
    let mut second = Server::start(&w, &root, &vars);
    let reply = first.call(
        "chat",
        json!({"prompt": "What does main print?", "files": ["src\\main.rs"]}),
    );
    assert!(
        text(&reply).contains("FAKE-REPLY"),
        "{reply}; stderr: {}",
        first.stderr()
    );
    let id = reply["result"]["structuredContent"]["continuation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no continuation_id: {reply}"))
        .to_string();
    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 1);
    let body = &sent[0].raw_body;
    assert!(body.contains("wine-marker-7f3a"), "the file was not sent");
    assert!(body.contains("main.rs"), "the file's name was not sent");

    // The second process continues the thread the first began, and the first sees its turn.
    let reply = second.call(
        "chat",
        json!({"prompt": "And what else?", "continuation_id": id}),
    );
    assert!(text(&reply).contains("turns=2"), "{reply}");
    assert_eq!(
        reply["result"]["structuredContent"]["continuation_id"],
        json!(id)
    );
    let reply = first.call(
        "chat",
        json!({"prompt": "Summarise.", "continuation_id": id}),
    );
    assert!(text(&reply).contains("turns=3"), "{reply}");
    first.close();
    second.close();

    let users = w.prefix.join("drive_c/users");
    let stores: Vec<PathBuf> = std::fs::read_dir(&users)
        .unwrap()
        .filter_map(|u| {
            let db = u
                .ok()?
                .path()
                .join("AppData/Local/gemini-mcp/threads.sqlite3");
            db.is_file().then_some(db)
        })
        .collect();
    assert!(
        !stores.is_empty(),
        "no store under %LOCALAPPDATA%\\gemini-mcp in {}",
        users.display()
    );
}

/// Text that must never reach Gemini, a reply or an error: in secret files and outside the root.
const CANARY: &str = "CANARY-wine-3e9d";

/// The short (8.3) name Wine gives `name` in `dir`, as its `cmd`'s `dir /x` lists it.
fn short_name(w: &Wine, dir: &Path, name: &str) -> String {
    let log = dir.join(format!(".short-{}", std::process::id()));
    let mut cmd = Command::new(&w.wine);
    cmd.args(["cmd", "/c", "dir", "/x"]).current_dir(dir);
    let status = run_logged(cmd, &w.prefix, &log);
    assert!(status.success(), "cmd failed: {status}");
    let out = std::fs::read_to_string(log.with_extension("out")).unwrap();
    // `<date> <time> <size> <SHORT~1.EXT> <long name>`
    out.lines()
        .find_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            (words.last() == Some(&name) && words.len() >= 2)
                .then(|| words[words.len() - 2].to_string())
        })
        .unwrap_or_else(|| panic!("{name} is not listed by `dir /x`: {out}"))
}

#[test]
fn the_sandbox_refuses_what_windows_would_redirect_and_reads_what_it_should() {
    let Some(w) = wine() else { return };
    let fake = FakeGemini::start();
    let base = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(base.path()).unwrap();
    let root = base.join("proj");
    let outside = base.join("outside");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let write = |p: &Path, s: &str| std::fs::write(p, s).unwrap();
    write(&root.join("notes.txt"), "notes-ok-1c2d\n");
    write(&root.join(".ENV"), &format!("API={CANARY}-env\n"));
    write(&root.join("ID_RSA"), &format!("{CANARY}-rsa\n"));
    write(
        &root.join("credentials.json"),
        &format!("{{\"k\":\"{CANARY}-cred\"}}\n"),
    );
    write(&root.join("secret.env"), &format!("{CANARY}-secretenv\n"));
    write(&outside.join("outside.txt"), &format!("{CANARY}-outside\n"));
    std::os::unix::fs::symlink(outside.join("outside.txt"), root.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("dir-link")).unwrap();
    let short = short_name(&w, &root, "credentials.json");
    assert!(
        short.contains('~') && !short.eq_ignore_ascii_case("credentials.json"),
        "Wine gave no 8.3 alias: {short:?}"
    );

    let mut server = Server::start(
        &w,
        &root,
        &[
            ("GEMINI_BASE_URL", fake.base_url()),
            ("GEMINI_MCP_STORE", "memory".into()),
        ],
    );
    let ask = |server: &mut Server, path: &str| -> Value {
        let reply = server.call("chat", json!({"prompt": "Read it.", "files": [path]}));
        assert!(
            !reply.to_string().contains(CANARY),
            "{path}: the canary is in the reply: {reply}"
        );
        reply
    };
    // A refusal of the path itself, naming it and why.
    let refused = |server: &mut Server, path: &str, why: &str| {
        let reply = ask(server, path);
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(
            reply["error"]["code"] == json!(-32001) || reply["error"]["code"] == json!(-32602),
            "{path}: not refused: {reply}"
        );
        assert!(message.contains(why), "{path}: {message}");
    };
    // A secret by its name: refused, naming the rule.
    let secret = |server: &mut Server, path: &str| {
        let reply = ask(server, path);
        assert_eq!(reply["error"]["code"], json!(-32001), "{path}: {reply}");
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("looks like a secret file"),
            "{path}: {message}"
        );
    };

    // What should be read is read, under any case of its name.
    for path in ["notes.txt", "NOTES.TXT", "src\\..\\notes.txt"] {
        let reply = ask(&mut server, path);
        assert!(text(&reply).contains("FAKE-REPLY"), "{path}: {reply}");
        let last = fake.generate_requests().pop().unwrap();
        assert!(last.raw_body.contains("notes-ok-1c2d"), "{path}: not sent");
    }

    // Secrets by name, whatever the case or alias.
    for path in [
        ".env",
        ".ENV",
        "id_rsa",
        "Credentials.JSON",
        short.as_str(),
        "secret.env",
    ] {
        secret(&mut server, path);
    }
    // Forms Windows would rewrite into another file or a device.
    refused(&mut server, "secret.env.", "ends in a dot or a space");
    refused(&mut server, "secret.env ", "ends in a dot or a space");
    refused(&mut server, "secret.env::$DATA", "alternate data stream");
    refused(&mut server, "notes.txt:hidden", "alternate data stream");
    refused(&mut server, "CON", "device name");
    refused(&mut server, "con.txt", "device name");
    refused(&mut server, "src\\NUL.rs", "device name");
    refused(&mut server, "COM1.log", "device name");
    refused(
        &mut server,
        "C:notes.txt",
        "current directory of that drive",
    );
    refused(&mut server, "\\\\.\\pipe\\gemini", "device or pipe");
    refused(
        &mut server,
        "\\\\?\\GLOBALROOT\\Device\\Null",
        "must name a drive",
    );
    // Out of the root: through links (plain files to Windows under Wine, but the handle's final
    // path names the target), `..`, absolute and verbatim paths.
    let outside_secret = windows_path(&outside.join("outside.txt"));
    for path in [
        "link.txt".to_string(),
        "dir-link\\outside.txt".into(),
        "..\\outside\\outside.txt".into(),
        outside_secret.clone(),
        format!("\\\\?\\{outside_secret}"),
    ] {
        refused(&mut server, &path, "outside the project root");
    }
    // The verbatim form of a secret inside the root is still a secret.
    secret(
        &mut server,
        &format!("\\\\?\\{}", windows_path(&root.join("secret.env"))),
    );
    // A walk of the whole root reads the notes, and neither the secrets nor what the links lead
    // to: Wine lists a Unix link as a plain file or folder, and the handle's final path (the
    // link's target) is not the path checked, so the open fails as a change under us.
    let reply = ask(&mut server, ".");
    assert!(text(&reply).contains("FAKE-REPLY"), "{reply}");
    let skipped: Vec<(String, String)> = reply["result"]["structuredContent"]["files"]["skipped"]
        .as_array()
        .unwrap_or_else(|| panic!("no skipped files: {reply}"))
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().into(),
                f["reason"].as_str().unwrap().into(),
            )
        })
        .collect();
    for (path, reason) in [
        (".ENV", "secret"),
        ("ID_RSA", "secret"),
        ("credentials.json", "secret"),
        ("secret.env", "secret"),
        ("link.txt", "changed"),
        ("dir-link/outside.txt", "changed"),
    ] {
        assert!(
            skipped.contains(&(path.to_string(), reason.to_string())),
            "{path} not left out as {reason}: {skipped:?}"
        );
    }
    server.close();

    for r in fake.requests() {
        assert!(
            !r.raw_body.contains(CANARY),
            "the canary reached Gemini: {}",
            r.path
        );
    }
    let last = fake.generate_requests().pop().unwrap();
    assert!(
        last.raw_body.contains("notes-ok-1c2d"),
        "the walk did not read notes.txt"
    );
}

#[test]
fn precommit_reviews_a_crlf_repository_and_runs_nothing_it_configures() {
    let Some(w) = wine() else { return };
    let fake = FakeGemini::start();
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let repo = git2::Repository::init(&root).unwrap();
    let pwned = root.join("pwned.txt");
    {
        let mut cfg = repo.config().unwrap();
        cfg.set_str("user.name", "Test").unwrap();
        cfg.set_str("user.email", "test@example.com").unwrap();
        cfg.set_bool("core.autocrlf", true).unwrap();
        // Commands a repository may configure: none may run.
        let run = format!("cmd /c echo pwned > {}", windows_path(&pwned));
        cfg.set_str("core.fsmonitor", &run).unwrap();
        cfg.set_str("filter.evil.clean", &run).unwrap();
        cfg.set_str("filter.evil.smudge", &run).unwrap();
        cfg.set_str("diff.evil.textconv", &run).unwrap();
    }
    std::fs::write(root.join(".gitattributes"), "*.txt filter=evil diff=evil\n").unwrap();
    std::fs::write(
        root.join("lib.rs"),
        "pub fn add(a: u32, b: u32) -> u32 {\r\n    a + b\r\n}\r\n",
    )
    .unwrap();
    std::fs::write(root.join("notes.txt"), "first\r\n").unwrap();
    let mut index = repo.index().unwrap();
    for f in [".gitattributes", "lib.rs", "notes.txt"] {
        index.add_path(Path::new(f)).unwrap();
    }
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("Test", "test@example.com").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "first", &tree, &[])
        .unwrap();
    // The change: a CRLF file edited, another added.
    std::fs::write(
        root.join("lib.rs"),
        "pub fn add(a: u32, b: u32) -> u32 {\r\n    a - b // wine-change-5b1e\r\n}\r\n",
    )
    .unwrap();
    std::fs::write(root.join("notes.txt"), "first\r\nsecond\r\n").unwrap();

    let mut server = Server::start(
        &w,
        &root,
        &[
            ("GEMINI_BASE_URL", fake.base_url()),
            ("GEMINI_MCP_STORE", "memory".into()),
        ],
    );
    let reply = server.call("precommit", json!({"path": "."}));
    assert!(
        reply["error"].is_null(),
        "{reply}; stderr: {}",
        server.stderr()
    );
    server.close();
    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 1, "one review");
    let body = &sent[0].raw_body;
    assert!(body.contains("wine-change-5b1e"), "the change was not sent");
    assert!(body.contains("lib.rs"), "the file was not named");
    assert!(
        !pwned.exists(),
        "a command the repository configured was run"
    );
}

/// npm's shims for the Gemini CLI, as it installs them side by side: an extensionless shell
/// script (which Windows cannot start) and `gemini.cmd`. Ours records its argv and the prompt
/// read from stdin, leaves a helper running in the background (as Node may) once it has
/// started, then does `then`.
const GEMINI_SH: &str = "#!/bin/sh\necho 'the shell shim must not be run on Windows' >&2\nexit 9\n";
const GEMINI_CMD: &str = "@echo off\r\n\
echo %* > \"%~dp0argv.txt\"\r\n\
more > \"%~dp0stdin.txt\"\r\n\
start \"\" /b \"%~dp0helper.cmd\"\r\n\
:wait\r\n\
if not exist \"%~dp0started.txt\" goto wait\r\n";
/// Answers as `gemini -o json` does.
const ANSWER: &str = "echo {\"response\": \"WINE-REPLY: gemini.cmd answered\"}\r\n";
/// Works for a minute before answering.
const HANG: &str = "ping -n 60 127.0.0.1 > NUL\r\necho {\"response\": \"too late\"}\r\n";
/// The helper: says it started, then runs for ~30 s unless it is killed.
const HELPER_CMD: &str = "@echo off\r\n\
echo started > \"%~dp0started.txt\"\r\n\
ping -n 30 127.0.0.1 > NUL\r\n";

/// A directory of npm's shims for the Gemini CLI, on Wine's `PATH`.
struct Npm(tempfile::TempDir);

impl Npm {
    /// The shims, `gemini.cmd` ending with `then`.
    fn new(then: &str) -> Npm {
        let npm = tempfile::tempdir().unwrap();
        std::fs::write(npm.path().join("gemini"), GEMINI_SH).unwrap();
        std::fs::write(npm.path().join("gemini.cmd"), format!("{GEMINI_CMD}{then}")).unwrap();
        std::fs::write(npm.path().join("helper.cmd"), HELPER_CMD).unwrap();
        Npm(npm)
    }

    fn file(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }

    /// The server's environment: the CLI backend (no key), one process per call, `gemini` (the
    /// default `GEMINI_CLI_PATH`) looked up on the Windows `PATH`, to which Wine adds `WINEPATH`.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("GEMINI_BACKEND", "cli".into()),
            ("GEMINI_CLI_TRANSPORT", "headless".into()),
            ("GEMINI_API_KEY", String::new()),
            ("GEMINI_CLI_PATH", String::new()),
            ("GEMINI_MCP_STORE", "memory".into()),
            ("WINEPATH", windows_path(self.0.path())),
        ]
    }

    /// The processes running whose command line names this directory (Wine shows a Windows
    /// process's command line as its own; a process that ended shows none): the CLI's
    /// `cmd.exe` and the helper's.
    fn processes(&self) -> Vec<String> {
        let name = self
            .0
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .filter(|c| c.contains(&name))
            .collect()
    }

    /// Checks that the helper started and that no process of the CLI's is left within 10 s
    /// (the helper alone would run for ~30 s).
    fn assert_all_ended(&self) {
        assert!(
            self.file("started.txt").is_file(),
            "the helper never started"
        );
        let start = Instant::now();
        loop {
            let left = self.processes();
            if left.is_empty() {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "still running after the Gemini CLI ended: {left:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A `chat` call sent without waiting for its reply.
fn send_chat(s: &mut Server, id: u64) {
    s.send(
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "chat", "arguments": {"prompt": "Say hello from Wine"}}}),
    );
}

#[test]
fn the_windows_build_answers_chat_through_gemini_cmd_found_on_path_and_ends_what_it_left_running() {
    let Some(w) = wine() else { return };
    let dir = crate::support::project::with(&[crate::support::project::MAIN_RS]);
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let npm = Npm::new(ANSWER);
    let mut s = Server::start(&w, &root, &npm.env());
    let answer = s.call("chat", json!({"prompt": "Say hello from Wine"}));
    let text = text(&answer);
    assert!(
        text.contains("WINE-REPLY: gemini.cmd answered")
            && answer["result"]["isError"] != json!(true),
        "{answer}; stderr: {}",
        s.stderr()
    );
    let argv = std::fs::read_to_string(npm.file("argv.txt")).unwrap();
    assert!(
        argv.contains("-o json") && argv.contains("--policy"),
        "{argv}"
    );
    let stdin = std::fs::read_to_string(npm.file("stdin.txt")).unwrap();
    assert!(stdin.contains("Say hello from Wine"), "{stdin}");
    // The helper was ended with the CLI's Job object when the CLI exited.
    npm.assert_all_ended();
    s.close();
}

#[test]
fn the_windows_build_ending_with_a_gemini_cli_call_in_flight_ends_the_cli_and_its_helper() {
    let Some(w) = wine() else { return };
    let dir = crate::support::project::with(&[crate::support::project::MAIN_RS]);
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let npm = Npm::new(HANG);
    let mut s = Server::start(&w, &root, &npm.env());
    send_chat(&mut s, 100);
    let start = Instant::now();
    while !npm.file("started.txt").is_file() {
        assert!(
            start.elapsed() < LIMIT,
            "the Gemini CLI never started; stderr: {}",
            s.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Wine shows a process's command line in /proc a moment after it starts, later still on
    // loaded cores: the CLI and its helper are looked for until they show (the CLI works for a
    // minute, so both run all that time).
    let seen = Instant::now();
    let mut running = npm.processes();
    while running.len() < 2 && seen.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
        running = npm.processes();
    }
    assert!(
        running.len() >= 2,
        "the CLI and its helper run: {running:?}"
    );
    // The server ends on stdin's end with the call in flight; the CLI's Job object goes with it.
    s.close();
    npm.assert_all_ended();
}

/// The library's unit tests that must hold on Windows, as `libtest` filters: the parts whose
/// behaviour depends on the platform (files, paths, git through libgit2, the stores, the terminal,
/// signals, the audit log's lock and appends). They need neither redis-server nor Node.
const LIB_TESTS: &[&str] = &[
    "audit::",
    "collector::",
    "redact::",
    "config::",
    "store::",
    "term::",
    "echo::",
    "git::",
    "cli::",
    "shutdown::",
];

/// Among [`LIB_TESTS`], those that make a symbolic link: Wine 8's `CreateSymbolicLinkW` reports
/// success and makes nothing (the tests' link helper says so), so they run on Windows only.
/// (`explore::`'s tests, left out above, all start from a tree with a link.)
const LIB_TESTS_MAKING_LINKS: &[&str] = &[
    "cli::locations::tests::locations_outside_the_roots_are_dropped_and_lines_clamped",
    "collector::sandbox::tests::open_refuses_a_symlink_even_on_a_checked_path",
    "collector::tests::collector_images_follow_the_sandbox_rules",
    "collector::tests::collector_read_file_serves_other_readers_safely",
    "collector::tests::collector_refuses_paths_outside_the_root",
    "collector::tests::collector_sends_a_file_reached_twice_once",
    "collector::tests::collector_skips_a_file_that_changes_while_read",
    "collector::tests::collector_skips_walked_secret_files_and_refuses_named_ones",
    "collector::tests::collector_walk_reports_symlinks_out_and_ends_loops",
];

/// Among [`LIB_TESTS`], those that run the git CLI, which Wine's prefix lacks.
const LIB_TESTS_RUNNING_GIT: &[&str] = &[
    "cli::patch::tests::the_patch_applies_with_git",
    "cli::patch::tests::a_lone_cr_or_a_refused_path_never_corrupts_the_other_edits",
];

/// How long the library's tests may run under Wine.
const LIB_TESTS_LIMIT: Duration = Duration::from_secs(600);

/// The library's unit-test `.exe` (`cargo test --target x86_64-pc-windows-gnu --lib --no-run`,
/// as `.ci/run` builds it), refused (as missing) when stale.
fn lib_tests_exe() -> Option<PathBuf> {
    let build = "cargo test --target x86_64-pc-windows-gnu --lib --no-run";
    match fresh_exe("gemini_mcp_server-", &[]) {
        Ok(exe) => Some(exe),
        Err(why) => missing(format!("{why} ({build})")).and(None),
    }
}

/// The newest `deps/<prefix>*.exe` of the Windows debug build, or why there is none to run: none
/// built, or one older than a source of the library (`src`, `prompts`, the manifest, the build
/// script) or than a file of `also`, so that a stale build is never what passes.
fn fresh_exe(prefix: &str, also: &[PathBuf]) -> Result<PathBuf, String> {
    let deps = target_dir().join("x86_64-pc-windows-gnu/debug/deps");
    let built = |p: &Path| p.metadata().and_then(|m| m.modified()).ok();
    let newest = std::fs::read_dir(&deps)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with(prefix) && name.ends_with(".exe")
        })
        .filter_map(|p| Some((built(&p)?, p)))
        .max();
    let Some((exe_time, exe)) = newest else {
        return Err(format!("no {prefix}*.exe in {}", deps.display()));
    };
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sources = crate::support::walk(&manifest.join("src"))
        .into_iter()
        .chain(crate::support::walk(&manifest.join("prompts")))
        .chain(["Cargo.toml", "Cargo.lock", "build.rs"].map(|f| manifest.join(f)))
        .chain(also.iter().cloned());
    if let Some(newer) = sources.into_iter().find(|p| built(p) > Some(exe_time)) {
        return Err(format!(
            "{} is older than {}",
            exe.display(),
            newer.display()
        ));
    }
    Ok(exe)
}

/// The count in libtest's summary line (`test result: ok. 12 passed; 0 failed; …`).
fn libtest_count(summary: &str, what: &str) -> Option<u64> {
    let line = summary.lines().rfind(|l| l.starts_with("test result:"))?;
    line.split([';', '.'])
        .find_map(|part| part.trim().strip_suffix(what)?.trim().parse().ok())
}

#[test]
fn the_library_unit_tests_that_must_hold_on_windows_pass_under_wine() {
    let Some(w) = wine() else { return };
    let Some(exe) = lib_tests_exe() else { return };
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("lib-tests");
    let mut cmd = Command::new(&w.wine);
    cmd.arg(&exe).args(LIB_TESTS);
    for name in LIB_TESTS_MAKING_LINKS.iter().chain(LIB_TESTS_RUNNING_GIT) {
        cmd.args(["--skip", name]);
    }
    cmd.arg("--test-threads=2");
    wine_env(&mut cmd, &w.prefix);
    let child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(log.with_extension("out")).unwrap())
        .stderr(std::fs::File::create(log.with_extension("err")).unwrap())
        .spawn()
        .expect("start wine64");
    let status = wait_for(child, LIB_TESTS_LIMIT);
    let out = std::fs::read_to_string(log.with_extension("out")).unwrap_or_default();
    let err = std::fs::read_to_string(log.with_extension("err")).unwrap_or_default();
    let tail = |s: &str| {
        let start = (s.len().saturating_sub(6000)..s.len())
            .find(|&i| s.is_char_boundary(i))
            .unwrap_or(s.len());
        s[start..].to_string()
    };
    assert!(
        status.success(),
        "{} failed under Wine: {status}\n{}\n{}",
        exe.display(),
        tail(&out),
        tail(&err)
    );
    let passed = libtest_count(&out, "passed").unwrap_or(0);
    assert!(passed >= 100, "only {passed} tests ran:\n{}", tail(&out));
}

/// Waits for the process itself (not for its pipes to close), failing the test past `limit`.
fn wait_for(mut child: Child, limit: Duration) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("the Wine process did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

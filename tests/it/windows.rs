//! The Windows build (`x86_64-pc-windows-gnu`, cross-built by `.ci/run`) run under Wine: the
//! handshake and the tool list over stdio, and the exit when stdin closes; and the Gemini CLI
//! backend: `gemini` found on `PATH` as npm's `gemini.cmd` (Wine runs it with its `cmd.exe`),
//! started in a Job object, the prompt on its stdin, its answer in the `chat` reply, and a helper
//! it left running ended with the job when it exited; and the CLI and its helper ended when the
//! server ends with the call in flight.
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

/// How long Wine may take to start the server and answer, or to end it, before the test fails.
const LIMIT: Duration = Duration::from_secs(120);

const MINGW_GCC: &str = "x86_64-w64-mingw32-gcc";

/// The cargo target directory the integration tests were built in.
fn target_dir() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_gemini-mcp"));
    bin.ancestors().nth(2).expect("target dir").to_path_buf()
}

fn required() -> bool {
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
struct Wine {
    wine: PathBuf,
    prefix: PathBuf,
    exe: PathBuf,
}

/// The `.exe`, `wine64` (Debian installs it outside `PATH`) and the prepared prefix.
fn wine() -> Option<Wine> {
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

/// Wine's environment: the tests' prefix, no debug channels, no Mono or Gecko installer.
fn wine_env(cmd: &mut Command, prefix: &Path) {
    cmd.env("WINEPREFIX", prefix)
        .env("WINEDEBUG", "-all")
        .env("WINEDLLOVERRIDES", "mscoree,mshtml=");
}

/// Runs `cmd` under Wine with its output in `<log>.out`/`<log>.err`, waiting on the process.
fn run_logged(mut cmd: Command, prefix: &Path, log: &Path) -> ExitStatus {
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

/// The server under Wine over stdio, its replies read off stdout by a thread that never waits
/// for the pipe's end.
struct Session {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    replies: mpsc::Receiver<String>,
    stderr: PathBuf,
}

impl Session {
    /// Starts the `.exe` in `root` (the project) with the environment the tests share and `env`.
    fn start(w: &Wine, root: &Path, env: &[(&str, String)]) -> Session {
        let mut cmd = Command::new(&w.wine);
        cmd.arg(&w.exe)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", root.join(".home"))
            .env("GEMINI_MCP_STATE_DIR", windows_path(&root.join(".state")))
            .env("PROJECT_ROOT", windows_path(root))
            .env("GEMINI_MCP_STORE", "memory")
            .env("GEMINI_MCP_LOG", "warn")
            .current_dir(root);
        for (k, v) in env {
            cmd.env(k, v);
        }
        wine_env(&mut cmd, &w.prefix);
        let stderr = root.join(".server.err");
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("start wine64");
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
        Session {
            child,
            stdin,
            replies,
            stderr,
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn send(&mut self, m: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{m}").and_then(|()| stdin.flush()).unwrap();
    }

    /// The reply to request `id`, within [`LIMIT`].
    fn reply(&self, id: u64) -> Value {
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

    /// `initialize` (its reply returned) and `notifications/initialized`.
    fn initialize(&mut self) -> Value {
        self.send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "wine-test", "version": "1"}}}),
        );
        let init = self.reply(1);
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        init
    }

    /// Closes stdin and waits for the server to end, which must be clean.
    fn close(mut self) {
        drop(self.stdin.take());
        let stderr = self.stderr();
        let status = wait(self.child);
        assert!(
            status.success(),
            "the server did not end cleanly when stdin closed: {status}; stderr: {stderr}"
        );
    }
}

#[test]
fn the_windows_build_answers_initialize_and_tools_list_and_ends_when_stdin_closes() {
    let Some(w) = wine() else { return };
    let dir = crate::support::project::with(&[crate::support::project::MAIN_RS]);
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let mut s = Session::start(
        &w,
        &root,
        &[
            ("GEMINI_API_KEY", crate::support::mcp::KEY.to_string()),
            (
                "GEMINI_CLI_PATH",
                windows_path(&root.join(".no-gemini-cli")),
            ),
        ],
    );
    let init = s.initialize();
    assert_eq!(init["result"]["serverInfo"]["name"], "gemini-mcp-server");
    assert_eq!(
        init["result"]["serverInfo"]["version"],
        env!("CARGO_PKG_VERSION")
    );
    s.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let list = s.reply(2);
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
    s.close();
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

    /// The server's environment: the CLI backend, one process per call, `gemini` (the default
    /// `GEMINI_CLI_PATH`) looked up on the Windows `PATH`, to which Wine adds `WINEPATH`.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("GEMINI_BACKEND", "cli".into()),
            ("GEMINI_CLI_TRANSPORT", "headless".into()),
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

fn chat(s: &mut Session, id: u64) {
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
    let mut s = Session::start(&w, &root, &npm.env());
    s.initialize();
    chat(&mut s, 2);
    let answer = s.reply(2);
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
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
    let mut s = Session::start(&w, &root, &npm.env());
    s.initialize();
    chat(&mut s, 2);
    let start = Instant::now();
    while !npm.file("started.txt").is_file() {
        assert!(
            start.elapsed() < LIMIT,
            "the Gemini CLI never started; stderr: {}",
            s.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let running = npm.processes();
    assert!(
        running.len() >= 2,
        "the CLI and its helper run: {running:?}"
    );
    // The server ends on stdin's end with the call in flight; the CLI's Job object goes with it.
    s.close();
    npm.assert_all_ended();
}

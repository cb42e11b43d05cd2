//! The real clients people use — Claude Code, the Codex CLI, the Gemini CLI — each running our
//! binary over stdio as its MCP server, each driven by a scripted model behind a stand-in of its
//! model API. The assertions are on what each client handed its model as
//! the tool result: Gemini's answer, the `continuation_id`, a review's summary and findings.
//!
//! The clients are Node packages at pinned versions, installed by `.ci/install-clients` into
//! `GEMINI_MCP_CLIENTS_DIR` (default `target/clients`). A test whose client is missing prints
//! why and passes, unless `GEMINI_MCP_REQUIRE_CLIENTS=1` (CI), where a missing client fails.
//! Everything is offline: each client is pointed at a local stand-in, with telemetry, updates
//! and plugins off, and gets a private home.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::Hermetic as _;
use crate::support::anthropic_api::AnthropicApi;
use crate::support::fake_gemini::{FakeGemini, Recorded, Script};
use crate::support::mcp::{self, KEY};
use crate::support::responses_api::ResponsesApi;
use crate::support::scripted_model::{
    Brain, FINAL_TEXT, Received, ToolCall, calls_in_order, find_uuid,
};

/// How long one client run may take before it is killed and the test fails.
const RUN_LIMIT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Client {
    ClaudeCode,
    Codex,
    GeminiCli,
    /// The MCP Inspector's CLI mode.
    Inspector,
    /// The MCP Bundle tool (packs and checks the release's `.mcpb` bundles).
    Mcpb,
}

impl Client {
    fn bin_name(self) -> &'static str {
        match self {
            Client::ClaudeCode => "claude",
            Client::Codex => "codex",
            Client::GeminiCli => "gemini",
            Client::Inspector => "mcp-inspector",
            Client::Mcpb => "mcpb",
        }
    }
}

/// Where `.ci/install-clients` put the clients.
fn clients_dir() -> PathBuf {
    match std::env::var_os("GEMINI_MCP_CLIENTS_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/clients"),
    }
}

/// The client's executable and the `PATH` to run it with (the installed Node first, if any);
/// `None` (after saying so) when it is not installed and not required.
pub(crate) fn locate(client: Client) -> Option<(PathBuf, String)> {
    let dir = clients_dir();
    // npm's shims: `claude` on Unix, `claude.cmd` on Windows.
    let shim = if cfg!(windows) {
        format!("{}.cmd", client.bin_name())
    } else {
        client.bin_name().to_string()
    };
    let bin = dir.join("node_modules/.bin").join(shim);
    if !bin.exists() {
        let why = format!(
            "{} is not installed at {} (run .ci/install-clients, or set GEMINI_MCP_CLIENTS_DIR)",
            client.bin_name(),
            bin.display()
        );
        if std::env::var("GEMINI_MCP_REQUIRE_CLIENTS").as_deref() == Ok("1") {
            panic!("GEMINI_MCP_REQUIRE_CLIENTS=1 but {why}");
        }
        eprintln!("skipped: {why}");
        return None;
    }
    let path = std::env::var("PATH").unwrap_or_default();
    let node = dir.join("node_modules/node/bin");
    let path = if node
        .join(if cfg!(windows) { "node.exe" } else { "node" })
        .exists()
    {
        prepend_path(&node, &path)
    } else {
        path
    };
    Some((bin, path))
}

/// `dir` first on the search path `path`, with the platform's separator.
fn prepend_path(dir: &Path, path: &str) -> String {
    let dirs = std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(path));
    std::env::join_paths(dirs)
        .expect("a directory without the path separator")
        .to_string_lossy()
        .into_owned()
}

/// A project for the server to work in, and the fake Gemini API behind the server.
struct Project {
    dir: tempfile::TempDir,
    gemini: FakeGemini,
}

impl Project {
    fn new() -> Project {
        Project {
            dir: crate::support::project::with(&[crate::support::project::BUGGY_ADD]),
            gemini: FakeGemini::start(),
        }
    }

    fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path()).unwrap()
    }

    /// The environment the client's configuration gives our server: hermetic, like the other
    /// tests' (support::mcp::command).
    fn server_env(&self) -> Vec<(&'static str, String)> {
        let root = self.root();
        vec![
            ("GEMINI_API_KEY", KEY.to_string()),
            ("GEMINI_BASE_URL", self.gemini.base_url()),
            ("PROJECT_ROOT", root.display().to_string()),
            ("HOME", root.join(".home").display().to_string()),
            (
                "GEMINI_MCP_STATE_DIR",
                root.join(".state").display().to_string(),
            ),
            ("GEMINI_MCP_STORE", "memory".to_string()),
            ("GEMINI_MCP_LOG", "warn".to_string()),
            (
                "GEMINI_CLI_PATH",
                root.join(".no-gemini-cli").display().to_string(),
            ),
        ]
    }

    fn server_env_json(&self) -> Value {
        Value::Object(
            self.server_env()
                .into_iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect(),
        )
    }

    /// Runs `client` in this project with `brain` as its model; the tool results its model
    /// received, or `None` when the client is not installed.
    fn drive(&self, client: Client, brain: Brain) -> Option<Vec<Received>> {
        self.drive_logged(client, brain)
            .map(|(received, _)| received)
    }

    /// [`Project::drive`], with the client's own debug log (Claude Code's; empty for the others).
    fn drive_logged(&self, client: Client, brain: Brain) -> Option<(Vec<Received>, String)> {
        let (bin, path) = locate(client)?;
        let home = tempfile::tempdir().unwrap();
        let received = match client {
            Client::ClaudeCode => {
                self.drive_claude(&bin, &path, home.path(), brain, "mcp__gemini__*")
            }
            Client::Codex => self.drive_codex(&bin, &path, home.path(), brain),
            Client::GeminiCli => self.drive_gemini_cli(&bin, &path, home.path(), brain),
            Client::Inspector | Client::Mcpb => unreachable!("{client:?} drives no model"),
        };
        let log = std::fs::read_to_string(home.path().join("claude-debug.log")).unwrap_or_default();
        Some((received, log))
    }

    /// Claude Code in this project, with `allowed` the tools it may use unasked.
    fn drive_claude(
        &self,
        bin: &Path,
        path: &str,
        home: &Path,
        brain: Brain,
        allowed: &str,
    ) -> Vec<Received> {
        let api = AnthropicApi::start(brain);
        let config = home.join("mcp.json");
        let server = json!({"mcpServers": {"gemini": {
            "type": "stdio", "command": mcp::binary(), "args": [], "env": self.server_env_json()}}});
        std::fs::write(&config, server.to_string()).unwrap();
        let mut cmd = client_command(bin);
        cmd.args(["-p", "Ask Gemini, then report what it said."])
            .arg("--mcp-config")
            .arg(&config)
            .args([
                "--strict-mcp-config",
                "--allowedTools",
                allowed,
                "--output-format",
                "stream-json",
                "--verbose",
            ])
            .arg("--debug-file")
            .arg(home.join("claude-debug.log"))
            .envs(private_home(home))
            .env("CLAUDE_CONFIG_DIR", home.join(".claude"))
            .env("ANTHROPIC_BASE_URL", api.base_url())
            .env("ANTHROPIC_API_KEY", "sk-ant-stand-in")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            // MCP tools listed up front rather than behind Claude Code's tool search.
            .env("ENABLE_TOOL_SEARCH", "false");
        run(cmd, path, &self.root(), home, "claude");
        api.received()
    }

    fn drive_codex(&self, bin: &Path, path: &str, home: &Path, brain: Brain) -> Vec<Received> {
        let api = ResponsesApi::start(brain);
        let codex_home = home.join(".codex");
        std::fs::create_dir_all(&codex_home).unwrap();
        // TOML basic strings take JSON string escapes.
        let q = |s: &str| json!(s).to_string();
        let env: String = self
            .server_env()
            .iter()
            .map(|(k, v)| format!("{k} = {}\n", q(v)))
            .collect();
        let config = format!(
            r#"model = "gpt-5"
model_provider = "stand_in"
approval_policy = "never"
sandbox_mode = "read-only"

[model_providers.stand_in]
name = "stand-in"
base_url = {base}
env_key = "STAND_IN_API_KEY"
wire_api = "responses"

[features]
plugins = false
remote_plugin = false

[analytics]
enabled = false

[mcp_servers.gemini]
command = {server}
tool_timeout_sec = 100

[mcp_servers.gemini.env]
{env}"#,
            base = q(&api.base_url()),
            server = q(mcp::binary()),
        );
        std::fs::write(codex_home.join("config.toml"), config).unwrap();
        let mut cmd = client_command(bin);
        cmd.args(["exec", "--skip-git-repo-check", "--json", "-C"])
            .arg(self.root())
            .arg("Ask Gemini, then report what it said.")
            .envs(private_home(home))
            .env("CODEX_HOME", &codex_home)
            .env("STAND_IN_API_KEY", "stand-in");
        run(cmd, path, &self.root(), home, "codex");
        api.received()
    }

    fn drive_gemini_cli(&self, bin: &Path, path: &str, home: &Path, brain: Brain) -> Vec<Received> {
        // The Gemini CLI's own model is a second fake Gemini whose answers are scripted by
        // `brain`: a `functionCall` of our tool, then text.
        let model = FakeGemini::start();
        let received = Arc::new(Mutex::new(Vec::new()));
        let seen = received.clone();
        model.respond_with(move |req: &Recorded| {
            if !req.is_stream() || !offers_gemini_cli_tools(&req.body) {
                return None;
            }
            let results = function_responses(&req.body);
            let next = brain(&results);
            if !results.is_empty() {
                *seen.lock().unwrap() = results;
            }
            Some(match next {
                Some(call) => function_call(&call),
                None => Script::text(FINAL_TEXT),
            })
        });
        gemini_cli_home(home);
        let project_settings = self.root().join(".gemini");
        std::fs::create_dir_all(&project_settings).unwrap();
        let servers = json!({"mcpServers": {"gemini": {
            "command": mcp::binary(), "args": [], "env": self.server_env_json(), "trust": true}}});
        std::fs::write(project_settings.join("settings.json"), servers.to_string()).unwrap();
        let mut cmd = client_command(bin);
        cmd.args(["-p", "Ask Gemini, then report what it said."])
            .args(["-o", "json", "-m", "gemini-2.5-flash"])
            .envs(private_home(home))
            .env("TERM", "dumb")
            .env("GEMINI_CLI_NO_RELAUNCH", "true")
            .env("GEMINI_API_KEY", "stand-in")
            .env("GOOGLE_GEMINI_BASE_URL", model.base_url())
            .env("GEMINI_CLI_TRUST_WORKSPACE", "true");
        run(cmd, path, &self.root(), home, "gemini");
        received.lock().unwrap().clone()
    }
}

fn offers_gemini_cli_tools(body: &Value) -> bool {
    body["tools"].as_array().into_iter().flatten().any(|t| {
        t["functionDeclarations"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|f| {
                f["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("mcp_gemini_"))
            })
    })
}

/// The `functionResponse`s in a Gemini request, as the Gemini CLI's model reads them.
fn function_responses(body: &Value) -> Vec<Received> {
    let mut out = Vec::new();
    for m in body["contents"].as_array().into_iter().flatten() {
        for part in m["parts"].as_array().into_iter().flatten() {
            let r = &part["functionResponse"]["response"];
            if r.is_null() {
                continue;
            }
            out.push(match (&r["output"], &r["error"]) {
                (Value::String(s), _) => Received {
                    text: s.clone(),
                    is_error: false,
                },
                (_, Value::String(e)) => Received {
                    text: e.clone(),
                    is_error: true,
                },
                _ => Received {
                    text: r.to_string(),
                    is_error: false,
                },
            });
        }
    }
    out
}

/// A streamed Gemini answer that calls our tool as the Gemini CLI names it.
fn function_call(call: &ToolCall) -> Script {
    let chunk = json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": format!("mcp_gemini_{}", call.tool), "args": call.args}}]},
            "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 120},
        "modelVersion": "gemini-2.5-flash"
    });
    Script::sse(format!("data: {chunk}\r\n\r\n"))
}

/// A command for a client with a cleared environment ([`run`] adds `PATH`).
fn client_command(bin: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(bin);
    cmd.hermetic_env();
    cmd
}

/// A client's private home: `HOME`, and `USERPROFILE`, where Node looks for it on Windows (the
/// Gemini CLI reads its settings from there).
fn private_home(dir: impl AsRef<Path>) -> [(&'static str, PathBuf); 2] {
    let dir = dir.as_ref().to_path_buf();
    [("HOME", dir.clone()), ("USERPROFILE", dir)]
}

/// Runs a client to completion in its own process group (killed with everything it started
/// if it overruns [`RUN_LIMIT`]; on Windows the client alone is killed: a Job object would take
/// its children too), with a cleared environment plus `PATH`; fails the test on a non-zero exit,
/// showing the client's output.
fn run(mut cmd: std::process::Command, path: &str, cwd: &Path, home: &Path, name: &str) {
    let stdout = home.join(format!("{name}.stdout"));
    let stderr = home.join(format!("{name}.stderr"));
    cmd.env("PATH", path)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap());
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {name}: {e}"));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > RUN_LIMIT {
            #[cfg(unix)]
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            #[cfg(not(unix))]
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let show = |p: &Path| {
        let s = std::fs::read_to_string(p).unwrap_or_default();
        let start = s.len().saturating_sub(4000);
        let start = (start..s.len())
            .find(|&i| s.is_char_boundary(i))
            .unwrap_or(s.len());
        s[start..].to_string()
    };
    match status {
        Some(s) if s.success() => {}
        other => panic!(
            "{name} {}: stdout …{}\nstderr …{}",
            match other {
                Some(s) => format!("exited with {s}"),
                None => format!("was killed after {RUN_LIMIT:?}"),
            },
            show(&stdout),
            show(&stderr)
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// What each client's model must receive
// ---------------------------------------------------------------------------------------------

const ANSWER: &str =
    "GEMINI-ANSWER: a trie pays off only above ten thousand routes; keep the sorted vector.";

/// Chat, then a second chat continuing the thread with the `continuation_id` the model read in
/// the first result: the answer and the id reach the model, and the id works.
fn chat_answer_and_continuation(client: Client) {
    let project = Project::new();
    project.gemini.push(Script::text(ANSWER));
    let brain: Brain = Arc::new(|seen: &[Received]| match seen {
        [] => Some(ToolCall::new(
            "chat",
            json!({"prompt": "Is a trie overkill for 200 routes?"}),
        )),
        [first] => {
            let id = find_uuid(&first.text)?;
            Some(ToolCall::new(
                "chat",
                json!({"prompt": "And for 50,000 routes?", "continuation_id": id}),
            ))
        }
        _ => None,
    });
    let Some(got) = project.drive(client, brain) else {
        return;
    };
    report(client, "chat", &got);
    assert!(
        !got.is_empty(),
        "{client:?}: the model received no tool result"
    );
    let first = &got[0];
    assert!(!first.is_error, "{client:?}: {}", first.text);
    assert!(
        first.text.contains(ANSWER),
        "{client:?}: Gemini's answer did not reach the model; it received:\n{}",
        first.text
    );
    let id = find_uuid(&first.text).unwrap_or_else(|| {
        panic!(
            "{client:?}: no continuation_id reached the model; it received:\n{}",
            first.text
        )
    });
    assert_eq!(
        got.len(),
        2,
        "{client:?}: the model did not get to continue the thread: {got:?}"
    );
    // The default answer echoes the number of user turns Gemini was sent: the second call
    // carried the first exchange.
    assert!(
        got[1].text.contains("turns=2"),
        "{client:?}: continuing with {id} did not carry the thread; the model received:\n{}",
        got[1].text
    );
    let sent = project.gemini.generate_requests();
    assert_eq!(sent.len(), 2, "{client:?}: Gemini calls");
    assert!(
        sent[1]
            .messages()
            .iter()
            .any(|(role, text)| role == "model" && text.contains(ANSWER)),
        "{client:?}: the second Gemini call lacks the first answer: {:?}",
        sent[1].messages()
    );
}

/// A review answer in the response schema's shape, with `n` findings on `src/lib.rs`.
fn review(n: usize, detail_chars: usize) -> (Script, Vec<String>) {
    let titles: Vec<String> = (1..=n)
        .map(|i| format!("FINDING-{i:03} add() subtracts in case {i}"))
        .collect();
    let findings: Vec<Value> = titles
        .iter()
        .enumerate()
        .map(|(i, title)| {
            let severity = ["critical", "high", "medium", "low"][i % 4];
            json!({"severity": severity, "file": "src/lib.rs", "line": 2, "title": title,
                   "detail": format!("Evidence {i}: {}", "the body returns a - b. ".repeat(detail_chars / 24 + 1)),
                   "fix": "Return a + b."})
        })
        .collect();
    let script = Script::json(json!({
        "summary": "REVIEW-SUMMARY: add() subtracts instead of adding.",
        "findings": findings,
        "verdict": "needs_changes"
    }));
    (script, titles)
}

/// Claude Code applies a checked edit from a review with its own Edit tool, as it is: the
/// finding's `edit.old`/`edit.new` become the tool's `old_string`/`new_string` (after the Read
/// Claude Code requires before an edit), and the file changes as the edit says.
#[test]
fn claude_code_applies_a_checked_edit_with_its_own_edit_tool() {
    let project = Project::new();
    let Some((bin, path)) = locate(Client::ClaudeCode) else {
        return;
    };
    let file = project.root().join("src/lib.rs");
    project.gemini.push(Script::json(json!({
        "summary": "add() subtracts.",
        "verdict": "needs_changes",
        "findings": [
            {"severity": "high", "file": "src/lib.rs", "line": 7, "title": "add() subtracts",
             "detail": "The body returns a - b.", "evidence": "a - b",
             "fix": "Return the sum.",
             "edit": {"file": "src/lib.rs", "old": "    a - b\n", "new": "    a + b\n"}},
            {"severity": "low", "file": "src/lib.rs", "line": 1, "title": "An edit that cannot apply",
             "detail": "d", "evidence": "pub fn add(a: i32, b: i32) -> i32 {",
             "edit": {"file": "src/lib.rs", "old": "a * b", "new": "a + b"}}
        ]
    })));
    let target = file.display().to_string();
    let brain: Brain = Arc::new(move |seen: &[Received]| match seen.len() {
        0 => Some(codereview_call()),
        1 => Some(ToolCall::new("Read", json!({"file_path": target}))),
        2 => {
            let (old, new) = applicable_edit(&seen[0].text)?;
            Some(ToolCall::new(
                "Edit",
                json!({"file_path": target, "old_string": old, "new_string": new}),
            ))
        }
        _ => None,
    });
    let home = tempfile::tempdir().unwrap();
    let got = project.drive_claude(&bin, &path, home.path(), brain, "mcp__gemini__* Read Edit");
    report(Client::ClaudeCode, "an edit applied", &got);
    assert_eq!(got.len(), 3, "the review, the read and the edit: {got:?}");
    let review = &got[0].text;
    assert!(review.contains("\"applicable\":true"), "{review}");
    assert!(
        review.contains("does not occur"),
        "the edit that cannot apply says why: {review}"
    );
    assert!(!got[2].is_error, "the Edit tool failed: {}", got[2].text);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
    );
}

/// The first applicable edit's `old` and `new` in a review result as Claude Code hands it to
/// its model (the structured content, as JSON text).
fn applicable_edit(text: &str) -> Option<(String, String)> {
    let v: Value = serde_json::from_str(&text[text.find('{')?..]).ok()?;
    v["findings"].as_array()?.iter().find_map(|f| {
        let e = &f["edit"];
        (e["applicable"] == true).then(|| {
            (
                e["old"].as_str().unwrap_or_default().to_string(),
                e["new"].as_str().unwrap_or_default().to_string(),
            )
        })
    })
}

fn codereview_call() -> ToolCall {
    ToolCall::new(
        "codereview",
        json!({"files": ["src/lib.rs"], "context": "add() should add two numbers."}),
    )
}

/// A review's summary and every finding (title, file and line) reach the model.
fn codereview_findings(client: Client, n: usize, detail_chars: usize, label: &str) {
    let project = Project::new();
    let (script, titles) = review(n, detail_chars);
    project.gemini.push(script);
    let Some(got) = project.drive(client, calls_in_order(vec![codereview_call()])) else {
        return;
    };
    report(client, label, &got);
    assert_eq!(got.len(), 1, "{client:?}: tool results received: {got:?}");
    let text = &got[0].text;
    assert!(!got[0].is_error, "{client:?}: {text}");
    assert!(
        text.contains("REVIEW-SUMMARY: add() subtracts instead of adding."),
        "{client:?}: the review's summary did not reach the model; it received:\n{text}"
    );
    let missing: Vec<&String> = titles
        .iter()
        .filter(|t| !text.contains(t.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "{client:?}: {} of {n} findings did not reach the model (first: {:?}); it received {} bytes:\n{}",
        missing.len(),
        missing.first(),
        text.len(),
        text.chars().take(3000).collect::<String>()
    );
    assert!(
        text.contains("src/lib.rs"),
        "{client:?}: the findings' file did not reach the model:\n{text}"
    );
}

const INVESTIGATION: &str =
    "INVESTIGATION-ANSWER: add() subtracts (src/lib.rs:2); every caller gets a - b.";

/// `investigate`: Gemini reads a file itself through a function call, then answers; the client's
/// model receives the answer with its citation, the steps and the `continuation_id`, and Gemini
/// received the file's numbered lines as the function's result.
fn investigation_reaches_the_model(client: Client) {
    let project = Project::new();
    project
        .gemini
        .push(Script::calls(
            &[("read_file", json!({"path": "src/lib.rs"}))],
            "Q2lRQjBlMktUaG91Z2h0LW9uZQ==",
            [100, 5, 5],
        ))
        .push(Script::text(INVESTIGATION));
    let call = ToolCall::new(
        "investigate",
        json!({"task": "Why does add(2, 2) return 0?", "max_steps": 5}),
    );
    let Some(got) = project.drive(client, calls_in_order(vec![call])) else {
        return;
    };
    report(client, "investigate", &got);
    assert_eq!(got.len(), 1, "{client:?}: tool results received: {got:?}");
    let text = &got[0].text;
    assert!(!got[0].is_error, "{client:?}: {text}");
    assert!(
        text.contains(INVESTIGATION),
        "{client:?}: the investigation's answer did not reach the model; it received:\n{text}"
    );
    // The text's footer names the files read; the structured content lists each step.
    assert!(
        text.contains("src/lib.rs")
            && (text.contains("1 step (answered)") || text.contains("read_file")),
        "{client:?}: the steps did not reach the model:\n{text}"
    );
    assert!(
        find_uuid(text).is_some(),
        "{client:?}: no continuation_id reached the model:\n{text}"
    );
    let sent = project.gemini.generate_requests();
    assert_eq!(sent.len(), 2, "{client:?}: Gemini calls");
    assert!(
        sent[1].raw_body.contains("2│     a - b"),
        "{client:?}: Gemini did not get the file it asked for: {}",
        sent[1].raw_body
    );
}

/// Prints the size of what the model received (BENCHMARKS.md, "What each client's model reads").
fn report(client: Client, scenario: &str, got: &[Received]) {
    for (i, r) in got.iter().enumerate() {
        eprintln!(
            "client-bytes {client:?} {scenario} result {}: {} bytes",
            i + 1,
            r.text.len()
        );
    }
}

#[test]
fn claude_code_model_receives_the_chat_answer_and_continuation_id() {
    chat_answer_and_continuation(Client::ClaudeCode);
}

#[test]
fn codex_model_receives_the_chat_answer_and_continuation_id() {
    chat_answer_and_continuation(Client::Codex);
}

#[test]
fn gemini_cli_model_receives_the_chat_answer_and_continuation_id() {
    chat_answer_and_continuation(Client::GeminiCli);
}

#[test]
fn claude_code_model_receives_the_investigation() {
    investigation_reaches_the_model(Client::ClaudeCode);
}

#[test]
fn codex_model_receives_the_investigation() {
    investigation_reaches_the_model(Client::Codex);
}

#[test]
fn gemini_cli_model_receives_the_investigation() {
    investigation_reaches_the_model(Client::GeminiCli);
}

#[test]
fn claude_code_model_receives_the_review_summary_and_findings() {
    codereview_findings(Client::ClaudeCode, 3, 80, "codereview");
}

#[test]
fn codex_model_receives_the_review_summary_and_findings() {
    codereview_findings(Client::Codex, 3, 80, "codereview");
}

#[test]
fn gemini_cli_model_receives_the_review_summary_and_findings() {
    codereview_findings(Client::GeminiCli, 3, 80, "codereview");
}

/// A review with many findings stays inline in Claude Code (not saved to a file the model
/// never reads): every finding reaches the model.
#[test]
fn claude_code_model_receives_a_review_with_many_findings_whole() {
    codereview_findings(Client::ClaudeCode, 40, 200, "codereview-40");
}

fn long_answer(n: usize) -> Vec<String> {
    (1..=n)
        .map(|i| format!("LONG-{i:04} the router keeps a sorted vector and a binary search; measured, it stays flat."))
        .collect()
}

/// A long answer stays inline in Claude Code, whole: its last line reaches the model. An answer
/// over the server's size cap is cut by the server and still reaches the model inline, far past
/// any preview of a result saved to a file.
#[test]
fn claude_code_model_receives_a_long_answer_whole() {
    let project = Project::new();
    let lines = long_answer(250);
    let answer = lines.join("\n");
    assert!(answer.len() > 20_000, "{}", answer.len());
    let huge = long_answer(1_000);
    project.gemini.push(Script::text(answer));
    project.gemini.push(Script::text(huge.join("\n")));
    let brain = calls_in_order(vec![
        ToolCall::new("chat", json!({"prompt": "Explain the router in detail."})),
        ToolCall::new("chat", json!({"prompt": "Explain it in even more detail."})),
    ]);
    let Some(got) = project.drive(Client::ClaudeCode, brain) else {
        return;
    };
    report(Client::ClaudeCode, "chat-long", &got);
    assert_eq!(got.len(), 2, "tool results received: {got:?}");
    let cut = &got[1].text;
    assert!(
        cut.contains(&huge[150]) && cut.len() < 50_000,
        "an answer over the cap did not reach the model inline ({} bytes):\n{}",
        cut.len(),
        cut.chars().take(3000).collect::<String>()
    );
    let text = &got[0].text;
    for probe in [&lines[0], &lines[125], &lines[249]] {
        assert!(
            text.contains(probe.as_str()),
            "the long answer did not reach the model whole (missing {probe:?}); it received {} bytes:\n{}",
            text.len(),
            text.chars().take(3000).collect::<String>()
        );
    }
}

/// Claude Code stops a stdio server with SIGINT, then SIGTERM 100 ms later, then SIGKILL at
/// 500 ms; its debug log says which it took. Ours exits on the first signal, by itself.
#[test]
fn claude_code_stops_the_server_with_its_first_signal() {
    let project = Project::new();
    let brain = calls_in_order(vec![ToolCall::new("chat", json!({"prompt": "Hello?"}))]);
    let Some((got, log)) = project.drive_logged(Client::ClaudeCode, brain) else {
        return;
    };
    assert_eq!(got.len(), 1, "tool results received: {got:?}");
    let ours: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("MCP server \"gemini\""))
        .collect();
    assert!(
        ours.iter().any(|l| l.contains("exited cleanly")),
        "Claude Code did not see our server exit cleanly: {ours:#?}"
    );
    let forced: Vec<&&str> = ours
        .iter()
        .filter(|l| l.contains("SIGINT failed") || l.contains("SIGKILL"))
        .collect();
    assert!(
        forced.is_empty(),
        "our server did not exit on SIGINT; Claude Code escalated: {forced:#?}"
    );
}

/// The MCP Inspector's CLI, as a host sees our prompts and resources: listed, rendered with
/// arguments, read.
#[test]
fn the_inspector_lists_and_renders_prompts_and_reads_resources() {
    let Some((bin, path)) = locate(Client::Inspector) else {
        return;
    };
    let project = Project::new();
    let inspect = |args: &[&str]| -> Value {
        let mut cmd = client_command(&bin);
        cmd.arg("--cli").arg(mcp::binary());
        for (k, v) in project.server_env() {
            cmd.arg("-e").arg(format!("{k}={v}"));
        }
        cmd.args(args)
            .env("PATH", &path)
            .envs(private_home(project.root().join(".home")))
            .current_dir(project.root());
        let out = cmd.output().expect("run the Inspector");
        assert!(
            out.status.success(),
            "inspector {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "inspector {args:?}: {e}: {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    };
    let prompts = inspect(&["--method", "prompts/list"]);
    let names: Vec<&str> = prompts["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "review-changes",
            "review-code",
            "second-opinion",
            "challenge",
            "security-audit",
            "root-cause"
        ]
    );
    let got = inspect(&[
        "--method",
        "prompts/get",
        "--prompt-name",
        "challenge",
        "--prompt-args",
        "claim=A trie beats a sorted vector for 200 routes",
    ]);
    let text = got["messages"][0]["content"]["text"].as_str().unwrap();
    assert!(
        text.contains("`chat`") && text.contains("A trie beats a sorted vector"),
        "{got}"
    );
    let resources = inspect(&["--method", "resources/list"]);
    let uris: Vec<&str> = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert!(
        uris.contains(&"gemini-mcp://threads") && uris.contains(&"gemini-mcp://models"),
        "{uris:?}"
    );
    let templates = inspect(&["--method", "resources/templates/list"]);
    assert_eq!(
        templates["resourceTemplates"][0]["uriTemplate"],
        "gemini-mcp://threads/{id}"
    );
    let models = inspect(&["--method", "resources/read", "--uri", "gemini-mcp://models"]);
    let body: Value =
        serde_json::from_str(models["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert!(
        body["models"].as_array().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
}

/// A home for the real Gemini CLI run offline against a stand-in Gemini: API-key auth (the
/// stand-in's base URL comes from the environment), no usage statistics, one attempt, no
/// auto-update.
pub fn gemini_cli_home(home: &Path) {
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    let user = json!({"security": {"auth": {"selectedType": "gemini-api-key"}},
                      "privacy": {"usageStatisticsEnabled": false},
                      "general": {"maxAttempts": 1, "disableAutoUpdate": true}});
    std::fs::write(home.join(".gemini/settings.json"), user.to_string()).unwrap();
}

/// The server's environment for a test of the real Gemini CLI behind it: the server finds the
/// CLI at `bin` (with `path`), the CLI reaches the stand-in Gemini at `model_url` from `home`
/// (see [`gemini_cli_home`]) in a trusted workspace; `extra` adds the test's own settings.
pub fn gemini_cli_server_env(
    bin: &Path,
    path: &str,
    home: &Path,
    model_url: &str,
    extra: &[(&str, &str)],
) -> Vec<(String, String)> {
    let mut vars: Vec<(String, String)> = vec![
        ("GEMINI_API_KEY".into(), mcp::KEY.into()),
        ("GEMINI_BASE_URL".into(), "http://127.0.0.1:9".into()),
        ("GEMINI_CLI_PATH".into(), bin.display().to_string()),
        ("PATH".into(), path.into()),
        ("HOME".into(), home.display().to_string()),
        ("USERPROFILE".into(), home.display().to_string()),
        ("GOOGLE_GEMINI_BASE_URL".into(), model_url.into()),
        ("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into()),
    ];
    vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    vars
}

/// The Gemini CLI turns our prompts into slash commands: `/review-code src/lib.rs` sends its
/// model the message our prompt renders (which tool to call, with which arguments).
#[test]
fn gemini_cli_runs_our_prompt_as_a_slash_command() {
    let Some((bin, path)) = locate(Client::GeminiCli) else {
        return;
    };
    let project = Project::new();
    let model = FakeGemini::start();
    let home = tempfile::tempdir().unwrap();
    gemini_cli_home(home.path());
    let settings = project.root().join(".gemini");
    std::fs::create_dir_all(&settings).unwrap();
    let servers = json!({"mcpServers": {"gemini": {
        "command": mcp::binary(), "args": [], "env": project.server_env_json(), "trust": true}}});
    std::fs::write(settings.join("settings.json"), servers.to_string()).unwrap();
    let mut cmd = client_command(&bin);
    cmd.args(["-p", "/review-code src/lib.rs"])
        .args(["-o", "json", "-m", "gemini-2.5-flash"])
        .envs(private_home(home.path()))
        .env("TERM", "dumb")
        .env("GEMINI_CLI_NO_RELAUNCH", "true")
        .env("GEMINI_API_KEY", "stand-in")
        .env("GOOGLE_GEMINI_BASE_URL", model.base_url())
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true");
    run(cmd, &path, &project.root(), home.path(), "gemini");
    let sent = model.generate_requests();
    // The CLI passes the message on as a JSON string, quotes escaped.
    let rendered = sent.iter().any(|r| {
        let t = r.last_user_text();
        t.contains("Call the gemini server's `codereview` tool") && t.contains("src/lib.rs")
    });
    assert!(
        rendered,
        "the CLI's model never got our prompt's message: {:?}",
        sent.iter().map(|r| r.last_user_text()).collect::<Vec<_>>()
    );
}

/// `PATH` for a client that starts `gemini-mcp` by name: the built binary's directory first.
fn path_with_our_binary(path: &str) -> String {
    prepend_path(Path::new(mcp::binary()).parent().unwrap(), path)
}

/// Runs a client command to its end with `stdin` written to it: whether it succeeded, and its
/// stdout and stderr together.
fn run_with_stdin(mut cmd: std::process::Command, stdin: &str) -> (bool, String) {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// Runs one Gemini CLI command to its end with `stdin`, in `work` with a private `home`, trusting
/// the folder and without relaunching itself: whether it succeeded, and what it said.
fn gemini_cli(
    bin: &Path,
    path: &str,
    home: &Path,
    work: &Path,
    args: &[&str],
    stdin: &str,
) -> (bool, String) {
    let mut cmd = client_command(bin);
    cmd.args(args)
        .env("PATH", path)
        .envs(private_home(home))
        .env("TERM", "dumb")
        .env("GEMINI_CLI_NO_RELAUNCH", "true")
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
        .current_dir(work);
    run_with_stdin(cmd, stdin)
}

/// The Gemini CLI extension (`packaging/gemini-extension`), linked from its local path with the
/// real Gemini CLI: validated, installed, and its server connected.
#[test]
fn the_gemini_cli_extension_links_and_connects() {
    let Some((bin, path)) = locate(Client::GeminiCli) else {
        return;
    };
    let ext = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/gemini-extension");
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let path = path_with_our_binary(&path);
    let gemini =
        |args: &[&str], stdin: &str| gemini_cli(&bin, &path, home.path(), work.path(), args, stdin);
    let (ok, said) = gemini(&["extensions", "validate", ext.to_str().unwrap()], "");
    assert!(ok && said.contains("successfully validated"), "{said}");
    let (ok, said) = gemini(&["extensions", "link", ext.to_str().unwrap()], "Y\nY\n");
    assert!(ok && said.contains("linked successfully"), "{said}");
    let (_, said) = gemini(&["mcp", "list"], "");
    assert!(
        said.contains("gemini (from gemini-mcp): gemini-mcp") && said.contains("Connected"),
        "{said}"
    );
    let (_, said) = gemini(&["extensions", "list"], "");
    assert!(said.contains("GEMINI.md"), "{said}");
}

/// The Gemini CLI extension as a release carries it (`packaging/release/gemini-extension.sh`: the
/// binary beside the manifest), installed by the real Gemini CLI from the unpacked archive — what
/// `gemini extensions install <repository>` does with the release asset of the user's platform —
/// with no `gemini-mcp` on `PATH`: the server it starts is the archive's own, and connects.
#[test]
fn the_gemini_cli_extension_archive_brings_its_own_binary() {
    let Some((bin, path)) = locate(Client::GeminiCli) else {
        return;
    };
    let (os, cpu) = match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => ("linux", "x64"),
        ("linux", "aarch64") => ("linux", "arm64"),
        ("macos", "x86_64") => ("darwin", "x64"),
        ("macos", "aarch64") => ("darwin", "arm64"),
        other => panic!("no extension archive for {other:?}"),
    };
    let made = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/release/gemini-extension.sh");
    let status = std::process::Command::new(script)
        .args([os, cpu, mcp::binary()])
        .arg(made.path())
        .status()
        .unwrap();
    assert!(status.success());
    let archive = made.path().join(format!("{os}.{cpu}.gemini-mcp.tar.gz"));
    let unpacked = made.path().join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    let status = std::process::Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(&unpacked)
        .status()
        .unwrap();
    assert!(status.success());
    let our_dir = Path::new(mcp::binary()).parent().unwrap().to_path_buf();
    assert!(
        !std::env::split_paths(&path).any(|d| d == our_dir),
        "gemini-mcp must not be on PATH here"
    );
    let gemini =
        |args: &[&str], stdin: &str| gemini_cli(&bin, &path, home.path(), work.path(), args, stdin);
    let (ok, said) = gemini(
        &[
            "extensions",
            "install",
            unpacked.to_str().unwrap(),
            "--consent",
        ],
        "",
    );
    assert!(ok, "{said}");
    let (_, said) = gemini(&["mcp", "list"], "");
    assert!(
        said.contains("gemini (from gemini-mcp)") && said.contains("Connected"),
        "{said}"
    );
    assert!(
        said.contains("gemini-mcp/gemini-mcp"),
        "the archive's binary: {said}"
    );
}

/// The Claude Code plugin from this repository's marketplace: added, installed, the API key set
/// as a sensitive option (kept out of the settings files), and the server connected.
#[test]
fn the_claude_code_plugin_installs_from_the_marketplace_and_connects() {
    let Some((bin, path)) = locate(Client::ClaudeCode) else {
        return;
    };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let path = path_with_our_binary(&path);
    let claude = |args: &[&str], stdin: &str| {
        let mut cmd = client_command(&bin);
        cmd.args(args)
            .env("PATH", &path)
            .envs(private_home(home.path()))
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .current_dir(work.path());
        run_with_stdin(cmd, stdin)
    };
    let (ok, said) = claude(
        &[
            "plugin",
            "validate",
            repo.join("packaging/claude-plugin").to_str().unwrap(),
        ],
        "",
    );
    assert!(ok, "{said}");
    let (ok, said) = claude(&["plugin", "validate", repo.to_str().unwrap()], "");
    assert!(ok, "{said}");
    install_plugin(
        &claude,
        r#"{"gemini_api_key": "plugin-key-never-in-settings"}"#,
    );
    let (_, said) = claude(&["mcp", "list"], "");
    assert!(
        said.contains("plugin:gemini-mcp:gemini") && said.contains("Connected"),
        "{said}"
    );
    // The key is a sensitive option: not in any settings file.
    for entry in crate::support::walk(home.path()) {
        let name = entry.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with("settings.json")
            || name == "known_marketplaces.json"
            || name == "installed_plugins.json"
        {
            let text = std::fs::read_to_string(&entry).unwrap_or_default();
            assert!(
                !text.contains("plugin-key-never-in-settings"),
                "{}",
                entry.display()
            );
        }
    }
}

/// Runs one Claude Code command with stdin: whether it succeeded, and what it said.
type ClaudeRunner<'a> = &'a dyn Fn(&[&str], &str) -> (bool, String);

/// Adds this repository as a Claude Code marketplace, installs the plugin from it and sets its
/// options (`values`, JSON) the way a user does, through `claude` (a runner of Claude Code
/// commands with a private home).
fn install_plugin(claude: ClaudeRunner<'_>, values: &str) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (ok, said) = claude(
        &["plugin", "marketplace", "add", repo.to_str().unwrap()],
        "",
    );
    assert!(ok, "{said}");
    let (ok, said) = claude(&["plugin", "install", "gemini-mcp@gemini-mcp-server"], "");
    assert!(ok, "{said}");
    let (ok, said) = claude(
        &[
            "plugin",
            "configure",
            "gemini-mcp@gemini-mcp-server",
            "--values-stdin",
        ],
        values,
    );
    assert!(ok, "{said}");
}

/// The plugin's optional review before a commit, with the real Claude Code: its model runs
/// `git commit -am …` through Bash. With the plugin option `precommit_review` on, the hook has
/// Gemini review the pending change — with the key from the plugin's secure settings, the only
/// key the fake Gemini accepts — and a high finding stops the command (the model is shown the
/// review, nothing is committed); once Gemini passes the change, the same command commits.
#[test]
fn the_claude_code_plugin_reviews_a_commit_before_it_lands() {
    let Some((bin, path)) = locate(Client::ClaudeCode) else {
        return;
    };
    if crate::support::git_missing() {
        return;
    }
    const PLUGIN_KEY: &str = "plugin-key-for-the-precommit-review";
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let work = std::fs::canonicalize(work.path()).unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&work)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .envs(private_home(home.path()))
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    git(&["init", "-q"]);
    git(&["config", "user.name", "Agent"]);
    git(&["config", "user.email", "agent@example.com"]);
    std::fs::write(
        work.join("lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
    )
    .unwrap();
    git(&["add", "lib.rs"]);
    git(&["commit", "-qm", "add"]);
    std::fs::write(
        work.join("lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
    )
    .unwrap();

    let gemini = FakeGemini::start();
    gemini.require_key(PLUGIN_KEY);
    gemini.push(Script::json(json!({
        "summary": "add now subtracts.",
        "verdict": "do_not_commit",
        "findings": [{"severity": "high", "file": "lib.rs", "line": 2,
                      "title": "SUBTRACTS-INSTEAD-OF-ADDING", "detail": "a - b", "fix": "a + b",
                      "evidence": "a - b"}]
    })));
    gemini.push(Script::json(
        json!({"summary": "Fine.", "verdict": "commit", "findings": []}),
    ));
    let path = path_with_our_binary(&path);
    let claude_env = |cmd: &mut std::process::Command| {
        cmd.env("PATH", &path)
            .envs(private_home(home.path()))
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("GEMINI_BASE_URL", gemini.base_url())
            .env("GEMINI_MCP_STORE", "memory")
            .env("GEMINI_MCP_STATE_DIR", home.path().join("state"))
            .env("GEMINI_CLI_PATH", home.path().join("no-gemini-cli"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .current_dir(&work);
    };
    let claude = |args: &[&str], stdin: &str| {
        let mut cmd = client_command(&bin);
        cmd.args(args);
        claude_env(&mut cmd);
        run_with_stdin(cmd, stdin)
    };
    install_plugin(
        &claude,
        &json!({"gemini_api_key": PLUGIN_KEY, "precommit_review": "true"}).to_string(),
    );

    let commit = ToolCall::new(
        "Bash",
        json!({"command": "git commit -am 'Subtract'", "description": "Commit the change"}),
    );
    let mut results = Vec::new();
    for _ in 0..2 {
        let api = AnthropicApi::start(calls_in_order(vec![commit.clone()]));
        let mut cmd = client_command(&bin);
        cmd.args(["-p", "Commit the change.", "--allowedTools", "Bash"])
            .env("ANTHROPIC_BASE_URL", api.base_url())
            .env("ANTHROPIC_API_KEY", "sk-ant-stand-in");
        claude_env(&mut cmd);
        let (ok, said) = run_with_stdin(cmd, "");
        assert!(ok, "{said}");
        let got = api.received();
        assert_eq!(got.len(), 1, "the model got no Bash result: {said}");
        results.push((got[0].clone(), git(&["rev-list", "--count", "HEAD"])));
    }
    let (stopped, commits) = &results[0];
    assert!(
        stopped.is_error
            && stopped.text.contains("SUBTRACTS-INSTEAD-OF-ADDING")
            && stopped.text.contains("The commit was stopped"),
        "{stopped:?}"
    );
    assert_eq!(commits, "1", "the stopped commit landed");
    let (passed, commits) = &results[1];
    assert!(
        !passed.is_error && passed.text.contains("Subtract"),
        "{passed:?}"
    );
    assert_eq!(commits, "2", "the reviewed commit did not land");
    // Both reviews reached Gemini, with the plugin's key (the fake refuses any other), each with
    // the pending change in it.
    let reviews: Vec<Recorded> = gemini
        .requests()
        .into_iter()
        .filter(|r| {
            r.action
                .as_deref()
                .is_some_and(|a| a.ends_with("enerateContent"))
        })
        .collect();
    assert_eq!(reviews.len(), 2, "{:?}", gemini.requests());
    for r in &reviews {
        assert!(r.raw_body.contains("a - b"), "the review lacks the change");
        assert!(
            r.headers
                .iter()
                .any(|(k, v)| k == "x-goog-api-key" && v == PLUGIN_KEY),
            "{:?}",
            r.headers
        );
    }
}

/// The npm package: the host platform's package (made by `npm/platform/make-package.sh` from the
/// built binary) and the main package, packed and installed from the tarballs into a clean prefix
/// with `--offline`; then the real Claude Code and Gemini CLI start the server with `npx` and
/// see it connected.
#[test]
fn the_npm_package_runs_the_prebuilt_binary_through_npx() {
    let Some((claude, path)) = locate(Client::ClaudeCode) else {
        return;
    };
    let Some((gemini, _)) = locate(Client::GeminiCli) else {
        return;
    };
    if std::env::consts::OS != "linux" {
        return;
    }
    let cpu = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        _ => return,
    };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let work = tempfile::tempdir().unwrap();
    let sh = |program: &str, args: &[&str], dir: &Path| {
        let out = std::process::Command::new(program)
            .args(args)
            .env("PATH", &path)
            .current_dir(dir)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{program} {args:?}: {said}");
        said
    };
    let out = work.path().join("out");
    let made = sh(
        repo.join("npm/platform/make-package.sh").to_str().unwrap(),
        &["linux", cpu, mcp::binary(), out.to_str().unwrap()],
        work.path(),
    );
    let tarballs = work.path().join("tarballs");
    std::fs::create_dir_all(&tarballs).unwrap();
    let dest = tarballs.to_str().unwrap();
    sh(
        "npm",
        &["pack", "--pack-destination", dest, "--loglevel=error"],
        Path::new(made.trim()),
    );
    sh(
        "npm",
        &["pack", "--pack-destination", dest, "--loglevel=error"],
        &repo.join("npm/gemini-mcp-server"),
    );
    let prefix = work.path().join("prefix");
    std::fs::create_dir_all(&prefix).unwrap();
    std::fs::write(
        prefix.join("package.json"),
        r#"{"name":"t","version":"1.0.0","private":true}"#,
    )
    .unwrap();
    let main = tarballs.join("gemini-mcp-server-0.1.0.tgz");
    let platform = tarballs.join(format!("gemini-mcp-server-linux-{cpu}-0.1.0.tgz"));
    sh(
        "npm",
        &[
            "install",
            "--offline",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            platform.to_str().unwrap(),
            main.to_str().unwrap(),
        ],
        &prefix,
    );
    let version = sh(
        "npx",
        &[
            "--prefix",
            prefix.to_str().unwrap(),
            "--no-install",
            "gemini-mcp-server",
            "--version",
        ],
        work.path(),
    );
    assert!(version.starts_with("gemini-mcp "), "{version}");

    // Claude Code, configured with the npx command.
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let npx_args = [
        "--prefix",
        prefix.to_str().unwrap(),
        "--no-install",
        "gemini-mcp-server",
    ];
    let mut add = client_command(&claude);
    add.args(["mcp", "add", "gemini", "--", "npx"])
        .args(npx_args)
        .env("PATH", &path)
        .envs(private_home(home.path()))
        .current_dir(project.path());
    let out = add.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = client_command(&claude)
        .args(["mcp", "list"])
        .env("PATH", &path)
        .envs(private_home(home.path()))
        .current_dir(project.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        said.contains("gemini: npx") && said.contains("Connected"),
        "{said}"
    );

    // The Gemini CLI, configured with the same command.
    let settings = project.path().join(".gemini");
    std::fs::create_dir_all(&settings).unwrap();
    std::fs::write(
        settings.join("settings.json"),
        json!({"mcpServers": {"gemini": {"command": "npx", "args": npx_args}}}).to_string(),
    )
    .unwrap();
    let out = client_command(&gemini)
        .args(["mcp", "list"])
        .env("PATH", &path)
        .envs(private_home(home.path()))
        .env("TERM", "dumb")
        .env("GEMINI_CLI_NO_RELAUNCH", "true")
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
        .current_dir(project.path())
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("gemini: npx") && said.contains("Connected"),
        "{said}"
    );
}

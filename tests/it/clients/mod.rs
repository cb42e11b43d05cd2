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
//!
//! One file a subject: `results` (what each client's model receives), `clarify` (a question
//! asked inside the call, answered by Claude Code's elicitation hook), `prompts` (our prompts
//! and resources in the Inspector and the Gemini CLI), `packages` (the extension, the plugin and
//! the npm package, installed as users install them), `lifecycle` (the server stopped by its
//! client). The clients, their stand-in model APIs and the runner they share are here; the ACP
//! tests use them too.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::anthropic_api::AnthropicApi;
use crate::support::fake_gemini::{FakeGemini, Recorded, Script};
use crate::support::mcp::KEY;
use crate::support::responses_api::ResponsesApi;
use crate::support::scripted_model::{Brain, FINAL_TEXT, Received, ToolCall};
use crate::support::{Hermetic as _, mcp};

mod background;
mod clarify;
mod inspector_tasks;
mod lifecycle;
mod packages;
mod prompts;
mod results;

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
    /// More settings for the server, beside the hermetic ones.
    extra: Vec<(&'static str, String)>,
}

impl Project {
    fn new() -> Project {
        Project {
            dir: crate::support::project::with(&[crate::support::project::BUGGY_ADD]),
            gemini: FakeGemini::start(),
            extra: Vec::new(),
        }
    }

    /// The project, its server given `extra` settings too.
    fn with_settings(extra: &[(&'static str, &str)]) -> Project {
        let mut p = Project::new();
        p.extra = extra.iter().map(|(k, v)| (*k, v.to_string())).collect();
        p
    }

    fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path()).unwrap()
    }

    /// The environment the client's configuration gives our server: hermetic, like the other
    /// tests' (support::mcp::command).
    fn server_env(&self) -> Vec<(&'static str, String)> {
        let root = self.root();
        let mut vars = vec![
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
        ];
        vars.extend(self.extra.iter().cloned());
        vars
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

    /// Claude Code in this project with `settings` (its `--settings`: hooks, say) and the
    /// tool results its model received, with its debug log; `None` when it is not installed.
    fn drive_claude_with(&self, brain: Brain, settings: Value) -> Option<(Vec<Received>, String)> {
        let (bin, path) = locate(Client::ClaudeCode)?;
        let home = tempfile::tempdir().unwrap();
        let file = home.path().join("settings.json");
        std::fs::write(&file, settings.to_string()).unwrap();
        let received = self.drive_claude_args(
            &bin,
            &path,
            home.path(),
            brain,
            "mcp__gemini__*",
            &["--settings".as_ref(), file.as_os_str()],
        );
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
        self.drive_claude_args(bin, path, home, brain, allowed, &[])
    }

    /// [`Project::drive_claude`] with `extra` arguments.
    fn drive_claude_args(
        &self,
        bin: &Path,
        path: &str,
        home: &Path,
        brain: Brain,
        allowed: &str,
        extra: &[&std::ffi::OsStr],
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
            .args(extra)
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
        self.drive_codex_timeout(bin, path, home, brain, 100)
    }

    /// [`Project::drive_codex`] with our server's `tool_timeout_sec` set to `timeout_secs`.
    fn drive_codex_timeout(
        &self,
        bin: &Path,
        path: &str,
        home: &Path,
        brain: Brain,
        timeout_secs: u64,
    ) -> Vec<Received> {
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
tool_timeout_sec = {timeout_secs}

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

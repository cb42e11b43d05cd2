//! `investigate` with `engine: "gemini-cli"`: the real binary over stdio drives a stand-in ACP
//! agent (`support/acp_stand_in.py`, the Gemini CLI's ACP as §12 of the reference documents it)
//! as its warm Gemini CLI. What the agent received (handshake, modes, permission answers) is read
//! from the stand-in's record; what the client received from the reply.
//!
//! One file a subject: `policy` (what the agent may do), `lifecycle` (its processes and
//! sessions), `cli_backend` (the `cli` backend over ACP), `bridge` (the ACP bridge profile),
//! `metrics`, and with the real Gemini CLI `real_cli`, `context` and `result_cap`. The stand-in
//! agent and the calls they share are here.

use std::path::PathBuf;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientRequest, ServerResult};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};

use crate::support::mcp::{self, KEY};

mod bridge;
mod cli_backend;
mod context;
mod lifecycle;
mod metrics;
mod policy;
mod real_cli;
mod result_cap;

const STAND_IN: &str = include_str!("../support/acp_stand_in.py");

struct Agent {
    dir: tempfile::TempDir,
    project: tempfile::TempDir,
}

impl Agent {
    /// A project (with a `.env`) and a stand-in agent that plays `prompts`.
    fn new(prompts: Value) -> Agent {
        let dir = tempfile::tempdir().unwrap();
        let project = crate::support::project::with(&[
            crate::support::project::BUGGY_ADD,
            (".env", "TOKEN=x\n"),
        ]);
        let agent = Agent { dir, project };
        let bin = agent.bin();
        std::fs::write(&bin, STAND_IN).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(
            agent.dir.path().join("script.json"),
            json!({ "prompts": prompts }).to_string(),
        )
        .unwrap();
        agent
    }

    fn bin(&self) -> PathBuf {
        self.dir.path().join("gemini")
    }

    fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.project.path()).unwrap()
    }

    fn vars(&self, extra: &[(&'static str, &'static str)]) -> Vec<(String, String)> {
        let mut v = vec![
            ("GEMINI_API_KEY".to_string(), KEY.to_string()),
            (
                "GEMINI_BASE_URL".to_string(),
                "http://127.0.0.1:9".to_string(),
            ),
            (
                "GEMINI_CLI_PATH".to_string(),
                self.bin().display().to_string(),
            ),
            (
                "ACP_STAND_IN_SCRIPT".to_string(),
                self.dir.path().join("script.json").display().to_string(),
            ),
            (
                "ACP_STAND_IN_DIR".to_string(),
                self.dir.path().display().to_string(),
            ),
        ];
        v.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        v
    }

    fn lines(&self, name: &str) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join(name))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn received(&self, method: &str) -> Vec<Value> {
        self.lines("received.jsonl")
            .into_iter()
            .filter(|m| m["method"] == method)
            .collect()
    }

    fn starts(&self) -> Vec<Value> {
        self.lines("starts")
    }
}

fn structured(r: &rmcp::model::CallToolResult) -> Value {
    r.structured_content.clone().unwrap_or(Value::Null)
}

fn text_of(r: &rmcp::model::CallToolResult) -> String {
    mcp::text(r)
}

async fn start(agent: &Agent, extra: &[(&'static str, &'static str)]) -> mcp::RecordingClient {
    let vars = agent.vars(extra);
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    mcp::start_recording(&agent.root(), &refs).await.0
}

async fn call(
    client: &mcp::RecordingClient,
    args: Value,
    timeout: Duration,
) -> Result<rmcp::model::CallToolResult, rmcp::service::ServiceError> {
    let req = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
        CallToolRequestParams::new("investigate").with_arguments(mcp::args(args)),
    ));
    let mut options = PeerRequestOptions::no_options();
    options.timeout = Some(timeout);
    let handle = client.send_cancellable_request(req, options).await?;
    match handle.await_response().await? {
        ServerResult::CallToolResult(r) => Ok(r),
        other => panic!("unexpected {other:?}"),
    }
}

fn update(kind: &str, body: Value) -> Value {
    let mut u = body;
    u["sessionUpdate"] = json!(kind);
    json!({ "update": u })
}

fn chunk(kind: &str, text: &str) -> Value {
    update(kind, json!({"content": {"type": "text", "text": text}}))
}

fn alive(pid: i64) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
}

/// The `gemini --acp` processes run with `home` as their `HOME`, as /proc shows them (pid and
/// command line): the CLI runs as `node …/gemini.js … --acp …` in its private directory, so its
/// environment tells a test's own apart.
fn acp_processes_with_home(home: &std::path::Path) -> Vec<(u32, String)> {
    let want = format!("HOME={}", home.display()).into_bytes();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        if !environ.split(|b| *b == 0).any(|v| v == want.as_slice()) {
            continue;
        }
        let argv = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let argv: Vec<String> = argv
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if argv.iter().any(|a| a == "--acp") {
            found.push((pid, argv.join(" ")));
        }
    }
    found
}

/// Every file under `dir` whose bytes hold `needle`.
fn files_holding(dir: &std::path::Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if std::fs::read(&path)
                .is_ok_and(|b| String::from_utf8_lossy(&b).contains(needle))
            {
                found.push(path);
            }
        }
    }
    found
}

//! `investigate` with `engine: "gemini-cli"`: the real binary over stdio drives a stand-in ACP
//! agent (`support/acp_stand_in.py`, the Gemini CLI's ACP as §12 of the reference documents it)
//! as its warm Gemini CLI. What the agent received (handshake, modes, permission answers) is read
//! from the stand-in's record; what the client received from the reply.

mod bridge;
mod context;
mod metrics;
mod result_cap;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ClientRequest, ServerResult};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};

use crate::support::mcp::{self, KEY};

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

/// Sends an `investigate` call and cancels it (MCP `notifications/cancelled`) once the agent has
/// received its `prompts`-th `session/prompt`: the cancellation reaches a prompt in flight, however
/// slowly the agent started.
async fn cancel_once_prompted(
    client: &mcp::RecordingClient,
    agent: &Agent,
    args: Value,
    prompts: usize,
) {
    let req = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
        CallToolRequestParams::new("investigate").with_arguments(mcp::args(args)),
    ));
    let handle = client
        .send_cancellable_request(req, PeerRequestOptions::no_options())
        .await
        .unwrap();
    let started = Instant::now();
    while agent.received("session/prompt").len() < prompts {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the agent never received prompt {prompts}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    handle.cancel(None).await.unwrap();
}

fn update(kind: &str, body: Value) -> Value {
    let mut u = body;
    u["sessionUpdate"] = json!(kind);
    json!({ "update": u })
}

fn chunk(kind: &str, text: &str) -> Value {
    update(kind, json!({"content": {"type": "text", "text": text}}))
}

fn permission(id: &str, title: &str, kind: &str, path: Option<&str>) -> Value {
    let mut call = json!({"toolCallId": id, "title": title, "kind": kind});
    if let Some(p) = path {
        call["locations"] = json!([{ "path": p }]);
    }
    json!({ "permission": call })
}

fn alive(pid: i64) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
}

#[tokio::test]
async fn the_agent_investigates_under_the_servers_read_only_policy() {
    let src = "SRC";
    let agent = Agent::new(json!([[
        chunk("agent_thought_chunk", "Looking at add."),
        update(
            "plan",
            json!({"entries": [
                {"content": "Read src/lib.rs", "priority": "high", "status": "in_progress"}
            ]})
        ),
        update(
            "tool_call",
            json!({
                "toolCallId": "t1", "title": "ReadFile src/lib.rs", "kind": "read", "status": "pending",
                "locations": [{"path": src}], "rawInput": {"file_path": "src/lib.rs"}
            })
        ),
        update(
            "tool_call_update",
            json!({"toolCallId": "t1", "status": "completed"})
        ),
        permission("p1", "ReadFile src/lib.rs", "read", Some(src)),
        permission("p2", "ReadFile /etc/passwd", "read", Some("/etc/passwd")),
        permission("p3", "ReadFile .env", "read", Some(".env")),
        permission("p4", "Shell rm -rf /", "execute", None),
        permission("p5", "Edit src/lib.rs", "edit", Some(src)),
        permission("p6", "Switch to yolo", "switch_mode", None),
        chunk("agent_message_chunk", "AGENT-ANSWER: add subtracts "),
        chunk("agent_message_chunk", "(src/lib.rs:2)."),
    ]]));
    // The stand-in learns the project's absolute path from its script.
    let script = std::fs::read_to_string(agent.dir.path().join("script.json"))
        .unwrap()
        .replace(
            "\"SRC\"",
            &format!("\"{}/src/lib.rs\"", agent.root().display()),
        );
    std::fs::write(agent.dir.path().join("script.json"), script).unwrap();
    let vars = agent.vars(&[]);
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (client, recorder) = mcp::start_recording(&agent.root(), &refs).await;

    let r = call(
        &client,
        json!({"task": "Why does add(2, 2) return 0?", "engine": "gemini-cli", "model": "flash"}),
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    let text = text_of(&r);
    assert_ne!(r.is_error, Some(true), "{text}");
    let s = structured(&r);
    assert_eq!(
        s["answer"], "AGENT-ANSWER: add subtracts (src/lib.rs:2).",
        "{s}"
    );
    assert_eq!(s["stop_reason"], "end_turn");
    assert_eq!(s["usage"]["input"], 120, "{s}");
    let a = &s["agent"];
    assert_eq!(a["engine"], "gemini-cli");
    assert_eq!(a["session"], "new");
    assert!(
        a["approval_policy"]
            .as_str()
            .unwrap()
            .starts_with("plan (read-only)")
    );
    assert_eq!(a["thought"], "Looking at add.");
    assert_eq!(a["plan"][0]["content"], "Read src/lib.rs");
    assert_eq!(a["tool_calls"][0]["kind"], "read");
    assert_eq!(a["tool_calls"][0]["status"], "completed");
    assert_eq!(a["tool_calls"][0]["arguments"]["file_path"], "src/lib.rs");
    let allowed: Vec<(String, bool)> = a["permissions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["tool"].as_str().unwrap().to_string(),
                p["allowed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        allowed,
        [
            ("ReadFile src/lib.rs".to_string(), true),
            ("ReadFile /etc/passwd".to_string(), false),
            ("ReadFile .env".to_string(), false),
            ("Shell rm -rf /".to_string(), false),
            ("Edit src/lib.rs".to_string(), false),
            ("Switch to yolo".to_string(), false),
        ]
    );
    assert!(
        text.contains("Gemini CLI agent: 1 tool call (end_turn); policy plan (read-only)"),
        "{text}"
    );
    // What it read, shown as every path is: relative to the root.
    assert!(text.contains("; read src/lib.rs"), "{text}");
    assert!(
        !text.contains(&agent.root().display().to_string()),
        "{text}"
    );

    // What the agent got: our handshake, plan mode, and answers in the format the CLI requires
    // (allow_once for the allowed read, reject_once for the rest; never allow_always).
    let starts = agent.starts();
    assert_eq!(starts.len(), 1);
    let argv: Vec<&str> = starts[0]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(argv.contains(&"--acp"), "{argv:?}");
    // Its own tools denied, ours (`mcp_project_*`) allowed by name.
    let policy = starts[0]["policy"].as_str().unwrap();
    assert!(policy.contains("\"mcp_project_read_lines\""), "{policy}");
    assert!(
        argv.windows(2)
            .any(|w| w[0] == "-m" && w[1].contains("flash")),
        "{argv:?}"
    );
    // It works in its private directory, not in the project (whose tree and `GEMINI.md` the CLI
    // would send); it reads the project through our tools.
    let cwd = starts[0]["cwd"].as_str().unwrap();
    assert!(cwd.ends_with("/gemini-cli/agent"), "{cwd}");
    assert_ne!(cwd, agent.root().display().to_string());
    let init = &agent.received("initialize")[0]["params"];
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["clientCapabilities"]["fs"]["writeTextFile"], false);
    assert_eq!(init["clientCapabilities"]["terminal"], false);
    assert_eq!(
        agent.received("session/set_mode")[0]["params"]["modeId"],
        "plan"
    );
    let prompt = &agent.received("session/prompt")[0]["params"]["prompt"][0]["text"];
    assert!(
        prompt
            .as_str()
            .unwrap()
            .contains("Why does add(2, 2) return 0?"),
        "{prompt}"
    );
    let answers: Vec<Value> = agent
        .lines("permissions.jsonl")
        .into_iter()
        .map(|p| p["answer"]["result"].clone())
        .collect();
    assert_eq!(
        answers[0],
        json!({"outcome": {"outcome": "selected", "optionId": "proceed_once"}})
    );
    for a in &answers[1..] {
        assert_eq!(
            *a,
            json!({"outcome": {"outcome": "selected", "optionId": "cancel"}})
        );
    }

    // Each tool call and each permission was a progress notification.
    let progress: Vec<String> = recorder
        .progress
        .lock()
        .unwrap()
        .iter()
        .filter_map(|p| p.message.clone())
        .collect();
    assert!(
        progress.iter().any(|m| m == "read ReadFile src/lib.rs"),
        "{progress:?}"
    );
    assert!(
        progress
            .iter()
            .any(|m| m.starts_with("rejected Shell rm -rf /")),
        "{progress:?}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn modes_that_write_need_the_servers_consent() {
    let agent = Agent::new(json!([[
        permission("p1", "Edit src/lib.rs", "edit", Some("src/lib.rs")),
        permission("p2", "Shell make", "execute", None),
        chunk("agent_message_chunk", "edited"),
    ]]));
    let client = start(&agent, &[]).await;
    let r = call(
        &client,
        json!({"task": "Fix add.", "engine": "gemini-cli", "approval_mode": "yolo"}),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert_eq!(r.is_error, Some(true));
    let t = text_of(&r);
    assert!(
        t.contains("GEMINI_MCP_ACP_ALLOW_MODES") && t.contains("`yolo`"),
        "{t}"
    );
    assert!(
        agent.starts().is_empty(),
        "a refused mode started the agent"
    );
    let err = call(
        &client,
        json!({"task": "Fix add.", "engine": "gemini-cli", "approval_mode": "sudo"}),
        Duration::from_secs(30),
    )
    .await
    .unwrap_err();
    assert!(format!("{err:?}").contains("approval_mode"), "{err:?}");
    let err = call(
        &client,
        json!({"task": "Fix add.", "approval_mode": "plan"}),
        Duration::from_secs(30),
    )
    .await
    .unwrap_err();
    assert!(format!("{err:?}").contains("engine"), "{err:?}");
    client.cancel().await.unwrap();

    // Another mode than the one the operator listed is refused as well.
    let client = start(&agent, &[("GEMINI_MCP_ACP_ALLOW_MODES", "autoEdit")]).await;
    let r = call(
        &client,
        json!({"task": "Fix add.", "engine": "gemini-cli", "approval_mode": "yolo"}),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert_eq!(r.is_error, Some(true));
    let t = text_of(&r);
    assert!(
        t.contains("GEMINI_MCP_ACP_ALLOW_MODES") && t.contains("`yolo`"),
        "{t}"
    );
    assert!(
        agent.starts().is_empty(),
        "a refused mode started the agent"
    );
    client.cancel().await.unwrap();
}

/// A mode that writes, allowed by the operator, runs: the CLI's edit tools (and in `yolo` its
/// shell) are the agent's, the project root is a workspace directory of the CLI's, and the CLI
/// asks before each edit and command (its session in its `default` mode, our policy file saying
/// `ask_user`), so that the server's policy judges every one: an edit inside the project allowed,
/// outside it, into a secret file or into `.git` refused; commands only in `yolo`. The reply
/// says what no longer holds.
#[tokio::test]
async fn an_allowed_mode_that_writes_runs_under_the_servers_policy() {
    let outside = tempfile::tempdir().unwrap();
    let elsewhere = outside.path().join("notes.txt").display().to_string();
    let edits = |n: &str| {
        vec![
            permission(
                &format!("{n}1"),
                "src/lib.rs: a - b => a + b",
                "edit",
                Some("LIB"),
            ),
            permission(
                &format!("{n}2"),
                "Write notes.txt",
                "edit",
                Some(&elsewhere),
            ),
            permission(&format!("{n}3"), "Write .env", "edit", Some("ENV")),
            permission(
                &format!("{n}4"),
                "Edit .git/config",
                "edit",
                Some("GITCONFIG"),
            ),
            permission(&format!("{n}5"), "cargo test", "execute", None),
            chunk("agent_message_chunk", "FIXED: add adds (src/lib.rs:2)."),
        ]
    };
    let agent = Agent::new(json!([edits("a"), edits("y")]));
    let root = agent.root().display().to_string();
    let script = std::fs::read_to_string(agent.dir.path().join("script.json"))
        .unwrap()
        .replace("\"LIB\"", &format!("\"{root}/src/lib.rs\""))
        .replace("\"ENV\"", &format!("\"{root}/.env\""))
        .replace("\"GITCONFIG\"", &format!("\"{root}/.git/config\""));
    std::fs::write(agent.dir.path().join("script.json"), script).unwrap();
    let client = start(&agent, &[("GEMINI_MCP_ACP_ALLOW_MODES", "autoEdit,yolo")]).await;
    let mut decisions = Vec::new();
    for mode in ["autoEdit", "yolo"] {
        let r = call(
            &client,
            json!({"task": "Fix add.", "engine": "gemini-cli", "approval_mode": mode}),
            Duration::from_secs(30),
        )
        .await
        .unwrap();
        assert_ne!(r.is_error, Some(true), "{mode}: {}", text_of(&r));
        let s = structured(&r);
        assert_eq!(s["answer"], "FIXED: add adds (src/lib.rs:2).", "{s}");
        let policy = s["agent"]["approval_policy"].as_str().unwrap();
        assert!(policy.starts_with(mode), "{policy}");
        // What no longer holds is said.
        assert!(
            policy.contains("Not held") && policy.contains("beside the server's sandbox"),
            "{policy}"
        );
        let allowed: Vec<bool> = s["agent"]["permissions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["allowed"].as_bool().unwrap())
            .collect();
        decisions.push(allowed);
    }
    // Inside, outside, a secret, .git, a command.
    assert_eq!(decisions[0], [true, false, false, false, false], "autoEdit");
    assert_eq!(decisions[1], [true, false, false, false, true], "yolo");
    // The answers the CLI got, in the format it requires.
    let answers: Vec<String> = agent
        .lines("permissions.jsonl")
        .iter()
        .map(|p| {
            p["answer"]["result"]["outcome"]["optionId"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(answers[0], "proceed_once");
    assert_eq!(answers[1], "cancel");

    // How each ran: the mode's CLI tools, asked for each time; the root a workspace directory;
    // the session in the CLI's `default` mode, so that it asks.
    let starts = agent.starts();
    assert_eq!(starts.len(), 2, "one process per mode");
    for (start, tools, dir) in [
        (
            &starts[0],
            "[\"replace\", \"write_file\"]",
            "gemini-cli/agent-autoedit",
        ),
        (
            &starts[1],
            "[\"replace\", \"write_file\", \"run_shell_command\"]",
            "gemini-cli/agent-yolo",
        ),
    ] {
        let argv: Vec<&str> = start["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert!(
            argv.windows(2)
                .any(|w| w[0] == "--include-directories" && w[1] == root),
            "{argv:?}"
        );
        let policy = start["policy"].as_str().unwrap();
        assert!(
            policy.contains(&format!("toolName = {tools}\ndecision = \"ask_user\"")),
            "{policy}"
        );
        let cwd = start["cwd"].as_str().unwrap();
        assert!(cwd.ends_with(dir), "{cwd}");
        let settings =
            std::fs::read_to_string(std::path::Path::new(cwd).join(".gemini/settings.json"))
                .unwrap();
        assert!(
            settings.contains(&format!("\"core\":{}", tools.replace(", ", ","))),
            "{settings}"
        );
    }
    for m in agent.received("session/set_mode") {
        assert_eq!(m["params"]["modeId"], "default", "{m}");
    }
    // The agent was told it may change files.
    let prompt = agent.received("session/prompt")[0]["params"]["prompt"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        prompt.contains("make the changes the task asks for"),
        "{prompt}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn continuing_reuses_the_session_and_a_crash_restarts_the_agent() {
    let agent = Agent::new(json!([
        [chunk("agent_message_chunk", "first")],
        [chunk("agent_message_chunk", "second")],
        [chunk("agent_message_chunk", "partial"), {"crash": true}],
        [chunk("agent_message_chunk", "after the crash")],
        [{"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota)."}}],
    ]));
    let client = start(&agent, &[]).await;
    let args = |id: Option<&str>| {
        let mut a = json!({"task": "Map the project.", "engine": "gemini-cli"});
        if let Some(id) = id {
            a["continuation_id"] = json!(id);
        }
        a
    };
    let r = call(&client, args(None), Duration::from_secs(30))
        .await
        .unwrap();
    let s = structured(&r);
    let id = s["continuation_id"].as_str().unwrap().to_string();
    let session = s["agent"]["session_id"].as_str().unwrap().to_string();
    assert_eq!(s["answer"], "first");

    let r = call(&client, args(Some(&id)), Duration::from_secs(30))
        .await
        .unwrap();
    let s = structured(&r);
    assert_eq!(s["answer"], "second");
    assert_eq!(s["agent"]["session"], "live");
    assert_eq!(s["agent"]["session_id"], session.as_str());
    assert_eq!(agent.starts().len(), 1, "one warm process");
    assert_eq!(agent.received("session/new").len(), 1);
    // The live session already holds the conversation: only the new request is sent.
    let prompts = agent.received("session/prompt");
    assert!(
        !prompts[1]["params"]["prompt"][0]["text"]
            .as_str()
            .unwrap()
            .contains("first")
    );

    let r = call(&client, args(Some(&id)), Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    let t = text_of(&r);
    assert!(
        t.contains("exited while answering") && t.contains("starts it again"),
        "{t}"
    );

    let r = call(&client, args(Some(&id)), Duration::from_secs(30))
        .await
        .unwrap();
    let s = structured(&r);
    assert_ne!(r.is_error, Some(true), "{s}");
    assert_eq!(s["answer"], "after the crash");
    assert_eq!(agent.starts().len(), 2, "restarted after the crash");
    // The CLI's own record of the session is gone after each call, so the session cannot be
    // loaded in the new process: it is rebuilt from our thread, the whole conversation sent.
    assert_eq!(
        agent.received("session/load")[0]["params"]["sessionId"],
        session.as_str()
    );
    assert_eq!(s["agent"]["session"], "new", "{s}");
    let rebuilt = agent.received("session/prompt").last().unwrap()["params"]["prompt"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        rebuilt.contains("first") && rebuilt.contains("second"),
        "{rebuilt}"
    );

    let r = call(&client, args(None), Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    let t = text_of(&r);
    assert!(t.contains("quota") && !t.contains(KEY), "{t}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn cancellation_cancels_the_prompt_then_kills_an_agent_that_ignores_it() {
    let agent = Agent::new(json!([
        [{"hang": true}],
        [chunk("agent_message_chunk", "still warm")],
        [{"hang_ignoring_cancel": true}],
        [chunk("agent_message_chunk", "a new process")],
    ]));
    let client = start(&agent, &[]).await;
    let args = json!({"task": "Take your time.", "engine": "gemini-cli"});
    cancel_once_prompted(&client, &agent, args.clone(), 1).await;
    let started = Instant::now();
    while agent.received("session/cancel").is_empty() && started.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        agent.received("session/cancel").len(),
        1,
        "no session/cancel sent"
    );
    let r = call(&client, args.clone(), Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(structured(&r)["answer"], "still warm");
    assert_eq!(
        agent.starts().len(),
        1,
        "a cancelled prompt that stopped keeps its process"
    );

    cancel_once_prompted(&client, &agent, args.clone(), 3).await;
    let pid = agent.starts()[0]["pid"].as_i64().unwrap();
    let started = Instant::now();
    while alive(pid) && started.elapsed() < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !alive(pid),
        "the agent that ignored session/cancel is still running"
    );
    let r = call(&client, args, Duration::from_secs(30)).await.unwrap();
    assert_eq!(structured(&r)["answer"], "a new process");
    assert_eq!(agent.starts().len(), 2);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_idle_agent_exits_and_none_outlives_the_server() {
    let agent = Agent::new(json!([
        [chunk("agent_message_chunk", "one")],
        [chunk("agent_message_chunk", "two")],
    ]));
    let client = start(&agent, &[("GEMINI_MCP_ACP_IDLE_SECS", "0.5")]).await;
    let args = json!({"task": "Hello?", "engine": "gemini-cli"});
    call(&client, args.clone(), Duration::from_secs(30))
        .await
        .unwrap();
    let pid = agent.starts()[0]["pid"].as_i64().unwrap();
    let started = Instant::now();
    while alive(pid) && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!alive(pid), "the idle agent did not exit");
    call(&client, args, Duration::from_secs(30)).await.unwrap();
    assert_eq!(agent.starts().len(), 2);
    let pid = agent.starts()[1]["pid"].as_i64().unwrap();
    assert!(alive(pid));
    client.cancel().await.unwrap();
    let started = Instant::now();
    while alive(pid) && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!alive(pid), "the agent outlived the server");
}

/// The real Gemini CLI (pinned, from npm) in ACP mode, behind the fake Gemini API: its model
/// asks for a shell command, then to read a file through our tools, then answers. In every mode
/// the CLI has no shell (its own tools are denied); the read runs; the answer, the tool calls and
/// the session come back; no process is left behind.
#[tokio::test]
async fn the_real_gemini_cli_explores_over_acp_under_our_policy() {
    use crate::clients::{Client, locate};
    use crate::support::fake_gemini::{FakeGemini, Recorded, Script};
    let Some((bin, path)) = locate(Client::GeminiCli) else {
        return;
    };
    let project = crate::support::project::with(&[crate::support::project::BUGGY_ADD]);
    let root = std::fs::canonicalize(project.path()).unwrap();
    let home = tempfile::tempdir().unwrap();
    crate::clients::gemini_cli_home(home.path());

    let model = FakeGemini::start();
    let file = root.join("src/lib.rs").display().to_string();
    let pwned = root.join("pwned");
    let command = format!("touch {}", pwned.display());
    model.respond_with(move |req: &Recorded| {
        if !req.is_stream() || !req.raw_body.contains("\"mcp_project_read_lines\"") {
            return None;
        }
        let responses = req.raw_body.matches("\"functionResponse\"").count();
        Some(match responses {
            0 => Script::calls(
                &[(
                    "run_shell_command",
                    json!({"command": command, "description": "touch"}),
                )],
                "c2lnLW9uZQ==",
                [100, 5, 5],
            ),
            1 => Script::calls(
                &[("mcp_project_read_lines", json!({"path": file}))],
                "c2lnLXR3bw==",
                [100, 5, 5],
            ),
            _ => Script::text("REAL-CLI-ANSWER: add subtracts (src/lib.rs:2)."),
        })
    });
    let vars =
        crate::clients::gemini_cli_server_env(&bin, &path, home.path(), &model.base_url(), &[]);
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (client, recorder) = mcp::start_recording(&root, &refs).await;
    for mode in ["plan", "default"] {
        model.clear_requests();
        let r = call(
            &client,
            json!({"task": "Why does add(2, 2) return 0?", "engine": "gemini-cli",
                   "approval_mode": mode, "model": "flash"}),
            Duration::from_secs(120),
        )
        .await
        .unwrap();
        let s = structured(&r);
        assert_ne!(r.is_error, Some(true), "{mode}: {}", text_of(&r));
        assert_eq!(
            s["answer"], "REAL-CLI-ANSWER: add subtracts (src/lib.rs:2).",
            "{mode}: {s}"
        );
        assert_eq!(s["stop_reason"], "end_turn", "{s}");
        let a = &s["agent"];
        assert!(!a["session_id"].as_str().unwrap().is_empty(), "{s}");
        let read = a["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["status"] == "completed")
            .unwrap_or_else(|| panic!("{mode}: no read among the tool calls: {s}"));
        assert_eq!(read["status"], "completed", "{s}");
        // The file reached Gemini through our read, numbered.
        let sent = model.generate_requests();
        assert!(
            sent.iter().any(|r| r.raw_body.contains("a - b")),
            "{mode}: src/lib.rs was not read"
        );
        assert!(s["usage"]["input"].as_u64().unwrap() > 0, "{s}");
        assert!(!pwned.exists(), "{mode}: the shell command ran");
        // The command's result, as the CLI sent it to its model: refused, not run.
        let sent = model.generate_requests();
        let refused = sent
            .iter()
            .filter(|r| r.is_stream())
            .flat_map(|r| r.body["contents"].as_array().cloned().unwrap_or_default())
            .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
            .find(|p| p["functionResponse"]["name"] == "run_shell_command")
            .unwrap_or_else(|| panic!("{mode}: no result for the command"));
        let error = refused["functionResponse"]["response"]["error"]
            .as_str()
            .unwrap_or("");
        // The agent has no shell in any mode: only our read-only tools.
        assert!(error.contains("not found in registry"), "{mode}: {refused}");
    }
    let progress = recorder.progress.lock().unwrap().len();
    assert!(progress >= 2, "no progress per tool call ({progress})");
    // The warm agent is found while it lives, so the check below can see one left behind.
    let warm = acp_processes_with_home(home.path());
    assert!(!warm.is_empty(), "the warm Gemini CLI was not found");
    client.cancel().await.unwrap();
    // The server is gone: so is every Gemini CLI it started.
    let started = Instant::now();
    loop {
        let left = acp_processes_with_home(home.path());
        if left.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "left behind: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The real Gemini CLI (pinned, from npm) in `autoEdit`, which the operator allowed, behind the
/// fake Gemini API: its model writes a file inside the project, one outside it, one in `.git`,
/// a secret file, and (by a relative path, which the CLI resolves into its own working directory)
/// its workspace settings. The CLI asks before each (its session in its `default` mode, our
/// policy file saying `ask_user`), our policy answers: only the first is written. Nothing of the
/// session is left in the CLI's home.
#[tokio::test]
async fn the_real_gemini_cli_edits_only_inside_the_project_where_the_operator_allows_it() {
    use crate::clients::{Client, locate};
    use crate::support::fake_gemini::{FakeGemini, Recorded, Script};
    let Some((bin, path)) = locate(Client::GeminiCli) else {
        return;
    };
    let project = crate::support::project::with(&[
        crate::support::project::BUGGY_ADD,
        (".env", "TOKEN=x\n"),
        (".git/config", "[core]\n"),
    ]);
    let root = std::fs::canonicalize(project.path()).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    crate::clients::gemini_cli_home(home.path());
    let model = FakeGemini::start();
    let at = |p: &str| root.join(p).display().to_string();
    let writes = vec![
        (
            "write_file",
            json!({"file_path": at("NOTES.md"), "content": "WRITTEN-INSIDE\n"}),
        ),
        (
            "write_file",
            json!({"file_path": outside.path().join("x.txt").display().to_string(), "content": "OUT\n"}),
        ),
        (
            "write_file",
            json!({"file_path": at(".git/config"), "content": "[core]\n\tfsmonitor = touch PWNED\n"}),
        ),
        (
            "write_file",
            json!({"file_path": at(".env"), "content": "TOKEN=stolen\n"}),
        ),
        (
            "write_file",
            json!({"file_path": ".gemini/settings.json", "content": "{\"mcpServers\": {}}"}),
        ),
    ];
    model.respond_with(move |req: &Recorded| {
        if !req.is_stream() || !req.raw_body.contains("EDIT-TASK") {
            return None;
        }
        Some(if req.raw_body.contains("\"functionResponse\"") {
            Script::text("EDITED: NOTES.md written.")
        } else {
            Script::calls(&writes, "c2lnLW9uZQ==", [100, 5, 5])
        })
    });
    let vars = crate::clients::gemini_cli_server_env(
        &bin,
        &path,
        home.path(),
        &model.base_url(),
        &[("GEMINI_MCP_ACP_ALLOW_MODES", "autoEdit")],
    );
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (client, _recorder) = mcp::start_recording(&root, &refs).await;
    let r = call(
        &client,
        json!({"task": "EDIT-TASK: write the notes.", "engine": "gemini-cli",
               "approval_mode": "autoEdit", "model": "flash"}),
        Duration::from_secs(120),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    let s = structured(&r);
    assert!(
        s["answer"]
            .as_str()
            .unwrap()
            .ends_with("EDITED: NOTES.md written."),
        "{s}"
    );
    // The writes the CLI itself lets through (inside its workspace directories: the root and its
    // own working directory) were asked for, each, and judged by our policy; the CLI refused
    // the others itself ("Path not in workspace": outside the root, `.git`, `.env`).
    let asked: Vec<(String, bool, String)> = s["agent"]["permissions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["tool"].as_str().unwrap().to_string(),
                p["allowed"].as_bool().unwrap(),
                p["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[0].0.ends_with("NOTES.md") && asked[0].1, "{asked:?}");
    assert!(
        asked[1].0.ends_with(".gemini/settings.json")
            && !asked[1].1
            && asked[1].2.contains("the Gemini CLI's working directory"),
        "{asked:?}"
    );
    let results: Vec<String> = model
        .generate_requests()
        .iter()
        .flat_map(|q| q.body["contents"].as_array().cloned().unwrap_or_default())
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .filter(|p| p["functionResponse"]["name"] == "write_file")
        .map(|p| p["functionResponse"]["response"].to_string())
        .collect();
    assert_eq!(results.len(), 5, "{results:?}");
    for refused in &results[1..4] {
        assert!(refused.contains("Path not in workspace"), "{refused}");
    }
    // The edit the agent made is among its tool calls, with its file.
    let edits: Vec<&Value> = s["agent"]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "edit")
        .collect();
    assert!(
        edits
            .iter()
            .any(|c| c["target"] == "NOTES.md" && c["status"] == "completed"),
        "{s}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("NOTES.md")).unwrap(),
        "WRITTEN-INSIDE\n"
    );
    assert!(!outside.path().join("x.txt").exists());
    assert_eq!(
        std::fs::read_to_string(root.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join(".env")).unwrap(),
        "TOKEN=x\n"
    );
    // The agent's working directory keeps our settings.
    let workdir = root.join(".state/gemini-cli/agent-autoedit");
    let settings = std::fs::read_to_string(workdir.join(".gemini/settings.json")).unwrap();
    assert!(!settings.contains("mcpServers"), "{settings}");
    client.cancel().await.unwrap();
    // The CLI's record of the session is gone.
    assert_eq!(
        files_holding(home.path(), "EDIT-TASK"),
        Vec::<PathBuf>::new()
    );
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

/// The `cli` backend over ACP: every tool's call is a session of one warm process, Gemini as a
/// plain model (every CLI tool denied, a neutral system prompt, the tool's own instructions
/// leading the prompt).
#[tokio::test]
async fn the_cli_backend_answers_from_one_warm_process() {
    let agent = Agent::new(json!([
        [chunk("agent_message_chunk", "WARM-ONE")],
        [chunk("agent_message_chunk", "WARM-TWO")],
    ]));
    let mut vars = agent.vars(&[("GEMINI_BACKEND", "cli")]);
    vars.retain(|(k, _)| k != "GEMINI_API_KEY");
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let client = mcp::start(&agent.root(), &refs).await;
    let r = mcp::call(
        &client,
        "chat",
        json!({"prompt": "Is a trie overkill for 200 routes?"}),
    )
    .await
    .unwrap();
    let s = structured(&r);
    assert_eq!(s["answer"], "WARM-ONE", "{s}");
    let id = s["continuation_id"].as_str().unwrap().to_string();
    let r = mcp::call(
        &client,
        "chat",
        json!({"prompt": "And for 50,000?", "continuation_id": id}),
    )
    .await
    .unwrap();
    assert_eq!(structured(&r)["answer"], "WARM-TWO");

    let starts = agent.starts();
    assert_eq!(starts.len(), 1, "one warm process for both calls");
    let argv: Vec<&str> = starts[0]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        argv.contains(&"--acp") && argv.contains(&"--policy"),
        "{argv:?}"
    );
    assert!(
        starts[0]["policy"]
            .as_str()
            .unwrap()
            .contains("toolName = \"*\"\ndecision = \"deny\"")
    );
    assert!(
        starts[0]["system_md"]
            .as_str()
            .unwrap()
            .contains("# Instructions")
    );
    let tmpdir = starts[0]["tmpdir"].as_str().unwrap();
    assert!(tmpdir.contains("gemini-mcp-acp-"), "{tmpdir}");
    assert_eq!(agent.received("session/new").len(), 2, "a session per call");
    assert!(agent.received("session/set_mode").is_empty());
    let prompts = agent.received("session/prompt");
    let second = prompts[1]["params"]["prompt"][0]["text"].as_str().unwrap();
    assert!(second.starts_with("# Instructions"), "{second}");
    // Our thread is the source of truth: the whole conversation comes with each call.
    assert!(
        second.contains("Is a trie overkill")
            && second.contains("WARM-ONE")
            && second.contains("And for 50,000?"),
        "{second}"
    );
    client.cancel().await.unwrap();
    let pid = starts[0]["pid"].as_i64().unwrap();
    let started = Instant::now();
    while alive(pid) && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!alive(pid), "the warm process outlived the server");
    assert!(
        !std::path::Path::new(tmpdir).exists(),
        "its private directory was left behind"
    );
}

/// A Gemini CLI without ACP: the `cli` backend says so in the log and answers one process per
/// call.
#[tokio::test]
async fn without_acp_the_cli_backend_runs_one_process_per_call() {
    let dir = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let bin = dir.path().join("gemini");
    std::fs::write(
        &bin,
        format!(
            "#!/bin/sh\necho \"$@\" >> '{}/argv'\nfor a in \"$@\"; do [ \"$a\" = --acp ] && {{ echo 'Unknown argument: acp' >&2; exit 1; }}; done\n\
             cat > /dev/null\necho '{{\"response\": \"PER-CALL-ANSWER\", \"stats\": {{}}}}'\n",
            dir.path().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin_s = bin.display().to_string();
    let vars = [
        ("GEMINI_BACKEND", "cli"),
        ("GEMINI_CLI_PATH", bin_s.as_str()),
        ("GEMINI_MCP_LOG", "warn"),
    ];
    let client = mcp::start(project.path(), &vars).await;
    for _ in 0..2 {
        let r = mcp::call(&client, "chat", json!({"prompt": "Hello?"}))
            .await
            .unwrap();
        assert_eq!(
            structured(&r)["answer"],
            "PER-CALL-ANSWER",
            "{}",
            text_of(&r)
        );
    }
    let argv = std::fs::read_to_string(dir.path().join("argv")).unwrap();
    let acp_tries = argv.lines().filter(|l| l.contains("--acp")).count();
    assert_eq!(
        acp_tries, 1,
        "ACP is tried once, then the per-call path is kept: {argv}"
    );
    assert_eq!(
        argv.lines().filter(|l| l.contains("-o json")).count(),
        2,
        "{argv}"
    );
    client.cancel().await.unwrap();
}

/// A thread continued by a server that never saw its agent session (a restart): the session is
/// rebuilt from our thread, the whole conversation sent to a new session.
#[tokio::test]
async fn a_thread_outlives_its_agent_session_and_is_rebuilt() {
    let agent = Agent::new(json!([
        [chunk("agent_message_chunk", "FIRST-ANSWER")],
        [chunk("agent_message_chunk", "SECOND-ANSWER")],
    ]));
    let store = [("GEMINI_MCP_STORE", "embedded")];
    let client = start(&agent, &store).await;
    let r = call(
        &client,
        json!({"task": "Where is add defined?", "engine": "gemini-cli"}),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let id = structured(&r)["continuation_id"]
        .as_str()
        .unwrap()
        .to_string();
    client.cancel().await.unwrap();

    let client = start(&agent, &store).await;
    let r = call(
        &client,
        json!({"task": "And who calls it?", "engine": "gemini-cli", "continuation_id": id}),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let s = structured(&r);
    assert_eq!(s["answer"], "SECOND-ANSWER", "{s}");
    assert_eq!(s["agent"]["session"], "new", "{s}");
    assert_eq!(agent.starts().len(), 2);
    let prompts = agent.received("session/prompt");
    let rebuilt = prompts[1]["params"]["prompt"][0]["text"].as_str().unwrap();
    assert!(
        rebuilt.contains("Where is add defined?")
            && rebuilt.contains("FIRST-ANSWER")
            && rebuilt.contains("And who calls it?"),
        "{rebuilt}"
    );
    client.cancel().await.unwrap();
}

/// The ACP bridge profile (`GEMINI_MCP_COMPAT=acp-bridge`): the bridge's `gemini` call onto our
/// agent engine and policy, with its result fields; `list_models`, `list_sessions`,
/// `reset_session`.
#[tokio::test]
async fn the_acp_bridges_tools_map_onto_the_agent_engine() {
    let agent = Agent::new(json!([[
        chunk("agent_thought_chunk", "Reading."),
        update(
            "tool_call",
            json!({"toolCallId": "t1", "title": "ReadFile src/lib.rs", "kind": "read", "status": "completed"})
        ),
        chunk("agent_message_chunk", "BRIDGE-ANSWER"),
    ],]));
    let client = start(&agent, &[("GEMINI_MCP_COMPAT", "acp-bridge")]).await;
    let root = agent.root().display().to_string();
    let bridge = |name: &'static str, args: Value| {
        let client = &client;
        async move {
            let req = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
                CallToolRequestParams::new(name).with_arguments(mcp::args(args)),
            ));
            let handle = client
                .send_cancellable_request(req, PeerRequestOptions::no_options())
                .await
                .unwrap();
            match handle.await_response().await.unwrap() {
                ServerResult::CallToolResult(r) => r,
                other => panic!("unexpected {other:?}"),
            }
        }
    };
    let models = structured(&bridge("list_models", json!({})).await);
    assert_eq!(models["process_running"], false);
    assert_eq!(models["current_model"], "(not started)");
    assert_eq!(
        models["approval_modes"],
        json!(["plan", "default"]),
        "{models}"
    );

    let r = bridge(
        "gemini",
        json!({"PROMPT": "Why does add subtract?", "cd": root, "model": "flash"}),
    )
    .await;
    let s = structured(&r);
    assert_ne!(r.is_error, Some(true), "{s}");
    assert_eq!(s["success"], true);
    assert_eq!(s["agent_messages"], "BRIDGE-ANSWER");
    assert_eq!(s["thought"], "Reading.");
    assert_eq!(s["stop_reason"], "end_turn");
    assert_eq!(s["tool_calls"][0]["status"], "completed");
    assert!(s["approval_policy"].as_str().unwrap().starts_with("plan"));
    let session = s["SESSION_ID"].as_str().unwrap().to_string();
    assert_eq!(
        agent.received("session/set_mode")[0]["params"]["modeId"],
        "plan"
    );

    // The bridge defaults to yolo; here a mode above what the server allows is refused, not
    // downgraded. So are a workspace outside the project and what we cannot honour.
    for (args, says) in [
        (
            json!({"PROMPT": "x", "cd": root, "approval_mode": "yolo"}),
            "GEMINI_MCP_ACP_ALLOW_MODES",
        ),
        (json!({"PROMPT": "x", "cd": "/etc"}), "outside"),
        (
            json!({"PROMPT": "x", "cd": root, "image_path": "/tmp/a.png"}),
            "image_path",
        ),
        (
            json!({"PROMPT": "x", "cd": root, "allowed_mcp_servers": ["fs"]}),
            "allowed_mcp_servers",
        ),
        (json!({"cd": root}), "PROMPT"),
    ] {
        let r = bridge("gemini", args.clone()).await;
        let s = structured(&r);
        assert_eq!(r.is_error, Some(true), "{args}: {s}");
        assert_eq!(s["success"], false, "{args}");
        assert!(s["error"].as_str().unwrap().contains(says), "{args}: {s}");
    }
    assert_eq!(agent.starts().len(), 1, "refused calls started nothing");

    let sessions = structured(&bridge("list_sessions", json!({})).await);
    assert_eq!(sessions["count"], 1, "{sessions}");
    assert_eq!(sessions["sessions"][0]["session_id"], session.as_str());
    assert_eq!(sessions["sessions"][0]["workspace"], root.as_str());
    assert_eq!(sessions["sessions"][0]["turn_count"], 1);
    let none = structured(&bridge("reset_session", json!({"workspace": "/elsewhere"})).await);
    assert_eq!(
        none,
        json!({"reset": [], "count": 0, "message": "No session found for workspace"})
    );
    let reset = structured(&bridge("reset_session", json!({})).await);
    assert_eq!(reset, json!({"reset": "all", "count": 1}));
    let sessions = structured(&bridge("list_sessions", json!({})).await);
    assert_eq!(sessions["count"], 0, "{sessions}");
    client.cancel().await.unwrap();
}

/// SIGTERM to the server while the agent is mid-prompt: the server exits and takes its warm
/// Gemini CLI process (its whole group) with it.
#[tokio::test]
async fn sigterm_mid_prompt_leaves_no_agent_behind() {
    use tokio::io::AsyncWriteExt;
    let agent = Agent::new(json!([[{"hang_ignoring_cancel": true}]]));
    let vars = agent.vars(&[]);
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut child = mcp::command(&agent.root(), &refs)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "investigate", "arguments": {"task": "Take forever.", "engine": "gemini-cli"}}}),
    ] {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    let started = Instant::now();
    while agent.received("session/prompt").is_empty() && started.elapsed() < Duration::from_secs(20)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        agent.received("session/prompt").len(),
        1,
        "the prompt never reached the agent"
    );
    let agent_pid = agent.starts()[0]["pid"].as_i64().unwrap();
    assert!(alive(agent_pid));
    let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("the server exits on SIGTERM")
        .unwrap();
    let started = Instant::now();
    while alive(agent_pid) && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!alive(agent_pid), "the agent outlived the server");
    drop(stdin);
}

/// Google refuses Login with Google for individual accounts since 2026-06-18: the CLI answers
/// `session/new` with -32000 and Google's words. Both the agent and the `cli` backend over ACP
/// explain it and say what works, instead of passing it through.
#[tokio::test]
async fn a_login_google_refuses_is_explained() {
    let agent = Agent::new(json!([]));
    let mut vars = agent.vars(&[("ACP_STAND_IN_LOGIN", "refused")]);
    vars.retain(|(k, _)| k != "GEMINI_API_KEY");
    vars.push(("GEMINI_BACKEND".into(), "cli".into()));
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let client = mcp::start_recording(&agent.root(), &refs).await.0;
    let investigate = call(
        &client,
        json!({"task": "Where is add?", "engine": "gemini-cli"}),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let chat = call_tool(&client, "chat", json!({"prompt": "Is a trie overkill?"})).await;
    for (what, r) in [("investigate", investigate), ("chat", chat)] {
        assert_eq!(r.is_error, Some(true), "{what}");
        let t = text_of(&r);
        for says in [
            "Login with Google",
            "UNSUPPORTED_CLIENT",
            "individual",
            "2026-06-18",
            "GEMINI_API_KEY",
            "Gemini Code Assist Standard or Enterprise",
        ] {
            assert!(t.contains(says), "{what}: {t:?} lacks {says:?}");
        }
        assert!(!t.contains("ACP error"), "{what}: passed through: {t}");
    }
    assert!(
        !agent.received("session/new").is_empty(),
        "the refusal came from the agent"
    );
    client.cancel().await.unwrap();
}

async fn call_tool(
    client: &mcp::RecordingClient,
    name: &'static str,
    args: Value,
) -> rmcp::model::CallToolResult {
    let req = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
        CallToolRequestParams::new(name).with_arguments(mcp::args(args)),
    ));
    let handle = client
        .send_cancellable_request(req, PeerRequestOptions::no_options())
        .await
        .unwrap();
    match handle.await_response().await.unwrap() {
        ServerResult::CallToolResult(r) => r,
        other => panic!("unexpected {other:?}"),
    }
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

/// The CLI records every session under its home (the task, the files sent, the answers): once a
/// call is done, the agent's and the `cli` backend's alike, nothing of it is left there, and the
/// CLI's directory of our sessions' records is this user's alone.
#[tokio::test]
async fn no_record_of_a_call_is_left_under_the_clis_home() {
    let agent = Agent::new(json!([
        [chunk("agent_message_chunk", "AGENT-ANSWER-7714")],
        [chunk("agent_message_chunk", "AGENT-ANSWER-7715")],
        [chunk("agent_message_chunk", "PLAIN-ANSWER-7716")],
    ]));
    let mut vars = agent.vars(&[]);
    vars.push(("GEMINI_BACKEND".into(), "cli".into()));
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let client = mcp::start_recording(&agent.root(), &refs).await.0;
    // The server's HOME (`support::mcp`), where the CLI keeps its records.
    let home = agent.root().join(".home");
    let r = call(
        &client,
        json!({"task": "RECORD-TASK-7714: where is add?", "engine": "gemini-cli"}),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    let id = structured(&r)["continuation_id"]
        .as_str()
        .unwrap()
        .to_string();
    // A second turn of the live session, then a plain call of the `cli` backend.
    let r = call(
        &client,
        json!({"task": "RECORD-TASK-7715: and who calls it?", "engine": "gemini-cli",
               "continuation_id": id}),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert_eq!(structured(&r)["agent"]["session"], "live");
    let r = call_tool(
        &client,
        "chat",
        json!({"prompt": "RECORD-TASK-7716: a trie?"}),
    )
    .await;
    assert_eq!(
        structured(&r)["answer"],
        "PLAIN-ANSWER-7716",
        "{}",
        text_of(&r)
    );
    // The stand-in recorded each session under the home, as the real CLI does…
    let written = agent.lines("chats");
    assert_eq!(written.len(), 2, "{written:?}");
    for path in &written {
        assert!(
            path.as_str()
                .unwrap()
                .starts_with(&home.display().to_string()),
            "{path}"
        );
    }
    // …and nothing of them is left.
    for needle in ["RECORD-TASK-77", "AGENT-ANSWER-77", "PLAIN-ANSWER-77"] {
        assert_eq!(
            files_holding(&home, needle),
            Vec::<PathBuf>::new(),
            "{needle}"
        );
    }
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir(home.join(".gemini/tmp"))
        .unwrap()
        .flatten()
    {
        let mode = entry.metadata().unwrap().permissions().mode();
        assert_eq!(
            mode & 0o077,
            0,
            "{} is open to others",
            entry.path().display()
        );
    }
    client.cancel().await.unwrap();
}

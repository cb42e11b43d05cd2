//! Tool calls as MCP tasks, as clients see them: the 2026-07-28 extension over HTTP (stateless
//! requests declaring `io.modelcontextprotocol/tasks`) and the 2025-11-25 form (SEP-1686) over
//! stdio and in an HTTP session; the reply of a task is the reply of a plain call, its thread
//! saved once; cancel (the stand-in Gemini sees its request end), the time to live, an unknown
//! id, another client's task, two instances on one Redis, an instance killed with a task in
//! flight, and fifty tasks at once. A client that asks for no task is served as before.
//! `guards`: a task passes the same checks and caps as a call.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::support::fake_gemini::{FakeGemini, Script};
use crate::support::http::{HttpServer, Raw, result_text};
use crate::support::mcp::{KEY, command};
use crate::support::redis::RedisServer;

mod background;
mod guards;

const TOKEN_A: &str = "tasks-token-a-0123456789abcdef";
const TOKEN_B: &str = "tasks-token-b-0123456789abcdef";

struct Env {
    dir: tempfile::TempDir,
    fake: FakeGemini,
}

impl Env {
    fn new() -> Env {
        Env {
            dir: crate::support::project::with(&[crate::support::project::MAIN_RS]),
            fake: FakeGemini::start(),
        }
    }

    fn vars<'a>(&'a self, url: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
        let mut vars = vec![("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", url)];
        vars.extend_from_slice(extra);
        vars
    }

    async fn http(&self, extra: &[(&str, &str)]) -> HttpServer {
        let url = self.fake.base_url();
        HttpServer::start(self.dir.path(), &self.vars(&url, extra)).await
    }
}

/// Polls `cond` every 50 ms for up to `secs` seconds.
async fn until(secs: u64, mut cond: impl AsyncFnMut() -> bool) -> bool {
    for _ in 0..secs * 20 {
        if cond().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// The `_meta` of a 2026-07-28 request from a client that declares the tasks extension.
fn with_tasks() -> Value {
    json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}})
}

/// A 2026-07-28 client over HTTP (declaring tasks or not), with its bearer token.
struct Modern {
    raw: Raw,
    tasks: bool,
    next: std::sync::atomic::AtomicU64,
}

impl Modern {
    fn new(server: &HttpServer, token: Option<&str>, tasks: bool) -> Modern {
        let mut raw = Raw::new(&server.url());
        if let Some(t) = token {
            raw = raw.header("authorization", &format!("Bearer {t}"));
        }
        Modern {
            raw,
            tasks,
            next: 1.into(),
        }
    }

    async fn request(&self, method: &str, mut params: Value) -> Value {
        if self.tasks {
            params["_meta"] = with_tasks();
        }
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(task) = params["taskId"].as_str() {
            // Mcp-Name carries the task id (SEP-2243), as rmcp's client sends it.
            let task = task.to_string();
            let mut meta = crate::support::http::modern_meta();
            if let Some(extra) = params["_meta"].as_object() {
                for (k, v) in extra {
                    meta[k] = v.clone();
                }
            }
            params["_meta"] = meta;
            return self
                .raw
                .post(
                    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
                    &[
                        ("mcp-protocol-version", "2026-07-28"),
                        ("mcp-method", method),
                        ("mcp-name", &task),
                    ],
                )
                .await
                .message;
        }
        self.raw.modern(id, method, params).await.message
    }

    async fn call(&self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await
    }

    async fn get(&self, task: &str) -> Value {
        self.request("tasks/get", json!({"taskId": task})).await
    }

    async fn cancel(&self, task: &str) -> Value {
        self.request("tasks/cancel", json!({"taskId": task})).await
    }

    /// Polls `tasks/get` until the task is finished; its last answer.
    async fn finished(&self, task: &str) -> Value {
        let mut last = Value::Null;
        for _ in 0..600 {
            last = self.get(task).await;
            let status = last["result"]["status"].as_str().unwrap_or_default();
            if ["completed", "failed", "cancelled"].contains(&status) {
                return last;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("task {task} did not finish: {last}");
    }
}

fn task_id(created: &Value) -> String {
    created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no task in {created}"))
        .to_string()
}

#[tokio::test]
async fn a_client_declaring_tasks_gets_a_task_whose_result_is_the_plain_reply() {
    let env = Env::new();
    let server = env.http(&[]).await;
    let client = Modern::new(&server, None, true);
    env.fake
        .push(Script::text("## Review\nLooks fine.").delay_headers(Duration::from_millis(1500)));
    let created = client
        .call("chat", json!({"prompt": "is this sound?"}))
        .await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    assert_eq!(created["result"]["status"], "working", "{created}");
    assert!(
        created["result"]["ttlMs"].as_u64().unwrap() >= 600_000,
        "{created}"
    );
    assert!(created["result"]["pollIntervalMs"].is_u64(), "{created}");
    let id = task_id(&created);

    // While Gemini thinks, the task says so.
    assert!(until(20, async || env.fake.in_flight() == 1).await);
    let mut said = String::new();
    assert!(
        until(10, async || {
            said = client.get(&id).await["result"]["statusMessage"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            said.contains("waiting for Gemini")
        })
        .await,
        "status: {said}"
    );
    assert!(said.starts_with("chat: "), "{said}");

    let done = client.finished(&id).await;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    let reply = &done["result"]["result"];
    assert_ne!(reply["isError"], true, "{done}");
    let text = reply["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("Looks fine."), "{text}");
    let thread = reply["structuredContent"]["continuation_id"]
        .as_str()
        .expect("the reply's continuation_id")
        .to_string();
    assert_eq!(reply["_meta"]["continuation_id"], thread.as_str());

    // The turn was saved once: continuing the thread sends one earlier turn.
    let plain = Modern::new(&server, None, false);
    let next = plain
        .call(
            "chat",
            json!({"prompt": "and now?", "continuation_id": thread}),
        )
        .await;
    assert!(
        result_text(&next).contains("turns=2"),
        "{}",
        result_text(&next)
    );
    assert_eq!(env.fake.generate_requests().len(), 2);
}

#[tokio::test]
async fn a_client_that_asks_for_no_task_is_served_as_before() {
    let env = Env::new();
    let server = env.http(&[]).await;
    let plain = Modern::new(&server, None, false);
    let answer = plain.call("chat", json!({"prompt": "hello"})).await;
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    assert!(result_text(&answer).contains("FAKE-REPLY"), "{answer}");
    // Nor does a task-declaring client get a task for a tool that answers at once.
    let tasked = Modern::new(&server, None, true);
    let models = tasked.call("listmodels", json!({})).await;
    assert_eq!(models["result"]["resultType"], "complete", "{models}");
    assert!(
        models["result"]["structuredContent"].is_object(),
        "{models}"
    );
    // A client that did not declare tasks cannot poll them.
    let refused = plain
        .request("tasks/get", json!({"taskId": uuid_like()}))
        .await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
}

fn uuid_like() -> String {
    "0b7e6c1e-0000-4000-8000-000000000000".into()
}

#[tokio::test]
async fn an_unknown_task_is_a_clear_error() {
    let env = Env::new();
    let server = env.http(&[]).await;
    let client = Modern::new(&server, None, true);
    for id in [uuid_like(), "not-a-task".to_string()] {
        for answer in [client.get(&id).await, client.cancel(&id).await] {
            assert_eq!(answer["error"]["code"], -32602, "{answer}");
            let message = answer["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("unknown task"), "{message}");
            assert!(message.contains(&id), "{message}");
        }
    }
}

#[tokio::test]
async fn cancel_stops_the_gemini_request_and_saves_no_turn() {
    let env = Env::new();
    let server = env.http(&[]).await;
    let client = Modern::new(&server, None, true);
    env.fake
        .push(Script::echo().delay_headers(Duration::from_secs(600)));
    let id = task_id(
        &client
            .call(
                "codereview",
                json!({"files": ["main.rs"], "context": "a first review"}),
            )
            .await,
    );
    assert!(
        until(20, async || env.fake.in_flight() == 1).await,
        "{}",
        client.get(&id).await
    );
    let ack = client.cancel(&id).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert!(
        until(10, async || env.fake.in_flight() == 0).await,
        "the stand-in Gemini still serves the cancelled request"
    );
    let done = client.finished(&id).await;
    assert_eq!(done["result"]["status"], "cancelled", "{done}");
    assert!(done["result"]["result"].is_null(), "{done}");
    // A finished task cannot be cancelled again.
    let again = client.cancel(&id).await;
    assert_eq!(again["error"]["code"], -32602, "{again}");
    // No turn: the project has no thread to continue.
    let latest = Modern::new(&server, None, false)
        .call("chat", json!({"prompt": "x", "continuation_id": "latest"}))
        .await;
    assert!(
        result_text(&latest).contains("no earlier thread in this project"),
        "{}",
        result_text(&latest)
    );
}

#[tokio::test]
async fn another_clients_task_cannot_be_seen_read_or_cancelled() {
    let env = Env::new();
    let tokens = format!("{TOKEN_A},{TOKEN_B}");
    let server = env.http(&[("GEMINI_MCP_HTTP_TOKEN", &tokens)]).await;
    let a = Modern::new(&server, Some(TOKEN_A), true);
    let b = Modern::new(&server, Some(TOKEN_B), true);
    env.fake
        .push(Script::echo().delay_headers(Duration::from_secs(2)));
    let id = task_id(&a.call("chat", json!({"prompt": "mine"})).await);
    for answer in [b.get(&id).await, b.cancel(&id).await] {
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
    }
    let done = a.finished(&id).await;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert_eq!(b.get(&id).await["error"]["code"], -32602);
}

#[tokio::test]
async fn fifty_tasks_at_once_all_finish() {
    let env = Env::new();
    let server = env
        .http(&[
            ("GEMINI_MCP_RATE_LIMITS", "off"),
            ("GEMINI_MCP_HTTP_CLIENT_CONCURRENCY", "64"),
        ])
        .await;
    let client = std::sync::Arc::new(Modern::new(&server, None, true));
    let started: Vec<_> = (0..50)
        .map(|n| {
            let client = client.clone();
            tokio::spawn(async move {
                task_id(
                    &client
                        .call("chat", json!({"prompt": format!("question {n}")}))
                        .await,
                )
            })
        })
        .collect();
    let mut ids = Vec::new();
    for s in started {
        ids.push(s.await.unwrap());
    }
    for (n, id) in ids.iter().enumerate() {
        let done = client.finished(id).await;
        assert_eq!(done["result"]["status"], "completed", "{done}");
        let text = done["result"]["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.contains(&format!("question {n}")), "{text}");
    }
    assert_eq!(env.fake.generate_requests().len(), 50);
}

#[tokio::test]
async fn any_instance_on_one_redis_answers_for_a_task_and_a_dead_one_is_reported() {
    if crate::support::redis_missing() {
        return;
    }
    let env = Env::new();
    let redis = RedisServer::start();
    let url = redis.url();
    let shared = [
        ("REDIS_URL", url.as_str()),
        ("GEMINI_MCP_STORE", "redis"),
        ("GEMINI_MCP_HTTP_TOKEN", TOKEN_A),
    ];
    let first = env.http(&shared).await;
    let second = env.http(&shared).await;
    let on_first = Modern::new(&first, Some(TOKEN_A), true);
    let on_second = Modern::new(&second, Some(TOKEN_A), true);

    // Started on one, read on the other.
    env.fake
        .push(Script::text("from the first").delay_headers(Duration::from_millis(800)));
    let id = task_id(&on_first.call("chat", json!({"prompt": "shared"})).await);
    let seen = on_second.get(&id).await;
    assert_eq!(seen["result"]["status"], "working", "{seen}");
    let done = on_second.finished(&id).await;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert!(
        done["result"]["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("from the first"),
        "{done}"
    );

    // Cancelled through the other instance: the first one's Gemini request ends.
    env.fake
        .push(Script::echo().delay_headers(Duration::from_secs(600)));
    let id = task_id(&on_first.call("chat", json!({"prompt": "long"})).await);
    assert!(until(20, async || env.fake.in_flight() == 1).await);
    let ack = on_second.cancel(&id).await;
    assert!(ack["result"].is_object(), "{ack}");
    assert!(until(10, async || env.fake.in_flight() == 0).await);
    assert_eq!(
        on_second.finished(&id).await["result"]["status"],
        "cancelled"
    );

    // The instance running a task is killed: the task says it failed, and why.
    env.fake
        .push(Script::echo().delay_headers(Duration::from_secs(600)));
    let id = task_id(&on_first.call("chat", json!({"prompt": "doomed"})).await);
    assert!(until(20, async || env.fake.in_flight() == 1).await);
    drop(on_first);
    drop(first); // SIGKILL: no drain, no last word.
    let failed = on_second.finished(&id).await;
    assert_eq!(failed["result"]["status"], "failed", "{failed}");
    let why = failed["result"]["statusMessage"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("instance running this task stopped"), "{why}");
    assert!(failed["result"]["error"]["message"].is_string(), "{failed}");
}

/// A 2025-11-25 client over stdio, speaking raw JSON-RPC lines.
struct Stdio2025 {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    next: u64,
}

impl Stdio2025 {
    /// The process, before any request.
    fn spawn(env: &Env) -> Stdio2025 {
        let url = env.fake.base_url();
        let mut cmd = command(env.dir.path(), &env.vars(&url, &[]));
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn gemini-mcp");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Stdio2025 {
            child,
            stdin,
            lines,
            next: 1,
        }
    }

    async fn start(env: &Env) -> Stdio2025 {
        let mut client = Stdio2025::spawn(env);
        let init = client
            .request(
                "initialize",
                json!({"protocolVersion": "2025-11-25",
                       "capabilities": {"tasks": {"list": {}, "cancel": {}}},
                       "clientInfo": {"name": "tasks-test", "version": "0"}}),
            )
            .await;
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
        assert_eq!(
            init["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
            json!({}),
            "{init}"
        );
        client
            .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        client
    }

    async fn send(&mut self, message: Value) {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).await.unwrap();
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
                .await
                .expect("an answer within 60 s")
                .unwrap()
                .expect("the server is still there");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }
}

impl Drop for Stdio2025 {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

#[tokio::test]
async fn the_2025_11_25_form_over_stdio() {
    let env = Env::new();
    let mut client = Stdio2025::start(&env).await;
    let tools = client.request("tools/list", json!({})).await;
    for tool in tools["result"]["tools"].as_array().unwrap() {
        let support = if tool["name"] == "listmodels" {
            "forbidden"
        } else {
            "optional"
        };
        assert_eq!(tool["execution"]["taskSupport"], support, "{tool}");
    }

    env.fake
        .push(Script::text("## Analysis\nAll good.").delay_headers(Duration::from_millis(500)));
    let created = client
        .request(
            "tools/call",
            json!({"name": "analyze", "arguments": {"files": ["main.rs"], "question": "ok?"},
                   "task": {"ttl": 120000}}),
        )
        .await;
    let task = &created["result"]["task"];
    assert_eq!(task["status"], "working", "{created}");
    assert_eq!(task["ttl"], 120000, "{created}");
    assert!(task["pollInterval"].is_u64(), "{created}");
    let id = task["taskId"].as_str().unwrap().to_string();

    let got = client.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got["result"]["taskId"], id.as_str(), "{got}");
    // tasks/result waits for the end and is the reply of a plain call.
    let result = client.request("tasks/result", json!({"taskId": id})).await;
    let text = result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("All good."), "{result}");
    assert!(result["result"]["structuredContent"]["continuation_id"].is_string());
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str()
    );
    let listed = client.request("tasks/list", json!({})).await;
    let tasks = listed["result"]["tasks"].as_array().unwrap();
    assert!(
        tasks
            .iter()
            .any(|t| t["taskId"] == id.as_str() && t["status"] == "completed"),
        "{listed}"
    );

    // A tool that answers at once refuses to be a task.
    let refused = client
        .request(
            "tools/call",
            json!({"name": "listmodels", "arguments": {}, "task": {}}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32601, "{refused}");

    // Cancel: the task says so at once, and the stand-in sees the request end.
    env.fake
        .push(Script::echo().delay_headers(Duration::from_secs(600)));
    let created = client
        .request(
            "tools/call",
            json!({"name": "chat", "arguments": {"prompt": "long"}, "task": {}}),
        )
        .await;
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(until(20, async || env.fake.in_flight() == 1).await);
    let cancelled = client.request("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    assert!(until(10, async || env.fake.in_flight() == 0).await);
    let result = client.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(result["error"]["code"], -32600, "{result}");

    // A plain call in the same session is served as before.
    let plain = client
        .request(
            "tools/call",
            json!({"name": "chat", "arguments": {"prompt": "plain"}}),
        )
        .await;
    assert!(
        plain["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("FAKE-REPLY"),
        "{plain}"
    );
    let unknown = client
        .request("tasks/get", json!({"taskId": uuid_like()}))
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}

#[tokio::test]
async fn a_task_lives_for_its_time_to_live() {
    let env = Env::new();
    let mut client = Stdio2025::start(&env).await;
    // A finished task is kept for its TTL, then gone.
    let created = client
        .request(
            "tools/call",
            json!({"name": "chat", "arguments": {"prompt": "quick"}, "task": {"ttl": 1000}}),
        )
        .await;
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    let result = client.request("tasks/result", json!({"taskId": id})).await;
    assert!(result["result"]["content"].is_array(), "{result}");
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let gone = client.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(gone["error"]["code"], -32602, "{gone}");

    // One still running at its TTL is stopped, and says why.
    env.fake
        .push(Script::echo().delay_headers(Duration::from_secs(600)));
    let created = client
        .request(
            "tools/call",
            json!({"name": "chat", "arguments": {"prompt": "slow"}, "task": {"ttl": 1000}}),
        )
        .await;
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(until(20, async || env.fake.in_flight() == 1).await);
    assert!(until(10, async || env.fake.in_flight() == 0).await);
    let got = client.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got["result"]["status"], "failed", "{got}");
    assert!(
        got["result"]["statusMessage"]
            .as_str()
            .unwrap_or_default()
            .contains("time to live"),
        "{got}"
    );
}

#[tokio::test]
async fn the_2025_11_25_form_in_an_http_session() {
    let env = Env::new();
    let server = env.http(&[]).await;
    let raw = Raw::new(&server.url());
    let init = raw
        .post(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {"tasks": {}},
                "clientInfo": {"name": "tasks-test", "version": "0"}}}),
            &[],
        )
        .await;
    assert_eq!(
        init.message["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
        json!({}),
        "{}",
        init.text
    );
    let session = init.header("mcp-session-id").expect("Mcp-Session-Id");
    let headers = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    raw.post(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        &headers,
    )
    .await;
    let tools = raw
        .post(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            &headers,
        )
        .await;
    assert_eq!(
        tools.message["result"]["tools"][0]["execution"]["taskSupport"], "optional",
        "{}",
        tools.text
    );
    let created = raw
        .post(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "chat", "arguments": {"prompt": "over http"}, "task": {}}}),
            &headers,
        )
        .await;
    let id = created.message["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", created.text))
        .to_string();
    let result = raw
        .post(
            json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/result", "params": {"taskId": id}}),
            &headers,
        )
        .await;
    assert!(
        result_text(&result.message).contains("over http"),
        "{}",
        result.text
    );
}

/// The resident memory of process `pid`, in KiB (Linux).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A task's overhead against a plain call (BENCHMARKS.md, "Tasks"): the time to the reply of a
/// plain call and to a task's creation and its completion seen by a client polling every 10 ms,
/// and the server's memory per task in flight. Measured, not asserted; on when
/// `GEMINI_MCP_BENCH_TASKS=1` (it prints the figures).
#[tokio::test]
async fn bench_task_overhead() {
    if std::env::var_os("GEMINI_MCP_BENCH_TASKS").is_none() {
        return;
    }
    let env = Env::new();
    let server = env
        .http(&[
            ("GEMINI_MCP_RATE_LIMITS", "off"),
            ("GEMINI_MCP_HTTP_CLIENT_CONCURRENCY", "1000"),
        ])
        .await;
    let plain = Modern::new(&server, None, false);
    let tasked = Modern::new(&server, None, true);
    let runs = 40;
    let (mut plain_t, mut created_t, mut done_t) = (Vec::new(), Vec::new(), Vec::new());
    for n in 0..runs {
        let t = std::time::Instant::now();
        let r = plain.call("chat", json!({"prompt": format!("p{n}")})).await;
        assert!(result_text(&r).contains("FAKE-REPLY"));
        plain_t.push(t.elapsed());
        let t = std::time::Instant::now();
        let id = task_id(
            &tasked
                .call("chat", json!({"prompt": format!("t{n}")}))
                .await,
        );
        created_t.push(t.elapsed());
        loop {
            let got = tasked.get(&id).await;
            if got["result"]["status"] == "completed" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        done_t.push(t.elapsed());
    }
    let pid = server.pid().expect("the server runs");
    let before = rss_kib(pid);
    let held = 200;
    for _ in 0..held {
        env.fake
            .push(Script::echo().delay_headers(Duration::from_secs(600)));
    }
    for n in 0..held {
        task_id(
            &tasked
                .call("chat", json!({"prompt": format!("held {n}")}))
                .await,
        );
    }
    assert!(until(60, async || env.fake.in_flight() == held).await);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_kib(pid);
    // The same number of plain calls in flight, on a fresh server.
    let other = Env::new();
    let plain_server = other
        .http(&[
            ("GEMINI_MCP_RATE_LIMITS", "off"),
            ("GEMINI_MCP_HTTP_CLIENT_CONCURRENCY", "1000"),
        ])
        .await;
    let plain_pid = plain_server.pid().expect("the server runs");
    let warm = Modern::new(&plain_server, None, false);
    for n in 0..runs {
        warm.call("chat", json!({"prompt": format!("w{n}")})).await;
    }
    let plain_before = rss_kib(plain_pid);
    for _ in 0..held {
        other
            .fake
            .push(Script::echo().delay_headers(Duration::from_secs(600)));
    }
    let url = plain_server.url();
    let calls: Vec<_> = (0..held)
        .map(|n| {
            let raw = Raw::new(&url);
            tokio::spawn(async move {
                raw.call(n as u64, "chat", json!({"prompt": format!("h{n}")}))
                    .await
            })
        })
        .collect();
    assert!(until(60, async || other.fake.in_flight() == held).await);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let plain_after = rss_kib(plain_pid);
    for c in calls {
        c.abort();
    }
    println!(
        "BENCH plain calls: RSS {plain_before} KiB -> {plain_after} KiB with {held} plain calls in flight ({:.1} KiB per call)",
        (plain_after.saturating_sub(plain_before)) as f64 / held as f64
    );
    println!(
        "BENCH tasks: plain call median {:?}; task created median {:?}, completed (10 ms polling) median {:?}; \
         RSS {before} KiB -> {after} KiB with {held} tasks in flight ({:.1} KiB per task)",
        median(plain_t),
        median(created_t),
        median(done_t),
        (after.saturating_sub(before)) as f64 / held as f64
    );
}

#[tokio::test]
async fn the_2026_07_28_extension_over_stdio() {
    let env = Env::new();
    let mut client = Stdio2025::spawn(&env);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    });
    let discovered = client
        .request("server/discover", json!({"_meta": meta}))
        .await;
    assert!(
        discovered["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"]
            .is_object(),
        "{discovered}"
    );
    let created = client
        .request(
            "tools/call",
            json!({"name": "chat", "arguments": {"prompt": "over stdio"}, "_meta": meta}),
        )
        .await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"].as_str().unwrap().to_string();
    let mut last = Value::Null;
    for _ in 0..400 {
        last = client
            .request("tasks/get", json!({"taskId": id, "_meta": meta}))
            .await;
        if last["result"]["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(last["result"]["status"], "completed", "{last}");
    assert!(
        last["result"]["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("over stdio"),
        "{last}"
    );
}

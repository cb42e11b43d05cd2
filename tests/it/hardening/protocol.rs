//! The protocol edge over stdio, as raw lines: what a buggy or hostile client can send.
//!
//! Documented behaviour (rmcp's stdio transport, as the other official MCP SDKs):
//! - a line that is not JSON at all (or not UTF-8) is ignored, with no reply: it has no id to
//!   answer, and answering garbage can start an error storm with a peer that echoes it;
//! - JSON that is not a JSON-RPC message (`null`, `42`, `[]`, a batch, `"jsonrpc":"1.0"`, an
//!   object id, params of the wrong JSON type) gets `-32600 Invalid request`;
//! - an unknown method gets `-32601`; a known method with malformed params `-32602`;
//! - a line over the transport's 16 MiB limit is discarded and logged; below it, a huge tool
//!   argument is answered (`resend_prompt`: save it to a file and pass the path);
//! - after `notifications/cancelled` the cancelled request gets no reply and its Gemini call is
//!   dropped;
//! - valid JSON that serde cannot hold is still answered: an id it cannot read (`1e400`) gets
//!   `-32600` with id `null`, a readable id with an unreadable value in the params gets `-32602`
//!   naming the field; a lone surrogate escape (`\ud800`) is read as U+FFFD;
//! - a request whose id is already in flight gets `-32600` "id already in use"; the first one is
//!   still answered.
//!
//! After every case the server still answers: each case is followed by a `ping` whose reply must
//! be the next message (so a case that answered nothing really answered nothing).

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

use super::{Env, long_tests, rss_kib};
use crate::support::fake_gemini::Script;
use crate::support::mcp::{self, KEY, call, text};

/// The server driven by hand: lines in, JSON messages out.
struct Raw {
    child: Child,
    stdin: ChildStdin,
    out: mpsc::UnboundedReceiver<Value>,
    next_id: u64,
}

impl Raw {
    async fn start(env: &Env, extra: &[(&str, &str)]) -> Raw {
        let base = env.fake.base_url();
        let mut child = mcp::command(env.root(), &env.vars(&base, extra))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn gemini-mcp");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, out) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout carries only JSON-RPC: {e}: {line}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let mut raw = Raw {
            child,
            stdin,
            out,
            next_id: 1000,
        };
        let init = raw
            .request(
                "initialize",
                json!({"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "hardening", "version": "1"}}),
            )
            .await;
        assert!(init["result"]["serverInfo"].is_object(), "{init}");
        raw.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        raw
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    async fn send(&mut self, line: &[u8]) {
        self.stdin.write_all(line).await.unwrap();
        self.stdin.write_all(b"\n").await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// The next message from the server, or `None` after `wait`.
    async fn next(&mut self, wait: Duration) -> Option<Value> {
        tokio::time::timeout(wait, self.out.recv())
            .await
            .ok()
            .flatten()
    }

    /// Sends a request and returns its reply (skipping notifications).
    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(msg.to_string().as_bytes()).await;
        self.reply_to(id, Duration::from_secs(60)).await
    }

    async fn reply_to(&mut self, id: u64, wait: Duration) -> Value {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next(left).await {
                Some(v) if v["id"] == id => return v,
                Some(v) if v.get("id").is_none() && v.get("method").is_some() => continue,
                Some(v) => panic!("waiting for the reply to {id}, got {v}"),
                None => panic!("no reply to request {id} within {wait:?}"),
            }
        }
    }

    /// The server still serves: a ping's reply is the very next message.
    async fn still_serving(&mut self, after: &str) {
        self.next_id += 1;
        let id = self.next_id;
        self.send(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#).as_bytes())
            .await;
        let v = self
            .next(Duration::from_secs(30))
            .await
            .unwrap_or_else(|| panic!("after {after}: no reply to ping"));
        assert_eq!(v["id"], id, "after {after}: unexpected message {v}");
        assert_eq!(v["result"], json!({}), "after {after}: {v}");
    }
}

/// What a raw line must produce.
#[derive(Debug)]
enum Expect {
    /// No reply at all (the next message is the following ping's reply).
    Nothing,
    /// A JSON-RPC error with this code, and with this id (`Value::Null`: no id or `null`).
    Error(i64, Value),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_raw_lines_get_json_rpc_errors_and_the_server_keeps_serving() {
    let env = Env::new();
    let mut raw = Raw::start(&env, &[]).await;
    use Expect::*;
    let cases: Vec<(&[u8], Expect)> = vec![
        // Not JSON: ignored.
        (b"{", Nothing),
        (b"garbage", Nothing),
        (b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"", Nothing),
        (b"\xff\xfe{}", Nothing),
        (b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xc0\xafng\"}", Nothing),
        // JSON, but not a JSON-RPC message.
        (b"null", Error(-32600, Value::Null)),
        (b"42", Error(-32600, Value::Null)),
        (b"\"ping\"", Error(-32600, Value::Null)),
        (b"{}", Error(-32600, Value::Null)),
        (b"[]", Error(-32600, Value::Null)),
        (
            br#"[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"tools/list"}]"#,
            Error(-32600, Value::Null),
        ),
        (br#"{"jsonrpc":"1.0","id":4,"method":"ping"}"#, Error(-32600, Value::Null)),
        (br#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#, Error(-32600, Value::Null)),
        (br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#, Error(-32600, Value::Null)),
        (br#"{"jsonrpc":"2.0","id":5,"method":7}"#, Error(-32600, Value::Null)),
        (
            br#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":"chat"}"#,
            Error(-32600, Value::Null),
        ),
        (
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":"x"}"#,
            Error(-32600, Value::Null),
        ),
        // Valid JSON that serde_json cannot hold: an id out of range is unreadable...
        (br#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#, Error(-32600, Value::Null)),
        (br#"{"jsonrpc":"2.0","id":-1e400,"method":"tools/list"}"#, Error(-32600, Value::Null)),
        // ...a readable id with an out-of-range number in the params is answered, naming it.
        (
            br#"{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"chat","arguments":{"prompt":"x","temperature":1e400}}}"#,
            Error(-32602, json!(15)),
        ),
        (
            br#"{"id":"s16","jsonrpc":"2.0","method":"tools/list","params":{"cursor":"c","_meta":{"n":[1,2e999]}}}"#,
            Error(-32602, json!("s16")),
        ),
        // Unknown methods.
        (br#"{"jsonrpc":"2.0","id":7,"method":"no/such"}"#, Error(-32601, json!(7))),
        (br#"{"jsonrpc":"2.0","id":"s8","method":"tools/destroy","params":{}}"#, Error(-32601, json!("s8"))),
        // Known methods, params of the wrong shape: invalid params, not "method not found".
        (
            br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":5}}"#,
            Error(-32602, json!(9)),
        ),
        (
            br#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"chat","arguments":[]}}"#,
            Error(-32602, json!(10)),
        ),
        (
            br#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"arguments":{"prompt":"x"}}}"#,
            Error(-32602, json!(11)),
        ),
        (
            br#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"nope","arguments":{}}}"#,
            Error(-32602, json!(12)),
        ),
        (
            br#"{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"chat","arguments":{"prompt":["x"]}}}"#,
            Error(-32602, json!(13)),
        ),
        (
            br#"{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"analyze","arguments":{"files":"main.rs","question":1}}}"#,
            Error(-32602, json!(14)),
        ),
        // Notifications nobody asked for, responses to requests never sent: ignored.
        (br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":424242}}"#, Nothing),
        (br#"{"jsonrpc":"2.0","method":"notifications/whatever","params":{}}"#, Nothing),
        (br#"{"jsonrpc":"2.0","id":99999,"result":{}}"#, Nothing),
        (br#"{"jsonrpc":"2.0","id":99998,"error":{"code":1,"message":"x"}}"#, Nothing),
        // Blank lines and a CRLF-terminated request are fine.
        (b"", Nothing),
        (b"   ", Nothing),
    ];
    for (line, expect) in &cases {
        let shown = String::from_utf8_lossy(line).into_owned();
        raw.send(line).await;
        match expect {
            Nothing => {}
            Error(code, id) => {
                let v = raw
                    .next(Duration::from_secs(30))
                    .await
                    .unwrap_or_else(|| panic!("{shown}: no reply"));
                assert_eq!(v["error"]["code"], *code, "{shown}: {v}");
                assert_eq!(
                    v.get("id").cloned().unwrap_or(Value::Null),
                    *id,
                    "{shown}: {v}"
                );
                assert!(
                    v["error"]["message"]
                        .as_str()
                        .is_some_and(|m| !m.is_empty()),
                    "{shown}: {v}"
                );
                let message = v["error"]["message"].as_str().unwrap_or_default();
                if shown.contains("1e400") || shown.contains("2e999") {
                    let field = if shown.contains("temperature") {
                        "params.arguments.temperature"
                    } else if shown.contains("2e999") {
                        "params._meta.n[1]"
                    } else {
                        "id"
                    };
                    assert!(message.contains(field), "{shown}: names `{field}`: {v}");
                }
            }
        }
        raw.still_serving(&shown).await;
    }
    // A CRLF line is one request.
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"ping\"}\r")
        .await;
    assert_eq!(
        raw.reply_to(77, Duration::from_secs(30)).await["result"],
        json!({})
    );
    let tools = raw.request("tools/list", json!({})).await;
    assert_eq!(
        tools["result"]["tools"].as_array().map(Vec::len),
        Some(8),
        "{tools}"
    );
    assert!(
        env.fake.generate_requests().is_empty(),
        "no case reached Gemini"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_huge_arguments_are_answered_or_dropped_and_the_server_keeps_serving() {
    let env = Env::new();
    let mut raw = Raw::start(&env, &[]).await;
    // 10 MB: within the transport's line limit, so the tool answers: too large for the
    // transport, save it to a file (no Gemini call).
    let ten = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "chat", "arguments": {"prompt": "x".repeat(10_000_000)}}});
    raw.send(ten.to_string().as_bytes()).await;
    let v = raw.reply_to(1, Duration::from_secs(60)).await;
    assert_eq!(
        v["result"]["structuredContent"]["status"],
        "resend_prompt",
        "{}",
        &v.to_string()[..300.min(v.to_string().len())]
    );
    // Many huge fields at once, and deep nesting inside an ignored field.
    let nested = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"chat","arguments":{{"prompt":"hi","extra":{nested}}}}}}}"#
    );
    // Nesting deeper than serde_json's recursion limit makes the line unparsable: ignored.
    raw.send(deep.as_bytes()).await;
    raw.still_serving("deep nesting").await;
    // 20 MB: over the 16 MiB line limit: discarded (logged on stderr), no reply, still serving.
    let twenty = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "chat", "arguments": {"prompt": "y".repeat(20_000_000)}}});
    raw.send(twenty.to_string().as_bytes()).await;
    raw.still_serving("a 20 MB line").await;
    // Memory is given back, more or less: the server does not keep the 20 MB line around.
    let tools = raw.request("tools/list", json!({})).await;
    assert!(tools["result"]["tools"].is_array());
    let rss = rss_kib(raw.pid());
    assert!(rss < 400 * 1024, "RSS {rss} KiB after huge lines");
    assert!(env.fake.generate_requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_requests_after_a_cancel_are_served_and_the_cancelled_one_is_not_answered() {
    let env = Env::new();
    let mut raw = Raw::start(&env, &[]).await;
    // A 60 s answer: only the cancellation can end it early.
    env.fake
        .push(Script::text("late").delay_headers(Duration::from_secs(60)));
    raw.send(
        json!({"jsonrpc": "2.0", "id": 50, "method": "tools/call",
               "params": {"name": "chat", "arguments": {"prompt": "slow"}}})
        .to_string()
        .as_bytes(),
    )
    .await;
    let started = Instant::now();
    while env.fake.in_flight() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the call never reached Gemini"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    raw.send(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":50,"reason":"user"}}"#)
        .await;
    // The HTTP call to Gemini is dropped.
    let started = Instant::now();
    while env.fake.in_flight() > 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the Gemini call was not dropped"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A second cancel of the same id, and the same id reused for a new request: both fine.
    raw.send(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":50}}"#)
        .await;
    raw.send(
        json!({"jsonrpc": "2.0", "id": 50, "method": "tools/call",
               "params": {"name": "chat", "arguments": {"prompt": "after the cancel"}}})
        .to_string()
        .as_bytes(),
    )
    .await;
    let v = raw.reply_to(50, Duration::from_secs(60)).await;
    let t = v["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        t.contains("after the cancel"),
        "the reply is the new call's: {v}"
    );
    // And nothing else arrives for the cancelled call.
    raw.still_serving("a cancel").await;
    assert!(raw.next(Duration::from_millis(500)).await.is_none());
    assert_eq!(env.fake.generate_requests().len(), 2);
}

/// 10,000 mixed requests (`GEMINI_MCP_LONG_TESTS=1`) or, by default (CI), 2,000: `tools/list`,
/// `ping`, bad arguments, unknown tools, `listmodels` and small `chat` calls against the fake,
/// eight at a time. The server's RSS at the end may exceed its RSS after the first 20% (the
/// warm-up: tokenizer loaded, pools and caches filled) by at most 10%. Threads go to the
/// embedded store on disk, so the memory store's by-design growth is not measured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_mixed_load_keeps_rss_flat() {
    use futures::StreamExt;
    use rmcp::model::{ClientRequest, PingRequest, ServerResult};

    let total: usize = if long_tests() { 10_000 } else { 2_000 };
    let env = Env::new();
    let base = env.fake.base_url();
    let transport = rmcp::transport::TokioChildProcess::builder(mcp::command(
        env.root(),
        &env.vars(&base, &[("GEMINI_MCP_STORE", "embedded")]),
    ))
    .stderr(Stdio::null())
    .spawn()
    .unwrap()
    .0;
    let pid = transport.id().expect("pid");
    let client = rmcp::ServiceExt::serve((), transport).await.unwrap();

    let one = |i: usize| {
        let client = &client;
        async move {
            match i % 8 {
                0 | 4 => {
                    let tools = client.list_all_tools().await.expect("tools/list");
                    assert_eq!(tools.len(), 8);
                }
                1 | 5 => {
                    let r = client
                        .send_request(ClientRequest::PingRequest(PingRequest::default()))
                        .await
                        .expect("ping");
                    assert!(matches!(r, ServerResult::EmptyResult(_)), "{r:?}");
                }
                2 => {
                    let e = call(client, "chat", json!({"prompt": 5}))
                        .await
                        .unwrap_err();
                    assert_eq!(e.code.0, -32602);
                }
                3 => {
                    let e = call(client, "no_such_tool", json!({})).await.unwrap_err();
                    assert_eq!(e.code.0, -32602);
                }
                6 => {
                    let r = call(client, "listmodels", json!({})).await.unwrap();
                    assert_ne!(r.is_error, Some(true), "{}", text(&r));
                }
                _ => {
                    let r = call(
                        client,
                        "chat",
                        json!({"prompt": format!("question {i}"), "files": ["main.rs"]}),
                    )
                    .await
                    .unwrap();
                    assert_ne!(r.is_error, Some(true), "{}", text(&r));
                    assert!(text(&r).starts_with("FAKE-REPLY"), "{}", text(&r));
                }
            }
        }
    };
    let warm = total / 5;
    futures::stream::iter(0..warm)
        .map(one)
        .buffer_unordered(8)
        .collect::<Vec<()>>()
        .await;
    let at_warm = rss_kib(pid);
    futures::stream::iter(warm..total)
        .map(one)
        .buffer_unordered(8)
        .collect::<Vec<()>>()
        .await;
    let at_end = rss_kib(pid);
    eprintln!("{total} requests: RSS {at_warm} KiB after {warm}, {at_end} KiB at the end");
    assert!(
        at_end * 10 <= at_warm * 11,
        "RSS grew from {at_warm} KiB to {at_end} KiB (> 10%) over {} requests",
        total - warm
    );
    // Every chat call reached Gemini once, with its own question.
    let sent = env.fake.generate_requests();
    assert_eq!(sent.len(), total / 8);
    let asked: std::collections::HashSet<String> =
        sent.iter().map(|r| r.last_user_text()).collect();
    for i in (7..total).step_by(8) {
        let q = format!("question {i}\n");
        assert!(
            asked.iter().any(|t| t.contains(&q)),
            "{q:?} never reached Gemini"
        );
    }
    assert!(!text(&call(&client, "listmodels", json!({})).await.unwrap()).contains(KEY));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_lone_surrogates_are_read_as_replacement_characters() {
    let env = Env::new();
    let mut raw = Raw::start(&env, &[]).await;
    // Escapes as JSON.stringify writes them for a string cut in the middle of a pair.
    let line = r#"{"jsonrpc":"2.0","id":60,"method":"tools/call","params":{"name":"chat","arguments":{"prompt":"cut \ud800 here, low \udc01 alone, pair \ud83d\ude00 kept, literal \\ud800 kept"}}}"#;
    raw.send(line.as_bytes()).await;
    let v = raw.reply_to(60, Duration::from_secs(60)).await;
    assert!(v["result"].is_object(), "answered: {v}");
    assert_ne!(v["result"]["isError"], true, "{v}");
    let sent = env.fake.generate_requests();
    assert_eq!(sent.len(), 1);
    let prompt = sent[0].last_user_text();
    assert!(
        prompt.contains(
            "cut \u{fffd} here, low \u{fffd} alone, pair \u{1f600} kept, literal \\ud800 kept"
        ),
        "{prompt}"
    );
    raw.still_serving("lone surrogates").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_a_request_id_already_in_flight_is_refused_and_the_first_is_answered() {
    let env = Env::new();
    let mut raw = Raw::start(&env, &[]).await;
    env.fake
        .push(Script::text("first answer").delay_headers(Duration::from_secs(2)));
    let call = |prompt: &str| {
        json!({"jsonrpc": "2.0", "id": 70, "method": "tools/call",
               "params": {"name": "chat", "arguments": {"prompt": prompt}}})
        .to_string()
    };
    raw.send(call("first").as_bytes()).await;
    let started = Instant::now();
    while env.fake.in_flight() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the call never reached Gemini"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    raw.send(call("second, same id").as_bytes()).await;
    let refused = raw.reply_to(70, Duration::from_secs(30)).await;
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("id already in use")),
        "{refused}"
    );
    let answered = raw.reply_to(70, Duration::from_secs(60)).await;
    assert!(
        answered["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("first answer")),
        "{answered}"
    );
    assert_eq!(
        env.fake.generate_requests().len(),
        1,
        "the duplicate never ran"
    );
    // Once answered, the id may be used again.
    raw.send(call("third, after the answer").as_bytes()).await;
    let again = raw.reply_to(70, Duration::from_secs(60)).await;
    assert!(again["result"].is_object(), "{again}");
    raw.still_serving("a duplicate id").await;
}

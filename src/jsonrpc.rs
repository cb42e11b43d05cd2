//! Every JSON-RPC request gets an answer: what rmcp's decoder would drop without a word is read
//! here, or answered here, before rmcp sees it. Used by the stdio transport ([`GuardedStdio`])
//! and by the HTTP guard ([`screen`]).
//!
//! rmcp reads a line with `serde_json`, which refuses some *valid* JSON: a number beyond `f64`
//! (`1e400`) and a lone UTF-16 surrogate escape (`"\ud800"`, which `JSON.stringify` writes for a
//! string cut inside a pair). rmcp classifies both as "not JSON" and ignores the line, so the
//! client waits forever. Here:
//! - a lone surrogate escape is read as U+FFFD (the text around it is kept: refusing would lose
//!   a whole prompt over one broken character);
//! - a message serde cannot hold gets an error: `-32600` with id `null` when its `id` cannot be
//!   read, else `-32602` naming the field (`params.arguments.temperature`) when the bad value is
//!   in the params, `-32600` naming it otherwise;
//! - a line that is not JSON at all is still ignored, as rmcp and the other MCP SDKs do (it has
//!   no id to answer, and answering garbage can start an error storm with a peer that echoes).
//!
//! A request whose id is already in flight gets `-32600` "id already in use" and is not run: MCP
//! forbids reusing an id within a session, running both would spend the Gemini call twice, and a
//! `notifications/cancelled` naming the id could not say which one it meant. The first is still
//! answered. (Over HTTP each request has its own response, so only stdio tracks this.)

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use bytes::{BufMut, BytesMut};
use futures::future::BoxFuture;
use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ErrorCode, ErrorData, JsonRpcMessage, RequestId,
    ServerJsonRpcMessage,
};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::{AsyncRwTransport, DEFAULT_MAX_LINE_LENGTH, JsonRpcMessageCodec};
use serde::Deserialize;
use serde::de::IgnoredAny;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};
use tokio_util::codec::Decoder;

/// What to do with one incoming message.
#[derive(Debug)]
pub enum Screened {
    /// A message rmcp can handle; `fixed` holds the bytes to hand it when they had to change.
    Message {
        message: ClientJsonRpcMessage,
        fixed: Option<Vec<u8>>,
    },
    /// Not for rmcp: send this answer instead.
    Answer(ServerJsonRpcMessage),
    /// Nothing to answer: not JSON, or a notification to ignore.
    Ignore,
}

/// The name a 2025-11-25 task-augmented `tools/call` (SEP-1686: `params.task`) reaches the
/// server under: rmcp's `tools/call` params have no place for `task` and would drop it.
pub const SEP1686_CALL: &str = "gemini-mcp/sep1686/tools/call";
/// The names of a 2025-11-25 `tasks/get` and `tasks/cancel` (no 2026-07-28 `_meta`): rmcp would
/// read them as the 2026-07-28 extension's, whose answers have another shape.
pub const SEP1686_GET: &str = "gemini-mcp/sep1686/tasks/get";
pub const SEP1686_CANCEL: &str = "gemini-mcp/sep1686/tasks/cancel";

/// Whether a tool may run as a task (`execution.taskSupport` `optional`, else `forbidden`).
pub type TaskSupport = fn(&str) -> bool;

/// What a 2025-11-25 session's answers say of tasks that rmcp's types have no place for, added
/// to the JSON-RPC message on its way out (both transports): the `tasks` capability in the
/// `initialize` result, and each tool's `execution.taskSupport` in `tools/list`. The caller says
/// the session is a 2025-11-25 one; an `initialize` result names its version itself.
pub fn sep1686_answer(message: &mut serde_json::Value, support: TaskSupport) {
    let Some(result) = message.get_mut("result").and_then(|r| r.as_object_mut()) else {
        return;
    };
    if result.get("protocolVersion").and_then(|v| v.as_str()) == Some("2025-11-25")
        && let Some(caps) = result
            .get_mut("capabilities")
            .and_then(|c| c.as_object_mut())
    {
        caps.insert(
            "tasks".into(),
            serde_json::json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } }),
        );
    }
    if let Some(tools) = result.get_mut("tools").and_then(|t| t.as_array_mut()) {
        for tool in tools {
            let name = tool
                .get("name")
                .and_then(|n| n.as_str())
                .unwrap_or_default();
            let support = if support(name) {
                "optional"
            } else {
                "forbidden"
            };
            tool["execution"] = serde_json::json!({ "taskSupport": support });
        }
    }
}

/// A 2025-11-25 task request under the name the server handles it by (see [`SEP1686_CALL`]).
fn rename_sep1686(raw: &[u8]) -> Option<Vec<u8>> {
    memchr::memmem::find(raw, b"task")?;
    let mut value: serde_json::Value = serde_json::from_slice(raw).ok()?;
    let params = value.get("params")?;
    let renamed = match value.get("method")?.as_str()? {
        "tools/call" if params.get("task").is_some_and(serde_json::Value::is_object) => {
            SEP1686_CALL
        }
        "tasks/get" | "tasks/cancel"
            if params
                .pointer("/_meta/io.modelcontextprotocol~1protocolVersion")
                .is_none() =>
        {
            if value["method"] == "tasks/get" {
                SEP1686_GET
            } else {
                SEP1686_CANCEL
            }
        }
        _ => return None,
    };
    value["method"] = serde_json::Value::String(renamed.into());
    serde_json::to_vec(&value).ok()
}

/// Reads one message (a line without its newline, or an HTTP body).
pub fn screen(raw: &[u8]) -> Screened {
    let raw = raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw);
    match decode(raw) {
        Ok(Some(message)) => {
            if let Some(lifted) = rename_sep1686(raw)
                && let Ok(Some(message)) = decode(&lifted)
            {
                return Screened::Message {
                    message,
                    fixed: Some(lifted),
                };
            }
            return Screened::Message {
                message,
                fixed: None,
            };
        }
        Ok(None) => return Screened::Ignore,
        Err(_) => {}
    }
    let fixed = replace_lone_surrogates(raw);
    let line: &[u8] = fixed.as_deref().unwrap_or(raw);
    if fixed.is_some() {
        match decode(line) {
            Ok(Some(message)) => {
                tracing::debug!("lone surrogate escapes read as U+FFFD");
                return Screened::Message { message, fixed };
            }
            Ok(None) => return Screened::Ignore,
            Err(_) => {}
        }
    }
    answer_undecodable(line)
}

/// rmcp's own reading of a line: the message, `None` for a notification it ignores.
fn decode(line: &[u8]) -> Result<Option<ClientJsonRpcMessage>, ()> {
    let mut buf = BytesMut::with_capacity(line.len() + 1);
    buf.extend_from_slice(line);
    buf.put_u8(b'\n');
    let mut codec = JsonRpcMessageCodec::<ClientJsonRpcMessage>::new();
    codec.decode(&mut buf).map_err(|_| ())
}

/// Only the id of a message; everything else is skipped without being converted.
#[derive(Deserialize)]
struct IdOnly {
    #[serde(default)]
    id: Option<ProbeId>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ProbeId {
    Number(i64),
    String(String),
}

impl From<ProbeId> for RequestId {
    fn from(id: ProbeId) -> RequestId {
        match id {
            ProbeId::Number(n) => RequestId::Number(n),
            ProbeId::String(s) => RequestId::String(s.into()),
        }
    }
}

/// The answer to valid-looking input rmcp could not decode.
fn answer_undecodable(line: &[u8]) -> Screened {
    if std::str::from_utf8(line).is_err() || serde_json::from_slice::<IgnoredAny>(line).is_err() {
        // Not JSON at all: nothing to answer.
        return Screened::Ignore;
    }
    if let Err(e) = serde_json::from_slice::<serde_json::Value>(line) {
        // Valid JSON that serde cannot hold. Nesting past serde's depth limit stays ignored
        // (the guard against stack exhaustion); what is left is a number beyond `f64`, which
        // serde_json reports only in its message (`ErrorCode::NumberOutOfRange` is private).
        if !e.to_string().starts_with("number out of range") {
            tracing::debug!("ignoring a message serde cannot read: {e}");
            return Screened::Ignore;
        }
        return match serde_json::from_slice::<IdOnly>(line) {
            Err(_) => Screened::Answer(ServerJsonRpcMessage::error(
                ErrorData::invalid_request(
                    format!(
                        "invalid `id`: {e}; a request id must be a string or an integer within 64 bits"
                    ),
                    None,
                ),
                None,
            )),
            Ok(IdOnly { id: None }) => {
                tracing::debug!("ignoring a notification with an unreadable value: {e}");
                Screened::Ignore
            }
            Ok(IdOnly { id: Some(id) }) => {
                let (field, message) = locate(line);
                let code = if field.starts_with("params") {
                    ErrorCode::INVALID_PARAMS
                } else {
                    ErrorCode::INVALID_REQUEST
                };
                Screened::Answer(ServerJsonRpcMessage::error(
                    ErrorData::new(
                        code,
                        format!("invalid `{field}`: {message}; numbers must fit a 64-bit float"),
                        Some(serde_json::json!({ "field": field })),
                    ),
                    Some(id.into()),
                ))
            }
        };
    }
    // Valid JSON, but not a JSON-RPC message rmcp reads (rmcp answers this the same way).
    Screened::Answer(ServerJsonRpcMessage::error(
        ErrorData::invalid_request("Invalid request", None),
        None,
    ))
}

/// The path of the first value serde cannot hold, and serde's message.
fn locate(line: &[u8]) -> (String, String) {
    let mut de = serde_json::Deserializer::from_slice(line);
    match serde_path_to_error::deserialize::<_, serde_json::Value>(&mut de) {
        Ok(_) => ("message".into(), "unreadable".into()),
        Err(e) => (e.path().to_string(), e.into_inner().to_string()),
    }
}

/// `raw` with every lone UTF-16 surrogate escape inside a JSON string replaced by `\ufffd`;
/// `None` when there is none. Escaped backslashes (`\\ud800`) are left alone. Hand-written: no
/// JSON crate reads lone surrogates lossily, and this is one linear pass over the escapes.
pub fn replace_lone_surrogates(raw: &[u8]) -> Option<Vec<u8>> {
    fn hex4(b: &[u8]) -> Option<u16> {
        let s = std::str::from_utf8(b.get(..4)?).ok()?;
        u16::from_str_radix(s, 16).ok()
    }
    let escape_at = |i: usize| -> Option<u16> {
        if raw.get(i) == Some(&b'\\') && raw.get(i + 1) == Some(&b'u') {
            hex4(&raw[i + 2..])
        } else {
            None
        }
    };
    let mut out: Option<Vec<u8>> = None;
    let (mut i, mut copied, mut in_string) = (0, 0, false);
    while i < raw.len() {
        match raw[i] {
            b'"' => {
                in_string = !in_string;
                i += 1;
            }
            b'\\' if in_string => {
                let Some(unit) = escape_at(i) else {
                    i += 2; // any other escape, `\\` and `\"` included
                    continue;
                };
                let lone = match unit {
                    0xD800..=0xDBFF => match escape_at(i + 6) {
                        Some(0xDC00..=0xDFFF) => {
                            i += 12; // a pair
                            continue;
                        }
                        _ => true,
                    },
                    0xDC00..=0xDFFF => true,
                    _ => false,
                };
                if lone {
                    let o = out.get_or_insert_with(|| Vec::with_capacity(raw.len()));
                    o.extend_from_slice(&raw[copied..i]);
                    o.extend_from_slice(b"\\ufffd");
                    copied = i + 6;
                }
                i += 6;
            }
            _ => i += 1,
        }
    }
    let mut o = out?;
    o.extend_from_slice(&raw[copied.min(raw.len())..]);
    Some(o)
}

/// The ids of the requests being answered.
#[derive(Clone, Default)]
struct InFlight(Arc<Mutex<HashSet<RequestId>>>);

impl InFlight {
    fn set(&self) -> std::sync::MutexGuard<'_, HashSet<RequestId>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The stdio transport: lines from `R` through [`screen`] and the in-flight id check, messages to
/// `W` through rmcp's writer (one writer, so answers given here never interleave with rmcp's).
pub struct GuardedStdio<R, W: AsyncWrite + Send + Unpin + 'static> {
    read: BufReader<R>,
    line: Vec<u8>,
    /// Inside a line over the length limit: skip to its end.
    discarding: bool,
    out: AsyncRwTransport<RoleServer, tokio::io::Empty, W>,
    in_flight: InFlight,
    /// An answer given here, still being written (kept across cancelled `receive` calls).
    pending: Option<BoxFuture<'static, Result<(), std::io::Error>>>,
    /// Set for a 2025-11-25 session ([`sep1686_answer`]): which tools may run as tasks.
    tasks: Option<TaskSupport>,
    sep1686: bool,
}

/// The process's stdin and stdout as a [`GuardedStdio`].
pub fn stdio() -> GuardedStdio<tokio::io::Stdin, tokio::io::Stdout> {
    GuardedStdio::new(tokio::io::stdin(), tokio::io::stdout())
}

impl<R: AsyncRead + Send + Unpin + 'static, W: AsyncWrite + Send + Unpin + 'static>
    GuardedStdio<R, W>
{
    pub fn new(read: R, write: W) -> Self {
        GuardedStdio {
            read: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            out: AsyncRwTransport::new(tokio::io::empty(), write),
            in_flight: InFlight::default(),
            pending: None,
            tasks: None,
            sep1686: false,
        }
    }

    /// Tells a 2025-11-25 client about tasks ([`sep1686_answer`]).
    pub fn with_tasks(mut self, support: TaskSupport) -> Self {
        self.tasks = Some(support);
        self
    }

    /// `item`, with what a 2025-11-25 session is told of tasks.
    fn shape(&mut self, item: ServerJsonRpcMessage) -> ServerJsonRpcMessage {
        use rmcp::model::{CustomResult, ServerResult};
        let Some(support) = self.tasks else {
            return item;
        };
        let JsonRpcMessage::Response(response) = &item else {
            return item;
        };
        match &response.result {
            ServerResult::InitializeResult(init) => {
                self.sep1686 = init.protocol_version == rmcp::model::ProtocolVersion::V_2025_11_25;
                if !self.sep1686 {
                    return item;
                }
            }
            ServerResult::ListToolsResult(_) if self.sep1686 => {}
            _ => return item,
        }
        let Ok(mut value) = serde_json::to_value(&item) else {
            return item;
        };
        sep1686_answer(&mut value, support);
        ServerJsonRpcMessage::response(
            ServerResult::CustomResult(CustomResult(value["result"].take())),
            response.id.clone(),
        )
    }

    /// The next whole line (without `\n` or `\r\n`), `None` at the end of input. Cancel-safe:
    /// what was read stays in `self.line`.
    async fn next_line(&mut self) -> Option<Vec<u8>> {
        loop {
            let buf = match self.read.fill_buf().await {
                Ok(b) => b,
                Err(e) => {
                    tracing::error!("cannot read stdin: {e}");
                    return None;
                }
            };
            if buf.is_empty() {
                return None;
            }
            let (take, ends) = match buf.iter().position(|b| *b == b'\n') {
                Some(i) => (i, true),
                None => (buf.len(), false),
            };
            if !self.discarding {
                self.line.extend_from_slice(&buf[..take]);
            }
            self.read.consume(take + usize::from(ends));
            if self.line.len() > DEFAULT_MAX_LINE_LENGTH {
                tracing::error!(
                    max_line_length = DEFAULT_MAX_LINE_LENGTH,
                    "Incoming message exceeded the maximum line length, discarding it"
                );
                self.line = Vec::new();
                self.discarding = true;
            }
            if ends {
                if std::mem::take(&mut self.discarding) {
                    continue;
                }
                let mut line = std::mem::take(&mut self.line);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Some(line);
            }
        }
    }

    /// Decides on one decoded message: `Some` to hand it to rmcp, `None` when answered here.
    fn admit(&mut self, message: ClientJsonRpcMessage) -> Option<ClientJsonRpcMessage> {
        match &message {
            JsonRpcMessage::Request(r) if !self.in_flight.set().insert(r.id.clone()) => {
                let answer = ServerJsonRpcMessage::error(
                    ErrorData::invalid_request(
                        format!(
                            "id already in use: request {} is still being answered; send each request with a new id",
                            r.id
                        ),
                        None,
                    ),
                    Some(r.id.clone()),
                );
                self.pending = Some(Box::pin(self.out.send(answer)));
                return None;
            }
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification
                    && let Some(id) = &c.params.request_id
                {
                    // A cancelled request is never answered: its id is free again.
                    self.in_flight.set().remove(id);
                }
            }
            _ => {}
        }
        Some(message)
    }
}

impl<R: AsyncRead + Send + Unpin + 'static, W: AsyncWrite + Send + Unpin + 'static>
    Transport<RoleServer> for GuardedStdio<R, W>
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let answered = match &item {
            JsonRpcMessage::Response(r) => Some(r.id.clone()),
            JsonRpcMessage::Error(e) => e.id.clone(),
            _ => None,
        };
        if let Some(id) = answered {
            self.in_flight.set().remove(&id);
        }
        let item = self.shape(item);
        self.out.send(item)
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            if let Some(p) = self.pending.as_mut() {
                let written = p.await;
                self.pending = None;
                if let Err(e) = written {
                    tracing::error!("cannot write to stdout: {e}");
                    return None;
                }
            }
            let line = self.next_line().await?;
            if line.trim_ascii().is_empty() {
                continue;
            }
            match screen(&line) {
                Screened::Message { message, .. } => {
                    if let Some(m) = self.admit(message) {
                        return Some(m);
                    }
                }
                Screened::Answer(answer) => {
                    self.pending = Some(Box::pin(self.out.send(answer)));
                }
                Screened::Ignore => {}
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.out.close().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_surrogates_become_replacement_characters_and_nothing_else_changes() {
        for (input, expected) in [
            (r#"{"a":"x\ud800y"}"#, Some(r#"{"a":"x\ufffdy"}"#)),
            (r#"{"a":"\udc00"}"#, Some(r#"{"a":"\ufffd"}"#)),
            (r#"{"a":"\uD800\uD800"}"#, Some(r#"{"a":"\ufffd\ufffd"}"#)),
            (r#"{"a":"\ud800\u0041"}"#, Some(r#"{"a":"\ufffd\u0041"}"#)),
            (r#"{"a":"\ud800"#, Some(r#"{"a":"\ufffd"#)),
            (r#"{"a":"\ud83d\ude00"}"#, None),
            (r#"{"a":"\\ud800"}"#, None),
            (r#"{"a":"\"\\\ud800"}"#, Some(r#"{"a":"\"\\\ufffd"}"#)),
            (r#"{"\ud800":1}"#, Some(r#"{"\ufffd":1}"#)),
            (r#"{"a":"\u00e9 plain"}"#, None),
            (r#"{"a":"\u12"}"#, None),
            ("", None),
        ] {
            let got = replace_lone_surrogates(input.as_bytes());
            assert_eq!(
                got.as_deref().map(|b| std::str::from_utf8(b).unwrap()),
                expected,
                "{input}"
            );
        }
    }

    fn error_of(line: &str) -> (i32, serde_json::Value, String) {
        let Screened::Answer(answer) = screen(line.as_bytes()) else {
            panic!("{line}: not answered");
        };
        let v = serde_json::to_value(&answer).unwrap();
        (
            v["error"]["code"].as_i64().unwrap() as i32,
            v.get("id").cloned().unwrap_or(serde_json::Value::Null),
            v["error"]["message"].as_str().unwrap().to_string(),
        )
    }

    #[test]
    fn valid_json_serde_cannot_hold_is_answered_naming_the_field() {
        use serde_json::{Value, json};
        for (line, code, id, names) in [
            (
                r#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#,
                -32600,
                Value::Null,
                "`id`",
            ),
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"chat","arguments":{"n":[0,1e400]}}}"#,
                -32602,
                json!(3),
                "`params.arguments.n[1]`",
            ),
            (
                r#"{"jsonrpc":"2.0","id":"x","method":"ping","extra":-2e308}"#,
                -32600,
                json!("x"),
                "`extra`",
            ),
        ] {
            let (c, i, message) = error_of(line);
            assert_eq!((c, &i), (code, &id), "{line}: {message}");
            assert!(message.contains(names), "{line}: {message}");
        }
    }

    #[test]
    fn a_lone_surrogate_is_read_and_plain_garbage_is_ignored() {
        let line = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"chat","arguments":{"prompt":"a\ud800b"}}}"#;
        let Screened::Message { message, fixed } = screen(line.as_bytes()) else {
            panic!("not read");
        };
        assert!(fixed.is_some());
        let v = serde_json::to_value(&message).unwrap();
        assert_eq!(v["params"]["arguments"]["prompt"], "a\u{fffd}b");
        let deep = format!("[{}{}]", "[".repeat(1000), "]".repeat(1000));
        let not_utf8 = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xc0\xafng\"}".to_vec();
        assert!(matches!(screen(deep.as_bytes()), Screened::Ignore));
        assert!(matches!(screen(&not_utf8), Screened::Ignore));
        for garbage in ["{", "garbage", "\u{feff}", r#"{"a":1"#] {
            assert!(
                matches!(screen(garbage.as_bytes()), Screened::Ignore),
                "{garbage}"
            );
        }
        // A notification is never answered.
        assert!(!matches!(
            screen(br#"{"jsonrpc":"2.0","method":"$/lsp","params":{"n":1e400}}"#),
            Screened::Answer(_)
        ));
    }
}

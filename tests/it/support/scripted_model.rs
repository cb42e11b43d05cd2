//! What the stand-in model APIs share: a scripted "model" that decides its next tool call from the
//! tool results it has received so far, and the HTTP server thread each stand-in runs on.
//!
//! A stand-in answers a client's model requests (Anthropic Messages, OpenAI Responses, Gemini)
//! the way a real model would drive our server: call a tool, read the result, maybe call again
//! with what it learnt (a `continuation_id`), then end the turn with text.

#![allow(dead_code)] // Shared by every test file; no test uses every helper.

use std::net::SocketAddr;
use std::sync::Arc;

use serde_json::Value;

/// The text the scripted model ends its turn with.
pub const FINAL_TEXT: &str = "SCRIPTED-MODEL-DONE";

/// One call of one of our tools, by its MCP name (`chat`, `codereview`, …).
#[derive(Debug, Clone)]
pub struct ToolCall {
    pub tool: String,
    pub args: Value,
}

impl ToolCall {
    pub fn new(tool: &str, args: Value) -> ToolCall {
        ToolCall {
            tool: tool.to_string(),
            args,
        }
    }
}

/// A tool result as the client handed it to its model.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// Everything the model reads of the result, as text (blocks joined by a newline).
    pub text: String,
    /// The client marked the result as an error.
    pub is_error: bool,
}

/// The scripted model: given the results received so far (oldest first), the next call, or
/// `None` to end the turn.
pub type Brain = Arc<dyn Fn(&[Received]) -> Option<ToolCall> + Send + Sync>;

/// A brain that makes `calls` one after the other, whatever they return.
pub fn calls_in_order(calls: Vec<ToolCall>) -> Brain {
    Arc::new(move |seen: &[Received]| calls.get(seen.len()).cloned())
}

/// The first UUID in `text`: how a model picks a `continuation_id` out of a result.
pub fn find_uuid(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    (0..bytes.len().saturating_sub(35)).find_map(|i| {
        let candidate = text.get(i..i + 36)?;
        uuid::Uuid::parse_str(candidate)
            .ok()
            .filter(|_| candidate.as_bytes()[8] == b'-')
            .map(|_| candidate.to_string())
    })
}

/// An axum router served on `127.0.0.1:0` from its own OS thread and runtime until dropped, so
/// that sync tests and child processes can reach it alike.
pub struct Served {
    addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Served {
    pub fn start(name: &str, app: axum::Router) -> Served {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a stand-in API");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("local address");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("stand-in runtime");
                rt.block_on(async move {
                    let listener =
                        tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                    tokio::select! {
                        r = axum::serve(listener, app) => { r.expect("stand-in API server") }
                        _ = rx => {}
                    }
                });
            })
            .expect("spawn a stand-in API thread");
        Served {
            addr,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:<port>`
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A `text/event-stream` response with exactly this body.
pub fn sse(body: String) -> axum::response::Response {
    axum::response::Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(axum::body::Body::from(body))
        .expect("a valid response")
}

/// A JSON response.
pub fn json(status: u16, body: &Value) -> axum::response::Response {
    axum::response::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body.to_string()))
        .expect("a valid response")
}

/// One server-sent event: `event: <name>` and `data: <json>`.
pub fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

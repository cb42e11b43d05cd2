//! The real `gemini-mcp` binary serving Streamable HTTP (`serve --http 127.0.0.1:0`), in the
//! hermetic environment of [`super::mcp::command`], and the clients that drive it: rmcp's client
//! in either lifecycle (legacy `initialize` with `Mcp-Session-Id`, or 2026-07-28 `server/discover`
//! and stateless requests), and raw JSON-RPC over reqwest for protocol-level cases.
//!
//! The server prints its bound address on stderr; [`HttpServer::start`] reads it from there and
//! keeps collecting stderr (tests check it for secrets and log lines).

#![allow(dead_code)] // Shared by the HTTP tests; not every test uses every helper.

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::ProtocolVersion;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, service::RunningService};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::mcp::command;

pub type Client = RunningService<RoleClient, ()>;

/// Which MCP lifecycle a client uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// 2025-06-18: `initialize`, then requests carrying `Mcp-Session-Id`.
    Legacy,
    /// 2026-07-28: `server/discover`, then self-contained stateless requests.
    Stateless,
}

/// A running `gemini-mcp serve --http`; killed on drop.
pub struct HttpServer {
    child: tokio::process::Child,
    /// `http://127.0.0.1:<port>`
    pub base: String,
    stderr: Arc<Mutex<String>>,
    /// Copies the rest of stderr into `stderr` until the server closes it.
    reader: Option<tokio::task::JoinHandle<()>>,
}

impl HttpServer {
    /// Starts the server on a free loopback port and waits until it listens.
    pub async fn start(root: &Path, vars: &[(&str, &str)]) -> HttpServer {
        match HttpServer::try_start(root, vars, "127.0.0.1:0").await {
            Ok(s) => s,
            Err((status, stderr)) => {
                panic!("gemini-mcp serve --http failed ({status:?}):\n{stderr}")
            }
        }
    }

    /// Starts the server on `addr`; `Err` with the exit status and stderr if it exits instead.
    pub async fn try_start(
        root: &Path,
        vars: &[(&str, &str)],
        addr: &str,
    ) -> Result<HttpServer, (ExitStatus, String)> {
        let mut cmd = command(root, vars);
        cmd.args(["serve", "--http", addr])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn gemini-mcp serve --http");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut base = None;
        while let Ok(Some(line)) = lines.next_line().await {
            stderr.lock().unwrap().push_str(&format!("{line}\n"));
            if let Some(rest) = line.split("at http://").nth(1)
                && let Some(addr) = rest.split("/mcp").next()
            {
                base = Some(format!("http://{addr}"));
                break;
            }
        }
        let Some(base) = base else {
            let status = child.wait().await.expect("wait for gemini-mcp");
            let text = stderr.lock().unwrap().clone();
            return Err((status, text));
        };
        let sink = stderr.clone();
        let reader = tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                sink.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        Ok(HttpServer {
            child,
            base,
            stderr,
            reader: Some(reader),
        })
    }

    /// The server's process id (for measurements).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// `http://127.0.0.1:<port>/mcp`
    pub fn url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// What `GET /metrics` answers now.
    pub async fn metrics(&self) -> String {
        let resp = reqwest::get(format!("{}/metrics", self.base))
            .await
            .expect("GET /metrics");
        assert!(resp.status().is_success(), "{}", resp.status());
        resp.text().await.unwrap()
    }

    /// Everything the server wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Sends SIGTERM.
    #[cfg(unix)]
    pub fn terminate(&self) {
        let pid = self.child.id().expect("server still running") as i32;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        )
        .expect("send SIGTERM");
    }

    /// Waits for the process to exit (at most a minute), and for its last words on stderr to be
    /// read (a few seconds at most: a child it left behind may hold the pipe open).
    pub async fn wait(&mut self) -> ExitStatus {
        let status = tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("gemini-mcp exits within a minute")
            .expect("wait for gemini-mcp");
        if let Some(reader) = self.reader.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), reader).await;
        }
        status
    }

    /// An rmcp client of the given style, sending `token` as a bearer token if any.
    pub async fn client(&self, style: Style, token: Option<&str>) -> Client {
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.url());
        config.auth_header = token.map(String::from);
        config.allow_stateless = style == Style::Stateless;
        let transport = StreamableHttpClientTransport::from_config(config);
        let lifecycle = match style {
            Style::Legacy => ClientLifecycleMode::Initialize,
            Style::Stateless => ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        };
        ().serve_with_lifecycle(transport, lifecycle)
            .await
            .expect("MCP client connects over HTTP")
    }

    /// `GET <base><path>`: status and JSON body.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let resp = reqwest::Client::new()
            .get(format!("{}{path}", self.base))
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .expect("GET");
        let status = resp.status().as_u16();
        let body = resp.json().await.unwrap_or(Value::Null);
        (status, body)
    }
}

/// Raw JSON-RPC over HTTP, for what an MCP client library would hide.
pub struct Raw {
    http: reqwest::Client,
    pub url: String,
    pub headers: Vec<(String, String)>,
}

/// One raw answer: the HTTP status, headers, and the JSON-RPC message (from a JSON body or
/// from the SSE event carrying a result or error).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
    pub message: Value,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    }
}

/// The `_meta` every 2026-07-28 request carries.
pub fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

impl Raw {
    pub fn new(url: &str) -> Raw {
        Raw {
            http: reqwest::Client::new(),
            url: url.to_string(),
            headers: Vec::new(),
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Raw {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// POSTs `body` as is.
    pub async fn post_bytes(&self, body: Vec<u8>, extra: &[(&str, &str)]) -> Answer {
        let mut req = self
            .http
            .post(&self.url)
            .timeout(Duration::from_secs(60))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        for (k, v) in self
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(extra.iter().copied())
        {
            req = req.header(k, v);
        }
        let resp = req.body(body).send().await.expect("POST");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap_or_default();
        let message = parse_message(&text);
        Answer {
            status,
            headers,
            text,
            message,
        }
    }

    pub async fn post(&self, body: Value, extra: &[(&str, &str)]) -> Answer {
        self.post_bytes(serde_json::to_vec(&body).unwrap(), extra)
            .await
    }

    /// A 2026-07-28 stateless request: `_meta` in the params and the standard headers.
    pub async fn modern(&self, id: u64, method: &str, mut params: Value) -> Answer {
        let mut meta = modern_meta();
        if let Some(extra) = params["_meta"].as_object() {
            for (k, v) in extra {
                meta[k] = v.clone();
            }
        }
        params["_meta"] = meta;
        let name = params["name"].as_str().map(String::from);
        let mut extra = vec![
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", method),
        ];
        if let Some(n) = &name {
            extra.push(("mcp-name", n.as_str()));
        }
        self.post(
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            &extra,
        )
        .await
    }

    /// A stateless `tools/call`.
    pub async fn call(&self, id: u64, tool: &str, arguments: Value) -> Answer {
        self.modern(
            id,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        )
        .await
    }

    /// The 2025-06-18 handshake; returns the `Mcp-Session-Id`.
    pub async fn initialize(&self) -> String {
        self.initialize_with(json!({})).await
    }

    /// The 2025-06-18 handshake of a client declaring `capabilities`; returns the
    /// `Mcp-Session-Id`.
    pub async fn initialize_with(&self, capabilities: Value) -> String {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": capabilities,
            "clientInfo": {"name": "raw-test", "version": "0"}}});
        let a = self.post(init, &[]).await;
        assert_eq!(a.status, 200, "initialize: {}", a.text);
        let session = a.header("mcp-session-id").expect("Mcp-Session-Id");
        let done = self
            .post(
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                &[
                    ("mcp-session-id", &session),
                    ("mcp-protocol-version", "2025-06-18"),
                ],
            )
            .await;
        assert_eq!(done.status, 202, "notifications/initialized: {}", done.text);
        session
    }

    /// A `tools/call` in a legacy session.
    pub async fn session_call(
        &self,
        session: &str,
        id: u64,
        tool: &str,
        arguments: Value,
    ) -> Answer {
        self.post(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": tool, "arguments": arguments}}),
            &[
                ("mcp-session-id", session),
                ("mcp-protocol-version", "2025-06-18"),
            ],
        )
        .await
    }
}

/// The JSON-RPC response in a body: the body itself, or the SSE `data:` event that has a
/// `result` or an `error`.
fn parse_message(text: &str) -> Value {
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        return v;
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("result").is_some() || v.get("error").is_some())
        .unwrap_or(Value::Null)
}

/// The text of a tool result's first content block.
pub fn result_text(message: &Value) -> String {
    message["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

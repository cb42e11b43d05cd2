//! The server over Streamable HTTP, as clients and load balancers see it: both protocol styles,
//! the token, Host/Origin checks, the body limit, the admission limits, health and readiness,
//! graceful shutdown, and several instances sharing one Redis.
//!
//! One file a subject: `protocol` (both styles, progress, malformed bodies), `access` (the
//! token, Host and Origin), `limits` (sizes, rate and concurrency), `sessions` (what belongs to a
//! token, the live sessions' cap), `lifecycle` (health, readiness, shutdown, logs), `instances`
//! (several on one Redis). The environment they start servers in is here.

use std::time::Duration;

use serde_json::Value;

use crate::support::fake_gemini::FakeGemini;
use crate::support::http::HttpServer;
use crate::support::mcp::KEY;

mod access;
mod instances;
mod lifecycle;
mod limits;
mod protocol;
mod sessions;

const TOKEN: &str = "test-token-0123456789abcdef-never-logged";

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

    /// Starts a server talking to the fake Gemini, with `extra` settings.
    async fn server(&self, extra: &[(&str, &str)]) -> HttpServer {
        let url = self.fake.base_url();
        let mut vars = vec![("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", url.as_str())];
        vars.extend_from_slice(extra);
        HttpServer::start(self.dir.path(), &vars).await
    }
}

/// Polls `cond` every 50 ms for up to `secs` seconds (waits for a state, never measures time).
async fn until(secs: u64, mut cond: impl AsyncFnMut() -> bool) -> bool {
    for _ in 0..secs * 20 {
        if cond().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A tool result that is not an error.
fn succeeded(message: &Value) -> bool {
    message["result"].is_object() && message["result"]["isError"] != true
}

fn continuation_id(message: &Value) -> String {
    message["result"]["structuredContent"]["continuation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no continuation_id in {message}"))
        .to_string()
}

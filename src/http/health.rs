//! `/healthz` (liveness) and `/readyz` (readiness) for load balancers and orchestrators.
//!
//! Both answer without a token: probes rarely carry one, and the bodies reveal only which part
//! is down (`threads`, `gemini`) and its kind (`redis`, `api`), never an address, a path or a
//! message; the reason goes to the server's log. Like every route they answer only a `Host` and
//! `Origin` of the allowlist ([`super::rebinding`]), which takes the address a probe dials
//! (probes address the instance by its IP).
//!
//! Readiness: the thread store answers a ping, and the Gemini backend can work: for the API, the
//! model list (`GET /v1beta/models`, fetched once and then cached by the client, so a ready
//! instance costs Google nothing per probe); for the CLI, its executable is still there. Each
//! check is bounded by [`CHECK_TIMEOUT`].

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::app::App;
use crate::gemini::Backend;

/// Longest wait for one readiness check.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

pub async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

pub async fn readyz(State(app): State<Arc<App>>) -> (StatusCode, Json<Value>) {
    let (threads, gemini) = tokio::join!(store_check(&app), backend_check(&app));
    let ready = threads.is_ok() && gemini.is_ok();
    let state = |r: &Result<(), String>| if r.is_ok() { "ok" } else { "down" };
    for (part, r) in [("threads", &threads), ("gemini", &gemini)] {
        if let Err(why) = r {
            tracing::warn!(part, "not ready: {why}");
        }
    }
    let body = json!({
        "status": if ready { "ready" } else { "not ready" },
        "checks": {
            "threads": { "status": state(&threads), "store": app.store_kind() },
            "gemini": { "status": state(&gemini), "backend": app.gemini().backend_name() },
        }
    });
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(body))
}

async fn store_check(app: &App) -> Result<(), String> {
    match tokio::time::timeout(CHECK_TIMEOUT, app.store().ping()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!(
            "the thread store did not answer a ping within {} s",
            CHECK_TIMEOUT.as_secs()
        )),
    }
}

async fn backend_check(app: &App) -> Result<(), String> {
    match app.gemini().backend() {
        Backend::Api(client) => match tokio::time::timeout(CHECK_TIMEOUT, client.models()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!(
                "the Gemini API did not list its models within {} s",
                CHECK_TIMEOUT.as_secs()
            )),
        },
        Backend::Cli(cli) => {
            let program = cli.program().to_path_buf();
            let found = tokio::task::spawn_blocking(move || is_executable(&program))
                .await
                .unwrap_or(false);
            if found {
                Ok(())
            } else {
                Err(format!(
                    "the Gemini CLI executable {} is gone",
                    cli.program().display()
                ))
            }
        }
        Backend::Unconfigured(why) => Err(why.clone()),
    }
}

fn is_executable(path: &std::path::Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    // Windows has no executable bit.
    #[cfg(windows)]
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

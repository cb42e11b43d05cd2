//! What a 2025-11-25 client is told of tasks over HTTP that rmcp's types have no place for
//! (`jsonrpc::sep1686_answer`): the answer to its `initialize` (the `tasks` capability, when
//! that is the version agreed on) and to its `tools/list` (each tool's `execution`), rewritten
//! on the way out. Both answers are single small JSON-RPC messages, sent as JSON or as one SSE
//! event; anything else passes untouched.

use axum::body::Body;
use axum::http::HeaderMap;
use axum::response::Response;

/// Largest answer rewritten (a `tools/list` is a few tens of kilobytes).
const MAX_ANSWER: usize = 4 * 1024 * 1024;

/// Whether the answer to `method` needs the rewrite: an `initialize` (its result names the version
/// agreed on), or a `tools/list` in a 2025-11-25 session.
pub fn concerns(method: Option<&str>, headers: &HeaderMap) -> bool {
    match method {
        Some("initialize") => true,
        Some("tools/list") => {
            headers
                .get("mcp-protocol-version")
                .and_then(|v| v.to_str().ok())
                == Some("2025-11-25")
        }
        _ => false,
    }
}

/// `resp` with the tasks of a 2025-11-25 session described.
pub async fn rewrite(resp: Response) -> Response {
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ANSWER).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let text = String::from_utf8_lossy(&bytes);
    let support = crate::server::tasks::asks_a_model;
    let rewritten = if let Ok(mut message) = serde_json::from_str::<serde_json::Value>(&text) {
        crate::jsonrpc::sep1686_answer(&mut message, support);
        serde_json::to_string(&message).ok()
    } else {
        // One SSE event: rewrite its `data:` line.
        let lines: Vec<String> = text
            .split('\n')
            .map(|line| match line.strip_prefix("data:") {
                Some(data) => match serde_json::from_str::<serde_json::Value>(data.trim()) {
                    Ok(mut message) => {
                        crate::jsonrpc::sep1686_answer(&mut message, support);
                        format!("data: {message}")
                    }
                    Err(_) => line.to_string(),
                },
                None => line.to_string(),
            })
            .collect();
        Some(lines.join("\n"))
    };
    let body = rewritten.unwrap_or_else(|| text.into_owned());
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}

//! A stand-in GitHub REST API for one pull request, validating as GitHub does: a real HTTP server
//! on `127.0.0.1` (point `GITHUB_API_URL` at [`GitHubApi::base_url`]).
//!
//! Endpoints (GitHub's paths and shapes, docs.github.com/rest/pulls):
//! `GET /repos/{owner}/{repo}/pulls/{n}/files`, `…/comments`, `…/reviews` (paged by `per_page`
//! and `page`) and `POST …/reviews`. A request without the token is a 401 `Bad credentials`,
//! without a `User-Agent` a 403; a review whose comment is on a line outside the file's diff (the
//! new side of its `patch`'s hunks) is a 422 as GitHub words it, as is an unknown field, an
//! `event` outside GitHub's three, or a `COMMENT` without a body; with a read-only token
//! ([`GitHubApi::read_only`], a fork's) a review is a 403 `Resource not accessible by
//! integration`. A review accepted is kept: its comments join the pull request's comments, so a
//! re-run sees what was said.

#![allow(dead_code)] // Shared by every test file; no test uses every helper.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use super::scripted_model::Served;

const DOCS: &str = "https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request";

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub query: String,
    pub authorization: Option<String>,
    pub body: Value,
    pub raw: String,
}

struct PullState {
    token: String,
    read_only: bool,
    /// Place no comment (every line refused, as when GitHub's diff moved under the review).
    place_none: bool,
    files: Vec<Value>,
    comments: Vec<Value>,
    reviews: Vec<Value>,
    received: Vec<Received>,
    next_id: u64,
}

pub struct GitHubApi {
    served: Served,
    state: Arc<Mutex<PullState>>,
    repo: String,
    number: u64,
}

impl GitHubApi {
    /// Pull request `number` of `repo` (`owner/name`), whose changed files are `files`
    /// (`filename`, `status`, `patch` as GitHub lists them), answering to `token`.
    pub fn start(repo: &str, number: u64, token: &str, files: Vec<Value>) -> GitHubApi {
        let state = Arc::new(Mutex::new(PullState {
            token: token.to_string(),
            read_only: false,
            place_none: false,
            files,
            comments: Vec::new(),
            reviews: Vec::new(),
            received: Vec::new(),
            next_id: 1000,
        }));
        let app = Router::new()
            .route(
                "/repos/{owner}/{repo}/pulls/{number}/{list}",
                get(list).post(create),
            )
            .with_state(state.clone());
        GitHubApi {
            served: Served::start("github-api", app),
            state,
            repo: repo.to_string(),
            number,
        }
    }

    pub fn base_url(&self) -> String {
        self.served.base_url()
    }

    /// The token may read, not write (a pull request from a fork).
    pub fn read_only(&self) {
        self.state.lock().unwrap().read_only = true;
    }

    /// Refuse every comment's line with GitHub's 422 (its diff changed since it was listed).
    pub fn place_none(&self) {
        self.state.lock().unwrap().place_none = true;
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.lock().unwrap().received.clone()
    }

    pub fn reviews(&self) -> Vec<Value> {
        self.state.lock().unwrap().reviews.clone()
    }

    pub fn comments(&self) -> Vec<Value> {
        self.state.lock().unwrap().comments.clone()
    }

    /// A file entry as GitHub lists it.
    pub fn file(filename: &str, status: &str, patch: &str) -> Value {
        let additions = patch.lines().filter(|l| l.starts_with('+')).count();
        let deletions = patch.lines().filter(|l| l.starts_with('-')).count();
        json!({
            "sha": "0123456789abcdef0123456789abcdef01234567",
            "filename": filename,
            "status": status,
            "additions": additions,
            "deletions": deletions,
            "changes": additions + deletions,
            "blob_url": format!("https://github.com/o/r/blob/head/{filename}"),
            "raw_url": format!("https://github.com/o/r/raw/head/{filename}"),
            "contents_url": format!("https://api.github.com/repos/o/r/contents/{filename}"),
            "patch": patch,
        })
    }
}

fn error(status: StatusCode, message: &str, errors: Option<Vec<String>>) -> Response {
    let mut body =
        json!({"message": message, "documentation_url": DOCS, "status": status.as_str()});
    if let Some(e) = errors {
        body["errors"] = json!(e);
    }
    (status, axum::Json(body)).into_response()
}

/// Checks the credentials and the user agent as GitHub does; records the request.
fn admit(
    s: &mut PullState,
    method: &str,
    path: &str,
    query: &str,
    headers: &HeaderMap,
    raw: &[u8],
) -> Option<Response> {
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let raw = String::from_utf8_lossy(raw).into_owned();
    s.received.push(Received {
        method: method.into(),
        path: path.into(),
        query: query.into(),
        authorization: authorization.clone(),
        body: serde_json::from_str(&raw).unwrap_or(Value::Null),
        raw,
    });
    if headers.get("user-agent").is_none() {
        return Some(error(
            StatusCode::FORBIDDEN,
            "Request forbidden by administrative rules. Please make sure your request has a User-Agent header (https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required). Check https://developer.github.com for other possible causes.",
            None,
        ));
    }
    let ok = authorization.as_deref().is_some_and(|a| {
        a.strip_prefix("Bearer ")
            .or_else(|| a.strip_prefix("token "))
            == Some(s.token.as_str())
    });
    (!ok).then(|| error(StatusCode::UNAUTHORIZED, "Bad credentials", None))
}

type Route = Path<(String, String, u64, String)>;

async fn list(
    State(state): State<Arc<Mutex<PullState>>>,
    Path((owner, repo, number, what)): Route,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let mut s = state.lock().unwrap();
    let path = format!("/repos/{owner}/{repo}/pulls/{number}/{what}");
    let query = format!("{q:?}");
    if let Some(refused) = admit(&mut s, "GET", &path, &query, &headers, b"") {
        return refused;
    }
    let items = match what.as_str() {
        "files" => s.files.clone(),
        "comments" => s.comments.clone(),
        "reviews" => s.reviews.clone(),
        _ => return error(StatusCode::NOT_FOUND, "Not Found", None),
    };
    let per_page: usize = q
        .get("per_page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(30)
        .clamp(1, 100);
    let page: usize = q
        .get("page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let slice: Vec<Value> = items
        .into_iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .collect();
    axum::Json(Value::Array(slice)).into_response()
}

/// The new-side lines of a file's diff, by the hunks of its `patch`, with the hunk each is in.
fn right_lines(patch: &str) -> HashMap<u64, usize> {
    let mut out = HashMap::new();
    let (mut hunk, mut line) = (0usize, None::<u64>);
    for l in patch.lines() {
        if let Some(rest) = l.strip_prefix("@@ ") {
            hunk += 1;
            line = rest
                .split(' ')
                .find_map(|p| p.strip_prefix('+'))
                .and_then(|r| r.split(',').next())
                .and_then(|n| n.parse().ok());
            continue;
        }
        let Some(n) = line.as_mut() else { continue };
        if l.starts_with('+') || l.starts_with(' ') || l.is_empty() {
            out.insert(*n, hunk);
            *n += 1;
        }
    }
    out
}

const REVIEW_FIELDS: &[&str] = &["commit_id", "body", "event", "comments"];
const COMMENT_FIELDS: &[&str] = &[
    "path",
    "position",
    "body",
    "line",
    "side",
    "start_line",
    "start_side",
];

/// Why GitHub would refuse `body` as a review of a pull request with `files`, if it would.
fn refusal(body: &Value, files: &[Value]) -> Option<(StatusCode, String, Vec<String>)> {
    let unprocessable = |e: String| {
        Some((
            StatusCode::UNPROCESSABLE_ENTITY,
            "Unprocessable Entity".to_string(),
            vec![e],
        ))
    };
    let Value::Object(review) = body else {
        return Some((
            StatusCode::BAD_REQUEST,
            "Problems parsing JSON".into(),
            Vec::new(),
        ));
    };
    for k in review.keys() {
        if !REVIEW_FIELDS.contains(&k.as_str()) {
            return unprocessable(format!("\"{k}\" is not a permitted key."));
        }
    }
    let event = review.get("event").and_then(Value::as_str);
    if let Some(e) = event
        && !["APPROVE", "REQUEST_CHANGES", "COMMENT"].contains(&e)
    {
        return unprocessable(format!(
            "\"{e}\" is not a member of [\"APPROVE\", \"REQUEST_CHANGES\", \"COMMENT\"]."
        ));
    }
    let text = review.get("body").and_then(Value::as_str).unwrap_or("");
    if matches!(event, Some("COMMENT" | "REQUEST_CHANGES")) && text.trim().is_empty() {
        return unprocessable("Body is required for a comment or a change request".into());
    }
    let outside = || {
        unprocessable("Pull request review thread line must be part of the diff and Pull request review thread diff hunk can't be blank".into())
    };
    for c in review
        .get("comments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Value::Object(c) = c else {
            return unprocessable("comments must be objects".into());
        };
        for k in c.keys() {
            if !COMMENT_FIELDS.contains(&k.as_str()) {
                return unprocessable(format!("\"{k}\" is not a permitted key."));
            }
        }
        let (Some(path), Some(_)) = (
            c.get("path").and_then(Value::as_str),
            c.get("body").and_then(Value::as_str),
        ) else {
            return unprocessable("path and body are required".into());
        };
        let Some(file) = files.iter().find(|f| f["filename"] == path) else {
            return unprocessable("Path could not be resolved".into());
        };
        let lines = right_lines(file["patch"].as_str().unwrap_or(""));
        let side_ok = |k: &str| c.get(k).is_none_or(|s| s == "RIGHT");
        if !side_ok("side") || !side_ok("start_side") {
            return outside();
        }
        let Some(line) = c.get("line").and_then(Value::as_u64) else {
            return unprocessable("line is required (position is deprecated here)".into());
        };
        let Some(&hunk) = lines.get(&line) else {
            return outside();
        };
        if let Some(start) = c.get("start_line").and_then(Value::as_u64) {
            if start >= line {
                return unprocessable("start_line must precede line".into());
            }
            if (start..=line).any(|l| lines.get(&l) != Some(&hunk)) {
                return outside();
            }
        }
    }
    None
}

async fn create(
    State(state): State<Arc<Mutex<PullState>>>,
    Path((owner, repo, number, what)): Route,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    let mut s = state.lock().unwrap();
    let path = format!("/repos/{owner}/{repo}/pulls/{number}/{what}");
    if let Some(refused) = admit(&mut s, "POST", &path, "", &headers, &raw) {
        return refused;
    }
    if what != "reviews" {
        return error(StatusCode::NOT_FOUND, "Not Found", None);
    }
    if s.read_only {
        return error(
            StatusCode::FORBIDDEN,
            "Resource not accessible by integration",
            None,
        );
    }
    let body: Value = match serde_json::from_slice(&raw) {
        Ok(v) => v,
        Err(_) => return error(StatusCode::BAD_REQUEST, "Problems parsing JSON", None),
    };
    let files = if s.place_none {
        s.files
            .iter()
            .map(|f| json!({"filename": f["filename"], "patch": ""}))
            .collect()
    } else {
        s.files.clone()
    };
    if let Some((status, message, errors)) = refusal(&body, &files) {
        return error(status, &message, Some(errors));
    }
    s.next_id += 1;
    let id = s.next_id;
    let user = json!({"login": "github-actions[bot]", "id": 41898282, "type": "Bot"});
    for c in body["comments"].as_array().into_iter().flatten() {
        s.next_id += 1;
        let comment = json!({
            "id": s.next_id,
            "pull_request_review_id": id,
            "path": c["path"],
            "line": c["line"],
            "start_line": c.get("start_line").cloned().unwrap_or(Value::Null),
            "side": c.get("side").cloned().unwrap_or(json!("RIGHT")),
            "body": c["body"],
            "user": user,
        });
        s.comments.push(comment);
    }
    let review = json!({
        "id": id,
        "user": user,
        "body": body["body"],
        "state": "COMMENTED",
        "commit_id": body.get("commit_id").cloned().unwrap_or(Value::Null),
    });
    s.reviews.push(review.clone());
    (StatusCode::OK, axum::Json(review)).into_response()
}

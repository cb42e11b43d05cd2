//! The Files API as the Gemini API serves it: a resumable upload started with `POST
//! /upload/v1beta/files` (`X-Goog-Upload-Command: start`, the size and type in
//! `X-Goog-Upload-Header-*`; the answer's `x-goog-upload-url` names where the bytes go), the bytes
//! sent there with `upload, finalize` at offset 0, the file then `GET` and `DELETE` under
//! `/v1beta/files/{id}`. A generate call naming a `fileData.fileUri` the stand-in does not hold
//! is refused (403, as Google refuses a file that is gone or another project's).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method};
use axum::response::Response;
use serde_json::{Value, json};

#[allow(unused_imports)]
use super::*;

/// A file the stand-in holds.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldFile {
    /// `files/…`.
    pub name: String,
    pub uri: String,
    pub mime: String,
    pub bytes: Vec<u8>,
}

#[derive(Default)]
pub(super) struct FileStore {
    pub(super) held: Vec<HeldFile>,
    /// Every file ever uploaded, deleted ones included.
    pub(super) uploaded: Vec<HeldFile>,
    /// Uploads started and not finished: id, declared size and type.
    pub(super) started: Vec<(String, usize, String)>,
    pub(super) next: u32,
    /// The upload URL's origin, when a test makes it another host's.
    pub(super) foreign_origin: Option<String>,
}

impl FakeGemini {
    /// The files held now.
    pub fn files(&self) -> Vec<HeldFile> {
        self.shared.lock().files.held.clone()
    }

    /// Every file uploaded so far, deleted ones included.
    pub fn uploaded_files(&self) -> Vec<HeldFile> {
        self.shared.lock().files.uploaded.clone()
    }

    /// From now on, name upload URLs on `origin` (another host) instead of this one.
    pub fn upload_urls_on(&self, origin: &str) {
        self.shared.lock().files.foreign_origin = Some(origin.to_string());
    }
}

fn error(status: u16, code: &str, message: &str) -> Response {
    json_response(
        status,
        &json!({"error": google_error(status, code, message, Vec::new())}),
    )
}

fn resource(f: &HeldFile) -> Value {
    json!({"name": f.name, "uri": f.uri, "mimeType": f.mime, "sizeBytes": f.bytes.len().to_string(),
           "state": "ACTIVE", "source": "UPLOADED"})
}

pub(super) async fn upload(
    State(shared): State<Arc<Shared>>,
    method: Method,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let req = record(
        &shared,
        &method,
        "/upload/v1beta/files".into(),
        query.clone(),
        None,
        &headers,
        &body,
    );
    if let Some(r) = key_check(&shared, &req) {
        return r;
    }
    let command = req
        .header("x-goog-upload-command")
        .unwrap_or("")
        .to_string();
    let upload_id = query
        .as_deref()
        .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("upload_id=")))
        .map(String::from);
    match (command.as_str(), upload_id) {
        ("start", None) => {
            if req.header("x-goog-upload-protocol") != Some("resumable") {
                return error(
                    400,
                    "INVALID_ARGUMENT",
                    "Upload protocol must be resumable.",
                );
            }
            let size = req
                .header("x-goog-upload-header-content-length")
                .and_then(|v| v.parse::<usize>().ok());
            let mime = req
                .header("x-goog-upload-header-content-type")
                .map(String::from);
            let (Some(size), Some(mime)) = (size, mime) else {
                return error(
                    400,
                    "INVALID_ARGUMENT",
                    "Missing X-Goog-Upload-Header-Content-Length or -Type.",
                );
            };
            let host = req.header("host").unwrap_or("127.0.0.1").to_string();
            let mut inner = shared.lock();
            inner.files.next += 1;
            let id = format!("up{}", inner.files.next);
            inner.files.started.push((id.clone(), size, mime));
            let origin = inner
                .files
                .foreign_origin
                .clone()
                .unwrap_or_else(|| format!("http://{host}"));
            Response::builder()
                .status(200)
                .header(
                    "x-goog-upload-url",
                    format!("{origin}/upload/v1beta/files?upload_id={id}"),
                )
                .header("x-goog-upload-status", "active")
                .body(Body::empty())
                .unwrap()
        }
        ("upload, finalize", Some(id)) => {
            if req.header("x-goog-upload-offset") != Some("0") {
                return error(
                    400,
                    "INVALID_ARGUMENT",
                    "The upload offset must be 0 for a single chunk.",
                );
            }
            let mut inner = shared.lock();
            let Some(at) = inner.files.started.iter().position(|(u, _, _)| *u == id) else {
                return error(404, "NOT_FOUND", "No such upload.");
            };
            let (_, size, mime) = inner.files.started.remove(at);
            if body.len() != size {
                return error(
                    400,
                    "INVALID_ARGUMENT",
                    "The upload's size is not the one declared.",
                );
            }
            let host = req.header("host").unwrap_or("127.0.0.1").to_string();
            let file_id = format!("f{}", inner.files.next);
            let f = HeldFile {
                name: format!("files/{file_id}"),
                uri: format!("http://{host}/v1beta/files/{file_id}"),
                mime,
                bytes: body.to_vec(),
            };
            inner.files.held.push(f.clone());
            inner.files.uploaded.push(f.clone());
            json_response(200, &json!({"file": resource(&f)}))
        }
        _ => error(400, "INVALID_ARGUMENT", "Unknown upload command."),
    }
}

pub(super) async fn file_item(
    State(shared): State<Arc<Shared>>,
    method: Method,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let req = record(
        &shared,
        &method,
        format!("/v1beta/files/{id}"),
        query,
        None,
        &headers,
        &body,
    );
    if let Some(r) = key_check(&shared, &req) {
        return r;
    }
    let name = format!("files/{id}");
    let mut inner = shared.lock();
    let Some(at) = inner.files.held.iter().position(|f| f.name == name) else {
        return error(404, "NOT_FOUND", &format!("File {name} not found."));
    };
    match method {
        Method::GET => json_response(200, &resource(&inner.files.held[at])),
        Method::DELETE => {
            inner.files.held.remove(at);
            json_response(200, &json!({}))
        }
        _ => error(404, "NOT_FOUND", "Method not found."),
    }
}

/// A generate body naming a file the stand-in does not hold: Google's 403.
pub(super) fn unknown_file(shared: &Shared, body: &Value) -> Option<Response> {
    let inner = shared.lock();
    let uris: Vec<&str> = body["contents"]
        .as_array()?
        .iter()
        .flat_map(|m| m["parts"].as_array().into_iter().flatten())
        .filter_map(|p| p["fileData"]["fileUri"].as_str())
        .collect();
    let missing = uris
        .iter()
        .find(|u| !inner.files.held.iter().any(|f| f.uri == **u))?;
    Some(error(
        403,
        "PERMISSION_DENIED",
        &format!("You do not have permission to access the File {missing} or it may not exist."),
    ))
}

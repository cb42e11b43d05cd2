//! The Files API: a document too large to go inline is uploaded before the request that names it
//! (a resumable upload in one chunk, `POST /upload/v1beta/files`), named by its URI
//! (`fileData`), and deleted once the request is answered or has failed; a call dropped midway
//! (cancelled, past its deadline) deletes its uploads in the background ([`Leftovers`]). An
//! upload left behind by a killed process is deleted by Google after 48 hours. Only the largest
//! documents are uploaded, until what stays inline fits under the inline cap. The Gemini API only:
//! Vertex AI reads documents from Cloud Storage, which this server does not write, and there the
//! collector keeps documents under the inline cap.
//!
//! The upload URL comes from Google's answer: the key is sent to it only when it is on the
//! origin the calls go to, so a redirect elsewhere cannot take the key.

use std::time::Duration;

use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::ApiClient;
use crate::collector::images::MAX_INLINE_IMAGES_BYTES;
use crate::gemini::{CallContext, GeminiError, GenerateRequest, Part};

/// How long an uploaded file may stay `PROCESSING` before the call gives up on it.
const PROCESSING_WAIT: Duration = Duration::from_secs(60);

/// The documents of `req` to upload, largest first, until what stays inline fits: (message,
/// part) indexes.
pub(super) fn to_upload(req: &GenerateRequest) -> Vec<(usize, usize)> {
    let mut inline: Vec<(usize, usize, usize, bool)> = Vec::new();
    for (m, msg) in req.contents.iter().enumerate() {
        for (p, part) in msg.parts.iter().enumerate() {
            if let Part::Image { mime, data } = part {
                inline.push((m, p, data.len(), mime == "application/pdf"));
            }
        }
    }
    let mut total: usize = inline.iter().map(|i| i.2).sum();
    let cap = MAX_INLINE_IMAGES_BYTES as usize;
    let mut docs: Vec<&(usize, usize, usize, bool)> = inline.iter().filter(|i| i.3).collect();
    docs.sort_by_key(|i| std::cmp::Reverse(i.2));
    let mut out = Vec::new();
    for d in docs {
        if total <= cap {
            break;
        }
        total -= d.2;
        out.push((d.0, d.1));
    }
    out
}

/// Whether `url` is on the origin of `base` (scheme, host and port), where the key may go.
pub(super) fn same_origin(url: &str, base: &str) -> bool {
    match (reqwest::Url::parse(url), reqwest::Url::parse(base)) {
        (Ok(a), Ok(b)) => {
            a.scheme() == b.scheme()
                && a.host_str() == b.host_str()
                && a.port_or_known_default() == b.port_or_known_default()
        }
        _ => false,
    }
}

/// The uploads of a request not deleted yet: when the request's future is dropped before it
/// deletes them itself, they are deleted in the background (the key travels in the client's
/// default headers, so a clone of the client can).
pub(super) struct Leftovers {
    http: Option<reqwest::Client>,
    base: String,
    names: Vec<String>,
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        let names = std::mem::take(&mut self.names);
        let (Some(http), false) = (self.http.take(), names.is_empty()) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let base = std::mem::take(&mut self.base);
        runtime.spawn(async move {
            for name in names {
                if let Err(e) = http.delete(format!("{base}/{name}")).send().await {
                    tracing::info!(
                        "could not delete an uploaded document (Google deletes it after 48 hours): {e}"
                    );
                }
            }
        });
    }
}

/// A file uploaded for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Uploaded {
    /// `files/…`, to delete it.
    pub name: String,
    pub uri: String,
}

impl ApiClient {
    /// Whether this backend can upload documents (the Gemini API's Files API, on
    /// `generateContent`).
    pub fn takes_files(&self) -> bool {
        self.vertex.is_none() && !self.on_interactions()
    }

    /// `req` with its largest documents uploaded and named by their URIs, when what goes inline
    /// would not fit; the uploads, to delete after the request ([`ApiClient::delete_files`]).
    pub(super) async fn with_uploads(
        &self,
        req: &GenerateRequest,
        ctx: &CallContext,
    ) -> Result<(Option<GenerateRequest>, Leftovers), GeminiError> {
        let mut uploads = Leftovers {
            http: self.http().ok().cloned(),
            base: self.base.clone(),
            names: Vec::new(),
        };
        let picked = to_upload(req);
        if picked.is_empty() || !self.takes_files() {
            return Ok((None, uploads));
        }
        let mut out = req.clone();
        for (m, p) in picked {
            let Part::Image { mime, data } = &req.contents[m].parts[p] else {
                continue;
            };
            match self.upload(mime, data, ctx).await {
                Ok(u) => {
                    out.contents[m].parts[p] = Part::Recorded(json!({
                        "fileData": {"mimeType": mime, "fileUri": u.uri}
                    }));
                    uploads.names.push(u.name);
                }
                Err(e) => {
                    self.delete_files(uploads).await;
                    return Err(e);
                }
            }
        }
        Ok((Some(out), uploads))
    }

    /// Uploads `data` (of `mime`) in one chunk and waits until Google says it is ready.
    async fn upload(
        &self,
        mime: &str,
        data: &[u8],
        ctx: &CallContext,
    ) -> Result<Uploaded, GeminiError> {
        let root = self.base.trim_end_matches("/v1beta").to_string();
        let deadline = Instant::now() + self.call_timeout;
        let http = self.http()?;
        let work = async {
            let start = http
                .post(format!("{root}/upload/v1beta/files"))
                .header("X-Goog-Upload-Protocol", "resumable")
                .header("X-Goog-Upload-Command", "start")
                .header("X-Goog-Upload-Header-Content-Length", data.len().to_string())
                .header("X-Goog-Upload-Header-Content-Type", mime)
                .header(CONTENT_TYPE, "application/json")
                .body(json!({"file": {"display_name": "gemini-mcp document"}}).to_string());
            let started = self
                .send(start, Some(self.idle_timeout))
                .await
                .map_err(|f| f.error)?;
            let url = started
                .headers()
                .get("x-goog-upload-url")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
                .ok_or_else(|| GeminiError::Malformed {
                    message: "the Files API started an upload without an upload URL".into(),
                })?;
            if !same_origin(&url, &root) {
                return Err(GeminiError::Malformed {
                    message: "the Files API named an upload URL on another host; the document was not sent there"
                        .into(),
                });
            }
            let put = http
                .post(url)
                .header("X-Goog-Upload-Command", "upload, finalize")
                .header("X-Goog-Upload-Offset", "0")
                .header(CONTENT_LENGTH, data.len().to_string())
                .body(data.to_vec());
            let done = self.send(put, None).await.map_err(|f| f.error)?;
            let file: Value = done.json().await.map_err(|e| GeminiError::Malformed {
                message: format!("the Files API's answer is not JSON: {e}"),
            })?;
            let file = &file["file"];
            let (Some(name), Some(uri)) = (file["name"].as_str(), file["uri"].as_str()) else {
                return Err(GeminiError::Malformed {
                    message: "the Files API answered an upload without the file's name and URI"
                        .into(),
                });
            };
            let uploaded = Uploaded {
                name: name.to_string(),
                uri: uri.to_string(),
            };
            if file["state"].as_str() == Some("PROCESSING") {
                self.until_active(&uploaded.name).await?;
            }
            Ok(uploaded)
        };
        self.bounded(ctx, deadline, work).await
    }

    /// Waits until the file `name` is `ACTIVE` (polled once a second), failing when it fails or
    /// takes longer than [`PROCESSING_WAIT`].
    async fn until_active(&self, name: &str) -> Result<(), GeminiError> {
        let give_up = Instant::now() + PROCESSING_WAIT;
        let http = self.http()?;
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let got: Value = self
                .json(http.get(format!("{}/{name}", self.base)))
                .await
                .map_err(|f| f.error)?;
            match got["state"].as_str() {
                Some("ACTIVE") => return Ok(()),
                Some("FAILED") => {
                    return Err(GeminiError::Malformed {
                        message: "Gemini could not process the uploaded document".into(),
                    });
                }
                _ if Instant::now() > give_up => {
                    return Err(GeminiError::Malformed {
                        message: format!(
                            "the uploaded document was still being processed after {} s",
                            PROCESSING_WAIT.as_secs()
                        ),
                    });
                }
                _ => {}
            }
        }
    }

    /// Deletes the files of `uploads` (one already gone is not an error; one that cannot be
    /// deleted is said in the log, and Google deletes it after 48 hours).
    pub(super) async fn delete_files(&self, mut uploads: Leftovers) {
        let Ok(http) = self.http() else { return };
        // Off the list only once its delete has been answered: a drop midway (the call
        // cancelled while deleting) leaves it, and the rest, to `Leftovers`.
        while let Some(name) = uploads.names.last() {
            let request = http.delete(format!("{}/{name}", self.base));
            match self.send(request, Some(self.idle_timeout)).await {
                Ok(_) => {}
                Err(f) if f.error.is_not_found() => {}
                Err(f) => tracing::info!(
                    "could not delete an uploaded document (Google deletes it after 48 hours): {}",
                    f.error
                ),
            }
            uploads.names.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::gemini::{Message, Role};

    fn request(parts: Vec<Part>) -> GenerateRequest {
        GenerateRequest::for_tests(
            "pro",
            vec![Message {
                role: Role::User,
                parts,
            }],
        )
    }

    #[test]
    fn the_largest_documents_go_up_until_the_rest_fits_inline() {
        let part = |mime: &str, mb: usize| Part::Image {
            mime: mime.into(),
            data: Arc::new(vec![0u8; mb << 20]),
        };
        let req = request(vec![
            Part::Text("q".into()),
            part("application/pdf", 6),
            part("image/png", 5),
            part("application/pdf", 9),
            part("application/pdf", 2),
        ]);
        // 22 MB inline: the 9 MB document goes up (13 MB left, under 14).
        assert_eq!(to_upload(&req), vec![(0, 3)]);
        let small = request(vec![part("application/pdf", 2)]);
        assert!(to_upload(&small).is_empty());
    }

    #[test]
    fn the_key_goes_only_to_the_origin_of_the_calls() {
        let base = "https://generativelanguage.googleapis.com";
        assert!(same_origin(
            "https://generativelanguage.googleapis.com/upload/v1beta/files?upload_id=x",
            base
        ));
        assert!(!same_origin("https://evil.example/upload?upload_id=x", base));
        assert!(!same_origin("http://generativelanguage.googleapis.com/upload", base));
        assert!(!same_origin("https://generativelanguage.googleapis.com:8443/u", base));
        assert!(!same_origin("not a url", base));
    }
}

//! Explicit context caches (`cachedContents`): made from the front of a request — its system
//! instruction and its first messages — kept for a time to live, named in later requests that
//! then send only what follows ([`crate::gemini::CacheUse`], `wire::build_request`), and deleted
//! when no longer needed. On the Gemini API under `/v1beta/cachedContents`; on Vertex AI under
//! the project and location (`/v1/projects/{p}/locations/{l}/cachedContents`). Vertex AI's
//! express mode has no project to keep one in: it makes none.

use std::time::Duration;

use tokio::time::Instant;

use reqwest::header::CONTENT_TYPE;

use super::retry;
use super::{ApiClient, model_segment, wire};
use crate::gemini::{CallContext, GeminiError, GenerateRequest};

/// How long a cache's creation may take before the request is sent whole instead.
const CREATE_DEADLINE: Duration = Duration::from_secs(30);

/// A cache Gemini made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Made {
    /// Its resource name, as later requests name it.
    pub name: String,
    /// The tokens it holds, as Gemini counted them.
    pub tokens: u64,
}

impl ApiClient {
    /// Where this backend keeps caches (the collection's URL) and how a cache names `model`;
    /// `None` when it keeps none (Vertex AI express mode).
    fn cache_home(&self, model: &str) -> Result<Option<(String, String)>, GeminiError> {
        let id = model_segment(model)?;
        Ok(match &self.vertex {
            None => Some((format!("{}/cachedContents", self.base), format!("models/{id}"))),
            Some(v) => match (&v.project, &v.api_key) {
                (Some(project), None) => {
                    let parent = format!("projects/{project}/locations/{}", v.location);
                    Some((
                        format!("{}/v1/{parent}/cachedContents", v.endpoint()),
                        format!("{parent}/publishers/google/models/{id}"),
                    ))
                }
                _ => None,
            },
        })
    }

    /// Whether this backend can keep caches at all.
    pub fn keeps_caches(&self) -> bool {
        !self.on_interactions()
            && self
                .vertex
                .as_ref()
                .is_none_or(|v| v.project.is_some() && v.api_key.is_none())
    }

    /// Makes a cache of `req`'s system instruction and first `covers` messages, kept for
    /// `ttl`; `Ok(None)` when this backend keeps none.
    pub async fn create_cache(
        &self,
        req: &GenerateRequest,
        covers: usize,
        ttl: Duration,
        display_name: &str,
        ctx: &CallContext,
    ) -> Result<Option<Made>, GeminiError> {
        let Some((url, model)) = self.cache_home(&req.model.id)? else {
            return Ok(None);
        };
        let body = wire::create_cache_request(req, &model, covers, ttl.as_secs().max(1), display_name);
        // One attempt, soon given up: a cache is optional, and the request it would have served
        // is sent whole instead (a storage quota, say, is not over in seconds).
        let deadline = Instant::now() + self.call_timeout.min(CREATE_DEADLINE);
        let request = self
            .http()?
            .post(url.as_str())
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string());
        let work = async {
            let made: wire::CachedContent = self.json(request).await.map_err(|f| f.error)?;
            let name = made.name.filter(|n| !n.trim().is_empty()).ok_or_else(|| {
                GeminiError::Malformed {
                    message: "cachedContents.create answered without a name".into(),
                }
            })?;
            let tokens = made
                .usage_metadata
                .and_then(|u| u.total_token_count)
                .unwrap_or(0);
            Ok(Made { name, tokens })
        };
        self.bounded(ctx, deadline, work).await.map(Some)
    }

    /// Deletes the cache `name` (a cache already gone is not an error).
    pub async fn delete_cache(&self, name: &str) -> Result<(), GeminiError> {
        let Some(url) = self.cache_url(name) else {
            return Ok(());
        };
        let ctx = CallContext::default();
        let deadline = Instant::now() + self.call_timeout;
        let http = self.http()?;
        let work = retry::run(&self.policy, &ctx, deadline, |_| {
            let request = http.delete(url.as_str());
            async move {
                match self.send(request, Some(self.idle_timeout)).await {
                    Ok(_) => Ok(()),
                    Err(f) if f.error.is_cache_gone() => Ok(()),
                    Err(f) => Err(f),
                }
            }
        });
        self.bounded(&ctx, deadline, work).await
    }

    /// The URL of the cache `name`, when `name` is one of this backend's caches.
    fn cache_url(&self, name: &str) -> Option<String> {
        let name = name.trim();
        let ok = |c: char| c.is_ascii_alphanumeric() || "-_./".contains(c);
        if name.is_empty() || !name.chars().all(ok) || name.contains("..") {
            return None;
        }
        match &self.vertex {
            None => name
                .starts_with("cachedContents/")
                .then(|| format!("{}/{name}", self.base)),
            Some(v) => (name.starts_with("projects/") && name.contains("/cachedContents/"))
                .then(|| format!("{}/v1/{name}", v.endpoint())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16, code: &str, message: &str) -> GeminiError {
        GeminiError::Api {
            status,
            code: code.into(),
            message: message.into(),
            hint: String::new(),
        }
    }

    #[test]
    fn a_cache_that_is_gone_is_told_from_other_refusals() {
        for gone in [
            api(404, "NOT_FOUND", "CachedContent not found (or permission denied)"),
            api(403, "PERMISSION_DENIED", "Permission denied on resource cachedContents/x"),
            api(400, "INVALID_ARGUMENT", "Cached content is expired"),
        ] {
            assert!(gone.is_cache_gone(), "{gone}");
        }
        for other in [
            api(400, "INVALID_ARGUMENT", "The input token count exceeds the maximum"),
            api(403, "PERMISSION_DENIED", "API key not valid"),
            api(429, "RESOURCE_EXHAUSTED", "Quota exceeded"),
            GeminiError::Cancelled,
        ] {
            assert!(!other.is_cache_gone(), "{other}");
        }
    }
}

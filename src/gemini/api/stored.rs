//! Which calls go to the Interactions API, and the interactions stored at Google
//! (`GEMINI_MCP_INTERACTIONS_STORE=1`): deleted with their thread.

use tokio::time::Instant;

use super::ApiClient;
use super::retry;
use crate::gemini::settings::ApiSurface;
use crate::gemini::vocabulary::{CallContext, GeminiError, GenerateRequest};

/// An interaction's id as Google gives it (letters, digits, `-`, `_`), checked before it goes
/// into a URL.
pub(super) fn checked_id(id: &str) -> Result<&str, GeminiError> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "-_".contains(c);
    if id.is_empty() || id.len() > 256 || !id.chars().all(ok) {
        return Err(GeminiError::Malformed {
            message: "an interaction's id is not one Google gives".into(),
        });
    }
    Ok(id)
}

impl ApiClient {
    /// Whether this client speaks the Interactions API (`GEMINI_API_SURFACE=interactions`; on
    /// Vertex AI, its own).
    pub(super) fn on_interactions(&self) -> bool {
        self.surface == ApiSurface::Interactions
    }

    /// Whether this client's calls over the Interactions API are stored at Google, so a thread
    /// may continue a stored interaction.
    pub fn stores_interactions(&self) -> bool {
        self.on_interactions() && self.store
    }

    /// Whether `req` goes to the Interactions API: on that interface, and not naming a context
    /// cache (`generateContent`'s feature).
    pub fn uses_interactions(&self, req: &GenerateRequest) -> bool {
        self.on_interactions() && req.cache.is_none()
    }

    /// Deletes the stored interaction `id` at Google (one already gone is no error; an id that
    /// is not one Google gives is refused unsent).
    pub async fn delete_interaction(&self, id: &str) -> Result<(), GeminiError> {
        let id = checked_id(id)?;
        let url = format!("{}/{id}", self.interactions_url);
        let ctx = CallContext::default();
        let deadline = Instant::now() + self.call_timeout;
        let http = self.http()?;
        let work = retry::run(&self.policy, &ctx, deadline, |_| {
            let request = http.delete(url.as_str());
            async move {
                match self.send(request, Some(self.idle_timeout)).await {
                    Ok(_) => Ok(()),
                    Err(f) if f.error.is_not_found() => Ok(()),
                    Err(f) => Err(f),
                }
            }
        });
        self.bounded(&ctx, deadline, work).await
    }
}

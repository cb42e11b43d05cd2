//! Vertex AI: the client's Vertex AI constructor (where it is reached:
//! [`VertexSettings`]), its bearer tokens (Application Default Credentials) and what to do about
//! its refusals.

use super::retry::Failure;
use super::wire::ErrorBody;
use super::{ApiClient, Auth, excerpt};
use crate::gemini::settings::{Settings, VertexSettings};
use crate::gemini::vocabulary::{GeminiError, ServiceTier};

/// The OAuth scope Vertex AI accepts.
const CLOUD_PLATFORM: &str = "https://www.googleapis.com/auth/cloud-platform";

impl ApiClient {
    /// A client of Vertex AI: with the project and Application Default Credentials, or in
    /// express mode with an API key and no project.
    pub fn vertex(config: &Settings, vertex: &VertexSettings) -> Result<ApiClient, GeminiError> {
        let auth = match (&vertex.api_key, &vertex.project) {
            (Some(key), _) => Auth::Key(key.clone()),
            (None, Some(_)) => {
                let unusable = |why: String| GeminiError::NotConfigured {
                    message: format!(
                        "Vertex AI needs Application Default Credentials, and none could be loaded ({why}): set \
                         GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, run `gcloud auth \
                         application-default login`, or run on Google Cloud with a service account"
                    ),
                };
                // The library reads the file whole and unchecked: a FIFO would hang the start,
                // /dev/zero fill the memory. What it will read is checked first.
                if let Some((setting, path)) = &vertex.credentials_file {
                    crate::setting_file::read(setting, path)
                        .map_err(|e| unusable(e.to_string()))?;
                }
                let creds = google_cloud_auth::credentials::Builder::default()
                    .with_scopes([CLOUD_PLATFORM])
                    .build()
                    .map_err(|e| unusable(e.to_string()))?;
                Auth::Adc(creds)
            }
            (None, None) => {
                return Err(GeminiError::NotConfigured {
                    message: "GOOGLE_GENAI_USE_VERTEXAI=true needs GOOGLE_CLOUD_PROJECT (with Application Default \
                              Credentials), or GOOGLE_API_KEY alone for Vertex AI express mode"
                        .into(),
                });
            }
        };
        if let Some(tier) = config.service_tier
            && tier != ServiceTier::Standard
            && vertex.tier_header(tier).is_none()
        {
            tracing::warn!(
                "GEMINI_SERVICE_TIER={} is not sent: Vertex AI serves Flex and Priority PayGo on the global \
                 endpoint only, and GOOGLE_CLOUD_LOCATION is {}; calls run at standard (set \
                 GOOGLE_CLOUD_LOCATION=global for the tier)",
                tier.as_str(),
                vertex.location
            );
        }
        ApiClient::build(config, auth, vertex.publisher_base(), Some(vertex.clone()))
    }

    /// What to do about a refusal by Vertex AI: the API not enabled, a missing IAM role, a
    /// refused token or key.
    pub(super) fn vertex_denied(&self, status: u16, parsed: &ErrorBody, lower: &str) -> String {
        let project = self
            .vertex
            .as_ref()
            .and_then(|v| v.project.clone())
            .unwrap_or_else(|| "(express mode)".into());
        if parsed.reason().as_deref() == Some("SERVICE_DISABLED")
            || lower.contains("has not been used in project")
            || lower.contains("is disabled")
        {
            return format!(
                "The Vertex AI API is not enabled for project {project}: enable it (`gcloud services enable \
                 aiplatform.googleapis.com --project {project}`), wait a minute, and retry."
            );
        }
        if status == 401 {
            return "Vertex AI refused the credentials: check GOOGLE_APPLICATION_CREDENTIALS or run `gcloud auth \
                    application-default login` again (with GOOGLE_API_KEY, check the key)."
                .into();
        }
        format!(
            "The credentials lack permission on project {project}: grant their principal the Vertex AI User \
             role (roles/aiplatform.user), or set GOOGLE_CLOUD_PROJECT to a project where they have it."
        )
    }

    /// Adds the bearer token (Application Default Credentials); a key is already in the
    /// client's default headers. A token never reaches a message: a failure says where the
    /// credentials came from and what to do.
    pub(super) async fn authorize(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::RequestBuilder, Failure> {
        let Auth::Adc(creds) = &self.auth else {
            return Ok(request);
        };
        match creds.headers(axum::http::Extensions::new()).await {
            Ok(google_cloud_auth::credentials::CacheableResource::New { data, .. }) => {
                Ok(request.headers(data))
            }
            Ok(google_cloud_auth::credentials::CacheableResource::NotModified) => Ok(request),
            Err(e) => {
                // The library's own text ends in a retry verdict of its own ("… might succeed. but
                // future attempts may succeed"): say ours once, with the innermost cause.
                let mut cause: &dyn std::error::Error = &e;
                while let Some(inner) = cause.source() {
                    cause = inner;
                }
                let verdict = if e.is_transient() {
                    "could not be fetched; a later call may succeed"
                } else {
                    "was refused"
                };
                let failure = GeminiError::NotConfigured {
                    message: format!(
                        "Vertex AI: no access token from Application Default Credentials: the token {verdict} \
                         ({}). Check GOOGLE_APPLICATION_CREDENTIALS (a readable key file), `gcloud auth \
                         application-default login`, or the service account of the machine",
                        excerpt(cause.to_string().trim_end_matches('.'), 400)
                    ),
                };
                Err(if e.is_transient() {
                    Failure::transient(failure)
                } else {
                    Failure::fatal(failure)
                })
            }
        }
    }
}

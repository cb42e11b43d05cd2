//! Background runs at Google: an agent's run (`research`, Deep Research) is created with
//! `background: true`, answered at once with its id, and then polled by id
//! (`GET /v1/interactions/{id}`) every `GEMINI_MCP_BACKGROUND_POLL_MS` until it is done; its
//! finished resource is read as a stream of its steps would have been
//! ([`interactions::read_interaction`]), so its answer, sources and usage are the same
//! [`GenerateResponse`] every other call gives.
//!
//! A call cancelled, dropped (its client gone, its task cancelled) or past
//! `GEMINI_MCP_DEEP_RESEARCH_TIMEOUT_SECS` cancels the run at Google
//! (`POST /v1/interactions/{id}/cancel`, [`CancelAtGoogle`]): an agent that browses the web for
//! minutes is never left running, and billed, for a call no one waits for. The Gemini API only:
//! this server sends no call of Vertex AI to the Interactions API.

use std::time::Duration;

use reqwest::header::CONTENT_TYPE;
use serde_json::Value;
use tokio::time::Instant;

use super::interactions;
use super::retry;
use super::stored::checked_id;
use super::stream_answer::Answer;
use super::{ApiClient, excerpt};
use crate::gemini::vocabulary::{CallContext, GeminiError, GenerateRequest, GenerateResponse, ThinkingMode};

/// How long one create or poll may take, retries included.
const REQUEST_DEADLINE: Duration = Duration::from_secs(60);
/// How long a cancel at Google is waited for.
const CANCEL_DEADLINE: Duration = Duration::from_secs(10);

/// Cancels (and deletes) at Google sent and not yet answered, across the process.
static PENDING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Waits, at most `within`, until every cancel at Google this process sent is answered: a
/// process about to exit (the command line's Ctrl-C) lets them reach Google first.
pub async fn settled(within: Duration) {
    let deadline = Instant::now() + within;
    while PENDING.load(std::sync::atomic::Ordering::SeqCst) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Cancels a run at Google when dropped armed: the call ended without reading it; then deletes
/// it, unless it is kept.
struct CancelAtGoogle {
    http: Option<reqwest::Client>,
    /// `…/interactions/{id}`.
    url: String,
    delete: bool,
}

impl CancelAtGoogle {
    fn disarm(mut self) {
        self.http = None;
    }

    /// Cancels the run now and waits for Google's answer (bounded): a process about to exit
    /// (the command line's Ctrl-C) still cancels it. The cancel runs on its own task, so a call
    /// dropped while it waits (its cancellation seen by the caller too) does not abort it.
    async fn now(mut self) {
        if let Some(http) = self.http.take() {
            let _ = spawn_counted(cancel(http, std::mem::take(&mut self.url), self.delete)).await;
        }
    }
}

impl Drop for CancelAtGoogle {
    fn drop(&mut self) {
        let Some(http) = self.http.take() else {
            return;
        };
        tracing::debug!("the call ended before its background run: cancelling it at Google");
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        spawn_counted(cancel(http, std::mem::take(&mut self.url), self.delete));
    }
}

/// `POST …/{id}/cancel` for the run at `url`, then its `DELETE` when `delete`, each bounded;
/// what came of them is logged.
/// Runs `work` (a cancel at Google, or a create whose answer may need one) on a task of its
/// own, counted in [`PENDING`] from now until it ends.
fn spawn_counted<F>(work: F) -> tokio::task::JoinHandle<()>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    PENDING.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    tokio::spawn(async move {
        work.await;
        PENDING.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    })
}

async fn cancel(http: reqwest::Client, url: String, delete: bool) {
    let sent = http
        .post(format!("{url}/cancel"))
        .header(CONTENT_TYPE, "application/json")
        .body("{}");
    match tokio::time::timeout(CANCEL_DEADLINE, sent.send()).await {
        Ok(Ok(r)) if r.status().is_success() => {
            tracing::info!("the background run was cancelled at Google");
            if delete
                && let Ok(Err(e)) = tokio::time::timeout(CANCEL_DEADLINE, http.delete(url).send()).await
            {
                tracing::info!("could not delete the cancelled run at Google: {e}");
            }
        }
        Ok(Ok(r)) => tracing::info!(
            status = r.status().as_u16(),
            "Google did not cancel the background run (it may have finished)"
        ),
        Ok(Err(e)) => tracing::warn!("could not cancel the background run at Google: {e}"),
        Err(_) => tracing::warn!("could not cancel the background run at Google: no answer"),
    }
}

impl ApiClient {
    /// Whether `req` runs in the background at Google although it is a model's request: over
    /// the Interactions API, thinking at `high` or `max`, with
    /// `GEMINI_MCP_INTERACTIONS_BACKGROUND=1`.
    pub(super) fn runs_in_background(&self, req: &GenerateRequest) -> bool {
        // Not on Vertex AI: a cancel there would need the call's bearer token.
        self.research.thinking_in_background
            && self.vertex.is_none()
            && req.agent.is_none()
            && self.uses_interactions(req)
            && matches!(req.thinking, ThinkingMode::High | ThinkingMode::Max)
    }

    /// The answer to `req` (an agent's run, or a model's request that runs in the background),
    /// created as a background run and polled until done. Cancelling the call, dropping it or
    /// passing the run's deadline cancels the run at Google. A run is deleted at Google once
    /// read, unless a thread keeps it as its chain (`GEMINI_MCP_INTERACTIONS_STORE=1`).
    pub(super) async fn run_in_background(
        &self,
        req: &GenerateRequest,
        ctx: &CallContext,
    ) -> Result<GenerateResponse, GeminiError> {
        let agent = req.agent.as_ref();
        if agent.is_some() && self.vertex.is_some() {
            return Err(GeminiError::NotConfigured {
                message: "`research` needs the Gemini API: Deep Research runs on the Interactions API, which \
                          this server sends no Vertex AI call to. Unset GOOGLE_GENAI_USE_VERTEXAI and set \
                          GEMINI_API_KEY, or turn research off (GEMINI_MCP_DEEP_RESEARCH=0)"
                    .into(),
            });
        }
        let (label, timeout) = match agent {
            Some(a) => (a.id.as_str(), self.research.timeout),
            None => (req.model.id.as_str(), self.call_timeout),
        };
        // A model's run kept as the thread's chain stays at Google; any other is deleted once read.
        let keep = agent.is_none() && self.store;
        // The body a dry run shows (`ApiClient::body`).
        let body = self.body(req)?;
        let sent = {
            use sha2::Digest;
            hex::encode(sha2::Sha256::digest(&body))
        };
        let started = Instant::now();
        // Only an agent's run is taken up by another instance: its call is one request.
        let (id, created) = match agent.and(ctx.background.id()) {
            Some(id) => {
                ctx.report(format!("taking up the {label} run {id} at Google"));
                let id = checked_id(&id)?.to_string();
                let now = self.poll(&id, ctx).await?;
                (id, now)
            }
            None => {
                let created = self.create(body, ctx).await?;
                let id = run_id(&created)?;
                if agent.is_some() {
                    ctx.background.set(&id);
                }
                (id, created)
            }
        };
        let guard = CancelAtGoogle {
            http: Some(self.http()?.clone()),
            url: format!("{}/{id}", self.interactions_url),
            delete: !keep,
        };
        ctx.report(format!("{label} is running in the background at Google (interaction {id})"));
        let deadline = started + timeout;
        let mut resource = created;
        loop {
            match resource["status"].as_str().unwrap_or_default() {
                "in_progress" | "queued" => {}
                "completed" | "incomplete" | "requires_action" => break,
                other => {
                    // Google ended the run: nothing is left to cancel.
                    guard.disarm();
                    self.forget(&id, keep).await;
                    return Err(ended(other, &resource));
                }
            }
            if Instant::now() >= deadline {
                guard.now().await;
                return Err(GeminiError::Api {
                    status: 504,
                    code: "DEADLINE_EXCEEDED".into(),
                    message: format!(
                        "the {label} run took longer than {} s and was cancelled at Google",
                        timeout.as_secs()
                    ),
                    hint: if agent.is_some() {
                        "Ask a narrower question, or raise GEMINI_MCP_DEEP_RESEARCH_TIMEOUT_SECS."
                    } else {
                        "Ask a narrower question or lower `thinking_mode`, or raise GEMINI_TIMEOUT_SECS."
                    }
                    .into(),
                });
            }
            let wait = self.research.poll.min(deadline - Instant::now());
            tokio::select! {
                biased;
                _ = ctx.cancel.cancelled() => {
                    guard.now().await;
                    return Err(GeminiError::Cancelled);
                }
                _ = tokio::time::sleep(wait) => {}
            }
            resource = self.poll(&id, ctx).await?;
            let elapsed = started.elapsed().as_secs();
            ctx.report(format!(
                "{label} is still working at Google ({} min {:02} s)",
                elapsed / 60,
                elapsed % 60
            ));
        }
        guard.disarm();
        self.forget(&id, keep).await;
        let mut answer = Answer::default();
        interactions::read_interaction(&mut answer, &resource).map_err(|f| self.scrub(f.error))?;
        answer.model_version = match agent {
            Some(a) => Some(a.id.clone()),
            None => resource["model"].as_str().map(String::from),
        };
        let mut done = answer.finish().map_err(|f| self.scrub(f.error))?;
        done.request_sha256 = Some(sent);
        if keep {
            done.interaction_id = Some(id);
        }
        Ok(done)
    }

    /// Deletes a finished run at Google unless it is `kept`; a failure is logged.
    async fn forget(&self, id: &str, kept: bool) {
        if kept {
            return;
        }
        match tokio::time::timeout(CANCEL_DEADLINE, self.delete_interaction(id)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::info!("could not delete a finished background run at Google: {e}"),
            Err(_) => tracing::info!("could not delete a finished background run at Google: no answer"),
        }
    }

    /// Creates the run: the interaction at once, `in_progress`. The create is sent on its own
    /// task, which the call's end does not stop: a call cancelled or dropped while the create
    /// is in flight would otherwise never learn the id of the run it made, and the run would go
    /// on at Google; so when the call is gone by the time Google answers, that task cancels the
    /// run itself.
    async fn create(&self, body: Vec<u8>, ctx: &CallContext) -> Result<Value, GeminiError> {
        let client = self.clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        spawn_counted(async move {
            let created = client.create_once(body).await;
            if let Err(Ok(orphan)) = tx.send(created)
                && let (Ok(id), Ok(http)) = (run_id(&orphan), client.http())
            {
                cancel(http.clone(), format!("{}/{id}", client.interactions_url), true).await;
            }
        });
        tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => Err(GeminiError::Cancelled),
            created = rx => created.unwrap_or(Err(GeminiError::Cancelled)),
        }
    }

    /// `POST /v1/interactions`, retried as any request, bounded by its own deadline.
    async fn create_once(&self, body: Vec<u8>) -> Result<Value, GeminiError> {
        let body = bytes::Bytes::from(body);
        let http = self.http()?;
        let ctx = CallContext::default();
        let deadline = Instant::now() + REQUEST_DEADLINE;
        let work = retry::run(&self.policy, &ctx, deadline, |_| {
            let request = http
                .post(self.interactions_url.as_str())
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone());
            self.json::<Value>(request)
        });
        self.bounded(&ctx, deadline, work).await
    }

    /// The run as Google has it now; a transient failure is retried as any request's.
    async fn poll(&self, id: &str, ctx: &CallContext) -> Result<Value, GeminiError> {
        let http = self.http()?;
        let url = format!("{}/{id}", self.interactions_url);
        let deadline = Instant::now() + REQUEST_DEADLINE;
        let work = retry::run(&self.policy, ctx, deadline, |_| {
            self.json::<Value>(http.get(url.as_str()))
        });
        self.bounded(ctx, deadline, work).await
    }
}

/// The run's id, checked to be one Google gives (it goes into URLs).
fn run_id(created: &Value) -> Result<String, GeminiError> {
    checked_id(created["id"].as_str().unwrap_or_default())
        .map(String::from)
        .map_err(|_| GeminiError::Malformed {
            message: "the background run was created without an id this server can poll".into(),
        })
}

/// Why a run Google ended without an answer failed: its status and the errors it recorded.
fn ended(status: &str, resource: &Value) -> GeminiError {
    let errors: Vec<String> = resource["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["message"].as_str())
        .map(|m| excerpt(m, 300))
        .collect();
    let said = if errors.is_empty() {
        String::new()
    } else {
        format!(": {}", errors.join("; "))
    };
    let (code, hint) = match status {
        "cancelled" => ("CANCELLED", "The run was cancelled at Google; ask again to start a new one."),
        "budget_exceeded" => (
            "RESOURCE_EXHAUSTED",
            "The run used up its budget at Google; ask a narrower question.",
        ),
        "failed" => ("INTERNAL", "Retry; if it fails again, ask a narrower question."),
        _ => (
            "FAILED_PRECONDITION",
            "The agent stopped waiting for input this server does not give; ask again with a self-contained question.",
        ),
    };
    GeminiError::Api {
        status: 500,
        code: code.into(),
        message: format!("the background run ended `{}`{said}", excerpt(status, 40)),
        hint: hint.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_id_google_would_not_give_is_refused_before_it_reaches_a_url() {
        assert_eq!(run_id(&json!({ "id": "v1_abc-9" })).unwrap(), "v1_abc-9");
        for bad in [json!({}), json!({ "id": "" }), json!({ "id": "../models" }), json!({ "id": "a?b" })] {
            assert!(run_id(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_run_google_ended_says_how_and_what_it_recorded() {
        let e = ended("failed", &json!({ "errors": [{ "message": "the agent could not reach the web" }] }));
        let text = e.to_string();
        assert!(text.contains("ended `failed`: the agent could not reach the web"), "{text}");
        let e = ended("requires_action", &json!({}));
        assert!(e.to_string().contains("self-contained question"), "{e}");
    }
}

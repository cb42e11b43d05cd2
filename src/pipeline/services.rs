//! What every call runs on ([`Services`]): the configuration, the collector, Gemini, the thread
//! store, the audit log, the daily caps' holds and the metrics, built once by the application.

use std::sync::Arc;

use super::meter::Meter;
use crate::audit::AuditLog;
use crate::caps::Holds;
use crate::collector::Collector;
use crate::config::Config;
use crate::gemini::Gemini;
use crate::metrics::Metrics;
use crate::store::{Owner, ThreadStore};

/// What every call runs on: the configuration, the collector, Gemini, the thread store, the
/// audit log, the daily caps' holds and the metrics. Built once by the application
/// (`app::App::start`) and shared by its calls.
pub struct Services {
    pub config: Arc<Config>,
    pub collector: Arc<Collector>,
    pub gemini: Arc<Gemini>,
    pub store: Arc<dyn ThreadStore>,
    /// `GEMINI_MCP_AUDIT_LOG`, when set.
    pub audit: Option<Arc<AuditLog>>,
    pub metrics: Arc<Metrics>,
    /// The daily caps' holds of the calls in flight.
    holds: Arc<Holds>,
    /// Set once the model list has been asked for (on the first call, never at startup).
    refresh: tokio::sync::OnceCell<()>,
}

impl Services {
    pub fn new(
        config: Arc<Config>,
        collector: Arc<Collector>,
        gemini: Arc<Gemini>,
        store: Arc<dyn ThreadStore>,
        audit: Option<Arc<AuditLog>>,
        metrics: Arc<Metrics>,
    ) -> Services {
        Services {
            config,
            collector,
            gemini,
            store,
            audit,
            metrics,
            holds: Arc::default(),
            refresh: tokio::sync::OnceCell::new(),
        }
    }

    /// The project a thread belongs to: the canonical roots, one per line (with one root, its
    /// path, as stored before several roots were told apart).
    pub fn project(&self) -> String {
        let roots: Vec<String> = self
            .config
            .roots()
            .iter()
            .map(|r| r.display().to_string())
            .collect();
        roots.join("\n")
    }

    /// Refreshes the model catalogue from the models endpoint, once per process. Not done at
    /// startup (it would cost the handshake a TLS setup); the first call starts it in the
    /// background, `listmodels` waits for it. A failure keeps the built-in catalogue.
    pub async fn refresh_models(&self, wait: bool) {
        let gemini = self.gemini.clone();
        let metrics = self.metrics.clone();
        let refresh = async move {
            match gemini.refresh_models().await {
                Ok(n) => {
                    tracing::debug!(models = n, "model catalogue refreshed");
                    metrics.know_models(gemini.catalogue().list().into_iter().map(|m| m.id));
                }
                Err(e) => {
                    tracing::warn!("could not refresh the model list (using the built-in one): {e}")
                }
            }
        };
        if wait {
            // The list is fetched once and cached by the client; a refresh in flight is joined.
            refresh.await;
        } else if self.refresh.set(()).is_ok() {
            tokio::spawn(refresh);
        }
    }

    /// The Gemini CLI agent pool, if it was started.
    pub fn agents(&self) -> Option<&Arc<crate::gemini::AgentPool>> {
        self.gemini.started_agents()
    }

    /// The daily caps' meter for a call of `owner` in this project.
    pub(super) fn meter(&self, owner: &Owner) -> Meter {
        Meter::new(
            self.config.caps,
            self.gemini.catalogue().prices().clone(),
            self.store.clone(),
            self.holds.clone(),
            &self.project(),
            owner,
            self.metrics.clone(),
        )
    }
}

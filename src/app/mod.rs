//! The application: the services every call runs on, built once from the configuration
//! ([`App::start`]: the collector, Gemini, the thread store, the audit log, the daily caps'
//! holds, the metrics), the gate
//! that admits calls and counts those in flight, and the life cycle the edges call — one
//! [`App::drain`] (stop admitting, wait for the calls in flight up to a grace) and one
//! [`App::abort`] (end what still runs: Gemini calls, the Gemini CLI's processes).
//!
//! The edges (stdio, HTTP, the command line, the MCP server) hold an `Arc<App>` and reach the
//! services through it; none of them stops a part on its own. `thread_views` holds the hosts' and the
//! command line's views of the project's threads.

pub mod thread_views;

use std::sync::Arc;
use std::time::Duration;

use crate::collector::Collector;
use crate::config::Config;
use crate::gemini::{CallContext, Gemini};
use crate::admission::{Admission, ClientId, Gate, RateLimits, Refusal};
use crate::metrics::Metrics;
use crate::pipeline::Services;
use crate::store::ThreadStore;

use crate::tools::{Plan, Reply, Tool, ToolError};

/// The server cannot start; the message says what to fix.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StartError(pub String);

/// The application: its services and its life cycle. Shared by the edges (`Arc<App>`).
pub struct App {
    services: Services,
    /// Admission (rate and concurrency limits) and the calls in flight, closed by `drain`.
    gate: Gate,
}

impl App {
    /// Builds everything from the configuration: the collector, Gemini, the thread store, the
    /// metrics. Every call is admitted until [`App::with_limits`] sets limits.
    pub async fn start(config: Arc<Config>) -> Result<App, StartError> {
        let metrics = Arc::new(Metrics::new());
        let collector =
            Arc::new(Collector::new(&config.collector()).map_err(|e| StartError(e.to_string()))?);
        let gemini =
            Gemini::from_config(&config.gemini()).map_err(|e| StartError(e.to_string()))?;
        let gemini = Arc::new(
            gemini
                .with_collector(collector.clone())
                .with_metrics(metrics.clone()),
        );
        let store = crate::store::open(&config.threads())
            .await
            .map_err(|e| StartError(e.to_string()))?;
        Ok(App::new(config, collector, gemini, store, metrics))
    }

    /// An application on services made by the caller; the store's failures are counted in
    /// `metrics`, which also learns the catalogue's models.
    pub fn new(
        config: Arc<Config>,
        collector: Arc<Collector>,
        gemini: Arc<Gemini>,
        store: Arc<dyn ThreadStore>,
        metrics: Arc<Metrics>,
    ) -> App {
        let audit = config
            .audit()
            .map(|settings| Arc::new(crate::audit::AuditLog::new(settings)));
        metrics.know_models(gemini.catalogue().list().into_iter().map(|m| m.id));
        let store = Arc::new(crate::store::counted::Counted::new(store, metrics.clone()));
        App {
            services: Services::new(config, collector, gemini, store, audit, metrics),
            gate: Gate::new(&RateLimits::default(), None),
        }
    }

    /// Admits calls within `rates` and at most `per_client` in flight per client.
    pub fn with_limits(mut self, rates: &RateLimits, per_client: Option<usize>) -> App {
        self.gate = Gate::new(rates, per_client);
        self
    }

    pub fn config(&self) -> &Config {
        &self.services.config
    }

    pub fn collector(&self) -> &Collector {
        &self.services.collector
    }

    pub fn gemini(&self) -> &Gemini {
        &self.services.gemini
    }

    /// The thread store (for readiness checks and the thread views).
    pub fn store(&self) -> &dyn ThreadStore {
        self.services.store.as_ref()
    }

    pub fn store_kind(&self) -> &'static str {
        self.services.store.kind()
    }

    /// The Gemini CLI agent pool, if it was started.
    pub fn agents(&self) -> Option<&Arc<crate::gemini::AgentPool>> {
        self.services.agents()
    }

    /// The project a thread belongs to: the canonical roots, one per line.
    pub fn project(&self) -> String {
        self.services.project()
    }

    /// Refreshes the model catalogue once per process (`wait`: until it is done).
    pub async fn refresh_models(&self, wait: bool) {
        self.services.refresh_models(wait).await
    }

    /// The metrics of every call (read by the HTTP server's `/metrics`).
    pub fn metrics(&self) -> &Metrics {
        &self.services.metrics
    }

    /// Admits one call of `tool` from `client`, or says why not (counted in the metrics); the
    /// call counts as in flight until the returned [`Admission`] is dropped.
    pub fn admit(&self, tool: Tool, client: &ClientId) -> Result<Admission, Refusal> {
        self.gate.admit(tool.name(), client).inspect_err(|refusal| {
            let reason = match refusal {
                Refusal::Rate { .. } => "rate_limit",
                Refusal::Concurrency { .. } => "concurrency",
                Refusal::ShuttingDown => "shutting_down",
            };
            self.services.metrics.refused_call(tool.name(), reason);
        })
    }

    /// Runs one tool call of `client` through the pipeline (its audit record names the client).
    pub async fn run(
        &self,
        client: &ClientId,
        plan: Plan,
        ctx: &CallContext,
    ) -> Result<Reply, ToolError> {
        crate::pipeline::run(&self.services, &client.0, plan, ctx).await
    }

    /// What one tool call would send, without sending it (a dry run).
    pub async fn preview(
        &self,
        plan: Plan,
        show_request: bool,
        ctx: &CallContext,
    ) -> Result<crate::pipeline::preview::Preview, ToolError> {
        crate::pipeline::preview(&self.services, plan, show_request, ctx).await
    }

    /// Forgets clients whose rate quota has fully come back; call it now and then.
    pub fn forget_idle_clients(&self) {
        self.gate.forget_idle_clients();
    }

    /// Calls admitted and not finished.
    pub fn in_flight(&self) -> usize {
        self.gate.in_flight()
    }

    /// Stops admitting calls at once (each new one is refused as the server shutting down);
    /// the future waits up to `grace` for those in flight to finish: true when they all did.
    pub fn drain(&self, grace: Duration) -> impl Future<Output = bool> + '_ {
        self.gate.close();
        async move {
            tokio::time::timeout(grace, self.gate.drained())
                .await
                .is_ok()
        }
    }

    /// Ends what still runs: the Gemini calls in flight and the Gemini CLI's processes (each
    /// leads its own process group, out of reach of the signal that stopped us).
    pub fn abort(&self) {
        self.services.gemini.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `drain` refuses new calls at once and waits for those in flight, up to the grace.
    #[tokio::test]
    async fn drain_stops_admitting_and_waits_for_the_calls_in_flight() {
        let tmp = tempfile::tempdir().unwrap();
        let app = App::start(Arc::new(Config::for_tests(tmp.path())))
            .await
            .expect("the app starts");
        let client = ClientId("stdio".into());
        let call = app.admit(Tool::Chat, &client).expect("admitted");
        assert_eq!(app.in_flight(), 1);
        assert!(
            !app.drain(Duration::from_millis(20)).await,
            "a call is still in flight"
        );
        assert!(matches!(
            app.admit(Tool::Chat, &client),
            Err(Refusal::ShuttingDown)
        ));
        drop(call);
        assert!(app.drain(Duration::from_millis(20)).await);
        // Nothing runs any more: ending what is left is a no-op, and may be done twice.
        app.abort();
        app.abort();
    }
}

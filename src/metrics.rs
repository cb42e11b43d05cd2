//! The server's metrics: one registry ([`Metrics`], `prometheus-client`), a service of the app,
//! updated where things happen — the gate (refusals), the pipeline's meter and record step
//! (calls, Gemini's latency, tokens, cost), the Gemini facade and REST client (fallbacks,
//! retries), the thread store's wrapper (errors) — and read by the HTTP server's `/metrics`
//! (OpenMetrics or Prometheus text). The stdio server and the command line keep one too, never
//! read: each update is an atomic add after a map look-up under a read lock.
//!
//! Labels are bounded by their types: a tool, an outcome, a reason, a store operation are
//! `&'static str` (the tools' table, `ToolError::kind`, closed lists of the callers: nothing
//! made from a request can be one); a model is a `&str` that is kept only when it is one of the
//! models the catalogue lists ([`Metrics::know_models`]) and becomes `other` otherwise. No
//! prompt, path, client name or secret is ever a label.

use std::collections::HashSet;
use std::sync::RwLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

/// Every metric's name starts with this and `_`.
pub const PREFIX: &str = "gemini_mcp";

/// The model label of a model the catalogue does not list.
pub const OTHER_MODEL: &str = "other";

/// The model label of a call that ended before a model was chosen.
pub const NO_MODEL: &str = "none";

/// Bucket bounds of our own work per call, in seconds: reading files, counting, git, the
/// store, rendering (milliseconds usually; seconds for a large diff).
const OWN_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Bucket bounds of one request to Gemini, in seconds (thinking models take minutes).
const GEMINI_BUCKETS: [f64; 12] = [
    0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: &'static str,
    model: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabel {
    model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    model: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    model: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FallbackLabels {
    from: String,
    to: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    tool: &'static str,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabels {
    store: &'static str,
    op: &'static str,
    error: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Tokens of one answer, as [`Metrics::tokens`] counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cached: u64,
    pub thinking: u64,
}

/// What is read at scrape time rather than counted as it happens.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sampled {
    /// Tool calls admitted and not finished.
    pub in_flight: usize,
    /// Legacy MCP sessions live on this instance.
    pub sessions: usize,
    /// Warm Gemini CLI (ACP) processes alive.
    pub acp_processes: usize,
}

/// The registry and its metrics. Shared as `Arc<Metrics>`.
pub struct Metrics {
    registry: Registry,
    /// Model ids kept as labels; every other id is [`OTHER_MODEL`].
    known: RwLock<HashSet<String>>,
    calls: Family<CallLabels, Counter>,
    own: Histograms<ToolLabel>,
    requests: Histograms<RequestLabels>,
    tokens: Family<TokenLabels, Counter>,
    cost: Family<ModelLabel, Counter<f64, std::sync::atomic::AtomicU64>>,
    retries: Family<ModelLabel, Counter>,
    fallbacks: Family<FallbackLabels, Counter>,
    refusals: Family<RefusalLabels, Counter>,
    store_errors: Family<StoreLabels, Counter>,
    context_caches: Family<CacheLabels, Counter>,
    in_flight: Gauge,
    sessions: Gauge,
    acp_processes: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

fn own_histogram() -> Histogram {
    Histogram::new(OWN_BUCKETS)
}

fn gemini_histogram() -> Histogram {
    Histogram::new(GEMINI_BUCKETS)
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    /// Every metric registered, none observed yet; no model known.
    pub fn new() -> Metrics {
        let mut m = Metrics {
            registry: Registry::with_prefix(PREFIX),
            known: RwLock::default(),
            calls: Family::default(),
            own: Family::new_with_constructor(own_histogram as fn() -> Histogram),
            requests: Family::new_with_constructor(gemini_histogram as fn() -> Histogram),
            tokens: Family::default(),
            cost: Family::default(),
            retries: Family::default(),
            fallbacks: Family::default(),
            refusals: Family::default(),
            store_errors: Family::default(),
            context_caches: Family::default(),
            in_flight: Gauge::default(),
            sessions: Gauge::default(),
            acp_processes: Gauge::default(),
        };
        m.register();
        m
    }

    fn register(&mut self) {
        let r = &mut self.registry;
        r.register(
            "build",
            "The server's version",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        r.register(
            "tool_calls",
            "Tool calls by tool, model and outcome (ok, the error's kind, abandoned, or the gate's refusal: rate_limit, concurrency, shutting_down)",
            self.calls.clone(),
        );
        r.register_with_unit(
            "tool_call_own",
            "Our own work per tool call: its wall time less its time waiting on Gemini",
            Unit::Seconds,
            self.own.clone(),
        );
        r.register_with_unit(
            "gemini_request",
            "One request to Gemini, from sending to the whole answer (retries, backoff and a capacity fallback included), by model and outcome (ok, error, cancelled: given up before Gemini answered)",
            Unit::Seconds,
            self.requests.clone(),
        );
        r.register(
            "gemini_tokens",
            "Tokens Gemini reported, by model and kind (input, cached: the part of input served from cache, output, thinking)",
            self.tokens.clone(),
        );
        r.register(
            "gemini_cost_usd",
            "Estimated cost of Gemini's answers in US dollars, at the catalogue's prices",
            self.cost.clone(),
        );
        r.register(
            "gemini_retries",
            "Requests to Gemini sent again after a transient failure (408, 429, 5xx, network)",
            self.retries.clone(),
        );
        r.register(
            "gemini_fallbacks",
            "Requests handed to the fallback model after capacity errors, by requested and fallback model",
            self.fallbacks.clone(),
        );
        r.register(
            "refusals",
            "Tool calls refused, by tool and reason: the gate (rate_limit, concurrency, shutting_down) or a spending cap (spending_cap, over_call_ceiling)",
            self.refusals.clone(),
        );
        r.register(
            "store_errors",
            "Thread store operations that failed, by store, operation and error (unavailable, corrupt)",
            self.store_errors.clone(),
        );
        r.register(
            "context_caches",
            "Context caches at Google, by outcome: made, used (a request answered from one), lost (gone at Google: the request sent whole), failed (not made: the request sent whole)",
            self.context_caches.clone(),
        );
        r.register(
            "tool_calls_in_flight",
            "Tool calls admitted and not finished",
            self.in_flight.clone(),
        );
        r.register(
            "http_sessions",
            "Legacy MCP sessions (Mcp-Session-Id) live on this instance",
            self.sessions.clone(),
        );
        r.register(
            "acp_processes",
            "Warm Gemini CLI processes (ACP) alive",
            self.acp_processes.clone(),
        );
    }

    /// Adds model ids that are kept as labels (the catalogue's list).
    pub fn know_models<I: IntoIterator<Item = String>>(&self, ids: I) {
        let mut known = self.known.write().unwrap_or_else(|e| e.into_inner());
        known.extend(ids);
    }

    /// `id` as a label: itself when the catalogue lists it, else [`OTHER_MODEL`].
    pub fn model(&self, id: &str) -> String {
        let known = self.known.read().unwrap_or_else(|e| e.into_inner());
        if known.contains(id) {
            id.to_string()
        } else {
            OTHER_MODEL.to_string()
        }
    }

    /// A tool call that ended: `model` is the model it used (`None`: it ended before one was
    /// chosen), `outcome` how it ended, `own` its wall time less its time waiting on Gemini.
    pub fn call(
        &self,
        tool: &'static str,
        model: Option<&str>,
        outcome: &'static str,
        own: Duration,
    ) {
        let model = model.map_or_else(|| NO_MODEL.to_string(), |m| self.model(m));
        self.calls
            .get_or_create(&CallLabels {
                tool,
                model,
                outcome,
            })
            .inc();
        self.own
            .get_or_create(&ToolLabel { tool })
            .observe(own.as_secs_f64());
    }

    /// A tool call refused before it ran (the gate): counted as a call of no model whose
    /// outcome is `reason`, and as a refusal.
    pub fn refused_call(&self, tool: &'static str, reason: &'static str) {
        self.calls
            .get_or_create(&CallLabels {
                tool,
                model: NO_MODEL.to_string(),
                outcome: reason,
            })
            .inc();
        self.refusal(tool, reason);
    }

    /// A tool call refused by a limit.
    pub fn refusal(&self, tool: &'static str, reason: &'static str) {
        self.refusals
            .get_or_create(&RefusalLabels { tool, reason })
            .inc();
    }

    /// One request to Gemini ended after `took`: `ok`, `error`, or `cancelled` (given up
    /// before Gemini answered).
    pub fn request(&self, model: &str, outcome: &'static str, took: Duration) {
        let labels = RequestLabels {
            model: self.model(model),
            outcome,
        };
        self.requests
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// Tokens of one answer of `model`, and its estimated cost when the model has a price.
    pub fn tokens(&self, model: &str, tokens: Tokens, cost_usd: Option<f64>) {
        let model = self.model(model);
        for (kind, n) in [
            ("input", tokens.input),
            ("output", tokens.output),
            ("cached", tokens.cached),
            ("thinking", tokens.thinking),
        ] {
            self.tokens
                .get_or_create(&TokenLabels {
                    model: model.clone(),
                    kind,
                })
                .inc_by(n);
        }
        if let Some(c) = cost_usd.filter(|c| c.is_finite() && *c >= 0.0) {
            self.cost.get_or_create(&ModelLabel { model }).inc_by(c);
        }
    }

    /// A request to `model` is sent again.
    pub fn retry(&self, model: &str) {
        self.retries
            .get_or_create(&ModelLabel {
                model: self.model(model),
            })
            .inc();
    }

    /// A request to `from` handed to `to` after capacity errors.
    pub fn fallback(&self, from: &str, to: &str) {
        self.fallbacks
            .get_or_create(&FallbackLabels {
                from: self.model(from),
                to: self.model(to),
            })
            .inc();
    }

    /// A context cache was made, used, found lost or could not be made (`outcome`).
    pub fn context_cache(&self, outcome: &'static str) {
        self.context_caches
            .get_or_create(&CacheLabels { outcome })
            .inc();
    }

    /// A thread store operation failed.
    pub fn store_error(&self, store: &'static str, op: &'static str, error: &'static str) {
        self.store_errors
            .get_or_create(&StoreLabels { store, op, error })
            .inc();
    }

    /// The registry in the Prometheus text format (0.0.4), or in OpenMetrics' when `openmetrics`,
    /// with what is read at scrape time set first.
    pub fn encode(&self, sampled: Sampled, openmetrics: bool) -> String {
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.in_flight.set(gauge(sampled.in_flight));
        self.sessions.set(gauge(sampled.sessions));
        self.acp_processes.set(gauge(sampled.acp_processes));
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = if openmetrics {
            prometheus_client::encoding::text::encode(&mut out, &self.registry)
        } else {
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
        };
        out
    }
}

/// The `Content-Type` of [`Metrics::encode`]'s output.
pub fn content_type(openmetrics: bool) -> &'static str {
    if openmetrics {
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    } else {
        prometheus_client::encoding::prometheus_text::CONTENT_TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model the catalogue does not list is `other`: a caller cannot add label values.
    #[test]
    fn unknown_models_are_other_and_known_ones_keep_their_name() {
        let m = Metrics::new();
        m.know_models(["gemini-2.5-flash".to_string()]);
        m.call("chat", Some("gemini-2.5-flash"), "ok", Duration::ZERO);
        m.call("chat", Some("gemini-made-up-1"), "ok", Duration::ZERO);
        m.call("chat", Some("gemini-made-up-2"), "ok", Duration::ZERO);
        m.call("chat", None, "thread", Duration::ZERO);
        let text = m.encode(Sampled::default(), false);
        let line = |labels: &str| {
            text.lines()
                .find(|l| l.starts_with(&format!("gemini_mcp_tool_calls_total{{{labels}}}")))
                .unwrap_or_else(|| panic!("no series {labels} in\n{text}"))
                .rsplit(' ')
                .next()
                .unwrap()
                .to_string()
        };
        assert_eq!(
            line(r#"tool="chat",model="gemini-2.5-flash",outcome="ok""#),
            "1"
        );
        assert_eq!(line(r#"tool="chat",model="other",outcome="ok""#), "2");
        assert_eq!(line(r#"tool="chat",model="none",outcome="thread""#), "1");
        assert!(!text.contains("made-up"), "{text}");
    }

    /// Every family once observed, in both formats; OpenMetrics ends with `# EOF`. A family
    /// with no series yet is left out (as Prometheus' own clients do).
    #[test]
    fn both_formats_carry_every_family() {
        let m = Metrics::new();
        m.know_models(["m".to_string(), "f".to_string()]);
        m.call("chat", Some("m"), "ok", Duration::from_millis(3));
        m.refused_call("chat", "rate_limit");
        m.request("m", "ok", Duration::from_secs(2));
        m.tokens(
            "m",
            Tokens {
                input: 10,
                output: 2,
                cached: 4,
                thinking: 1,
            },
            Some(0.5),
        );
        m.retry("m");
        m.fallback("m", "f");
        m.store_error("redis", "append", "unavailable");
        let sampled = Sampled {
            in_flight: 2,
            sessions: 3,
            acp_processes: 1,
        };
        let prom = m.encode(sampled, false);
        let open = m.encode(sampled, true);
        assert!(open.trim_end().ends_with("# EOF"), "{open}");
        assert!(!prom.contains("# EOF"), "{prom}");
        for line in [
            r#"gemini_mcp_tool_calls_total{tool="chat",model="m",outcome="ok"} 1"#,
            r#"gemini_mcp_tool_calls_total{tool="chat",model="none",outcome="rate_limit"} 1"#,
            r#"gemini_mcp_tool_call_own_seconds_count{tool="chat"} 1"#,
            r#"gemini_mcp_gemini_request_seconds_count{model="m",outcome="ok"} 1"#,
            r#"gemini_mcp_gemini_tokens_total{model="m",kind="cached"} 4"#,
            r#"gemini_mcp_gemini_cost_usd_total{model="m"} 0.5"#,
            r#"gemini_mcp_gemini_retries_total{model="m"} 1"#,
            r#"gemini_mcp_gemini_fallbacks_total{from="m",to="f"} 1"#,
            r#"gemini_mcp_refusals_total{tool="chat",reason="rate_limit"} 1"#,
            r#"gemini_mcp_store_errors_total{store="redis",op="append",error="unavailable"} 1"#,
            "gemini_mcp_tool_calls_in_flight 2",
            "gemini_mcp_http_sessions 3",
            "gemini_mcp_acp_processes 1",
            r#"gemini_mcp_build_info{version=""#,
        ] {
            for (format, text) in [("Prometheus", &prom), ("OpenMetrics", &open)] {
                assert!(
                    text.lines().any(|l| l.starts_with(line)),
                    "{format} lacks {line}:\n{text}"
                );
            }
        }
    }
}

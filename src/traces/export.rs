//! The exporter: the spans of [`super::TARGET`] sent in batches over OTLP (HTTP/protobuf, on
//! the project's own reqwest and rustls) to the collector OpenTelemetry's standard variables
//! name. Built only when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `…_TRACES_ENDPOINT`) is set, before
//! the configuration is read, like the log filter (`main.rs`): the OpenTelemetry SDK reads its
//! own variables (headers, timeout, sampler, service name, batch sizes), the one other place
//! besides Google's auth library where a dependency reads the environment. The endpoint is read
//! here and handed to the SDK without its user info, which goes as `Authorization` ([`endpoint`]).
//!
//! A call never waits for the exporter: a finished span is handed to the batch task on the
//! tokio runtime through a bounded queue (a full queue drops spans, it does not block), and that
//! task sends the batches. An export that fails is said on stderr at most once a minute, with
//! how many failed since, and never reaches a call. [`Exporting::shutdown`] sends what is
//! still queued when the process ends, within a bound.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

/// At most one line a minute about failed exports.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// The variables that name a collector; traces are off unless one is set.
pub const ENDPOINT_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

/// Whether traces are to be exported: a collector named (`ENDPOINT_VARS`), and neither
/// `OTEL_SDK_DISABLED=true` nor `OTEL_TRACES_EXPORTER=none`.
pub fn wanted(env: &dyn Fn(&str) -> Option<String>) -> bool {
    let is =
        |name: &str, value: &str| env(name).is_some_and(|v| v.trim().eq_ignore_ascii_case(value));
    ENDPOINT_VARS
        .iter()
        .any(|v| env(v).is_some_and(|s| !s.trim().is_empty()))
        && !is("OTEL_SDK_DISABLED", "true")
        && !is("OTEL_TRACES_EXPORTER", "none")
}

/// The exporter, running.
pub struct Exporting {
    provider: SdkTracerProvider,
}

/// Starts the exporter when [`wanted`]; `Ok(None)` when traces are off. An endpoint that is
/// not an `http://` or `https://` URL is an error naming its variable. Must be called inside
/// the tokio runtime (the batch task is spawned on it).
pub fn start(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<Exporting>, String> {
    if !wanted(env) {
        return Ok(None);
    }
    let (endpoint, authorization) = endpoint(env)?;
    let mut headers = std::collections::HashMap::new();
    if let Some(auth) = authorization {
        headers.insert("Authorization".to_string(), auth.expose().to_string());
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(endpoint)
        .with_headers(headers)
        .build()
        .map_err(|e| {
            format!(
                "cannot set up the OTLP exporter ({}); traces are off",
                crate::redact::scrub(&e.to_string())
            )
        })?;
    let processor =
        opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor::builder(
            Logged::new(exporter),
            opentelemetry_sdk::runtime::Tokio,
        )
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource())
        .build();
    Ok(Some(Exporting { provider }))
}

/// Where spans go, as OpenTelemetry's variables say (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it
/// is, else `OTEL_EXPORTER_OTLP_ENDPOINT` with `/v1/traces`), handed to the exporter without
/// its user info: the credentials of `http://user:password@collector` travel as the
/// `Authorization` header instead ([`crate::secret::without_user_info`]), so the HTTP client's
/// own log lines, which print the URLs they are handed, hold none. An endpoint that is not an
/// `http://` or `https://` URL is an error naming its variable (and not quoting it).
fn endpoint(
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(String, Option<crate::secret::Secret>), String> {
    let mut chosen = None;
    for var in ENDPOINT_VARS {
        let Some(v) = env(var).filter(|v| !v.trim().is_empty()) else {
            continue;
        };
        let url = crate::secret::without_user_info(&v)
            .ok()
            .filter(|u| matches!(u.url.scheme(), "http" | "https") && u.url.has_host())
            .ok_or_else(|| {
                format!(
                    "{var} is not an http:// or https:// URL (for example http://localhost:4318); traces are off"
                )
            })?;
        // The signal's own variable first, as the SDK reads them.
        chosen = chosen.or(Some((var, url)));
    }
    let Some((var, url)) = chosen else {
        return Err("no OTLP endpoint is set; traces are off".into());
    };
    let mut endpoint = url.url.to_string();
    if var == "OTEL_EXPORTER_OTLP_ENDPOINT" {
        if !endpoint.ends_with('/') {
            endpoint.push('/');
        }
        endpoint.push_str("v1/traces");
    }
    Ok((endpoint, url.authorization))
}

/// The process as the spans name it: `OTEL_SERVICE_NAME` (or `service.name` in
/// `OTEL_RESOURCE_ATTRIBUTES`) when set, else `gemini-mcp-server`; and its version.
fn resource() -> opentelemetry_sdk::Resource {
    use opentelemetry::KeyValue;
    let detected = opentelemetry_sdk::Resource::builder().build();
    let named = detected
        .get(&opentelemetry::Key::new("service.name"))
        .is_some_and(|n| !n.as_str().starts_with("unknown_service"));
    let builder = opentelemetry_sdk::Resource::builder();
    let builder = if named {
        builder
    } else {
        builder.with_service_name(env!("CARGO_PKG_NAME"))
    };
    builder
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build()
}

impl Exporting {
    /// The layer that turns the spans of [`super::TARGET`] into OpenTelemetry spans; it sees
    /// no other span and no event (a log line never becomes part of a trace).
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let tracer = self.provider.tracer(env!("CARGO_PKG_NAME"));
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            .with_target(false)
            .with_level(false)
            .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
                meta.is_span() && meta.target() == super::TARGET
            }))
    }

    /// Sends the spans still queued and stops the exporter, waiting at most `grace` (a
    /// collector that does not answer cannot hold the process). Call it from outside the
    /// runtime's threads while the runtime still runs: the batch task does the sending.
    pub fn shutdown(self, grace: Duration) {
        let (tx, rx) = std::sync::mpsc::channel();
        let provider = self.provider;
        let spawned = std::thread::Builder::new()
            .name("traces-flush".into())
            .spawn(move || {
                let _ = tx.send(provider.shutdown());
            });
        if spawned.is_err() {
            return;
        }
        match rx.recv_timeout(grace) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(
                "traces: the last spans may not have been sent: {}",
                crate::redact::scrub(&e.to_string())
            ),
            Err(_) => tracing::warn!(
                "traces: the collector did not take the last spans within {grace:?}; they are dropped"
            ),
        }
    }
}

/// An exporter that says on stderr when an export fails, at most once per [`WARN_EVERY`].
#[derive(Debug)]
struct Logged<E> {
    inner: E,
    last_warned: Mutex<Option<Instant>>,
    failed_since: AtomicU64,
}

impl<E> Logged<E> {
    fn new(inner: E) -> Logged<E> {
        Logged {
            inner,
            last_warned: Mutex::new(None),
            failed_since: AtomicU64::new(0),
        }
    }

    /// Whether a failed export is to be said now: `Some(n)` with the `n` failures not said
    /// since, when nothing was said for a minute; else `None`, and it is counted.
    fn to_say(&self) -> Option<u64> {
        let mut last = self.last_warned.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|at| at.elapsed() < WARN_EVERY) {
            self.failed_since.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        *last = Some(Instant::now());
        Some(self.failed_since.swap(0, Ordering::Relaxed))
    }

    /// Says that an export failed, unless that was said less than a minute ago.
    fn failed(&self, error: &dyn std::fmt::Display) {
        let Some(more) = self.to_say() else {
            return;
        };
        let more = if more > 0 {
            format!(" ({more} more failed exports since the last message)")
        } else {
            String::new()
        };
        tracing::warn!("{}", failure_message(error, &more));
    }
}

/// What the log says of a failed export. The exporter's error may quote the endpoint, and an
/// endpoint may hold credentials (`https://user:password@…`): scrubbed by the secret rules, as
/// every message from outside is.
fn failure_message(error: &dyn std::fmt::Display, more: &str) -> String {
    format!(
        "traces: could not send spans to the OTLP collector: {}{more}. Check OTEL_EXPORTER_OTLP_ENDPOINT and the collector; calls go on without traces meanwhile.",
        crate::redact::scrub(&error.to_string())
    )
}

impl<E: SpanExporter> SpanExporter for Logged<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        if let Err(e) = &result {
            self.failed(e);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn traces_are_on_only_when_a_collector_is_named() {
        let cases: &[(&[(&str, &str)], bool)] = &[
            (&[], false),
            (&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")], false),
            (&[("OTEL_SERVICE_NAME", "x")], false),
            (&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")], true),
            (
                &[(
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                    "http://c:4318/v1/traces",
                )],
                true,
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                    ("OTEL_SDK_DISABLED", "TRUE"),
                ],
                false,
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                    ("OTEL_TRACES_EXPORTER", "none"),
                ],
                false,
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                    ("OTEL_SDK_DISABLED", "false"),
                ],
                true,
            ),
        ];
        for (vars, on) in cases {
            assert_eq!(wanted(&env(vars)), *on, "{vars:?}");
        }
    }

    #[test]
    fn without_a_collector_no_exporter_is_built() {
        // Outside a runtime: building one would need it, so `None` proves nothing was built.
        assert!(matches!(start(&env(&[])), Ok(None)));
    }

    #[test]
    fn a_failed_export_is_said_without_the_endpoints_credentials() {
        let error = "error sending request for url (https://otel:s3cret-pass-42@collector.example:4318/v1/traces)";
        let said = failure_message(&error, "");
        assert!(!said.contains("s3cret-pass-42"), "{said}");
        assert!(said.contains("could not send spans"), "{said}");
    }

    #[test]
    fn failed_exports_are_said_once_a_minute_with_the_count_between() {
        let logged = Logged::new(());
        assert_eq!(logged.to_say(), Some(0), "the first is said");
        assert_eq!(logged.to_say(), None);
        assert_eq!(logged.to_say(), None);
        let Some(long_ago) = Instant::now().checked_sub(WARN_EVERY + Duration::from_secs(1)) else {
            return; // A clock this young cannot go back a minute.
        };
        *logged.last_warned.lock().unwrap() = Some(long_ago);
        assert_eq!(
            logged.to_say(),
            Some(2),
            "a minute on: said, with the two not said"
        );
        assert_eq!(logged.to_say(), None);
    }

    #[test]
    fn the_endpoint_goes_to_the_exporter_without_its_user_info() {
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, Option<&'a str>);
        let cases: &[Case] = &[
            (
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")],
                "http://c:4318/v1/traces",
                None,
            ),
            (
                &[(
                    "OTEL_EXPORTER_OTLP_ENDPOINT",
                    "https://u:S3cret@c:4318/otlp/",
                )],
                "https://c:4318/otlp/v1/traces",
                Some("Basic dTpTM2NyZXQ="),
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://other:4318"),
                    (
                        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                        "http://u:S3cret@c:4318/traces",
                    ),
                ],
                "http://c:4318/traces",
                Some("Basic dTpTM2NyZXQ="),
            ),
        ];
        for (vars, want, auth) in cases {
            let (endpoint, got) = endpoint(&env(vars)).unwrap();
            assert_eq!(endpoint, *want, "{vars:?}");
            assert_eq!(got.as_ref().map(|s| s.expose()), *auth, "{vars:?}");
        }
    }

    #[test]
    fn a_bad_endpoint_is_refused_naming_its_variable() {
        for bad in [
            "localhost:4318",
            "ftp://c/x",
            "not a url",
            "http://u:S3cret@[::1",
        ] {
            let vars = [("OTEL_EXPORTER_OTLP_ENDPOINT", bad)];
            let err = start(&env(&vars)).err().expect("refused");
            assert!(
                err.starts_with("OTEL_EXPORTER_OTLP_ENDPOINT is not an http:// or https:// URL"),
                "{bad}: {err}"
            );
            assert!(!err.contains("S3cret"), "{err}");
        }
    }
}

//! Traces: what a tool call did, as OpenTelemetry spans — a `call` span whose children are the
//! steps that take time outside the process: `collect` (files and diff read), `gemini.request`
//! (one per request sent, each retry its own), `store.load` and `store.save`. The spans are
//! `tracing` spans of one target ([`TARGET`]), made only here, so every attribute a trace can
//! carry is named in this file: counts, kinds, model ids, outcomes and HTTP statuses — never a
//! prompt, a file's name or content, a value, a key or a thread id. Exported over OTLP by
//! [`export`] only when OpenTelemetry's `OTEL_EXPORTER_OTLP_ENDPOINT` is set; otherwise no layer
//! wants these spans and making one costs a disabled callsite check.
//!
//! A call continues the caller's trace when it came with a W3C `traceparent` ([`Parent`]: from
//! the HTTP request or the call's `_meta`, found by the MCP edge and carried by the plan).

pub mod export;

use opentelemetry::trace::{SpanContext, TraceContextExt};
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The `tracing` target of every span made here; the exporter's layer takes these spans and
/// nothing else (no log event, no other crate's span).
pub const TARGET: &str = "gemini_mcp::traces";

/// A caller's span a call continues: a valid W3C `traceparent` (and its `tracestate`), parsed
/// once at the edge. An invalid one is no parent at all: the call starts a new trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Parent(SpanContext);

impl Parent {
    /// The parent `traceparent` names (with `tracestate` when given), if it is valid: version
    /// `00` exactly as W3C Trace Context writes it (`00-<32 hex>-<16 hex>-<2 hex>`, lowercase,
    /// ids not all zero), or a later version's first four fields; anything else is `None`.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<Parent> {
        use opentelemetry::propagation::TextMapPropagator;
        let value = traceparent.trim();
        let fields: Vec<&str> = value.split('-').collect();
        let sizes_ok = fields.len() >= 4
            && [2, 32, 16, 2]
                .iter()
                .zip(&fields)
                .all(|(n, f)| f.len() == *n && f.bytes().all(|b| b.is_ascii_hexdigit()));
        if !sizes_ok || fields[0] == "ff" || (fields[0] == "00" && fields.len() != 4) {
            return None;
        }
        let mut carrier = std::collections::HashMap::new();
        carrier.insert("traceparent".to_string(), value.to_string());
        if let Some(state) = tracestate {
            carrier.insert("tracestate".to_string(), state.to_string());
        }
        let cx = opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier);
        let span = cx.span().span_context().clone();
        span.is_valid().then_some(Parent(span))
    }

    /// The caller's trace id, as hex.
    pub fn trace_id(&self) -> String {
        self.0.trace_id().to_string()
    }

    /// The caller's span id, as hex.
    pub fn span_id(&self) -> String {
        self.0.span_id().to_string()
    }
}

/// The span of one tool call of `tool`, continuing `parent` when there is one; `continued` says
/// whether the call continues a thread. Its outcome and usage are recorded by [`end_call`].
pub fn call(tool: &str, continued: bool, parent: Option<&Parent>) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "call",
        tool,
        "thread.continued" = continued,
        "gen_ai.response.model" = Empty,
        outcome = Empty,
        "error.type" = Empty,
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "gemini.usage.thinking_tokens" = Empty,
        "gemini.usage.cached_tokens" = Empty,
        "gemini.requests" = Empty,
        cost_usd = Empty,
        "otel.status_code" = Empty,
    );
    if let Some(Parent(remote)) = parent {
        let cx = opentelemetry::Context::new().with_remote_span_context(remote.clone());
        // Fails only when no exporter takes the span (traces off): nothing to continue then.
        let _ = span.set_parent(cx);
    }
    span
}

/// A count as OpenTelemetry holds integers (`tracing-opentelemetry` would write a `u64` as a
/// string).
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// What a call used, for its span: summed over its requests.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub thinking: u64,
    pub cached: u64,
    /// Requests sent to Gemini.
    pub requests: usize,
    /// The estimated cost in US dollars, when every model used has a known price.
    pub cost_usd: Option<f64>,
    /// The model that answered (as the API reports it), once one was chosen.
    pub model: Option<String>,
}

/// Records that the step of `span` failed: the error's kind (one word, never its message) as
/// its outcome, and the span's status.
pub fn failed(span: &Span, kind: &'static str) {
    span.record("outcome", kind);
    span.record("error.type", kind);
    span.record("otel.status_code", "error");
}

/// Records how `call` ended: `ok`, or an error's kind (`abandoned` when it was dropped), and
/// what its requests used. Each attribute is recorded once: a field recorded twice would be
/// exported twice.
pub fn end_call(call: &Span, error: Option<&'static str>, usage: &Usage) {
    match error {
        None => {
            call.record("outcome", "ok");
        }
        Some(kind) => failed(call, kind),
    }
    if let Some(model) = &usage.model {
        call.record("gen_ai.response.model", model.as_str());
    }
    call.record("gen_ai.usage.input_tokens", int(usage.input));
    call.record("gen_ai.usage.output_tokens", int(usage.output));
    call.record("gemini.usage.thinking_tokens", int(usage.thinking));
    call.record("gemini.usage.cached_tokens", int(usage.cached));
    call.record("gemini.requests", int(usage.requests as u64));
    if let Some(cost) = usage.cost_usd {
        call.record("cost_usd", cost);
    }
}

/// The span of the collect step: files, diff and images read within the budget. Its counts are
/// recorded by [`collected`].
pub fn collect() -> Span {
    tracing::info_span!(
        target: TARGET,
        "collect",
        "files.sent" = Empty,
        "files.skipped" = Empty,
        "diff.blocks" = Empty,
        images = Empty,
        tokens = Empty,
        outcome = Empty,
        "error.type" = Empty,
        "otel.status_code" = Empty,
    )
}

/// What the collect step sends and leaves out, counted.
pub fn collected(
    span: &Span,
    files: usize,
    skipped: usize,
    diff_blocks: usize,
    images: usize,
    tokens: u64,
) {
    span.record("outcome", "ok");
    span.record("files.sent", int(files as u64));
    span.record("files.skipped", int(skipped as u64));
    span.record("diff.blocks", int(diff_blocks as u64));
    span.record("images", int(images as u64));
    span.record("tokens", int(tokens));
}

/// The span of one request to Gemini: `attempt` counts from 1 (a retry is a new request), on
/// `backend` (`api`, `vertex` or `cli`). Its answer is recorded by [`gemini_answered`].
pub fn gemini_request(backend: &'static str, model: &str, attempt: u32) -> Span {
    tracing::info_span!(
        target: TARGET,
        "gemini.request",
        "otel.kind" = "client",
        "gemini.backend" = backend,
        "gen_ai.request.model" = model,
        "gemini.attempt" = i64::from(attempt),
        "http.request.resend_count" = i64::from(attempt.saturating_sub(1)),
        "http.response.status_code" = Empty,
        outcome = Empty,
        "error.type" = Empty,
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "otel.status_code" = Empty,
    )
}

/// Records the HTTP status of the answer to the request whose span is current (where the
/// status is read); nothing when no `gemini.request` span is.
pub fn gemini_status(status: u16) {
    Span::current().record("http.response.status_code", i64::from(status));
}

/// Records a request's answer: `ok` with its input and output tokens, or the error's kind.
pub fn gemini_answered(span: &Span, answer: Result<(u64, u64), &'static str>) {
    match answer {
        Ok((input, output)) => {
            span.record("outcome", "ok");
            span.record("gen_ai.usage.input_tokens", int(input));
            span.record("gen_ai.usage.output_tokens", int(output));
        }
        Err(kind) => failed(span, kind),
    }
}

/// The span of loading the thread a call continues, from the `store` of that kind.
pub fn store_load(store: &'static str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "store.load",
        "db.system.name" = store,
        turns = Empty,
        outcome = Empty,
        "error.type" = Empty,
        "otel.status_code" = Empty,
    )
}

/// The span of saving the call's turn in the `store` of that kind.
pub fn store_save(store: &'static str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "store.save",
        "db.system.name" = store,
        turns = Empty,
        outcome = Empty,
        "error.type" = Empty,
        "otel.status_code" = Empty,
    )
}

/// Records a store step's outcome: the thread's turns after it, or the error's kind.
pub fn stored(span: &Span, result: Result<u32, &'static str>) {
    match result {
        Ok(turns) => {
            span.record("turns", i64::from(turns));
            span.record("outcome", "ok");
        }
        Err(kind) => failed(span, kind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents_are_parsed_as_w3c_writes_them() {
        let tid = "4bf92f3577b34da6a3ce929d0e0e4736";
        let sid = "00f067aa0ba902b7";
        let ok = Parent::parse(&format!("00-{tid}-{sid}-01"), None).expect("a valid traceparent");
        assert_eq!((ok.trace_id().as_str(), ok.span_id().as_str()), (tid, sid));
        let later = Parent::parse(&format!("01-{tid}-{sid}-01-more"), None);
        assert!(later.is_some(), "a later version's first four fields");
        let refused = [
            String::new(),
            "garbage".into(),
            format!("00-{tid}-{sid}"),
            format!("00-{tid}-{sid}-01-extra"),
            format!("ff-{tid}-{sid}-01"),
            format!("00-{}-{sid}-01", tid.to_uppercase()),
            format!("00-{}-{sid}-01", &tid[1..]),
            format!("00-{tid}-{}-01", &sid[1..]),
            format!("00-{}-{sid}-01", "0".repeat(32)),
            format!("00-{tid}-{}-01", "0".repeat(16)),
            format!("00-{tid}-{sid}-1"),
            format!("00-{tid}-{sid}-zz"),
            format!("0-{tid}-{sid}-01"),
        ];
        for bad in refused {
            assert_eq!(
                Parent::parse(&bad, None),
                None,
                "{bad:?} is not a traceparent"
            );
        }
    }

    #[test]
    fn a_tracestate_is_kept_and_a_bad_one_dropped() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let with = Parent::parse(tp, Some("vendor=value")).unwrap();
        assert_eq!(with.0.trace_state().header(), "vendor=value");
        let bad = Parent::parse(tp, Some("not a tracestate")).unwrap();
        assert_eq!(
            bad.0.trace_state().header(),
            "",
            "the parent stays, the state goes"
        );
    }
}

//! A stand-in OpenTelemetry collector: a real HTTP server on `127.0.0.1` taking OTLP/HTTP
//! exports as a collector does (`POST /v1/traces`, `application/x-protobuf`), decoded with the
//! protocol's own types (`opentelemetry-proto`) and kept for the tests to read. Point
//! `OTEL_EXPORTER_OTLP_ENDPOINT` at [`Collector::endpoint`].
//! The server is hand-written on axum like the other stand-ins: no crate serves OTLP/HTTP as a
//! recording fake.

#![allow(dead_code)] // Shared by the trace tests; not every test uses every helper.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

use super::scripted_model::Served;

/// A running stand-in collector; stopped when dropped.
pub struct Collector {
    served: Served,
    exports: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
    authorizations: Arc<Mutex<Vec<Option<String>>>>,
}

/// What the collector keeps: each export, and the `Authorization` header it came with.
type Kept = (
    Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
    Arc<Mutex<Vec<Option<String>>>>,
);

impl Collector {
    pub fn start() -> Collector {
        let exports = Arc::new(Mutex::new(Vec::new()));
        let authorizations = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            .route("/v1/traces", post(traces))
            .with_state((exports.clone(), authorizations.clone()));
        Collector {
            served: Served::start("otlp-collector", app),
            exports,
            authorizations,
        }
    }

    /// The `Authorization` header of every export received, in arrival order.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.authorizations.lock().unwrap().clone()
    }

    /// `http://127.0.0.1:<port>`: the value of `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        self.served.base_url()
    }

    /// Every export received, in arrival order.
    pub fn exports(&self) -> Vec<ExportTraceServiceRequest> {
        self.exports.lock().unwrap().clone()
    }

    /// Every span received.
    pub fn spans(&self) -> Vec<Span> {
        self.exports()
            .into_iter()
            .flat_map(|e| e.resource_spans)
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans)
            .collect()
    }

    /// Waits (polling, up to `secs` seconds) until the spans received satisfy `cond`.
    pub async fn until(&self, secs: u64, cond: impl Fn(&[Span]) -> bool) -> bool {
        for _ in 0..secs * 20 {
            if cond(&self.spans()) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        cond(&self.spans())
    }
}

/// `POST /v1/traces`: a protobuf `ExportTraceServiceRequest`, answered as a collector answers
/// (an empty `ExportTraceServiceResponse`); another content type is refused with 415, a body
/// that does not decode with 400.
async fn traces(
    State((exports, authorizations)): State<Kept>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, [(&'static str, &'static str); 1], Vec<u8>) {
    let protobuf = [("content-type", "application/x-protobuf")];
    if headers.get("content-type").and_then(|v| v.to_str().ok()) != Some("application/x-protobuf") {
        return (StatusCode::UNSUPPORTED_MEDIA_TYPE, protobuf, Vec::new());
    }
    match ExportTraceServiceRequest::decode(body) {
        Ok(request) => {
            exports.lock().unwrap().push(request);
            let authorization = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(String::from);
            authorizations.lock().unwrap().push(authorization);
            let answer = ExportTraceServiceResponse::default().encode_to_vec();
            (StatusCode::OK, protobuf, answer)
        }
        Err(_) => (StatusCode::BAD_REQUEST, protobuf, Vec::new()),
    }
}

/// The value of a span's attribute `key`, if it has one.
pub fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a any_value::Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

/// A string attribute.
pub fn attr_str<'a>(span: &'a Span, key: &str) -> Option<&'a str> {
    match attr(span, key) {
        Some(any_value::Value::StringValue(s)) => Some(s),
        _ => None,
    }
}

/// An integer attribute.
pub fn attr_int(span: &Span, key: &str) -> Option<i64> {
    match attr(span, key) {
        Some(any_value::Value::IntValue(n)) => Some(*n),
        _ => None,
    }
}

/// A boolean attribute.
pub fn attr_bool(span: &Span, key: &str) -> Option<bool> {
    match attr(span, key) {
        Some(any_value::Value::BoolValue(b)) => Some(*b),
        _ => None,
    }
}

/// Every string an export carries: span names, attribute keys and string values (nested ones
/// too), events, links, status messages, trace states, resource and scope attributes.
pub fn strings(export: &ExportTraceServiceRequest) -> Vec<String> {
    let mut out = Vec::new();
    for rs in &export.resource_spans {
        if let Some(r) = &rs.resource {
            key_values(&r.attributes, &mut out);
        }
        out.push(rs.schema_url.clone());
        for ss in &rs.scope_spans {
            if let Some(scope) = &ss.scope {
                out.push(scope.name.clone());
                out.push(scope.version.clone());
                key_values(&scope.attributes, &mut out);
            }
            for span in &ss.spans {
                out.push(span.name.clone());
                out.push(span.trace_state.clone());
                key_values(&span.attributes, &mut out);
                for e in &span.events {
                    out.push(e.name.clone());
                    key_values(&e.attributes, &mut out);
                }
                for l in &span.links {
                    out.push(l.trace_state.clone());
                    key_values(&l.attributes, &mut out);
                }
                if let Some(status) = &span.status {
                    out.push(status.message.clone());
                }
            }
        }
    }
    out
}

fn key_values(kvs: &[KeyValue], out: &mut Vec<String>) {
    for kv in kvs {
        out.push(kv.key.clone());
        if let Some(v) = &kv.value {
            any(v, out);
        }
    }
}

fn any(v: &AnyValue, out: &mut Vec<String>) {
    match &v.value {
        Some(any_value::Value::StringValue(s)) => out.push(s.clone()),
        Some(any_value::Value::BytesValue(b)) => out.push(String::from_utf8_lossy(b).into_owned()),
        Some(any_value::Value::ArrayValue(a)) => a.values.iter().for_each(|v| any(v, out)),
        Some(any_value::Value::KvlistValue(l)) => key_values(&l.values, out),
        _ => {}
    }
}

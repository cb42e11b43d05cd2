//! The record step, the pipeline's last: the call's audit record ([`crate::audit::Record`]),
//! filled in as the steps learn what the call sends (the model, the thread, the files and diff
//! with their hashes, the redactions per rule), then what its requests were and used (from the
//! call's [`Meter`]) and its outcome, and appended to the audit log once when the call ends. A
//! call dropped before it ends (its client cancelled, the process interrupted) is recorded as
//! `abandoned` when it is dropped. Without an audit log nothing is gathered but what the metrics
//! count once per call: the tool, the model, the outcome and our own time (the call's wall time
//! less its wait on Gemini, from the meter).
//!
//! The call's trace span ([`crate::traces::call`]) is told the same facts at the same points:
//! the steps run inside it, and it ends with the outcome and what the meter saw.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use super::services::Services;
use super::gather::Material;
use super::meter::Meter;
use crate::audit::{AuditLog, FileKind, FileRecord, Record, Usage, rfc3339};
use crate::metrics::Metrics;
use crate::redact::Counts;
use crate::tools::{Plan, ToolError};

/// A call's audit record in the making; written by [`Trail::finish`], or when dropped.
pub(super) struct Trail {
    log: Option<Arc<AuditLog>>,
    /// `None` once written (or without a log).
    record: Option<Record>,
    meter: Arc<Meter>,
    /// What the metrics count, once (`None` once counted).
    measure: Option<Measure>,
    /// The call's span; `None` once its outcome is recorded.
    span: Option<tracing::Span>,
    /// The call's model as last learnt, for the metrics and its span.
    model: Option<String>,
}

/// A call as the metrics count it.
struct Measure {
    metrics: Arc<Metrics>,
    tool: &'static str,
    started: Instant,
}

impl Trail {
    /// The record of a call of `client` planned as `plan`, whose requests pass `meter`.
    pub(super) fn begin(
        services: &Services,
        client: &str,
        plan: &Plan,
        meter: Arc<Meter>,
    ) -> Trail {
        let log = services.audit.clone();
        let record = log.as_ref().map(|_| Record {
            time: String::new(),
            client: client.to_string(),
            project: services
                .config
                .roots()
                .iter()
                .map(|r| r.display().to_string())
                .collect(),
            tool: plan.tool.name().to_string(),
            model: None,
            thread: None,
            files: Vec::new(),
            read: Vec::new(),
            redactions: Counts::default(),
            requests: Vec::new(),
            usage: Usage::default(),
            cost_usd: None,
            outcome: String::new(),
            error: None,
        });
        let measure = Some(Measure {
            metrics: services.metrics.clone(),
            tool: plan.tool.name(),
            started: Instant::now(),
        });
        let span = crate::traces::call(
            plan.tool.name(),
            plan.continuation.is_some(),
            plan.trace_parent.as_ref(),
        );
        Trail {
            log,
            record,
            meter,
            measure,
            span: Some(span),
            model: None,
        }
    }

    /// The call's span, for the steps to run in.
    pub(super) fn span(&self) -> tracing::Span {
        self.span.clone().unwrap_or_else(tracing::Span::none)
    }

    pub(super) fn model(&mut self, id: &str) {
        self.model = Some(id.to_string());
        if let Some(r) = &mut self.record {
            r.model = Some(id.to_string());
        }
    }

    pub(super) fn thread(&mut self, id: &str) {
        if let Some(r) = &mut self.record {
            r.thread = Some(id.to_string());
        }
    }

    /// Values replaced in the call's own text.
    pub(super) fn redactions(&mut self, counts: &Counts) {
        if let Some(r) = &mut self.record {
            r.redactions.merge(counts);
        }
    }

    /// The files, the diff and the images the call sends, and their redactions.
    pub(super) fn material(&mut self, m: &Material) {
        let Some(r) = &mut self.record else {
            return;
        };
        r.redactions.merge(&m.collected.redactions);
        r.files.extend(m.collected.files.iter().map(|f| FileRecord {
            path: f.display.clone(),
            kind: FileKind::File,
            sha256: f.hash.clone(),
            bytes: f.bytes,
            tokens: f.tokens,
        }));
        if let Some(d) = &m.diff {
            r.redactions.merge(&d.redactions);
            r.files.extend(d.sent.iter().map(|b| FileRecord {
                path: b.path.clone(),
                kind: FileKind::Diff,
                sha256: b.sha256.clone(),
                bytes: b.bytes,
                tokens: b.tokens,
            }));
        }
        r.files.extend(m.images.iter().map(|i| {
            use sha2::Digest;
            FileRecord {
                path: i.display.clone(),
                kind: if i.mime == "application/pdf" {
                    FileKind::Document
                } else {
                    FileKind::Image
                },
                sha256: hex::encode(sha2::Sha256::digest(i.data.as_slice())),
                bytes: i.data.len() as u64,
                tokens: i.tokens,
            }
        }));
    }

    /// Files an investigation read (paths as shown).
    pub(super) fn read(&mut self, files: &[String]) {
        if let Some(r) = &mut self.record {
            r.read = files.to_vec();
        }
    }

    /// Writes the record: `ok`, or the kind of `error` (off the runtime's threads). A log that
    /// cannot be written is reported in the server's log; the call's outcome stands.
    pub(super) async fn finish(mut self, error: Option<&ToolError>) {
        self.count(error.map_or("ok", ToolError::kind));
        self.end_span(error.map(ToolError::kind));
        let Some((log, record)) = self.completed(error.map(ToolError::kind)) else {
            return;
        };
        let written = tokio::task::spawn_blocking(move || log.append(&record)).await;
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!("{e}"),
            Err(e) => tracing::error!("the audit record was not written: {e}"),
        }
    }

    /// The call in the metrics, once: its outcome (`ok`, an error's kind, `abandoned`), and a
    /// refusal when a cap refused it.
    fn count(&mut self, outcome: &'static str) {
        let Some(m) = self.measure.take() else {
            return;
        };
        let own = m.started.elapsed().saturating_sub(self.meter.waited());
        m.metrics.call(m.tool, self.model.as_deref(), outcome, own);
        if matches!(outcome, "spending_cap" | "over_call_ceiling") {
            m.metrics.refusal(m.tool, outcome);
        }
    }

    /// Ends the call's span with its outcome and what the meter saw (once).
    fn end_span(&mut self, error: Option<&'static str>) {
        let Some(span) = self.span.take() else {
            return;
        };
        let seen = self.meter.seen();
        let usage = crate::traces::Usage {
            input: seen.usage.input,
            output: seen.usage.output,
            thinking: seen.usage.thinking,
            cached: seen.usage.cached,
            requests: seen.requests.len(),
            cost_usd: seen.cost_usd,
            model: self.model.clone(),
        };
        crate::traces::end_call(&span, error, &usage);
    }

    /// The record, completed with what the meter saw and the outcome (once).
    fn completed(&mut self, error: Option<&'static str>) -> Option<(Arc<AuditLog>, Record)> {
        let mut record = self.record.take()?;
        let log = self.log.clone()?;
        let seen = self.meter.seen();
        record.time = rfc3339(SystemTime::now());
        record.requests = seen.requests;
        record.usage = Usage {
            input: seen.usage.input,
            output: seen.usage.output,
            thinking: seen.usage.thinking,
            cached: seen.usage.cached,
        };
        record.cost_usd = seen.cost_usd;
        record.outcome = if error.is_some() { "error" } else { "ok" }.into();
        record.error = error.map(String::from);
        Some((log, record))
    }
}

impl Drop for Trail {
    /// A call dropped before it ended: recorded here, at once (it is one short line, and the
    /// process may be on its way out).
    fn drop(&mut self) {
        self.count("abandoned");
        self.end_span(Some("abandoned"));
        if let Some((log, record)) = self.completed(Some("abandoned"))
            && let Err(e) = log.append(&record)
        {
            tracing::error!("{e}");
        }
    }
}

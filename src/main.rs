//! `gemini-mcp`: the MCP server (stdio by default) and the command line of the same tools.

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// How long the end of the process waits for the collector to take the last spans.
const TRACES_FLUSH: std::time::Duration = std::time::Duration::from_secs(3);

fn main() -> ExitCode {
    let args = gemini_mcp_server::Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            gemini_mcp_server::say_line(format_args!(
                "gemini-mcp: cannot start the async runtime: {e}"
            ));
            return ExitCode::from(2);
        }
    };
    // Traces, when OpenTelemetry's variables name a collector: the batch task runs on the
    // runtime, so the exporter is built inside it.
    let traces = {
        let _inside = runtime.enter();
        gemini_mcp_server::start_traces(&|name| std::env::var(name).ok())
    };
    let (traces, traces_off) = match traces {
        Ok(t) => (t, None),
        Err(why) => (None, Some(why)),
    };
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                // Through the secret rules and the terminal sink: a log line can quote what
                // came from outside, and the dependencies' lines are in their own words.
                .with_writer(gemini_mcp_server::log_writer)
                .with_ansi(false)
                .with_filter(log_filter(std::env::var("GEMINI_MCP_LOG").ok())),
        )
        .with(traces.as_ref().map(|t| t.layer()))
        .init();
    if let Some(why) = traces_off {
        tracing::warn!("{why}");
    } else if traces.is_some() {
        tracing::info!(
            "traces: exporting over OTLP/HTTP to the collector OTEL_EXPORTER_OTLP_ENDPOINT names"
        );
    }
    let code = runtime.block_on(gemini_mcp_server::run(args));
    // The calls are over (drained or abandoned): their spans go out while the runtime runs.
    if let Some(traces) = traces {
        traces.shutdown(TRACES_FLUSH);
    }
    // Whatever was to be written has been: do not wait for blocking threads still stuck in a
    // read (tokio's stdin reader, a file or FIFO opened by a run that was interrupted), or a
    // signal would leave the process alive until its stdin closes.
    runtime.shutdown_background();
    code
}

/// The log filter from `GEMINI_MCP_LOG` (default `warn`). rmcp logs a few lines per HTTP
/// request at `info` (with the client's whole `initialize` parameters) and every message whole
/// at `debug` — tool arguments included, where agents paste logs with tokens in them — so unless
/// the filter names `rmcp` (e.g. `debug,rmcp=trace`), rmcp stays at `warn` up to a general
/// `info` and at `info` under `debug` or `trace`: quiet by default, details at debug, and safe to
/// share. The trace spans (`traces::TARGET`) are the collector's, not the log's, unless the
/// filter names them.
fn log_filter(spec: Option<String>) -> tracing_subscriber::EnvFilter {
    let traces = gemini_mcp_server::TRACES_TARGET;
    let spec = spec
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "warn".into());
    let spec = if spec.contains("rmcp") {
        spec
    } else {
        let general = spec
            .split(',')
            .map(str::trim)
            .find(|d| !d.contains('='))
            .and_then(|d| d.parse::<tracing_subscriber::filter::LevelFilter>().ok())
            .unwrap_or(tracing_subscriber::filter::LevelFilter::WARN);
        let rmcp = if general >= tracing_subscriber::filter::LevelFilter::DEBUG {
            "info"
        } else {
            "warn"
        };
        format!("{spec},rmcp={rmcp}")
    };
    let spec = if spec.contains(traces) {
        spec
    } else {
        format!("{spec},{traces}=off")
    };
    tracing_subscriber::EnvFilter::try_new(spec)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("warn,{traces}=off")))
}

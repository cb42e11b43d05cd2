//! Serving MCP over stdio: one client (the agent that started the process), until it closes
//! stdin or the caller asks the server to stop.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;

use rmcp::ServiceExt;

use crate::app::App;
use crate::config::Config;
use crate::server::Server;
use crate::shutdown::Shutdown;

/// How long a tool call in flight may take to finish once the stdio server is told to stop.
/// Claude Code sends SIGINT, then SIGTERM 100 ms later and SIGKILL at 500 ms: a call that
/// finishes within this grace is answered and its turn stored; a later one is abandoned before
/// its turn is written (a turn is appended in one atomic step, so it is stored whole or not at
/// all).
const STDIO_SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_millis(300);

/// After the grace, how long answers already produced get to reach stdout.
const STDIO_FLUSH: std::time::Duration = std::time::Duration::from_millis(100);

/// Serves MCP over stdio until the client closes stdin or a signal arrives. On SIGINT/SIGTERM
/// new calls are refused, calls in flight get [`STDIO_SHUTDOWN_GRACE`] to finish (a second
/// signal cuts it short), the answers produced are written out, and the process exits 0 without
/// waiting for stdin to close (`main` does not wait for the blocked stdin reader).
pub async fn serve(config: Arc<Config>, mut shutdown: Shutdown) -> ExitCode {
    if std::io::stdin().is_terminal() {
        let _ = crate::term::stderr().text(greeting(&config));
    }
    // Rate limits are off on stdio (one local client) unless GEMINI_MCP_RATE_LIMITS sets them;
    // the app counts the calls in flight for the shutdown drain either way.
    let rates = config
        .tools
        .rate_limits
        .clone()
        .filter(|r| !r.is_off())
        .unwrap_or_default();
    let app = match App::start(config.clone()).await {
        Ok(app) => Arc::new(app.with_limits(&rates, None)),
        Err(e) => {
            crate::term::say!("gemini-mcp: {e}");
            return ExitCode::from(2);
        }
    };
    let server = Server::new(app.clone());
    let tasks = server.tasks().clone();
    let running = tokio::select! {
        r = server.serve(crate::jsonrpc::stdio().with_tasks(crate::server::tasks::asks_a_model)) => match r {
            Ok(r) => r,
            // The client closed stdin before initializing: a clean shutdown.
            Err(e) => {
                tracing::info!("client left before initializing: {e}");
                return ExitCode::SUCCESS;
            }
        },
        _ = shutdown.requested() => {
            tracing::info!("stopped by a signal before initializing");
            return ExitCode::SUCCESS;
        }
    };
    let stop = running.cancellation_token();
    let waiting = running.waiting();
    tokio::pin!(waiting);
    tokio::select! {
        r = &mut waiting => return match r {
            Ok(_) => {
                // The client is gone: nobody can read the tasks still running.
                tasks.abandon(STDIO_FLUSH).await;
                ExitCode::SUCCESS
            }
            Err(e) => {
                crate::term::say!("gemini-mcp: {e}");
                ExitCode::from(1)
            }
        },
        _ = shutdown.requested() => {}
    }
    tracing::info!(
        in_flight = app.in_flight(),
        "stopping: calls in flight get {} ms to finish",
        STDIO_SHUTDOWN_GRACE.as_millis()
    );
    let finished = tokio::select! {
        finished = app.drain(STDIO_SHUTDOWN_GRACE) => finished,
        _ = shutdown.requested() => false,
    };
    if !finished {
        tracing::warn!(
            cut = app.in_flight(),
            "stopping: abandoning the calls still in flight"
        );
        // A Gemini CLI subprocess leads its own process group: the signal did not reach it.
        app.abort();
        tasks.abandon(STDIO_FLUSH).await;
        return ExitCode::SUCCESS;
    }
    // Every call has finished: let rmcp write the answers still queued, then stop.
    stop.cancel();
    let _ = tokio::time::timeout(STDIO_FLUSH, waiting).await;
    tracing::info!("stopped by a signal");
    ExitCode::SUCCESS
}

/// What a person who started the server by hand on a terminal sees (an agent starts it with
/// pipes and sees nothing): what this is, how to hand it to a client, how to check the setup and
/// how to stop. The commands name this very binary so they can be copied as they are.
fn greeting(config: &Config) -> String {
    let me = std::env::current_exe()
        .ok()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "gemini-mcp".into());
    let key = if config.gemini.api_key.is_none() && config.gemini.vertex.is_none() {
        "no GEMINI_API_KEY is set: get one at https://aistudio.google.com/apikey"
    } else {
        "checks the key, the model and one real call"
    };
    format!(
        "gemini-mcp {version}: an MCP server that gives coding agents a second opinion from Gemini.\n\
         It talks MCP on stdin/stdout and is meant to be started by your agent; it is waiting for one now.\n\
         \n\
         \x20 Claude Code:  claude mcp add gemini -e GEMINI_API_KEY=\"$GEMINI_API_KEY\" -- {me}\n\
         \x20 Codex CLI:    codex mcp add gemini --env GEMINI_API_KEY=\"$GEMINI_API_KEY\" -- {me}\n\
         \x20 Gemini CLI:   gemini mcp add -s user -e GEMINI_API_KEY=\"$GEMINI_API_KEY\" gemini {me}\n\
         \x20 Check setup:  {me} doctor   ({key})\n\
         \x20 Try it here:  {me} chat \"Is this idea sound?\"\n\
         \n\
         Stop with Ctrl-C (or Ctrl-D).\n",
        version = env!("CARGO_PKG_VERSION"),
    )
}

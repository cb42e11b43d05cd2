//! `gemini-mcp`: the MCP server (stdio by default) and the command line of the same tools.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("GEMINI_MCP_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let args = gemini_mcp_server::cli::Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gemini-mcp: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(gemini_mcp_server::cli::run(args))
}

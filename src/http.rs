//! Streamable HTTP transport (rmcp's tower service in axum).

use std::process::ExitCode;
use std::sync::Arc;

use crate::config::Config;

pub async fn serve(config: Arc<Config>, addr: &str) -> ExitCode {
    let _ = config;
    eprintln!("gemini-mcp: HTTP transport on {addr} is not available in this build");
    ExitCode::from(2)
}

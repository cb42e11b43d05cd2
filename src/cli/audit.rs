//! `gemini-mcp audit summary`: the audit log (`GEMINI_MCP_AUDIT_LOG`) read back as a table of
//! calls, tokens and cost per client, tool, model or day.

use std::io::Write;
use std::sync::Arc;

use crate::audit::summary::{self, By};
use crate::config::Config;
use crate::term::{self, say};

use super::output;

#[derive(Debug, Clone, clap::Subcommand)]
pub enum AuditCommand {
    /// Calls, tokens and cost per group, from the audit log and its rotated files.
    Summary {
        /// Only calls from this date (2026-11-01, UTC) or this long ago (90m, 24h, 7d, 2w).
        #[arg(long, value_name = "DATE|DURATION")]
        since: Option<String>,
        /// Group by client, tool, model or day.
        #[arg(long, default_value = "client")]
        by: String,
    },
}

pub fn run(config: &Arc<Config>, command: AuditCommand) -> u8 {
    let AuditCommand::Summary { since, by } = command;
    let Some(settings) = config.audit() else {
        say!("gemini-mcp audit: no audit log is configured; set GEMINI_MCP_AUDIT_LOG");
        return output::COULD_NOT_RUN;
    };
    let by = match By::parse(&by) {
        Ok(by) => by,
        Err(e) => {
            say!("gemini-mcp audit summary: --by {e}");
            return output::COULD_NOT_RUN;
        }
    };
    let since = match since.map(|s| summary::since(&s, std::time::SystemTime::now())) {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            say!("gemini-mcp audit summary: --since {e}");
            return output::COULD_NOT_RUN;
        }
    };
    let read = match summary::read(&settings.path, since.as_deref(), by) {
        Ok(s) => s,
        Err(e) => {
            say!("gemini-mcp audit summary: {e}");
            return output::COULD_NOT_RUN;
        }
    };
    // Clients' names and models came from outside: the sink shows their controls.
    let mut out = term::stdout();
    match out
        .text(summary::render(&read, by))
        .and_then(|()| out.flush())
    {
        Ok(()) => 0,
        Err(e) => {
            drop(out);
            say!("gemini-mcp audit summary: cannot write the output: {e}");
            output::COULD_NOT_RUN
        }
    }
}

//! The one integration-test binary: the real `gemini-mcp` binary driven by an MCP client, a fake
//! Gemini API speaking the real wire format, real git repositories and a real redis-server.

// The stand-in agent is a script run through its `#!` line, and /proc finds the agents left
// behind; on Windows it would be a `gemini.cmd` shim and a process snapshot.
#[cfg(unix)]
mod acp;
mod acp_secrets;
mod action;
mod audit;
mod budget;
mod cache_reruns;
mod clarify;
mod cli;
mod clients;
mod cluster;
mod compat;
mod consensus;
mod context_cache;
mod docs;
mod documents;
mod dry_run;
mod fake_cache;
mod fake_interactions;
mod gemini_api;
// The stand-in `gemini` is a POSIX shell script (on Windows it would be a `gemini.cmd`).
#[cfg(unix)]
mod gemini_cli;
mod hardening;
mod host;
mod http;
mod interactions_api;
mod interactions_tools;
mod investigate;
mod kubernetes;
mod metrics;
mod model_dates;
mod packaging;
mod reply;
mod research;
mod setup;
mod stdio;
mod support;
mod tasks;
// A pseudo-terminal; Windows' counterpart is a ConPTY.
#[cfg(unix)]
mod terminal;
mod threads;
mod tools;
mod traces;
mod url_credentials;
mod verify;
mod vertex;
// google-genai's environment is a Linux virtual environment; the bodies do not depend on the
// platform.
#[cfg(unix)]
mod wire_schema;
// The Windows build under Wine, from a Linux host.
#[cfg(target_os = "linux")]
mod windows;

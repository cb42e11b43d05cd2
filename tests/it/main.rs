//! The one integration-test binary: the real `gemini-mcp` binary driven by an MCP client, a fake
//! Gemini API speaking the real wire format, real git repositories and a real redis-server.

mod acp;
mod acp_secrets;
mod action;
mod audit;
mod budget;
mod cli;
mod clients;
mod compat;
mod dry_run;
mod gemini_api;
mod gemini_cli;
mod hardening;
mod host;
mod http;
mod investigate;
mod packaging;
mod reply;
mod setup;
mod stdio;
mod support;
mod terminal;
mod threads;
mod tools;
mod verify;
mod vertex;
// The Windows build under Wine, from a Linux host.
#[cfg(target_os = "linux")]
mod windows;

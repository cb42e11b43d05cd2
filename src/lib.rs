//! gemini-mcp-server: a second opinion from Google's Gemini models for coding agents.
//!
//! The crate is a synchronous core (collector, git, budget, prompt rendering) under an async shell
//! (the MCP server, the Gemini executor, the thread stores). See ARCHITECTURE.md for the codemap.

// The sandbox's guarantees rest on POSIX descriptors (openat with O_NOFOLLOW, fstat identity),
// and the Gemini CLI's processes on process groups and signals. Windows has equivalents
// (handles opened without following reparse points, job objects) that this crate does not
// implement: say so at once instead of a wall of type errors, or a sandbox that is not one.
#[cfg(not(unix))]
compile_error!(
    "gemini-mcp-server runs on Linux and macOS. On Windows, run it inside WSL 2 \
     (see the README, section Windows)."
);

pub mod app;
pub mod cli;
pub mod collector;
pub mod config;
pub mod echo;
pub mod explore;
pub mod gemini;
pub mod git;
pub mod http;
pub mod jsonrpc;
pub mod limits;
pub mod pipeline;
pub mod redact;
pub mod schema;
pub mod secret;
pub mod server;
pub mod shutdown;
pub mod spend;
pub mod stdio;
pub mod store;
pub mod term;
pub mod tools;

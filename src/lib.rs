//! gemini-mcp-server: a second opinion from Google's Gemini models for coding agents.
//!
//! The crate is a synchronous core (collector, git, budget, prompt rendering) under an async shell
//! (the MCP server, the Gemini executor, the thread stores). See ARCHITECTURE.md for the codemap.

pub mod app;
pub mod audit;
pub mod cli;
pub mod clock;
pub mod collector;
pub mod config;
pub mod echo;
pub mod explore;
pub mod gemini;
pub mod git;
pub mod http;
pub mod jsonrpc;
pub mod limits;
pub mod metrics;
pub mod pipeline;
pub mod redact;
pub mod reply;
pub mod schema;
pub mod secret;
pub mod server;
pub mod setting_file;
pub mod shutdown;
pub mod spend;
pub mod stdio;
pub mod store;
pub mod term;
pub mod tools;
pub mod traces;

//! gemini-mcp-server: a second opinion from Google's Gemini models for coding agents.
//!
//! The crate is a synchronous core (collector, git, budget, prompt rendering) under an async shell
//! (the MCP server, the Gemini executor, the thread stores). See ARCHITECTURE.md for the codemap.
//!
//! The public surface is the binary's: [`Args`] (the command line), [`run`] (the server or a
//! command, to its exit code) and the few pieces `main` wires around them (the log's writer and
//! filter target, the trace exporter). Every module is private to the crate; the integration
//! tests, benches and examples reach them through the `internals` feature, which the crate's own
//! dev-dependency on itself turns on (Cargo.toml). Nothing under `internals` is a promise: it is
//! not semver API.

// Without `internals`, what only the tests and benches call (and the re-exports they name) is
// unused by the binary.
#![cfg_attr(not(feature = "internals"), allow(dead_code, unused_imports))]

/// Declares the crate's modules: private, or public (hidden from the docs) under `internals`.
macro_rules! modules {
    ($($name:ident),* $(,)?) => {$(
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        mod $name;
    )*};
}

modules!(
    admission,
    app,
    audit,
    caps,
    cli,
    clock,
    collector,
    config,
    echo,
    explore,
    gemini,
    git,
    http,
    jsonrpc,
    metrics,
    pipeline,
    redact,
    reply,
    rules,
    schema,
    seats,
    secret,
    server,
    setting_file,
    shutdown,
    stdio,
    store,
    term,
    tools,
    traces,
);

pub use cli::{Args, run};
pub use term::{log as log_writer, say_line};
pub use traces::TARGET as TRACES_TARGET;
pub use traces::export::start as start_traces;

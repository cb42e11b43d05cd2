//! The start-up floor for `benches/startup.rs`: the least a Rust binary can do to answer the same
//! two requests — read `initialize` and `tools/list` line by line from stdin and write canned
//! answers (the `tools/list` result given as a file, so the bytes written match the server's).
//! No runtime, no parsing beyond finding the id.
//!
//! ```sh
//! cargo build --release --example mcp_floor
//! cargo bench --bench startup -- 60 -- "floor=target/release/examples/mcp_floor tools-result.json"
//! ```

use std::io::{BufRead, Write};

fn main() {
    let tools = std::env::args()
        .nth(1)
        .map(|p| std::fs::read_to_string(p).expect("the tools/list result file"))
        .unwrap_or_else(|| r#"{"tools":[]}"#.to_string());
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Some(id) = id(&line) else { continue };
        let result = if line.contains(r#""method":"initialize""#) {
            r#"{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"floor","version":"0"}}"#
        } else if line.contains(r#""method":"tools/list""#) {
            tools.trim()
        } else {
            continue;
        };
        let _ = writeln!(out, r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#);
        let _ = out.flush();
    }
}

/// The request's `"id"` as written (a number here).
fn id(line: &str) -> Option<&str> {
    let rest = &line[line.find(r#""id":"#)? + 5..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Some(rest[..end].trim())
}

//! Thread stores: one table of behavioural cases run against all three stores (memory, embedded,
//! Redis on a private `redis-server` and on a private Redis Cluster), then the faults particular
//! to each: Redis killed and restarted, Redis down at start, corrupt values, two processes
//! sharing the embedded store.
//!
//! One file a subject: `suite` (the table of cases, all stores), `faults` (each store's own),
//! `history` (a thread's history through the real collector), `e2e` (the real binary, two
//! servers on one store). The turns they store are made here.

use std::time::Duration;

use gemini_mcp_server::store::{FileRef, Owner, Turn, Usage};

mod e2e;
mod faults;
mod history;
mod suite;

const HOUR: Duration = Duration::from_secs(3600);

fn turn(n: usize) -> Turn {
    Turn {
        tool: ["chat", "codereview", "analyze"][n % 3].into(),
        request: format!("request {n}: what about ünïcödé — and \"quotes\"?\n"),
        files: (0..n % 3)
            .map(|i| FileRef {
                path: format!("/project/src/f{i}.rs"),
                hash: format!("{:064x}", n * 10 + i),
                tokens: 100 + i as u64,
            })
            .collect(),
        response: format!("answer {n}"),
        model: "gemini-2.5-pro".into(),
        usage: Usage {
            input: 1000 + n as u64,
            output: 50,
            thinking: 7,
            cached: 3,
            ..Usage::default()
        },
        at_ms: 1_700_000_000_000 + n as u64,
        request_tokens: 12,
        response_tokens: 3,
        frames: Vec::new(),
        context_cache: None,
        extra_usd: 0.0,
        interaction: None,
    }
}

fn local() -> Owner {
    Owner::local()
}

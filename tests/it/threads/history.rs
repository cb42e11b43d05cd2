//! A thread's history through the real collector: earlier turns re-rendered byte for byte, and
//! stored token counts reused for unchanged files.

use std::path::PathBuf;

use gemini_mcp_server::config::Config;
use gemini_mcp_server::store::{FileRef, Owner, ThreadId, Turn, Usage};

/// Turns as the pipeline stores them, for files read through the real collector.
fn sent_turn(
    collector: &gemini_mcp_server::collector::Collector,
    paths: &[&str],
    request: &str,
    already: &std::collections::HashMap<PathBuf, String>,
) -> (Turn, String) {
    use gemini_mcp_server::collector::CollectRequest;
    use gemini_mcp_server::pipeline::prompt;
    let c = collector
        .collect(&CollectRequest {
            paths: paths.iter().map(|p| p.to_string()).collect(),
            budget: 1_000_000,
            already_sent: already.clone(),
            ignore: None,
        })
        .unwrap();
    let tail = prompt::turn_tail(None, &c.skipped, request);
    let text = prompt::user_turn(&c.files, &tail);
    let turn = Turn {
        tool: "analyze".into(),
        request: tail,
        files: c
            .files
            .iter()
            .map(|f| FileRef {
                path: f.path.display().to_string(),
                hash: f.hash.clone(),
                tokens: f.tokens,
            })
            .collect(),
        response: format!("answer to {request}"),
        model: "m".into(),
        usage: Usage::default(),
        at_ms: 0,
        request_tokens: 0,
        response_tokens: 0,
        frames: Vec::new(),
        context_cache: None,
        extra_usd: 0.0,
        interaction: None,
    };
    (turn, text)
}

#[test]
fn thread_history_through_the_collector_rerenders_turns_byte_for_byte() {
    use gemini_mcp_server::collector::Collector;
    use gemini_mcp_server::pipeline::earlier_turns;
    use gemini_mcp_server::store::Thread;
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/a.rs"), "fn a() -> u32 {\n    1\n}\n").unwrap();
    std::fs::write(root.join("src/b.rs"), "fn b() -> u32 {\n    2\n}\n").unwrap();
    let collector = Collector::new(&Config::for_tests(&root).collector()).unwrap();
    let mut thread = Thread {
        id: ThreadId::new(),
        project: root.display().to_string(),
        owner: Owner::local(),
        turns: Vec::new(),
    };

    // Call one sends a (given relative); call two asks for a (absolute) and b.
    let (t1, text1) = sent_turn(&collector, &["src/a.rs"], "one", &Default::default());
    thread.turns.push(t1);
    let h = earlier_turns::rebuild(&thread, &collector, 100_000);
    assert_eq!(earlier_turns::message_text(&h.messages[0]), text1);
    let a = root.join("src/a.rs").display().to_string();
    let (t2, _) = sent_turn(&collector, &[a.as_str(), "src/b.rs"], "two", &h.sent);
    assert_eq!(t2.files.len(), 1, "a is already in the thread: only b goes");
    thread.turns.push(t2);

    // a changes: its first turn gets a note, and it must go with the next call.
    std::fs::write(root.join("src/a.rs"), "fn a() -> u32 {\n    41 + 1\n}\n").unwrap();
    let h = earlier_turns::rebuild(&thread, &collector, 100_000);
    assert_eq!(h.resend, vec![a.clone()]);
    let first = earlier_turns::message_text(&h.messages[0]);
    assert!(
        first.contains("src/a.rs: sent here, but it has changed since"),
        "{first}"
    );
    assert!(
        !first.contains("    1\n") && !first.contains("41 + 1"),
        "{first}"
    );
    let (t3, text3) = sent_turn(&collector, &[a.as_str()], "three", &h.sent);
    assert!(text3.contains("41 + 1"), "{text3}");
    thread.turns.push(t3);
    let h = earlier_turns::rebuild(&thread, &collector, 100_000);
    assert!(h.resend.is_empty());
    assert_eq!(earlier_turns::message_text(&h.messages[4]), text3);
    let all: String = h.messages.iter().map(earlier_turns::message_text).collect();
    assert_eq!(all.matches("41 + 1").count(), 1, "{all}");
}

#[test]
fn thread_history_reuses_stored_token_counts_for_unchanged_files() {
    use gemini_mcp_server::collector::{CollectRequest, Collector};
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(root.join("a.rs"), "fn a() -> u32 {\n    1\n}\n".repeat(20)).unwrap();
    let collector = Collector::new(&Config::for_tests(&root).collector()).unwrap();
    let req = CollectRequest {
        paths: vec!["a.rs".into()],
        budget: 100_000,
        already_sent: Default::default(),
        ignore: None,
    };
    let counted = collector.collect(&req).unwrap().files.remove(0);
    assert!(counted.tokens > 7);
    let path = counted.path.clone();
    let with = |hash: &str| {
        let known = [(path.clone(), (hash.to_string(), 7))]
            .into_iter()
            .collect();
        collector
            .collect_counted(&req, &known)
            .unwrap()
            .files
            .remove(0)
    };
    let reused = with(&counted.hash);
    assert_eq!(
        reused.tokens, 7,
        "the stored count is used for the same content"
    );
    assert_eq!(reused.text, counted.text);
    assert_eq!(
        with("0000").tokens,
        counted.tokens,
        "other content is counted"
    );
}

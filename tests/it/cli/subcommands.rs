//! The tools as subcommands: their answers and continuation ids, a conversation carried on in
//! another process, `investigate`'s steps, the threads' commands, and the service tier asked for
//! and reported.

use serde_json::{Value, json};

use super::{fake, gemini_mcp, project, review, run, vars, with};
use crate::support::fake_gemini::Script;

#[test]
fn the_answer_tools_run_as_subcommands_and_print_their_continuation_id() {
    let p = project();
    let fake = fake();
    let v = vars(&fake);
    let env = with(&v);
    for args in [
        vec!["chat", "Is this a good idea?"],
        vec![
            "debug",
            "It returns the wrong sum",
            "--error-context",
            "assert 2 == 0",
        ],
        vec![
            "thinkdeep",
            "I think addition is commutative.",
            "--focus-area",
            "math",
        ],
    ] {
        let r = run(gemini_mcp(&p.root, &env).args(&args));
        assert_eq!(r.code, 0, "{args:?}: {}{}", r.stdout, r.stderr);
        assert!(r.stdout.contains("FAKE-REPLY"), "{args:?}: {}", r.stdout);
        assert!(
            r.stdout.contains("continuation_id: "),
            "{args:?}: {}",
            r.stdout
        );
    }
    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 3);
    assert!(sent[0].last_user_text().contains("Is this a good idea?"));
    assert!(sent[1].last_user_text().contains("assert 2 == 0"));
    assert!(sent[2].last_user_text().contains("math"));

    // stdin for "-".
    let mut cmd = gemini_mcp(&p.root, &env);
    cmd.args(["chat", "-", "--format", "json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"A question from a pipe")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(uuid::Uuid::parse_str(out["continuation_id"].as_str().unwrap()).is_ok());
    assert!(
        fake.generate_requests()[3]
            .last_user_text()
            .contains("A question from a pipe")
    );

    // A malformed --continuation-id is an argument error naming the flag.
    let r =
        run(gemini_mcp(&p.root, &env).args(["chat", "hi", "--continuation-id", "not-a-thread"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("'--continuation-id'"), "{}", r.stderr);
}

#[test]
fn codereview_and_analyze_run_as_subcommands_on_files() {
    let p = project();
    let fake = fake();
    let v = vars(&fake);
    let env = with(&v);
    // At line 1: its quote is the same before and after the change the other tests make.
    fake.push(review(&[("critical", "src/lib.rs", Some(1))], "ready"));
    let r = run(gemini_mcp(&p.root, &env).args([
        "codereview",
        "src/lib.rs",
        "--context",
        "Adds numbers",
        "--fail-on",
        "critical",
    ]));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("[CRITICAL]"), "{}", r.stdout);
    assert!(r.stdout.contains("continuation_id: "), "{}", r.stdout);
    let r =
        run(gemini_mcp(&p.root, &env).args(["analyze", "src", "--question", "What does it do?"]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("FAKE-REPLY"), "{}", r.stdout);
    let sent = fake.generate_requests();
    assert!(sent[0].json_mode());
    assert!(
        sent[0].last_user_text().contains("a + b"),
        "the file was sent"
    );
    assert!(
        sent[1].last_user_text().contains("a + b"),
        "the directory was expanded"
    );
}

#[test]
fn a_terminal_conversation_continues_in_another_process() {
    // Needs a thread store shared between processes: the embedded one.
    let p = project();
    let fake = fake();
    let v = vars(&fake);
    let mut env: Vec<(&str, &str)> = with(&v).to_vec();
    env.push(("GEMINI_MCP_STORE", "embedded"));
    let r = run(gemini_mcp(&p.root, &env).args(["chat", "First question", "--format", "json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out: Value = serde_json::from_str(&r.stdout).unwrap();
    let id = out["continuation_id"].as_str().unwrap().to_string();
    let r =
        run(gemini_mcp(&p.root, &env).args(["chat", "Second question", "--continuation-id", &id]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(&format!("continuation_id: {id}")),
        "{}",
        r.stdout
    );
    let sent = fake.generate_requests();
    let messages = sent[1].messages();
    assert!(messages[0].1.contains("First question"), "{messages:?}");
    assert!(sent[1].last_user_text().contains("Second question"));
}

#[test]
fn investigate_from_the_terminal_prints_the_answer_and_the_steps_in_json() {
    let p = project();
    let fake = fake();
    let v = vars(&fake);
    fake.push(Script::calls(
        &[
            ("git_log", json!({"path": "src/lib.rs"})),
            ("read_file", json!({"path": "src/lib.rs"})),
        ],
        "U0lH",
        [100, 5, 5],
    ))
    .push(Script::text("`add` adds: src/lib.rs:2."));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["investigate", "What does add do?"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.starts_with("`add` adds: src/lib.rs:2."),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("Investigation: 2 steps (answered); read src/lib.rs"),
        "{}",
        r.stdout
    );
    // Not a terminal: no progress on stderr, nothing on stdout but the reply.
    assert!(!r.stderr.contains("git log"), "{}", r.stderr);
    let sent = fake.generate_requests();
    let log = sent[1].body["contents"][2]["parts"][0]["functionResponse"]["response"]["output"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(log.contains("Test: first"), "{log}");

    fake.push(Script::calls(
        &[("list_files", json!({}))],
        "U0lH",
        [100, 5, 5],
    ))
    .push(Script::text("done"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args([
        "investigate",
        "List it.",
        "--max-steps",
        "1",
        "--format",
        "json",
    ]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(out["stop_reason"], "max_steps");
    assert_eq!(out["steps"][0]["tool"], "list_files");

    let r = run(gemini_mcp(&p.root, &with(&v)).args(["investigate", "x", "--max-steps", "0"]));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--max-steps"), "{}", r.stderr);
}

#[test]
fn threads_are_listed_shown_exported_and_deleted_from_the_terminal() {
    let p = project();
    let fake = fake();
    let v = vars(&fake);
    let mut vars: Vec<(&str, &str)> = with(&v).to_vec();
    vars.push(("GEMINI_MCP_STORE", "embedded"));
    fake.push(Script::text("ANSWER-ONE"));
    let r = run(gemini_mcp(&p.root, &vars).args(["chat", "Is a trie overkill for 200 routes?"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let threads = |args: &[&str]| run(gemini_mcp(&p.root, &vars).arg("threads").args(args));

    let list = threads(&["list"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    let line = list.stdout.lines().next().unwrap().to_string();
    let id = line.split_whitespace().next().unwrap().to_string();
    assert!(line.contains("1 turn") && line.contains("chat"), "{line}");
    assert!(
        line.ends_with("Is a trie overkill for 200 routes?"),
        "{line}"
    );
    let json: Value = serde_json::from_str(&threads(&["list", "--json"]).stdout).unwrap();
    assert_eq!(json["threads"][0]["id"], id.as_str());

    let show = threads(&["show", "latest"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(
        show.stdout.starts_with(&format!("# Thread {id}")),
        "{}",
        show.stdout
    );
    assert!(show.stdout.contains("ANSWER-ONE"), "{}", show.stdout);
    let export: Value =
        serde_json::from_str(&threads(&["export", &id, "--format", "json"]).stdout).unwrap();
    assert_eq!(export["turns"][0]["response"], "ANSWER-ONE");
    let bad = threads(&["export", &id, "--format", "pdf"]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("markdown or json"), "{}", bad.stderr);
    let bad = threads(&["show", "not-an-id"]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("not a thread id"), "{}", bad.stderr);

    let del = threads(&["delete", &id]);
    assert_eq!(del.code, 0, "{}", del.stderr);
    assert_eq!(del.stdout, format!("deleted {id}\n"));
    assert_eq!(threads(&["list"]).stdout, "No threads in this project.\n");
    let gone = threads(&["show", &id]);
    assert_eq!(gone.code, 2);
    assert!(
        gone.stderr.contains("unknown or has expired"),
        "{}",
        gone.stderr
    );
}

#[test]
fn the_tier_is_asked_for_and_the_served_tier_and_cost_are_reported() {
    let p = project();
    let fake = fake();
    let v = vars(&fake);
    // Google says which tier served a call in the `x-gemini-service-tier` answer header, not in
    // the body: here a flex call served at standard.
    fake.push(
        Script::sse(
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"FLEX-ANSWER\"}],\"role\":\"model\"},\"finishReason\":\"STOP\"}],\
\"usageMetadata\":{\"promptTokenCount\":1000000,\"candidatesTokenCount\":100000,\"totalTokenCount\":1100000},\
\"modelVersion\":\"gemini-3.8-flash\"}\r\n\r\n",
        )
        .served_tier("standard"),
    );
    let r = run(gemini_mcp(&p.root, &with(&v)).args([
        "--tier",
        "flex",
        "chat",
        "Quick question.",
        "--model",
        "gemini-3.8-flash",
        "--format",
        "json",
    ]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let sent = fake.generate_requests();
    assert_eq!(sent[0].body["serviceTier"], "flex");
    let out: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(out["usage"]["tier"], "standard", "{out}");
    // 1M in and 100k out of 3.8 Flash at its launch price: $0.75 + $0.375, at standard (the
    // tier that served it), not at flex's half.
    let cost = out["usage"]["cost_usd"].as_f64().unwrap();
    assert!((cost - 1.125).abs() < 1e-9, "{cost}");
    assert!(
        out["text"]
            .as_str()
            .unwrap()
            .contains("served by the standard tier"),
        "{out}"
    );
    // Served at the tier asked for, flex: half the price; priority served at standard (over its
    // limit): the standard price.
    for (asked, served, want) in [
        ("flex", None, 0.5625),
        ("priority", Some("standard"), 1.125),
    ] {
        let mut answer = Script::text("fine").usage(1_000_000, 100_000, 0, 0);
        if let Some(s) = served {
            answer = answer.served_tier(s);
        }
        fake.push(answer);
        let r = run(gemini_mcp(&p.root, &with(&v)).args([
            "--tier",
            asked,
            "chat",
            "Again.",
            "--model",
            "gemini-3.8-flash",
            "--format",
            "json",
        ]));
        assert_eq!(r.code, 0, "{}", r.stderr);
        let out: Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(out["usage"]["tier"], served.unwrap_or(asked), "{out}");
        let cost = out["usage"]["cost_usd"].as_f64().unwrap();
        assert!((cost - want).abs() < 1e-9, "{asked}: {cost}");
    }
    // The thread's running total: each turn at the tier that served it (the first at flex).
    let mut store: Vec<(&str, &str)> = with(&v).to_vec();
    store.push(("GEMINI_MCP_STORE", "embedded"));
    fake.push(Script::text("one").usage(1_000_000, 100_000, 0, 0));
    let first = run(gemini_mcp(&p.root, &store).args([
        "--tier",
        "flex",
        "chat",
        "First.",
        "--model",
        "gemini-3.8-flash",
        "--format",
        "json",
    ]));
    let first: Value = serde_json::from_str(&first.stdout).unwrap();
    let id = first["continuation_id"].as_str().unwrap().to_string();
    let one = first["usage"]["cost_usd"].as_f64().unwrap();
    fake.push(Script::text("two").usage(1_000_000, 100_000, 0, 0));
    let second = run(gemini_mcp(&p.root, &store).args([
        "chat",
        "Second.",
        "--model",
        "gemini-3.8-flash",
        "--format",
        "json",
        "--continuation-id",
        &id,
    ]));
    let second: Value = serde_json::from_str(&second.stdout).unwrap();
    let two = second["usage"]["cost_usd"].as_f64().unwrap();
    assert!(
        (one - 0.5625).abs() < 1e-9 && (two - 1.125).abs() < 1e-9,
        "{one}, {two}"
    );
    let total = second["usage"]["thread_cost_usd"].as_f64().unwrap();
    assert!((total - (one + two)).abs() < 1e-9, "{one} + {two}: {total}");
    assert!(
        second["text"].as_str().unwrap().contains("(this thread $"),
        "{second}"
    );

    let bad = run(gemini_mcp(&p.root, &with(&v)).args(["--tier", "cheap", "chat", "x"]));
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("--tier") && bad.stderr.contains("flex"),
        "{}",
        bad.stderr
    );
}

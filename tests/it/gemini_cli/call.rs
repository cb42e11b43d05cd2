//! One call as the stand-in sees it: the argv, stdin, system prompt and answer; the conversation
//! whole with its turn markers; JSON mode and web search; prompt text never executed; large prompts;
//! images refused before anything runs; progress while waiting; no record left under its home.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gemini_mcp_server::gemini::headless::render_prompt;
use gemini_mcp_server::gemini::{CallContext, Message, Part, Progress};
use tokio_util::sync::CancellationToken;

use super::{SUCCESS, StandIn, ctx, model, request};

#[tokio::test]
async fn gemini_cli_success_sends_argv_stdin_system_prompt_and_reads_the_answer() {
    let s = StandIn::new(SUCCESS);
    let resp = s
        .backend()
        .generate(&request("Review this."), &ctx())
        .await
        .unwrap();

    assert_eq!(resp.text, "FAKE-REPLY: the code is fine");
    // The model that answered is the `main` one, keyed by modelVersion, not the `-m` value.
    assert_eq!(
        resp.model_version.as_deref(),
        Some("gemini-3.1-pro-preview-11-2026")
    );
    // Usage sums every model of the call: prompt (cached included), candidates, thoughts, cached.
    assert_eq!(resp.usage.input, 33);
    assert_eq!(resp.usage.output, 21);
    assert_eq!(resp.usage.thinking, 3);
    assert_eq!(resp.usage.cached, 2);

    let argv = s.argv(1);
    assert_eq!(
        argv[..4],
        ["-o", "json", "-m", "gemini-3.1-pro-preview"],
        "{argv:?}"
    );
    // The session is named by us (its record is removed after the call).
    assert_eq!(argv[4], "--session-id");
    assert!(uuid::Uuid::parse_str(&argv[5]).is_ok(), "{argv:?}");
    assert_eq!(argv[6], "--policy");
    assert_eq!(
        argv[8..],
        [
            "-e",
            "none",
            "--allowed-mcp-server-names",
            "gemini-mcp-server-allows-none"
        ],
        "{argv:?}"
    );
    // The prompt went to stdin, not into argv.
    assert_eq!(s.rec(1, "stdin"), "Review this.");
    assert!(!argv.iter().any(|a| a.contains("Review this")));
    // The system prompt came through a private GEMINI_SYSTEM_MD file.
    assert_eq!(s.rec(1, "system.md"), "You are a careful reviewer.");
    assert_eq!(s.rec(1, "system_md_mode").trim(), "600");
    assert_eq!(s.rec(1, "tmp_dir_mode").trim(), "700");
    // The policy denies every tool.
    let policy = s.rec(1, "policy.toml");
    assert!(
        policy.contains("toolName = \"*\"") && policy.contains("decision = \"deny\""),
        "{policy}"
    );
    assert!(!policy.contains("google_web_search"), "{policy}");
    // It ran in a private directory of ours under the state directory, one for every call (not
    // in the project: the CLI reads its context files there), whose workspace settings are ours;
    // its TMPDIR is the call's own, without relaunching.
    let system_md = PathBuf::from(s.rec(1, "system_md_path"));
    let cwd = PathBuf::from(s.rec(1, "cwd").trim());
    assert!(cwd.ends_with("gemini-cli/plain"), "{}", cwd.display());
    assert_ne!(cwd, s.root());
    assert!(!cwd.starts_with(s.root()), "{}", cwd.display());
    let settings = std::fs::read_to_string(cwd.join(".gemini/settings.json")).unwrap();
    assert!(
        settings.contains("\"includeDirectoryTree\":false")
            && settings.contains("\"memoryBoundaryMarkers\":[]"),
        "{settings}"
    );
    assert_eq!(
        PathBuf::from(s.rec(1, "tmpdir")),
        system_md.parent().unwrap()
    );
    assert_eq!(s.rec(1, "no_relaunch"), "true");
    // It ran as the leader of its own process group.
    assert_eq!(s.rec(1, "pid").trim(), s.rec(1, "pgid").trim());
    // The private directory is gone.
    assert!(!system_md.exists());
    assert!(!system_md.parent().unwrap().exists());
}

/// Every file under `dir` whose bytes hold `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if std::fs::read(&path)
                .is_ok_and(|b| String::from_utf8_lossy(&b).contains(needle))
            {
                found.push(path);
            }
        }
    }
    found
}

/// The CLI records every session under its home, the prompt included (our whole request, the
/// files we sent): once the call is done, whether it answered or failed, none of it is left.
#[tokio::test]
async fn gemini_cli_leaves_no_record_of_the_call_under_its_home() {
    let failing = "cat > \"$d/stdin\"\nrecord_session\necho 'Something broke badly.' >&2\nexit 1\n";
    for (scenario, answers) in [(SUCCESS, true), (failing, false)] {
        let s = StandIn::new(scenario);
        let task = "RECORD-MARKER-5531: review src/lib.rs";
        let outcome = s.backend().generate(&request(task), &ctx()).await;
        assert_eq!(outcome.is_ok(), answers, "{outcome:?}");
        // The stand-in recorded the session, as the real CLI does, under the CLI's home…
        let record = PathBuf::from(s.rec(1, "record"));
        assert!(record.starts_with(s.home()), "{}", record.display());
        let session = &s.argv(1)[5];
        assert!(
            record
                .to_string_lossy()
                .ends_with(&format!("-{}.jsonl", &session[..8])),
            "{}",
            record.display()
        );
        // …and nothing of it is left.
        assert!(!record.exists(), "{} was left", record.display());
        assert_eq!(
            files_holding(&s.home(), "RECORD-MARKER-5531"),
            Vec::<PathBuf>::new()
        );
    }
}

#[tokio::test]
async fn gemini_cli_conversation_is_sent_whole_with_turn_markers() {
    let s = StandIn::new(SUCCESS);
    let mut req = request("And the error handling?");
    req.contents = vec![
        Message::user("Review src/lib.rs."),
        Message::model("It looks fine."),
        Message::user("And the error handling?"),
    ];
    s.backend().generate(&req, &ctx()).await.unwrap();
    let stdin = s.rec(1, "stdin");
    assert_eq!(stdin, render_prompt(&req.contents));
    let first = stdin.find("Review src/lib.rs.").unwrap();
    let answer = stdin.find("It looks fine.").unwrap();
    let new = stdin.find("=== the new request · user ===").unwrap();
    assert!(first < answer && answer < new, "{stdin}");
    assert!(
        stdin.contains("=== turn 1 · user ===\nReview src/lib.rs."),
        "{stdin}"
    );
    assert!(
        stdin.contains("=== turn 1 · you (Gemini) ===\nIt looks fine."),
        "{stdin}"
    );
    assert!(
        stdin.ends_with("=== the new request · user ===\nAnd the error handling?"),
        "{stdin}"
    );
}

#[tokio::test]
async fn gemini_cli_json_mode_states_the_schema_and_web_search_allows_only_search() {
    let s = StandIn::new(SUCCESS);
    let mut req = request("Review.");
    req.response_schema = Some(serde_json::json!({
        "type": "object",
        "properties": {"findings_marker_field": {"type": "array"}}
    }));
    req.web_search = true;
    s.backend().generate(&req, &ctx()).await.unwrap();
    let system = s.rec(1, "system.md");
    assert!(
        system.starts_with("You are a careful reviewer."),
        "{system}"
    );
    assert!(system.contains("findings_marker_field"), "{system}");
    assert!(system.contains("exactly one JSON object"), "{system}");
    let policy = s.rec(1, "policy.toml");
    assert!(
        policy.contains("toolName = \"google_web_search\"\ndecision = \"allow\""),
        "{policy}"
    );
}

#[tokio::test]
async fn gemini_cli_prompt_text_is_never_executed() {
    let s = StandIn::new(SUCCESS);
    let root = s.root();
    let evil =
        "$(touch pwned1) `touch pwned2` ; touch pwned3 && touch pwned4 | touch pwned5 'x\" $HOME";
    let mut req = request(evil);
    req.system_instruction = format!("system {evil}");
    let mut m = model("pro");
    m.id = "gemini-x;touch pwned6 $(touch pwned7)".into();
    req.model = m;
    s.backend().generate(&req, &ctx()).await.unwrap();

    assert_eq!(s.rec(1, "stdin"), evil);
    assert_eq!(s.rec(1, "system.md"), format!("system {evil}"));
    assert_eq!(s.argv(1)[3], "gemini-x;touch pwned6 $(touch pwned7)");
    for dir in [
        root.as_path(),
        s.dir.path(),
        std::env::current_dir().unwrap().as_path(),
    ] {
        for i in 1..=7 {
            let p = dir.join(format!("pwned{i}"));
            assert!(!p.exists(), "{} was created", p.display());
        }
    }
}

#[tokio::test]
async fn gemini_cli_large_prompts_pass_and_unread_stdin_does_not_hang() {
    // 3 MB through stdin, read back byte for byte.
    let s = StandIn::new(SUCCESS);
    let big = "0123456789abcdef\n".repeat(3 << 16);
    s.backend().generate(&request(&big), &ctx()).await.unwrap();
    assert_eq!(s.rec(1, "stdin").len(), big.len());
    assert_eq!(s.rec(1, "stdin"), big);

    // A CLI that answers without reading its input must not block the call.
    let s = StandIn::new("echo '{\"response\": \"early\"}'\n");
    let resp = tokio::time::timeout(
        Duration::from_secs(10),
        s.backend().generate(&request(&big), &ctx()),
    )
    .await
    .expect("the call must not hang")
    .unwrap();
    assert_eq!(resp.text, "early");
}

#[tokio::test]
async fn gemini_cli_progress_is_reported_while_waiting() {
    let s = StandIn::new(&format!("sleep 0.8\n{SUCCESS}"));
    let backend = s.backend().with_heartbeat(Duration::from_millis(150));
    let reports = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = reports.clone();
    let call = CallContext {
        cancel: CancellationToken::new(),
        progress: Some(Arc::new(move |p: Progress| {
            sink.lock().unwrap().push(p.message)
        })),
        ..CallContext::default()
    };
    backend.generate(&request("hi"), &call).await.unwrap();
    let reports = reports.lock().unwrap().clone();
    let working = reports
        .iter()
        .filter(|r| r.starts_with("Gemini CLI is working ("))
        .count();
    assert!(working >= 3, "{reports:?}");
}

#[tokio::test]
async fn gemini_cli_images_are_refused_before_running_anything() {
    let s = StandIn::new(SUCCESS);
    let mut req = request("What is in this picture?");
    req.contents[0].parts.push(Part::Image {
        mime: "image/png".into(),
        data: Arc::new(vec![0x89, b'P', b'N', b'G']),
    });
    let err = s.backend().generate(&req, &ctx()).await.unwrap_err();
    assert!(err.to_string().contains("images"), "{err}");
    assert!(err.to_string().contains("GEMINI_BACKEND=api"), "{err}");
    assert_eq!(s.calls(), 0);
}

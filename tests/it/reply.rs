//! The reply as clients see it: Claude Code and Codex hand their model only `structuredContent`,
//! the Gemini CLI and opencode only the text, so each must hold the whole answer on its own; and
//! the whole result (text and structured content together) stays under the size cap.

use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use crate::support::fake_gemini::{FakeGemini, Script};
use crate::support::mcp::{self, KEY, call, text};

struct Env {
    dir: tempfile::TempDir,
    fake: FakeGemini,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        for name in ["lib.rs", "parse.rs", "net.rs"] {
            std::fs::write(
                dir.path().join("src").join(name),
                "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
            )
            .unwrap();
        }
        Env {
            dir,
            fake: FakeGemini::start(),
        }
    }

    async fn client(&self, extra: &[(&str, &str)]) -> mcp::Client {
        let url = self.fake.base_url();
        let mut vars = vec![("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", url.as_str())];
        vars.extend_from_slice(extra);
        mcp::start(self.dir.path(), &vars).await
    }
}

fn structured(r: &CallToolResult) -> Value {
    r.structured_content.clone().expect("structured content")
}

/// Characters of everything the result sends: the text and the structured content as JSON.
fn total_chars(r: &CallToolResult) -> usize {
    let s = r
        .structured_content
        .as_ref()
        .map_or(0, |s| serde_json::to_string(s).unwrap().chars().count());
    text(r).chars().count() + s
}

/// A typical free-text answer: a few sections of Markdown, about 2,800 characters.
fn markdown_answer() -> String {
    let mut a = String::from("## Assessment\n\nA trie is overkill for 200 static routes.\n");
    for i in 1..=18 {
        a.push_str(&format!(
            "\n### Point {i}\n\nA sorted `Vec<(&str, Handler)>` with binary search costs {i} comparisons \
             fewer than you think; measure with `criterion` before changing it.\n"
        ));
    }
    a
}

fn finding(i: usize, severity: &str) -> Value {
    json!({
        "severity": severity,
        "file": format!("src/parse.rs"),
        "line": i + 1,
        "title": format!("Issue {i}: the length is not checked before indexing"),
        "detail": format!("`buf[{i}]` panics on short input; any caller passing user data can crash the server."),
        "fix": "Check `buf.len()` first and return an error."
    })
}

/// A typical review: a summary and eight findings.
fn typical_review() -> Value {
    let sev = [
        "critical", "high", "high", "medium", "medium", "medium", "low", "low",
    ];
    json!({
        "summary": "The parser trusts its input lengths. Two issues can crash the server.",
        "findings": sev.iter().enumerate().map(|(i, s)| finding(i, s)).collect::<Vec<_>>()
    })
}

fn report(what: &str, r: &CallToolResult) {
    let t = text(r).len();
    let s = serde_json::to_string(&structured(r)).unwrap().len();
    eprintln!(
        "reply size: {what}: text {t} B + structured {s} B = {} B",
        t + s
    );
}

#[tokio::test]
async fn each_part_holds_the_whole_answer_and_the_continuation_id() {
    let env = Env::new();
    let client = env.client(&[]).await;
    let answer = markdown_answer();
    env.fake.push(Script::text(answer.clone()));
    let chat = call(&client, "chat", json!({"prompt": "Trie or not?"}))
        .await
        .unwrap();
    report("chat, 2.8 KB answer", &chat);
    let id = structured(&chat)["continuation_id"]
        .as_str()
        .unwrap()
        .to_string();
    env.fake.push(Script::json(typical_review()));
    let r = call(
        &client,
        "codereview",
        json!({"files": ["src"], "context": "the parser", "continuation_id": id}),
    )
    .await
    .unwrap();
    report("codereview, 8 findings, 3 files", &r);

    let s = structured(&chat);
    assert!(text(&chat).starts_with(&answer), "{}", text(&chat));
    assert!(text(&chat).contains(&id));
    assert_eq!(s["answer"], answer.as_str(), "{s}");
    assert_eq!(s["status"], "success");
    let s = structured(&r);
    let t = text(&r);
    assert_eq!(s["continuation_id"], id.as_str());
    assert!(t.contains(&id), "{t}");
    assert!(
        s["summary"]
            .as_str()
            .unwrap()
            .contains("trusts its input lengths"),
        "{s}"
    );
    assert!(t.contains("trusts its input lengths"), "{t}");
    assert_eq!(s["findings"].as_array().unwrap().len(), 8);
    assert!(t.contains("Issue 7: the length"), "{t}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_huge_review_keeps_the_most_severe_findings_within_the_cap() {
    let env = Env::new();
    let client = env.client(&[]).await;
    let severities = ["low", "medium", "high", "critical"];
    let findings: Vec<Value> = (0..1200).map(|i| finding(i, severities[i % 4])).collect();
    env.fake.push(Script::json(
        json!({"summary": "Many issues.", "findings": findings}),
    ));
    let r = call(
        &client,
        "codereview",
        json!({"files": ["src"], "context": "the parser"}),
    )
    .await
    .unwrap();
    report("codereview, 1,200 findings", &r);
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let total = total_chars(&r);
    assert!(total <= 48_000, "the result is {total} characters");
    let s = structured(&r);
    let kept = s["findings"].as_array().unwrap();
    assert!(!kept.is_empty());
    // Most severe first, and every critical finding kept before any lower one.
    let n_critical = kept.iter().filter(|f| f["severity"] == "critical").count();
    assert!(
        n_critical == 300 || kept.iter().all(|f| f["severity"] == "critical"),
        "{n_critical} critical kept of {}",
        kept.len()
    );
    let left_out = 1200 - kept.len();
    assert_eq!(
        s["findings_left_out"], left_out,
        "{}",
        s["findings_left_out"]
    );
    let t = text(&r);
    let says = format!("{left_out} finding(s) left out");
    assert!(t.contains(&says) && t.contains("severity_filter"), "{t}");
    let notices = s["notices"].to_string();
    assert!(
        notices.contains(&says) && notices.contains("severity_filter"),
        "{notices}"
    );
    assert!(t.contains(s["continuation_id"].as_str().unwrap()));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_long_answer_is_cut_in_both_parts_and_says_so() {
    let env = Env::new();
    let client = env.client(&[("MAX_REPLY_CHARS", "20000")]).await;
    let long: String = (0..2000)
        .map(|i| format!("Line {i} of a \"very\" long answer.\n"))
        .collect();
    env.fake.push(Script::text(long.clone()));
    let r = call(&client, "chat", json!({"prompt": "Tell me everything"}))
        .await
        .unwrap();
    let total = total_chars(&r);
    assert!(total <= 20_000, "the result is {total} characters");
    let s = structured(&r);
    let answer = s["answer"].as_str().unwrap();
    assert!(
        answer.len() > 5_000 && long.starts_with(answer.trim_end()),
        "{answer}"
    );
    let t = text(&r);
    assert!(t.starts_with(answer.trim_end()), "{t}");
    assert!(
        t.contains("Answer cut at") && t.contains("MAX_REPLY_CHARS"),
        "{t}"
    );
    assert!(s["notices"].to_string().contains("MAX_REPLY_CHARS"), "{s}");
    assert_eq!(s["cut"], "size_limit", "{s}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_answer_cut_by_gemini_says_why_in_both_parts() {
    let env = Env::new();
    let client = env.client(&[]).await;
    for (reason, why) in [
        ("MAX_TOKENS", "output limit"),
        ("SAFETY", "safety filter"),
        ("RECITATION", "recit"),
    ] {
        env.fake
            .push(Script::text("The first half of a good answer").finish(reason));
        let r = call(&client, "chat", json!({"prompt": "q"})).await.unwrap();
        assert_ne!(r.is_error, Some(true), "{}", text(&r));
        let s = structured(&r);
        let t = text(&r);
        assert_eq!(s["answer"], "The first half of a good answer");
        assert_eq!(s["cut"], reason.to_ascii_lowercase(), "{s}");
        let notices = s["notices"].to_string();
        for part in [&t, &notices] {
            assert!(
                part.contains(reason) && part.contains(why) && part.contains("incomplete"),
                "{reason}: {part}"
            );
        }
    }
    // A complete answer carries no such notice.
    env.fake.push(Script::text("All of it."));
    let r = call(&client, "chat", json!({"prompt": "q"})).await.unwrap();
    assert!(structured(&r).get("cut").is_none(), "{:?}", structured(&r));
    assert!(!text(&r).contains("incomplete"), "{}", text(&r));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn tools_declare_the_result_size_to_claude_code() {
    let env = Env::new();
    let client = env.client(&[]).await;
    let tools = client.list_all_tools().await.unwrap();
    for tool in &tools {
        let meta = tool.meta.as_ref().expect("_meta");
        assert_eq!(
            meta.0["anthropic/maxResultSizeChars"], 48_000,
            "{}",
            tool.name
        );
    }
    client.cancel().await.unwrap();
    let client = env.client(&[("MAX_REPLY_CHARS", "120000")]).await;
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(
        tools[0].meta.as_ref().unwrap().0["anthropic/maxResultSizeChars"],
        120_000
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn errors_are_readable_from_either_part() {
    let env = Env::new();
    let client = env.client(&[("GEMINI_MAX_ATTEMPTS", "1")]).await;
    env.fake.push(Script::finish_without_text("SAFETY"));
    let r = call(&client, "chat", json!({"prompt": "q"})).await.unwrap();
    assert_eq!(r.is_error, Some(true));
    let t = text(&r);
    assert!(
        t.starts_with("Error executing gemini:") && t.contains("SAFETY"),
        "{t}"
    );
    // A client that shows only structured content falls back to the text when there is none;
    // when there is, it carries the same message.
    if let Some(s) = &r.structured_content {
        assert!(s.to_string().contains("SAFETY"), "{s}");
    }
    client.cancel().await.unwrap();
}

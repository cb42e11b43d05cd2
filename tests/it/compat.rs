//! The compatibility profiles (`GEMINI_MCP_COMPAT`): absent by default; with `cli-wrapper`, the
//! Gemini CLI wrapper's tools by their names and schemas, its documented example calls replayed
//! against the fake Gemini API.

use serde_json::{Value, json};

use crate::support::Hermetic as _;
use crate::support::fake_gemini::{FakeGemini, Script};
use crate::support::mcp::{self, KEY};

const COMPAT_TOOLS: &[&str] = &[
    "chat-reply",
    "gemini",
    "list_models",
    "list_sessions",
    "reset_session",
];

fn project() -> tempfile::TempDir {
    crate::support::project::with(&[crate::support::project::MAIN_RS])
}

#[tokio::test]
async fn profiles_add_their_tools_only_when_configured() {
    let dir = project();
    let client = mcp::start(dir.path(), &[]).await;
    let tools = client.list_all_tools().await.unwrap();
    for t in &tools {
        assert!(
            !COMPAT_TOOLS.contains(&t.name.as_ref()),
            "{} without a profile",
            t.name
        );
    }
    let chat = tools.iter().find(|t| t.name == "chat").unwrap();
    assert!(!chat.input_schema.contains_key("systemPrompt"));
    assert!(
        !serde_json::to_string(&chat.input_schema)
            .unwrap()
            .contains("systemPrompt"),
        "chat's schema grew without a profile"
    );
    client.cancel().await.unwrap();

    let client = mcp::start(
        dir.path(),
        &[("GEMINI_MCP_COMPAT", "cli-wrapper,acp-bridge")],
    )
    .await;
    let tools = client.list_all_tools().await.unwrap();
    let mut pinned: Vec<Value> = tools
        .iter()
        .filter(|t| COMPAT_TOOLS.contains(&t.name.as_ref()) || t.name == "chat")
        .map(|t| {
            let mut v = serde_json::to_value(t).unwrap();
            if t.name == "chat" {
                // Ours, pinned by the tools/list snapshot; here only what the profile adds.
                let props = v["inputSchema"]["properties"].clone();
                v = json!({"name": "chat", "added": {
                    "systemPrompt": props["systemPrompt"], "cwd": props["cwd"]}});
            }
            v
        })
        .collect();
    pinned.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    insta::assert_json_snapshot!("compat_tools", pinned);
    client.cancel().await.unwrap();

    // A profile that does not exist: the server does not start, and says what to fix.
    let out = std::process::Command::new(mcp::binary())
        .hermetic_env()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir.path().join(".home"))
        .env("PROJECT_ROOT", dir.path())
        .env("GEMINI_MCP_STORE", "memory")
        .env("GEMINI_MCP_COMPAT", "cli-wrapper,nonsense")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("GEMINI_MCP_COMPAT") && stderr.contains("nonsense"),
        "{stderr}"
    );
}

/// The wrapper's documented calls (README of the seed, `cwd` moved into this project):
/// `chat`, then `chat-reply` with the session id, then `chat-reply` without one (the latest).
#[tokio::test]
async fn the_cli_wrappers_example_calls_work() {
    let dir = project();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let fake = FakeGemini::start();
    let url = fake.base_url();
    let vars = [
        ("GEMINI_API_KEY", KEY),
        ("GEMINI_BASE_URL", url.as_str()),
        ("GEMINI_MCP_COMPAT", "cli-wrapper"),
    ];
    let client = mcp::start(dir.path(), &vars).await;
    fake.push(Script::text(
        "I'm Gemini, a large language model created by Google.",
    ));
    let r = mcp::call(
        &client,
        "chat",
        json!({"prompt": "Hello, who are you?", "model": "gemini-3-flash",
               "systemPrompt": "You are a helpful coding assistant.", "cwd": root.display().to_string()}),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", mcp::text(&r));
    assert!(mcp::text(&r).starts_with("I'm Gemini, a large language model created by Google."));
    let session = r.meta.as_ref().unwrap().0["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let sent = fake.generate_requests();
    assert_eq!(sent[0].model.as_deref(), Some("gemini-3-flash"));
    assert!(
        sent[0]
            .system_text()
            .contains("You are a helpful coding assistant."),
        "{}",
        sent[0].system_text()
    );

    fake.push(Script::text("More about that."));
    let r = mcp::call(
        &client,
        "chat-reply",
        json!({"prompt": "Can you explain more about that?", "sessionId": session}),
    )
    .await
    .unwrap();
    assert_eq!(r.meta.as_ref().unwrap().0["sessionId"], session.as_str());
    let sent = fake.generate_requests();
    assert!(
        sent[1]
            .messages()
            .iter()
            .any(|(role, text)| role == "model" && text.contains("I'm Gemini")),
        "the reply did not continue the session: {:?}",
        sent[1].messages()
    );
    fake.push(Script::text("And the latest."));
    let r = mcp::call(&client, "chat-reply", json!({"prompt": "And then?"}))
        .await
        .unwrap();
    assert_eq!(
        r.meta.as_ref().unwrap().0["sessionId"],
        session.as_str(),
        "the latest session"
    );

    // A `cwd` outside the project is refused like any path.
    let err = mcp::call(&client, "chat-reply", json!({"prompt": "x", "cwd": "/etc"}))
        .await
        .unwrap_err();
    assert_eq!(err.code.0, -32001, "{err:?}");
    assert!(err.message.contains("/etc"), "{err:?}");
    client.cancel().await.unwrap();
}

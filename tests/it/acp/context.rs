//! The `cli` backend with the real Gemini CLI (pinned, from npm) behind the fake Gemini API, over
//! both transports, and the CLI's agent (`investigate` with `engine: "gemini-cli"`): the CLI's own context of the project (the workspace tree, the `GEMINI.md`
//! files of the project and its ancestors) never reaches Gemini; only what our collector sends
//! does. (The user's own `~/.gemini/GEMINI.md` is sent: no setting of the CLI stops it.)

use std::time::Duration;

use serde_json::json;

use crate::support::mcp::{self, KEY};

const PROJECT_CANARY: &str = "CANARY-PROJECT-CONTEXT-7731";
const ANCESTOR_CANARY: &str = "CANARY-ANCESTOR-CONTEXT-4410";
/// In the user's home: the CLI sends it (its system instruction), and no setting stops that.
const GLOBAL_CANARY: &str = "CANARY-GLOBAL-CONTEXT-9052";
const SECRET_NAME: &str = "AKIAIOSFODNN7EXAMPLQ";

#[tokio::test]
async fn the_cli_backend_sends_gemini_no_workspace_tree_and_no_context_file() {
    use crate::clients::{Client, locate};
    use crate::support::fake_gemini::FakeGemini;
    let Some((bin, path)) = locate(Client::GeminiCli) else {
        return;
    };
    // A repository whose top holds a `GEMINI.md`; the project is a folder of it with its own
    // `GEMINI.md`, a file named like a key and a `.env`.
    let outer = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(outer.path()).unwrap();
    std::fs::create_dir_all(top.join(".git")).unwrap();
    std::fs::write(top.join("GEMINI.md"), format!("{ANCESTOR_CANARY}\n")).unwrap();
    let root = top.join("app");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("GEMINI.md"), format!("{PROJECT_CANARY}\n")).unwrap();
    std::fs::write(root.join(format!("{SECRET_NAME}.txt")), "k\n").unwrap();
    std::fs::write(root.join(".env"), "TOKEN=x\n").unwrap();
    std::fs::write(root.join("src/lib.rs"), "pub fn one() -> i32 { 1 }\n").unwrap();
    // The user's home: the CLI's settings and a global `GEMINI.md`.
    let home = tempfile::tempdir().unwrap();
    crate::clients::gemini_cli_home(home.path());
    std::fs::write(
        home.path().join(".gemini/GEMINI.md"),
        format!("{GLOBAL_CANARY}\n"),
    )
    .unwrap();

    // The `cli` backend over both transports, then the CLI's agent (`investigate`).
    for transport in ["headless", "acp", "agent"] {
        let model = FakeGemini::start();
        let vars: Vec<(String, String)> = vec![
            ("GEMINI_BACKEND".into(), "cli".into()),
            (
                "GEMINI_CLI_TRANSPORT".into(),
                if transport == "headless" {
                    "headless"
                } else {
                    "acp"
                }
                .into(),
            ),
            ("GEMINI_API_KEY".into(), KEY.into()),
            ("GEMINI_BASE_URL".into(), "http://127.0.0.1:9".into()),
            ("GEMINI_CLI_PATH".into(), bin.display().to_string()),
            ("GEMINI_TIMEOUT_SECS".into(), "120".into()),
            ("PATH".into(), path.clone()),
            ("HOME".into(), home.path().display().to_string()),
            ("GOOGLE_GEMINI_BASE_URL".into(), model.base_url()),
            ("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into()),
        ];
        let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let client = mcp::start(&root, &refs).await;
        let r = tokio::time::timeout(
            Duration::from_secs(150),
            if transport == "agent" {
                mcp::call(
                    &client,
                    "investigate",
                    json!({"task": "Is a trie overkill?", "engine": "gemini-cli", "model": "flash"}),
                )
            } else {
                mcp::call(&client, "chat", json!({"prompt": "Is a trie overkill?"}))
            },
        )
        .await
        .unwrap()
        .unwrap();
        if transport == "headless" {
            // A second call works where the first did: the CLI keeps one record of it.
            let again = mcp::call(&client, "chat", json!({"prompt": "And a radix tree?"}))
                .await
                .unwrap();
            assert_ne!(again.is_error, Some(true), "{}", mcp::text(&again));
        }
        let text = mcp::text(&r);
        assert_ne!(r.is_error, Some(true), "{transport}: {text}");
        assert!(text.contains("FAKE-REPLY"), "{transport}: {text}");
        let sent = model.requests();
        assert!(
            sent.iter()
                .any(|r| r.raw_body.contains("Is a trie overkill?")),
            "{transport}: the prompt was not sent"
        );
        for r in &sent {
            // (The agent's system prompt, the CLI's own, names `.env` files in general.)
            let env = if transport == "agent" {
                SECRET_NAME
            } else {
                ".env"
            };
            for leak in [
                PROJECT_CANARY,
                ANCESTOR_CANARY,
                SECRET_NAME,
                env,
                "Directory Structure",
            ] {
                assert!(
                    !r.raw_body.contains(leak),
                    "{transport}: {leak} reached Gemini: {}",
                    r.raw_body
                );
            }
        }
        client.cancel().await.unwrap();
    }
    // The CLI keeps a record per working directory in the user's `~/.gemini` (projects, chats,
    // history): one per kind of run of ours, not one per call.
    let projects =
        std::fs::read_to_string(home.path().join(".gemini/projects.json")).unwrap_or_default();
    let recorded: Vec<&str> = ["gemini-cli/plain", "gemini-cli/agent", "gemini-mcp-"]
        .into_iter()
        .filter(|p| projects.contains(p))
        .collect();
    assert_eq!(
        recorded,
        ["gemini-cli/plain", "gemini-cli/agent"],
        "{projects}"
    );
    assert_eq!(
        projects.matches("gemini-cli/plain").count(),
        1,
        "{projects}"
    );
    // But none of its records of our sessions is left: the chats held the prompts.
    for prompt in ["Is a trie overkill?", "And a radix tree?"] {
        assert_eq!(
            super::files_holding(home.path(), prompt),
            Vec::<std::path::PathBuf>::new(),
            "{prompt}"
        );
    }
}

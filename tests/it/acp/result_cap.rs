//! The agent's project tools cap each result at `GEMINI_MCP_EXPLORE_RESULT_CHARS`, as
//! `investigate` on the API does: the real Gemini CLI (pinned, from npm) behind the fake Gemini
//! API reads a large file through them.

use std::time::Duration;

use serde_json::json;

use super::{call, structured, text_of};
use crate::support::mcp;

#[tokio::test]
async fn the_agents_project_tools_cap_a_result_at_the_configured_size() {
    use crate::clients::{Client, locate};
    use crate::support::fake_gemini::{FakeGemini, Recorded, Script};
    let Some((bin, path)) = locate(Client::GeminiCli) else {
        return;
    };
    let project = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(project.path()).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    // 2,000 lines of 40 characters: 80,000 characters, past the default cap of 32,000.
    let big: String = (0..2000)
        .map(|i| format!("pub const LINE_{i:04}: u32 = {i:04}; // pad\n"))
        .collect();
    std::fs::write(root.join("src/big.rs"), big).unwrap();
    let home = tempfile::tempdir().unwrap();
    crate::clients::gemini_cli_home(home.path());

    let model = FakeGemini::start();
    model.respond_with(move |req: &Recorded| {
        if !req.is_stream() || !req.raw_body.contains("\"mcp_project_read_lines\"") {
            return None;
        }
        Some(match req.raw_body.matches("\"functionResponse\"").count() {
            0 => Script::calls(
                &[("mcp_project_read_lines", json!({"path": "src/big.rs"}))],
                "c2lnLW9uZQ==",
                [100, 5, 5],
            ),
            _ => Script::text("CAP-ANSWER"),
        })
    });
    let vars = crate::clients::gemini_cli_server_env(
        &bin,
        &path,
        home.path(),
        &model.base_url(),
        &[("GEMINI_MCP_EXPLORE_RESULT_CHARS", "2000")],
    );
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (client, _) = mcp::start_recording(&root, &refs).await;
    let r = call(
        &client,
        json!({"task": "What is in src/big.rs?", "engine": "gemini-cli", "model": "flash"}),
        Duration::from_secs(120),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    assert_eq!(structured(&r)["answer"], "CAP-ANSWER", "{}", text_of(&r));
    // The read's result, as the CLI sent it to its model: the file's start, cut near 2,000
    // characters (not at the default 32,000).
    let result = model
        .generate_requests()
        .iter()
        .filter(|r| r.is_stream())
        .flat_map(|r| r.body["contents"].as_array().cloned().unwrap_or_default())
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .find(|p| p["functionResponse"]["name"] == "mcp_project_read_lines")
        .expect("no result for the read")
        .to_string();
    assert!(result.contains("LINE_0000"), "{result}");
    assert!(
        result.len() < 4_000,
        "{} characters sent: {}",
        result.len(),
        &result[..300]
    );
    client.cancel().await.unwrap();
}

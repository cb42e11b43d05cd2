//! The hosts' surfaces over stdio (rmcp's client against the real binary): prompts, resources,
//! resource templates and completions; threads visible only in their own project.

use rmcp::model::{
    ArgumentInfo, CompleteRequestParams, GetPromptRequestParams, ReadResourceRequestParams,
    Reference, ResourceContents,
};
use serde_json::{Value, json};

use crate::support::fake_gemini::{FakeGemini, Script};
use crate::support::mcp::{self, KEY};

fn project() -> tempfile::TempDir {
    crate::support::project::with(&[crate::support::project::STUB_LIB])
}

fn text_of(r: &rmcp::model::ReadResourceResult) -> String {
    match &r.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => text.clone(),
        other => panic!("not text: {other:?}"),
    }
}

#[tokio::test]
async fn prompts_are_listed_and_rendered_with_their_arguments() {
    let dir = project();
    let client = mcp::start(dir.path(), &[]).await;
    let info = client.peer_info().unwrap();
    assert!(info.capabilities.prompts.is_some());
    assert!(info.capabilities.resources.is_some());
    assert!(info.capabilities.completions.is_some());
    let prompts = client.list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "review-changes",
            "review-code",
            "second-opinion",
            "challenge",
            "security-audit",
            "root-cause"
        ]
    );
    for p in &prompts {
        assert!(
            p.description.as_deref().is_some_and(|d| !d.is_empty()),
            "{p:?}"
        );
    }
    let review = prompts.iter().find(|p| p.name == "review-code").unwrap();
    let args = review.arguments.as_ref().unwrap();
    assert_eq!(args[0].name, "paths");
    assert_eq!(args[0].required, Some(true));

    let mut a = serde_json::Map::new();
    a.insert("paths".into(), json!("src/lib.rs, src/main.rs"));
    a.insert("focus".into(), json!("error handling"));
    let got = client
        .get_prompt(GetPromptRequestParams::new("review-code").with_arguments(a))
        .await
        .unwrap();
    let text = serde_json::to_value(&got.messages[0].content).unwrap();
    let text = text["text"].as_str().unwrap();
    assert!(text.contains("`codereview`"), "{text}");
    assert!(text.contains(r#"["src/lib.rs", "src/main.rs"]"#), "{text}");
    assert!(text.contains(r#""focus_on": "error handling""#), "{text}");

    // Without arguments: a prompt that needs none renders; one that needs some is -32602.
    let got = client
        .get_prompt(GetPromptRequestParams::new("review-changes"))
        .await
        .unwrap();
    assert!(serde_json::to_string(&got).unwrap().contains("precommit"));
    let err = client
        .get_prompt(GetPromptRequestParams::new("challenge"))
        .await
        .unwrap_err();
    let err = format!("{err:?}");
    assert!(
        err.contains("-32602") || err.contains("InvalidParams") || err.contains("claim"),
        "{err}"
    );
    assert!(err.contains("claim"), "{err}");
    let err = client
        .get_prompt(GetPromptRequestParams::new("no-such-prompt"))
        .await
        .unwrap_err();
    assert!(format!("{err:?}").contains("review-changes"), "{err:?}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn threads_are_resources_of_their_own_project_only() {
    let a = project();
    let b = project();
    let fake = FakeGemini::start();
    let url = fake.base_url();
    // One store for both projects: the embedded one, in a shared state directory.
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().display().to_string();
    let vars = [
        ("GEMINI_API_KEY", KEY),
        ("GEMINI_BASE_URL", url.as_str()),
        ("GEMINI_MCP_STORE", "embedded"),
        ("GEMINI_MCP_STATE_DIR", state_dir.as_str()),
    ];
    let client = mcp::start(a.path(), &vars).await;
    fake.push(Script::text("THE-ANSWER about routes"));
    let r = mcp::call(
        &client,
        "chat",
        json!({"prompt": "Is a trie overkill for 200 routes?", "files": ["src/lib.rs"]}),
    )
    .await
    .unwrap();
    let id = r.structured_content.as_ref().unwrap()["continuation_id"]
        .as_str()
        .unwrap()
        .to_string();

    let resources = client.list_all_resources().await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert!(uris.contains(&"gemini-mcp://threads"), "{uris:?}");
    assert!(uris.contains(&"gemini-mcp://models"), "{uris:?}");
    assert!(
        uris.contains(&format!("gemini-mcp://threads/{id}").as_str()),
        "{uris:?}"
    );
    let templates = client.list_all_resource_templates().await.unwrap();
    assert_eq!(templates[0].uri_template, "gemini-mcp://threads/{id}");

    let listing = client
        .read_resource(ReadResourceRequestParams::new("gemini-mcp://threads"))
        .await
        .unwrap();
    let listing: Value = serde_json::from_str(&text_of(&listing)).unwrap();
    assert_eq!(listing["threads"][0]["id"], id.as_str());
    assert_eq!(listing["threads"][0]["tools"], json!(["chat"]));
    assert_eq!(listing["threads"][0]["turns"], 1);
    assert_eq!(
        listing["threads"][0]["title"],
        "Is a trie overkill for 200 routes?"
    );

    let thread = client
        .read_resource(ReadResourceRequestParams::new(format!(
            "gemini-mcp://threads/{id}"
        )))
        .await
        .unwrap();
    let md = text_of(&thread);
    assert!(md.starts_with(&format!("# Thread {id}")), "{md}");
    assert!(md.contains("## Turn 1 — chat"), "{md}");
    assert!(
        md.contains("Is a trie overkill") && md.contains("THE-ANSWER about routes"),
        "{md}"
    );
    assert!(md.contains("src/lib.rs"), "{md}");
    let latest = client
        .read_resource(ReadResourceRequestParams::new(
            "gemini-mcp://threads/latest",
        ))
        .await
        .unwrap();
    assert_eq!(text_of(&latest), md);

    let models = client
        .read_resource(ReadResourceRequestParams::new("gemini-mcp://models"))
        .await
        .unwrap();
    let models: Value = serde_json::from_str(&text_of(&models)).unwrap();
    assert!(models["models"].as_array().unwrap().len() > 1, "{models}");

    // Completions: thread ids for the template, model names and aliases for `model`.
    let done = client
        .complete(CompleteRequestParams::new(
            Reference::for_resource("gemini-mcp://threads/{id}"),
            ArgumentInfo::new("id", &id[..4]),
        ))
        .await
        .unwrap();
    assert_eq!(done.completion.values, std::slice::from_ref(&id));
    let done = client
        .complete(CompleteRequestParams::new(
            Reference::for_prompt("review-code"),
            ArgumentInfo::new("model", "fl"),
        ))
        .await
        .unwrap();
    assert!(
        done.completion.values.contains(&"flash".to_string()),
        "{:?}",
        done.completion
    );
    assert!(done.completion.values.iter().all(|v| v.starts_with("fl")));
    client.cancel().await.unwrap();

    // Project B, same store: the thread is neither listed nor readable.
    let client = mcp::start(b.path(), &vars).await;
    let listing = client
        .read_resource(ReadResourceRequestParams::new("gemini-mcp://threads"))
        .await
        .unwrap();
    let listing: Value = serde_json::from_str(&text_of(&listing)).unwrap();
    assert_eq!(listing["threads"], json!([]));
    let err = client
        .read_resource(ReadResourceRequestParams::new(format!(
            "gemini-mcp://threads/{id}"
        )))
        .await
        .unwrap_err();
    let err = format!("{err:?}");
    assert!(err.contains("unknown or has expired"), "{err}");
    assert!(!err.contains("Is a trie"), "{err}");
    let err = client
        .read_resource(ReadResourceRequestParams::new("gemini-mcp://nothing"))
        .await
        .unwrap_err();
    assert!(
        format!("{err:?}").contains("gemini-mcp://threads"),
        "{err:?}"
    );
    client.cancel().await.unwrap();
}

/// A client's megabyte-long URI, id, name or path comes back in an error as its first 100
/// characters and its size, never whole; the rest of the message still says what to do.
#[tokio::test]
async fn errors_quote_at_most_the_start_of_a_huge_client_string() {
    use rmcp::model::CallToolRequestParams;
    use rmcp::service::ServiceError;
    let dir = project();
    let fake = FakeGemini::start();
    let url = fake.base_url();
    let client = mcp::start(
        dir.path(),
        &[("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", url.as_str())],
    )
    .await;
    let huge = "A".repeat(1 << 20);
    let mut errors: Vec<(&str, String)> = Vec::new();
    let err = client
        .read_resource(ReadResourceRequestParams::new(format!(
            "gemini-mcp://x/{huge}"
        )))
        .await
        .unwrap_err();
    errors.push(("unknown URI", format!("{err:?}")));
    let err = client
        .read_resource(ReadResourceRequestParams::new(format!(
            "gemini-mcp://threads/{huge}"
        )))
        .await
        .unwrap_err();
    errors.push(("thread id", format!("{err:?}")));
    let err = client
        .get_prompt(GetPromptRequestParams::new(huge.clone()))
        .await
        .unwrap_err();
    errors.push(("prompt name", format!("{err:?}")));
    for (what, arguments) in [
        (
            "continuation_id",
            json!({"prompt": "hi", "continuation_id": huge}),
        ),
        ("path", json!({"prompt": "hi", "files": [huge]})),
        ("enum value", json!({"prompt": "hi", "thinking_mode": huge})),
        ("model", json!({"prompt": "hi", "model": huge})),
    ] {
        let r = client
            .call_tool(CallToolRequestParams::new("chat").with_arguments(mcp::args(arguments)))
            .await;
        let text = match r {
            Ok(r) => mcp::text(&r),
            Err(ServiceError::McpError(e)) => format!("{e:?}"),
            Err(other) => panic!("{what}: {other}"),
        };
        errors.push((what, text));
    }
    let err = client
        .call_tool(CallToolRequestParams::new(huge.clone()))
        .await
        .unwrap_err();
    errors.push(("tool name", format!("{err:?}")));
    for (what, e) in &errors {
        assert!(e.len() < 2000, "{what}: the error is {} bytes", e.len());
        assert!(
            !e.contains(&"A".repeat(101)),
            "{what}: {}",
            &e[..e.len().min(300)]
        );
    }
    // The cut ones say how long the string was.
    for (what, e) in &errors[..6] {
        assert!(e.contains("bytes)"), "{what}: {e}");
    }
    assert!(
        errors[0].1.contains("gemini-mcp://threads"),
        "{}",
        errors[0].1
    );
    assert!(errors[2].1.contains("review-changes"), "{}", errors[2].1);
    assert!(
        fake.generate_requests().is_empty(),
        "nothing reached Gemini"
    );
    client.cancel().await.unwrap();
}

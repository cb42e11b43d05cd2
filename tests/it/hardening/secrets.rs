//! Where secrets could leak, end to end: a project with secret files and secret values, a tool
//! call that also carries secret values in its own text fields, and every place they could end
//! up afterwards — the requests Gemini received, the reply, the server's log (at `trace`), and
//! the thread store on disk.

use std::process::Stdio;

use serde_json::json;

use super::Env;
use crate::support::mcp::{self, KEY, call, text};

/// Secret values of well-known shapes (none is a real credential).
const GITHUB: &str = "ghp_R2d2C3poBB8LukeLeiaHanChewie01234567";
const AWS: &str = "AKIAQWERTYUIOPASDFGH";
const PEM_BODY: &str = "MIIEowIBAAKCAQEA7bq1c0ntr4ct3dH4rdc0d3dK3yM4t3r14lN0tR34l";
/// The content of `.env`: a secret by its name, never read at all.
const DOTENV: &str = "DOTENV-CANARY-never-read-9d41";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_secrets_reach_neither_gemini_nor_replies_logs_or_the_thread_store() {
    let env = Env::new();
    let root = env.root();
    std::fs::write(root.join(".env"), format!("TOKEN={DOTENV}\n")).unwrap();
    std::fs::write(
        root.join("deploy.rs"),
        format!(
            "const GH: &str = \"{GITHUB}\";\nconst AWS: &str = \"{AWS}\";\nconst K: &str = \"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----\";\n"
        ),
    )
    .unwrap();
    let base = env.fake.base_url();
    let (transport, stderr) = rmcp::transport::TokioChildProcess::builder(mcp::command(
        root,
        &env.vars(
            &base,
            &[
                ("GEMINI_MCP_STORE", "embedded"),
                ("GEMINI_MCP_LOG", "trace"),
            ],
        ),
    ))
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut stderr = stderr.expect("stderr");
    let log = tokio::spawn(async move {
        let mut s = String::new();
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut s).await;
        s
    });
    let client = rmcp::ServiceExt::serve((), transport).await.unwrap();

    let mut replies = String::new();
    // The directory (the walk meets .env), a file with secret values, and secret values in
    // the call's own text: a debug call pasting a log with tokens in it is the common case.
    let calls = [
        (
            "chat",
            json!({"prompt": format!("why does auth fail with {GITHUB}?"), "files": ["."]}),
        ),
        (
            "debug",
            json!({"error_description": "401 from S3",
                   "error_context": format!("aws_access_key_id={AWS}\nAuthorization: Bearer {GITHUB}"),
                   "files": ["deploy.rs"]}),
        ),
        (
            "codereview",
            json!({"files": ["deploy.rs"], "context": format!("keys like {AWS} should not be here")}),
        ),
    ];
    let mut id = None;
    for (tool, mut args) in calls {
        if let Some(id) = &id {
            args["continuation_id"] = json!(id);
        }
        let r = call(&client, tool, args).await.unwrap();
        assert_ne!(r.is_error, Some(true), "{tool}: {}", text(&r));
        id = r.structured_content.as_ref().unwrap()["continuation_id"]
            .as_str()
            .map(String::from);
        replies.push_str(&serde_json::to_string(&r).unwrap());
    }
    // Naming the secret file explicitly is refused, without reading it.
    let e = call(&client, "chat", json!({"prompt": "x", "files": [".env"]}))
        .await
        .unwrap_err();
    assert_eq!(e.code.0, -32001, "{e:?}");
    replies.push_str(&e.message);
    client.cancel().await.unwrap();
    let log = log.await.unwrap();

    // Everything the thread store wrote (the SQLite files in the state directory).
    let mut store = Vec::new();
    for entry in walk(&root.join(".state")) {
        store.extend(std::fs::read(entry).unwrap_or_default());
    }
    assert!(!store.is_empty(), "the thread store wrote nothing");
    let store = String::from_utf8_lossy(&store).into_owned();
    let sent: String = env
        .fake
        .requests()
        .iter()
        .map(|r| r.raw_body.clone())
        .collect();
    assert!(sent.contains("deploy.rs"), "the files were sent");
    for (place, haystack) in [
        ("a request to Gemini", &sent),
        ("a reply", &replies),
        ("the log", &log),
        ("the thread store", &store),
    ] {
        for secret in [GITHUB, AWS, PEM_BODY, DOTENV, KEY] {
            assert!(!haystack.contains(secret), "{secret} leaked into {place}");
        }
    }
}

/// Every file below `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Secret values in the contexts they are pasted in: each is redacted wherever it stands.
#[test]
fn hardening_secrets_redacted_in_every_context() {
    use gemini_mcp_server::collector::redact;
    let contexts: &[fn(&str) -> String] = &[
        |s| s.to_string(),
        |s| format!("key {s} here"),
        |s| format!("\"{s}\""),
        |s| format!("aws_access_key_id={s}\n"),
        |s| format!("AWS_ACCESS_KEY_ID = {s}"),
        |s| format!("export GITHUB_TOKEN={s}\n"),
        |s| format!("{{\"token\": \"{s}\"}}"),
        |s| format!("api_key: {s}\n"),
        |s| format!("Authorization: Bearer {s}"),
        |s| format!("password={s};"),
    ];
    let mut missed = Vec::new();
    for secret in [GITHUB, AWS, "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW"] {
        for ctx in contexts {
            let text = ctx(secret);
            let (out, n) = redact(&text);
            if out.contains(secret) || n == 0 {
                missed.push(text);
            }
        }
    }
    assert!(missed.is_empty(), "not redacted: {missed:#?}");
}

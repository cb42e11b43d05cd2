//! Our prompts and resources as clients show them: the MCP Inspector lists and renders the
//! prompts and reads the resources; the Gemini CLI runs a prompt as a slash command.

use serde_json::{Value, json};

use super::{Client, Project, client_command, gemini_cli_home, locate, private_home, run};
use crate::support::fake_gemini::FakeGemini;
use crate::support::mcp;

/// The MCP Inspector's CLI, as a host sees our prompts and resources: listed, rendered with
/// arguments, read.
#[test]
fn the_inspector_lists_and_renders_prompts_and_reads_resources() {
    let Some((bin, path)) = locate(Client::Inspector) else {
        return;
    };
    let project = Project::new();
    let inspect = |args: &[&str]| -> Value {
        let mut cmd = client_command(&bin);
        cmd.arg("--cli").arg(mcp::binary());
        for (k, v) in project.server_env() {
            cmd.arg("-e").arg(format!("{k}={v}"));
        }
        cmd.args(args)
            .env("PATH", &path)
            .envs(private_home(project.root().join(".home")))
            .current_dir(project.root());
        let out = cmd.output().expect("run the Inspector");
        assert!(
            out.status.success(),
            "inspector {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "inspector {args:?}: {e}: {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    };
    let prompts = inspect(&["--method", "prompts/list"]);
    let names: Vec<&str> = prompts["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
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
    let got = inspect(&[
        "--method",
        "prompts/get",
        "--prompt-name",
        "challenge",
        "--prompt-args",
        "claim=A trie beats a sorted vector for 200 routes",
    ]);
    let text = got["messages"][0]["content"]["text"].as_str().unwrap();
    assert!(
        text.contains("`chat`") && text.contains("A trie beats a sorted vector"),
        "{got}"
    );
    let resources = inspect(&["--method", "resources/list"]);
    let uris: Vec<&str> = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert!(
        uris.contains(&"gemini-mcp://threads") && uris.contains(&"gemini-mcp://models"),
        "{uris:?}"
    );
    let templates = inspect(&["--method", "resources/templates/list"]);
    assert_eq!(
        templates["resourceTemplates"][0]["uriTemplate"],
        "gemini-mcp://threads/{id}"
    );
    let models = inspect(&["--method", "resources/read", "--uri", "gemini-mcp://models"]);
    let body: Value =
        serde_json::from_str(models["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert!(
        body["models"].as_array().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
}

/// The Gemini CLI turns our prompts into slash commands: `/review-code src/lib.rs` sends its
/// model the message our prompt renders (which tool to call, with which arguments).
#[test]
fn gemini_cli_runs_our_prompt_as_a_slash_command() {
    let Some((bin, path)) = locate(Client::GeminiCli) else {
        return;
    };
    let project = Project::new();
    let model = FakeGemini::start();
    let home = tempfile::tempdir().unwrap();
    gemini_cli_home(home.path());
    let settings = project.root().join(".gemini");
    std::fs::create_dir_all(&settings).unwrap();
    let servers = json!({"mcpServers": {"gemini": {
        "command": mcp::binary(), "args": [], "env": project.server_env_json(), "trust": true}}});
    std::fs::write(settings.join("settings.json"), servers.to_string()).unwrap();
    let mut cmd = client_command(&bin);
    cmd.args(["-p", "/review-code src/lib.rs"])
        .args(["-o", "json", "-m", "gemini-2.5-flash"])
        .envs(private_home(home.path()))
        .env("TERM", "dumb")
        .env("GEMINI_CLI_NO_RELAUNCH", "true")
        .env("GEMINI_API_KEY", "stand-in")
        .env("GOOGLE_GEMINI_BASE_URL", model.base_url())
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true");
    run(cmd, &path, &project.root(), home.path(), "gemini");
    let sent = model.generate_requests();
    // The CLI passes the message on as a JSON string, quotes escaped.
    let rendered = sent.iter().any(|r| {
        let t = r.last_user_text();
        t.contains("Call the gemini server's `codereview` tool") && t.contains("src/lib.rs")
    });
    assert!(
        rendered,
        "the CLI's model never got our prompt's message: {:?}",
        sent.iter().map(|r| r.last_user_text()).collect::<Vec<_>>()
    );
}

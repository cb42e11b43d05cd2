//! What we ship for the clients, installed as users install it: the Gemini CLI extension (linked,
//! and as an archive with its own binary), the Claude Code plugin from the marketplace (connecting,
//! and reviewing a commit before it lands), and the npm package run through `npx`.

use std::path::Path;
use std::process::Stdio;

use serde_json::json;

use super::{Client, client_command, locate, prepend_path, private_home};
use crate::support::anthropic_api::AnthropicApi;
use crate::support::fake_gemini::{FakeGemini, Recorded, Script};
use crate::support::mcp;
use crate::support::scripted_model::{ToolCall, calls_in_order};

/// `PATH` for a client that starts `gemini-mcp` by name: the built binary's directory first.
fn path_with_our_binary(path: &str) -> String {
    prepend_path(Path::new(mcp::binary()).parent().unwrap(), path)
}

/// Runs a client command to its end with `stdin` written to it: whether it succeeded, and its
/// stdout and stderr together.
fn run_with_stdin(mut cmd: std::process::Command, stdin: &str) -> (bool, String) {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// Runs one Gemini CLI command to its end with `stdin`, in `work` with a private `home`, trusting
/// the folder and without relaunching itself: whether it succeeded, and what it said.
fn gemini_cli(
    bin: &Path,
    path: &str,
    home: &Path,
    work: &Path,
    args: &[&str],
    stdin: &str,
) -> (bool, String) {
    let mut cmd = client_command(bin);
    cmd.args(args)
        .env("PATH", path)
        .envs(private_home(home))
        .env("TERM", "dumb")
        .env("GEMINI_CLI_NO_RELAUNCH", "true")
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
        .current_dir(work);
    run_with_stdin(cmd, stdin)
}

/// The Gemini CLI extension (`packaging/gemini-extension`), linked from its local path with the
/// real Gemini CLI: validated, installed, and its server connected.
#[test]
fn the_gemini_cli_extension_links_and_connects() {
    let Some((bin, path)) = locate(Client::GeminiCli) else {
        return;
    };
    let ext = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/gemini-extension");
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let path = path_with_our_binary(&path);
    let gemini =
        |args: &[&str], stdin: &str| gemini_cli(&bin, &path, home.path(), work.path(), args, stdin);
    let (ok, said) = gemini(&["extensions", "validate", ext.to_str().unwrap()], "");
    assert!(ok && said.contains("successfully validated"), "{said}");
    let (ok, said) = gemini(&["extensions", "link", ext.to_str().unwrap()], "Y\nY\n");
    assert!(ok && said.contains("linked successfully"), "{said}");
    let (_, said) = gemini(&["mcp", "list"], "");
    assert!(
        said.contains("gemini (from gemini-mcp): gemini-mcp") && said.contains("Connected"),
        "{said}"
    );
    let (_, said) = gemini(&["extensions", "list"], "");
    assert!(said.contains("GEMINI.md"), "{said}");
}

/// The Gemini CLI extension as a release carries it (`packaging/release/gemini-extension.sh`: the
/// binary beside the manifest), installed by the real Gemini CLI from the unpacked archive — what
/// `gemini extensions install <repository>` does with the release asset of the user's platform —
/// with no `gemini-mcp` on `PATH`: the server it starts is the archive's own, and connects.
#[test]
fn the_gemini_cli_extension_archive_brings_its_own_binary() {
    let Some((bin, path)) = locate(Client::GeminiCli) else {
        return;
    };
    let (os, cpu) = match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => ("linux", "x64"),
        ("linux", "aarch64") => ("linux", "arm64"),
        ("macos", "x86_64") => ("darwin", "x64"),
        ("macos", "aarch64") => ("darwin", "arm64"),
        other => panic!("no extension archive for {other:?}"),
    };
    let made = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/release/gemini-extension.sh");
    let status = std::process::Command::new(script)
        .args([os, cpu, mcp::binary()])
        .arg(made.path())
        .status()
        .unwrap();
    assert!(status.success());
    let archive = made.path().join(format!("{os}.{cpu}.gemini-mcp.tar.gz"));
    let unpacked = made.path().join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    let status = std::process::Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(&unpacked)
        .status()
        .unwrap();
    assert!(status.success());
    let our_dir = Path::new(mcp::binary()).parent().unwrap().to_path_buf();
    assert!(
        !std::env::split_paths(&path).any(|d| d == our_dir),
        "gemini-mcp must not be on PATH here"
    );
    let gemini =
        |args: &[&str], stdin: &str| gemini_cli(&bin, &path, home.path(), work.path(), args, stdin);
    let (ok, said) = gemini(
        &[
            "extensions",
            "install",
            unpacked.to_str().unwrap(),
            "--consent",
        ],
        "",
    );
    assert!(ok, "{said}");
    let (_, said) = gemini(&["mcp", "list"], "");
    assert!(
        said.contains("gemini (from gemini-mcp)") && said.contains("Connected"),
        "{said}"
    );
    assert!(
        said.contains("gemini-mcp/gemini-mcp"),
        "the archive's binary: {said}"
    );
}

/// The Claude Code plugin from this repository's marketplace: added, installed, the API key set
/// as a sensitive option (kept out of the settings files), and the server connected.
#[test]
fn the_claude_code_plugin_installs_from_the_marketplace_and_connects() {
    let Some((bin, path)) = locate(Client::ClaudeCode) else {
        return;
    };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let path = path_with_our_binary(&path);
    let claude = |args: &[&str], stdin: &str| {
        let mut cmd = client_command(&bin);
        cmd.args(args)
            .env("PATH", &path)
            .envs(private_home(home.path()))
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .current_dir(work.path());
        run_with_stdin(cmd, stdin)
    };
    let (ok, said) = claude(
        &[
            "plugin",
            "validate",
            repo.join("packaging/claude-plugin").to_str().unwrap(),
        ],
        "",
    );
    assert!(ok, "{said}");
    let (ok, said) = claude(&["plugin", "validate", repo.to_str().unwrap()], "");
    assert!(ok, "{said}");
    install_plugin(
        &claude,
        r#"{"gemini_api_key": "plugin-key-never-in-settings"}"#,
    );
    let (_, said) = claude(&["mcp", "list"], "");
    assert!(
        said.contains("plugin:gemini-mcp:gemini") && said.contains("Connected"),
        "{said}"
    );
    // The key is a sensitive option: not in any settings file.
    for entry in crate::support::walk(home.path()) {
        let name = entry.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with("settings.json")
            || name == "known_marketplaces.json"
            || name == "installed_plugins.json"
        {
            let text = std::fs::read_to_string(&entry).unwrap_or_default();
            assert!(
                !text.contains("plugin-key-never-in-settings"),
                "{}",
                entry.display()
            );
        }
    }
}

/// Runs one Claude Code command with stdin: whether it succeeded, and what it said.
type ClaudeRunner<'a> = &'a dyn Fn(&[&str], &str) -> (bool, String);

/// Adds this repository as a Claude Code marketplace, installs the plugin from it and sets its
/// options (`values`, JSON) the way a user does, through `claude` (a runner of Claude Code
/// commands with a private home).
fn install_plugin(claude: ClaudeRunner<'_>, values: &str) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (ok, said) = claude(
        &["plugin", "marketplace", "add", repo.to_str().unwrap()],
        "",
    );
    assert!(ok, "{said}");
    let (ok, said) = claude(&["plugin", "install", "gemini-mcp@gemini-mcp-server"], "");
    assert!(ok, "{said}");
    let (ok, said) = claude(
        &[
            "plugin",
            "configure",
            "gemini-mcp@gemini-mcp-server",
            "--values-stdin",
        ],
        values,
    );
    assert!(ok, "{said}");
}

/// The plugin's optional review before a commit, with the real Claude Code: its model runs
/// `git commit -am …` through Bash. With the plugin option `precommit_review` on, the hook has
/// Gemini review the pending change — with the key from the plugin's secure settings, the only
/// key the fake Gemini accepts — and a high finding stops the command (the model is shown the
/// review, nothing is committed); once Gemini passes the change, the same command commits.
#[test]
fn the_claude_code_plugin_reviews_a_commit_before_it_lands() {
    let Some((bin, path)) = locate(Client::ClaudeCode) else {
        return;
    };
    if crate::support::git_missing() {
        return;
    }
    const PLUGIN_KEY: &str = "plugin-key-for-the-precommit-review";
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let work = std::fs::canonicalize(work.path()).unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&work)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .envs(private_home(home.path()))
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    git(&["init", "-q"]);
    git(&["config", "user.name", "Agent"]);
    git(&["config", "user.email", "agent@example.com"]);
    std::fs::write(
        work.join("lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
    )
    .unwrap();
    git(&["add", "lib.rs"]);
    git(&["commit", "-qm", "add"]);
    std::fs::write(
        work.join("lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
    )
    .unwrap();

    let gemini = FakeGemini::start();
    gemini.require_key(PLUGIN_KEY);
    gemini.push(Script::json(json!({
        "summary": "add now subtracts.",
        "verdict": "do_not_commit",
        "findings": [{"severity": "high", "file": "lib.rs", "line": 2,
                      "title": "SUBTRACTS-INSTEAD-OF-ADDING", "detail": "a - b", "fix": "a + b",
                      "evidence": "a - b"}]
    })));
    gemini.push(Script::json(
        json!({"summary": "Fine.", "verdict": "commit", "findings": []}),
    ));
    let path = path_with_our_binary(&path);
    let claude_env = |cmd: &mut std::process::Command| {
        cmd.env("PATH", &path)
            .envs(private_home(home.path()))
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("GEMINI_BASE_URL", gemini.base_url())
            .env("GEMINI_MCP_STORE", "memory")
            .env("GEMINI_MCP_STATE_DIR", home.path().join("state"))
            .env("GEMINI_CLI_PATH", home.path().join("no-gemini-cli"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .current_dir(&work);
    };
    let claude = |args: &[&str], stdin: &str| {
        let mut cmd = client_command(&bin);
        cmd.args(args);
        claude_env(&mut cmd);
        run_with_stdin(cmd, stdin)
    };
    install_plugin(
        &claude,
        &json!({"gemini_api_key": PLUGIN_KEY, "precommit_review": "true"}).to_string(),
    );

    let commit = ToolCall::new(
        "Bash",
        json!({"command": "git commit -am 'Subtract'", "description": "Commit the change"}),
    );
    let mut results = Vec::new();
    for _ in 0..2 {
        let api = AnthropicApi::start(calls_in_order(vec![commit.clone()]));
        let mut cmd = client_command(&bin);
        cmd.args(["-p", "Commit the change.", "--allowedTools", "Bash"])
            .env("ANTHROPIC_BASE_URL", api.base_url())
            .env("ANTHROPIC_API_KEY", "sk-ant-stand-in");
        claude_env(&mut cmd);
        let (ok, said) = run_with_stdin(cmd, "");
        assert!(ok, "{said}");
        let got = api.received();
        assert_eq!(got.len(), 1, "the model got no Bash result: {said}");
        results.push((got[0].clone(), git(&["rev-list", "--count", "HEAD"])));
    }
    let (stopped, commits) = &results[0];
    assert!(
        stopped.is_error
            && stopped.text.contains("SUBTRACTS-INSTEAD-OF-ADDING")
            && stopped.text.contains("The commit was stopped"),
        "{stopped:?}"
    );
    assert_eq!(commits, "1", "the stopped commit landed");
    let (passed, commits) = &results[1];
    assert!(
        !passed.is_error && passed.text.contains("Subtract"),
        "{passed:?}"
    );
    assert_eq!(commits, "2", "the reviewed commit did not land");
    // Both reviews reached Gemini, with the plugin's key (the fake refuses any other), each with
    // the pending change in it.
    let reviews: Vec<Recorded> = gemini
        .requests()
        .into_iter()
        .filter(|r| {
            r.action
                .as_deref()
                .is_some_and(|a| a.ends_with("enerateContent"))
        })
        .collect();
    assert_eq!(reviews.len(), 2, "{:?}", gemini.requests());
    for r in &reviews {
        assert!(r.raw_body.contains("a - b"), "the review lacks the change");
        assert!(
            r.headers
                .iter()
                .any(|(k, v)| k == "x-goog-api-key" && v == PLUGIN_KEY),
            "{:?}",
            r.headers
        );
    }
}

/// The plugin's optional review while editing, with the real Claude Code: its model writes a
/// file with the Write tool. With the plugin option `edit_review` on, the PostToolUse hook has
/// Gemini review the lines just written (the flash model, the flex tier) and Claude Code hands
/// the finding to its model as additional context; the write is never blocked. Off, nothing is
/// asked of Gemini.
#[test]
fn the_claude_code_plugin_reviews_an_edit_and_tells_claude() {
    let Some((bin, path)) = locate(Client::ClaudeCode) else {
        return;
    };
    const PLUGIN_KEY: &str = "plugin-key-for-the-edit-review";
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let work = std::fs::canonicalize(work.path()).unwrap();
    let gemini = FakeGemini::start();
    gemini.require_key(PLUGIN_KEY);
    gemini.push(Script::json(json!({
        "summary": "add subtracts.",
        "findings": [{"severity": "high", "file": "calc.rs", "line": 2,
                      "title": "EDIT-REVIEW-SUBTRACTS", "detail": "add returns a - b.",
                      "fix": "a + b", "evidence": "a - b"}]
    })));
    let path = path_with_our_binary(&path);
    let claude_env = |cmd: &mut std::process::Command| {
        cmd.env("PATH", &path)
            .envs(private_home(home.path()))
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("GEMINI_BASE_URL", gemini.base_url())
            .env("GEMINI_MCP_STORE", "memory")
            .env("GEMINI_MCP_STATE_DIR", home.path().join("state"))
            .env("GEMINI_CLI_PATH", home.path().join("no-gemini-cli"))
            .current_dir(&work);
    };
    let claude = |args: &[&str], stdin: &str| {
        let mut cmd = client_command(&bin);
        cmd.args(args);
        claude_env(&mut cmd);
        run_with_stdin(cmd, stdin)
    };
    let write = |name: &str| {
        ToolCall::new(
            "Write",
            json!({"file_path": work.join(name).to_str().unwrap(),
                   "content": "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n"}),
        )
    };
    let ask = |call: ToolCall| {
        let api = AnthropicApi::start(calls_in_order(vec![call]));
        let mut cmd = client_command(&bin);
        cmd.args(["-p", "Write the file.", "--allowedTools", "Write"])
            .env("ANTHROPIC_BASE_URL", api.base_url())
            .env("ANTHROPIC_API_KEY", "sk-ant-stand-in");
        claude_env(&mut cmd);
        let (ok, said) = run_with_stdin(cmd, "");
        assert!(ok, "{said}");
        (api, said)
    };

    // Off (the default): the write goes through and Gemini is not asked.
    install_plugin(&claude, &json!({"gemini_api_key": PLUGIN_KEY}).to_string());
    let (api, said) = ask(write("off.rs"));
    assert_eq!(
        api.received().len(),
        1,
        "the model got the Write result: {said}"
    );
    assert!(work.join("off.rs").exists(), "{said}");
    assert!(gemini.generate_requests().is_empty(), "asked while off");

    // On: reviewed, and the finding reaches Claude's model beside the tool's result.
    install_plugin(
        &claude,
        &json!({"gemini_api_key": PLUGIN_KEY, "edit_review": "true"}).to_string(),
    );
    let (api, said) = ask(write("calc.rs"));
    assert!(
        work.join("calc.rs").exists(),
        "the write was blocked: {said}"
    );
    let got = api.received();
    assert_eq!(got.len(), 1, "{said}");
    assert!(!got[0].is_error, "{:?}", got[0]);
    let after: String = api
        .requests()
        .iter()
        .map(|(_, body)| body.to_string())
        .filter(|b| b.contains("tool_result"))
        .collect();
    assert!(
        after.contains("EDIT-REVIEW-SUBTRACTS") && after.contains("calc.rs:2"),
        "the finding did not reach the model: {after}"
    );
    let reviews = gemini.generate_requests();
    assert_eq!(reviews.len(), 1);
    assert!(
        reviews[0].raw_body.contains("a - b"),
        "the edit was not sent"
    );
    assert_eq!(reviews[0].body["serviceTier"], "flex");
    assert!(
        reviews[0].path.contains("flash"),
        "the flash model reviews: {}",
        reviews[0].path
    );
}

/// The npm package: the host platform's package (made by `npm/platform/make-package.sh` from the
/// built binary) and the main package, packed and installed from the tarballs into a clean prefix
/// with `--offline`; then the real Claude Code and Gemini CLI start the server with `npx` and
/// see it connected.
#[test]
fn the_npm_package_runs_the_prebuilt_binary_through_npx() {
    let Some((claude, path)) = locate(Client::ClaudeCode) else {
        return;
    };
    let Some((gemini, _)) = locate(Client::GeminiCli) else {
        return;
    };
    if std::env::consts::OS != "linux" {
        return;
    }
    let cpu = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        _ => return,
    };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let work = tempfile::tempdir().unwrap();
    let sh = |program: &str, args: &[&str], dir: &Path| {
        let out = std::process::Command::new(program)
            .args(args)
            .env("PATH", &path)
            .current_dir(dir)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{program} {args:?}: {said}");
        said
    };
    let out = work.path().join("out");
    let made = sh(
        repo.join("npm/platform/make-package.sh").to_str().unwrap(),
        &["linux", cpu, mcp::binary(), out.to_str().unwrap()],
        work.path(),
    );
    let tarballs = work.path().join("tarballs");
    std::fs::create_dir_all(&tarballs).unwrap();
    let dest = tarballs.to_str().unwrap();
    sh(
        "npm",
        &["pack", "--pack-destination", dest, "--loglevel=error"],
        Path::new(made.trim()),
    );
    sh(
        "npm",
        &["pack", "--pack-destination", dest, "--loglevel=error"],
        &repo.join("npm/gemini-mcp-server"),
    );
    let prefix = work.path().join("prefix");
    std::fs::create_dir_all(&prefix).unwrap();
    std::fs::write(
        prefix.join("package.json"),
        r#"{"name":"t","version":"1.0.0","private":true}"#,
    )
    .unwrap();
    let main = tarballs.join("gemini-mcp-server-0.1.0.tgz");
    let platform = tarballs.join(format!("gemini-mcp-server-linux-{cpu}-0.1.0.tgz"));
    sh(
        "npm",
        &[
            "install",
            "--offline",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            platform.to_str().unwrap(),
            main.to_str().unwrap(),
        ],
        &prefix,
    );
    let version = sh(
        "npx",
        &[
            "--prefix",
            prefix.to_str().unwrap(),
            "--no-install",
            "gemini-mcp-server",
            "--version",
        ],
        work.path(),
    );
    assert!(version.starts_with("gemini-mcp "), "{version}");

    // Claude Code, configured with the npx command.
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let npx_args = [
        "--prefix",
        prefix.to_str().unwrap(),
        "--no-install",
        "gemini-mcp-server",
    ];
    let mut add = client_command(&claude);
    add.args(["mcp", "add", "gemini", "--", "npx"])
        .args(npx_args)
        .env("PATH", &path)
        .envs(private_home(home.path()))
        .current_dir(project.path());
    let out = add.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = client_command(&claude)
        .args(["mcp", "list"])
        .env("PATH", &path)
        .envs(private_home(home.path()))
        .current_dir(project.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        said.contains("gemini: npx") && said.contains("Connected"),
        "{said}"
    );

    // The Gemini CLI, configured with the same command.
    let settings = project.path().join(".gemini");
    std::fs::create_dir_all(&settings).unwrap();
    std::fs::write(
        settings.join("settings.json"),
        json!({"mcpServers": {"gemini": {"command": "npx", "args": npx_args}}}).to_string(),
    )
    .unwrap();
    let out = client_command(&gemini)
        .args(["mcp", "list"])
        .env("PATH", &path)
        .envs(private_home(home.path()))
        .env("TERM", "dumb")
        .env("GEMINI_CLI_NO_RELAUNCH", "true")
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
        .current_dir(project.path())
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("gemini: npx") && said.contains("Connected"),
        "{said}"
    );
}

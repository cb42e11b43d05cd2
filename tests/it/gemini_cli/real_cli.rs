//! The real Gemini CLI against the fake Gemini API (opt-in: `GEMINI_CLI_E2E=1`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gemini_mcp_server::config::{BackendChoice, Config};
use gemini_mcp_server::gemini::headless::render_prompt;
use gemini_mcp_server::gemini::{Gemini, GeminiError, Message};

use super::{ctx, model, request};

/// The real CLI when the end-to-end test is switched on: `GEMINI_CLI_E2E=1`, and the executable
/// in `GEMINI_CLI_E2E_BIN` or `gemini` on PATH (install: `npm install @google/gemini-cli@0.61.0`
/// in a scratch directory, then point `GEMINI_CLI_E2E_BIN` at its `node_modules/.bin/gemini`).
fn real_cli() -> Option<PathBuf> {
    if std::env::var("GEMINI_CLI_E2E").ok().as_deref() != Some("1") {
        eprintln!(
            "skipped: set GEMINI_CLI_E2E=1 (and GEMINI_CLI_E2E_BIN) to run the real Gemini CLI"
        );
        return None;
    }
    let named = std::env::var_os("GEMINI_CLI_E2E_BIN").map(PathBuf::from);
    let found = match named {
        Some(p) => gemini_mcp_server::gemini::gemini_cli::locate(&p, None, None),
        None => gemini_mcp_server::gemini::gemini_cli::locate(
            Path::new("gemini"),
            std::env::var_os("PATH").as_deref(),
            std::env::var_os("PATHEXT").as_deref(),
        ),
    };
    assert!(
        found.is_some(),
        "GEMINI_CLI_E2E=1 but no Gemini CLI was found (GEMINI_CLI_E2E_BIN or PATH)"
    );
    found
}

/// A wrapper that runs the real CLI in a throw-away home, logged in with a dummy key against the
/// fake API (the settings file works around the CLI's `gateway` auth regression), trusting the project folder. Everything else comes from our backend.
fn real_cli_wrapper(cli: &Path, base_url: &str, dir: &Path) -> PathBuf {
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::write(
        home.join(".gemini/settings.json"),
        r#"{"security":{"auth":{"selectedType":"gemini-api-key"}},"privacy":{"usageStatisticsEnabled":false}}"#,
    )
    .unwrap();
    let wrapper = dir.join("gemini");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec env HOME='{home}' TERM=dumb GEMINI_API_KEY=dummy-key GOOGLE_GEMINI_BASE_URL='{base_url}' \
             GEMINI_CLI_TRUST_WORKSPACE=true '{cli}' \"$@\"\n",
            home = home.display(),
            cli = cli.display(),
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper
}

#[tokio::test]
async fn gemini_cli_real_cli_end_to_end_against_the_fake_api() {
    use crate::support::fake_gemini::{FakeGemini, Script};
    let Some(cli) = real_cli() else { return };
    let fake = FakeGemini::start();
    let dir = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let wrapper = real_cli_wrapper(&cli, &fake.base_url(), dir.path());
    let mut config = Config::for_tests(root.path());
    config.gemini.backend = BackendChoice::Cli;
    // The per-call path; the warm ACP path with the real CLI is in `acp.rs`.
    config.gemini.cli_transport = gemini_mcp_server::gemini::CliTransport::Headless;
    config.gemini.gemini_cli = wrapper;
    config.gemini.call_timeout = Duration::from_secs(120);
    config.gemini.max_attempts = 2;
    let gemini = Gemini::from_config(&config.gemini()).unwrap();
    assert_eq!(gemini.backend_name(), "cli");

    // 1. A continued conversation, answered by the fake's echo.
    let mut req = request("And what about `$(touch pwned)` in the error path?");
    req.model = model("flash");
    req.system_instruction = "SYSTEM-MARKER: you review Rust code.".into();
    req.contents = vec![
        Message::user("Review src/lib.rs."),
        Message::model("It looks fine."),
        Message::user("And what about `$(touch pwned)` in the error path?"),
    ];
    let started = Instant::now();
    let resp = gemini.generate(req.clone(), &ctx()).await.unwrap();
    eprintln!("real CLI call 1: {:?}", started.elapsed());
    assert!(
        resp.text.starts_with("FAKE-REPLY model=gemini-3.8-flash"),
        "{}",
        resp.text
    );
    assert_eq!(resp.model_version.as_deref(), Some("gemini-3.8-flash"));
    assert!(
        resp.usage.input > 0 && resp.usage.output > 0,
        "{:?}",
        resp.usage
    );
    let sent = fake.generate_requests();
    let main = sent.last().unwrap();
    assert_eq!(main.model.as_deref(), Some("gemini-3.8-flash"));
    // Our system prompt replaced the CLI's; no tool was declared; the whole conversation came
    // as one prompt, verbatim.
    assert_eq!(main.system_text(), "SYSTEM-MARKER: you review Rust code.");
    let tools = main.body["tools"].as_array().map_or(0, |t| {
        t.iter()
            .map(|t| t["functionDeclarations"].as_array().map_or(0, Vec::len))
            .sum()
    });
    assert_eq!(tools, 0, "{}", main.body["tools"]);
    let rendered = render_prompt(&req.contents);
    assert!(
        main.last_user_text().contains(&rendered),
        "{}",
        main.raw_body
    );
    assert!(!root.path().join("pwned").exists());

    // 2. The requested model stays over capacity: our attempt bound stops the CLI's retries and
    //    the fallback model answers.
    fake.clear_requests();
    fake.push(Script::overloaded());
    fake.push(Script::overloaded());
    let started = Instant::now();
    let resp = gemini.generate(request("Quick question."), &ctx()).await;
    eprintln!("real CLI call 2 (503, fallback): {:?}", started.elapsed());
    let resp = resp.unwrap();
    let fallback = resp.fallback.expect("fell back");
    assert_eq!(fallback.from, "gemini-3.1-pro-preview");
    assert_eq!(fallback.to, "gemini-3.8-flash");
    assert!(fallback.reason.contains("503"), "{}", fallback.reason);
    assert!(
        resp.text.starts_with("FAKE-REPLY model=gemini-3.8-flash"),
        "{}",
        resp.text
    );
    let models: Vec<_> = fake
        .generate_requests()
        .iter()
        .filter_map(|r| r.model.clone())
        .collect();
    assert_eq!(
        models,
        [
            "gemini-3.1-pro-preview",
            "gemini-3.1-pro-preview",
            "gemini-3.8-flash"
        ],
        "two attempts on pro (GEMINI_MAX_ATTEMPTS=2), then flash"
    );

    // 3. A bad key: 400 → exit 144 → an API error, no fallback.
    let fake2 = FakeGemini::start();
    fake2.push(Script::bad_key());
    let dir2 = tempfile::tempdir().unwrap();
    config.gemini.gemini_cli = real_cli_wrapper(&cli, &fake2.base_url(), dir2.path());
    let gemini = Gemini::from_config(&config.gemini()).unwrap();
    let started = Instant::now();
    let err = gemini.generate(request("hi"), &ctx()).await.unwrap_err();
    eprintln!("real CLI call 3 (400): {:?}", started.elapsed());
    assert!(
        matches!(&err, GeminiError::Api { status: 400, .. }),
        "{err:?}"
    );
    assert_eq!(fake2.generate_requests().len(), 1);
}

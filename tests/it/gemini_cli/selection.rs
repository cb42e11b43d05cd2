//! Which backend the settings choose, and `doctor` saying which logins the CLI still has.

use std::path::PathBuf;

use gemini_mcp_server::config::{BackendChoice, Secret};
use gemini_mcp_server::gemini::Gemini;

use super::{SUCCESS, StandIn, ctx, request};

#[tokio::test]
async fn gemini_cli_backend_selection() {
    let s = StandIn::new(SUCCESS);
    let bin_dir = s.dir.path().as_os_str().to_owned();
    let empty = tempfile::tempdir().unwrap();

    // auto without a key: the CLI when found on PATH…
    let mut c = s.config();
    c.gemini.backend = BackendChoice::Auto;
    c.gemini.gemini_cli = PathBuf::from("gemini");
    let g = Gemini::with_path(&c.gemini(), Some(&bin_dir)).unwrap();
    assert_eq!(g.backend_name(), "cli");
    // …or named by GEMINI_CLI_PATH…
    let mut c2 = s.config();
    c2.gemini.backend = BackendChoice::Auto;
    assert_eq!(
        Gemini::with_path(&c2.gemini(), None)
            .unwrap()
            .backend_name(),
        "cli"
    );
    // …else a clear error naming both ways, while the server still starts.
    let g = Gemini::with_path(&c.gemini(), Some(empty.path().as_os_str())).unwrap();
    assert_eq!(g.backend_name(), "none");
    let err = g
        .generate(request("hi"), &ctx())
        .await
        .unwrap_err()
        .to_string();
    // The CLI's login is not offered as if it worked for everyone.
    for phrase in [
        "GEMINI_API_KEY",
        "npm install -g @google/gemini-cli",
        "GEMINI_CLI_PATH",
        "since 2026-06-18 Google refuses its Login with Google for individual accounts",
        "Vertex AI",
        "Gemini Code Assist Standard or Enterprise",
    ] {
        assert!(err.contains(phrase), "{err}");
    }

    // auto with a key: the API.
    let mut c3 = c.clone();
    c3.gemini.api_key = Some(Secret::new("k"));
    assert_eq!(
        Gemini::with_path(&c3.gemini(), Some(&bin_dir))
            .unwrap()
            .backend_name(),
        "api"
    );

    // cli, even with a key set: the CLI; cli without it: says how to install or name it.
    let mut c4 = s.config();
    c4.gemini.api_key = Some(Secret::new("k"));
    assert_eq!(
        Gemini::with_path(&c4.gemini(), None)
            .unwrap()
            .backend_name(),
        "cli"
    );
    let mut c5 = s.config();
    c5.gemini.gemini_cli = s.dir.path().join("not-there");
    let g = Gemini::with_path(&c5.gemini(), None).unwrap();
    assert_eq!(g.backend_name(), "none");
    let err = g
        .generate(request("hi"), &ctx())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("GEMINI_BACKEND=cli") && err.contains("GEMINI_CLI_PATH"),
        "{err}"
    );
    // A file that is not executable does not count.
    let plain = s.dir.path().join("rec/plain");
    std::fs::write(&plain, "x").unwrap();
    let mut c6 = s.config();
    c6.gemini.gemini_cli = plain;
    assert_eq!(
        Gemini::with_path(&c6.gemini(), None)
            .unwrap()
            .backend_name(),
        "none"
    );
}

/// `doctor` says which logins the Gemini CLI can still use, with no backend and with the CLI.
#[test]
fn doctor_says_which_logins_the_gemini_cli_still_has() {
    let s = StandIn::new(SUCCESS);
    let root = s.root();
    let no_cli = root.join(".no-gemini-cli").display().to_string();
    let cli = s.program().display().to_string();
    for (cli_path, says) in [
        (no_cli.as_str(), "FAIL backend"),
        (cli.as_str(), "ok   backend: Gemini CLI"),
    ] {
        let out = crate::support::mcp::std_command(&root, &[("GEMINI_CLI_PATH", cli_path)])
            .args(["doctor", "--offline"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains(says), "{stdout}");
        let backend = stdout
            .lines()
            .find(|l| l.contains("backend"))
            .unwrap_or_default();
        assert!(
            backend.contains(
                "since 2026-06-18 Google refuses its Login with Google for individual accounts"
            ) && backend.contains("Gemini Code Assist Standard or Enterprise"),
            "{backend}"
        );
    }
}

//! Credentials written into a URL setting — a password in the OTLP collector's endpoint or in
//! `GEMINI_BASE_URL`'s user info, a `?key=` in `GEMINI_BASE_URL` — reach the service they are
//! for, as headers, and nothing else: not the log at `trace` (where the HTTP clients' own lines
//! print the URLs they are handed), not `doctor`'s report, not an error. The real binary against
//! the stand-in collector and the stand-in Gemini.

use std::path::Path;
use std::process::Output;

use base64::Engine as _;
use serde_json::json;

use crate::support::fake_gemini::{FakeGemini, Script};
use crate::support::http::{HttpServer, Raw};
use crate::support::mcp::{KEY, std_command};
use crate::support::otlp::Collector;

const OTLP_PASSWORD: &str = "S3cret-otlp-pass-7Qx";
const BASE_PASSWORD: &str = "B4se-pass-91Zk";
const URL_KEY: &str = "QKey-in-the-url-55Tm";

fn basic(user: &str, password: &str) -> String {
    let pair = format!("{user}:{password}");
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

/// `http://<user>:<password>@host:port…` from `http://host:port…`.
fn with_user_info(url: &str, user: &str, password: &str) -> String {
    url.replacen("http://", &format!("http://{user}:{password}@"), 1)
}

/// The planted values found in `text`.
fn leaks<'a>(text: &str, planted: &[&'a str]) -> Vec<&'a str> {
    planted
        .iter()
        .copied()
        .filter(|p| text.contains(p))
        .collect()
}

fn run(root: &Path, vars: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = std_command(root, vars)
        .args(args)
        .output()
        .expect("run gemini-mcp");
    (
        status.code(),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// A closed port on loopback: every request to it fails, and the error names the URL.
fn closed_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", listener.local_addr().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_otlp_endpoints_password_reaches_the_collector_and_never_the_log() {
    let dir = crate::support::project::with(&[crate::support::project::MAIN_RS]);
    let fake = FakeGemini::start();
    let gemini = fake.base_url();
    let authorization = basic("otel", OTLP_PASSWORD);
    let planted = [OTLP_PASSWORD, authorization.trim_start_matches("Basic ")];
    for (var, path) in [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "/v1/traces"),
    ] {
        let collector = Collector::start();
        let endpoint = format!(
            "{}{path}",
            with_user_info(&collector.endpoint(), "otel", OTLP_PASSWORD)
        );
        let vars = [
            ("GEMINI_API_KEY", KEY),
            ("GEMINI_BASE_URL", gemini.as_str()),
            ("GEMINI_MCP_LOG", "trace"),
            (var, endpoint.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ];
        let server = HttpServer::start(dir.path(), &vars).await;
        let a = Raw::new(&server.url())
            .call(1, "chat", json!({"prompt": "hello"}))
            .await;
        assert_eq!(a.message["result"]["isError"], false, "{}", a.text);
        assert!(
            collector.until(30, |spans| !spans.is_empty()).await,
            "{var}: no span reached the collector: {}",
            server.stderr()
        );
        let log = server.stderr();
        // The log is at trace: the HTTP pool's own lines are in it.
        assert!(log.contains("hyper_util"), "{var}: {log}");
        assert_eq!(leaks(&log, &planted), Vec::<&str>::new(), "{var}: the log");
        let seen = collector.authorizations();
        assert!(
            seen.iter()
                .all(|a| a.as_deref() == Some(authorization.as_str())),
            "{var}: the collector was sent {seen:?}"
        );
    }
}

#[test]
fn gemini_base_urls_password_is_sent_as_authorization_and_never_shown() {
    let dir = crate::support::project::with(&[crate::support::project::MAIN_RS]);
    let fake = FakeGemini::start();
    let base = with_user_info(&fake.base_url(), "gw", BASE_PASSWORD);
    let authorization = basic("gw", BASE_PASSWORD);
    let planted = [BASE_PASSWORD, authorization.trim_start_matches("Basic ")];
    let vars = [
        ("GEMINI_API_KEY", KEY),
        ("GEMINI_BASE_URL", base.as_str()),
        ("GEMINI_MCP_LOG", "trace"),
    ];
    let (code, stdout, stderr) = run(dir.path(), &vars, &["doctor"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert_eq!(
        leaks(&stdout, &planted),
        Vec::<&str>::new(),
        "doctor: {stdout}"
    );
    assert_eq!(leaks(&stderr, &planted), Vec::<&str>::new(), "doctor's log");
    let (code, stdout, stderr) = run(dir.path(), &vars, &["chat", "hello"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert_eq!(
        leaks(&stderr, &planted),
        Vec::<&str>::new(),
        "the log: {stderr}"
    );
    let requests = fake.requests();
    assert!(requests.iter().any(|r| r.is_generate()), "{requests:?}");
    assert!(
        requests
            .iter()
            .all(|r| r.header("authorization") == Some(authorization.as_str())),
        "the proxy's credentials on every request: {requests:?}"
    );
    // Errors: Gemini's refusal, and a gateway that cannot be reached (the HTTP client's error
    // names the URL it was handed).
    fake.push(Script::error(400, "INVALID_ARGUMENT", "bad request"));
    let (code, _, stderr) = run(dir.path(), &vars, &["chat", "hello"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(leaks(&stderr, &planted), Vec::<&str>::new(), "{stderr}");
    let closed = with_user_info(&closed_port(), "gw", BASE_PASSWORD);
    let down = [
        ("GEMINI_API_KEY", KEY),
        ("GEMINI_BASE_URL", closed.as_str()),
        ("GEMINI_MAX_ATTEMPTS", "1"),
    ];
    for args in [&["doctor"][..], &["chat", "hello"]] {
        let (code, stdout, stderr) = run(dir.path(), &down, args);
        assert_ne!(code, Some(0), "{args:?}: {stdout}{stderr}");
        assert!(
            stdout.contains("127.0.0.1") || stderr.contains("127.0.0.1"),
            "the error names the host: {stdout}{stderr}"
        );
        let said = format!("{stdout}{stderr}");
        assert_eq!(
            leaks(&said, &planted),
            Vec::<&str>::new(),
            "{args:?}: {said}"
        );
    }
}

#[test]
fn a_key_in_gemini_base_url_is_sent_as_the_key_and_never_shown() {
    let dir = crate::support::project::with(&[crate::support::project::MAIN_RS]);
    let fake = FakeGemini::start();
    fake.require_key(URL_KEY);
    let base = format!("{}/?key={URL_KEY}", fake.base_url());
    let vars = [
        ("GEMINI_BASE_URL", base.as_str()),
        ("GEMINI_MCP_LOG", "trace"),
    ];
    let (code, stdout, stderr) = run(dir.path(), &vars, &["doctor"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert_eq!(
        leaks(&stdout, &[URL_KEY]),
        Vec::<&str>::new(),
        "doctor: {stdout}"
    );
    let (code, stdout, stderr) = run(dir.path(), &vars, &["chat", "hello"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert_eq!(
        leaks(&stderr, &[URL_KEY]),
        Vec::<&str>::new(),
        "the log: {stderr}"
    );
    let requests = fake.requests();
    assert!(requests.iter().any(|r| r.is_generate()), "{requests:?}");
    assert!(
        requests
            .iter()
            .all(|r| r.header("x-goog-api-key") == Some(URL_KEY)
                && !r.query.as_deref().unwrap_or("").contains(URL_KEY)),
        "the key in its header, not in the URL: {requests:?}"
    );
    // An error names the URL it failed on, without the key.
    let closed = format!("{}/?key={URL_KEY}", closed_port());
    let down = [
        ("GEMINI_BASE_URL", closed.as_str()),
        ("GEMINI_MAX_ATTEMPTS", "1"),
    ];
    let (code, stdout, stderr) = run(dir.path(), &down, &["chat", "hello"]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("127.0.0.1"), "{stderr}");
    assert_eq!(leaks(&stderr, &[URL_KEY]), Vec::<&str>::new(), "{stderr}");
    // Two different keys: refused, naming both settings and neither value.
    let both = [("GEMINI_BASE_URL", base.as_str()), ("GEMINI_API_KEY", KEY)];
    let (code, stdout, stderr) = run(dir.path(), &both, &["chat", "hello"]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains("GEMINI_BASE_URL") && stderr.contains("GEMINI_API_KEY"),
        "{stderr}"
    );
    assert_eq!(
        leaks(&stderr, &[URL_KEY, KEY]),
        Vec::<&str>::new(),
        "{stderr}"
    );
}

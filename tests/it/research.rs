//! `research`: Gemini's Deep Research agent, through the real binary against the stand-in's
//! Interactions API. Off unless `GEMINI_MCP_DEEP_RESEARCH=1` (not listed, refused by name on
//! the command line); on, a call is one background run (`agent`, `background: true`,
//! `store: true`) polled by id until done, answered with the agent's report and its cited
//! sources; only named files go with the question, through the sandbox; the caps hold a run
//! at `GEMINI_MCP_DEEP_RESEARCH_TOKENS` before it starts; a run past its deadline is cancelled
//! at Google; and every body sent is a google-genai 3.3.0 `CreateAgentInteraction`, strictly.
//! Cancelling a run's task cancels it at Google: `tasks::background`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::fake_gemini::{FakeGemini, InteractionOp, Script};
use crate::support::http::{HttpServer, Raw, result_text};
use crate::support::mcp::{KEY, command};

pub const AGENT: &str = "deep-research-preview-04-2026";

pub struct Env {
    pub dir: tempfile::TempDir,
    pub fake: FakeGemini,
}

impl Env {
    pub fn new() -> Env {
        Env {
            dir: crate::support::project::with(&[
                (
                    "src/lib.rs",
                    "pub fn add(a: u32, b: u32) -> u32 { a + b } // marker-lib\n",
                ),
                ("src/other.rs", "pub fn other() {} // marker-other\n"),
                (
                    ".env",
                    "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz012345\n",
                ),
            ]),
            fake: FakeGemini::start(),
        }
    }

    pub fn vars<'a>(
        &'a self,
        url: &'a str,
        extra: &[(&'a str, &'a str)],
    ) -> Vec<(&'a str, &'a str)> {
        let mut vars = vec![
            ("GEMINI_API_KEY", KEY),
            ("GEMINI_BASE_URL", url),
            ("GEMINI_MCP_DEEP_RESEARCH", "1"),
            ("GEMINI_MCP_BACKGROUND_POLL_MS", "50"),
        ];
        vars.extend_from_slice(extra);
        vars
    }

    pub async fn server(&self, extra: &[(&str, &str)]) -> HttpServer {
        let url = self.fake.base_url();
        HttpServer::start(self.dir.path(), &self.vars(&url, extra)).await
    }

    fn creates(&self) -> Vec<crate::support::fake_gemini::Recorded> {
        self.fake.interaction_requests(InteractionOp::Create)
    }
}

/// The stand-in's report: a background run done after `after`, citing two sources.
pub fn report(after: Duration) -> Script {
    Script::text("Use clap 4: it is maintained and derives flags from a struct.")
        .sources(&[
            ("https://docs.rs/clap/latest/clap/", "clap - Rust"),
            ("https://github.com/clap-rs/clap/releases", "clap releases"),
        ])
        .usage(120_000, 9_000, 30_000, 0)
        .delay_headers(after)
}

async fn tool_names(raw: &Raw) -> Vec<String> {
    let listed = raw.modern(1, "tools/list", json!({})).await.message;
    listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(String::from))
        .collect()
}

#[tokio::test]
async fn research_is_off_unless_turned_on() {
    let env = Env::new();
    let url = env.fake.base_url();
    let off = HttpServer::start(
        env.dir.path(),
        &[("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", url.as_str())],
    )
    .await;
    let raw = Raw::new(&off.url());
    let names = tool_names(&raw).await;
    assert!(names.contains(&"chat".to_string()), "{names:?}");
    assert!(!names.contains(&"research".to_string()), "{names:?}");
    let called = raw
        .call(2, "research", json!({"question": "which crate?"}))
        .await
        .message;
    assert!(
        called.get("error").is_some(),
        "an unlisted tool is not called: {called}"
    );
    // The command line names the setting that turns it on.
    let out = command(
        env.dir.path(),
        &[("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", url.as_str())],
    )
    .args(["research", "which crate?"])
    .output()
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("GEMINI_MCP_DEEP_RESEARCH=1"), "{stderr}");
    assert!(
        env.fake
            .requests()
            .iter()
            .all(|r| !r.path.contains("interactions"))
    );

    let on = env.server(&[]).await;
    let names = tool_names(&Raw::new(&on.url())).await;
    assert!(names.contains(&"research".to_string()), "{names:?}");
}

#[tokio::test]
async fn a_run_goes_to_the_agent_in_the_background_and_answers_with_its_cited_report() {
    let env = Env::new();
    let server = env.server(&[]).await;
    let raw = Raw::new(&server.url());
    env.fake.push(report(Duration::from_millis(600)));
    let answer = raw
        .call(
            1,
            "research",
            json!({"question": "Which argument parser should a Rust CLI use?",
                   "context": "a small CLI", "files": ["src/lib.rs"]}),
        )
        .await
        .message;
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    let text = result_text(&answer);
    assert!(text.contains("Use clap 4"), "{text}");
    assert!(
        text.contains("https://docs.rs/clap/latest/clap/"),
        "the sources are listed: {text}"
    );
    assert!(text.contains("clap releases"), "{text}");

    let creates = env.creates();
    assert_eq!(creates.len(), 1, "one run");
    let body = &creates[0].body;
    assert_eq!(creates[0].path, "/v1/interactions");
    assert_eq!(body["agent"], AGENT, "{body}");
    assert_eq!(body["background"], true, "{body}");
    assert_eq!(body["store"], true, "{body}");
    assert_eq!(body["agent_config"]["type"], "deep-research", "{body}");
    assert!(
        body.get("model").is_none() && body.get("generation_config").is_none(),
        "{body}"
    );
    let sent = body.to_string();
    assert!(sent.contains("Which argument parser"), "{sent}");
    assert!(
        sent.contains("marker-lib"),
        "the named file goes with the question"
    );
    assert!(
        !sent.contains("marker-other"),
        "a file not named stays home"
    );
    // Polled by id until done: the run took 600 ms at a 50 ms poll.
    let polls = env.fake.interaction_requests(InteractionOp::Get);
    assert!(polls.len() >= 3, "{} polls", polls.len());
    assert!(
        polls.iter().all(|p| p.path == polls[0].path),
        "{:?}",
        polls[0].path
    );
    // Read, the run is deleted at Google: nothing of the question is kept there.
    let deleted = env.fake.interaction_requests(InteractionOp::Delete);
    assert_eq!(deleted.len(), 1);
    assert_eq!(deleted[0].path, polls[0].path);
    assert!(env.fake.interactions().is_empty());
    assert!(env.fake.generate_requests().is_empty());

    // The reply's usage is the agent's, priced at its model's prices.
    let usage = &answer["result"]["structuredContent"]["usage"];
    assert_eq!(usage["input"], 120_000, "{usage}");
    assert!(usage["cost_usd"].as_f64().unwrap_or(0.0) > 0.2, "{usage}");

    // The report is a turn: a chat continues from it.
    env.fake.push(Script::echo());
    let thread = answer["result"]["structuredContent"]["continuation_id"]
        .as_str()
        .unwrap();
    let next = raw
        .call(
            2,
            "chat",
            json!({"prompt": "And for a daemon?", "continuation_id": thread}),
        )
        .await
        .message;
    assert_ne!(next["result"]["isError"], true, "{next}");
    let history = env
        .fake
        .generate_requests()
        .last()
        .unwrap()
        .body
        .to_string();
    assert!(history.contains("Use clap 4"), "{history}");
}

#[tokio::test]
async fn the_caps_hold_a_run_before_it_starts_and_a_secret_file_never_leaves() {
    let env = Env::new();
    let server = env.server(&[("GEMINI_MCP_DAILY_TOKENS", "100000")]).await;
    let raw = Raw::new(&server.url());
    let answer = raw
        .call(1, "research", json!({"question": "which crate?"}))
        .await
        .message;
    let text = format!("{}{}", result_text(&answer), answer["error"]);
    assert!(text.contains("GEMINI_MCP_DAILY_TOKENS"), "{text}");
    assert!(
        text.contains("GEMINI_MCP_DEEP_RESEARCH_TOKENS"),
        "what to lower is named: {text}"
    );
    assert!(env.creates().is_empty(), "refused before any run");

    let server = env.server(&[]).await;
    let raw = Raw::new(&server.url());
    let answer = raw
        .call(2, "research", json!({"question": "q", "files": [".env"]}))
        .await
        .message;
    let text = format!("{}{}", result_text(&answer), answer["error"]);
    assert!(text.contains(".env"), "{text}");
    assert!(
        !text.contains("sk-proj-abcdefghijklmnopqrstuvwxyz012345"),
        "{text}"
    );
    assert!(env.creates().is_empty(), "nothing was sent");
}

#[tokio::test]
async fn a_run_past_its_deadline_is_cancelled_at_google() {
    let env = Env::new();
    let server = env
        .server(&[("GEMINI_MCP_DEEP_RESEARCH_TIMEOUT_SECS", "1")])
        .await;
    let raw = Raw::new(&server.url());
    env.fake.push(report(Duration::from_secs(3600)));
    let answer = raw
        .call(1, "research", json!({"question": "which crate?"}))
        .await
        .message;
    let text = format!("{}{}", result_text(&answer), answer["error"]);
    assert!(
        text.contains("GEMINI_MCP_DEEP_RESEARCH_TIMEOUT_SECS"),
        "{text}"
    );
    // Cancelled at Google, then deleted there.
    assert_eq!(
        env.fake.interaction_requests(InteractionOp::Cancel).len(),
        1
    );
    assert_eq!(
        env.fake.interaction_requests(InteractionOp::Delete).len(),
        1
    );
    assert!(env.fake.interactions().is_empty());
}

/// A dry run shows the agent's body and holds the run's tokens in its estimate; nothing is sent.
#[tokio::test]
async fn a_dry_run_shows_the_run_and_sends_nothing() {
    let env = Env::new();
    let url = env.fake.base_url();
    let out = command(env.dir.path(), &env.vars(&url, &[]))
        .args([
            "research",
            "which crate?",
            "--dry-run",
            "--show-request",
            "--format",
            "json",
        ])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: Value = serde_json::from_str(&stdout).expect("the dry run's JSON");
    assert_eq!(shown["agent"], AGENT, "{stdout}");
    assert_eq!(
        shown["request"]["agent"], AGENT,
        "the body as it would leave: {stdout}"
    );
    assert_eq!(shown["request"]["background"], true, "{stdout}");
    assert!(
        stdout.contains("\"agent\": 400000"),
        "the hold is estimated: {stdout}"
    );
    assert!(
        env.fake
            .requests()
            .iter()
            .all(|r| !r.path.contains("interactions"))
    );
}

/// Every body a run sends is a google-genai 3.3.0 `CreateAgentInteraction`, strictly; a field
/// the type lacks fails the check.
#[cfg(unix)]
#[tokio::test]
async fn every_run_body_is_one_google_genai_knows() {
    let python = match crate::wire_schema::genai_python() {
        Ok(p) => p,
        Err(why) => {
            if crate::support::skip_when(Some(why), "GEMINI_MCP_REQUIRE_GENAI") {
                return;
            }
            unreachable!("skip_when panics when the environment is required");
        }
    };
    let env = Env::new();
    // Two runs in a minute: over the default rate of one.
    let server = env
        .server(&[("GEMINI_MCP_RATE_LIMITS", "research=5/min")])
        .await;
    let raw = Raw::new(&server.url());
    env.fake.push(report(Duration::from_millis(100)));
    let first = raw
        .call(
            1,
            "research",
            json!({"question": "q", "files": ["src/lib.rs"]}),
        )
        .await
        .message;
    let thread = first["result"]["structuredContent"]["continuation_id"].clone();
    env.fake.push(report(Duration::from_millis(100)));
    let second = raw
        .call(
            2,
            "research",
            json!({"question": "more", "continuation_id": thread}),
        )
        .await
        .message;
    assert_ne!(second["result"]["isError"], true, "{second}");
    let records: Vec<Value> = env
        .creates()
        .iter()
        .enumerate()
        .map(|(i, r)| json!({"name": format!("run {i}"), "agent_interaction_create": r.body}))
        .collect();
    assert_eq!(records.len(), 2);
    let (ok, report) = crate::wire_schema::validate(&python, &records);
    assert!(ok, "{report}");
    let mut wrong = records[0].clone();
    wrong["agent_interaction_create"]["generation_config"] = json!({"temperature": 0.5});
    let (ok, report) = crate::wire_schema::validate(&python, &[wrong]);
    assert!(!ok, "{report}");
}

/// Stopped on the command line (SIGTERM, as Ctrl-C), `gemini-mcp research` cancels its run at
/// Google, and deletes it, before it exits.
#[cfg(unix)]
#[test]
fn a_stopped_command_cancels_its_run_at_google() {
    let env = Env::new();
    let url = env.fake.base_url();
    env.fake.push(report(Duration::from_secs(3600)));
    let mut child = crate::support::mcp::std_command(env.dir.path(), &env.vars(&url, &[]))
        .args(["research", "which crate?"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while env.fake.interaction_requests(InteractionOp::Get).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the run never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(2));
    assert_eq!(
        env.fake.interaction_requests(InteractionOp::Cancel).len(),
        1
    );
    assert_eq!(
        env.fake.interaction_requests(InteractionOp::Delete).len(),
        1
    );
    assert!(
        env.fake.interactions().is_empty(),
        "nothing is left at Google"
    );
}

/// The agent's report and the titles of its sources are Google's text: terminal controls in
/// them (OSC 52 clipboard writes, a title change, a C1 CSI) are made inert where the command
/// line prints them, as every answer's are.
#[test]
fn terminal_controls_in_a_report_and_its_sources_are_made_inert() {
    let env = Env::new();
    let url = env.fake.base_url();
    let hostile = "\u{1b}]52;c;Y3VybCBldmlsLnNoIHwgc2g=\u{7}\u{1b}]0;owned\u{7}\u{9b}8m";
    env.fake.push(
        Script::text(format!("REPORT {hostile} done"))
            .sources(&[("https://example.org/a", &format!("evil {hostile} title"))])
            .delay_headers(Duration::from_millis(100)),
    );
    let out = crate::support::mcp::std_command(env.dir.path(), &env.vars(&url, &[]))
        .args(["research", "which crate?"])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("REPORT"), "{stdout}");
    assert!(stdout.contains("https://example.org/a"), "{stdout}");
    for text in [&stdout, &stderr] {
        assert!(!text.contains("\u{1b}]"), "{text:?}");
        assert!(!text.contains(['\u{7}', '\u{9b}']), "{text:?}");
    }
}

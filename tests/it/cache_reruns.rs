//! Explicit context caching of a front a later call sends again (`pipeline::cache::first`),
//! through the real binary against the stand-in Gemini: a review re-run over an unchanged
//! change. The first run records its front (the system instruction, the files and the diff) and
//! makes no cache; the second makes one of it and sends only the rest beside it; the third reads
//! the same cache; a changed file is never answered from the old one; a cache gone at Google
//! costs only the whole request; two instances on one Redis share the record; another client's
//! front is never read; the command line and its dry run follow the same rule.

use serde_json::{Value, json};

use crate::context_cache::big_file;
use crate::support::fake_gemini::{CacheOp, FakeGemini};
use crate::support::http::{HttpServer, Raw};
use crate::support::mcp::KEY;

/// A token-looking value in the change: redacted before it reaches a request or a cache.
const SECRET: &str = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";

struct Env {
    dir: tempfile::TempDir,
    fake: FakeGemini,
}

impl Env {
    /// A git repository whose pending change adds a large file (about 12k tokens of diff).
    fn new() -> Env {
        let dir = crate::support::project::with(&[("src/lib.rs", "pub fn one() -> u32 { 1 }\n")]);
        let repo = git2::Repository::init(dir.path()).unwrap();
        let mut index = repo.index().unwrap();
        index.add_path(std::path::Path::new("src/lib.rs")).unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("Test", "test@example.com").unwrap();
        repo.commit(Some("HEAD"), &sig, &sig, "one", &tree, &[])
            .unwrap();
        let env = Env {
            dir,
            fake: FakeGemini::start(),
        };
        env.change("first-version");
        env
    }

    /// Rewrites the pending change, its every line carrying `marker`.
    fn change(&self, marker: &str) {
        let text = format!("{}const TOKEN: &str = \"{SECRET}\";\n", big_file(marker));
        crate::support::project::write(self.dir.path(), "src/steps.rs", &text);
    }

    async fn http(&self, extra: &[(&str, &str)]) -> HttpServer {
        let url = self.fake.base_url();
        // A review runs more often here than the default limit of three a minute allows.
        let mut vars = vec![
            ("GEMINI_API_KEY", KEY),
            ("GEMINI_BASE_URL", url.as_str()),
            ("GEMINI_MCP_RATE_LIMITS", "off"),
        ];
        vars.extend_from_slice(extra);
        HttpServer::start(self.dir.path(), &vars).await
    }

    fn generates(&self) -> Vec<crate::support::fake_gemini::Recorded> {
        self.fake.generate_requests()
    }

    fn made(&self) -> usize {
        self.fake.cache_calls(CacheOp::Create)
    }
}

/// One precommit run over the pending change; its reply, which must be a review.
async fn precommit(raw: &Raw, id: u64) -> Value {
    let answer = raw
        .call(
            id,
            "precommit",
            json!({"path": ".", "original_request": "Add the steps"}),
        )
        .await
        .message;
    let review = &answer["result"]["structuredContent"];
    assert!(review["findings"].is_array(), "not a review: {answer}");
    answer
}

fn cost(answer: &Value) -> f64 {
    answer["result"]["structuredContent"]["usage"]["cost_usd"]
        .as_f64()
        .unwrap_or_else(|| panic!("no cost: {answer}"))
}

#[tokio::test]
async fn a_review_re_run_over_an_unchanged_change_reads_one_cache() {
    let env = Env::new();
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().display().to_string();
    let server = env
        .http(&[
            ("GEMINI_MCP_STORE", "embedded"),
            ("GEMINI_MCP_STATE_DIR", dir.as_str()),
        ])
        .await;
    let raw = Raw::new(&server.url());

    let first = precommit(&raw, 1).await;
    assert_eq!(env.made(), 0, "a one-off run makes no cache");
    let whole = &env.generates()[0].body;
    assert!(whole.get("cachedContent").is_none());
    assert!(whole["systemInstruction"].is_object());
    assert_eq!(whole["contents"].as_array().unwrap().len(), 1, "{whole}");

    // The same review again: its front was seen, so a cache of it pays.
    let second = precommit(&raw, 2).await;
    assert_eq!(env.made(), 1, "the second run makes one");
    let made = &env.fake.cache_requests(CacheOp::Create)[0].body;
    assert!(made["systemInstruction"].is_object(), "{made}");
    let held = made["contents"].as_array().unwrap();
    assert_eq!(held.len(), 1, "{made}");
    let held = held[0].to_string();
    assert!(held.contains("first-version"), "the diff is in the cache");
    assert!(!held.contains("Add the steps"), "the request is not cached");
    assert!(
        !made.to_string().contains(SECRET),
        "a secret reached the cache"
    );
    assert!(
        held.contains("[REDACTED"),
        "no redaction marker in the cache"
    );
    let name = env.fake.caches()[0].name.clone();
    let sent = &env.generates()[1].body;
    assert_eq!(sent["cachedContent"], name.as_str(), "{sent}");
    assert!(sent.get("systemInstruction").is_none(), "{sent}");
    let contents = sent["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 1, "only what follows the cache: {sent}");
    assert!(!sent.to_string().contains("first-version"));
    assert!(sent.to_string().contains("Add the steps"));
    let usage = &second["result"]["structuredContent"]["usage"];
    assert!(usage["cached"].as_u64().unwrap() > 10_000, "{usage}");
    // What Gemini read is the whole review: the cache's head and the rest, two user messages.
    let read = &second["result"]["structuredContent"]["summary"];
    assert!(read.to_string().contains("turns=2"), "{read}");

    let third = precommit(&raw, 3).await;
    assert_eq!(env.made(), 1, "the third run reads the same cache");
    assert_eq!(env.generates()[2].body["cachedContent"], name.as_str());
    assert!(
        cost(&third) < cost(&first) / 2.0,
        "read from the cache: {} against {}",
        cost(&third),
        cost(&first)
    );
    assert!(
        cost(&second) > cost(&third),
        "the second paid for the cache"
    );

    // A changed file: the old cache is never read, and the new front is only recorded.
    env.change("second-version");
    precommit(&raw, 4).await;
    let fourth = &env.generates()[3].body;
    assert!(fourth.get("cachedContent").is_none(), "{fourth}");
    assert!(fourth.to_string().contains("second-version"));
    assert!(!fourth.to_string().contains("first-version"));
    assert_eq!(env.made(), 1);
    precommit(&raw, 5).await;
    assert_eq!(
        env.made(),
        2,
        "the changed front, seen twice, gets its own cache"
    );
    let renewed = &env.generates()[4].body["cachedContent"];
    assert_ne!(renewed, name.as_str());
    assert!(
        env.fake.cache_requests(CacheOp::Create)[1]
            .body
            .to_string()
            .contains("second-version")
    );

    let scraped = server.metrics().await;
    for line in [
        "gemini_mcp_context_caches_total{outcome=\"made\"} 2",
        "gemini_mcp_context_caches_total{outcome=\"used\"} 3",
    ] {
        assert!(scraped.contains(line), "{line} not in:\n{scraped}");
    }
    assert!(
        env.fake
            .requests()
            .iter()
            .all(|r| !r.body.to_string().contains(SECRET)),
        "the secret reached Gemini"
    );
    crate::context_cache::hold_to_google_genai(&env.fake, "api");
}

#[tokio::test]
async fn a_cache_gone_at_google_costs_only_the_whole_request_and_the_setting_turns_it_off() {
    let env = Env::new();
    let server = env.http(&[]).await;
    let raw = Raw::new(&server.url());
    precommit(&raw, 1).await;
    precommit(&raw, 2).await;
    let name = env.fake.caches()[0].name.clone();
    assert!(env.fake.vanish_cache(&name));

    let third = precommit(&raw, 3).await;
    let read = third["result"]["structuredContent"]["summary"].to_string();
    assert!(read.contains("turns=2"), "the head and the rest: {read}");
    let tail: Vec<_> = env.generates().into_iter().rev().take(2).collect();
    assert_eq!(
        tail[1].body["cachedContent"],
        name.as_str(),
        "it tried the cache"
    );
    assert!(
        tail[0].body.get("cachedContent").is_none(),
        "then sent it whole"
    );
    assert!(tail[0].body.to_string().contains("first-version"));
    assert!(tail[0].body["systemInstruction"].is_object());
    // The lost cache is forgotten: the next run makes a new one, and the one after reads it.
    precommit(&raw, 4).await;
    assert_eq!(env.made(), 2);
    let renewed = env.generates().last().unwrap().body["cachedContent"].clone();
    assert!(renewed.is_string() && renewed != name.as_str(), "{renewed}");

    let off = Env::new();
    let server = off.http(&[("GEMINI_MCP_CONTEXT_CACHE", "0")]).await;
    let raw = Raw::new(&server.url());
    for id in 1..=3 {
        precommit(&raw, id).await;
    }
    assert_eq!(off.made(), 0);
    assert!(
        off.generates()
            .iter()
            .all(|r| r.body.get("cachedContent").is_none())
    );
}

/// The cache of a re-run's front is made through the call's caps: a daily cap with room for the
/// request but not for it and the cache sends the request whole and makes none; a cap of one
/// token refuses the run before anything is sent.
#[tokio::test]
async fn the_caps_hold_a_fronts_cache_like_any_request() {
    let env = Env::new();
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().display().to_string();
    let store = [
        ("GEMINI_MCP_STORE", "embedded"),
        ("GEMINI_MCP_STATE_DIR", dir.as_str()),
    ];
    {
        let server = env.http(&store).await;
        precommit(&Raw::new(&server.url()), 1).await;
    }
    let sent = env.generates().len();
    let (spent, need) = {
        let mut vars = store.to_vec();
        vars.push(("GEMINI_MCP_DAILY_TOKENS", "1"));
        let server = env.http(&vars).await;
        let refused = Raw::new(&server.url())
            .call(
                2,
                "precommit",
                json!({"path": ".", "original_request": "Add the steps"}),
            )
            .await
            .message;
        assert_eq!(refused["result"]["isError"], true, "{refused}");
        crate::context_cache::refused_figures(&crate::support::http::result_text(&refused))
    };
    assert_eq!(env.generates().len(), sent, "a refused run sent something");
    assert!(need > 10_000, "{need}");
    assert_eq!(env.made(), 0);
    // Room for the request, not for the request and a cache of its front.
    let cap = (spent + need + need / 2).to_string();
    let mut vars = store.to_vec();
    vars.push(("GEMINI_MCP_DAILY_TOKENS", cap.as_str()));
    let server = env.http(&vars).await;
    precommit(&Raw::new(&server.url()), 3).await;
    assert_eq!(env.made(), 0, "a cache the cap leaves no room for");
    let last = env.generates().last().unwrap().body.clone();
    assert!(last.get("cachedContent").is_none(), "{last}");
    assert!(last.to_string().contains("first-version"), "sent whole");
    assert_eq!(
        last["contents"].as_array().unwrap().len(),
        1,
        "as one message"
    );
}

#[tokio::test]
async fn two_instances_on_one_redis_share_a_fronts_cache() {
    if crate::support::redis_missing() {
        return;
    }
    let env = Env::new();
    let redis = crate::support::redis::RedisServer::start();
    let url = redis.url();
    let shared = [("REDIS_URL", url.as_str()), ("GEMINI_MCP_STORE", "redis")];
    let a = env.http(&shared).await;
    let b = env.http(&shared).await;
    let (on_a, on_b) = (Raw::new(&a.url()), Raw::new(&b.url()));
    precommit(&on_a, 1).await;
    precommit(&on_b, 2).await;
    assert_eq!(env.made(), 1, "the other instance saw the front");
    let name = env.fake.caches()[0].name.clone();
    precommit(&on_a, 3).await;
    assert_eq!(env.made(), 1, "one cache for both");
    assert_eq!(env.generates()[2].body["cachedContent"], name.as_str());
}

#[tokio::test]
async fn another_clients_front_is_never_read() {
    const A: &str = "token-a-0123456789abcdef";
    const B: &str = "token-b-0123456789abcdef";
    let env = Env::new();
    let tokens = format!("{A},{B}");
    let server = env
        .http(&[("GEMINI_MCP_HTTP_TOKEN", tokens.as_str())])
        .await;
    let as_a = Raw::new(&server.url()).header("Authorization", &format!("Bearer {A}"));
    let as_b = Raw::new(&server.url()).header("Authorization", &format!("Bearer {B}"));
    precommit(&as_a, 1).await;
    precommit(&as_a, 2).await;
    assert_eq!(env.made(), 1);
    // The same bytes from another client: a first sighting, sent whole.
    precommit(&as_b, 3).await;
    let sent = &env.generates()[2].body;
    assert!(sent.get("cachedContent").is_none(), "{sent}");
    assert_eq!(env.made(), 1);
    precommit(&as_b, 4).await;
    assert_eq!(env.made(), 2, "its own cache, on its own second run");
    let names: Vec<String> = env.fake.caches().into_iter().map(|c| c.name).collect();
    assert_eq!(
        env.generates()[3].body["cachedContent"],
        names[1].as_str(),
        "{names:?}"
    );
}

/// The command line (the pre-commit hook's way in) follows the same rule on its embedded store,
/// and `--dry-run` says at each step what the run would do, sending and recording nothing.
#[test]
fn the_command_line_and_its_dry_run_follow_the_rule() {
    use crate::support::Hermetic as _;
    let env = Env::new();
    let state = tempfile::tempdir().unwrap();
    let cli = |dry: bool| -> Value {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gemini-mcp"));
        cmd.hermetic_env()
            .env("HOME", state.path().join("home"))
            .env("PROJECT_ROOT", env.dir.path())
            .env("GEMINI_MCP_STORE", "embedded")
            .env("GEMINI_MCP_STATE_DIR", state.path().join("state"))
            .env("GEMINI_API_KEY", KEY)
            .env("GEMINI_BASE_URL", env.fake.base_url())
            .env("GEMINI_CLI_PATH", state.path().join("no-gemini-cli"))
            .current_dir(env.dir.path())
            .args(["precommit", "--format", "json"]);
        if dry {
            cmd.arg("--dry-run");
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        // A review with findings exits 1; anything else is a failure.
        assert!(
            out.status.code().is_some_and(|c| c <= 1),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    };
    let notes = |v: &Value| v["notes"].to_string();
    let before = cli(true);
    assert!(
        notes(&before).contains("would be recorded as seen"),
        "{before}"
    );
    assert!(env.fake.requests().is_empty(), "a dry run sent something");
    cli(false);
    let again = cli(true);
    assert!(
        notes(&again).contains("would be made"),
        "the run was recorded: {again}"
    );
    assert_eq!(env.made(), 0);
    cli(false);
    assert_eq!(env.made(), 1);
    let after = cli(true);
    assert!(
        notes(&after).contains("made by an earlier call would serve"),
        "{after}"
    );
    let low = |p: &Value| p["cost_usd"]["low"].as_f64().unwrap();
    assert!(
        low(&after) < low(&before) / 3.0,
        "read from the cache: {} against {}",
        low(&after),
        low(&before)
    );
    assert_eq!(env.made(), 1, "a dry run made a cache");
    assert_eq!(env.generates().len(), 2);
}

/// BENCHMARKS.md, Context caching: a review re-run five times over one unchanged change of
/// about 150k tokens, at list prices, caching off and on (the stand-in's usage accounting). Run
/// with `GEMINI_MCP_BENCH_CACHE=1 cargo test --test it -- --nocapture cache_reruns::bench`.
#[tokio::test]
async fn bench_a_review_run_five_times() {
    if std::env::var("GEMINI_MCP_BENCH_CACHE").as_deref() != Ok("1") {
        return;
    }
    println!("| caching | five runs' cost (USD) | request bytes sent | caches made |");
    println!("|---|---|---|---|");
    let mut costs = Vec::new();
    for on in ["0", "1"] {
        let env = Env::new();
        for n in 0..12 {
            let name = format!("src/part{n}.rs");
            crate::support::project::write(env.dir.path(), &name, &big_file(&format!("p{n}")));
        }
        let server = env.http(&[("GEMINI_MCP_CONTEXT_CACHE", on)]).await;
        let raw = Raw::new(&server.url());
        let mut total = 0.0;
        for id in 1..=5 {
            total += cost(&precommit(&raw, id).await);
        }
        let sent: u64 = env
            .generates()
            .iter()
            .map(|r| r.body.to_string().len() as u64)
            .sum();
        let caching = if on == "1" { "on" } else { "off" };
        println!("| {caching} | {total:.4} | {sent} | {} |", env.made());
        costs.push(total);
    }
    println!("on ÷ off: {:.2}", costs[1] / costs[0]);
}

//! Explicit context caching of threads, through the real binary against the stand-in Gemini,
//! which holds `cachedContents` and refuses what the real API refuses: a first call makes no
//! cache; the second turn of a thread makes one of the system instruction and the first turn
//! and sends only the new turn beside it; the third uses it again, also from another tool; a file changed since is never
//! answered from the old cache, which is deleted; a cache gone at Google costs the call nothing but the whole
//! request; a refused creation the same; two instances on one Redis continuing one thread share
//! one cache; `threads delete` deletes it; the setting turns it off; and the tokens read from the
//! cache are billed at the cached price.

use serde_json::{Value, json};

use crate::support::fake_gemini::{CacheOp, FakeGemini};
use crate::support::http::{HttpServer, Raw, result_text};
use crate::support::mcp::KEY;

/// A file large enough to pass every model's least cacheable size (about 12k tokens).
pub(crate) fn big_file(marker: &str) -> String {
    let mut s = String::new();
    for i in 0..600 {
        s.push_str(&format!(
            "pub fn step_{i}(input: &[u8]) -> usize {{ input.iter().filter(|b| **b == {}).count() }} // {marker}\n",
            i % 251
        ));
    }
    s
}

struct Env {
    dir: tempfile::TempDir,
    fake: FakeGemini,
}

impl Env {
    fn new() -> Env {
        Env {
            dir: crate::support::project::with(&[("src/big.rs", &big_file("first-version"))]),
            fake: FakeGemini::start(),
        }
    }

    async fn http(&self, extra: &[(&str, &str)]) -> HttpServer {
        let url = self.fake.base_url();
        let mut vars = vec![("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", url.as_str())];
        vars.extend_from_slice(extra);
        HttpServer::start(self.dir.path(), &vars).await
    }

    /// The generate requests, oldest first.
    fn generates(&self) -> Vec<crate::support::fake_gemini::Recorded> {
        self.fake.generate_requests()
    }
}

async fn chat(raw: &Raw, id: u64, prompt: &str, thread: Option<&str>) -> Value {
    let mut args = json!({"prompt": prompt});
    match thread {
        Some(t) => args["continuation_id"] = json!(t),
        None => args["files"] = json!(["src/big.rs"]),
    }
    let answer = raw.call(id, "chat", args).await.message;
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    answer
}

fn thread_of(answer: &Value) -> String {
    answer["result"]["structuredContent"]["continuation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no thread: {answer}"))
        .to_string()
}

#[tokio::test]
async fn a_thread_pays_once_for_its_front() {
    let env = Env::new();
    let server = env.http(&[("GEMINI_MCP_STORE", "embedded")]).await;
    let raw = Raw::new(&server.url());

    let first = chat(&raw, 1, "what does big.rs do?", None).await;
    let thread = thread_of(&first);
    assert_eq!(
        env.fake.cache_calls(CacheOp::Create),
        0,
        "a first call makes no cache"
    );
    assert!(env.generates()[0].body.get("cachedContent").is_none());

    let second = chat(&raw, 2, "and step_7?", Some(&thread)).await;
    assert_eq!(
        env.fake.cache_calls(CacheOp::Create),
        1,
        "the second turn makes one"
    );
    let made = &env.fake.cache_requests(CacheOp::Create)[0].body;
    let held = env.fake.caches();
    assert_eq!(held.len(), 1);
    // It holds the system instruction and the first exchange, the big file in it.
    assert!(made["systemInstruction"].is_object(), "{made}");
    assert_eq!(made["contents"].as_array().unwrap().len(), 2, "{made}");
    assert!(made["contents"].to_string().contains("first-version"));
    let ttl: u64 = made["ttl"]
        .as_str()
        .unwrap()
        .trim_end_matches('s')
        .parse()
        .unwrap();
    assert!((60..=600).contains(&ttl), "ttl {ttl}");
    let sent = &env.generates()[1].body;
    assert_eq!(sent["cachedContent"], held[0].name.as_str(), "{sent}");
    assert!(sent.get("systemInstruction").is_none(), "{sent}");
    let contents = sent["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 1, "only the new turn is sent: {sent}");
    assert!(
        !sent.to_string().contains("first-version"),
        "the cached file is not sent again"
    );
    // What Gemini read is the whole conversation: it answers the second turn of two.
    assert!(
        result_text(&second).contains("turns=2"),
        "{}",
        result_text(&second)
    );
    let usage = &second["result"]["structuredContent"]["usage"];
    assert!(usage["cached"].as_u64().unwrap() > 10_000, "{usage}");

    let third = chat(&raw, 3, "and step_9?", Some(&thread)).await;
    // The thread's cost is the sum of its calls' costs, the cache's creation and storage
    // (counted in the second call's) included.
    let cost = |a: &Value, k: &str| {
        a["result"]["structuredContent"]["usage"][k]
            .as_f64()
            .unwrap()
    };
    let calls = cost(&first, "cost_usd") + cost(&second, "cost_usd") + cost(&third, "cost_usd");
    let thread_cost = cost(&third, "thread_cost_usd");
    assert!(
        (thread_cost - calls).abs() < 1e-6,
        "thread {thread_cost} against calls {calls}"
    );
    // The second call paid for the cache: more than the first, whose input was larger.
    assert!(cost(&second, "cost_usd") > cost(&third, "cost_usd"));
    assert_eq!(
        env.fake.cache_calls(CacheOp::Create),
        1,
        "the third turn uses the same cache"
    );
    let sent = &env.generates()[2].body;
    assert_eq!(sent["cachedContent"], held[0].name.as_str());
    assert_eq!(
        sent["contents"].as_array().unwrap().len(),
        3,
        "the turns past the cache: {sent}"
    );
    assert!(
        result_text(&third).contains("turns=3"),
        "{}",
        result_text(&third)
    );

    // The metrics count the cache made once and used by the second and third turns.
    let scraped = server.metrics().await;
    for line in [
        "gemini_mcp_context_caches_total{outcome=\"made\"} 1",
        "gemini_mcp_context_caches_total{outcome=\"used\"} 2",
    ] {
        assert!(scraped.contains(line), "{line} not in:\n{scraped}");
    }

    // Deleting the thread deletes its cache at Google.
    let url = env.fake.base_url();
    let out = crate::support::mcp::std_command(
        env.dir.path(),
        &[
            ("GEMINI_API_KEY", KEY),
            ("GEMINI_BASE_URL", url.as_str()),
            ("GEMINI_MCP_STORE", "embedded"),
        ],
    )
    .args(["threads", "delete", &thread])
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(env.fake.cache_calls(CacheOp::Delete), 1);
    assert!(
        env.fake.caches().is_empty(),
        "the cache outlived its thread"
    );
}

/// One cache serves a thread across tools: made on the second turn whatever its tool, it holds
/// that call's system instruction; a call of another tool sends its own instructions at the head
/// of its new turn (nothing may go beside `cachedContent`), and the stand-in, which answers from
/// the cache's contents with the request's, reads the whole conversation.
#[tokio::test]
async fn one_cache_serves_a_thread_across_tools() {
    let env = Env::new();
    crate::support::project::write(env.dir.path(), "src/small.rs", "pub fn small() {}\n");
    let server = env.http(&[]).await;
    let raw = Raw::new(&server.url());
    let first = chat(&raw, 1, "what does big.rs do?", None).await;
    let thread = thread_of(&first);
    let review = raw
        .call(
            2,
            "codereview",
            json!({"files": ["src/small.rs"], "context": "the counters", "continuation_id": thread}),
        )
        .await
        .message;
    assert_ne!(review["result"]["isError"], true, "{review}");
    assert_eq!(
        env.fake.cache_calls(CacheOp::Create),
        1,
        "the second turn makes one, though its tool is another"
    );
    let held = env.fake.caches();
    let made = &env.fake.cache_requests(CacheOp::Create)[0].body;
    assert!(
        made["systemInstruction"].to_string().contains("review"),
        "the cache holds the call's own system instruction: {made}"
    );
    // A chat now: the same cache, the chat's instructions in its turn, no system instruction.
    let third = chat(&raw, 3, "and step_9?", Some(&thread)).await;
    assert_eq!(env.fake.cache_calls(CacheOp::Create), 1, "no second cache");
    let sent = &env.generates()[2];
    assert_eq!(
        sent.body["cachedContent"],
        held[0].name.as_str(),
        "{}",
        sent.body
    );
    assert!(
        sent.body.get("systemInstruction").is_none(),
        "{}",
        sent.body
    );
    let turn = sent.last_user_text();
    assert!(turn.starts_with("# Instructions for this turn"), "{turn}");
    assert!(
        turn.contains("thinking partner"),
        "the chat's own prompt: {turn}"
    );
    assert!(
        !sent.raw_body.contains("first-version"),
        "the cached file is not sent again"
    );
    assert!(
        result_text(&third).contains("turns=3"),
        "{}",
        result_text(&third)
    );
    let usage = &third["result"]["structuredContent"]["usage"];
    assert!(usage["cached"].as_u64().unwrap() > 10_000, "{usage}");
}

#[tokio::test]
async fn a_changed_file_is_never_answered_from_the_old_cache() {
    let env = Env::new();
    let server = env.http(&[]).await;
    let raw = Raw::new(&server.url());
    let thread = thread_of(&chat(&raw, 1, "read it", None).await);
    chat(&raw, 2, "again", Some(&thread)).await;
    assert_eq!(env.fake.cache_calls(CacheOp::Create), 1);
    let old = env.fake.caches()[0].name.clone();

    crate::support::project::write(env.dir.path(), "src/big.rs", &big_file("second-version"));
    chat(&raw, 3, "and now?", Some(&thread)).await;
    let last = env.generates().last().unwrap().clone();
    assert_ne!(
        last.body["cachedContent"],
        old.as_str(),
        "the old cache was used"
    );
    let read = last.effective_body().to_string();
    assert!(
        read.contains("second-version"),
        "Gemini did not read the new content"
    );
    assert!(
        !read.contains("first-version"),
        "Gemini read the old content"
    );
    // The history now says the file changed and the new turn carries its new content: the
    // old cache serves nothing and is deleted (in the background).
    let mut deleted = false;
    for _ in 0..100 {
        deleted = env.fake.cache_calls(CacheOp::Delete) == 1;
        if deleted {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(deleted, "the replaced cache was not deleted");
}

#[tokio::test]
async fn a_cache_gone_at_google_costs_only_the_whole_request() {
    let env = Env::new();
    let server = env.http(&[]).await;
    let raw = Raw::new(&server.url());
    let thread = thread_of(&chat(&raw, 1, "read it", None).await);
    chat(&raw, 2, "again", Some(&thread)).await;
    let name = env.fake.caches()[0].name.clone();
    assert!(env.fake.vanish_cache(&name));

    let third = chat(&raw, 3, "still there?", Some(&thread)).await;
    assert!(
        result_text(&third).contains("turns=3"),
        "{}",
        result_text(&third)
    );
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
    // The lost cache is forgotten: the next turn makes a new one.
    chat(&raw, 4, "once more", Some(&thread)).await;
    assert_eq!(env.fake.cache_calls(CacheOp::Create), 2);
    assert_ne!(
        env.generates().last().unwrap().body["cachedContent"],
        name.as_str()
    );
}

#[tokio::test]
async fn a_refused_cache_costs_only_the_whole_request_and_the_setting_turns_it_off() {
    let env = Env::new();
    let server = env.http(&[]).await;
    let raw = Raw::new(&server.url());
    let thread = thread_of(&chat(&raw, 1, "read it", None).await);
    env.fake.fail_next_cache_create();
    let second = chat(&raw, 2, "again", Some(&thread)).await;
    assert!(result_text(&second).contains("turns=2"));
    assert!(env.generates()[1].body.get("cachedContent").is_none());
    assert!(env.fake.caches().is_empty());

    let off = Env::new();
    let server = off.http(&[("GEMINI_MCP_CONTEXT_CACHE", "0")]).await;
    let raw = Raw::new(&server.url());
    let thread = thread_of(&chat(&raw, 1, "read it", None).await);
    chat(&raw, 2, "again", Some(&thread)).await;
    chat(&raw, 3, "again", Some(&thread)).await;
    assert_eq!(off.fake.cache_calls(CacheOp::Create), 0);
}

#[tokio::test]
async fn two_instances_on_one_redis_share_a_threads_cache() {
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
    let thread = thread_of(&chat(&on_a, 1, "read it", None).await);
    chat(&on_a, 2, "again", Some(&thread)).await;
    let third = chat(&on_b, 3, "on the other instance", Some(&thread)).await;
    assert!(result_text(&third).contains("turns=3"));
    assert_eq!(
        env.fake.cache_calls(CacheOp::Create),
        1,
        "one cache for the thread"
    );
    let name = env.fake.caches()[0].name.clone();
    assert_eq!(env.generates()[2].body["cachedContent"], name.as_str());
}

/// BENCHMARKS.md, Context caching: a five-turn thread over about 150k tokens of files, at list
/// prices, caching off and on, the stand-in's usage accounting: the mix of tools (chat,
/// codereview, analyze, chat, chat) and five chats. Run with `GEMINI_MCP_BENCH_CACHE=1 cargo
/// test --test it -- --nocapture context_cache::bench`.
#[tokio::test]
async fn bench_a_five_turn_thread() {
    if std::env::var("GEMINI_MCP_BENCH_CACHE").as_deref() != Ok("1") {
        return;
    }
    println!("| tools | caching | thread cost (USD) | request bytes sent | caches made |");
    println!("|---|---|---|---|---|");
    for mixed in [true, false] {
        let mut costs = Vec::new();
        for on in ["0", "1"] {
            let env = Env::new();
            let mut files = Vec::new();
            for n in 0..12 {
                let name = format!("src/part{n}.rs");
                crate::support::project::write(env.dir.path(), &name, &big_file(&format!("p{n}")));
                files.push(name);
            }
            let server = env.http(&[("GEMINI_MCP_CONTEXT_CACHE", on)]).await;
            let raw = Raw::new(&server.url());
            let first = raw
                .call(
                    1,
                    "chat",
                    json!({"prompt": "what do these do?", "files": files}),
                )
                .await
                .message;
            let thread = thread_of(&first);
            let chat = |q: &str| ("chat", json!({"prompt": q, "continuation_id": thread}));
            let calls = if mixed {
                vec![
                    (
                        "codereview",
                        json!({"files": files, "context": "review them", "continuation_id": thread}),
                    ),
                    (
                        "analyze",
                        json!({"files": files, "question": "how do they fit?", "continuation_id": thread}),
                    ),
                    chat("and step_3?"),
                    chat("and step_5?"),
                ]
            } else {
                vec![
                    chat("and step_1?"),
                    chat("and step_2?"),
                    chat("and step_3?"),
                    chat("and step_5?"),
                ]
            };
            let mut last = first;
            for (i, (tool, args)) in calls.into_iter().enumerate() {
                last = raw.call(i as u64 + 2, tool, args).await.message;
                assert_ne!(last["result"]["isError"], true, "{last}");
            }
            let usage = &last["result"]["structuredContent"]["usage"];
            let sent: u64 = env
                .generates()
                .iter()
                .map(|r| r.body.to_string().len() as u64)
                .sum();
            let cost = usage["thread_cost_usd"].as_f64().unwrap();
            let made = env.fake.cache_calls(CacheOp::Create);
            let tools = if mixed {
                "chat, codereview, analyze, chat, chat"
            } else {
                "five chats"
            };
            let caching = if on == "1" { "on" } else { "off" };
            println!("| {tools} | {caching} | {cost:.4} | {sent} | {made} |");
            costs.push(cost);
        }
        println!(
            "on ÷ off ({}): {:.2}",
            if mixed { "mixed" } else { "chats" },
            costs[1] / costs[0]
        );
    }
}

#[tokio::test]
async fn an_investigation_caches_its_growing_front_and_deletes_it_at_the_end() {
    use crate::support::fake_gemini::Script;
    let env = Env::new();
    let server = env.http(&[]).await;
    let raw = Raw::new(&server.url());
    env.fake
        .push(Script::calls(
            &[("list_files", json!({"path": "src"}))],
            "c2lnLTE=",
            [1000, 20, 50],
        ))
        .push(Script::calls(
            &[(
                "read_file",
                json!({"path": "src/big.rs", "start_line": 1, "end_line": 600}),
            )],
            "c2lnLTI=",
            [1200, 20, 40],
        ))
        .push(Script::calls(
            &[("search_text", json!({"pattern": "step_7"}))],
            "c2lnLTM=",
            [16000, 20, 40],
        ))
        .push(Script::calls(
            &[("search_text", json!({"pattern": "step_9"}))],
            "c2lnLTQ=",
            [16500, 20, 40],
        ))
        .push(
            Script::text("step_7 counts bytes equal to 7 (src/big.rs:8).").usage(17000, 40, 60, 0),
        );
    let answer = raw
        .call(1, "investigate", json!({"task": "What does step_7 count?"}))
        .await
        .message;
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    assert!(
        result_text(&answer).contains("step_7 counts bytes"),
        "{}",
        result_text(&answer)
    );

    let sent = env.generates();
    assert_eq!(sent.len(), 5, "one request per step and the answer");
    // The front is cached once it holds the file read: from the fourth request (each request
    // adds the latest step's results, which the next one's cache holds).
    assert!(
        sent[..3]
            .iter()
            .all(|r| r.body.get("cachedContent").is_none())
    );
    assert_eq!(
        env.fake.cache_calls(CacheOp::Create),
        1,
        "one cache, from the fourth request"
    );
    let made = &env.fake.cache_requests(CacheOp::Create)[0].body;
    assert!(
        made["tools"].to_string().contains("read_file"),
        "the declarations are cached: {made}"
    );
    assert!(
        made["contents"].to_string().contains("first-version"),
        "the file read is cached"
    );
    for later in &sent[3..] {
        assert!(later.body.get("cachedContent").is_some(), "{}", later.body);
        assert!(later.body.get("tools").is_none() && later.body.get("systemInstruction").is_none());
        assert!(
            !later.body.to_string().contains("step_200"),
            "the read file sent again"
        );
    }
    // What Gemini read is the whole investigation each time.
    assert!(sent[4].effective_body().to_string().contains("step_200"));
    // The call's own cache is deleted when it ends.
    let mut deleted = false;
    for _ in 0..100 {
        deleted = env.fake.cache_calls(CacheOp::Delete) == 1;
        if deleted {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(deleted, "the investigation's cache outlived it");
}

/// BENCHMARKS.md, Context caching: a 20-step investigation (one read of a 14k-token file, then
/// searches), caching off and on: the request bytes sent and the cache calls (the stand-in's
/// usage figures for function-call turns are scripted, so cost is not compared here). Run with
/// `GEMINI_MCP_BENCH_CACHE=1 cargo test --test it -- --nocapture context_cache::bench_an`.
#[tokio::test]
async fn bench_an_investigation_of_twenty_steps() {
    use crate::support::fake_gemini::Script;
    if std::env::var("GEMINI_MCP_BENCH_CACHE").as_deref() != Ok("1") {
        return;
    }
    println!("| caching | requests | request bytes sent | caches made |");
    println!("|---|---|---|---|");
    let mut bytes = Vec::new();
    for on in ["0", "1"] {
        let env = Env::new();
        let server = env.http(&[("GEMINI_MCP_CONTEXT_CACHE", on)]).await;
        let raw = Raw::new(&server.url());
        env.fake.push(Script::calls(
            &[(
                "read_file",
                json!({"path": "src/big.rs", "start_line": 1, "end_line": 600}),
            )],
            "c2lnLTE=",
            [1000, 20, 40],
        ));
        for i in 0..19 {
            env.fake.push(Script::calls(
                &[(
                    "search_text",
                    json!({"pattern": format!("step_{}(", i * 13)}),
                )],
                "c2lnLTI=",
                [1000, 20, 40],
            ));
        }
        env.fake.push(Script::text("done (src/big.rs:1)."));
        let answer = raw
            .call(
                1,
                "investigate",
                json!({"task": "Map the steps.", "max_steps": 25}),
            )
            .await
            .message;
        assert_ne!(answer["result"]["isError"], true, "{answer}");
        let sent = env.generates();
        let total: u64 = sent.iter().map(|r| r.body.to_string().len() as u64).sum();
        let made = env.fake.cache_calls(CacheOp::Create);
        println!(
            "| {} | {} | {total} | {made} |",
            if on == "1" { "on" } else { "off" },
            sent.len()
        );
        bytes.push(total);
    }
    println!("bytes on ÷ off: {:.2}", bytes[1] as f64 / bytes[0] as f64);
}

/// The figures of a daily-token-cap refusal: tokens spent today, and the request's estimate.
pub(crate) fn refused_figures(text: &str) -> (u64, u64) {
    let number_before = |marker: &str| -> u64 {
        let head = &text[..text
            .find(marker)
            .unwrap_or_else(|| panic!("{marker} not in {text}"))];
        head.trim_end().rsplit(' ').next().unwrap().parse().unwrap()
    };
    let spent = number_before(" tokens spent today");
    let after = &text[text.find("needs about ").unwrap() + "needs about ".len()..];
    let need = after.split(' ').next().unwrap().parse().unwrap();
    (spent, need)
}

#[tokio::test]
async fn a_cap_that_fits_the_request_but_not_its_cache_sends_the_request_whole() {
    let env = Env::new();
    let store = [("GEMINI_MCP_STORE", "embedded")];
    let thread = {
        let server = env.http(&store).await;
        let raw = Raw::new(&server.url());
        thread_of(&chat(&raw, 1, "read it", None).await)
    };
    // What the second turn needs, and what the first spent, as the cap counts them.
    let (spent, need) = {
        let server = env
            .http(&[store[0], ("GEMINI_MCP_DAILY_TOKENS", "1")])
            .await;
        let raw = Raw::new(&server.url());
        let refused = raw
            .call(
                2,
                "chat",
                json!({"prompt": "again", "continuation_id": thread}),
            )
            .await
            .message;
        assert_eq!(refused["result"]["isError"], true, "{refused}");
        refused_figures(&result_text(&refused))
    };
    assert!(need > 10_000, "{need}");
    assert_eq!(env.fake.cache_calls(CacheOp::Create), 0);
    // Room for the request, not for the request and a cache of its front.
    let cap = (spent + need + need / 2).to_string();
    let server = env
        .http(&[store[0], ("GEMINI_MCP_DAILY_TOKENS", cap.as_str())])
        .await;
    let raw = Raw::new(&server.url());
    let second = chat(&raw, 3, "again", Some(&thread)).await;
    assert!(
        result_text(&second).contains("turns=2"),
        "{}",
        result_text(&second)
    );
    assert_eq!(
        env.fake.cache_calls(CacheOp::Create),
        0,
        "a cache the cap leaves no room for"
    );
    assert!(
        env.generates()
            .last()
            .unwrap()
            .body
            .get("cachedContent")
            .is_none()
    );
}

/// The caches' create bodies and the requests naming a cache, as this binary sends them (a
/// thread, an investigation, Vertex AI), held to google-genai's own types: the create body to
/// `CreateCachedContentConfig` (and its converter), the request to `GenerateContentConfig`.
#[cfg(unix)]
pub(crate) fn hold_to_google_genai(fake: &FakeGemini, backend: &str) {
    let python = match crate::wire_schema::genai_python() {
        Ok(p) => p,
        Err(why) => {
            if crate::support::skip_when(Some(why), "GEMINI_MCP_REQUIRE_GENAI") {
                return;
            }
            unreachable!("skip_when panics when the environment is required");
        }
    };
    let mut records = Vec::new();
    for (i, made) in fake.cache_requests(CacheOp::Create).iter().enumerate() {
        records.push(
            json!({"name": format!("{backend}: cache {i}"), "backend": backend,
                            "cache_create": made.body}),
        );
    }
    for (i, sent) in fake.generate_requests().iter().enumerate() {
        if sent.body.get("cachedContent").is_some() {
            records.push(
                json!({"name": format!("{backend}: request {i} from a cache"),
                "backend": backend, "model": sent.model.clone().unwrap_or_default(),
                "body": sent.body}),
            );
        }
    }
    assert!(records.len() >= 2, "nothing to hold: {records:?}");
    let (ok, report) = crate::wire_schema::validate(&python, &records);
    assert!(ok, "{report}");
    assert!(
        report.contains(&format!("google-genai: {} passed, 0 failed", records.len())),
        "{report}"
    );
}

/// google-genai's environment is a Linux one (`wire_schema`).
#[cfg(not(unix))]
pub(crate) fn hold_to_google_genai(_: &FakeGemini, _: &str) {}

#[tokio::test]
async fn what_we_send_for_caches_is_google_genais() {
    use crate::support::fake_gemini::Script;
    let env = Env::new();
    let server = env.http(&[]).await;
    let raw = Raw::new(&server.url());
    let thread = thread_of(&chat(&raw, 1, "read it", None).await);
    chat(&raw, 2, "again", Some(&thread)).await;
    chat(&raw, 3, "and again", Some(&thread)).await;
    env.fake
        .push(Script::calls(
            &[(
                "read_file",
                json!({"path": "src/big.rs", "start_line": 1, "end_line": 600}),
            )],
            "c2lnLTE=",
            [1000, 20, 40],
        ))
        .push(Script::calls(
            &[("search_text", json!({"pattern": "step_7"}))],
            "c2lnLTI=",
            [9000, 20, 40],
        ))
        .push(Script::calls(
            &[("search_text", json!({"pattern": "step_9"}))],
            "c2lnLTM=",
            [9500, 20, 40],
        ))
        .push(Script::text("done (src/big.rs:8)."));
    let answer = raw
        .call(4, "investigate", json!({"task": "What does step_7 count?"}))
        .await
        .message;
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(
        env.fake.cache_calls(CacheOp::Create),
        2,
        "a thread's cache and an investigation's"
    );
    hold_to_google_genai(&env.fake, "api");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vertex_ai_keeps_the_cache_under_the_project_and_location() {
    let env = Env::new();
    env.fake.require_bearer(|t| t.starts_with("mds-token-"));
    let mds = crate::vertex::Metadata::start(3600).await;
    let host = mds.addr.to_string();
    let url = env.fake.base_url();
    let vars = [
        ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
        ("GOOGLE_CLOUD_PROJECT", "my-proj"),
        ("GOOGLE_CLOUD_LOCATION", "us-central1"),
        ("GOOGLE_VERTEX_BASE_URL", url.as_str()),
        ("GCE_METADATA_HOST", host.as_str()),
    ];
    let client = crate::support::mcp::start(env.dir.path(), &vars).await;
    let call = async |args: Value| {
        let r = crate::support::mcp::call(&client, "chat", args)
            .await
            .unwrap();
        assert_ne!(r.is_error, Some(true), "{}", crate::support::mcp::text(&r));
        r.structured_content.unwrap()
    };
    let first = call(json!({"prompt": "read it", "files": ["src/big.rs"]})).await;
    let thread = first["continuation_id"].as_str().unwrap().to_string();
    call(json!({"prompt": "again", "continuation_id": thread})).await;
    let made = env.fake.cache_requests(CacheOp::Create);
    assert_eq!(made.len(), 1);
    assert_eq!(
        made[0].path,
        "/v1/projects/my-proj/locations/us-central1/cachedContents"
    );
    assert!(
        made[0].body["model"]
            .as_str()
            .unwrap()
            .starts_with("projects/my-proj/locations/us-central1/publishers/google/models/"),
        "{}",
        made[0].body
    );
    let sent = &env.generates()[1].body;
    let name = sent["cachedContent"].as_str().unwrap();
    assert!(
        name.starts_with("projects/my-proj/locations/us-central1/cachedContents/"),
        "{name}"
    );
    assert!(sent.get("systemInstruction").is_none());
    drop(client);
    hold_to_google_genai(&env.fake, "vertex");
}

#[tokio::test]
async fn a_cache_holds_what_the_request_holds_redacted_and_never_a_secret_file() {
    const TOKEN: &str = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";
    let env = Env::new();
    crate::support::project::write(
        env.dir.path(),
        "src/big.rs",
        &format!(
            "{}const GITHUB: &str = \"{TOKEN}\";\n",
            big_file("first-version")
        ),
    );
    crate::support::project::write(env.dir.path(), ".env", &format!("GITHUB_TOKEN={TOKEN}\n"));
    let server = env.http(&[]).await;
    let raw = Raw::new(&server.url());
    // The secret file is refused as in any call; the token in the source is redacted.
    let refused = raw
        .call(1, "chat", json!({"prompt": "read", "files": [".env"]}))
        .await
        .message;
    assert_eq!(refused["error"]["code"], -32001, "{refused}");
    let thread = thread_of(&chat(&raw, 2, "read it", None).await);
    chat(&raw, 3, "again", Some(&thread)).await;
    assert_eq!(env.fake.cache_calls(CacheOp::Create), 1);
    let made = env.fake.cache_requests(CacheOp::Create)[0].body.to_string();
    assert!(made.contains("first-version"), "the file is in the cache");
    assert!(!made.contains(TOKEN), "the token reached the cache");
    assert!(
        made.contains("[REDACTED"),
        "no redaction marker in the cache"
    );
    assert!(
        env.fake
            .requests()
            .iter()
            .all(|r| !r.body.to_string().contains(TOKEN)),
        "the token reached Gemini"
    );
}

/// `--dry-run` says what the cache step would do, by the call's own rule: on a thread's second
/// turn of one tool, that a cache would be made (its creation and storage in the cost); on the
/// third, that the thread's cache would serve the earlier turns. Nothing is made or sent.
#[test]
fn a_dry_run_says_what_the_cache_would_do_and_prices_it() {
    use crate::support::Hermetic as _;
    let env = Env::new();
    let state = tempfile::tempdir().unwrap();
    let cli = |args: &[&str], extra: &[(&str, &str)]| -> Value {
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
            .args(args)
            .args(["--format", "json"]);
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    };
    let first = cli(&["chat", "what does big.rs do?", "-f", "src/big.rs"], &[]);
    let thread = first["continuation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{first}"))
        .to_string();
    let sent_before = env.fake.requests().len();

    let second = [
        "chat",
        "and step_7?",
        "--continuation-id",
        &thread,
        "--dry-run",
    ];
    let on = cli(&second, &[]);
    let off = cli(&second, &[("GEMINI_MCP_CONTEXT_CACHE", "0")]);
    assert_eq!(
        env.fake.requests().len(),
        sent_before,
        "a dry run sent something"
    );
    let notes = on["notes"].to_string();
    assert!(notes.contains("would be made"), "{on}");
    assert!(!off["notes"].to_string().contains("context cache"), "{off}");
    // Made now, the cache costs its creation and storage on top of a cheaper request: the
    // lowest cost (no answer) is higher with it than without, on the same input.
    assert_eq!(on["input"]["total"], off["input"]["total"]);
    let low = |p: &Value| p["cost_usd"]["low"].as_f64().unwrap();
    assert!(low(&on) > low(&off), "on {} off {}", low(&on), low(&off));

    // The second turn made for real makes the cache; a third turn's dry run reads from it.
    cli(&["chat", "and step_7?", "--continuation-id", &thread], &[]);
    assert_eq!(env.fake.cache_calls(CacheOp::Create), 1);
    let third = [
        "chat",
        "and step_9?",
        "--continuation-id",
        &thread,
        "--dry-run",
    ];
    let on = cli(&third, &[]);
    let off = cli(&third, &[("GEMINI_MCP_CONTEXT_CACHE", "0")]);
    assert!(
        on["notes"]
            .to_string()
            .contains("context cache would serve"),
        "{on}"
    );
    assert!(
        low(&on) < low(&off) / 3.0,
        "read from the cache, the front costs a tenth: on {} off {}",
        low(&on),
        low(&off)
    );
    assert_eq!(
        env.fake.cache_calls(CacheOp::Create),
        1,
        "a dry run made a cache"
    );
}

//! `/metrics` as Prometheus scrapes it: the real binary over HTTP against the stand-in Gemini,
//! calls of several tools and outcomes made, the page parsed with a Prometheus text parser
//! (`prometheus-parse`) and its counters compared with the calls made and with the usage the
//! stand-in reported; who may read it; and the Grafana dashboard's queries checked against the
//! metrics the server exports.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::fake_gemini::{FakeGemini, Script};
use crate::support::http::{HttpServer, Raw};
use crate::support::mcp::KEY;
use crate::support::redis::RedisServer;

const CLIENT_TOKEN: &str = "client-token-0123456789abcdef";
const METRICS_TOKEN: &str = "metrics-token-fedcba9876543210";

/// A parsed scrape.
pub struct Scraped {
    pub text: String,
    samples: Vec<prometheus_parse::Sample>,
}

impl Scraped {
    fn parse(text: String) -> Scraped {
        let lines = text.lines().map(|l| Ok(l.to_string()));
        let scrape = prometheus_parse::Scrape::parse(lines).expect("a Prometheus text page");
        Scraped {
            text,
            samples: scrape.samples,
        }
    }

    /// The value of the series `name` whose labels are exactly `labels` (0 when there is none:
    /// a counter never incremented has no series).
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let want: HashMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let found: Vec<f64> = self
            .samples
            .iter()
            .filter(|s| s.metric == name && *s.labels == want)
            .map(|s| match &s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => *v,
                other => panic!("{name} is not a single value: {other:?}"),
            })
            .collect();
        assert!(found.len() <= 1, "{name} {labels:?} twice:\n{}", self.text);
        found.first().copied().unwrap_or(0.0)
    }

    /// `gemini_mcp_tool_calls_total` of `tool`, `model` and `outcome`.
    pub fn calls(&self, tool: &str, model: &str, outcome: &str) -> f64 {
        self.value(
            "gemini_mcp_tool_calls_total",
            &[("tool", tool), ("model", model), ("outcome", outcome)],
        )
    }

    /// The sum of `name` over every series whose labels include `labels`.
    fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.metric == name)
            .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .map(|s| match &s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => *v,
                _ => 0.0,
            })
            .sum()
    }

    /// The names of the series in the scrape (a family with no series yet has none).
    fn names(&self) -> BTreeSet<String> {
        self.text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .filter_map(|l| l.split(['{', ' ']).next())
            .map(String::from)
            .collect()
    }
}

/// `GET /metrics` with `token` as bearer token and `accept`: status, content type, body.
async fn get_metrics(
    server: &HttpServer,
    token: Option<&str>,
    accept: Option<&str>,
) -> (u16, String, String) {
    let mut req = reqwest::Client::new()
        .get(format!("{}/metrics", server.base))
        .timeout(Duration::from_secs(30));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    let resp = req.send().await.expect("GET /metrics");
    let status = resp.status().as_u16();
    let kind = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (status, kind, resp.text().await.unwrap_or_default())
}

/// `/metrics` of `server` in the Prometheus text format, parsed.
pub async fn scrape(server: &HttpServer, token: Option<&str>) -> Scraped {
    let (status, kind, text) = get_metrics(server, token, None).await;
    assert_eq!(status, 200, "{text}");
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    Scraped::parse(text)
}

/// One call's tool, what its reply said (model, usage, cost, fallback) and how long the client
/// waited for it.
struct Made {
    tool: &'static str,
    reply: Value,
    waited: Duration,
}

impl Made {
    fn ok(&self) -> bool {
        self.reply["result"].is_object() && self.reply["result"]["isError"] != true
    }
    fn structured(&self) -> &Value {
        &self.reply["result"]["structuredContent"]
    }
    fn model(&self) -> String {
        self.structured()["model"]
            .as_str()
            .unwrap_or_else(|| panic!("no model in {}", self.reply))
            .to_string()
    }
}

async fn make(raw: &Raw, id: u64, tool: &'static str, args: Value) -> Made {
    let started = Instant::now();
    let a = raw.call(id, tool, args).await;
    assert_eq!(a.status, 200, "{}", a.text);
    Made {
        tool,
        reply: a.message,
        waited: started.elapsed(),
    }
}

/// Calls of four tools with every kind of outcome, then one scrape: each counter equals what
/// was made — calls by tool, model and outcome, the gate's refusal, Gemini's retries and the
/// fallback, requests by outcome, the tokens the stand-in reported and the cost the replies
/// estimated — and our own time never includes the wait on Gemini. Then the thread store goes
/// down: the call it fails is counted, and so is the store's error. The last scrape, every
/// family in it, holds every metric the Grafana dashboard queries.
#[tokio::test]
async fn the_counters_match_the_calls_made() {
    if crate::support::redis_missing() {
        return;
    }
    let dir = crate::support::project::with(&[crate::support::project::MAIN_RS]);
    let fake = FakeGemini::start();
    let url = fake.base_url();
    let mut redis = RedisServer::start();
    let redis_url = redis.url();
    let server = HttpServer::start(
        dir.path(),
        &[
            ("GEMINI_API_KEY", KEY),
            ("GEMINI_BASE_URL", url.as_str()),
            ("REDIS_URL", &redis_url),
            ("GEMINI_MCP_STORE", "redis"),
            ("GEMINI_MCP_HTTP_TOKEN", CLIENT_TOKEN),
            ("GEMINI_MCP_METRICS_TOKEN", METRICS_TOKEN),
            ("GEMINI_MCP_RATE_LIMITS", "chat=3/min"),
            ("GEMINI_MAX_ATTEMPTS", "2"),
            ("GEMINI_RETRY_INITIAL_MS", "1"),
            ("GEMINI_RETRY_MAX_MS", "5"),
        ],
    )
    .await;
    let raw = Raw::new(&server.url()).header("authorization", &format!("Bearer {CLIENT_TOKEN}"));

    // Before any call: every family is there, and nothing counted.
    let before = scrape(&server, Some(METRICS_TOKEN)).await;
    assert_eq!(before.sum("gemini_mcp_tool_calls_total", &[]), 0.0);
    assert_eq!(before.value("gemini_mcp_tool_calls_in_flight", &[]), 0.0);

    let gemini_delay = Duration::from_millis(400);
    let mut made = Vec::new();
    // 1. chat, answered after a delay.
    fake.push(
        Script::text("first")
            .usage(120, 11, 7, 40)
            .delay_headers(gemini_delay),
    );
    made.push(make(&raw, 1, "chat", json!({"prompt": "one"})).await);
    // 2. chat: a 503, retried, then answered.
    fake.push(Script::overloaded());
    fake.push(Script::text("second").usage(230, 22, 0, 0));
    made.push(make(&raw, 2, "chat", json!({"prompt": "two"})).await);
    // 3. debug: a 400, never retried: the call fails.
    fake.push(Script::error(400, "INVALID_ARGUMENT", "bad request"));
    made.push(make(&raw, 3, "debug", json!({"error_description": "boom"})).await);
    // 4. thinkdeep: 503 on every attempt, then the fallback model answers.
    fake.push(Script::overloaded());
    fake.push(Script::overloaded());
    fake.push(Script::text("fallen back").usage(340, 33, 12, 100));
    made.push(make(&raw, 4, "thinkdeep", json!({"current_analysis": "four"})).await);
    // 5. chat, the third within the rate.
    fake.push(Script::text("third").usage(450, 44, 0, 200));
    made.push(make(&raw, 5, "chat", json!({"prompt": "five"})).await);
    // 6. chat over its rate: refused by the gate, never reaching Gemini.
    made.push(make(&raw, 6, "chat", json!({"prompt": "six"})).await);
    assert_eq!(fake.pending(), 0, "every scripted answer was used");

    let oks: Vec<&Made> = made.iter().filter(|m| m.ok()).collect();
    assert_eq!(oks.len(), 4, "calls 1, 2, 4, 5 succeed");
    assert!(!made[2].ok() && !made[5].ok());
    let requested = made[0].model();
    let fallback = made[3].structured()["fallback"]["to"]
        .as_str()
        .unwrap_or_else(|| panic!("no fallback in {}", made[3].reply))
        .to_string();
    assert_eq!(made[3].model(), fallback);
    assert_ne!(requested, fallback);

    let m = scrape(&server, Some(METRICS_TOKEN)).await;
    assert_eq!(m.calls("chat", &requested, "ok"), 3.0, "{}", m.text);
    assert_eq!(
        m.calls("debug", &requested, "gemini_api"),
        1.0,
        "{}",
        m.text
    );
    assert_eq!(m.calls("thinkdeep", &fallback, "ok"), 1.0, "{}", m.text);
    assert_eq!(m.calls("chat", "none", "rate_limit"), 1.0, "{}", m.text);
    assert_eq!(
        m.sum("gemini_mcp_tool_calls_total", &[]),
        made.len() as f64,
        "one count per call made:\n{}",
        m.text
    );
    assert_eq!(
        m.value(
            "gemini_mcp_refusals_total",
            &[("tool", "chat"), ("reason", "rate_limit")]
        ),
        1.0
    );
    assert_eq!(m.sum("gemini_mcp_refusals_total", &[]), 1.0);

    // Gemini: one retry for call 2 and one for call 4 (two attempts), then its fallback.
    assert_eq!(
        m.value("gemini_mcp_gemini_retries_total", &[("model", &requested)]),
        2.0,
        "{}",
        m.text
    );
    assert_eq!(
        m.value(
            "gemini_mcp_gemini_fallbacks_total",
            &[("from", &requested), ("to", &fallback)]
        ),
        1.0,
        "{}",
        m.text
    );
    // One request per call that reached Gemini, labelled by the model asked for.
    let requests = |outcome| {
        m.value(
            "gemini_mcp_gemini_request_seconds_count",
            &[("model", &requested), ("outcome", outcome)],
        )
    };
    assert_eq!(requests("ok"), 4.0, "{}", m.text);
    assert_eq!(requests("error"), 1.0, "{}", m.text);
    assert!(
        m.value(
            "gemini_mcp_gemini_request_seconds_sum",
            &[("model", &requested), ("outcome", "ok")]
        ) >= gemini_delay.as_secs_f64(),
        "the stand-in's delay is Gemini's time:\n{}",
        m.text
    );

    // Tokens: the stand-in's usageMetadata, summed per model; the cost the replies estimated.
    let mut expected: BTreeMap<(String, &str), f64> = BTreeMap::new();
    let mut cost: BTreeMap<String, f64> = BTreeMap::new();
    for call in &oks {
        let usage = &call.structured()["usage"];
        for kind in ["input", "output", "thinking", "cached"] {
            *expected.entry((call.model(), kind)).or_default() +=
                usage[kind].as_f64().unwrap_or(0.0);
        }
        *cost.entry(call.model()).or_default() += usage["cost_usd"].as_f64().unwrap_or(0.0);
    }
    let scripted = [
        ((requested.clone(), "input"), 120.0 + 230.0 + 450.0),
        ((requested.clone(), "output"), 11.0 + 22.0 + 44.0),
        ((requested.clone(), "thinking"), 7.0),
        ((requested.clone(), "cached"), 40.0 + 200.0),
        ((fallback.clone(), "input"), 340.0),
        ((fallback.clone(), "output"), 33.0),
        ((fallback.clone(), "thinking"), 12.0),
        ((fallback.clone(), "cached"), 100.0),
    ];
    for ((model, kind), n) in scripted {
        assert_eq!(
            expected[&(model.clone(), kind)],
            n,
            "the replies report the stand-in's usage"
        );
        assert_eq!(
            m.value(
                "gemini_mcp_gemini_tokens_total",
                &[("model", &model), ("kind", kind)]
            ),
            n,
            "{model} {kind}:\n{}",
            m.text
        );
    }
    for (model, usd) in &cost {
        let counted = m.value("gemini_mcp_gemini_cost_usd_total", &[("model", model)]);
        assert!(
            (counted - usd).abs() < 1e-9 && *usd > 0.0,
            "{model}: {counted} counted, {usd} in the replies"
        );
    }

    // Our own time: one observation per call that ran, never holding Gemini's delay.
    for (tool, n) in [("chat", 3.0), ("debug", 1.0), ("thinkdeep", 1.0)] {
        assert_eq!(
            m.value("gemini_mcp_tool_call_own_seconds_count", &[("tool", tool)]),
            n,
            "{tool}:\n{}",
            m.text
        );
    }
    let own = m.value("gemini_mcp_tool_call_own_seconds_sum", &[("tool", "chat")]);
    let chat_wall: Duration = made
        .iter()
        .filter(|c| c.tool == "chat" && c.ok())
        .map(|c| c.waited)
        .sum();
    assert!(
        own <= (chat_wall - gemini_delay).as_secs_f64(),
        "own {own} s of {chat_wall:?} in all, {gemini_delay:?} of it waiting on Gemini"
    );
    assert_eq!(m.value("gemini_mcp_tool_calls_in_flight", &[]), 0.0);
    assert_eq!(m.value("gemini_mcp_acp_processes", &[]), 0.0);
    assert_eq!(m.sum("gemini_mcp_store_errors_total", &[]), 0.0);

    // A legacy session is live until it is closed.
    assert_eq!(m.value("gemini_mcp_http_sessions", &[]), 0.0);
    raw.initialize().await;
    let m = scrape(&server, Some(METRICS_TOKEN)).await;
    assert_eq!(m.value("gemini_mcp_http_sessions", &[]), 1.0, "{}", m.text);

    // The store goes down: Gemini answers, the turn cannot be kept (the answer says so).
    redis.kill();
    fake.push(Script::text("not kept").usage(10, 1, 0, 0));
    let lost = make(&raw, 7, "debug", json!({"error_description": "seven"})).await;
    assert!(lost.ok(), "{}", lost.reply);
    assert!(
        lost.structured()["notices"][0]
            .as_str()
            .is_some_and(|n| n.contains("could not be saved")),
        "{}",
        lost.reply
    );
    let m = scrape(&server, Some(METRICS_TOKEN)).await;
    assert_eq!(
        m.value(
            "gemini_mcp_store_errors_total",
            &[
                ("store", "redis"),
                ("op", "append"),
                ("error", "unavailable")
            ]
        ),
        1.0,
        "{}",
        m.text
    );
    assert_eq!(
        m.sum("gemini_mcp_store_errors_total", &[]),
        1.0,
        "{}",
        m.text
    );
    assert_eq!(m.calls("debug", &requested, "gemini_api"), 1.0);
    assert_eq!(m.calls("debug", &requested, "ok"), 1.0, "{}", m.text);

    // No label holds what a client sent.
    for secret in [
        CLIENT_TOKEN,
        METRICS_TOKEN,
        KEY,
        "boom",
        "four",
        "seven",
        "token#1",
    ] {
        assert!(!m.text.contains(secret), "{secret} in\n{}", m.text);
    }
    the_dashboard_queries_only(&m.names());
}

/// A call refused by the daily cap is counted as a call of that outcome and as a refusal, and
/// no request to Gemini.
#[tokio::test]
async fn cap_refusals_are_counted() {
    let dir = crate::support::project::with(&[crate::support::project::MAIN_RS]);
    let fake = FakeGemini::start();
    let url = fake.base_url();
    let server = HttpServer::start(
        dir.path(),
        &[
            ("GEMINI_API_KEY", KEY),
            ("GEMINI_BASE_URL", url.as_str()),
            ("GEMINI_MCP_DAILY_TOKENS", "1"),
        ],
    )
    .await;
    let raw = Raw::new(&server.url());
    let args = json!({"files": ["main.rs"], "question": "why?"});
    let refused = make(&raw, 1, "analyze", args).await;
    assert!(!refused.ok(), "{}", refused.reply);
    assert!(fake.generate_requests().is_empty(), "refused before Gemini");
    let m = scrape(&server, None).await;
    assert_eq!(
        m.value(
            "gemini_mcp_refusals_total",
            &[("tool", "analyze"), ("reason", "spending_cap")]
        ),
        1.0,
        "{}",
        m.text
    );
    assert_eq!(m.sum("gemini_mcp_refusals_total", &[]), 1.0, "{}", m.text);
    assert_eq!(
        m.sum(
            "gemini_mcp_tool_calls_total",
            &[("tool", "analyze"), ("outcome", "spending_cap")]
        ),
        1.0,
        "{}",
        m.text
    );
    assert_eq!(m.sum("gemini_mcp_tool_calls_total", &[]), 1.0);
    assert_eq!(m.sum("gemini_mcp_gemini_request_seconds_count", &[]), 0.0);
    assert_eq!(m.sum("gemini_mcp_gemini_tokens_total", &[]), 0.0);
}

/// With its own token `/metrics` takes only that one (not a client's); without it, a client's
/// token; with no token at all (loopback), none. OpenMetrics when asked for.
#[tokio::test]
async fn who_may_read_the_metrics() {
    let dir = crate::support::project::with(&[crate::support::project::MAIN_RS]);
    let fake = FakeGemini::start();
    let url = fake.base_url();
    let base = [("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", url.as_str())];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut v = base.to_vec();
        v.extend_from_slice(extra);
        v
    };

    let server = HttpServer::start(
        dir.path(),
        &with(&[
            ("GEMINI_MCP_HTTP_TOKEN", CLIENT_TOKEN),
            ("GEMINI_MCP_METRICS_TOKEN", METRICS_TOKEN),
        ]),
    )
    .await;
    let (status, _, body) = get_metrics(&server, None, None).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("GEMINI_MCP_METRICS_TOKEN"), "{body}");
    let (status, _, body) = get_metrics(&server, Some(CLIENT_TOKEN), None).await;
    assert_eq!(
        status, 401,
        "a client's token does not read the metrics: {body}"
    );
    let (status, _, body) = get_metrics(&server, Some(&format!("{METRICS_TOKEN}x")), None).await;
    assert_eq!(status, 401, "{body}");
    assert!(!body.contains(METRICS_TOKEN), "{body}");
    let (status, kind, body) = get_metrics(
        &server,
        Some(METRICS_TOKEN),
        Some("application/openmetrics-text;version=1.0.0,text/plain;q=0.5"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
    assert!(body.trim_end().ends_with("# EOF"), "{body}");
    assert!(body.contains("# TYPE gemini_mcp_build info"), "{body}");
    assert!(server.stderr().contains("/metrics"), "{}", server.stderr());
    assert!(!server.stderr().contains(METRICS_TOKEN));
    drop(server);

    let server = HttpServer::start(
        dir.path(),
        &with(&[("GEMINI_MCP_HTTP_TOKEN", CLIENT_TOKEN)]),
    )
    .await;
    let (status, _, body) = get_metrics(&server, None, None).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("GEMINI_MCP_HTTP_TOKEN"), "{body}");
    scrape(&server, Some(CLIENT_TOKEN)).await;
    drop(server);

    let server = HttpServer::start(dir.path(), &base).await;
    scrape(&server, None).await;
}

/// Every metric the Grafana dashboard queries is one of `exported` (the names a scrape holding
/// every family exports), and it shows every family.
fn the_dashboard_queries_only(exported: &BTreeSet<String>) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/packaging/grafana/gemini-mcp.json"
    );
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the dashboard"))
            .expect("the dashboard is JSON");
    let mut exprs = Vec::new();
    collect_exprs(&dashboard, &mut exprs);
    assert!(exprs.len() >= 8, "{exprs:?}");
    let name = regex::Regex::new(r"\bgemini_mcp_[a-z0-9_]+").unwrap();
    let used: BTreeSet<String> = exprs
        .iter()
        .flat_map(|e| name.find_iter(e).map(|m| m.as_str().to_string()))
        .collect();
    let unknown: Vec<&String> = used.difference(exported).collect();
    assert!(
        unknown.is_empty(),
        "the dashboard queries metrics the server does not export: {unknown:?}\nexported: {exported:?}"
    );
    /// A histogram's series named by their family.
    fn family(name: &str) -> &str {
        ["_bucket", "_sum", "_count"]
            .iter()
            .fold(name, |n, s| n.strip_suffix(s).unwrap_or(n))
    }
    let shown: BTreeSet<&str> = used.iter().map(String::as_str).map(family).collect();
    let families: BTreeSet<&str> = exported.iter().map(String::as_str).map(family).collect();
    let missing: Vec<&&str> = families.difference(&shown).collect();
    assert!(
        missing.is_empty(),
        "the dashboard does not show {missing:?}"
    );
}

/// Every query in a Grafana dashboard: the panels' `expr`, the variables' `query` and
/// `definition`.
fn collect_exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr" | "query" | "definition", Value::String(e)) => out.push(e.clone()),
                    _ => collect_exprs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_exprs(i, out)),
        _ => {}
    }
}

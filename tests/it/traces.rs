//! Traces as an OpenTelemetry collector receives them: the real binary over HTTP, exporting
//! over OTLP/HTTP to a stand-in collector (`support/otlp.rs`), with the stand-in Gemini. A call
//! continues the caller's trace (`traceparent` header, else `_meta.traceparent`), its steps are
//! children of its span, and nothing of the prompt, the files or a secret is in any of it.

use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::{Value, json};

use crate::support::fake_gemini::{FakeGemini, Script};
use crate::support::http::{HttpServer, Raw};
use crate::support::mcp::KEY;
use crate::support::otlp::{Collector, attr_bool, attr_int, attr_str, strings};

const TRACE_1: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_1: &str = "00f067aa0ba902b7";
const TRACE_2: &str = "0af7651916cd43dd8448eb211c80319c";
const PARENT_2: &str = "b7ad6b7169203331";
const TRACE_3: &str = "5b8aa5a2d2c872e8321cf37308d69df2";

/// What must never leave in a trace: the prompt, a file's name and content, a secret in each,
/// the API key.
const PROMPT_MARK: &str = "PROMPT-MARK-5e1d what does the helper do?";
const FILE_NAME: &str = "helper_secret_name_mark.rs";
const FILE_MARK: &str = "FILE-MARK-b27c";
const SECRET_IN_FILE: &str = "AKIAQWERTYUIOPASDFGH";
const SECRET_IN_PROMPT: &str = "AKIAZXCVBNMLKJHGFDSA";

struct Env {
    dir: tempfile::TempDir,
    fake: FakeGemini,
    collector: Collector,
}

impl Env {
    fn new() -> Env {
        let file =
            format!("// {FILE_MARK}\nconst KEY: &str = \"{SECRET_IN_FILE}\";\nfn helper() {{}}\n");
        Env {
            dir: crate::support::project::with(&[(FILE_NAME, file.as_str())]),
            fake: FakeGemini::start(),
            collector: Collector::start(),
        }
    }

    /// A server talking to the stand-in Gemini and exporting to the stand-in collector (unless
    /// `extra` says otherwise), batches sent every 100 ms.
    async fn server(&self, extra: &[(&str, &str)]) -> HttpServer {
        let gemini = self.fake.base_url();
        let collector = self.collector.endpoint();
        let mut vars = vec![
            ("GEMINI_API_KEY", KEY),
            ("GEMINI_BASE_URL", gemini.as_str()),
            ("GEMINI_RETRY_INITIAL_MS", "10"),
            ("GEMINI_RETRY_MAX_MS", "20"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ];
        for (k, v) in extra {
            vars.retain(|(name, _)| name != k);
            if !v.is_empty() {
                vars.push((k, v));
            }
        }
        HttpServer::start(self.dir.path(), &vars).await
    }
}

fn traceparent(trace: &str, parent: &str) -> String {
    format!("00-{trace}-{parent}-01")
}

fn chat(continuation: Option<&str>) -> Value {
    let mut args = json!({
        "prompt": format!("{PROMPT_MARK} key {SECRET_IN_PROMPT}"),
        "files": [FILE_NAME],
    });
    if let Some(id) = continuation {
        args["continuation_id"] = json!(id);
    }
    args
}

fn succeeded(message: &Value) -> bool {
    message["result"].is_object() && message["result"]["isError"] != true
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// The spans of trace `trace` named `name`.
fn named<'a>(spans: &'a [Span], trace: &str, name: &str) -> Vec<&'a Span> {
    spans
        .iter()
        .filter(|s| hex(&s.trace_id) == trace && s.name == name)
        .collect()
}

/// The one `call` span of `trace`, once it and `children` of it (by name) have all arrived.
fn call_with<'a>(spans: &'a [Span], trace: &str, children: &[&str]) -> Option<&'a Span> {
    let calls = named(spans, trace, "call");
    let [call] = calls.as_slice() else {
        return None;
    };
    children
        .iter()
        .all(|c| {
            named(spans, trace, c)
                .iter()
                .any(|s| s.parent_span_id == call.span_id)
        })
        .then_some(*call)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_continues_the_callers_trace_with_its_steps_as_children_and_no_content() {
    let env = Env::new();
    // The first request is refused once (503): the retry is a request span of its own.
    env.fake.push(Script::overloaded());
    let server = env.server(&[]).await;

    // 1. A traceparent header on the POST carrying the call (it wins over `_meta`).
    let first = Raw::new(&server.url())
        .header("traceparent", &traceparent(TRACE_1, PARENT_1))
        .header("tracestate", "vendor=kept")
        .modern(
            1,
            "tools/call",
            json!({"name": "chat", "arguments": chat(None),
                   "_meta": {"traceparent": traceparent(TRACE_3, PARENT_2)}}),
        )
        .await;
    assert!(succeeded(&first.message), "{}", first.text);
    let thread = first.message["result"]["structuredContent"]["continuation_id"]
        .as_str()
        .expect("a continuation id")
        .to_string();

    // 2. `_meta.traceparent` in the call, continuing the thread.
    let second = Raw::new(&server.url())
        .modern(
            2,
            "tools/call",
            json!({"name": "chat", "arguments": chat(Some(&thread)),
                   "_meta": {"traceparent": traceparent(TRACE_2, PARENT_2)}}),
        )
        .await;
    assert!(succeeded(&second.message), "{}", second.text);

    let arrived = env
        .collector
        .until(30, |spans| {
            call_with(spans, TRACE_1, &["collect", "gemini.request", "store.save"]).is_some()
                && call_with(
                    spans,
                    TRACE_2,
                    &["store.load", "collect", "gemini.request", "store.save"],
                )
                .is_some()
        })
        .await;
    let spans = env.collector.spans();
    assert!(arrived, "spans received: {spans:#?}");

    // The call spans continue the callers' spans.
    let call_1 = call_with(&spans, TRACE_1, &[]).unwrap();
    assert_eq!(hex(&call_1.parent_span_id), PARENT_1);
    assert_eq!(call_1.trace_state, "vendor=kept");
    let call_2 = call_with(&spans, TRACE_2, &[]).unwrap();
    assert_eq!(hex(&call_2.parent_span_id), PARENT_2);
    assert!(
        !spans.iter().any(|s| hex(&s.trace_id) == TRACE_3),
        "the header wins over _meta"
    );

    // What a call span says: the tool, whether it continues a thread, its outcome and usage.
    for (call, continued) in [(call_1, false), (call_2, true)] {
        assert_eq!(attr_str(call, "tool"), Some("chat"));
        assert_eq!(attr_bool(call, "thread.continued"), Some(continued));
        assert_eq!(attr_str(call, "outcome"), Some("ok"));
        assert!(attr_int(call, "gen_ai.usage.input_tokens").unwrap_or(0) > 0);
        assert!(attr_int(call, "gen_ai.usage.output_tokens").unwrap_or(0) > 0);
        assert!(attr_str(call, "gen_ai.response.model").is_some());
        // Every span of the call is its child: none hangs elsewhere in the trace.
        let trace = hex(&call.trace_id);
        for s in spans
            .iter()
            .filter(|s| hex(&s.trace_id) == trace && s.name != "call")
        {
            assert_eq!(s.parent_span_id, call.span_id, "{} of {trace}", s.name);
        }
    }

    // Each request to Gemini is a span: the refused one (503, retried) and the answered one.
    let mut requests = named(&spans, TRACE_1, "gemini.request");
    requests.sort_by_key(|s| attr_int(s, "gemini.attempt"));
    let seen: Vec<(Option<i64>, Option<i64>, Option<&str>)> = requests
        .iter()
        .map(|s| {
            (
                attr_int(s, "gemini.attempt"),
                attr_int(s, "http.response.status_code"),
                attr_str(s, "outcome"),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (Some(1), Some(503), Some("gemini_api")),
            (Some(2), Some(200), Some("ok"))
        ]
    );

    // Each attribute once per span (a field recorded twice would be exported twice).
    for s in &spans {
        let mut keys: Vec<&str> = s.attributes.iter().map(|kv| kv.key.as_str()).collect();
        keys.sort();
        let all = keys.len();
        keys.dedup();
        assert_eq!(keys.len(), all, "{} repeats an attribute: {keys:?}", s.name);
    }

    // The collect step counts, it does not name.
    let collect = named(&spans, TRACE_1, "collect")[0];
    assert_eq!(attr_int(collect, "files.sent"), Some(1));
    let load = named(&spans, TRACE_2, "store.load")[0];
    assert_eq!(attr_int(load, "turns"), Some(1));
    assert_eq!(attr_str(load, "db.system.name"), Some("memory"));

    // Nothing of the prompt, the file, a secret or the key, anywhere in what was exported.
    let everything: Vec<String> = env.collector.exports().iter().flat_map(strings).collect();
    assert!(everything.iter().any(|s| s == "chat"), "strings are read");
    let thread_mark = thread.as_str();
    for never in [
        "PROMPT-MARK",
        "helper_secret_name_mark",
        FILE_MARK,
        SECRET_IN_FILE,
        SECRET_IN_PROMPT,
        KEY,
        "what does the helper do",
        thread_mark,
    ] {
        let found: Vec<&String> = everything.iter().filter(|s| s.contains(never)).collect();
        assert!(found.is_empty(), "{never:?} was exported: {found:?}");
    }
    assert_eq!(
        server_log_secrets(&server.stderr()),
        Vec::<&str>::new(),
        "the server's log"
    );
}

/// The planted values the server's log mentions (none may be).
fn server_log_secrets(log: &str) -> Vec<&'static str> {
    [SECRET_IN_FILE, SECRET_IN_PROMPT, KEY]
        .into_iter()
        .filter(|s| log.contains(s))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_traceparent_starts_a_new_trace() {
    let env = Env::new();
    let server = env.server(&[]).await;
    let bad = format!("00-{}-{PARENT_1}-01", TRACE_1.to_uppercase());
    let a = Raw::new(&server.url())
        .header("traceparent", &bad)
        .call(1, "chat", chat(None))
        .await;
    assert!(succeeded(&a.message), "{}", a.text);
    let b = Raw::new(&server.url())
        .modern(
            2,
            "tools/call",
            json!({"name": "chat", "arguments": chat(None),
                   "_meta": {"traceparent": "not a traceparent"}}),
        )
        .await;
    assert!(succeeded(&b.message), "{}", b.text);
    let two_roots = |spans: &[Span]| {
        spans
            .iter()
            .filter(|s| s.name == "call" && s.parent_span_id.is_empty())
            .count()
            == 2
    };
    let arrived = env.collector.until(30, two_roots).await;
    let spans = env.collector.spans();
    assert!(arrived, "two root call spans: {spans:#?}");
    let callers = [TRACE_1, PARENT_1];
    for s in &spans {
        assert!(
            !callers.contains(&hex(&s.trace_id).as_str()),
            "{} continued an invalid traceparent",
            s.name
        );
    }
}

/// The spans of a call still queued when the server is asked to stop are sent before it
/// exits. (SIGTERM; on Windows the console's Ctrl-Break does the same, tested in shutdown's
/// own tests.)
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_spans_are_sent_when_the_server_stops() {
    let env = Env::new();
    // Batches would wait ten minutes: only the flush at exit can send them.
    let mut server = env.server(&[("OTEL_BSP_SCHEDULE_DELAY", "600000")]).await;
    let a = Raw::new(&server.url())
        .header("traceparent", &traceparent(TRACE_1, PARENT_1))
        .call(1, "chat", chat(None))
        .await;
    assert!(succeeded(&a.message), "{}", a.text);
    assert!(
        env.collector.spans().is_empty(),
        "nothing sent before the stop"
    );
    server.terminate();
    assert!(server.wait().await.success(), "{}", server.stderr());
    let spans = env.collector.spans();
    assert!(
        call_with(
            &spans,
            TRACE_1,
            &["collect", "gemini.request", "store.save"]
        )
        .is_some(),
        "spans received: {spans:#?}"
    );
}

/// Without a collector named, or with the SDK switched off, nothing is exported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_are_off_unless_a_collector_is_named() {
    let env = Env::new();
    for off in [
        [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
            ("GEMINI_MCP_LOG", "info"),
        ],
        [("OTEL_SDK_DISABLED", "true"), ("GEMINI_MCP_LOG", "info")],
    ] {
        let server = env.server(&off).await;
        let a = Raw::new(&server.url())
            .header("traceparent", &traceparent(TRACE_1, PARENT_1))
            .call(1, "chat", chat(None))
            .await;
        assert!(succeeded(&a.message), "{}", a.text);
        // A batch would have gone out after 100 ms; give it ten times that.
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        assert!(
            !server.stderr().contains("traces: exporting"),
            "{off:?}: {}",
            server.stderr()
        );
    }
    assert!(env.collector.exports().is_empty(), "nothing was exported");
    // A server in the same place with the collector named does export (the checks above can
    // fail).
    let server = env.server(&[("GEMINI_MCP_LOG", "info")]).await;
    let a = Raw::new(&server.url()).call(1, "chat", chat(None)).await;
    assert!(succeeded(&a.message), "{}", a.text);
    assert!(
        server.stderr().contains("traces: exporting"),
        "{}",
        server.stderr()
    );
    assert!(env.collector.until(30, |s| !s.is_empty()).await);
}

/// A collector that cannot be reached costs the calls nothing: they succeed, and the log says
/// so (at most once a minute: `traces::export`'s own test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_is_down_fails_no_call() {
    let env = Env::new();
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let server = env
        .server(&[("OTEL_EXPORTER_OTLP_ENDPOINT", closed.as_str())])
        .await;
    for id in 1..=3 {
        let a = Raw::new(&server.url())
            .header("traceparent", &traceparent(TRACE_1, PARENT_1))
            .call(id, "chat", chat(None))
            .await;
        assert!(succeeded(&a.message), "{}", a.text);
    }
    let said = |log: &str| log.matches("traces: could not send spans").count();
    let mut log = server.stderr();
    for _ in 0..600 {
        if said(&log) > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        log = server.stderr();
    }
    assert_eq!(said(&log), 1, "{log}");
    assert!(!log.contains(&closed), "no endpoint in the log: {log}");
}

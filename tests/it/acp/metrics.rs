//! The warm Gemini CLI in the metrics: `/metrics` of an HTTP server whose `investigate` ran the
//! stand-in agent counts its live process, the call, the agent's run as one request to Gemini
//! and the usage it reported.

use serde_json::json;

use super::{Agent, chunk};
use crate::metrics::scrape;
use crate::support::http::{HttpServer, Raw};

#[tokio::test]
async fn the_warm_agent_and_its_usage_are_counted() {
    let agent = Agent::new(json!([[chunk(
        "agent_message_chunk",
        "AGENT-ANSWER: fine."
    )]]));
    let vars = agent.vars(&[]);
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let server = HttpServer::start(&agent.root(), &refs).await;
    let before = scrape(&server, None).await;
    assert_eq!(before.value("gemini_mcp_acp_processes", &[]), 0.0);

    let raw = Raw::new(&server.url());
    let a = raw
        .call(
            1,
            "investigate",
            json!({"task": "Is add right?", "engine": "gemini-cli", "model": "flash"}),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    let s = &a.message["result"]["structuredContent"];
    assert_eq!(s["answer"], "AGENT-ANSWER: fine.", "{}", a.text);
    let model = s["model"].as_str().expect("the model").to_string();

    let m = scrape(&server, None).await;
    assert_eq!(m.value("gemini_mcp_acp_processes", &[]), 1.0, "{}", m.text);
    assert_eq!(m.calls("investigate", &model, "ok"), 1.0, "{}", m.text);
    assert_eq!(
        m.value(
            "gemini_mcp_gemini_request_seconds_count",
            &[("model", &model), ("outcome", "ok")]
        ),
        1.0,
        "{}",
        m.text
    );
    for kind in ["input", "output", "thinking", "cached"] {
        let reported = s["usage"][kind].as_f64().unwrap_or(0.0);
        assert_eq!(
            m.value(
                "gemini_mcp_gemini_tokens_total",
                &[("model", &model), ("kind", kind)]
            ),
            reported,
            "{kind}:\n{}",
            m.text
        );
    }
    assert!(s["usage"]["input"].as_f64().unwrap_or(0.0) > 0.0, "{s}");
}

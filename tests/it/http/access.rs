//! Who may reach the server: the token, required once configured and never shown, a public
//! address that needs one, and the Host and Origin checks on every route.

use std::time::Duration;

use serde_json::json;

use super::{Env, TOKEN};
use crate::support::http::{HttpServer, Raw, Style, result_text};
use crate::support::mcp::KEY;

#[tokio::test]
async fn the_token_is_required_once_configured_and_never_shown() {
    let env = Env::new();
    let server = env.server(&[("GEMINI_MCP_HTTP_TOKEN", TOKEN)]).await;
    let raw = Raw::new(&server.url());

    let a = raw.call(1, "chat", json!({"prompt": "no token"})).await;
    assert_eq!(a.status, 401, "{}", a.text);
    let challenge = a.header("www-authenticate").unwrap_or_default();
    assert!(challenge.starts_with("Bearer realm="), "{challenge}");
    assert!(a.text.contains("GEMINI_MCP_HTTP_TOKEN"), "{}", a.text);

    let wrong = format!("{TOKEN}x");
    let a = Raw::new(&server.url())
        .header("authorization", &format!("Bearer {wrong}"))
        .call(2, "chat", json!({"prompt": "wrong token"}))
        .await;
    assert_eq!(a.status, 401, "{}", a.text);
    assert!(
        a.header("www-authenticate")
            .unwrap_or_default()
            .contains("invalid_token"),
        "{a:?}"
    );
    assert!(!a.text.contains(TOKEN), "{}", a.text);

    let a = Raw::new(&server.url())
        .header("authorization", &format!("Bearer {TOKEN}"))
        .call(3, "chat", json!({"prompt": "right token"}))
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert!(
        result_text(&a.message).contains("last=## Request right token"),
        "{}",
        a.text
    );

    // rmcp's client with the token, in both styles.
    for style in [Style::Legacy, Style::Stateless] {
        let client = server.client(style, Some(TOKEN)).await;
        assert!(!client.list_all_tools().await.unwrap().is_empty());
        client.cancel().await.unwrap();
    }
    // Health endpoints need no token.
    assert_eq!(server.get("/healthz").await.0, 200);

    // Nothing ever prints the token, nor sends it to Gemini.
    assert!(!server.stderr().contains(TOKEN), "{}", server.stderr());
    for r in env.fake.requests() {
        assert!(!r.raw_body.contains(TOKEN));
        assert!(r.headers.iter().all(|(_, v)| !v.contains(TOKEN)));
    }
}

#[tokio::test]
async fn a_public_address_needs_a_token_and_the_command_line_takes_none() {
    let env = Env::new();
    let url = env.fake.base_url();
    let vars = [("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", url.as_str())];
    let Err((status, stderr)) = HttpServer::try_start(env.dir.path(), &vars, "0.0.0.0:0").await
    else {
        panic!("the server started on 0.0.0.0 without a token");
    };
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("GEMINI_MCP_HTTP_TOKEN"), "{stderr}");
    assert!(stderr.contains("refusing"), "{stderr}");

    // With a token it starts.
    let mut with = vars.to_vec();
    with.push(("GEMINI_MCP_HTTP_TOKEN", TOKEN));
    let server = HttpServer::try_start(env.dir.path(), &with, "0.0.0.0:0")
        .await
        .unwrap_or_else(|(s, e)| panic!("{s:?}: {e}"));
    drop(server);

    // There is no flag for it: a token on the command line would show in `ps`.
    let out = crate::support::mcp::command(env.dir.path(), &vars)
        .args(["serve", "--http", "127.0.0.1:0", "--token", TOKEN])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--token"));
}

#[tokio::test]
async fn host_and_origin_are_checked() {
    let env = Env::new();
    let server = env
        .server(&[
            ("GEMINI_MCP_HTTP_ALLOWED_HOSTS", "mcp.example.com"),
            (
                "GEMINI_MCP_HTTP_ALLOWED_ORIGINS",
                "https://app.example.com:443",
            ),
        ])
        .await;
    let raw = Raw::new(&server.url());
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                      "params": {"_meta": crate::support::http::modern_meta()}});
    let std_headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/list"),
    ];
    for (headers, expected) in [
        (vec![], 200),
        (vec![("host", "evil.example")], 403),
        (vec![("host", "mcp.example.com")], 200),
        (vec![("host", "mcp.example.com:8443")], 200),
        (vec![("origin", "https://evil.example")], 403),
        (vec![("origin", "http://localhost:3000")], 200),
        (vec![("origin", "https://app.example.com")], 200),
        (vec![("origin", "http://app.example.com")], 403),
    ] {
        let mut all = std_headers.to_vec();
        all.extend(headers.iter().copied());
        let a = raw.post(list.clone(), &all).await;
        assert_eq!(a.status, expected, "{headers:?}: {}", a.text);
    }
}

/// `GET <url>` with `headers`: the status.
async fn status_of(url: &str, headers: &[(&str, &str)]) -> u16 {
    let mut req = reqwest::Client::new()
        .get(url)
        .timeout(Duration::from_secs(30));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.expect("GET").status().as_u16()
}

/// DNS rebinding: every route, not only `/mcp`, answers only a `Host` of its own and a browser
/// `Origin` on the list. A page whose name is rebound to 127.0.0.1 cannot read the metrics or
/// the readiness of a server on loopback without a token (they need none there).
#[tokio::test]
async fn every_route_checks_host_and_origin() {
    let env = Env::new();
    let server = env
        .server(&[("GEMINI_MCP_HTTP_ALLOWED_HOSTS", "mcp.example.com")])
        .await;
    let port = server.base.rsplit(':').next().unwrap().to_string();
    let localhost = format!("localhost:{port}");
    let mut wrong = Vec::new();
    for path in ["/metrics", "/readyz", "/healthz", "/mcp"] {
        let url = format!("{}{path}", server.base);
        for (headers, refused) in [
            (vec![], false),
            (vec![("host", localhost.as_str())], false),
            (vec![("host", "mcp.example.com")], false),
            (vec![("origin", "http://localhost:3000")], false),
            (vec![("host", "evil.example")], true),
            (vec![("host", "evil.example:80")], true),
            (vec![("origin", "https://evil.example")], true),
            (vec![("origin", "null")], true),
        ] {
            let status = status_of(&url, &headers).await;
            if (status == 403) != refused {
                wrong.push(format!("{path} {headers:?}: {status}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A server on every interface answers a `Host` that is the address the client dialled (probes
/// and scrapers address an instance by its IP; a rebound name is never an address), and no
/// other address: on Linux every 127.x.y.z is this machine's, dialled here as 127.0.0.2.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_host_that_is_the_dialled_address_is_accepted_and_no_other() {
    let env = Env::new();
    let url = env.fake.base_url();
    let vars = [
        ("GEMINI_API_KEY", KEY),
        ("GEMINI_BASE_URL", url.as_str()),
        ("GEMINI_MCP_HTTP_TOKEN", TOKEN),
    ];
    let server = HttpServer::try_start(env.dir.path(), &vars, "0.0.0.0:0")
        .await
        .expect("starts with a token");
    let port = server.base.rsplit(':').next().unwrap().to_string();
    let dialled = format!("127.0.0.2:{port}");
    let bearer = format!("Bearer {TOKEN}");
    let mut wrong = Vec::new();
    for path in ["/healthz", "/readyz", "/metrics", "/mcp"] {
        let url = format!("http://{dialled}{path}");
        for (host, refused) in [
            (dialled.as_str(), false),
            ("127.0.0.2", false),
            ("127.0.0.3", true),
            ("10.1.2.3", true),
        ] {
            let status = status_of(&url, &[("host", host), ("authorization", &bearer)]).await;
            if (status == 403) != refused {
                wrong.push(format!("{path} Host {host}: {status}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

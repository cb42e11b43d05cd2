//! Vertex AI end to end: the real binary against the fake serving Vertex paths with a bearer
//! check, a fake metadata server (`GCE_METADATA_HOST`) and a fake OAuth token endpoint (an
//! authorized-user file whose `token_uri` points at it), all speaking Google's wire formats.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::support::Hermetic as _;
use crate::support::fake_gemini::{FakeGemini, Script};
use crate::support::mcp;

/// A metadata server: tokens `mds-token-<n>`, each valid `expires_in` seconds; counts fetches.
pub(crate) struct Metadata {
    pub(crate) addr: SocketAddr,
    fetches: Arc<AtomicUsize>,
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

#[derive(Clone)]
struct MetaState {
    fetches: Arc<AtomicUsize>,
    expires_in: u64,
    flavor_missing: Arc<AtomicUsize>,
}

async fn mds_token(State(s): State<MetaState>, headers: HeaderMap) -> impl IntoResponse {
    if headers.get("metadata-flavor").and_then(|v| v.to_str().ok()) != Some("Google") {
        s.flavor_missing.fetch_add(1, Ordering::SeqCst);
        return (StatusCode::FORBIDDEN, "Missing Metadata-Flavor").into_response();
    }
    // Slow enough that concurrent callers overlap.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let n = s.fetches.fetch_add(1, Ordering::SeqCst) + 1;
    axum::Json(json!({
        "access_token": format!("mds-token-{n}"),
        "expires_in": s.expires_in,
        "token_type": "Bearer"
    }))
    .into_response()
}

async fn mds_universe() -> &'static str {
    "googleapis.com"
}

impl Metadata {
    pub(crate) async fn start(expires_in: u64) -> Metadata {
        let fetches = Arc::new(AtomicUsize::new(0));
        let state = MetaState {
            fetches: fetches.clone(),
            expires_in,
            flavor_missing: Arc::new(AtomicUsize::new(0)),
        };
        let app = Router::new()
            .route(
                "/computeMetadata/v1/instance/service-accounts/default/token",
                get(mds_token),
            )
            .route(
                "/computeMetadata/v1/universe/universe-domain",
                get(mds_universe),
            )
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await
                .unwrap();
        });
        Metadata {
            addr,
            fetches,
            _shutdown: tx,
        }
    }
}

/// An OAuth token endpoint that refuses every refresh (`invalid_grant`); records the forms.
async fn token_endpoint() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let app = Router::new().route(
        "/token",
        post(move |body: String| {
            let s = s.clone();
            async move {
                s.lock().unwrap().push(body);
                (
                    StatusCode::BAD_REQUEST,
                    axum::Json(json!({"error": "invalid_grant", "error_description": "Token has been expired or revoked."})),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, seen)
}

fn project() -> tempfile::TempDir {
    crate::support::project::with(&[crate::support::project::MAIN_RS])
}

fn structured(r: &rmcp::model::CallToolResult) -> Value {
    r.structured_content.clone().unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vertex_with_the_metadata_server_one_token_for_fifty_calls() {
    let dir = project();
    let fake = FakeGemini::start();
    fake.require_bearer(|t| t.starts_with("mds-token-"));
    let mds = Metadata::start(3600).await;
    let host = mds.addr.to_string();
    let url = fake.base_url();
    let vars = [
        ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
        ("GOOGLE_CLOUD_PROJECT", "my-proj"),
        ("GOOGLE_VERTEX_BASE_URL", url.as_str()),
        ("GCE_METADATA_HOST", host.as_str()),
        ("GEMINI_MCP_VERTEX_LABELS", "team=payments,env=ci"),
    ];
    let client = Arc::new(mcp::start(dir.path(), &vars).await);
    let calls: Vec<_> = (0..50)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                mcp::call(&client, "chat", json!({"prompt": format!("question {i}")})).await
            })
        })
        .collect();
    for c in calls {
        let r = c.await.unwrap().unwrap();
        assert_ne!(r.is_error, Some(true), "{}", mcp::text(&r));
    }
    assert_eq!(
        mds.fetches.load(Ordering::SeqCst),
        1,
        "50 concurrent calls, one token fetch"
    );
    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 50);
    let first = &sent[0];
    assert!(
        first
            .path
            .starts_with("/v1/projects/my-proj/locations/global/publishers/google/models/"),
        "{}",
        first.path
    );
    assert_eq!(first.header("authorization"), Some("Bearer mds-token-1"));
    assert!(first.header("x-goog-api-key").is_none());
    assert_eq!(
        first.body["labels"],
        json!({"team": "payments", "env": "ci"})
    );
    for c in first.body["contents"].as_array().unwrap() {
        assert!(c["role"].is_string(), "a content without a role: {c}");
    }
    let r = mcp::call(&client, "listmodels", json!({})).await.unwrap();
    assert_eq!(structured(&r)["backend"], "vertex", "{}", mcp::text(&r));
    drop(client);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiring_token_is_refreshed_and_never_logged() {
    let dir = project();
    let fake = FakeGemini::start();
    fake.require_bearer(|t| t.starts_with("mds-token-"));
    let mds = Metadata::start(1).await;
    let host = mds.addr.to_string();
    let url = fake.base_url();
    let run = |prompt: &str| {
        std::process::Command::new(mcp::binary())
            .hermetic_env()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", dir.path().join(".home"))
            .env("PROJECT_ROOT", dir.path())
            .env("GEMINI_MCP_STORE", "memory")
            .env("GEMINI_MCP_LOG", "trace")
            .env("GOOGLE_GENAI_USE_VERTEXAI", "true")
            .env("GOOGLE_CLOUD_PROJECT", "my-proj")
            .env("GOOGLE_VERTEX_BASE_URL", &url)
            .env("GCE_METADATA_HOST", &host)
            .args(["chat", prompt])
            .output()
            .unwrap()
    };
    let out = run("first");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    assert!(
        !stderr.contains("mds-token-"),
        "a token reached the log:\n{stderr}"
    );
    assert!(stderr.len() > 200, "trace logging was on: {stderr}");
    // Doctor names the backend and the credential source.
    let doctor = std::process::Command::new(mcp::binary())
        .hermetic_env()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir.path().join(".home"))
        .env("PROJECT_ROOT", dir.path())
        .env("GEMINI_MCP_STORE", "memory")
        .env("GOOGLE_GENAI_USE_VERTEXAI", "true")
        .env("GOOGLE_CLOUD_PROJECT", "my-proj")
        .env("GOOGLE_VERTEX_BASE_URL", &url)
        .env("GCE_METADATA_HOST", &host)
        .arg("doctor")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&doctor.stdout).to_string()
        + &String::from_utf8_lossy(&doctor.stderr);
    assert!(
        said.contains(&format!(
            "Vertex AI at {url}, project my-proj, location global; credentials: the metadata server"
        )),
        "{said}"
    );
    assert!(!said.contains("mds-token-"), "{said}");

    // One server, two calls two seconds apart: the one-second token is fetched again.
    let client = mcp::start(
        dir.path(),
        &[
            ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
            ("GOOGLE_CLOUD_PROJECT", "my-proj"),
            ("GOOGLE_VERTEX_BASE_URL", url.as_str()),
            ("GCE_METADATA_HOST", host.as_str()),
        ],
    )
    .await;
    let before = mds.fetches.load(Ordering::SeqCst);
    mcp::call(&client, "chat", json!({"prompt": "a"}))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    fake.clear_requests();
    let r = mcp::call(&client, "chat", json!({"prompt": "b"}))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", mcp::text(&r));
    assert!(
        mds.fetches.load(Ordering::SeqCst) >= before + 2,
        "the expired token was not refreshed"
    );
    let last = fake.generate_requests().pop().unwrap();
    let token = last.header("authorization").unwrap().to_string();
    assert_ne!(
        token,
        format!("Bearer mds-token-{}", before + 1),
        "an expired token was sent"
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vertex_failures_say_what_to_do() {
    let dir = project();
    let fake = FakeGemini::start();
    let mds = Metadata::start(3600).await;
    let host = mds.addr.to_string();
    let url = fake.base_url();

    // 403 on the project: the IAM role to grant.
    fake.deny_project("denied-proj");
    let client = mcp::start(
        dir.path(),
        &[
            ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
            ("GOOGLE_CLOUD_PROJECT", "denied-proj"),
            ("GOOGLE_VERTEX_BASE_URL", url.as_str()),
            ("GCE_METADATA_HOST", host.as_str()),
        ],
    )
    .await;
    let r = mcp::call(&client, "chat", json!({"prompt": "x"}))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    let t = mcp::text(&r);
    assert!(
        t.contains("roles/aiplatform.user") && t.contains("denied-proj"),
        "{t}"
    );
    client.cancel().await.unwrap();

    // The API not enabled on the project: the command that enables it.
    let client = mcp::start(
        dir.path(),
        &[
            ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
            ("GOOGLE_CLOUD_PROJECT", "fresh-proj"),
            ("GOOGLE_VERTEX_BASE_URL", url.as_str()),
            ("GCE_METADATA_HOST", host.as_str()),
        ],
    )
    .await;
    fake.push(Script::raw(
        403,
        "application/json",
        json!({"error": {"code": 403, "status": "PERMISSION_DENIED",
            "message": "Vertex AI API has not been used in project fresh-proj before or it is disabled. Enable it by visiting https://console.developers.google.com/apis/api/aiplatform.googleapis.com/overview?project=fresh-proj then retry.",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED",
                         "domain": "googleapis.com", "metadata": {"service": "aiplatform.googleapis.com"}}]}})
        .to_string(),
    ));
    let r = mcp::call(&client, "chat", json!({"prompt": "x"}))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    let t = mcp::text(&r);
    assert!(
        t.contains("gcloud services enable aiplatform.googleapis.com --project fresh-proj"),
        "{t}"
    );
    client.cancel().await.unwrap();

    // No project and no key.
    let client = mcp::start(
        dir.path(),
        &[
            ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
            ("GOOGLE_VERTEX_BASE_URL", url.as_str()),
        ],
    )
    .await;
    let r = mcp::call(&client, "chat", json!({"prompt": "x"}))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    assert!(
        mcp::text(&r).contains("GOOGLE_CLOUD_PROJECT"),
        "{}",
        mcp::text(&r)
    );
    client.cancel().await.unwrap();

    // A credentials file that cannot be read.
    let missing = dir.path().join("no-such-key.json");
    let missing_s = missing.display().to_string();
    let client = mcp::start(
        dir.path(),
        &[
            ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
            ("GOOGLE_CLOUD_PROJECT", "my-proj"),
            ("GOOGLE_VERTEX_BASE_URL", url.as_str()),
            ("GOOGLE_APPLICATION_CREDENTIALS", missing_s.as_str()),
        ],
    )
    .await;
    let r = mcp::call(&client, "chat", json!({"prompt": "x"}))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    let t = mcp::text(&r);
    assert!(
        t.contains("Application Default Credentials")
            && t.contains("GOOGLE_APPLICATION_CREDENTIALS"),
        "{t}"
    );
    client.cancel().await.unwrap();

    // gcloud's authorized-user credentials whose token endpoint refuses the refresh.
    fake.clear_requests();
    let (token_addr, forms) = token_endpoint().await;
    let adc = dir.path().join("adc.json");
    std::fs::write(
        &adc,
        json!({"type": "authorized_user", "client_id": "cid.apps.googleusercontent.com",
               "client_secret": "client-secret-never-shown", "refresh_token": "refresh-token-never-shown",
               "token_uri": format!("http://{token_addr}/token")})
        .to_string(),
    )
    .unwrap();
    let adc_s = adc.display().to_string();
    let client = mcp::start(
        dir.path(),
        &[
            ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
            ("GOOGLE_CLOUD_PROJECT", "my-proj"),
            ("GOOGLE_VERTEX_BASE_URL", url.as_str()),
            ("GOOGLE_APPLICATION_CREDENTIALS", adc_s.as_str()),
        ],
    )
    .await;
    let r = mcp::call(&client, "chat", json!({"prompt": "x"}))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    let t = mcp::text(&r);
    assert!(
        t.contains("no access token") && t.contains("gcloud auth application-default login"),
        "{t}"
    );
    assert!(!t.contains("never-shown"), "{t}");
    let asked = forms.lock().unwrap().clone();
    assert!(
        asked
            .iter()
            .any(|f| f.contains("refresh_token") && f.contains("refresh-token-never-shown")),
        "the token endpoint was not asked for a refresh: {asked:?}"
    );
    assert!(
        fake.generate_requests().is_empty(),
        "a call went out without a token"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn vertex_express_mode_sends_the_key_on_the_publisher_path() {
    let dir = project();
    let fake = FakeGemini::start();
    fake.require_key("express-key-0123456789");
    fake.push(Script::text("EXPRESS"));
    let url = fake.base_url();
    let client = mcp::start(
        dir.path(),
        &[
            ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
            ("GOOGLE_API_KEY", "express-key-0123456789"),
            ("GOOGLE_VERTEX_BASE_URL", url.as_str()),
        ],
    )
    .await;
    let r = mcp::call(&client, "chat", json!({"prompt": "x"}))
        .await
        .unwrap();
    assert_eq!(structured(&r)["answer"], "EXPRESS", "{}", mcp::text(&r));
    let sent = fake.generate_requests();
    assert!(
        sent[0].path.starts_with("/v1/publishers/google/models/"),
        "{}",
        sent[0].path
    );
    assert!(sent[0].header("authorization").is_none());
    client.cancel().await.unwrap();
}

/// A service-account key file: Google's auth library signs a JWT with the key (no token
/// endpoint for scoped service-account tokens); the fake Vertex checks the signature with the
/// public key, the issuer and the scope. The key is made here (RSA 2048, PKCS #8 PEM, as
/// Google issues them) with aws-lc-rs, so no openssl binary is needed on any platform.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_key_signs_the_bearer_token() {
    use aws_lc_rs::encoding::AsDer;
    use aws_lc_rs::signature::{self, KeyPair as _};
    use base64::Engine;
    let dir = project();
    let keys = tempfile::tempdir().unwrap();
    let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
    let pkcs8 = AsDer::<aws_lc_rs::encoding::Pkcs8V1Der>::as_der(&pair).unwrap();
    let public = pair.public_key().as_ref().to_vec();
    let sa = keys.path().join("sa.json");
    std::fs::write(
        &sa,
        json!({"type": "service_account", "project_id": "my-proj", "private_key_id": "kid-1",
               "private_key": pem("PRIVATE KEY", pkcs8.as_ref()),
               "client_email": "reviewer@my-proj.iam.gserviceaccount.com", "client_id": "1",
               "token_uri": "http://127.0.0.1:9/token"})
        .to_string(),
    )
    .unwrap();
    let fake = FakeGemini::start();
    let checked = Arc::new(Mutex::new(Vec::<Value>::new()));
    let seen = checked.clone();
    fake.require_bearer(move |token| {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let parts: Vec<&str> = token.split('.').collect();
        if parts.len() != 3 {
            return false;
        }
        let (Ok(header), Ok(claims), Ok(sig)) = (
            b64.decode(parts[0]),
            b64.decode(parts[1]),
            b64.decode(parts[2]),
        ) else {
            return false;
        };
        let signed = format!("{}.{}", parts[0], parts[1]);
        let verified =
            signature::UnparsedPublicKey::new(&signature::RSA_PKCS1_2048_8192_SHA256, &public)
                .verify(signed.as_bytes(), &sig)
                .is_ok();
        let header: Value = serde_json::from_slice(&header).unwrap_or(Value::Null);
        let claims: Value = serde_json::from_slice(&claims).unwrap_or(Value::Null);
        seen.lock()
            .unwrap()
            .push(json!({"header": header, "claims": claims}));
        verified
    });
    let url = fake.base_url();
    let sa_s = sa.display().to_string();
    let client = mcp::start(
        dir.path(),
        &[
            ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
            ("GOOGLE_CLOUD_PROJECT", "my-proj"),
            ("GOOGLE_VERTEX_BASE_URL", url.as_str()),
            ("GOOGLE_APPLICATION_CREDENTIALS", sa_s.as_str()),
        ],
    )
    .await;
    let r = mcp::call(&client, "chat", json!({"prompt": "x"}))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", mcp::text(&r));
    let seen = checked.lock().unwrap().clone();
    let jwt = &seen[0];
    assert_eq!(jwt["header"]["alg"], "RS256", "{jwt}");
    assert_eq!(jwt["header"]["kid"], "kid-1", "{jwt}");
    assert_eq!(
        jwt["claims"]["iss"], "reviewer@my-proj.iam.gserviceaccount.com",
        "{jwt}"
    );
    assert!(
        jwt["claims"]["scope"]
            .as_str()
            .unwrap_or("")
            .contains("cloud-platform"),
        "{jwt}"
    );
    client.cancel().await.unwrap();
}

/// Workload identity federation: an external-account file whose subject token is read from a
/// file and exchanged at the security token service (a fake here) for the bearer token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_account_exchanges_its_subject_token() {
    let dir = project();
    let exchanged = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = exchanged.clone();
    let app = Router::new().route(
        "/v1/token",
        post(move |body: String| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(body);
                axum::Json(json!({
                    "access_token": "sts-token-1",
                    "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                    "token_type": "Bearer",
                    "expires_in": 3600
                }))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sts = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let creds = tempfile::tempdir().unwrap();
    let subject = creds.path().join("subject.jwt");
    std::fs::write(&subject, "subject-token-from-the-platform").unwrap();
    let file = creds.path().join("wif.json");
    std::fs::write(
        &file,
        json!({"type": "external_account",
               "audience": "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/ci/providers/gh",
               "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
               "token_url": format!("http://{sts}/v1/token"),
               "credential_source": {"file": subject.display().to_string()}})
        .to_string(),
    )
    .unwrap();
    let fake = FakeGemini::start();
    fake.require_bearer(|t| t == "sts-token-1");
    let url = fake.base_url();
    let file_s = file.display().to_string();
    let client = mcp::start(
        dir.path(),
        &[
            ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
            ("GOOGLE_CLOUD_PROJECT", "my-proj"),
            ("GOOGLE_VERTEX_BASE_URL", url.as_str()),
            ("GOOGLE_APPLICATION_CREDENTIALS", file_s.as_str()),
        ],
    )
    .await;
    let r = mcp::call(&client, "chat", json!({"prompt": "x"}))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", mcp::text(&r));
    let bodies = exchanged.lock().unwrap().clone();
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    assert!(
        bodies[0].contains("subject-token-from-the-platform"),
        "{bodies:?}"
    );
    client.cancel().await.unwrap();
}

/// `/readyz` covers Vertex AI's credentials: ready with a token from the metadata server, not
/// ready when the token endpoint refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_covers_the_credentials() {
    use crate::support::http::HttpServer;
    let dir = project();
    let fake = FakeGemini::start();
    let mds = Metadata::start(3600).await;
    let host = mds.addr.to_string();
    let url = fake.base_url();
    let server = HttpServer::start(
        dir.path(),
        &[
            ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
            ("GOOGLE_CLOUD_PROJECT", "my-proj"),
            ("GOOGLE_VERTEX_BASE_URL", url.as_str()),
            ("GCE_METADATA_HOST", host.as_str()),
        ],
    )
    .await;
    let (status, body) = server.get("/readyz").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["checks"]["gemini"]["backend"], "vertex", "{body}");
    assert_eq!(mds.fetches.load(Ordering::SeqCst), 1);
    drop(server);

    let (token_addr, _) = token_endpoint().await;
    let adc = dir.path().join("adc.json");
    std::fs::write(
        &adc,
        json!({"type": "authorized_user", "client_id": "cid", "client_secret": "s",
               "refresh_token": "r", "token_uri": format!("http://{token_addr}/token")})
        .to_string(),
    )
    .unwrap();
    let adc_s = adc.display().to_string();
    let server = HttpServer::start(
        dir.path(),
        &[
            ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
            ("GOOGLE_CLOUD_PROJECT", "my-proj"),
            ("GOOGLE_VERTEX_BASE_URL", url.as_str()),
            ("GOOGLE_APPLICATION_CREDENTIALS", adc_s.as_str()),
        ],
    )
    .await;
    let (status, body) = server.get("/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert_ne!(body["checks"]["gemini"]["status"], "ok", "{body}");
}

/// `der` in PEM armour (RFC 7468): base64 in lines of 64 between the label's lines.
fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// Vertex AI takes a tier in the `X-Vertex-AI-LLM-Shared-Request-Type` header (it ignores the
/// body's `serviceTier`), on the global endpoint only, and reports the tier that served the call
/// in `usageMetadata.trafficType`: the reply says that tier and prices the call at it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vertex_takes_the_tier_in_a_header_and_reports_the_one_that_served() {
    let dir = project();
    let fake = FakeGemini::start();
    let url = fake.base_url();
    let mds = Metadata::start(3600).await;
    let host = mds.addr.to_string();
    // 1M in and 100k out of 3.5 Flash: $1.50 + $0.90 at standard.
    let standard = 2.4;
    for (location, asked, served, header, tier, cost) in [
        ("global", "flex", None, Some("flex"), "flex", standard / 2.0),
        (
            "global",
            "priority",
            Some("standard"),
            Some("priority"),
            "standard",
            standard,
        ),
        // A regional endpoint serves neither: nothing is asked, the call runs at standard.
        ("us-central1", "flex", None, None, "standard", standard),
    ] {
        fake.clear_requests();
        let mut answer = Script::text("TIERED").usage(1_000_000, 100_000, 0, 0);
        if let Some(s) = served {
            answer = answer.served_tier(s);
        }
        fake.push(answer);
        let vars = [
            ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
            ("GOOGLE_CLOUD_PROJECT", "my-proj"),
            ("GOOGLE_CLOUD_LOCATION", location),
            ("GOOGLE_VERTEX_BASE_URL", url.as_str()),
            ("GCE_METADATA_HOST", host.as_str()),
            ("GEMINI_SERVICE_TIER", asked),
        ];
        let client = mcp::start(dir.path(), &vars).await;
        let r = mcp::call(
            &client,
            "chat",
            json!({"prompt": "x", "model": "gemini-3.5-flash"}),
        )
        .await
        .unwrap();
        let out = structured(&r);
        assert_eq!(out["answer"], "TIERED", "{}", mcp::text(&r));
        let sent = fake.generate_requests();
        assert!(
            sent[0].path.contains(&format!("/locations/{location}/")),
            "{}",
            sent[0].path
        );
        assert_eq!(
            sent[0].header("x-vertex-ai-llm-shared-request-type"),
            header,
            "{location} {asked}"
        );
        assert!(
            sent[0].body.get("serviceTier").is_none(),
            "Vertex AI does not read the body's tier: {}",
            sent[0].body
        );
        assert_eq!(out["usage"]["tier"], tier, "{location} {asked}: {out}");
        let got = out["usage"]["cost_usd"].as_f64().unwrap();
        assert!((got - cost).abs() < 1e-9, "{location} {asked}: {got}");
        client.cancel().await.unwrap();
    }
}

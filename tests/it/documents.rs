//! Documents a user names (`files` on chat, analyze, thinkdeep): a PDF goes inline as a document
//! part (`inlineData`, `application/pdf`), through the same sandbox and caps as an image, its
//! pages estimated at Gemini's 258 tokens each; over the inline cap it goes through the Files API
//! (uploaded, named by its URI, deleted once answered; Vertex AI refuses it); a file named .pdf
//! that is not one, or one over the caps, is refused naming it before anything is sent; other
//! tools leave PDFs out.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::support::fake_gemini::FakeGemini;
use crate::support::mcp::{self, KEY, call, text};

/// A two-page PDF: a catalog, a page tree and two page objects.
fn two_pages() -> Vec<u8> {
    b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n\
      2 0 obj << /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >> endobj\n\
      3 0 obj << /Type /Page /Parent 2 0 R >> endobj\n\
      4 0 obj << /Type /Page /Parent 2 0 R >> endobj\n\
      trailer << /Root 1 0 R >>\n%%EOF\n"
        .to_vec()
}

fn inline_parts(body: &Value) -> Vec<(String, String)> {
    body["contents"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| {
            let d = p.get("inlineData")?;
            Some((
                d["mimeType"].as_str()?.to_string(),
                d["data"].as_str()?.to_string(),
            ))
        })
        .collect()
}

async fn client(dir: &std::path::Path, fake: &FakeGemini) -> mcp::Client {
    let url = fake.base_url();
    mcp::start(
        dir,
        &[("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", url.as_str())],
    )
    .await
}

#[tokio::test]
async fn a_named_pdf_is_sent_inline_as_a_document_and_counted_by_its_pages() {
    let dir = crate::support::project::with(&[crate::support::project::BUGGY_ADD]);
    std::fs::create_dir_all(dir.path().join("docs")).unwrap();
    std::fs::write(dir.path().join("docs/spec.pdf"), two_pages()).unwrap();
    let fake = FakeGemini::start();
    let client = client(dir.path(), &fake).await;
    for tool in ["chat", "analyze", "thinkdeep"] {
        fake.clear_requests();
        let args = match tool {
            "chat" => {
                json!({"prompt": "Does the code follow the spec?", "files": ["docs/spec.pdf", "src/lib.rs"]})
            }
            "analyze" => {
                json!({"question": "Does the code follow the spec?", "files": ["docs/spec.pdf", "src/lib.rs"]})
            }
            _ => {
                json!({"current_analysis": "It subtracts.", "files": ["docs/spec.pdf", "src/lib.rs"]})
            }
        };
        let r = call(&client, tool, args).await.unwrap();
        assert_ne!(r.is_error, Some(true), "{tool}: {}", text(&r));
        let sent = fake.generate_requests();
        assert_eq!(sent.len(), 1, "{tool}");
        let parts = inline_parts(&sent[0].body);
        let expected = base64::engine::general_purpose::STANDARD.encode(two_pages());
        assert_eq!(
            parts,
            vec![("application/pdf".to_string(), expected)],
            "{tool}"
        );
        assert!(
            sent[0].last_user_text().contains("a - b"),
            "{tool}: the code is sent too"
        );
        assert!(
            !sent[0].raw_body.contains("/Type /Catalog"),
            "{tool}: the PDF is not sent as text"
        );
        let s = r.structured_content.clone().unwrap();
        let included: Vec<(String, u64)> = s["files"]["included"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["path"].as_str().unwrap().to_string(),
                    f["tokens"].as_u64().unwrap(),
                )
            })
            .collect();
        assert!(
            included.contains(&("docs/spec.pdf".to_string(), 2 * 258)),
            "{tool}: {included:?}"
        );
    }

    // A review leaves it out: it cannot verify findings in a document.
    fake.clear_requests();
    let r = call(
        &client,
        "codereview",
        json!({"files": ["docs/spec.pdf", "src/lib.rs"], "context": "c"}),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert!(inline_parts(&fake.generate_requests()[0].body).is_empty());
}

#[tokio::test]
async fn a_pdf_that_is_not_one_or_is_too_large_is_refused_before_gemini() {
    let dir = crate::support::project::with(&[crate::support::project::BUGGY_ADD]);
    std::fs::write(dir.path().join("notes.pdf"), "plain text, not a PDF\n").unwrap();
    // Over what the Files API path takes (50 MB): refused from its size, never read.
    let huge = std::fs::File::create(dir.path().join("huge.pdf")).unwrap();
    huge.set_len(51 * 1024 * 1024).unwrap();
    std::fs::write(
        dir.path().join("keys.pdf"),
        format!(
            "%PDF-1.4\n(token ghp_{}) Tj\n%%EOF\n",
            "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
        ),
    )
    .unwrap();
    let fake = FakeGemini::start();
    let client = client(dir.path(), &fake).await;
    for (file, says) in [
        ("notes.pdf", "is named .pdf but is not a PDF"),
        ("keys.pdf", "holds a secret-looking value"),
        ("huge.pdf", "larger than the 50 MB document limit"),
        ("../outside.pdf", "outside"),
    ] {
        let r = call(&client, "chat", json!({"prompt": "q", "files": [file]})).await;
        let message = match r {
            Ok(r) => {
                assert_eq!(r.is_error, Some(true), "{file}: {}", text(&r));
                text(&r)
            }
            Err(e) => e.to_string(),
        };
        assert!(message.contains(says), "{file}: {message}");
    }
    assert!(
        fake.generate_requests().is_empty(),
        "a refused document reached Gemini"
    );
}

#[tokio::test]
async fn a_document_over_the_inline_cap_goes_through_the_files_api_and_is_deleted() {
    let dir = crate::support::project::with(&[crate::support::project::BUGGY_ADD]);
    let mut big = two_pages();
    big.resize(15 * 1024 * 1024, b' ');
    std::fs::write(dir.path().join("big.pdf"), &big).unwrap();
    let fake = FakeGemini::start();
    let client = client(dir.path(), &fake).await;
    let r = call(
        &client,
        "chat",
        json!({"prompt": "Summarise it.", "files": ["big.pdf"]}),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let uploaded = fake.uploaded_files();
    assert_eq!(uploaded.len(), 1);
    assert_eq!(uploaded[0].mime, "application/pdf");
    assert!(uploaded[0].bytes == big, "the document's bytes, whole");
    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 1);
    assert!(
        inline_parts(&sent[0].body).is_empty(),
        "nothing of it went inline"
    );
    let named: Vec<&str> = sent[0].body["contents"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["parts"].as_array().unwrap())
        .filter_map(|p| p["fileData"]["fileUri"].as_str())
        .collect();
    assert_eq!(named, vec![uploaded[0].uri.as_str()]);
    assert!(fake.files().is_empty(), "the upload outlived its request");
    // The upload carried the key in its header, as every call does.
    let starts: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.path == "/upload/v1beta/files")
        .collect();
    assert_eq!(starts.len(), 2, "a start and the bytes");
    assert!(
        starts
            .iter()
            .all(|r| r.header("x-goog-api-key") == Some(KEY))
    );

    // An upload URL on another host: the key and the document go nowhere, the call says why.
    fake.upload_urls_on("http://127.0.0.2:9");
    fake.clear_requests();
    let r = call(
        &client,
        "chat",
        json!({"prompt": "Again.", "files": ["big.pdf"]}),
    )
    .await;
    let message = match r {
        Ok(r) => {
            assert_eq!(r.is_error, Some(true), "{}", text(&r));
            text(&r)
        }
        Err(e) => e.to_string(),
    };
    assert!(message.contains("another host"), "{message}");
    assert!(fake.generate_requests().is_empty());

    // Vertex AI has no Files API here: the same document is refused at the inline cap.
    let url = fake.base_url();
    let vertex = mcp::start(
        dir.path(),
        &[
            ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
            ("GOOGLE_API_KEY", "vertex-express-key"),
            ("GOOGLE_VERTEX_BASE_URL", url.as_str()),
        ],
    )
    .await;
    let r = call(
        &vertex,
        "chat",
        json!({"prompt": "q", "files": ["big.pdf"]}),
    )
    .await;
    let message = match r {
        Ok(r) => text(&r),
        Err(e) => e.to_string(),
    };
    assert!(
        message.contains("larger than the 14 MB inline document limit"),
        "{message}"
    );
}

#[tokio::test]
async fn a_cancelled_call_still_deletes_its_upload() {
    use crate::support::fake_gemini::Script;
    use rmcp::model::{CallToolRequestParams, ClientRequest};
    use rmcp::service::PeerRequestOptions;
    use std::time::{Duration, Instant};
    let dir = crate::support::project::with(&[crate::support::project::BUGGY_ADD]);
    let mut big = two_pages();
    big.resize(15 * 1024 * 1024, b' ');
    std::fs::write(dir.path().join("big.pdf"), &big).unwrap();
    let fake = FakeGemini::start();
    fake.push(Script::text("never read").delay_headers(Duration::from_secs(30)));
    let client = client(dir.path(), &fake).await;
    let req = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
        CallToolRequestParams::new("chat").with_arguments(mcp::args(
            json!({"prompt": "Summarise it.", "files": ["big.pdf"]}),
        )),
    ));
    let handle = client
        .send_cancellable_request(req, PeerRequestOptions::no_options())
        .await
        .unwrap();
    // Cancelled once the request naming the upload is in flight.
    let started = Instant::now();
    while !(fake.generate_requests().len() == 1 && fake.in_flight() > 0) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the request never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(fake.files().len(), 1, "uploaded before the request");
    handle
        .cancel(Some("the test cancels".into()))
        .await
        .unwrap();
    let started = Instant::now();
    while !fake.files().is_empty() && started.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        fake.files().is_empty(),
        "the cancelled call's upload was left at Google"
    );
    assert_eq!(fake.uploaded_files().len(), 1);
    client.cancel().await.unwrap();
}

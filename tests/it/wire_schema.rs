//! Every request body the real binary sends, held against Google's own types: each tool, the
//! investigation (function calls, their results, the replayed signatures, the forced answer),
//! explore on Gemini 2.x and 3, web search, images, JSON mode, thinking on 2.5 and 3.x,
//! sampling, a continued thread, the service tiers, and the Vertex AI transport. The bodies the
//! stand-in Gemini recorded go to `support/validate_genai.py`, which parses them with
//! google-genai's pydantic types (unknown fields refused) and checks that google-genai's own
//! converter writes them back the same: a field Google does not know, or one in the wrong place,
//! fails here and not in a user's call. The stand-in's own answers are checked against
//! `GenerateContentResponse` too, with the recorded fixtures, and its context caching to
//! `CreateCachedContentConfig` and `CachedContent`, and its Interactions API to the `_gaos`
//! types (`CreateModelInteraction`, `Interaction`, `InteractionSSEEvent`), held strictly, and to
//! google-genai's own interactions client driving it (`support/genai_interactions_client.py`).
//!
//! google-genai comes from the virtual environment `.ci/run` installs (`target/genai`, a pinned
//! version; `GEMINI_MCP_GENAI_DIR` elsewhere). Without it the test says so and is skipped,
//! unless `GEMINI_MCP_REQUIRE_GENAI=1` (set by `.ci/run`) or `CI=true`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::support::Hermetic as _;
use crate::support::fake_gemini::{FakeGemini, Script};

/// The environment's Python, if google-genai is installed in it.
pub(crate) fn genai_python() -> Result<PathBuf, String> {
    let dir = std::env::var_os("GEMINI_MCP_GENAI_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("target/genai"),
        PathBuf::from,
    );
    let python = if cfg!(windows) {
        dir.join("Scripts/python.exe")
    } else {
        dir.join("bin/python")
    };
    let ok = Command::new(&python)
        .args(["-c", "import google.genai"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Ok(python)
    } else {
        Err(format!(
            "google-genai is not installed in {} (.ci/run installs it: python3 -m venv target/genai && \
             target/genai/bin/pip install google-genai==<the pinned version>)",
            dir.display()
        ))
    }
}

/// A repository with a committed file, a change to it, an untracked file and an image.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let repo = git2::Repository::init(root).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n",
    )
    .unwrap();
    let mut index = repo.index().unwrap();
    index.add_path(Path::new("src/lib.rs")).unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("Test", "test@example.com").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "first", &tree, &[])
        .unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        "pub fn add(a: u32, b: u32) -> u32 {\n    a - b\n}\n",
    )
    .unwrap();
    std::fs::write(root.join("src/new.rs"), "pub fn two() -> u32 {\n    2\n}\n").unwrap();
    std::fs::write(root.join("shot.png"), b"\x89PNG\r\n\x1a\nfake-image-bytes").unwrap();
    std::fs::write(
        root.join("spec.pdf"),
        b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n",
    )
    .unwrap();
    // Over the inline cap: it goes through the Files API and is named by its URI.
    let mut big = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n".to_vec();
    big.resize(15 << 20, b' ');
    std::fs::write(root.join("big.pdf"), big).unwrap();
    dir
}

/// The binary with `vars`, in `root`; its output, after asserting it succeeded.
fn run(root: &Path, vars: &[(&str, &str)], args: &[&str]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gemini-mcp"));
    cmd.hermetic_env()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", root.join(".home"))
        .env("GEMINI_MCP_STATE_DIR", root.join(".state"))
        .env("GEMINI_MCP_STORE", "embedded")
        .env("GEMINI_MCP_LOG", "warn")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("PROJECT_ROOT", root)
        .current_dir(root)
        .args(args);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run gemini-mcp");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{args:?}: {stdout}{stderr}"
    );
    stdout
}

/// A review answer with one finding on `src/lib.rs:2`.
fn review() -> Script {
    Script::json(
        json!({"summary": "add subtracts.", "verdict": "needs_changes", "findings": [{
        "severity": "high", "file": "src/lib.rs", "line": 2, "title": "add subtracts",
        "detail": "It returns a - b.", "fix": "Use a + b.", "evidence": "a - b"}]}),
    )
}

/// Turns of function calls, then an answer: an investigation of two steps.
fn investigation(answer: Script) -> Vec<Script> {
    vec![
        Script::calls(
            &[
                ("list_files", json!({"path": "src"})),
                ("search_text", json!({"pattern": "fn add"})),
            ],
            "Q2lRQjBlMktUaG91Z2h0LW9uZQ+/",
            [100, 5, 5],
        ),
        Script::calls(
            &[(
                "read_file",
                json!({"path": "src/lib.rs", "start_line": 1, "end_line": 3}),
            )],
            "Q2lRQjBlMktUaG91Z2h0LXR3bw==",
            [150, 5, 5],
        ),
        answer,
    ]
}

/// One run: its name, the backend it reaches, its arguments and what the stand-in answers.
struct Case {
    name: &'static str,
    vertex: bool,
    vars: Vec<(&'static str, &'static str)>,
    args: Vec<&'static str>,
    answers: Vec<Script>,
}

fn case(name: &'static str, args: &[&'static str], answers: Vec<Script>) -> Case {
    Case {
        name,
        vertex: false,
        vars: Vec::new(),
        args: args.to_vec(),
        answers,
    }
}

fn cases() -> Vec<Case> {
    let mut all = vec![
        case(
            "chat, thinking budget on 2.5, sampling, a file and instructions",
            &[
                "chat",
                "Is this right?",
                "--model",
                "gemini-2.5-flash",
                "--thinking-mode",
                "high",
                "--temperature",
                "0.3",
                "--file",
                "src/lib.rs",
                "--system-prompt",
                "Be brief.",
            ],
            vec![],
        ),
        case(
            "chat, thinking level on 3.x, an image",
            &[
                "chat",
                "What is in the picture?",
                "--model",
                "gemini-3.1-pro-preview",
                "--thinking-mode",
                "low",
                "--image",
                "shot.png",
            ],
            vec![],
        ),
        case(
            "chat with a PDF document",
            &[
                "chat",
                "Does add follow the spec?",
                "--file",
                "spec.pdf",
                "--file",
                "src/lib.rs",
            ],
            vec![],
        ),
        case(
            "chat with a PDF over the inline cap (Files API, fileData)",
            &["chat", "Summarise it.", "--file", "big.pdf"],
            vec![],
        ),
        case(
            "a consensus of two models with stances, and its synthesis",
            &[
                "chat",
                "Is add right?",
                "--models",
                "gemini-2.5-flash:for,gemini-2.5-pro:against",
            ],
            vec![],
        ),
        case(
            "chat with web search",
            &["chat", "Latest Rust release?", "--web-search"],
            vec![
                Script::text("Rust 1.99.").sources(&[("https://blog.rust-lang.org/", "Rust Blog")]),
            ],
        ),
        case(
            "thinkdeep",
            &[
                "thinkdeep",
                "Addition is commutative.",
                "--focus-area",
                "math",
            ],
            vec![],
        ),
        case(
            "analyze",
            &["analyze", "src", "--question", "What does it do?"],
            vec![],
        ),
        case(
            "codereview, JSON mode on 3.x",
            &["codereview", "src/lib.rs", "--context", "Adds numbers"],
            vec![review()],
        ),
        case(
            "codereview, JSON mode on 2.5",
            &[
                "codereview",
                "src/lib.rs",
                "--context",
                "Adds numbers",
                "--model",
                "gemini-2.5-flash-lite",
            ],
            vec![review()],
        ),
        case(
            "debug",
            &[
                "debug",
                "It returns the wrong sum",
                "--error-context",
                "assert 2 == 0",
            ],
            vec![],
        ),
        case(
            "precommit, JSON mode with a verdict",
            &["precommit", "--format", "json"],
            vec![review()],
        ),
        case(
            "investigate: function calls, results, signatures",
            &["investigate", "Why does add(2, 2) print 0?"],
            investigation(Script::text("src/lib.rs:2 subtracts.")),
        ),
        case(
            "investigate, forced answer at the step limit",
            &["investigate", "List it.", "--max-steps", "1"],
            vec![
                Script::calls(&[("list_files", json!({}))], "U0lH", [100, 5, 5]),
                Script::text("done"),
            ],
        ),
        case(
            "codereview with explore on 3.x (function calls in JSON mode)",
            &[
                "codereview",
                "src/lib.rs",
                "--context",
                "Adds numbers",
                "--explore",
                "--model",
                "gemini-3.5-flash",
            ],
            investigation(review()),
        ),
        case(
            "codereview with explore on 2.5 (text, then the review without tools)",
            &[
                "codereview",
                "src/lib.rs",
                "--context",
                "Adds numbers",
                "--explore",
                "--model",
                "gemini-2.5-flash-lite",
            ],
            {
                let mut a = investigation(Script::text("src/lib.rs:2 subtracts."));
                a.push(review());
                a
            },
        ),
        case(
            "the flex tier",
            &["--tier", "flex", "chat", "Cheap question."],
            vec![],
        ),
        case(
            "the priority tier",
            &["--tier", "priority", "chat", "Urgent question."],
            vec![Script::text("fine").served_tier("standard")],
        ),
        case(
            "a continued thread (model turns replayed)",
            &["chat", "And then?", "--continuation-id", "latest"],
            vec![],
        ),
    ];
    let vertex = vec![
        ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
        ("GOOGLE_API_KEY", "vertex-express-key"),
        ("GEMINI_MCP_VERTEX_LABELS", "team=payments,env=ci"),
        ("GEMINI_SERVICE_TIER", "flex"),
    ];
    for mut c in [
        case("Vertex AI: chat", &["chat", "Hello from Vertex."], vec![]),
        case(
            "Vertex AI: codereview, JSON mode",
            &["codereview", "src/lib.rs", "--context", "Adds numbers"],
            vec![review()],
        ),
        case(
            "Vertex AI: investigate",
            &["investigate", "Why does add(2, 2) print 0?"],
            investigation(Script::text("src/lib.rs:2 subtracts.")),
        ),
    ] {
        c.vertex = true;
        c.vars = vertex.clone();
        all.push(c);
    }
    all
}

/// The stand-in's answer to `body` at `path`, as its SSE chunks.
async fn answer_chunks(fake: &FakeGemini, path: &str, body: Value) -> Vec<Value> {
    let text = reqwest::Client::new()
        .post(format!("{}{path}", fake.base_url()))
        .header("x-goog-api-key", "k")
        .json(&body)
        .send()
        .await
        .expect("the stand-in answers")
        .text()
        .await
        .expect("its body");
    text.split("\r\n\r\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).expect("a JSON chunk"))
        .collect()
}

/// The stand-in's answers (text, JSON mode, thoughts, sources, calls, blocked, cut off, Vertex
/// AI's) and the recorded fixtures, as response records.
fn responses(fake: &FakeGemini) -> Vec<Value> {
    let stream = "/v1beta/models/gemini-3.5-flash:streamGenerateContent?alt=sse";
    let vertex = "/v1/projects/p/locations/global/publishers/google/models/gemini-3.5-flash:streamGenerateContent?alt=sse";
    let ask = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "generationConfig": {"thinkingConfig": {"thinkingLevel": "LOW"}}});
    let json_mode = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": {"type": "object"}}});
    let runs: Vec<(&str, &str, Value, Option<Script>)> = vec![
        ("the default answer", stream, ask.clone(), None),
        ("JSON mode", stream, json_mode, None),
        (
            "thoughts and sources",
            stream,
            ask.clone(),
            Some(
                Script::text("x")
                    .thoughts(["Thinking…"])
                    .sources(&[("https://a.example/", "A")]),
            ),
        ),
        (
            "function calls",
            stream,
            ask.clone(),
            Some(Script::calls(
                &[("read_file", json!({"path": "a"}))],
                "U0lH",
                [1, 1, 1],
            )),
        ),
        (
            "a blocked prompt",
            stream,
            ask.clone(),
            Some(Script::blocked("SAFETY")),
        ),
        (
            "cut off",
            stream,
            ask.clone(),
            Some(Script::max_tokens_no_parts()),
        ),
        (
            "Vertex AI, flex",
            vertex,
            ask,
            Some(Script::text("v").served_tier("flex")),
        ),
    ];
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut out = Vec::new();
    for (name, path, body, script) in runs {
        if let Some(s) = script {
            fake.push(s);
        }
        for (i, chunk) in rt
            .block_on(answer_chunks(fake, path, body))
            .into_iter()
            .enumerate()
        {
            out.push(json!({"name": format!("stand-in: {name} #{i}"), "response": chunk}));
        }
    }
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/gemini");
    let sse = std::fs::read_to_string(fixtures.join("stream-gemini-2.5-flash.sse")).unwrap();
    for (i, e) in sse
        .split("\r\n\r\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .enumerate()
    {
        let chunk: Value = serde_json::from_str(e).unwrap();
        out.push(json!({"name": format!("fixture: stream #{i}"), "response": chunk}));
    }
    for f in ["max-tokens-no-parts.json", "prompt-blocked.json"] {
        let chunk: Value =
            serde_json::from_str(&std::fs::read_to_string(fixtures.join(f)).unwrap()).unwrap();
        out.push(json!({"name": format!("fixture: {f}"), "response": chunk}));
    }
    out
}

#[test]
fn every_request_body_we_send_is_one_google_genai_knows() {
    let python = match genai_python() {
        Ok(p) => p,
        Err(why) => {
            if crate::support::skip_when(Some(why), "GEMINI_MCP_REQUIRE_GENAI") {
                return;
            }
            unreachable!("skip_when panics when the environment is required");
        }
    };
    let dir = project();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let fake = FakeGemini::start();
    let url = fake.base_url();
    let mut records = Vec::new();
    for c in cases() {
        fake.clear_requests();
        for a in c.answers {
            fake.push(a);
        }
        let mut vars: Vec<(&str, &str)> = vec![("GEMINI_API_KEY", "test-key")];
        vars.push(if c.vertex {
            ("GOOGLE_VERTEX_BASE_URL", url.as_str())
        } else {
            ("GEMINI_BASE_URL", url.as_str())
        });
        vars.extend(c.vars.iter().copied());
        run(&root, &vars, &c.args);
        assert_eq!(fake.pending(), 0, "{}: answers left unused", c.name);
        let sent = fake.generate_requests();
        assert!(!sent.is_empty(), "{}: nothing was sent", c.name);
        for (i, r) in sent.iter().enumerate() {
            assert_eq!(r.is_vertex(), c.vertex, "{}: {}", c.name, r.path);
            records.push(json!({
                "name": format!("{} #{i}", c.name),
                "backend": if c.vertex { "vertex" } else { "api" },
                "model": r.model,
                "body": r.body,
            }));
        }
    }
    let bodies = records.len();
    let mutants = mutants(&records[0]);
    records.extend(responses(&fake));
    let (ok, report) = validate(&python, &records);
    eprintln!(
        "{bodies} request bodies, {} answers: {report}",
        records.len() - bodies
    );
    assert!(ok, "{report}");
    assert!(
        report.contains(&format!("google-genai: {} passed, 0 failed", records.len())),
        "{bodies} bodies and {} answers: {report}",
        records.len() - bodies
    );
    // The check can fail: each wrong variant of a body we send, and the tier field the old
    // stand-in put in its answers, is refused, by name.
    let (ok, report) = validate(&python, &mutants);
    assert!(!ok, "{report}");
    for m in &mutants {
        let name = m["name"].as_str().unwrap();
        assert!(
            report.contains(&format!("FAIL {name}: ")),
            "{name}: {report}"
        );
    }
}

/// Context caching on both backends, held to google-genai: the create bodies a client sends
/// the stand-in (`CreateCachedContentConfig`), the caches it answers and lists
/// (`CachedContent`), a generate body naming a cache and the stand-in's answer to it.
#[test]
fn the_stand_ins_caches_are_google_genais() {
    let python = match genai_python() {
        Ok(p) => p,
        Err(why) => {
            if crate::support::skip_when(Some(why), "GEMINI_MCP_REQUIRE_GENAI") {
                return;
            }
            unreachable!("skip_when panics when the environment is required");
        }
    };
    let fake = FakeGemini::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let http = reqwest::Client::new();
    let send = |method: reqwest::Method, path: &str, body: Option<&Value>| {
        let mut r = http
            .request(method, format!("{}{path}", fake.base_url()))
            .header("x-goog-api-key", "k")
            .bearer_auth("t");
        if let Some(b) = body {
            r = r.json(b);
        }
        rt.block_on(async { r.send().await.unwrap().text().await.unwrap() })
    };
    let text = "fn add(a: u32, b: u32) -> u32 { a - b }\n".repeat(500);
    let mut records = Vec::new();
    for (backend, prefix, models) in [
        ("api", "/v1beta", "models/"),
        (
            "vertex",
            "/v1/projects/p/locations/global",
            "projects/p/locations/global/publishers/google/models/",
        ),
    ] {
        let model = format!("{models}gemini-3.8-flash");
        let create = json!({
            "model": model,
            "displayName": "repo@abc123",
            "systemInstruction": {"parts": [{"text": "You review code."}]},
            "contents": [{"role": "user", "parts": [{"text": text}]}],
            "tools": [{"functionDeclarations": [{"name": "read_file", "description": "Reads a file.",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]}],
            "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
            "ttl": "600s",
        });
        let made: Value = serde_json::from_str(&send(
            reqwest::Method::POST,
            &format!("{prefix}/cachedContents"),
            Some(&create),
        ))
        .unwrap();
        let name = made["name"].as_str().expect("a cache").to_string();
        let listed: Value = serde_json::from_str(&send(
            reqwest::Method::GET,
            &format!("{prefix}/cachedContents"),
            None,
        ))
        .unwrap();
        let generate = json!({"cachedContent": name,
            "contents": [{"role": "user", "parts": [{"text": "What changed?"}]}],
            "generationConfig": {"maxOutputTokens": 1024}});
        let path = match backend {
            "api" => format!("{prefix}/{model}:generateContent"),
            _ => format!("/v1/{model}:generateContent"),
        };
        let answer: Value =
            serde_json::from_str(&send(reqwest::Method::POST, &path, Some(&generate))).unwrap();
        assert!(
            answer["usageMetadata"]["cachedContentTokenCount"].is_u64(),
            "{answer}"
        );
        records.extend([
            json!({"name": format!("{backend}: create"), "backend": backend, "cache_create": create}),
            json!({"name": format!("{backend}: the cache made"), "cached_content": made}),
            json!({"name": format!("{backend}: the cache listed"), "cached_content": listed["cachedContents"][0]}),
            json!({"name": format!("{backend}: generate with it"), "backend": backend,
                "model": "gemini-3.8-flash", "body": generate}),
            json!({"name": format!("{backend}: the answer"), "response": answer}),
        ]);
    }
    let (ok, report) = validate(&python, &records);
    assert!(ok, "{report}");
    assert!(
        report.contains(&format!("google-genai: {} passed, 0 failed", records.len())),
        "{report}"
    );
    // It can fail: a field the API does not have, in a create body and in a cache.
    let mut create = records[0].clone();
    create["cache_create"]["ttlSeconds"] = json!(600);
    let mut cache = records[1].clone();
    cache["cached_content"]["contents"] = json!([]);
    let (ok, report) = validate(&python, &[create, cache]);
    assert!(!ok && report.contains("0 passed, 2 failed"), "{report}");
}

/// Runs the validator on `records`: whether all passed, and what it said.
pub(crate) fn validate(python: &Path, records: &[Value]) -> (bool, String) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), serde_json::to_vec(records).unwrap()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/support/validate_genai.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(file.path())
        .output()
        .expect("run the validator");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), report)
}

/// A wrong variant of a body: its name, and the change that makes it.
type Mutation = (&'static str, fn(&mut Value));

/// Wrong variants of `record` (a body we send): a field misplaced, unknown, or of a value
/// Google does not have; and an answer carrying a tier in its body.
fn mutants(record: &Value) -> Vec<Value> {
    let edits: [Mutation; 5] = [
        ("serviceTier inside generationConfig", |b| {
            b["generationConfig"]["serviceTier"] = json!("flex");
        }),
        ("thinkingConfig at the top level", |b| {
            b["thinkingConfig"] = json!({"thinkingLevel": "LOW"});
        }),
        ("an unknown field in a part", |b| {
            b["contents"][0]["parts"][0]["cacheControl"] = json!("ephemeral");
        }),
        ("a tier Google does not have", |b| {
            b["serviceTier"] = json!("cheap");
        }),
        ("labels misspelt", |b| {
            b["label"] = json!({"team": "a"});
        }),
    ];
    let mut out: Vec<Value> = edits
        .iter()
        .map(|(name, edit)| {
            let mut m = record.clone();
            m["name"] = json!(format!("mutant: {name}"));
            edit(&mut m["body"]);
            m
        })
        .collect();
    out.push(json!({"name": "mutant: a tier in the answer's body", "response": {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 1, "serviceTier": "standard"}}}));
    out
}

/// The Interactions API, held to google-genai's `_gaos` types: the create bodies a client
/// sends the stand-in (`CreateModelInteraction`), the interactions it answers and a background
/// run polled (`Interaction`), and every event of its streams (`InteractionSSEEvent`).
#[test]
fn the_stand_ins_interactions_are_google_genais() {
    let python = match genai_python() {
        Ok(p) => p,
        Err(why) => {
            if crate::support::skip_when(Some(why), "GEMINI_MCP_REQUIRE_GENAI") {
                return;
            }
            unreachable!("skip_when panics when the environment is required");
        }
    };
    let fake = FakeGemini::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let http = reqwest::Client::new();
    let send = |method: reqwest::Method, path: &str, body: Option<&Value>| {
        let mut r = http
            .request(
                method,
                format!("{}/v1beta/interactions{path}", fake.base_url()),
            )
            .header("x-goog-api-key", "k");
        if let Some(b) = body {
            r = r.json(b);
        }
        rt.block_on(async { r.send().await.unwrap().text().await.unwrap() })
    };
    let model = "gemini-3.8-flash";
    let tools = json!([{"type": "function", "name": "read_file", "description": "Reads a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]);
    let mut records = Vec::new();
    let create = |name: &str, body: Value, records: &mut Vec<Value>| -> Value {
        let answer: Value =
            serde_json::from_str(&send(reqwest::Method::POST, "", Some(&body))).unwrap();
        records.push(json!({"name": format!("{name}: create"), "interaction_create": body}));
        records.push(json!({"name": format!("{name}: the interaction"), "interaction": answer}));
        answer
    };
    let first = create(
        "plain",
        json!({"model": model, "input": "Review this.", "system_instruction": "You review code.",
            "generation_config": {"thinking_level": "high", "max_output_tokens": 1024,
                "temperature": 1.0}, "service_tier": "flex"}),
        &mut records,
    );
    fake.push(Script::text("Fine.").thoughts(["Reading."]));
    create(
        "chained",
        json!({"model": model, "input": [{"type": "text", "text": "And now?"}],
            "previous_interaction_id": first["id"], "store": true}),
        &mut records,
    );
    create(
        "json mode",
        json!({"model": model, "input": "Summarise.", "response_format": {"type": "text",
            "mime_type": "application/json", "schema": {"type": "object",
                "properties": {"summary": {"type": "string"}}, "required": ["summary"]}}}),
        &mut records,
    );
    fake.push(Script::calls(
        &[("read_file", json!({"path": "src/lib.rs"}))],
        "c2ln",
        [100, 10, 5],
    ));
    let called = create(
        "function call",
        json!({"model": model, "input": "Investigate.", "tools": tools}),
        &mut records,
    );
    let call = called["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["type"] == "function_call")
        .unwrap()
        .clone();
    create(
        "function result",
        json!({"model": model, "previous_interaction_id": called["id"], "tools": tools,
            "input": [{"type": "function_result", "call_id": call["id"], "name": "read_file",
                "result": "fn main() {}"}]}),
        &mut records,
    );
    create(
        "stateless",
        json!({"model": model, "store": false, "input": [
            {"type": "user_input", "content": [{"type": "text", "text": "One."}]},
            {"type": "model_output", "content": [{"type": "text", "text": "Ok."}]},
            {"type": "user_input", "content": [{"type": "text", "text": "Two."}]}]}),
        &mut records,
    );
    fake.push(Script::echo().delay_headers(std::time::Duration::from_secs(60)));
    let run = create(
        "background",
        json!({"model": model, "input": "Think.", "background": true}),
        &mut records,
    );
    fake.advance_clock(std::time::Duration::from_secs(61));
    let id = run["id"].as_str().unwrap();
    let polled: Value = serde_json::from_str(&send(
        reqwest::Method::GET,
        &format!("/{id}?include_input=true"),
        None,
    ))
    .unwrap();
    assert_eq!(polled["status"], "completed", "{polled}");
    records.push(json!({"name": "background: polled", "interaction": polled}));
    for (name, script) in [
        ("text", Script::chunks(["Hel", "lo"]).thoughts(["Hmm."])),
        (
            "call",
            Script::calls(&[("read_file", json!({"path": "a"}))], "c2ln", [9, 9, 1]),
        ),
    ] {
        fake.push(script);
        let body = json!({"model": model, "input": "Hi", "stream": true, "tools": tools});
        let text = send(reqwest::Method::POST, "", Some(&body));
        records.push(json!({"name": format!("stream {name}: create"), "interaction_create": body}));
        for (i, (event, data)) in crate::fake_interactions::parse_events(&text)
            .into_iter()
            .enumerate()
        {
            records.push(
                json!({"name": format!("stream {name}: event {i} ({event})"),
                "interaction_event": data}),
            );
        }
    }
    let (ok, report) = validate(&python, &records);
    assert!(ok, "{report}");
    assert!(
        report.contains(&format!("google-genai: {} passed, 0 failed", records.len())),
        "{report}"
    );
    // It can fail: a camelCase field, an unknown step, a status and an event Google lacks.
    let mut camel = records[0].clone();
    camel["interaction_create"]["generation_config"]["thinkingLevel"] = json!("high");
    let mut step = records[0].clone();
    step["interaction_create"]["input"] = json!([{"type": "user_turn", "text": "x"}]);
    let mut status = records[1].clone();
    status["interaction"]["status"] = json!("done");
    let event = json!({"name": "mutant event", "interaction_event":
        {"event_type": "content.delta", "index": 0}});
    let (ok, report) = validate(&python, &[camel, step, status, event]);
    assert!(!ok && report.contains("0 passed, 4 failed"), "{report}");
}

/// google-genai's own Interactions client (`client.interactions`) against the stand-in:
/// create, a chain, get, a stream, a background run cancelled and deleted, a 404, a function
/// call round; the SDK
/// parses every answer into its types.
#[test]
fn google_genais_interactions_client_talks_to_the_stand_in() {
    let python = match genai_python() {
        Ok(p) => p,
        Err(why) => {
            if crate::support::skip_when(Some(why), "GEMINI_MCP_REQUIRE_GENAI") {
                return;
            }
            unreachable!("skip_when panics when the environment is required");
        }
    };
    let fake = FakeGemini::start();
    fake.push(Script::echo());
    fake.push(Script::echo());
    fake.push(Script::echo());
    fake.push(Script::echo().delay_headers(std::time::Duration::from_secs(3600)));
    fake.push(Script::calls(
        &[("read_file", json!({"path": "src/lib.rs"}))],
        "c2ln",
        [100, 10, 5],
    ));
    fake.push(Script::echo());
    let cited = [("https://example.org/a", "A")];
    fake.push(Script::text("A cited answer.").sources(&cited));
    fake.push(
        Script::text("A cited report.")
            .sources(&cited)
            .delay_headers(std::time::Duration::from_millis(300)),
    );
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/support/genai_interactions_client.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(fake.base_url())
        .output()
        .expect("run the SDK client");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let paths: Vec<String> = fake
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(
        out.status.success(),
        "{report}\nthe stand-in saw: {paths:?}"
    );
    assert!(report.contains("ok deleted: NotFoundError"), "{report}");
    assert!(report.contains("ok deep research run, polled"), "{report}");
}

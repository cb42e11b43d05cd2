//! Secrets in changes: staged secret files named and never sent, configured secret globs in
//! nested repositories too, secret values in ordinary files redacted.

use super::*;
use crate::collector::{Collector, SkipReason};
use crate::config::Config;

#[test]
fn staged_secrets_are_named_and_never_sent() {
    // Relies on the collector's rules: `.env*` and `id_rsa*`/`*.pem` are secrets by name.
    let s = scratch();
    let repo = init(&s.root);
    write(&repo, "app.rs", "fn app() {}\n");
    stage_all(&repo);
    commit(&repo, "first");
    let env_value = "STRIPE_KEY=sk_live_51HxTESTvalueNEVERsent0123456789";
    let key_body = "MIIEowIBAAKCAQEAtestKEYbodyNEVERsent";
    write(&repo, ".env", format!("{env_value}\n"));
    write(
        &repo,
        "deploy/id_rsa",
        format!("-----BEGIN RSA PRIVATE KEY-----\n{key_body}\n-----END RSA PRIVATE KEY-----\n"),
    );
    write(&repo, "app.rs", "fn app() { load_env(); }\n");
    stage_all(&repo);

    let d = read(&s, &request("."));
    assert_eq!(d.secret_files, vec![".env", "deploy/id_rsa"]);
    assert!(!d.text.contains("sk_live_51HxTEST"), "{}", d.text);
    assert!(!d.text.contains(key_body), "{}", d.text);
    // Named, with the warning Gemini turns into a finding.
    assert!(
        d.text
            .contains("WARNING: 2 changed file(s) look like secrets"),
        "{}",
        d.text
    );
    assert!(
        d.text
            .contains("- added: .env [staged] — LOOKS LIKE A SECRET"),
        "{}",
        d.text
    );
    let secret_skips: Vec<&str> = d
        .skipped
        .iter()
        .filter(|s| s.reason == SkipReason::Secret)
        .map(|s| s.path.as_str())
        .collect();
    assert_eq!(secret_skips, vec![".env", "deploy/id_rsa"]);
    // The rest of the change is still reviewed.
    assert!(d.text.contains("+fn app() { load_env(); }"), "{}", d.text);
}

#[test]
fn configured_secret_globs_apply_to_changes_in_nested_repositories_too() {
    // GEMINI_MCP_SECRET_FILES globs match the name, or the path below the sandbox root (not
    // below the repository): `vault/**` here names a folder of the nested repository.
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let mut config = Config::for_tests(&root);
    config.collector.secret_globs = vec!["*.sealed".into(), "libs/inner/vault/**".into()];
    let s = Scratch {
        collector: Collector::new(&config.collector()).unwrap(),
        _dir: dir,
        root,
    };
    let outer = init(&s.root);
    write(&outer, "main.rs", "fn main() {}\n");
    stage(&outer, "main.rs");
    commit(&outer, "first");
    let inner = init(&s.root.join("libs/inner"));
    write(&inner, "lib.rs", "pub fn f() {}\n");
    stage_all(&inner);
    commit(&inner, "first");

    write(
        &outer,
        "prod.sealed",
        "{\"token\": \"sealed-value-never-sent\"}\n",
    );
    write(&inner, "vault/notes.txt", "vault-value-never-sent\n");
    write(&inner, "lib.rs", "pub fn f() { g(); }\n");
    stage(&outer, "prod.sealed");
    stage_all(&inner);

    let d = read(&s, &request("."));
    assert!(!d.text.contains("sealed-value-never-sent"), "{}", d.text);
    assert!(!d.text.contains("vault-value-never-sent"), "{}", d.text);
    assert!(
        d.text.contains("GEMINI_MCP_SECRET_FILES `*.sealed`"),
        "{}",
        d.text
    );
    assert!(
        d.text
            .contains("GEMINI_MCP_SECRET_FILES `libs/inner/vault/**`"),
        "{}",
        d.text
    );
    assert_eq!(d.secret_files.len(), 2, "{:?}", d.secret_files);
    // The rest of the change is still reviewed.
    assert!(d.text.contains("+pub fn f() { g(); }"), "{}", d.text);
}

#[test]
fn secret_values_in_ordinary_files_are_redacted() {
    // Relies on the collector's `redact`: a private key block in a source file is replaced.
    let s = scratch();
    let repo = init(&s.root);
    write(&repo, "a.rs", "x\n");
    stage_all(&repo);
    commit(&repo, "first");
    let body = "MIIEpAIBAAKCAQEA3redactMEpleaseTHISisNOTreal";
    write(
        &repo,
        "a.rs",
        format!(
            "const KEY: &str = \"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----\";\n"
        ),
    );
    let d = read(&s, &request("."));
    assert!(!d.text.contains(body), "{}", d.text);
    assert!(d.redactions.total() >= 1);
}

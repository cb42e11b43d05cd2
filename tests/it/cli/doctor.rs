//! `doctor`: what is broken, a malformed glob, and the key and the model proved with one call.

use super::{fake, gemini_mcp, project, run, vars, with};

#[test]
fn doctor_says_what_is_broken() {
    let p = project();
    let r = run(gemini_mcp(&p.root, &[]).args(["doctor", "--offline"]));
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(r.stdout.contains("FAIL backend"), "{}", r.stdout);
    assert!(r.stdout.contains("GEMINI_API_KEY"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains(&format!("ok   PROJECT_ROOT: {}", p.root.display())),
        "{}",
        r.stdout
    );

    let r = run(gemini_mcp(
        &p.root,
        &[("GEMINI_API_KEY", "k"), ("GEMINI_MODEL", "not-a-model")],
    )
    .args(["doctor", "--offline"]));
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stdout.contains("FAIL model: GEMINI_MODEL"),
        "{}",
        r.stdout
    );

    let r = run(gemini_mcp(&p.root, &[("GEMINI_API_KEY", "k")]).args(["doctor", "--offline"]));
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(
        r.stdout.contains("ok   backend: Gemini REST API"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("FAIL"), "{}", r.stdout);

    // A broken setting is reported, not a crash.
    let r = run(gemini_mcp(&p.root, &[("GEMINI_BACKEND", "rest")]).arg("doctor"));
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stdout.contains("FAIL configuration: GEMINI_BACKEND"),
        "{}",
        r.stdout
    );
}

#[test]
fn doctor_reports_a_malformed_glob_and_serve_refuses_to_start() {
    let p = project();
    let vars = [("GEMINI_API_KEY", "k"), ("GEMINI_MCP_EXCLUDE", "gen/**,a[")];
    let r = run(gemini_mcp(&p.root, &vars).args(["doctor", "--offline"]));
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stdout.contains("FAIL configuration: GEMINI_MCP_EXCLUDE"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("a["),
        "the pattern is named: {}",
        r.stdout
    );
    let r = run(gemini_mcp(&p.root, &vars).arg("serve"));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("GEMINI_MCP_EXCLUDE"), "{}", r.stderr);
}

#[test]
fn doctor_proves_the_key_and_the_model_with_one_call() {
    let p = project();
    let fake = fake();
    let v = vars(&fake);
    let r = run(gemini_mcp(&p.root, &with(&v)).arg("doctor"));
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(r.stdout.contains("ok   Gemini: "), "{}", r.stdout);
    assert_eq!(fake.generate_requests().len(), 1);

    let wrong = [
        ("GEMINI_API_KEY", "wrong-key"),
        ("GEMINI_BASE_URL", v[1].1.as_str()),
    ];
    let r = run(gemini_mcp(&p.root, &wrong).arg("doctor"));
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(r.stdout.contains("FAIL Gemini: "), "{}", r.stdout);
    assert!(
        !r.stdout.contains("wrong-key"),
        "the key is never printed: {}",
        r.stdout
    );
}

#[test]
fn doctor_shows_the_review_rules_and_fails_on_a_configuration_a_review_would_refuse() {
    let p = project();
    let key = [("GEMINI_API_KEY", "k")];
    let r = run(gemini_mcp(&p.root, &key).args(["doctor", "--offline"]));
    assert!(r.stdout.contains("ok   review rules: none"), "{}", r.stdout);

    p.write(".gemini/styleguide.md", "- name the unit\n");
    p.write(
        ".gemini/config.yaml",
        "code_review:\n  comment_severity_threshold: HIGH\n",
    );
    let r = run(gemini_mcp(&p.root, &key).args(["doctor", "--offline"]));
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(
        r.stdout.contains(
            "ok   review rules: Review rules applied: .gemini/styleguide.md, .gemini/config.yaml (threshold high)"
        ),
        "{}",
        r.stdout
    );

    p.write(
        ".gemini/config.yaml",
        "code_review:\n  max_review_comments: lots\n",
    );
    let r = run(gemini_mcp(&p.root, &key).args(["doctor", "--offline"]));
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stdout
            .contains("FAIL review rules: .gemini/config.yaml: code_review.max_review_comments"),
        "{}",
        r.stdout
    );
}

//! Consensus from the terminal: `precommit --models … --agree N` fails only on findings N models
//! report at the same verified place, and `--dry-run` estimates every model and the synthesis
//! without asking any.

use serde_json::{Value, json};

use super::{changed_project, fake, gemini_mcp, run, vars, with};
use crate::support::fake_gemini::Script;

const MODELS: &str = "gemini-3.1-pro-preview,gemini-2.5-flash";

/// A review of `src/lib.rs` with one high finding quoting `evidence` at `line`.
fn high_at(line: u32, evidence: &str, verdict: &str) -> Script {
    Script::json(json!({
        "summary": "A review.",
        "verdict": verdict,
        "findings": [{"severity": "high", "file": "src/lib.rs", "line": line,
                      "title": format!("high at {line}"), "detail": "Why.", "evidence": evidence}]
    }))
}

/// Plants each model's review (`first` for the first model, `second` for the other) and a
/// synthesis.
fn plant(
    fake: &crate::support::fake_gemini::FakeGemini,
    first: (u32, &'static str),
    second: (u32, &'static str),
) {
    fake.respond_with(move |r| {
        if r.system_text()
            .contains("You combine the independent answers")
        {
            return Some(Script::text("SYNTHESIS."));
        }
        Some(match r.model.as_deref() {
            Some("gemini-3.1-pro-preview") => high_at(first.0, first.1, "needs_changes"),
            _ => high_at(second.0, second.1, "do_not_commit"),
        })
    });
}

#[test]
fn the_gate_can_require_that_models_agree() {
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    // Each model reports a different high finding.
    plant(
        &fake,
        (2, "a - b"),
        (1, "pub fn add(a: u32, b: u32) -> u32 {"),
    );
    let r = run(gemini_mcp(&p.root, &with(&v)).args([
        "precommit",
        "--models",
        MODELS,
        "--format",
        "json",
    ]));
    assert_eq!(
        r.code, 1,
        "every finding counts without --agree: {}",
        r.stderr
    );
    let r = run(gemini_mcp(&p.root, &with(&v)).args([
        "precommit",
        "--models",
        MODELS,
        "--agree",
        "2",
        "--format",
        "json",
    ]));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let out: Value = serde_json::from_str(&r.stdout).expect("one JSON document");
    assert_eq!(out["agree"], 2);
    assert_eq!(out["not_agreed"], 2);
    assert_eq!(out["passed"], true);
    // One model's do_not_commit is not the agreement either.
    assert_eq!(out["consensus"]["models"][1]["verdict"], "do_not_commit");
    let r =
        run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--models", MODELS, "--agree", "2"]));
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(
        r.stdout.contains(
            "2 finding(s) at or above high reported by fewer than 2 models not counted (--agree 2)"
        ),
        "{}",
        r.stdout
    );

    // Both at the subtraction (one with a line that is off): one finding of two models fails.
    plant(&fake, (2, "a - b"), (3, "a - b"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args([
        "precommit",
        "--models",
        MODELS,
        "--agree",
        "2",
        "--format",
        "json",
    ]));
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let out: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        out["findings"][0]["found_by"],
        json!(["gemini-3.1-pro-preview", "gemini-2.5-flash"])
    );
    // SARIF carries who found it, and stays valid SARIF.
    let r = run(gemini_mcp(&p.root, &with(&v)).args([
        "precommit",
        "--models",
        MODELS,
        "--format",
        "sarif",
    ]));
    let log: Value = serde_json::from_str(&r.stdout).expect("one SARIF document");
    super::validate_sarif(&log).unwrap();
    assert_eq!(
        log["runs"][0]["results"][0]["properties"]["found_by"],
        json!(["gemini-3.1-pro-preview", "gemini-2.5-flash"])
    );

    // --agree without several models is a usage error, before Gemini.
    fake.clear_requests();
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--agree", "2"]));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("use it with --models or --consensus"),
        "{}",
        r.stderr
    );
    assert!(fake.generate_requests().is_empty());
}

#[test]
fn a_dry_run_estimates_every_model_and_the_synthesis() {
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    let r = run(gemini_mcp(&p.root, &with(&v)).args([
        "chat",
        "Is this add correct?",
        "--file",
        "src/lib.rs",
        "--models",
        "gemini-2.5-pro:for,gemini-2.5-flash:against",
        "--model",
        "gemini-2.5-flash",
        "--dry-run",
        "--format",
        "json",
    ]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(fake.requests().is_empty(), "a dry run reached Gemini");
    let preview: Value = serde_json::from_str(&r.stdout).expect("one JSON document");
    let rows: Vec<(&str, &str)> = preview["consensus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["model"].as_str().unwrap(), r["role"].as_str().unwrap()))
        .collect();
    assert_eq!(
        rows,
        vec![
            ("gemini-2.5-pro", "for"),
            ("gemini-2.5-flash", "against"),
            ("gemini-2.5-flash", "synthesis")
        ]
    );
    let low: f64 = preview["consensus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cost_usd"]["low"].as_f64().unwrap())
        .sum();
    let total = preview["cost_usd"]["low"].as_f64().unwrap();
    assert!((total - low).abs() < 1e-12, "{total} is not the sum {low}");
    // The stances' instructions are part of each model's input.
    let inputs: Vec<u64> = preview["consensus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["input_tokens"].as_u64().unwrap())
        .collect();
    assert!(
        inputs[0] > preview["input"]["total"].as_u64().unwrap(),
        "{preview}"
    );

    let r = run(gemini_mcp(&p.root, &with(&v)).args([
        "chat",
        "Is this add correct?",
        "--models",
        "gemini-2.5-pro,gemini-2.5-flash",
        "--dry-run",
    ]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("Consensus:\n  gemini-2.5-pro: "),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("(synthesis)"), "{}", r.stdout);
}

#[test]
fn the_hook_asks_several_models_and_blocks_only_what_they_agree_on() {
    if crate::support::git_missing() {
        return;
    }
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    let env = with(&v);
    let r = run(
        gemini_mcp(&p.root, &env).args(["hook", "install", "--models", MODELS, "--agree", "2"])
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let hook = std::fs::read_to_string(p.repo.path().join("hooks/pre-commit")).unwrap();
    assert!(
        hook.contains(&format!("--models '{MODELS}' --agree 2")),
        "{hook}"
    );
    p.stage("src/lib.rs");

    // One model's finding each: the commit goes through.
    plant(
        &fake,
        (2, "a - b"),
        (1, "pub fn add(a: u32, b: u32) -> u32 {"),
    );
    let before = p.head();
    let r = p.git(&["commit", "-q", "-m", "subtract"], &env);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_ne!(p.head(), before);
    let asked: Vec<String> = fake
        .generate_requests()
        .iter()
        .filter_map(|r| r.model.clone())
        .collect();
    assert!(
        asked.contains(&"gemini-3.1-pro-preview".to_string())
            && asked.contains(&"gemini-2.5-flash".to_string()),
        "{asked:?}"
    );

    // Both at the same place: the commit is blocked.
    p.write(
        "src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 {\n    a - b\n}\n// again\n",
    );
    p.stage("src/lib.rs");
    plant(&fake, (2, "a - b"), (2, "a - b"));
    let before = p.head();
    let r = p.git(&["commit", "-q", "-m", "again"], &env);
    assert_ne!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(p.head(), before);

    // A hook with one model is refused at install, saying why.
    let r = run(gemini_mcp(&p.root, &env).args(["hook", "install", "--models", "pro"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("at least two models"), "{}", r.stderr);
}

#[test]
fn terminal_controls_in_the_models_answers_are_made_inert_on_the_terminal() {
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    let hostile = "Sure.\u{1b}]52;c;Y3VybCBldmlsLnNoIHwgc2g=\u{7}\u{1b}]0;owned\u{7}\u{9b}8m done";
    fake.respond_with(move |r| {
        let text = if r
            .system_text()
            .contains("You combine the independent answers")
        {
            format!("SYNTHESIS {hostile}")
        } else {
            format!("{} says {hostile}", r.model.clone().unwrap_or_default())
        };
        // The model version is Gemini's text too, and the reply names each model by it.
        Some(Script::text(text).model_version("evil\u{1b}]52;c;eA==\u{7}"))
    });
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["chat", "Is add right?", "--models", MODELS]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("SYNTHESIS Sure."), "{}", r.stdout);
    assert!(
        r.stdout.contains("## Consensus of 2 models"),
        "{}",
        r.stdout
    );
    for out in [&r.stdout, &r.stderr] {
        assert!(!out.contains("\u{1b}]"), "{out:?}");
        assert!(!out.contains(['\u{7}', '\u{9b}']), "{out:?}");
    }
}

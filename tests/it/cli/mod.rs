//! The command line run as a process: `precommit` like a linter (exit codes, JSON, SARIF), the
//! pre-commit hook installed and run by a real `git commit`, `doctor`. Repositories are built
//! with git2; the hook test runs the real `git` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use git2::{Repository, Signature};
use serde_json::{Value, json};

use crate::support::Hermetic as _;
use crate::support::fake_gemini::{FakeGemini, Script};

mod outputs;

/// The binary under test, with a cleared environment rooted at `root` (memory thread store,
/// no key unless given), run in `root`.
fn gemini_mcp(root: &Path, vars: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gemini-mcp"));
    hermetic(&mut cmd, root);
    cmd.env("PROJECT_ROOT", root)
        .env("GEMINI_MCP_STORE", "memory");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd
}

fn hermetic(cmd: &mut Command, root: &Path) {
    cmd.hermetic_env()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", root.join(".home"))
        .env("GEMINI_MCP_STATE_DIR", root.join(".state"))
        .env("GEMINI_MCP_LOG", "warn")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .current_dir(root);
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(cmd: &mut Command) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("run the command");
    Run {
        code: status.code().expect("exited normally"),
        stdout: String::from_utf8(stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(stderr).expect("utf-8 stderr"),
    }
}

/// A scratch repository (its work tree is `root`, canonical), with one commit.
struct Project {
    _dir: tempfile::TempDir,
    root: PathBuf,
    repo: Repository,
}

fn project() -> Project {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let repo = Repository::init(&root).unwrap();
    {
        let mut cfg = repo.config().unwrap();
        cfg.set_str("user.name", "Test").unwrap();
        cfg.set_str("user.email", "test@example.com").unwrap();
        // Files as written, whatever the machine's git says (Git for Windows' system
        // configuration turns core.autocrlf on, which libgit2 reads too).
        cfg.set_bool("core.autocrlf", false).unwrap();
    }
    let p = Project {
        _dir: dir,
        root,
        repo,
    };
    p.write(
        "src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n",
    );
    p.stage("src/lib.rs");
    p.commit("first");
    p
}

impl Project {
    fn write(&self, rel: &str, content: &str) {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    fn stage(&self, rel: &str) {
        let mut index = self.repo.index().unwrap();
        index.add_path(Path::new(rel)).unwrap();
        index.write().unwrap();
    }

    fn commit(&self, message: &str) -> git2::Oid {
        let mut index = self.repo.index().unwrap();
        let tree = self.repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = Signature::now("Test", "test@example.com").unwrap();
        let parent = self.repo.head().ok().map(|h| h.peel_to_commit().unwrap());
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        self.repo
            .commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
            .unwrap()
    }

    fn head(&self) -> git2::Oid {
        self.repo.head().unwrap().peel_to_commit().unwrap().id()
    }

    /// The real `git`, hermetic, with `vars`.
    fn git(&self, args: &[&str], vars: &[(&str, &str)]) -> Run {
        let mut cmd = Command::new("git");
        hermetic(&mut cmd, &self.root);
        cmd.env("PROJECT_ROOT", &self.root)
            .env("GEMINI_MCP_STORE", "memory")
            .args(args);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        run(&mut cmd)
    }
}

/// An address nothing answers on: a call to Gemini there fails fast.
const NOWHERE: &str = "http://127.0.0.1:9";

#[test]
fn nothing_to_review_passes_without_calling_gemini() {
    let p = project();
    let vars = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", NOWHERE)];
    let r = run(gemini_mcp(&p.root, &vars).args(["precommit", "--fail-on", "low"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("Nothing to review"), "{}", r.stdout);

    let r = run(gemini_mcp(&p.root, &vars).args(["precommit", "--format", "json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).expect("stdout is one JSON document");
    assert_eq!(v["status"], "nothing_to_review");
    assert_eq!(v["changed_files"], Value::Array(vec![]));
    assert_eq!(v["passed"], true);
    assert_eq!(v["fail_on"], "high");
}

#[test]
fn could_not_run_is_exit_2_with_the_reason_on_stderr() {
    let p = project();
    std::fs::create_dir_all(p.root.join(".home")).unwrap();
    let plain = tempfile::tempdir().unwrap();
    let plain_root = std::fs::canonicalize(plain.path()).unwrap();
    let vars = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", NOWHERE)];

    // Not a repository: a usage error naming --path.
    let r = run(gemini_mcp(&plain_root, &vars).arg("precommit"));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("'--path'"), "{}", r.stderr);
    assert!(
        r.stderr.contains("not inside a git repository"),
        "{}",
        r.stderr
    );
    assert_eq!(r.stdout, "");

    // A ref that names nothing: a usage error naming --compare-to.
    let r = run(gemini_mcp(&p.root, &vars).args(["precommit", "--compare-to", "nope"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("'--compare-to'"), "{}", r.stderr);
    assert_eq!(r.stdout, "");

    // A bad flag value: clap's error, naming the flag.
    let r = run(gemini_mcp(&p.root, &vars).args(["precommit", "--fail-on", "severe"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--fail-on"), "{}", r.stderr);
    assert_eq!(r.stdout, "");

    // Changes but no backend: the reason and what to do.
    p.write(
        "src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 {\n    a - b\n}\n",
    );
    let r = run(gemini_mcp(&p.root, &[]).arg("precommit"));
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(r.stderr.contains("GEMINI_API_KEY"), "{}", r.stderr);
    assert_eq!(r.stdout, "");

    // A path outside PROJECT_ROOT.
    let r = run(gemini_mcp(&p.root, &vars).args(["precommit", "--path", "/"]));
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("outside the project root"),
        "{}",
        r.stderr
    );
}

#[test]
fn the_hook_blocks_a_commit_it_cannot_review_and_uninstalls() {
    if crate::support::git_missing() {
        return;
    }
    let p = project();
    let r = run(gemini_mcp(&p.root, &[]).args(["hook", "install"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let hook = p.repo.path().join("hooks/pre-commit");
    assert!(
        r.stdout.contains(&hook.display().to_string()),
        "{}",
        r.stdout
    );

    // Installing again updates our own hook in place.
    let r = run(gemini_mcp(&p.root, &[]).args(["hook", "install", "--fail-on", "critical"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        std::fs::read_to_string(&hook)
            .unwrap()
            .contains("--fail-on critical")
    );

    // No key: the review cannot run, so the commit does not happen.
    p.write("src/new.rs", "pub fn new_code() {}\n");
    p.stage("src/new.rs");
    let before = p.head();
    let r = p.git(&["commit", "-q", "-m", "add new code"], &[]);
    assert_ne!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("GEMINI_API_KEY"), "{}", r.stderr);
    assert_eq!(p.head(), before);
    // --no-verify skips it.
    let r = p.git(&["commit", "-q", "--no-verify", "-m", "add new code"], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_ne!(p.head(), before);

    let r = run(gemini_mcp(&p.root, &[]).args(["hook", "uninstall"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!hook.exists());

    // Another tool's hook is neither replaced nor removed.
    std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
    let r = run(gemini_mcp(&p.root, &[]).args(["hook", "install"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--force"), "{}", r.stderr);
    let r = run(gemini_mcp(&p.root, &[]).args(["hook", "uninstall"]));
    assert_eq!(r.code, 2);
    assert_eq!(
        std::fs::read_to_string(&hook).unwrap(),
        "#!/bin/sh\nexit 0\n"
    );
}

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

/// The key the fake requires.
const KEY: &str = "test-key";

/// A review answer in the response schema's shape.
fn review(findings: &[(&str, &str, Option<u32>)], verdict: &str) -> Script {
    let findings: Vec<Value> = findings
        .iter()
        .map(|(severity, file, line)| {
            let mut f = json!({
                "severity": severity,
                "file": file,
                "title": format!("A {severity} problem"),
                "detail": format!("Why the {severity} problem matters."),
                "fix": "The fix."
            });
            if let Some(l) = line {
                f["line"] = json!(l);
                f["evidence"] = json!(evidence(file, *l));
            }
            f
        })
        .collect();
    Script::json(
        json!({"summary": "The change subtracts.", "findings": findings, "verdict": verdict}),
    )
}

/// The code at `file:line` in these tests' projects, quoted as a review quotes it.
fn evidence(file: &str, line: u32) -> &'static str {
    match (file, line) {
        ("src/lib.rs", 1) => "pub fn add(a: u32, b: u32) -> u32 {",
        ("src/lib.rs", 2) => "a - b",
        ("src/good.rs", 1) => "pub fn good() {}",
        ("src/bad.rs", 1) => "std::ptr::null::<u8>().read();",
        _ => panic!("no quote for {file}:{line}"),
    }
}

/// The `file:` URI SARIF gives a (canonical) project root: `file:///tmp/x/`, on Windows
/// `file:///C:/…/x/` (no `\\?\`, forward slashes).
fn root_uri(root: &Path) -> String {
    let shown = gemini_mcp_server::collector::sandbox::shown(root)
        .display()
        .to_string()
        .replace('\\', "/");
    let slash = if shown.starts_with('/') { "" } else { "/" };
    format!("file://{slash}{shown}/")
}

fn fake() -> FakeGemini {
    let fake = FakeGemini::start();
    fake.require_key(KEY);
    fake
}

fn vars(fake: &FakeGemini) -> [(&'static str, String); 2] {
    [
        ("GEMINI_API_KEY", KEY.to_string()),
        ("GEMINI_BASE_URL", fake.base_url()),
    ]
}

fn with<'a>(v: &'a [(&'static str, String); 2]) -> [(&'static str, &'a str); 2] {
    [(v[0].0, v[0].1.as_str()), (v[1].0, v[1].1.as_str())]
}

/// A project with an unstaged change to `src/lib.rs`.
fn changed_project() -> Project {
    let p = project();
    p.write(
        "src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 {\n    a - b\n}\n",
    );
    p
}

#[test]
fn exit_codes_follow_fail_on_and_gemini_sees_the_diff() {
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    // Findings: one high, one low.
    for (fail_on, want, failing) in [
        ("critical", 0, 0),
        ("high", 1, 1),
        ("medium", 1, 1),
        ("low", 1, 2),
        ("none", 0, 0),
    ] {
        fake.push(review(
            &[
                ("high", "src/lib.rs", Some(2)),
                ("low", "src/lib.rs", Some(1)),
            ],
            "needs_changes",
        ));
        let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--fail-on", fail_on]));
        assert_eq!(
            r.code, want,
            "--fail-on {fail_on}: {}{}",
            r.stdout, r.stderr
        );
        assert!(r.stdout.contains("[HIGH]"), "{}", r.stdout);
        assert!(r.stdout.contains("continuation_id: "), "{}", r.stdout);
        let outcome = if want == 1 {
            format!("FAIL: {failing} finding(s) at or above {fail_on} (--fail-on {fail_on}).")
        } else if fail_on == "none" {
            String::new()
        } else {
            format!("PASS: no finding at or above {fail_on} (--fail-on {fail_on}).")
        };
        if outcome.is_empty() {
            assert!(
                !r.stdout.contains("PASS") && !r.stdout.contains("FAIL"),
                "{}",
                r.stdout
            );
        } else {
            assert!(r.stdout.contains(&outcome), "{outcome}\n{}", r.stdout);
        }
    }
    // No findings at all passes even --fail-on low. Piped, the output has no colours and
    // stderr no progress indicator.
    fake.push(review(&[], "ready"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--fail-on", "low"]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(!r.stdout.contains('\u{1b}'), "{:?}", r.stdout);
    assert!(!r.stderr.contains('\u{1b}'), "{:?}", r.stderr);
    // Colours can be forced (CLICOLOR_FORCE, as for most terminal tools).
    fake.push(review(&[("high", "src/lib.rs", Some(2))], "needs_changes"));
    let mut forced = with(&v).to_vec();
    forced.push(("CLICOLOR_FORCE", "1"));
    let r = run(gemini_mcp(&p.root, &forced).args(["precommit"]));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("\u{1b}["), "{:?}", r.stdout);

    // What Gemini was sent: the diff, in JSON mode, with precommit's instructions.
    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 7);
    let last = &sent[6];
    assert!(last.json_mode());
    assert!(
        last.system_text().contains("last reviewer before a commit"),
        "{}",
        last.system_text()
    );
    let text = last.last_user_text();
    assert!(
        text.contains("## Unstaged changes (index → work tree)"),
        "{text}"
    );
    assert!(text.contains("-    a + b\n+    a - b"), "{text}");
    assert!(text.contains("- modified: src/lib.rs [unstaged]"), "{text}");
}

#[test]
fn json_output_has_the_reply_findings_and_the_outcome() {
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    fake.push(review(
        &[("medium", "src/lib.rs", Some(2))],
        "needs_changes",
    ));
    let r = run(gemini_mcp(&p.root, &with(&v)).args([
        "precommit",
        "--format",
        "json",
        "--fail-on",
        "medium",
        "--original-request",
        "Make add subtract",
    ]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let out: Value = serde_json::from_str(&r.stdout).expect("stdout is one JSON document");
    assert_eq!(out["status"], "success");
    assert_eq!(out["verdict"], "needs_changes");
    assert_eq!(out["fail_on"], "medium");
    assert_eq!(out["passed"], false);
    let f = &out["findings"][0];
    assert_eq!(f["severity"], "medium");
    assert_eq!(f["file"], "src/lib.rs");
    assert_eq!(f["line"], 2);
    assert_eq!(f["title"], "A medium problem");
    assert_eq!(f["detail"], "Why the medium problem matters.");
    assert_eq!(f["fix"], "The fix.");
    assert_eq!(
        out["changed_files"],
        json!([{"repo": ".", "path": "src/lib.rs", "status": "modified"}])
    );
    let id = out["continuation_id"].as_str().expect("a continuation_id");
    assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");
    assert!(out["model"].is_string(), "{out}");
    assert!(out["usage"]["input"].as_u64().is_some(), "{out}");
    assert!(
        out["text"]
            .as_str()
            .unwrap()
            .contains("**Verdict: needs_changes**")
    );
    // The intent reached Gemini.
    let sent = fake.generate_requests();
    assert!(sent[0].last_user_text().contains("Make add subtract"));
}

/// What the OASIS SARIF 2.1.0 schema (vendored: `fixtures/sarif/`) finds wrong with `log`.
fn sarif_schema_errors(log: &Value) -> Vec<String> {
    let schema: Value =
        serde_json::from_str(include_str!("../../../fixtures/sarif/sarif-schema-2.1.0.json")).unwrap();
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft4)
        .should_validate_formats(true)
        .build(&schema)
        .expect("the SARIF schema compiles");
    validator
        .iter_errors(log)
        .map(|e| format!("{e} (at {})", e.instance_path()))
        .collect()
}

/// Valid against the SARIF 2.1.0 schema, with the fields code-scanning UIs need beside it.
fn validate_sarif(log: &Value) -> Result<(), String> {
    let errors = sarif_schema_errors(log);
    if !errors.is_empty() {
        return Err(format!("not valid SARIF 2.1.0: {errors:#?}"));
    }
    let req = |v: &Value, what: &str| -> Result<(), String> {
        if v.is_null() {
            Err(format!("missing {what}"))
        } else {
            Ok(())
        }
    };
    if log["version"] != "2.1.0" {
        return Err(format!("version is {}", log["version"]));
    }
    if !log["$schema"].as_str().is_some_and(|s| s.contains("sarif")) {
        return Err("no $schema".into());
    }
    let runs = log["runs"].as_array().ok_or("runs is not an array")?;
    for run in runs {
        let driver = &run["tool"]["driver"];
        req(driver, "runs[].tool.driver")?;
        if driver["name"].as_str().is_none_or(str::is_empty) {
            return Err("driver.name".into());
        }
        req(&driver["version"], "driver.version")?;
        let rules = driver["rules"].as_array().ok_or("driver.rules")?;
        let ids: Vec<&str> = rules
            .iter()
            .map(|r| r["id"].as_str().unwrap_or(""))
            .collect();
        if ids.iter().any(|i| i.is_empty()) {
            return Err("a rule without an id".into());
        }
        for result in run["results"].as_array().ok_or("runs[].results")? {
            let rule = result["ruleId"].as_str().ok_or("result.ruleId")?;
            let index = result["ruleIndex"].as_u64().ok_or("result.ruleIndex")? as usize;
            if ids.get(index) != Some(&rule) {
                return Err(format!("ruleIndex {index} is not {rule}"));
            }
            if !["none", "note", "warning", "error"]
                .contains(&result["level"].as_str().unwrap_or(""))
            {
                return Err(format!("level {}", result["level"]));
            }
            if result["message"]["text"].as_str().is_none_or(str::is_empty) {
                return Err("result.message.text".into());
            }
            for loc in result["locations"].as_array().ok_or("result.locations")? {
                let phys = &loc["physicalLocation"];
                if !phys["artifactLocation"]["uri"]
                    .as_str()
                    .is_some_and(|u| !u.is_empty() && !u.contains(' '))
                {
                    return Err("artifactLocation.uri".into());
                }
                if phys["region"]["startLine"].as_u64().is_none_or(|l| l < 1) {
                    return Err("region.startLine".into());
                }
            }
        }
    }
    Ok(())
}

#[test]
fn sarif_output_is_valid_and_places_the_findings() {
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    fake.push(review(
        &[
            ("critical", "src/lib.rs", Some(2)),
            ("low", "src/lib.rs", None),
        ],
        "do_not_commit",
    ));
    let r = run(gemini_mcp(&p.root, &with(&v)).args([
        "precommit",
        "--format",
        "sarif",
        "--fail-on",
        "high",
    ]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let log: Value = serde_json::from_str(&r.stdout).expect("stdout is one JSON document");
    validate_sarif(&log).unwrap();
    let run0 = &log["runs"][0];
    assert_eq!(run0["tool"]["driver"]["name"], "gemini-mcp");
    assert_eq!(run0["tool"]["driver"]["version"], env!("CARGO_PKG_VERSION"));
    let results = run0["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["level"], "error");
    assert_eq!(results[0]["ruleId"], "gemini-precommit/critical");
    let loc = &results[0]["locations"][0]["physicalLocation"];
    assert_eq!(loc["artifactLocation"]["uri"], "src/lib.rs");
    assert_eq!(loc["region"]["startLine"], 2);
    assert_eq!(results[1]["level"], "note");
    assert_eq!(run0["properties"]["verdict"], "do_not_commit");
    assert_eq!(
        run0["originalUriBaseIds"]["%SRCROOT%"]["uri"],
        root_uri(&p.root)
    );

    // Run from a subdirectory (PROJECT_ROOT there too), paths stay repository-relative and
    // %SRCROOT% is the repository's top.
    fake.push(review(&[("high", "src/lib.rs", Some(2))], "needs_changes"));
    let sub = p.root.join("src");
    let r = run(gemini_mcp(&sub, &with(&v)).env("PROJECT_ROOT", &sub).args([
        "precommit",
        "--format",
        "sarif",
    ]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let from_sub: Value = serde_json::from_str(&r.stdout).unwrap();
    validate_sarif(&from_sub).unwrap();
    assert_eq!(
        from_sub["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"],
        root_uri(&p.root)
    );
    assert_eq!(
        from_sub["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "src/lib.rs"
    );

    // The validator itself rejects what is missing.
    let mut broken = log.clone();
    broken["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"] = json!({});
    assert!(validate_sarif(&broken).is_err());
    let mut broken = log.clone();
    broken["runs"][0]["tool"]["driver"]["name"] = json!("");
    assert!(validate_sarif(&broken).is_err());
}

#[test]
fn the_hook_passes_and_fails_real_commits() {
    if crate::support::git_missing() {
        return;
    }
    let p = project();
    let fake = fake();
    let v = vars(&fake);
    let env = with(&v);
    let r = run(gemini_mcp(&p.root, &env).args(["hook", "install", "--fail-on", "high"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    // An unstaged edit that is not part of any commit below.
    p.write(
        "src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 {\n    a + b + UNSTAGED\n}\n",
    );

    // A clean review: the commit goes through (whatever PROJECT_ROOT the shell has).
    let elsewhere = tempfile::tempdir().unwrap();
    let mut env = env.to_vec();
    env.push(("PROJECT_ROOT", elsewhere.path().to_str().unwrap()));
    p.write("src/good.rs", "pub fn good() {}\n");
    p.stage("src/good.rs");
    fake.push(review(&[("low", "src/good.rs", Some(1))], "ready"));
    let before = p.head();
    let r = p.git(&["commit", "-q", "-m", "good"], &env);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_ne!(p.head(), before);
    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 1);
    let text = sent[0].last_user_text();
    assert!(text.contains("+pub fn good() {}"), "{text}");
    assert!(
        !text.contains("UNSTAGED"),
        "the hook reviews what is committed only: {text}"
    );
    assert_eq!(
        sent[0].body["serviceTier"], "flex",
        "the hook asks for the flex tier"
    );

    // A high finding: the commit is refused, and git shows why.
    p.write(
        "src/bad.rs",
        "pub fn bad() { unsafe { std::ptr::null::<u8>().read(); } }\n",
    );
    p.stage("src/bad.rs");
    fake.push(review(&[("high", "src/bad.rs", Some(1))], "do_not_commit"));
    let before = p.head();
    let r = p.git(&["commit", "-q", "-m", "bad"], &env);
    assert_ne!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(p.head(), before);
    let shown = format!("{}{}", r.stdout, r.stderr);
    assert!(
        shown.contains("[HIGH]") && shown.contains("FAIL: 1 finding(s) at or above high"),
        "{shown}"
    );
    assert_eq!(fake.generate_requests().len(), 2);
}

#[test]
fn the_hook_reviews_what_commit_a_commits() {
    if crate::support::git_missing() {
        return;
    }
    // `git commit -a` stages into a temporary index and hands it to the hook as GIT_INDEX_FILE.
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    let env = with(&v);
    let r = run(gemini_mcp(&p.root, &env).args(["hook", "install"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    fake.push(review(&[], "ready"));
    let r = p.git(&["commit", "-q", "-a", "-m", "subtract"], &env);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 1, "the change was reviewed, not found empty");
    let text = sent[0].last_user_text();
    assert!(text.contains("## Staged changes (HEAD → index)"), "{text}");
    assert!(text.contains("+    a - b"), "{text}");
}

#[test]
fn the_answer_tools_run_as_subcommands_and_print_their_continuation_id() {
    let p = project();
    let fake = fake();
    let v = vars(&fake);
    let env = with(&v);
    for args in [
        vec!["chat", "Is this a good idea?"],
        vec![
            "debug",
            "It returns the wrong sum",
            "--error-context",
            "assert 2 == 0",
        ],
        vec![
            "thinkdeep",
            "I think addition is commutative.",
            "--focus-area",
            "math",
        ],
    ] {
        let r = run(gemini_mcp(&p.root, &env).args(&args));
        assert_eq!(r.code, 0, "{args:?}: {}{}", r.stdout, r.stderr);
        assert!(r.stdout.contains("FAKE-REPLY"), "{args:?}: {}", r.stdout);
        assert!(
            r.stdout.contains("continuation_id: "),
            "{args:?}: {}",
            r.stdout
        );
    }
    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 3);
    assert!(sent[0].last_user_text().contains("Is this a good idea?"));
    assert!(sent[1].last_user_text().contains("assert 2 == 0"));
    assert!(sent[2].last_user_text().contains("math"));

    // stdin for "-".
    let mut cmd = gemini_mcp(&p.root, &env);
    cmd.args(["chat", "-", "--format", "json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"A question from a pipe")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(uuid::Uuid::parse_str(out["continuation_id"].as_str().unwrap()).is_ok());
    assert!(
        fake.generate_requests()[3]
            .last_user_text()
            .contains("A question from a pipe")
    );

    // A malformed --continuation-id is an argument error naming the flag.
    let r =
        run(gemini_mcp(&p.root, &env).args(["chat", "hi", "--continuation-id", "not-a-thread"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("'--continuation-id'"), "{}", r.stderr);
}

#[test]
fn codereview_and_analyze_run_as_subcommands_on_files() {
    let p = project();
    let fake = fake();
    let v = vars(&fake);
    let env = with(&v);
    // At line 1: its quote is the same before and after the change the other tests make.
    fake.push(review(&[("critical", "src/lib.rs", Some(1))], "ready"));
    let r = run(gemini_mcp(&p.root, &env).args([
        "codereview",
        "src/lib.rs",
        "--context",
        "Adds numbers",
        "--fail-on",
        "critical",
    ]));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("[CRITICAL]"), "{}", r.stdout);
    assert!(r.stdout.contains("continuation_id: "), "{}", r.stdout);
    let r =
        run(gemini_mcp(&p.root, &env).args(["analyze", "src", "--question", "What does it do?"]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("FAKE-REPLY"), "{}", r.stdout);
    let sent = fake.generate_requests();
    assert!(sent[0].json_mode());
    assert!(
        sent[0].last_user_text().contains("a + b"),
        "the file was sent"
    );
    assert!(
        sent[1].last_user_text().contains("a + b"),
        "the directory was expanded"
    );
}

#[test]
fn a_terminal_conversation_continues_in_another_process() {
    // Needs a thread store shared between processes: the embedded one.
    let p = project();
    let fake = fake();
    let v = vars(&fake);
    let mut env: Vec<(&str, &str)> = with(&v).to_vec();
    env.push(("GEMINI_MCP_STORE", "embedded"));
    let r = run(gemini_mcp(&p.root, &env).args(["chat", "First question", "--format", "json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out: Value = serde_json::from_str(&r.stdout).unwrap();
    let id = out["continuation_id"].as_str().unwrap().to_string();
    let r =
        run(gemini_mcp(&p.root, &env).args(["chat", "Second question", "--continuation-id", &id]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(&format!("continuation_id: {id}")),
        "{}",
        r.stdout
    );
    let sent = fake.generate_requests();
    let messages = sent[1].messages();
    assert!(messages[0].1.contains("First question"), "{messages:?}");
    assert!(sent[1].last_user_text().contains("Second question"));
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

#[cfg(unix)]
#[test]
fn an_interrupted_review_exits_2_at_once() {
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    fake.push(Script::echo().delay_headers(std::time::Duration::from_secs(30)));
    let child = gemini_mcp(&p.root, &with(&v))
        .arg("precommit")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the request is at the fake, then stop the review.
    let started = std::time::Instant::now();
    while fake.generate_requests().is_empty() {
        assert!(
            started.elapsed().as_secs() < 20,
            "the request never arrived"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(started.elapsed().as_secs() < 20, "it waited for the answer");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(out.stdout.is_empty());
}

/// Sends SIGTERM to `child` once it has had `after` to start, and returns its exit code, its
/// stderr and how long it took to exit (failing the test if it has not exited 5 s later).
#[cfg(unix)]
fn terminate(
    mut child: std::process::Child,
    after: std::time::Duration,
) -> (Option<i32>, String, std::time::Duration) {
    use std::io::Read;
    std::thread::sleep(after);
    let sent = std::time::Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut stderr)
                .unwrap();
            return (status.code(), stderr, sent.elapsed());
        }
        if sent.elapsed() > std::time::Duration::from_secs(5) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running 5 s after SIGTERM");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[cfg(unix)]
#[test]
fn a_run_stuck_in_a_blocking_read_exits_2_on_sigterm() {
    let p = project();
    let fake = fake();
    let v = vars(&fake);
    // `chat -` reads the prompt from a stdin that never ends.
    let child = gemini_mcp(&p.root, &with(&v))
        .args(["chat", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (code, stderr, _) = terminate(child, std::time::Duration::from_millis(500));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(fake.generate_requests().is_empty());
}

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
fn the_gate_never_passes_a_review_it_could_not_read() {
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    let other_words = json!({"summary": "", "verdict": "ready", "findings": [
        {"level": "critical", "path": "src/lib.rs", "line_number": 2, "message": "add subtracts"}]});
    for (answer, unverified, want, shown) in [
        // No findings list: the review was not read.
        (
            json!({"summary": "LGTM", "status": "approved"}),
            false,
            2,
            "findings",
        ),
        (
            json!({"summary": "Bad.", "verdict": "do_not_commit"}),
            false,
            2,
            "findings",
        ),
        // A critical finding in other words is read; quoting no evidence, it is unverified:
        // counted with --fail-on-unverified, else passed over, saying so.
        (other_words.clone(), true, 1, "[CRITICAL]"),
        (
            other_words,
            false,
            0,
            "1 unverified finding(s) at or above high not counted",
        ),
        // The verdict alone blocks.
        (
            json!({"summary": "Do not.", "verdict": "do_not_commit", "findings": []}),
            false,
            1,
            "verdict is do_not_commit",
        ),
        (
            json!({"summary": "Meh.", "verdict": "do_not_commit", "findings": [
                {"severity": "low", "file": "src/lib.rs", "title": "nit", "detail": "nit"}]}),
            false,
            1,
            "verdict is do_not_commit",
        ),
        // What a readable, clean review looks like.
        (
            json!({"summary": "Fine.", "verdict": "ready", "findings": []}),
            false,
            0,
            "PASS",
        ),
    ] {
        fake.push(Script::json(answer.clone()));
        let mut cmd = gemini_mcp(&p.root, &with(&v));
        cmd.args(["precommit", "--fail-on", "high"]);
        if unverified {
            cmd.arg("--fail-on-unverified");
        }
        let r = run(&mut cmd);
        assert_eq!(r.code, want, "{answer}: {}{}", r.stdout, r.stderr);
        assert!(
            format!("{}{}", r.stdout, r.stderr).contains(shown),
            "{answer}: {}{}",
            r.stdout,
            r.stderr
        );
    }
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

#[test]
fn investigate_from_the_terminal_prints_the_answer_and_the_steps_in_json() {
    let p = project();
    let fake = fake();
    let v = vars(&fake);
    fake.push(Script::calls(
        &[
            ("git_log", json!({"path": "src/lib.rs"})),
            ("read_file", json!({"path": "src/lib.rs"})),
        ],
        "U0lH",
        [100, 5, 5],
    ))
    .push(Script::text("`add` adds: src/lib.rs:2."));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["investigate", "What does add do?"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.starts_with("`add` adds: src/lib.rs:2."),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("Investigation: 2 steps (answered); read src/lib.rs"),
        "{}",
        r.stdout
    );
    // Not a terminal: no progress on stderr, nothing on stdout but the reply.
    assert!(!r.stderr.contains("git log"), "{}", r.stderr);
    let sent = fake.generate_requests();
    let log = sent[1].body["contents"][2]["parts"][0]["functionResponse"]["response"]["output"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(log.contains("Test: first"), "{log}");

    fake.push(Script::calls(
        &[("list_files", json!({}))],
        "U0lH",
        [100, 5, 5],
    ))
    .push(Script::text("done"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args([
        "investigate",
        "List it.",
        "--max-steps",
        "1",
        "--format",
        "json",
    ]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(out["stop_reason"], "max_steps");
    assert_eq!(out["steps"][0]["tool"], "list_files");

    let r = run(gemini_mcp(&p.root, &with(&v)).args(["investigate", "x", "--max-steps", "0"]));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--max-steps"), "{}", r.stderr);
}

#[test]
fn threads_are_listed_shown_exported_and_deleted_from_the_terminal() {
    let p = project();
    let fake = fake();
    let v = vars(&fake);
    let mut vars: Vec<(&str, &str)> = with(&v).to_vec();
    vars.push(("GEMINI_MCP_STORE", "embedded"));
    fake.push(Script::text("ANSWER-ONE"));
    let r = run(gemini_mcp(&p.root, &vars).args(["chat", "Is a trie overkill for 200 routes?"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let threads = |args: &[&str]| run(gemini_mcp(&p.root, &vars).arg("threads").args(args));

    let list = threads(&["list"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    let line = list.stdout.lines().next().unwrap().to_string();
    let id = line.split_whitespace().next().unwrap().to_string();
    assert!(line.contains("1 turn") && line.contains("chat"), "{line}");
    assert!(
        line.ends_with("Is a trie overkill for 200 routes?"),
        "{line}"
    );
    let json: Value = serde_json::from_str(&threads(&["list", "--json"]).stdout).unwrap();
    assert_eq!(json["threads"][0]["id"], id.as_str());

    let show = threads(&["show", "latest"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(
        show.stdout.starts_with(&format!("# Thread {id}")),
        "{}",
        show.stdout
    );
    assert!(show.stdout.contains("ANSWER-ONE"), "{}", show.stdout);
    let export: Value =
        serde_json::from_str(&threads(&["export", &id, "--format", "json"]).stdout).unwrap();
    assert_eq!(export["turns"][0]["response"], "ANSWER-ONE");
    let bad = threads(&["export", &id, "--format", "pdf"]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("markdown or json"), "{}", bad.stderr);
    let bad = threads(&["show", "not-an-id"]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("not a thread id"), "{}", bad.stderr);

    let del = threads(&["delete", &id]);
    assert_eq!(del.code, 0, "{}", del.stderr);
    assert_eq!(del.stdout, format!("deleted {id}\n"));
    assert_eq!(threads(&["list"]).stdout, "No threads in this project.\n");
    let gone = threads(&["show", &id]);
    assert_eq!(gone.code, 2);
    assert!(
        gone.stderr.contains("unknown or has expired"),
        "{}",
        gone.stderr
    );
}

#[test]
fn the_tier_is_asked_for_and_the_served_tier_and_cost_are_reported() {
    let p = project();
    let fake = fake();
    let v = vars(&fake);
    // Google says which tier served a call in the `x-gemini-service-tier` answer header, not in
    // the body: here a flex call served at standard.
    fake.push(
        Script::sse(
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"FLEX-ANSWER\"}],\"role\":\"model\"},\"finishReason\":\"STOP\"}],\
\"usageMetadata\":{\"promptTokenCount\":1000000,\"candidatesTokenCount\":100000,\"totalTokenCount\":1100000},\
\"modelVersion\":\"gemini-3.8-flash\"}\r\n\r\n",
        )
        .served_tier("standard"),
    );
    let r = run(gemini_mcp(&p.root, &with(&v)).args([
        "--tier",
        "flex",
        "chat",
        "Quick question.",
        "--model",
        "gemini-3.8-flash",
        "--format",
        "json",
    ]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let sent = fake.generate_requests();
    assert_eq!(sent[0].body["serviceTier"], "flex");
    let out: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(out["usage"]["tier"], "standard", "{out}");
    // 1M in and 100k out of 3.8 Flash at its launch price: $0.75 + $0.375, at standard (the
    // tier that served it), not at flex's half.
    let cost = out["usage"]["cost_usd"].as_f64().unwrap();
    assert!((cost - 1.125).abs() < 1e-9, "{cost}");
    assert!(
        out["text"]
            .as_str()
            .unwrap()
            .contains("served by the standard tier"),
        "{out}"
    );
    // Served at the tier asked for, flex: half the price; priority served at standard (over its
    // limit): the standard price.
    for (asked, served, want) in [
        ("flex", None, 0.5625),
        ("priority", Some("standard"), 1.125),
    ] {
        let mut answer = Script::text("fine").usage(1_000_000, 100_000, 0, 0);
        if let Some(s) = served {
            answer = answer.served_tier(s);
        }
        fake.push(answer);
        let r = run(gemini_mcp(&p.root, &with(&v)).args([
            "--tier",
            asked,
            "chat",
            "Again.",
            "--model",
            "gemini-3.8-flash",
            "--format",
            "json",
        ]));
        assert_eq!(r.code, 0, "{}", r.stderr);
        let out: Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(out["usage"]["tier"], served.unwrap_or(asked), "{out}");
        let cost = out["usage"]["cost_usd"].as_f64().unwrap();
        assert!((cost - want).abs() < 1e-9, "{asked}: {cost}");
    }
    // The thread's running total: each turn at the tier that served it (the first at flex).
    let mut store: Vec<(&str, &str)> = with(&v).to_vec();
    store.push(("GEMINI_MCP_STORE", "embedded"));
    fake.push(Script::text("one").usage(1_000_000, 100_000, 0, 0));
    let first = run(gemini_mcp(&p.root, &store).args([
        "--tier",
        "flex",
        "chat",
        "First.",
        "--model",
        "gemini-3.8-flash",
        "--format",
        "json",
    ]));
    let first: Value = serde_json::from_str(&first.stdout).unwrap();
    let id = first["continuation_id"].as_str().unwrap().to_string();
    let one = first["usage"]["cost_usd"].as_f64().unwrap();
    fake.push(Script::text("two").usage(1_000_000, 100_000, 0, 0));
    let second = run(gemini_mcp(&p.root, &store).args([
        "chat",
        "Second.",
        "--model",
        "gemini-3.8-flash",
        "--format",
        "json",
        "--continuation-id",
        &id,
    ]));
    let second: Value = serde_json::from_str(&second.stdout).unwrap();
    let two = second["usage"]["cost_usd"].as_f64().unwrap();
    assert!(
        (one - 0.5625).abs() < 1e-9 && (two - 1.125).abs() < 1e-9,
        "{one}, {two}"
    );
    let total = second["usage"]["thread_cost_usd"].as_f64().unwrap();
    assert!((total - (one + two)).abs() < 1e-9, "{one} + {two}: {total}");
    assert!(
        second["text"].as_str().unwrap().contains("(this thread $"),
        "{second}"
    );

    let bad = run(gemini_mcp(&p.root, &with(&v)).args(["--tier", "cheap", "chat", "x"]));
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("--tier") && bad.stderr.contains("flex"),
        "{}",
        bad.stderr
    );
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

/// A review whose findings are given whole (evidence, edits), as Gemini would answer.
fn review_of(findings: Value, verdict: &str) -> Script {
    Script::json(json!({"summary": "Checked.", "findings": findings, "verdict": verdict}))
}

/// The project of the format tests: `src/lib.rs` changed (LF) and `src/win.rs` added (CRLF).
fn formats_project() -> Project {
    let p = changed_project();
    p.write("src/win.rs", "fn g() {\r\n    a();\r\n    b();\r\n}\r\n");
    p
}

/// Findings with a checked edit each (one in the CRLF file), and one whose location is not in
/// what was sent.
fn findings_with_edits() -> Value {
    json!([
        {"severity": "high", "file": "src/lib.rs", "line": 2, "title": "Subtracts",
         "detail": "add subtracts.", "fix": "Add instead.", "evidence": "pub fn add(a: u32, b: u32) -> u32 {\n    a - b",
         "edit": {"file": "src/lib.rs", "old": "    a - b\n", "new": "    a + b\n"}},
        {"severity": "medium", "file": "src/win.rs", "line": 2, "title": "Two calls",
         "detail": "a and b are one call.", "evidence": "a();\n    b();",
         "edit": {"file": "src/win.rs", "old": "    a();\n    b();\n", "new": "    ab();\n"}},
        {"severity": "critical", "file": "src/lib.rs", "line": 40, "title": "Ghost",
         "detail": "Not there.", "evidence": "fn does_not_exist() {}"}
    ])
}

/// `--fail-on` counts unverified findings only with `--fail-on-unverified`, and says so.
#[test]
fn unverified_findings_fail_only_when_asked() {
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    let ghost = json!([{"severity": "critical", "file": "src/lib.rs", "line": 40,
        "title": "Ghost", "detail": "Not there.", "evidence": "fn does_not_exist() {}"}]);
    fake.push(review_of(ghost.clone(), "needs_changes"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--fail-on", "high"]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("PASS: no finding at or above high (--fail-on high). 1 unverified finding(s) at or above high not counted (--fail-on-unverified counts them)."),
        "{}",
        r.stdout
    );
    fake.push(review_of(ghost.clone(), "needs_changes"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args([
        "precommit",
        "--fail-on",
        "high",
        "--fail-on-unverified",
    ]));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("FAIL: 1 finding(s) at or above high"),
        "{}",
        r.stdout
    );
    // JSON says what was not counted.
    fake.push(review_of(ghost, "needs_changes"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--format", "json"]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let out: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(out["unverified_not_counted"], 1);
    assert_eq!(out["fail_on_unverified"], false);
    assert_eq!(out["passed"], true);
}

/// `--format patch`: the checked edits as a diff `git apply --check` accepts at the project root
/// (a CRLF file too), and applying it makes the edits; no edit is an empty patch and a note.
#[test]
fn the_patch_format_applies_with_git() {
    if crate::support::git_missing() {
        return;
    }
    let p = formats_project();
    let fake = fake();
    let v = vars(&fake);
    fake.push(review_of(findings_with_edits(), "needs_changes"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--format", "patch"]));
    // Exit by --fail-on as usual (the high finding is verified).
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("--- a/src/lib.rs\n+++ b/src/lib.rs\n"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("-    a();\r\n-    b();\r\n+    ab();\r\n"),
        "{:?}",
        r.stdout
    );
    let patch = p.root.join(".home/the.patch");
    std::fs::create_dir_all(patch.parent().unwrap()).unwrap();
    std::fs::write(&patch, &r.stdout).unwrap();
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .arg(&patch)
            .current_dir(&p.root)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap()
    };
    let check = git(&["apply", "--check"]);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(git(&["apply"]).status.success());
    assert_eq!(
        std::fs::read_to_string(p.root.join("src/lib.rs")).unwrap(),
        "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.root.join("src/win.rs")).unwrap(),
        "fn g() {\r\n    ab();\r\n}\r\n"
    );

    // No applicable edit: an empty patch, a note on stderr, the exit code by --fail-on.
    fake.push(review(&[("high", "src/lib.rs", Some(2))], "needs_changes"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args([
        "precommit",
        "--format",
        "patch",
        "--fail-on",
        "critical",
    ]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.stdout, "");
    assert!(r.stderr.contains("the patch is empty"), "{}", r.stderr);

    // Two edits of one place: the first in the file is kept, the later left out and said.
    p.write(
        "src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 {\n    a - b\n}\n",
    );
    fake.push(review_of(
        json!([
            {"severity": "low", "file": "src/lib.rs", "title": "Later", "detail": "d",
             "edit": {"file": "src/lib.rs", "old": "- b\n}", "new": "+ b\n}"}},
            {"severity": "low", "file": "src/lib.rs", "title": "Earlier", "detail": "d",
             "edit": {"file": "src/lib.rs", "old": "    a - b", "new": "    b + a"}}
        ]),
        "needs_changes",
    ));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--format", "patch"]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("+    b + a\n"), "{}", r.stdout);
    assert!(!r.stdout.contains("+    a + b"), "{}", r.stdout);
    assert!(
        r.stderr.contains(
            "the edit of finding 1 (`src/lib.rs`) was left out: it overlaps the edit of finding 2"
        ),
        "{}",
        r.stderr
    );
}

/// SARIF with fixes validates against the 2.1.0 schema; GitLab's Code Quality report has its
/// shape, the unverified finding's reason in its description.
#[test]
fn sarif_fixes_and_codequality_reports() {
    let p = formats_project();
    let fake = fake();
    let v = vars(&fake);
    fake.push(review_of(findings_with_edits(), "needs_changes"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--format", "sarif"]));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let log: Value = serde_json::from_str(&r.stdout).unwrap();
    validate_sarif(&log).unwrap();
    let results = log["runs"][0]["results"].as_array().unwrap();
    let with_fixes: Vec<&Value> = results
        .iter()
        .filter(|r| r.get("fixes").is_some())
        .collect();
    assert_eq!(with_fixes.len(), 2, "{results:#?}");
    let win = with_fixes
        .iter()
        .find(|r| r["properties"]["title"] == "Two calls")
        .unwrap();
    let change = &win["fixes"][0]["artifactChanges"][0];
    assert_eq!(change["artifactLocation"]["uri"], "src/win.rs");
    assert_eq!(
        change["replacements"][0]["deletedRegion"],
        json!({"startLine": 2, "startColumn": 1, "endLine": 3, "endColumn": 11})
    );
    assert_eq!(
        change["replacements"][0]["insertedContent"]["text"],
        "    ab();\r\n"
    );
    let ghost = results
        .iter()
        .find(|r| r["properties"]["title"] == "Ghost")
        .unwrap();
    assert_eq!(ghost["properties"]["verified"], false);
    assert!(ghost["rank"].as_f64().unwrap() < win["rank"].as_f64().unwrap());

    fake.push(review_of(findings_with_edits(), "needs_changes"));
    let r = run(gemini_mcp(&p.root, &with(&v)).args(["precommit", "--format", "codequality"]));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let report: Value = serde_json::from_str(&r.stdout).unwrap();
    let issues = report.as_array().unwrap();
    assert_eq!(issues.len(), 3);
    for issue in issues {
        assert!(
            issue["fingerprint"].as_str().unwrap().len() == 64,
            "{issue}"
        );
        assert!(
            ["info", "minor", "major", "critical", "blocker"]
                .contains(&issue["severity"].as_str().unwrap())
        );
        assert!(issue["location"]["lines"]["begin"].as_u64().unwrap() >= 1);
    }
    let ghost = issues
        .iter()
        .find(|i| i["description"].as_str().unwrap().starts_with("Ghost"))
        .unwrap();
    assert!(
        ghost["description"]
            .as_str()
            .unwrap()
            .contains("(unverified: "),
        "{ghost}"
    );
    assert_eq!(ghost["location"]["path"], "src/lib.rs");
}

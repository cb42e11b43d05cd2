//! The Gemini CLI backend: answers a [`GenerateRequest`] by running the `gemini` executable
//! headless, for people who use Gemini through the CLI's Google login and have no API key.
//!
//! Why it is built the way it is:
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
//!   leader of a new process group ([`ProcessGroup`]); a timeout or a cancellation sends SIGTERM
//!   to the whole group, waits a grace period, then SIGKILL. After a normal exit the group is swept
//!   with SIGKILL too, and a drop guard does the same if the future is dropped mid-call;
//!   [`CliBackend::abort_all`] serves a signal handler (a terminal's Ctrl-C does not reach the
//!   CLI's group, and an exit by signal runs no destructor). We also set
//!   `GEMINI_CLI_NO_RELAUNCH=true`: the relaunch only raises Node's heap limit and costs ~2 s.
//!   On Windows the group is a Job object, ended whole at once (there is no SIGTERM), and
//!   npm's `gemini.cmd` is found on `PATH` under `PATHEXT` ([`locate`]) and run by std through
//!   `cmd.exe`, which starts Node: the argv we pass (fixed flags, the model name, paths of our
//!   private directory) holds none of the characters std refuses to pass to a batch file
//!   (line breaks), and the prompt never goes through it.
//! - **Bounded retries.** The CLI retries 429 and 5xx up to 10 times (~3.5 min for a 429);
//!   `general.maxAttempts` exists only as a setting, and none of its settings files can be ours:
//!   system settings and defaults are ignored unless root owns the file and every ancestor, and
//!   workspace settings would mean writing into the user's project. So we read the CLI's stderr as
//!   it runs and stop it at its `GEMINI_MAX_ATTEMPTS`-th "Attempt N failed" line, reporting the
//!   failure as the API backend would (429/503 are capacity errors, so the fallback model answers).
//!   The call deadline (`GEMINI_TIMEOUT_SECS`) rules in any case.
//! - **No record left behind.** The CLI records every session under its home, the prompt (our
//!   request and the files sent) included, 0644 and for 30 days; no setting stops it. Each call
//!   names its session (`--session-id`) and the CLI's home (`GEMINI_CLI_HOME`, as the CLI would
//!   pick it), and removes that session's record when it ends, however it ends
//!   (`gemini_cli::records`).
//! - **MCP servers and extensions off** (`--allowed-mcp-server-names <none>`, `-e none`): starting
//!   the user's MCP servers on every call is slow, and this very server may be one of them.
//! - **Outside the project.** The CLI runs in its private directory, not in PROJECT_ROOT: it
//!   sends the workspace's file tree and the `GEMINI.md` files of its working directory and
//!   ancestors with the first request, unredacted, and no setting stops the context files (see
//!   [`confine`]). A plain model needs nothing of the project; the files it sees come through the
//!   collector, in the prompt. The private directory is trusted (`GEMINI_CLI_TRUST_WORKSPACE`):
//!   it is ours, its only settings ours; the project's `.gemini/settings.json`, which can start
//!   commands, is never loaded.
//! - **Every documented outcome is parsed** ([`interpret`]): the JSON answer on stdout, or the
//!   last JSON object on stderr, whatever noise surrounds it; an `error` key means failure even
//!   with exit 0; exit codes 41/42/44/52/53/54/55 and HTTP statuses mod 256 (144 = 400, 173 = 429)
//!   when no JSON was printed. stderr is kept with a cap and scrubbed before it reaches a message.
//!
//! Not passed to the CLI (it has no flags for them): `thinking_mode`, `temperature` and the JSON
//! response schema. The schema is stated in the system prompt instead; the review parser is
//! tolerant of fences and text around the object.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

mod call_files;
mod in_flight;
mod outcome;
mod pipes;

pub use super::conversation::render_prompt;
use super::conversation::system_prompt;
use in_flight::{Live, live};
use outcome::cli_error;
pub use outcome::{RawOutput, interpret};

use call_files::CallFiles;
use outcome::{RetryNotice, Stop, retries_error, signal_of, spawn_error};
use pipes::{GroupGuard, Tasks, read_capped, read_stderr, terminate};

use super::{
    Cleanup, NO_MCP_SERVER, ProcessGroup, confine, locate, policy, system_settings, workspace_or,
};
use crate::gemini::settings::Settings;
use crate::gemini::vocabulary::{
    CallContext, GeminiError, GenerateRequest, GenerateResponse, Part,
};

/// How long a terminated CLI gets between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// How often a progress line is reported while the CLI works.
const HEARTBEAT: Duration = Duration::from_secs(5);
/// The most of stdout kept (an answer is at most ~65k tokens; this is far above it).
const STDOUT_CAP: usize = 16 << 20;

/// Runs the Gemini CLI for each call. Cheap to share: it holds no process between calls.
#[derive(Debug, Clone)]
pub struct CliBackend {
    program: PathBuf,
    workdir: PathBuf,
    /// Where the CLI's working directory is kept ([`workspace`]); empty: each call's own.
    state_dir: PathBuf,
    /// The CLI's home, where it records each session (removed after the call, see
    /// [`Cleanup`]); `None`: unknown.
    cli_home: Option<PathBuf>,
    timeout: Duration,
    max_attempts: u32,
    kill_grace: Duration,
    heartbeat: Duration,
    live: Arc<Mutex<Live>>,
}

impl CliBackend {
    /// A backend running `program` (already located, see [`locate`]) with the configured deadline,
    /// attempts and working directory (the first project root).
    pub fn new(program: PathBuf, config: &Settings) -> CliBackend {
        CliBackend {
            program,
            workdir: config.workdir.clone(),
            state_dir: config.state_dir.clone(),
            cli_home: config.cli_home.clone(),
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
        for group in groups {
            group.kill();
        }
        for dir in dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// Locates `config.gemini_cli` (a bare name is looked up in `path_var`, the `PATH` value; on
    /// Windows under the extensions of `config.search_exts`) and builds the backend, or says how
    /// to install or name the CLI.
    pub fn from_config(config: &Settings, path_var: Option<&OsStr>) -> Result<CliBackend, String> {
        let exts = config.search_exts.as_deref().map(OsStr::new);
        match locate(&config.gemini_cli, path_var, exts) {
            Some(program) => Ok(CliBackend::new(program, config)),
            None => Err(format!(
                "the Gemini CLI `{}` was not found{}: install it (`npm install -g @google/gemini-cli`), run `gemini` \
                 once in a terminal to sign in ({}), or set GEMINI_CLI_PATH to the executable",
                config.gemini_cli.display(),
                if config.gemini_cli.components().count() > 1 {
                    ""
                } else {
                    " on PATH"
                },
                super::LOGIN,
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
                "images and documents (PDF) cannot be sent through the Gemini CLI backend: leave out `images` \
                 and the PDFs in `files`, or use the API backend (set GEMINI_API_KEY and GEMINI_BACKEND=api)",
            ));
        }
        if req.functions.is_some() {
            return Err(cli_error(
                None,
                "an investigation (`investigate`, or `explore: true`) needs the REST API backend: the Gemini \
                 CLI backend cannot hand Gemini our read-only tools. Set GEMINI_API_KEY (and \
                 GEMINI_BACKEND=api), or call the tool without `explore`",
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
        let cwd = workspace_or(
            self.state_dir.clone(),
            "plain",
            system_settings(None),
            files.dir().to_path_buf(),
        )
        .await;
        let run = match cwd {
            Ok(cwd) => {
                // The session is named by us, so that the CLI's record of it can be removed
                // however the call ends.
                let session = uuid::Uuid::new_v4().to_string();
                let record = Cleanup::new(self.cli_home.as_deref(), &cwd, &session);
                let run = self
                    .run(&req.model.id, &session, prompt, &files, &cwd, ctx)
                    .await;
                record.run().await;
                run
            }
            Err(e) => Err(e),
        };
        files.remove().await;
        let raw = run?;
        interpret(&raw, &self.workdir)
    }

    /// The command line of one call: JSON output, the model, the session's id, our policy, no
    /// extensions and no MCP servers, the system prompt file, no relaunch, the call's private
    /// TMPDIR, the CLI's home named, and a process group of its own.
    fn command(&self, model: &str, session: &str, files: &CallFiles, cwd: &Path) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.arg("-o")
            .arg("json")
            .arg("-m")
            .arg(model)
            .arg("--session-id")
            .arg(session)
            .arg("--policy")
            .arg(files.policy_path())
            .arg("-e")
            .arg("none")
            .arg("--allowed-mcp-server-names")
            .arg(NO_MCP_SERVER)
            .env("GEMINI_SYSTEM_MD", files.system_path())
            .env("GEMINI_CLI_NO_RELAUNCH", "true")
            .env("TMPDIR", files.dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        confine(&mut cmd, cwd, self.cli_home.as_deref());
        cmd
    }

    /// Waits for the CLI to exit, reporting progress (its retries, and a heartbeat); stops at
    /// the deadline, on cancellation, or at its `max_attempts`-th failed attempt.
    async fn wait(
        &self,
        child: &mut Child,
        mut retry_rx: mpsc::UnboundedReceiver<RetryNotice>,
        started: Instant,
        ctx: &CallContext,
    ) -> Result<std::io::Result<ExitStatus>, Stop> {
        let deadline = tokio::time::sleep(self.timeout);
        tokio::pin!(deadline);
        let mut heartbeat =
            tokio::time::interval_at(tokio::time::Instant::now() + self.heartbeat, self.heartbeat);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

        loop {
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
        }
    }

    async fn run(
        &self,
        model: &str,
        session: &str,
        prompt: String,
        files: &CallFiles,
        cwd: &Path,
        ctx: &CallContext,
    ) -> Result<RawOutput, GeminiError> {
        let started = Instant::now();
        let mut cmd = self.command(model, session, files, cwd);
        let (mut child, group) =
            ProcessGroup::spawn(&mut cmd).map_err(|e| spawn_error(&self.program, &e))?;
        let group = GroupGuard::new(group, &self.live);
        tracing::debug!(
            program = %self.program.display(),
            model,
            cwd = %files.dir().display(),
            prompt_bytes = prompt.len(),
            "started the Gemini CLI"
        );

        let (retry_tx, retry_rx) = mpsc::unbounded_channel();
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

        let outcome = self.wait(&mut child, retry_rx, started, ctx).await;

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

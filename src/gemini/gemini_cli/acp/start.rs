//! How the pool starts a process: its private directory and working directory, its command line
//! (`gemini --acp`, confined, only our MCP server), and the handshake.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::process::Command;

use super::policy::Judge;
use super::pool::Pool;
use super::process::{Process, private_dir};
use super::rpc::{Routes, connect};
use super::{Key, Kind, project_tools};
use crate::gemini::agent_mode::AgentMode;
use crate::gemini::gemini_cli::{
    LOGIN, NO_MCP_SERVER, ProcessGroup, SETTINGS, confine, login_refused, login_refused_error,
    policy, system_settings, workspace_or,
};
use crate::gemini::vocabulary::{GeminiError, cli_error};

impl Pool {
    /// Starts `gemini --acp` for `key` and completes the handshake.
    pub(super) async fn start(&self, key: &Key) -> Result<Process, GeminiError> {
        let (files, kind, settings) = match key.kind {
            Kind::Plain { web_search } => (
                plain_files(web_search).await?,
                "plain",
                system_settings(None),
            ),
            Kind::Agent(mode) => {
                self.project_tools().await?;
                (
                    project_tools::agent_files(mode).await?,
                    // The modes' settings differ, and a session reads its workspace's settings
                    // when it starts: one working directory per set of tools.
                    match mode {
                        AgentMode::AutoEdit => "agent-autoedit",
                        AgentMode::Yolo => "agent-yolo",
                        AgentMode::Plan | AgentMode::Default => "agent",
                    },
                    project_tools::settings(mode),
                )
            }
        };
        let cwd = workspace_or(
            self.settings.state_dir.clone(),
            kind,
            settings,
            files.path().to_path_buf(),
        )
        .await?;
        let (mut child, group) = ProcessGroup::spawn(&mut self.command(key, &files, &cwd)).map_err(|e| {
            cli_error(format!(
                "could not start the Gemini CLI ({}): {e}; set GEMINI_CLI_PATH to its executable",
                self.settings.program.display()
            ))
        })?;
        if let Some(stderr) = child.stderr.take() {
            tokio::spawn(log_stderr(stderr));
        }
        let routes: Routes = Arc::default();
        let (closed_tx, closed_rx) = tokio::sync::watch::channel(false);
        let policy = match (key.kind, &self.collector) {
            (Kind::Agent(mode), Some(c)) => Some(Arc::new(Judge::new(
                mode,
                c.clone(),
                &[&cwd, files.path(), &self.settings.state_dir],
            ))),
            _ => None,
        };
        let ready = connect(child, group, routes.clone(), policy, closed_tx);
        let program = self.settings.program.display();
        let (cx, load_session) = match ready.await {
            Ok(Ok(ready)) => ready,
            Ok(Err(message)) if login_refused(&message) => return Err(login_refused_error(None)),
            Ok(Err(message)) => {
                return Err(cli_error(format!(
                    "the Gemini CLI refused the ACP handshake ({}); check that `{program} --acp` runs and that it is signed in ({LOGIN})",
                    crate::redact::scrub(&message),
                )));
            }
            Err(_) => {
                return Err(cli_error(format!(
                    "the Gemini CLI exited before the ACP handshake; check that `{program} --acp` runs (Gemini CLI 0.61 or later)"
                )));
            }
        };
        tracing::info!(root = %key.root.display(), kind = key.kind.name(), model = %key.model, "the Gemini CLI (ACP) started");
        Ok(Process {
            cx,
            routes,
            group,
            sessions: Mutex::default(),
            last_used: Mutex::new(Instant::now()),
            in_flight: Default::default(),
            closed: closed_rx,
            load_session,
            started: Default::default(),
            _files: Some(files),
            cwd,
        })
    }

    /// `gemini --acp` with the model, no extensions and no MCP servers but ours, in its private
    /// directory (`confine`), no relaunch (started as the leader of its own process group); its policy, settings and TMPDIR in its
    /// private directory (the CLI's error reports kept private).
    pub(super) fn command(
        &self,
        key: &Key,
        dir: &tempfile::TempDir,
        cwd: &std::path::Path,
    ) -> Command {
        let mut cmd = Command::new(&self.settings.program);
        cmd.arg("--policy")
            .arg(dir.path().join("policy.toml"))
            .env("TMPDIR", dir.path());
        let allowed = match key.kind {
            // A plain model: every CLI tool denied, a neutral system prompt (each call's own
            // instructions lead its prompt).
            Kind::Plain { .. } => {
                cmd.env("GEMINI_SYSTEM_MD", dir.path().join("system.md"));
                NO_MCP_SERVER
            }
            // The agent: only our tools (it reads the project through them); in the modes that
            // write, the root is a workspace directory of the CLI's, so that its edit tools reach
            // the project (no context file is read from it: `loadMemoryFromIncludeDirectories`
            // is off by default).
            Kind::Agent(mode) => {
                if mode.writes() {
                    cmd.arg("--include-directories").arg(&key.root);
                }
                project_tools::SERVER_NAME
            }
        };
        // Both in the private directory, under our settings: no workspace tree, no context file.
        confine(&mut cmd, cwd, self.settings.cli_home.as_deref());
        cmd.arg("--acp")
            .arg("-m")
            .arg(&key.model)
            .arg("-e")
            .arg("none")
            .arg("--allowed-mcp-server-names")
            .arg(allowed)
            .env("GEMINI_CLI_NO_RELAUNCH", "true")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }
}

/// What a plain process is told once: each prompt leads with its own instructions.
const PLAIN_SYSTEM: &str = "You answer requests that gemini-mcp-server sends on behalf of a coding agent. Each request \
begins with its instructions under `# Instructions`: follow them exactly, as your system instructions for that request. \
The conversation to answer follows under `# Conversation`. You have no tools.";

/// The private directory of a plain process (its working directory): its system prompt, its
/// policy and its system settings.
pub(super) async fn plain_files(web_search: bool) -> Result<tempfile::TempDir, GeminiError> {
    private_dir(vec![
        ("system.md", PLAIN_SYSTEM.to_string()),
        ("policy.toml", policy(web_search)),
        (SETTINGS, system_settings(None)),
    ])
    .await
}

/// Logs the CLI's stderr at debug, scrubbed, a line at a time.
pub(super) async fn log_stderr(stderr: tokio::process::ChildStderr) {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(target: "gemini_cli", "{}", crate::redact::scrub(&line));
    }
}

//! The Gemini CLI as a warm agent over the Agent Client Protocol (`gemini --acp`).
//!
//! One long-lived process per (project root, mode, model), a few at most, each serving many
//! sessions; the JSON-RPC is the `agent-client-protocol` crate's. What is ours:
//!
//! - **The policy.** Every `session/request_permission` is answered by [`policy::answer`] from
//!   the mode the server allowed, never by the caller alone.
//! - **Reads through the collector only.** The agent's own file, search, shell and fetch tools
//!   are denied; it reads through our explore functions, served to its sessions as an MCP server
//!   ([`project_tools`]).
//! - **Modes that change files or run commands only where the operator allows them**
//!   (`GEMINI_MCP_ACP_ALLOW_MODES`; refused by default, naming the setting). There the agent
//!   also gets the CLI's edit tools (`autoEdit`) and its shell (`yolo`), with the project root as
//!   a workspace directory of the CLI's; its session runs in the CLI's `default` mode and our
//!   policy file makes it ask before each edit and command, so that every one is a permission
//!   request our policy judges by the server's mode (the CLI's own `autoEdit` and `yolo` would
//!   run them unasked). What no longer holds there: those tools open files themselves, beside
//!   the sandbox and the redaction ([`AgentMode::describe`] says so in every reply).
//! - **Process hygiene, as for the headless CLI.** The process is the leader of its own group,
//!   killed whole when it idles past its time, when the pool shuts down, or when a cancelled
//!   prompt does not stop after `session/cancel`; a crash fails the prompts in flight with an
//!   error saying so and the next call starts a new process (logged); a process found dead
//!   before a call reached it is replaced for that call (`restart.rs`).
//! - **Sessions are a cache.** A session maps to one of our threads; continuing reuses the live
//!   session, or loads it (`session/load`) in a new process.
//!
//! - **No record left behind.** The CLI's own record of each session (the prompt, the files
//!   sent, every answer and tool result, under its home) is removed when the prompt is over
//!   (`gemini_cli::records`).
//!
//! The parts: the [`Pool`] of processes (`pool.rs`), one process (`process.rs`) and how the pool
//! starts it (`start.rs`), the ACP connection over its pipes (`connection.rs`), the folding of a
//! prompt's session updates into an [`AgentRun`] (`run.rs`), and how a tool call's target is
//! shown (`target.rs`).

pub mod policy;
mod pool;
mod process;
pub mod project_tools;
mod restart;
mod rpc;
mod run;
mod start;
mod target;
mod workspaces;

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use crate::gemini::agent_mode::AgentMode;
use crate::gemini::vocabulary::{GeminiError, cli_error};
pub use policy::Decision;
pub use pool::Pool;
pub use run::{AgentRun, AgentToolCall, PlanItem};
pub use target::Location;
pub use workspaces::Workspaces;

/// How the pool runs the CLI.
#[derive(Debug, Clone)]
pub struct AcpSettings {
    /// The `gemini` executable, already located.
    pub program: PathBuf,
    /// A process with no prompt for this long exits.
    pub idle: Duration,
    /// Most processes alive at once (the least recently used one is stopped past it).
    pub max_processes: usize,
    /// Modes that change files or run commands the configuration allows (`plan` and `default`
    /// always are).
    pub allowed_modes: Vec<AgentMode>,
    /// Deadline of one prompt.
    pub timeout: Duration,
    /// Longest result of one of the agent's project tools, in characters
    /// (`GEMINI_MCP_EXPLORE_RESULT_CHARS`).
    pub result_chars: usize,
    /// Where the CLI's working directories are kept (see `gemini_cli::workspace`); empty: the
    /// process's private directory.
    pub state_dir: PathBuf,
    /// The CLI's home, where it records each session (removed after each prompt); `None`:
    /// unknown.
    pub cli_home: Option<PathBuf>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Which process serves a call.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    root: PathBuf,
    model: String,
    kind: Kind,
}

/// What a process is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    /// The CLI's own agent and tools, under this approval mode.
    Agent(AgentMode),
    /// The CLI backend: Gemini answers as a plain model, every CLI tool denied (Google Search
    /// allowed when asked for).
    Plain { web_search: bool },
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Agent(m) => m.id(),
            Kind::Plain { .. } => "plain",
        }
    }
}

/// Sessions a plain process serves before it is replaced (the CLI keeps every session's
/// history in memory).
const PLAIN_SESSIONS: usize = 64;

/// Why a plain call failed.
#[derive(Debug)]
pub enum Failure {
    /// No process could be started or greeted (the CLI lacks ACP, or exits at once): the
    /// caller may answer another way.
    Unavailable(GeminiError),
    /// The call failed in a working process.
    Failed(GeminiError),
}

/// What to ask the agent.
pub struct Prompt {
    /// The new request, for a session that already holds the conversation.
    pub text: String,
    /// The whole conversation, for a new session of a thread with earlier turns.
    pub rebuilt: Option<String>,
    pub mode: AgentMode,
    pub model: String,
    /// Our thread: continuing reuses its session.
    pub thread: Option<String>,
}

/// Whether the agent may run in `mode`: a mode that writes only when the operator listed it in
/// `allowed` (`GEMINI_MCP_ACP_ALLOW_MODES`).
fn check_mode(mode: AgentMode, allowed: &[AgentMode]) -> Result<(), GeminiError> {
    if mode.writes() && !allowed.contains(&mode) {
        return Err(cli_error(format!(
            "approval mode `{}` changes files or runs commands, and this server does not allow it: use `plan` \
             (read-only, the default) or `default`, or have the operator add `{}` to GEMINI_MCP_ACP_ALLOW_MODES \
             (the Gemini CLI's own edit and shell tools then open files beside this server's sandbox and \
             redaction)",
            mode.id(),
            mode.id()
        )));
    }
    Ok(())
}

/// The approval modes a caller can use where the operator allowed `allowed`: those
/// [`Pool::check_mode`] accepts.
pub fn usable_modes(allowed: &[AgentMode]) -> Vec<AgentMode> {
    AgentMode::ALL
        .iter()
        .copied()
        .filter(|m| check_mode(*m, allowed).is_ok())
        .collect()
}

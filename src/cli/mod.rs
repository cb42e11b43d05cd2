//! The command line: `gemini-mcp` with no arguments serves MCP over stdio; subcommands serve
//! HTTP, run the tools from a terminal, a git hook or CI, manage the pre-commit hook, and check
//! the setup.
//!
//! The subcommand is matched in one place ([`run`]); the tool subcommands once more among
//! themselves (`commands`). A tool subcommand builds the tool's own params struct, plans it with
//! the tool's `plan()` and runs it ([`tool`], written once for every tool) through the same
//! [`App`] as the MCP server (on a signal, the app's `abort` ends what still runs); only printing
//! and exit codes are the CLI's own ([`output`]). Configuration and the working directory are
//! read here, once, at the top, and the settings that name tools are checked against the tools'
//! table. stdout carries only the command's output; errors, progress and logs go to stderr.

mod agent_hook;
mod audit;
mod codequality;
mod commands;
mod doctor;
mod edit_hook;
mod flags;
mod github_review;
pub mod hook;
mod locations;
mod output;
mod patch;
mod placed_edits;
mod progress;
mod sarif;
mod threads;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{CommandFactory, Parser, Subcommand};
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::config::{Config, ConfigError};
use crate::gemini::CallContext;
use crate::git::GitError;
use crate::shutdown::Shutdown;
use crate::term::say;
use crate::tools::params::Params;
use crate::tools::{Plan, ToolError};
pub use commands::{Run, ToolCommand};
use output::Printed;

#[derive(Debug, Parser)]
#[command(
    name = "gemini-mcp",
    version,
    about = "A second opinion from Google's Gemini for coding agents: an MCP server and CLI.",
    after_help = "With no command, serves MCP over stdio. Exit codes of the review commands: 0 pass, 1 findings at or above --fail-on, 2 could not run."
)]
pub struct Args {
    /// The Gemini API service tier for this run: standard, flex or priority (overrides
    /// GEMINI_SERVICE_TIER; flex suits hooks and CI). Also taken after serve and the tool
    /// commands, the ones that call Gemini.
    #[arg(long, value_name = "TIER")]
    pub tier: Option<String>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

// Parsed once per process: the size of the tool variant costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP over stdio (the default), or over Streamable HTTP with --http.
    Serve {
        /// Serve Streamable HTTP on this address (e.g. 127.0.0.1:8765) instead of stdio.
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
        /// The Gemini API service tier for the calls served: standard, flex or priority
        /// (overrides GEMINI_SERVICE_TIER).
        #[arg(long, value_name = "TIER")]
        tier: Option<String>,
    },
    #[command(flatten)]
    Tool(ToolCommand),
    /// List, show, export or delete this project's conversation threads.
    Threads {
        #[command(subcommand)]
        action: threads::ThreadsCommand,
    },
    /// Read the audit log (GEMINI_MCP_AUDIT_LOG): calls, tokens and cost per client, tool, model
    /// or day.
    Audit {
        #[command(subcommand)]
        action: audit::AuditCommand,
    },
    /// Install or remove the git pre-commit hook.
    Hook {
        #[command(subcommand)]
        action: hook::HookCommand,
    },
    /// Check the setup: key or CLI backend, model, thread store, PROJECT_ROOT.
    Doctor(doctor::DoctorArgs),
}

/// Runs the command and returns the process exit code.
impl Command {
    /// `--tier` given after the command; `None` for the commands that do not call Gemini.
    fn tier(&self) -> Option<&String> {
        match self {
            Command::Serve { tier, .. } => tier.as_ref(),
            Command::Tool(t) => t.tier(),
            Command::Threads { .. }
            | Command::Audit { .. }
            | Command::Hook { .. }
            | Command::Doctor(_) => None,
        }
    }
}

pub async fn run(args: Args) -> ExitCode {
    let command = args.command.unwrap_or(Command::Serve {
        http: None,
        tier: None,
    });
    let Some(args_tier) = tier(args.tier, &command) else {
        return ExitCode::from(output::COULD_NOT_RUN);
    };
    // These two need no working configuration: they are how a broken one gets fixed.
    let command = match command {
        Command::Hook { action } => return ExitCode::from(hook::run(action)),
        Command::Doctor(a) => return ExitCode::from(doctor::run(read_config(), a).await),
        other => other,
    };
    let config = match read_config().and_then(|mut c| {
        if let Some(tier) = &args_tier {
            let tier = crate::config::service_tier(tier).map_err(|message| {
                crate::config::ConfigError::Invalid {
                    name: "--tier",
                    message,
                }
            })?;
            c.gemini.service_tier = Some(tier);
        }
        Ok(c)
    }) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            say!("gemini-mcp: configuration error: {e}");
            return ExitCode::from(output::COULD_NOT_RUN);
        }
    };
    let cwd = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => {
            say!("gemini-mcp: cannot read the working directory: {e}");
            return ExitCode::from(output::COULD_NOT_RUN);
        }
    };
    let code = match command {
        Command::Serve { http: None, .. } => {
            return crate::stdio::serve(config, Shutdown::on_signals()).await;
        }
        Command::Serve {
            http: Some(addr), ..
        } => {
            return crate::http::serve(config, &addr, Shutdown::on_signals()).await;
        }
        Command::Tool(command) => commands::with_args!(command, a => tool(&config, &cwd, a).await),
        Command::Threads { action } => threads::run(&config, action).await,
        Command::Audit { action } => audit::run(&config, action),
        // Handled above, before the configuration is read.
        Command::Hook { .. } | Command::Doctor(_) => output::COULD_NOT_RUN,
    };
    ExitCode::from(code)
}

/// The configuration from the environment, its tool names checked against the tools' table.
fn read_config() -> Result<Config, ConfigError> {
    Config::from_env().and_then(|c| crate::tools::spec::check_settings(&c).map(|()| c))
}

/// The `--tier` of this run: given after the command, else before it. `None` (said on stderr)
/// when given before a command that does not call Gemini, where it would do nothing.
fn tier(before: Option<String>, command: &Command) -> Option<Option<String>> {
    if before.is_some()
        && matches!(
            command,
            Command::Threads { .. }
                | Command::Audit { .. }
                | Command::Hook { .. }
                | Command::Doctor(_)
        )
    {
        let err = Args::command().error(
            clap::error::ErrorKind::ArgumentConflict,
            "--tier applies to serve and the tool commands (the ones that call Gemini), not to threads, hook or doctor",
        );
        say!("{}", err.render().to_string().trim_end());
        return None;
    }
    Some(command.tier().cloned().or(before))
}

/// A positional text of `-` is read from stdin.
async fn dash_stdin(value: &str) -> Result<Option<String>, u8> {
    if value != "-" {
        return Ok(None);
    }
    let mut text = String::new();
    let mut stdin = tokio::io::stdin();
    let read = tokio::select! {
        r = stdin.read_to_string(&mut text) => r,
        _ = crate::shutdown::signal() => {
            say!("gemini-mcp: interrupted while reading stdin");
            return Err(output::COULD_NOT_RUN);
        }
    };
    match read {
        Ok(_) => Ok(Some(text)),
        Err(e) => {
            say!("gemini-mcp: cannot read stdin: {e}");
            Err(output::COULD_NOT_RUN)
        }
    }
}

/// Runs the call to its end, or until Ctrl-C: the call is then dropped (abandoned), and what it
/// left running at Google (a research run) is cancelled there before the process exits, within
/// a few seconds; `None` when interrupted.
async fn run_or_stop(
    app: &App,
    client: &crate::admission::ClientId,
    plan: Plan,
    ctx: &CallContext,
) -> Option<Result<crate::tools::Reply, ToolError>> {
    let outcome = tokio::select! {
        r = app.run(client, plan, ctx) => Some(r),
        _ = crate::shutdown::signal() => None,
    };
    if outcome.is_none() {
        crate::gemini::api::settled(std::time::Duration::from_secs(10)).await;
    }
    outcome
}

/// Runs one tool subcommand: its text from stdin when it is `-`, its plan, the call through the
/// shared pipeline, and the printed reply.
async fn tool<P: Params>(config: &Arc<Config>, cwd: &Path, mut args: Run<P>) -> u8 {
    let name = P::TOOL.name();
    let printed = args.printed;
    let (dry_run, show_request) = (args.flags.dry_run, args.flags.show_request);
    let github_review = args.github_review;
    let stdin = match args.text() {
        Some(text) => match dash_stdin(text).await {
            Ok(s) => s,
            Err(code) => return code,
        },
        None => None,
    };
    let plan = match args.plan(cwd, stdin) {
        Ok(p) => p,
        Err(e) => return fail(name, e),
    };
    let base = sarif_base(config, &plan);
    // Where the review is posted, checked before anything is sent: a run that cannot post says
    // so at once.
    let github = match github_review.then(|| {
        github_review::Target::from_env(&|name| std::env::var(name).ok())
    }) {
        None => None,
        Some(Ok(t)) => Some(t),
        Some(Err(e)) => {
            say!("gemini-mcp {name}: {e}");
            return output::COULD_NOT_RUN;
        }
    };
    let app = match App::start(config.clone()).await {
        Ok(app) => app,
        Err(e) => {
            say!("gemini-mcp {name}: {e}");
            return output::COULD_NOT_RUN;
        }
    };
    // A command collects at once: load the tokenizer beside the walk.
    app.collector().warm_up();
    let (progress, spinner) = progress::start();
    let cancel = CancellationToken::new();
    let ctx = CallContext {
        cancel: cancel.clone(),
        progress,
        ..CallContext::default()
    };
    if dry_run {
        let outcome = tokio::select! {
            r = app.preview(plan, show_request, &ctx) => Some(r),
            _ = crate::shutdown::signal() => None,
        };
        spinner.stop().await;
        return match outcome {
            Some(Ok(preview)) => print_preview(&preview, printed, name),
            Some(Err(e)) => fail(name, e),
            None => {
                say!("gemini-mcp {name}: interrupted");
                output::COULD_NOT_RUN
            }
        };
    }
    let client = crate::admission::ClientId("cli".into());
    // Kept to run again when the per-call ceiling refuses and the user, asked, goes on.
    let again = config.caps.call_usd.is_some().then(|| plan.clone());
    let outcome = run_or_stop(&app, &client, plan, &ctx).await;
    spinner.stop().await;
    let outcome = match (outcome, again) {
        (Some(Err(ToolError::OverCallCeiling { message, .. })), Some(mut plan))
            if terminal_to_ask() =>
        {
            if !ask_to_go_on(&message).await {
                say!("gemini-mcp {name}: not sent");
                return output::COULD_NOT_RUN;
            }
            plan.over_ceiling_ok = true;
            let (progress, spinner) = progress::start();
            let ctx = CallContext {
                cancel: cancel.clone(),
                progress,
                ..CallContext::default()
            };
            let outcome = run_or_stop(&app, &client, plan, &ctx).await;
            spinner.stop().await;
            outcome
        }
        (outcome, _) => outcome,
    };
    let Some(outcome) = outcome else {
        // The call was dropped with the select; a Gemini CLI subprocess runs in its own process
        // group, out of reach of the terminal's signal: end it too.
        cancel.cancel();
        app.abort();
        say!("gemini-mcp {name}: interrupted");
        return output::COULD_NOT_RUN;
    };
    match outcome {
        Ok(reply) => {
            // Whole: the command line prints it all.
            let mut reply = reply.finish(None);
            locations::check(&mut reply, &base, app.collector().sandbox());
            let edits = if printed.wants_edits() || github.is_some() {
                placed_edits::gather(reply.findings(), app.collector())
            } else {
                placed_edits::Edits::default()
            };
            let code = print(&reply, printed, name, &base, &edits);
            // The run's exit code stays the review's: a review that could not be posted is
            // said in the log.
            if let Some(target) = &github {
                github_review::report(&github_review::post(target, &reply, &edits).await);
            }
            code
        }
        Err(e) => fail(name, e),
    }
}

/// Whether a question can be asked: stdin and stderr are a terminal.
fn terminal_to_ask() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && crate::term::stderr_is_terminal()
}

/// Shows the ceiling's refusal and asks whether to send anyway; only `y` or `yes` goes on.
async fn ask_to_go_on(refusal: &str) -> bool {
    say!("gemini-mcp: {refusal}");
    let mut err = crate::term::stderr();
    let _ = err.text("Send it anyway? [y/N] ");
    drop(err);
    let answer = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await;
    matches!(answer, Ok(Ok(l)) if matches!(l.trim().to_ascii_lowercase().as_str(), "y" | "yes"))
}

/// Prints a dry run's report: JSON where the command was asked for JSON (or SARIF), else text.
/// Exit 0: nothing was reviewed, so nothing fails.
fn print_preview(preview: &crate::pipeline::preview::Preview, printed: Printed, name: &str) -> u8 {
    let json = matches!(
        printed,
        Printed::Answer {
            format: flags::Format::Json
        } | Printed::Review {
            format: flags::ReviewFormat::Json | flags::ReviewFormat::Sarif,
            ..
        }
    );
    let mut out = crate::term::stdout();
    let written = if json {
        out.json(preview)
    } else {
        out.text(preview.render())
    };
    match written {
        Ok(()) => output::PASS,
        Err(e) => {
            say!("gemini-mcp {name}: cannot write the output: {e}");
            output::COULD_NOT_RUN
        }
    }
}

/// Prints a reply; a failure to write is exit 2.
fn print(
    reply: &crate::reply::Finished,
    printed: Printed,
    name: &str,
    base: &std::path::Path,
    edits: &placed_edits::Edits,
) -> u8 {
    match output::print(reply, printed, name, base, edits) {
        Ok(code) => code,
        Err(e) => {
            say!("gemini-mcp {name}: cannot write the output: {e}");
            output::COULD_NOT_RUN
        }
    }
}

/// What the paths of findings are relative to (SARIF's `%SRCROOT%`): for precommit, the work
/// tree of the repository containing the path (Gemini cites repository-relative paths, and code
/// scanning expects them), else the project root.
fn sarif_base(config: &Config, plan: &Plan) -> PathBuf {
    let root = config
        .roots()
        .first()
        .map_or_else(|| PathBuf::from("."), PathBuf::clone);
    plan.git
        .as_ref()
        .and_then(|g| git2::Repository::discover(&g.path).ok())
        .and_then(|r| r.workdir().and_then(|w| std::fs::canonicalize(w).ok()))
        .filter(|w| root.starts_with(w))
        .unwrap_or(root)
}

/// Reports a failed call on stderr: argument errors as clap errors naming the flag, the rest
/// with what to do. Always exit 2.
fn fail(name: &str, e: ToolError) -> u8 {
    match &e {
        ToolError::InvalidArgument { field, message } => usage_error(name, field, message),
        ToolError::Git(g @ (GitError::NotARepository { .. } | GitError::BadRef { .. })) => {
            usage_error(name, e.field().unwrap_or_default(), &g.to_string())
        }
        ToolError::Collect(crate::collector::CollectError::Image { path, message }) => {
            usage_error(name, "images", &format!("{path}: {message}"))
        }
        ToolError::TooLarge {
            field,
            chars,
            limit,
        } => usage_error(
            name,
            field,
            &format!(
                "it is {chars} characters, over the {limit} a call carries; put it in a file and pass the file instead"
            ),
        ),
        other => {
            // Gemini's own error messages end up here: shown, not obeyed by the terminal.
            say!("gemini-mcp {name}: {other}");
            output::COULD_NOT_RUN
        }
    }
}

/// A clap-style usage error for subcommand `name`, naming the flag that sets params `field`.
fn usage_error(name: &str, field: &str, message: &str) -> u8 {
    let mut cmd = Args::command();
    cmd.build();
    let err = match cmd.find_subcommand_mut(name) {
        Some(sub) => {
            let text = format!(
                "invalid value for '{}': {message}",
                commands::flag(sub, field)
            );
            sub.error(clap::error::ErrorKind::ValueValidation, text)
        }
        None => {
            let text = format!(
                "invalid value for '{}': {message}",
                commands::flag(&cmd, field)
            );
            cmd.error(clap::error::ErrorKind::ValueValidation, text)
        }
    };
    // Through the sink like every line: the message may quote what came from outside.
    say!("{}", err.render().to_string().trim_end());
    output::COULD_NOT_RUN
}

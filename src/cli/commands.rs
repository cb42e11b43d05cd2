//! The tool subcommands: each one is its tool's params struct (whose `#[arg]` attributes are its
//! flags: one body for the MCP schema and the command line, `tools::params`), planned by the
//! tool's `plan()` exactly as the MCP server does; the pipeline does the rest. What only the
//! command line has is written once for every tool: how the reply is printed (by the tool's
//! reply kind) and the flags of [`CliFlags`]. Paths are taken from the working directory, as a
//! shell user expects.
//!
//! The subcommands are listed once ([`ToolCommand`], in the order `--help` shows them) and
//! matched once ([`with_args!`]); running one is written once (`cli::tool`). A subcommand's name
//! and one-line help are its tool's (`tools::spec`).

use std::path::Path;

use clap::{ArgMatches, Args, FromArgMatches, Subcommand};

use crate::tools::analyze::AnalyzeParams;
use crate::tools::chat::ChatParams;
use crate::tools::codereview::CodeReviewParams;
use crate::tools::debug::DebugParams;
use crate::tools::investigate::InvestigateParams;
use crate::tools::params::Params;
use crate::tools::precommit::PrecommitParams;
use crate::tools::research::ResearchParams;
use crate::reply::ReplyKind;
use crate::tools::thinkdeep::ThinkDeepParams;
use crate::tools::{Plan, ToolError};

use super::flags::{AnswerFlags, CliFlags, FailOn, ReviewFlags, absolute};
use super::output::{Gate, Printed};

/// The subcommands that run a tool, in the order `--help` lists them.
#[derive(Debug, Subcommand)]
pub enum ToolCommand {
    Precommit(Run<PrecommitParams>),
    Codereview(Run<CodeReviewParams>),
    Chat(Run<ChatParams>),
    Analyze(Run<AnalyzeParams>),
    Debug(Run<DebugParams>),
    Investigate(Run<InvestigateParams>),
    Thinkdeep(Run<ThinkDeepParams>),
    Research(Run<ResearchParams>),
}

/// `$body` for whichever tool subcommand `$command` is, with `$args` bound to its [`Run`] (of the
/// tool's own params): the one match over the tool subcommands.
macro_rules! with_args {
    ($command:expr, $args:ident => $body:expr) => {
        match $command {
            $crate::cli::commands::ToolCommand::Precommit($args) => $body,
            $crate::cli::commands::ToolCommand::Codereview($args) => $body,
            $crate::cli::commands::ToolCommand::Chat($args) => $body,
            $crate::cli::commands::ToolCommand::Analyze($args) => $body,
            $crate::cli::commands::ToolCommand::Debug($args) => $body,
            $crate::cli::commands::ToolCommand::Investigate($args) => $body,
            $crate::cli::commands::ToolCommand::Thinkdeep($args) => $body,
            $crate::cli::commands::ToolCommand::Research($args) => $body,
        }
    };
}
pub(crate) use with_args;

impl ToolCommand {
    /// `--tier` given after the subcommand.
    pub fn tier(&self) -> Option<&String> {
        with_args!(self, a => a.flags.tier.as_ref())
    }
}

/// A tool subcommand's arguments: the tool's params, how the reply is printed, and the flags of
/// the command line alone.
#[derive(Debug)]
pub struct Run<P> {
    pub params: P,
    pub printed: Printed,
    pub flags: CliFlags,
    /// `--github-review`: the review is posted on the run's pull request too.
    pub github_review: bool,
}

/// Whether the tool's reply is a review, printed with `--format`'s review formats and gated by
/// `--fail-on`; else it is an answer.
fn reviews(reply: ReplyKind) -> bool {
    matches!(reply, ReplyKind::Review | ReplyKind::ChangeReview)
}

impl<P: Params> Args for Run<P> {
    /// The params' flags, then the printing flags of the tool's reply kind, then the command
    /// line's own; the tool's one-line help.
    fn augment_args(cmd: clap::Command) -> clap::Command {
        let spec = P::TOOL.spec();
        let cmd = P::augment_args(cmd);
        let cmd = match spec.reply {
            // A review of pending changes is a gate (the pre-commit hook, CI): it fails on high
            // findings unless told otherwise; a review of files only reports.
            ReplyKind::ChangeReview => ReviewFlags::augment_args(cmd)
                .mut_arg("fail_on", |a| a.default_value(FailOn::High.as_str())),
            reply if reviews(reply) => ReviewFlags::augment_args(cmd),
            _ => AnswerFlags::augment_args(cmd),
        };
        CliFlags::augment_args(cmd).about(spec.about)
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl<P: Params> FromArgMatches for Run<P> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Self::from_arg_matches_mut(&mut matches.clone())
    }

    fn from_arg_matches_mut(matches: &mut ArgMatches) -> Result<Self, clap::Error> {
        let consensus = matches
            .try_get_many::<String>("models")
            .ok()
            .flatten()
            .is_some()
            || matches
                .try_get_one::<bool>("consensus")
                .ok()
                .flatten()
                .copied()
                .unwrap_or(false);
        let params = P::from_arg_matches_mut(matches)?;
        let mut github_review = false;
        let printed = if reviews(P::TOOL.spec().reply) {
            let r = ReviewFlags::from_arg_matches_mut(matches)?;
            github_review = r.github_review;
            if r.agree.is_some() && !consensus {
                return Err(clap::Error::raw(
                    clap::error::ErrorKind::MissingRequiredArgument,
                    "--agree counts the models that found a finding: use it with --models or --consensus\n",
                ));
            }
            Printed::Review {
                format: r.format,
                gate: Gate::new(r.fail_on, r.fail_on_unverified).with_agree(r.agree),
            }
        } else {
            Printed::Answer {
                format: AnswerFlags::from_arg_matches_mut(matches)?.format,
            }
        };
        let flags = CliFlags::from_arg_matches_mut(matches)?;
        Ok(Run {
            params,
            printed,
            flags,
            github_review,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl<P: Params> Run<P> {
    /// The positional text, which `-` reads from stdin; `None` when the subcommand has none.
    pub fn text(&mut self) -> Option<&str> {
        self.params.text().map(|t| t.as_str())
    }

    /// The tool's plan, with `stdin` (when read) as the text and the paths taken from `cwd`.
    pub fn plan(mut self, cwd: &Path, stdin: Option<String>) -> Result<Plan, ToolError> {
        if let (Some(stdin), Some(text)) = (stdin, self.params.text()) {
            *text = stdin;
        }
        let mut plan = self.params.plan()?;
        plan.files = absolute(cwd, std::mem::take(&mut plan.files));
        plan.images = absolute(cwd, std::mem::take(&mut plan.images));
        if let Some(git) = plan.git.as_mut() {
            git.path = absolute(cwd, vec![std::mem::take(&mut git.path)]).remove(0);
            if let Some(index) = git.index_file.take() {
                git.index_file = Some(if index.is_absolute() {
                    index
                } else {
                    cwd.join(index)
                });
            }
        }
        Ok(plan)
    }
}

/// The flag (or positional argument) of subcommand `sub` that sets params field `field` (or an
/// item of it: `files[2]`), as usage errors name it.
pub fn flag(sub: &clap::Command, field: &str) -> String {
    let id = field.split('[').next().unwrap_or(field);
    let arg = sub.get_arguments().find(|a| a.get_id() == id);
    match arg {
        Some(a) if a.is_positional() => a
            .get_value_names()
            .and_then(|names| names.first())
            .map_or_else(|| id.to_uppercase(), ToString::to_string),
        Some(a) => match a.get_long() {
            Some(long) => format!("--{long}"),
            None => format!("--{}", id.replace('_', "-")),
        },
        None => format!("--{}", id.replace('_', "-")),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use clap::{CommandFactory, Parser};
    use serde_json::{Value, json};

    use super::super::{Args, Command};
    use super::*;
    use crate::cli::flags::{Format, ReviewFormat};
    use crate::tools::{Output, Tool};

    fn parse(args: &[&str]) -> Result<Command, clap::Error> {
        let mut full = vec!["gemini-mcp"];
        full.extend_from_slice(args);
        Args::try_parse_from(full).map(|a| a.command.expect("a subcommand"))
    }

    fn tool_command(args: &[&str]) -> ToolCommand {
        match parse(args) {
            Ok(Command::Tool(t)) => t,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    /// The cases' working directory, absolute on each platform.
    #[cfg(unix)]
    const PROJ: &str = "/work/proj";
    #[cfg(windows)]
    const PROJ: &str = r"C:\work\proj";

    fn cwd() -> PathBuf {
        PathBuf::from(PROJ)
    }

    /// `rel` below [`PROJ`], as a plan names it.
    fn at(rel: &str) -> String {
        let p = cwd().join(rel).display().to_string();
        #[cfg(windows)]
        let p = p.replace('/', "\\");
        p
    }

    fn tool_of<P: Params>(_: &Run<P>) -> Tool {
        P::TOOL
    }

    /// The subcommand `name`, built.
    fn subcommand(name: &str) -> clap::Command {
        let mut cmd = Args::command();
        cmd.build();
        cmd.find_subcommand(name)
            .unwrap_or_else(|| panic!("no subcommand {name}"))
            .clone()
    }

    /// A subcommand with its required arguments, and the same call over MCP; then the same call
    /// with every input set. The two edges must plan the same: one body, one set of defaults.
    fn calls() -> Vec<(Vec<&'static str>, Value)> {
        vec![
            (vec!["precommit"], json!({"path": PROJ})),
            (
                vec![
                    "precommit",
                    "-p",
                    "sub",
                    "--staged-only",
                    "--compare-to",
                    "main",
                    "--original-request",
                    "Add retries",
                    "--review-type",
                    "security",
                    "--max-depth",
                    "0",
                    "--file",
                    "notes.md",
                    "-m",
                    "flash",
                    "--thinking-mode",
                    "low",
                    "--temperature",
                    "0.5",
                    "--continuation-id",
                    "latest",
                    "--image",
                    "a.png",
                ],
                json!({"path": at("sub"), "include_unstaged": false, "include_untracked": false,
                    "compare_to": "main", "original_request": "Add retries",
                    "review_type": "security", "max_depth": 0, "files": [at("notes.md")],
                    "model": "flash", "thinking_mode": "low", "temperature": 0.5,
                    "continuation_id": "latest", "images": [at("a.png")]}),
            ),
            (
                vec!["codereview", "src/a.rs", "--context", "why"],
                json!({"files": [at("src/a.rs")], "context": "why"}),
            ),
            (
                vec![
                    "codereview",
                    "src/a.rs",
                    "src/b.rs",
                    "--context",
                    "why",
                    "--review-type",
                    "quick",
                    "--severity-filter",
                    "high",
                    "--standards",
                    "ours",
                    "--focus-on",
                    "locks",
                    "--explore",
                ],
                json!({"files": [at("src/a.rs"), at("src/b.rs")], "context": "why",
                    "review_type": "quick", "severity_filter": "high", "standards": "ours",
                    "focus_on": "locks", "explore": true}),
            ),
            (vec!["chat", "hi"], json!({"prompt": "hi"})),
            (
                vec![
                    "chat",
                    "hi",
                    "-f",
                    "src",
                    "--system-prompt",
                    "be brief",
                    "--web-search",
                ],
                json!({"prompt": "hi", "files": [at("src")], "system_prompt": "be brief",
                    "use_websearch": true}),
            ),
            (
                vec!["analyze", "src", "-q", "how?"],
                json!({"files": [at("src")], "question": "how?"}),
            ),
            (
                vec![
                    "analyze",
                    "src",
                    "-q",
                    "how?",
                    "--analysis-type",
                    "quality",
                    "--output-format",
                    "summary",
                    "--explore",
                ],
                json!({"files": [at("src")], "question": "how?", "analysis_type": "quality",
                    "output_format": "summary", "explore": true}),
            ),
            (
                vec!["debug", "it breaks"],
                json!({"error_description": "it breaks"}),
            ),
            (
                vec![
                    "debug",
                    "it breaks",
                    "--error-context",
                    "trace",
                    "-f",
                    "src/a.rs",
                    "--previous-attempts",
                    "restart",
                    "--runtime-info",
                    "linux",
                    "--web-search",
                ],
                json!({"error_description": "it breaks", "error_context": "trace",
                    "files": [at("src/a.rs")], "previous_attempts": "restart",
                    "runtime_info": "linux", "use_websearch": true}),
            ),
            (vec!["investigate", "where?"], json!({"task": "where?"})),
            (
                vec![
                    "investigate",
                    "where?",
                    "-f",
                    "src",
                    "--max-steps",
                    "3",
                    "--engine",
                    "gemini-cli",
                    "--approval-mode",
                    "default",
                ],
                json!({"task": "where?", "files": [at("src")], "max_steps": 3,
                    "engine": "gemini-cli", "approval_mode": "default"}),
            ),
            (
                vec!["thinkdeep", "I think"],
                json!({"current_analysis": "I think"}),
            ),
            (
                vec![
                    "research",
                    "which crate?",
                    "--context",
                    "a CLI",
                    "-f",
                    "src",
                    "--continuation-id",
                    "latest",
                ],
                json!({"question": "which crate?", "context": "a CLI", "files": [at("src")],
                    "continuation_id": "latest"}),
            ),
            (
                vec![
                    "thinkdeep",
                    "I think",
                    "--problem-context",
                    "slow",
                    "--focus-area",
                    "io",
                    "--focus-area",
                    "locks",
                    "-f",
                    "src",
                    "--web-search",
                ],
                json!({"current_analysis": "I think", "problem_context": "slow",
                    "focus_areas": ["io", "locks"], "files": [at("src")], "use_websearch": true}),
            ),
        ]
    }

    /// The plan of the call on the command line and over MCP.
    fn both_plans<P: Params>(run: Run<P>, json: Value) -> (String, String) {
        let cli = run.plan(&cwd(), None).expect("the command line's plan");
        let params: P = serde_json::from_value(json).expect("the MCP arguments");
        let mcp = params.plan().expect("the MCP plan");
        (format!("{cli:?}"), format!("{mcp:?}"))
    }

    #[test]
    fn every_tool_has_its_subcommand_running_it() {
        let cmd = Args::command();
        for spec in &crate::tools::spec::SPECS {
            let sub = cmd
                .find_subcommand(spec.name)
                .unwrap_or_else(|| panic!("no subcommand {}", spec.name));
            assert_eq!(
                sub.get_about().map(ToString::to_string).as_deref(),
                Some(spec.about)
            );
        }
        let mut ran = Vec::new();
        for (args, _) in calls() {
            let t = tool_command(&args);
            let tool = with_args!(&t, a => tool_of(a));
            assert_eq!(tool.name(), args[0], "{args:?}");
            ran.push(tool);
        }
        for spec in &crate::tools::spec::SPECS {
            assert!(
                ran.contains(&spec.tool),
                "no call of {} in calls()",
                spec.name
            );
        }
    }

    /// One body per tool input: the command line and MCP plan a call the same, with the same
    /// defaults, for every tool.
    #[test]
    fn the_command_line_and_mcp_plan_alike() {
        for (args, json) in calls() {
            let (cli, mcp) = with_args!(tool_command(&args), a => both_plans(a, json.clone()));
            assert_eq!(cli, mcp, "{args:?} vs {json}");
        }
    }

    /// The schema's properties of a tool's params.
    fn properties<P: Params>(_: &Run<P>) -> Vec<String> {
        let schema = crate::tools::schema::input_schema::<P>();
        let props = schema.get("properties").and_then(Value::as_object);
        props
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Every input of a tool's schema is a flag of its subcommand, under its own name, and every
    /// flag is an input, one of the command line's own flags, or a params field the command line
    /// alone has; the exceptions are listed here.
    #[test]
    fn every_input_is_a_flag_of_the_same_name() {
        // Inputs MCP has and the command line does not (`--staged-only` sets the first three).
        let mcp_only = [
            ("precommit", "include_staged"),
            ("precommit", "include_unstaged"),
            ("precommit", "include_untracked"),
            ("precommit", "severity_filter"),
        ];
        // Params fields the command line alone has (`#[serde(skip)]`); `--consensus` is MCP's
        // `models: ["default"]`.
        let cli_only = [
            ("precommit", "staged_only"),
            ("precommit", "index_file"),
            ("chat", "consensus"),
            ("thinkdeep", "consensus"),
            ("analyze", "consensus"),
            ("codereview", "consensus"),
            ("debug", "consensus"),
            ("precommit", "consensus"),
        ];
        let own: Vec<String> = [
            <ReviewFlags as clap::Args>::augment_args(clap::Command::new("r")),
            <AnswerFlags as clap::Args>::augment_args(clap::Command::new("a")),
            <CliFlags as clap::Args>::augment_args(clap::Command::new("c")),
        ]
        .iter()
        .flat_map(|c| {
            c.get_arguments()
                .map(|a| a.get_id().to_string())
                .collect::<Vec<_>>()
        })
        .chain(["help".to_string()])
        .collect();
        for (args, _) in calls() {
            let name = args[0];
            let props = with_args!(tool_command(&args), a => properties(&a));
            let flags: Vec<String> = subcommand(name)
                .get_arguments()
                .map(|a| a.get_id().to_string())
                .collect();
            for p in &props {
                assert!(
                    flags.contains(p) || mcp_only.contains(&(name, p.as_str())),
                    "{name}: input {p} has no flag"
                );
            }
            for f in &flags {
                assert!(
                    props.contains(f) || own.contains(f) || cli_only.contains(&(name, f.as_str())),
                    "{name}: flag {f} is not an input"
                );
            }
        }
    }

    #[test]
    fn precommit_defaults_review_everything_and_fail_on_high() {
        let ToolCommand::Precommit(a) = tool_command(&["precommit"]) else {
            panic!("not precommit")
        };
        assert!(matches!(
            a.printed,
            Printed::Review {
                format: ReviewFormat::Text,
                gate: Gate {
                    fail_on: FailOn::High,
                    unverified: false,
                    agree: None
                }
            }
        ));
        let plan = a.plan(&cwd(), None).unwrap();
        assert_eq!(plan.tool, Tool::Precommit);
        let git = plan.git.unwrap();
        assert_eq!(git.path, PROJ);
        assert!(git.include_staged && git.include_unstaged && git.include_untracked);
        assert_eq!(git.max_depth, 5);
        assert_eq!(git.index_file, None);
        assert!(matches!(plan.output, Output::Review { verdict: true, .. }));
    }

    #[test]
    fn a_review_of_files_does_not_fail_by_default_and_an_answer_prints_text() {
        let ToolCommand::Codereview(a) = tool_command(&["codereview", "a.rs", "--context", "x"])
        else {
            panic!("not codereview")
        };
        assert!(matches!(
            a.printed,
            Printed::Review {
                format: ReviewFormat::Text,
                gate: Gate {
                    fail_on: FailOn::None,
                    unverified: false,
                    agree: None
                }
            }
        ));
        let ToolCommand::Chat(a) = tool_command(&["chat", "hi"]) else {
            panic!("not chat")
        };
        assert!(matches!(
            a.printed,
            Printed::Answer {
                format: Format::Text
            }
        ));
    }

    #[test]
    fn precommit_flags() {
        let ToolCommand::Precommit(a) = tool_command(&[
            "precommit",
            "--path",
            "sub",
            "--staged-only",
            "--compare-to",
            "main",
            "--format",
            "sarif",
            "--fail-on",
            "medium",
            "--fail-on-unverified",
            "--max-depth",
            "0",
            "--index-file",
            ".git/index.lock",
            "--original-request",
            "Add retries",
            "--model",
            "flash",
            "--continuation-id",
            "latest",
        ]) else {
            panic!("not precommit")
        };
        assert!(matches!(
            a.printed,
            Printed::Review {
                format: ReviewFormat::Sarif,
                gate: Gate {
                    fail_on: FailOn::Medium,
                    unverified: true,
                    agree: None
                }
            }
        ));
        let plan = a.plan(&cwd(), None).unwrap();
        let git = plan.git.clone().unwrap();
        assert_eq!(git.path, at("sub"));
        assert!(git.include_staged && !git.include_unstaged && !git.include_untracked);
        assert_eq!(git.compare_to.as_deref(), Some("main"));
        assert_eq!(git.max_depth, 0);
        assert_eq!(git.index_file, Some(PathBuf::from(at(".git/index.lock"))));
        assert!(plan.request.contains("Add retries"));
        assert_eq!(plan.model.as_deref(), Some("flash"));
        assert_eq!(plan.continuation, Some(crate::tools::Continuation::Latest));
    }

    #[test]
    fn bad_values_are_clap_errors_naming_the_flag() {
        for (args, flag) in [
            (vec!["precommit", "--fail-on", "severe"], "--fail-on"),
            (vec!["precommit", "--format", "xml"], "--format"),
            (vec!["precommit", "--max-depth", "deep"], "--max-depth"),
            (
                vec!["precommit", "--thinking-mode", "huge"],
                "--thinking-mode",
            ),
            (vec!["precommit", "--temperature", "2"], "--temperature"),
            (vec!["codereview", "a.rs"], "--context"),
            (vec!["codereview", "--context", "x"], "FILES"),
            (
                vec![
                    "codereview",
                    "a.rs",
                    "--context",
                    "x",
                    "--severity-filter",
                    "low",
                ],
                "--severity-filter",
            ),
            (vec!["chat", "hi", "--format", "sarif"], "--format"),
            (
                vec![
                    "analyze",
                    "src",
                    "--question",
                    "q",
                    "--analysis-type",
                    "vibes",
                ],
                "--analysis-type",
            ),
        ] {
            let err = parse(&args).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{args:?}");
            let text = err.to_string();
            assert!(text.contains(flag), "{args:?}: {text}");
        }
    }

    #[test]
    fn tool_subcommands_build_their_tools_plans() {
        let ToolCommand::Codereview(a) = tool_command(&[
            "codereview",
            "src/db.rs",
            "src/pool.rs",
            "--context",
            "New pool",
            "--review-type",
            "security",
            "--severity-filter",
            "high",
            "--fail-on",
            "high",
        ]) else {
            panic!()
        };
        assert!(matches!(
            a.printed,
            Printed::Review {
                gate: Gate {
                    fail_on: FailOn::High,
                    ..
                },
                ..
            }
        ));
        let plan = a.plan(&cwd(), None).unwrap();
        assert_eq!(plan.tool, Tool::CodeReview);
        assert_eq!(plan.files, vec![at("src/db.rs"), at("src/pool.rs")]);
        assert!(matches!(
            plan.output,
            Output::Review {
                min_severity: Some(crate::reply::review::Severity::High),
                verdict: false
            }
        ));

        let ToolCommand::Chat(a) = tool_command(&[
            "chat",
            "Is a trie overkill?",
            "-f",
            "src/router.rs",
            "--web-search",
        ]) else {
            panic!()
        };
        let plan = a.plan(&cwd(), None).unwrap();
        assert_eq!(plan.tool, Tool::Chat);
        assert!(plan.request.contains("Is a trie overkill?"));
        assert!(plan.web_search);
        assert_eq!(plan.files, vec![at("src/router.rs")]);

        let ToolCommand::Analyze(a) = tool_command(&[
            "analyze",
            "src",
            "-q",
            "Where is auth?",
            "--analysis-type",
            "security",
            "--output-format",
            "actionable",
        ]) else {
            panic!()
        };
        assert_eq!(a.plan(&cwd(), None).unwrap().tool, Tool::Analyze);

        let ToolCommand::Debug(mut a) = tool_command(&["debug", "-", "--error-context", "trace"])
        else {
            panic!()
        };
        assert_eq!(a.text(), Some("-"));
        let plan = a
            .plan(&cwd(), Some("Panics on empty input".into()))
            .unwrap();
        assert_eq!(plan.tool, Tool::Debug);
        assert!(plan.request.contains("Panics on empty input"));

        let ToolCommand::Thinkdeep(a) = tool_command(&[
            "thinkdeep",
            "The deadlock comes from…",
            "--focus-area",
            "concurrency",
            "--thinking-mode",
            "max",
        ]) else {
            panic!()
        };
        let plan = a.plan(&cwd(), None).unwrap();
        assert_eq!(plan.tool, Tool::ThinkDeep);
        assert_eq!(plan.thinking, crate::gemini::ThinkingMode::Max);
        assert!(plan.request.contains("concurrency"));
    }

    fn has_text<P: Params>(mut run: Run<P>) -> bool {
        run.text().is_some()
    }

    /// A subcommand whose one value is text reads it from stdin when it is `-`; the others have
    /// no such text.
    #[test]
    fn the_positional_text_is_the_one_read_from_stdin() {
        for (args, _) in calls() {
            let sub = subcommand(args[0]);
            let single = sub
                .get_positionals()
                .filter(|a| !matches!(a.get_action(), clap::ArgAction::Append))
                .count();
            let text = with_args!(tool_command(&args), a => has_text(a));
            assert_eq!(text, single == 1, "{args:?}");
        }
    }

    #[test]
    fn plan_errors_name_the_flag() {
        let ToolCommand::Chat(a) = tool_command(&["chat", "   "]) else {
            panic!()
        };
        let ToolError::InvalidArgument { field, .. } = a.plan(&cwd(), None).unwrap_err() else {
            panic!()
        };
        assert_eq!(flag(&subcommand("chat"), &field), "PROMPT");
        for (sub, field, named) in [
            ("precommit", "compare_to", "--compare-to"),
            ("precommit", "files[0]", "--file"),
            ("precommit", "include_staged", "--include-staged"),
            ("precommit", "path", "--path"),
            ("codereview", "files[0]", "FILES"),
            ("chat", "use_websearch", "--web-search"),
            ("chat", "images[1]", "--image"),
            ("debug", "error_description", "DESCRIPTION"),
            ("investigate", "task", "TASK"),
            ("investigate", "approval_mode", "--approval-mode"),
            ("thinkdeep", "current_analysis", "ANALYSIS"),
            ("thinkdeep", "focus_areas[1]", "--focus-area"),
        ] {
            assert_eq!(flag(&subcommand(sub), field), named, "{sub} {field}");
        }
        let ToolCommand::Precommit(a) = tool_command(&["precommit", "--compare-to=-x"]) else {
            panic!()
        };
        let ToolError::InvalidArgument { field, .. } = a.plan(&cwd(), None).unwrap_err() else {
            panic!()
        };
        assert_eq!(flag(&subcommand("precommit"), &field), "--compare-to");
    }
}

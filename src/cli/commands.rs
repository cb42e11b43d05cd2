//! The tool subcommands: one arguments struct each, turned into the tool's own params struct and
//! planned by the tool's `plan()`, exactly as the MCP server does; the pipeline does the rest.
//! Paths are taken from the working directory, as a shell user expects.
//!
//! Each arguments struct says what the command line needs of it through [`ToolArgs`]; the
//! subcommands are matched once ([`with_args!`]), and running one is written once
//! (`cli::tool`). A subcommand's name and one-line help are its tool's (`tools::spec`).

use std::path::{Path, PathBuf};

use clap::Subcommand;

use crate::tools::analyze::AnalyzeParams;
use crate::tools::chat::ChatParams;
use crate::tools::codereview::CodeReviewParams;
use crate::tools::debug::DebugParams;
use crate::tools::investigate::InvestigateParams;
use crate::tools::precommit::PrecommitParams;
use crate::tools::thinkdeep::ThinkDeepParams;
use crate::tools::{Plan, Tool, ToolError};

use super::flags::{
    ANALYSIS_TYPES, ANALYZE_OUTPUTS, CommonArgs, FailOn, Format, REVIEW_TYPES, ReviewFormat,
    SEVERITY_FILTERS, absolute, choice,
};
use super::output::{Gate, Printed};

/// The subcommands that run a tool, in the order `--help` lists them.
#[derive(Debug, Subcommand)]
pub enum ToolCommand {
    #[command(about = Tool::Precommit.spec().about)]
    Precommit(PrecommitArgs),
    #[command(about = Tool::CodeReview.spec().about)]
    Codereview(CodeReviewArgs),
    #[command(about = Tool::Chat.spec().about)]
    Chat(ChatArgs),
    #[command(about = Tool::Analyze.spec().about)]
    Analyze(AnalyzeArgs),
    #[command(about = Tool::Debug.spec().about)]
    Debug(DebugArgs),
    #[command(about = Tool::Investigate.spec().about)]
    Investigate(InvestigateArgs),
    #[command(about = Tool::ThinkDeep.spec().about)]
    Thinkdeep(ThinkDeepArgs),
}

/// `$body` for whichever tool subcommand `$command` is, with `$args` bound to its arguments (a
/// [`ToolArgs`] of the tool's own type): the one match over the tool subcommands.
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
        }
    };
}
pub(crate) use with_args;

impl ToolCommand {
    /// `--tier` given after the subcommand.
    pub fn tier(&self) -> Option<&String> {
        with_args!(self, a => a.common().tier.as_ref())
    }
}

/// What the command line needs of a tool subcommand's arguments.
pub trait ToolArgs: Sized {
    /// The tool the subcommand runs.
    const TOOL: Tool;
    /// The flags every tool subcommand takes.
    fn common(&self) -> &CommonArgs;
    /// How the reply is printed.
    fn printed(&self) -> Printed;
    /// The positional text, which `-` reads from stdin; `None` when the subcommand has none.
    fn text(&self) -> Option<&str> {
        None
    }
    /// The tool's params, planned by the tool's `plan()`; `stdin`, when read, is the text.
    fn plan(self, cwd: &Path, stdin: Option<String>) -> Result<Plan, ToolError>;
    /// The flag (or positional argument) that sets a params field, for usage errors.
    fn flag(field: &str) -> String;
}

/// `gemini-mcp precommit`: review pending git changes like a linter.
#[derive(Debug, Clone, clap::Args)]
pub struct PrecommitArgs {
    /// The repository, or a directory in it, to review; repositories nested below it are
    /// reviewed too.
    #[arg(long, short = 'p', value_name = "PATH", default_value = ".")]
    pub path: String,
    /// Review only the staged changes (HEAD → index): what `git commit` will record.
    #[arg(long)]
    pub staged_only: bool,
    /// Review everything since this branch, tag or commit (from its merge base with HEAD),
    /// uncommitted work included (with --staged-only: committed and staged work only).
    #[arg(long, value_name = "REF")]
    pub compare_to: Option<String>,
    /// What the change is meant to do; missing pieces become findings.
    #[arg(long, value_name = "TEXT")]
    pub original_request: Option<String>,
    /// What to look at.
    #[arg(long, value_name = "TYPE", value_parser = REVIEW_TYPES)]
    pub review_type: Option<String>,
    /// How deep to look for nested repositories below PATH (0: only the repository containing
    /// PATH).
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub max_depth: u32,
    /// An extra file to include as context; repeat for several.
    #[arg(long = "file", value_name = "PATH")]
    pub files: Vec<String>,
    /// Read this index instead of .git/index (the pre-commit hook passes $GIT_INDEX_FILE, which
    /// `git commit -a` points at the index about to be committed).
    #[arg(long, value_name = "FILE")]
    pub index_file: Option<PathBuf>,
    /// How to print the review.
    #[arg(long, value_enum, default_value_t = ReviewFormat::Text)]
    pub format: ReviewFormat,
    /// Exit 1 when a finding is at or above this severity.
    #[arg(long, value_enum, value_name = "SEVERITY", default_value_t = FailOn::High)]
    pub fail_on: FailOn,
    /// Count unverified findings (location not found in what was sent) toward --fail-on.
    #[arg(long)]
    pub fail_on_unverified: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

impl ToolArgs for PrecommitArgs {
    const TOOL: Tool = Tool::Precommit;

    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn printed(&self) -> Printed {
        Printed::Review {
            format: self.format,
            gate: Gate::new(self.fail_on, self.fail_on_unverified),
        }
    }

    fn plan(self, cwd: &Path, _stdin: Option<String>) -> Result<Plan, ToolError> {
        let params = PrecommitParams {
            path: absolute(cwd, vec![self.path]).remove(0),
            include_staged: Some(true),
            include_unstaged: Some(!self.staged_only),
            include_untracked: Some(!self.staged_only),
            compare_to: self.compare_to,
            original_request: self.original_request,
            review_type: choice("review_type", self.review_type)?,
            severity_filter: None,
            max_depth: Some(self.max_depth),
            files: (!self.files.is_empty()).then(|| absolute(cwd, self.files)),
            common: self.common.into_common(cwd)?,
        };
        let mut plan = crate::tools::precommit::plan(params)?;
        if let (Some(git), Some(index)) = (plan.git.as_mut(), self.index_file) {
            git.index_file = Some(if index.is_absolute() {
                index
            } else {
                cwd.join(index)
            });
        }
        Ok(plan)
    }

    fn flag(field: &str) -> String {
        match field {
            "files" => "--file".into(),
            "images" => "--image".into(),
            f => format!("--{}", f.replace('_', "-")),
        }
    }
}

/// `gemini-mcp codereview`: findings on files.
#[derive(Debug, Clone, clap::Args)]
pub struct CodeReviewArgs {
    /// Files or directories to review.
    #[arg(value_name = "FILES", required = true)]
    pub files: Vec<String>,
    /// What the code does and what the review is for.
    #[arg(long, value_name = "TEXT", required = true)]
    pub context: String,
    /// What to look at.
    #[arg(long, value_name = "TYPE", value_parser = REVIEW_TYPES)]
    pub review_type: Option<String>,
    /// Lowest severity reported.
    #[arg(long, value_name = "SEVERITY", value_parser = SEVERITY_FILTERS)]
    pub severity_filter: Option<String>,
    /// Coding standards to check against.
    #[arg(long, value_name = "TEXT")]
    pub standards: Option<String>,
    /// Areas to look at especially.
    #[arg(long, value_name = "TEXT")]
    pub focus_on: Option<String>,
    /// Let Gemini list, search and read the project's files itself (read-only).
    #[arg(long)]
    pub explore: bool,
    /// How to print the review.
    #[arg(long, value_enum, default_value_t = ReviewFormat::Text)]
    pub format: ReviewFormat,
    /// Exit 1 when a finding is at or above this severity.
    #[arg(long, value_enum, value_name = "SEVERITY", default_value_t = FailOn::None)]
    pub fail_on: FailOn,
    /// Count unverified findings (location not found in what was sent) toward --fail-on.
    #[arg(long)]
    pub fail_on_unverified: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

impl ToolArgs for CodeReviewArgs {
    const TOOL: Tool = Tool::CodeReview;

    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn printed(&self) -> Printed {
        Printed::Review {
            format: self.format,
            gate: Gate::new(self.fail_on, self.fail_on_unverified),
        }
    }

    fn plan(self, cwd: &Path, _stdin: Option<String>) -> Result<Plan, ToolError> {
        crate::tools::codereview::plan(CodeReviewParams {
            files: absolute(cwd, self.files),
            context: self.context,
            review_type: choice("review_type", self.review_type)?,
            severity_filter: choice("severity_filter", self.severity_filter)?,
            standards: self.standards,
            focus_on: self.focus_on,
            explore: Some(self.explore),
            common: self.common.into_common(cwd)?,
        })
    }

    fn flag(field: &str) -> String {
        match field {
            f if f == "files" || f.starts_with("files[") => "FILES".into(),
            f => PrecommitArgs::flag(f),
        }
    }
}

/// `gemini-mcp chat`: a second opinion.
#[derive(Debug, Clone, clap::Args)]
pub struct ChatArgs {
    /// Your question or idea, with the context Gemini needs ("-" reads it from stdin).
    #[arg(value_name = "PROMPT")]
    pub prompt: String,
    /// A file or directory to include; repeat for several.
    #[arg(long = "file", short = 'f', value_name = "PATH")]
    pub files: Vec<String>,
    /// Extra instructions for Gemini.
    #[arg(long, value_name = "TEXT")]
    pub system_prompt: Option<String>,
    /// Let Gemini search the web and cite its sources.
    #[arg(long)]
    pub web_search: bool,
    /// How to print the answer.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[command(flatten)]
    pub common: CommonArgs,
}

impl ToolArgs for ChatArgs {
    const TOOL: Tool = Tool::Chat;

    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn printed(&self) -> Printed {
        Printed::Answer {
            format: self.format,
        }
    }

    fn text(&self) -> Option<&str> {
        Some(&self.prompt)
    }

    fn plan(self, cwd: &Path, stdin: Option<String>) -> Result<Plan, ToolError> {
        crate::tools::chat::plan(ChatParams {
            prompt: stdin.unwrap_or(self.prompt),
            files: (!self.files.is_empty()).then(|| absolute(cwd, self.files)),
            system_prompt: self.system_prompt,
            use_websearch: Some(self.web_search),
            common: self.common.into_common(cwd)?,
        })
    }

    fn flag(field: &str) -> String {
        match field {
            "prompt" => "PROMPT".into(),
            "use_websearch" => "--web-search".into(),
            f => PrecommitArgs::flag(f),
        }
    }
}

/// `gemini-mcp analyze`: a question about files.
#[derive(Debug, Clone, clap::Args)]
pub struct AnalyzeArgs {
    /// Files or directories to analyze.
    #[arg(value_name = "FILES", required = true)]
    pub files: Vec<String>,
    /// What to find out about them.
    #[arg(long, short = 'q', value_name = "TEXT", required = true)]
    pub question: String,
    /// The angle of the analysis.
    #[arg(long, value_name = "TYPE", value_parser = ANALYSIS_TYPES)]
    pub analysis_type: Option<String>,
    /// The shape of the answer (the tool's output_format; --format is how it is printed).
    #[arg(long, value_name = "STYLE", value_parser = ANALYZE_OUTPUTS)]
    pub output_format: Option<String>,
    /// Let Gemini list, search and read the project's files itself (read-only).
    #[arg(long)]
    pub explore: bool,
    /// How to print the answer.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[command(flatten)]
    pub common: CommonArgs,
}

impl ToolArgs for AnalyzeArgs {
    const TOOL: Tool = Tool::Analyze;

    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn printed(&self) -> Printed {
        Printed::Answer {
            format: self.format,
        }
    }

    fn plan(self, cwd: &Path, _stdin: Option<String>) -> Result<Plan, ToolError> {
        crate::tools::analyze::plan(AnalyzeParams {
            files: absolute(cwd, self.files),
            question: self.question,
            analysis_type: choice("analysis_type", self.analysis_type)?,
            output_format: choice("output_format", self.output_format)?,
            explore: Some(self.explore),
            common: self.common.into_common(cwd)?,
        })
    }

    fn flag(field: &str) -> String {
        CodeReviewArgs::flag(field)
    }
}

/// `gemini-mcp debug`: root-cause analysis.
#[derive(Debug, Clone, clap::Args)]
pub struct DebugArgs {
    /// The bug: what happens, what was expected ("-" reads it from stdin).
    #[arg(value_name = "DESCRIPTION")]
    pub error_description: String,
    /// Stack trace, logs or error output.
    #[arg(long, value_name = "TEXT")]
    pub error_context: Option<String>,
    /// A file or directory likely involved; repeat for several.
    #[arg(long = "file", short = 'f', value_name = "PATH")]
    pub files: Vec<String>,
    /// What was already tried, and what happened.
    #[arg(long, value_name = "TEXT")]
    pub previous_attempts: Option<String>,
    /// Environment: versions, OS, configuration.
    #[arg(long, value_name = "TEXT")]
    pub runtime_info: Option<String>,
    /// Let Gemini search the web and cite its sources.
    #[arg(long)]
    pub web_search: bool,
    /// Let Gemini list, search and read the project's files itself (read-only).
    #[arg(long)]
    pub explore: bool,
    /// How to print the answer.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[command(flatten)]
    pub common: CommonArgs,
}

impl ToolArgs for DebugArgs {
    const TOOL: Tool = Tool::Debug;

    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn printed(&self) -> Printed {
        Printed::Answer {
            format: self.format,
        }
    }

    fn text(&self) -> Option<&str> {
        Some(&self.error_description)
    }

    fn plan(self, cwd: &Path, stdin: Option<String>) -> Result<Plan, ToolError> {
        crate::tools::debug::plan(DebugParams {
            error_description: stdin.unwrap_or(self.error_description),
            error_context: self.error_context,
            files: (!self.files.is_empty()).then(|| absolute(cwd, self.files)),
            previous_attempts: self.previous_attempts,
            runtime_info: self.runtime_info,
            use_websearch: Some(self.web_search),
            explore: Some(self.explore),
            common: self.common.into_common(cwd)?,
        })
    }

    fn flag(field: &str) -> String {
        match field {
            "error_description" => "DESCRIPTION".into(),
            f => ChatArgs::flag(f),
        }
    }
}

/// `gemini-mcp investigate`: Gemini investigates the project itself, read-only.
#[derive(Debug, Clone, clap::Args)]
pub struct InvestigateArgs {
    /// The question or task about the project ("-" reads it from stdin).
    #[arg(value_name = "TASK")]
    pub task: String,
    /// A file or directory to start from (sent with the task); repeat for several.
    #[arg(long = "file", short = 'f', value_name = "PATH")]
    pub files: Vec<String>,
    /// Most tool calls Gemini may make (default 25).
    #[arg(long, value_name = "N")]
    pub max_steps: Option<u32>,
    /// Who explores: gemini (Gemini with our read-only tools) or gemini-cli (the Gemini CLI's
    /// own agent, under the server's approval policy).
    #[arg(long, value_name = "ENGINE")]
    pub engine: Option<String>,
    /// For --engine gemini-cli: plan (read-only, default) or default; autoEdit and yolo (which
    /// change files) only where GEMINI_MCP_ACP_ALLOW_MODES lists them.
    #[arg(long, value_name = "MODE")]
    pub approval_mode: Option<String>,
    /// How to print the answer.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[command(flatten)]
    pub common: CommonArgs,
}

impl ToolArgs for InvestigateArgs {
    const TOOL: Tool = Tool::Investigate;

    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn printed(&self) -> Printed {
        Printed::Answer {
            format: self.format,
        }
    }

    fn text(&self) -> Option<&str> {
        Some(&self.task)
    }

    fn plan(self, cwd: &Path, stdin: Option<String>) -> Result<Plan, ToolError> {
        crate::tools::investigate::plan(InvestigateParams {
            task: stdin.unwrap_or(self.task),
            files: (!self.files.is_empty()).then(|| absolute(cwd, self.files)),
            max_steps: self.max_steps,
            engine: self.engine,
            approval_mode: self.approval_mode,
            common: self.common.into_common(cwd)?,
        })
    }

    fn flag(field: &str) -> String {
        match field {
            "task" => "TASK".into(),
            f => ChatArgs::flag(f),
        }
    }
}

/// `gemini-mcp thinkdeep`: extend and challenge an analysis.
#[derive(Debug, Clone, clap::Args)]
pub struct ThinkDeepArgs {
    /// Your current thinking: the problem, what you found, what you plan ("-" reads it from
    /// stdin).
    #[arg(value_name = "ANALYSIS")]
    pub current_analysis: String,
    /// Background: constraints, goals, what was ruled out.
    #[arg(long, value_name = "TEXT")]
    pub problem_context: Option<String>,
    /// An aspect to focus on (performance, security, architecture…); repeat for several.
    #[arg(long = "focus-area", value_name = "AREA")]
    pub focus_areas: Vec<String>,
    /// A file or directory to include; repeat for several.
    #[arg(long = "file", short = 'f', value_name = "PATH")]
    pub files: Vec<String>,
    /// Let Gemini search the web and cite its sources.
    #[arg(long)]
    pub web_search: bool,
    /// How to print the answer.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[command(flatten)]
    pub common: CommonArgs,
}

impl ToolArgs for ThinkDeepArgs {
    const TOOL: Tool = Tool::ThinkDeep;

    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn printed(&self) -> Printed {
        Printed::Answer {
            format: self.format,
        }
    }

    fn text(&self) -> Option<&str> {
        Some(&self.current_analysis)
    }

    fn plan(self, cwd: &Path, stdin: Option<String>) -> Result<Plan, ToolError> {
        crate::tools::thinkdeep::plan(ThinkDeepParams {
            current_analysis: stdin.unwrap_or(self.current_analysis),
            problem_context: self.problem_context,
            focus_areas: (!self.focus_areas.is_empty()).then_some(self.focus_areas),
            files: (!self.files.is_empty()).then(|| absolute(cwd, self.files)),
            use_websearch: Some(self.web_search),
            common: self.common.into_common(cwd)?,
        })
    }

    fn flag(field: &str) -> String {
        match field {
            "current_analysis" => "ANALYSIS".into(),
            f if f == "focus_areas" || f.starts_with("focus_areas[") => "--focus-area".into(),
            f => ChatArgs::flag(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::super::{Args, Command};
    use super::*;
    use crate::tools::{Output, Tool};

    fn parse(args: &[&str]) -> Result<Command, clap::Error> {
        let mut full = vec!["gemini-mcp"];
        full.extend_from_slice(args);
        Args::try_parse_from(full).map(|a| a.command.expect("a subcommand"))
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

    #[test]
    fn every_tool_has_its_subcommand() {
        use clap::CommandFactory;
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
    }

    #[test]
    fn precommit_defaults_review_everything_and_fail_on_high() {
        let Command::Tool(ToolCommand::Precommit(a)) = parse(&["precommit"]).unwrap() else {
            panic!("not precommit")
        };
        assert_eq!(a.fail_on, FailOn::High);
        assert!(!a.fail_on_unverified);
        assert_eq!(a.format, ReviewFormat::Text);
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
    fn precommit_flags() {
        let Command::Tool(ToolCommand::Precommit(a)) = parse(&[
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
        ])
        .unwrap() else {
            panic!("not precommit")
        };
        assert_eq!(a.format, ReviewFormat::Sarif);
        assert_eq!(a.fail_on, FailOn::Medium);
        assert!(a.fail_on_unverified);
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
        let Command::Tool(ToolCommand::Codereview(a)) = parse(&[
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
        ])
        .unwrap() else {
            panic!()
        };
        assert_eq!(a.fail_on, FailOn::High);
        let plan = a.plan(&cwd(), None).unwrap();
        assert_eq!(plan.tool, Tool::CodeReview);
        assert_eq!(plan.files, vec![at("src/db.rs"), at("src/pool.rs")]);
        assert!(matches!(
            plan.output,
            Output::Review {
                min_severity: crate::reply::review::Severity::High,
                verdict: false
            }
        ));

        let Command::Tool(ToolCommand::Chat(a)) = parse(&[
            "chat",
            "Is a trie overkill?",
            "-f",
            "src/router.rs",
            "--web-search",
        ])
        .unwrap() else {
            panic!()
        };
        let plan = a.plan(&cwd(), None).unwrap();
        assert_eq!(plan.tool, Tool::Chat);
        assert!(plan.request.contains("Is a trie overkill?"));
        assert!(plan.web_search);
        assert_eq!(plan.files, vec![at("src/router.rs")]);

        let Command::Tool(ToolCommand::Analyze(a)) = parse(&[
            "analyze",
            "src",
            "-q",
            "Where is auth?",
            "--analysis-type",
            "security",
            "--output-format",
            "actionable",
        ])
        .unwrap() else {
            panic!()
        };
        assert_eq!(a.plan(&cwd(), None).unwrap().tool, Tool::Analyze);

        let Command::Tool(ToolCommand::Debug(a)) =
            parse(&["debug", "-", "--error-context", "trace"]).unwrap()
        else {
            panic!()
        };
        let plan = a
            .plan(&cwd(), Some("Panics on empty input".into()))
            .unwrap();
        assert_eq!(plan.tool, Tool::Debug);
        assert!(plan.request.contains("Panics on empty input"));

        let Command::Tool(ToolCommand::Thinkdeep(a)) = parse(&[
            "thinkdeep",
            "The deadlock comes from…",
            "--focus-area",
            "concurrency",
            "--thinking-mode",
            "max",
        ])
        .unwrap() else {
            panic!()
        };
        let plan = a.plan(&cwd(), None).unwrap();
        assert_eq!(plan.tool, Tool::ThinkDeep);
        assert_eq!(plan.thinking, crate::gemini::ThinkingMode::Max);
        assert!(plan.request.contains("concurrency"));
    }

    #[test]
    fn plan_errors_name_the_flag() {
        let Command::Tool(ToolCommand::Chat(a)) = parse(&["chat", "   "]).unwrap() else {
            panic!()
        };
        let ToolError::InvalidArgument { field, .. } = a.plan(&cwd(), None).unwrap_err() else {
            panic!()
        };
        assert_eq!(ChatArgs::flag(&field), "PROMPT");
        assert_eq!(PrecommitArgs::flag("compare_to"), "--compare-to");
        assert_eq!(CodeReviewArgs::flag("files[0]"), "FILES");
        assert_eq!(ThinkDeepArgs::flag("focus_areas[1]"), "--focus-area");
        let Command::Tool(ToolCommand::Precommit(a)) =
            parse(&["precommit", "--compare-to=-x"]).unwrap()
        else {
            panic!()
        };
        let ToolError::InvalidArgument { field, .. } = a.plan(&cwd(), None).unwrap_err() else {
            panic!()
        };
        assert_eq!(PrecommitArgs::flag(&field), "--compare-to");
    }
}

//! `investigate`: give Gemini a question or task about the project; it lists, searches and reads
//! files and git history itself, read-only, and answers with `file:line` citations. (The Gemini
//! CLI's agent, `engine: "gemini-cli"`, may also edit in `autoEdit` and `yolo`, where the
//! operator allows them: `GEMINI_MCP_ACP_ALLOW_MODES`.)

use schemars::JsonSchema;
use serde::Deserialize;

use super::params::Params;
use super::{Common, Plan, Tool, ToolError, paths, required_text, section};
use crate::gemini::AgentMode;

/// Steps (function calls) an investigation takes when the call names no `max_steps`.
pub const DEFAULT_STEPS: u32 = 25;

#[derive(Debug, Clone, Default, Deserialize, JsonSchema, clap::Args)]
pub struct InvestigateParams {
    /// The question or task about the project.
    #[arg(
        value_name = "TASK",
        help = "The question or task about the project (\"-\" reads it from stdin)"
    )]
    pub task: String,
    /// Starting points, sent with the task.
    #[arg(
        long = "file",
        short = 'f',
        value_name = "PATH",
        help = "A file or directory to start from (sent with the task); repeat for several"
    )]
    pub files: Option<Vec<String>>,
    /// Most tool calls (default 25).
    #[arg(
        long,
        value_name = "N",
        help = "Most tool calls Gemini may make (default 25)"
    )]
    pub max_steps: Option<u32>,
    /// `gemini` (default) or `gemini-cli` (the CLI's own agent).
    #[arg(
        long,
        value_name = "ENGINE",
        help = "Who explores: gemini (Gemini with our read-only tools) or gemini-cli (the Gemini CLI's own agent, under the server's approval policy)"
    )]
    pub engine: Option<String>,
    /// gemini-cli: plan (default, read-only), default; autoEdit, yolo if allowed.
    #[arg(
        long,
        value_name = "MODE",
        help = "For --engine gemini-cli: plan (read-only, default) or default; autoEdit and yolo (which change files) only where GEMINI_MCP_ACP_ALLOW_MODES lists them"
    )]
    pub approval_mode: Option<String>,
    #[serde(flatten)]
    #[command(flatten)]
    pub common: Common,
}

impl Params for InvestigateParams {
    const TOOL: Tool = Tool::Investigate;

    fn plan(self) -> Result<Plan, ToolError> {
        plan(self)
    }

    fn text(&mut self) -> Option<&mut String> {
        Some(&mut self.task)
    }
}

pub fn plan(p: InvestigateParams) -> Result<Plan, ToolError> {
    let mut plan = Plan::new(Tool::Investigate, p.common)?;
    let task = required_text("task", p.task)?;
    section(&mut plan.request, "Task", Some(&task));
    plan.files = paths("files", p.files)?;
    plan.explore = Some(steps(p.max_steps)?);
    plan.agent = match p.engine.as_deref().map(str::trim) {
        None | Some("gemini") => {
            if p.approval_mode.is_some() {
                return Err(ToolError::invalid(
                    "approval_mode",
                    "applies only to engine \"gemini-cli\"; leave it out, or set engine to \"gemini-cli\"",
                ));
            }
            None
        }
        Some("gemini-cli") => Some(match p.approval_mode.as_deref() {
            None => AgentMode::Plan,
            Some(m) => AgentMode::parse(m).ok_or_else(|| {
                ToolError::invalid(
                    "approval_mode",
                    format!("`{m}` is not an approval mode; use plan (read-only, the default), default, autoEdit or yolo"),
                )
            })?,
        }),
        Some(other) => {
            return Err(ToolError::invalid(
                "engine",
                format!("`{other}` is not an engine; use \"gemini\" (the default) or \"gemini-cli\""),
            ));
        }
    };
    Ok(plan)
}

/// The step limit a call asked for (`max_steps`), or the default. The server's own cap
/// (`GEMINI_MCP_EXPLORE_MAX_STEPS`) is applied by the pipeline.
pub fn steps(max_steps: Option<u32>) -> Result<u32, ToolError> {
    match max_steps {
        None => Ok(DEFAULT_STEPS),
        Some(0) => Err(ToolError::invalid(
            "max_steps",
            "must be at least 1 (leave it out for the default of 25)",
        )),
        Some(n) => Ok(n),
    }
}

/// `explore: true` on analyze, debug and codereview: the same loop with the default steps.
/// Google Search grounding and the project tools are not offered together.
pub fn explore_flag(plan: &mut Plan, explore: Option<bool>) -> Result<(), ToolError> {
    if explore != Some(true) {
        return Ok(());
    }
    if plan.web_search {
        return Err(ToolError::invalid(
            "explore",
            "cannot be combined with use_websearch: Gemini gets either the project's tools or Google Search in one call; drop one of them",
        ));
    }
    plan.explore = Some(DEFAULT_STEPS);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_is_required_and_the_steps_positive() {
        let e = plan(InvestigateParams::default()).unwrap_err();
        assert_eq!(e.field(), Some("task"));
        let e = plan(InvestigateParams {
            task: "where are threads stored?".into(),
            max_steps: Some(0),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.field(), Some("max_steps"));
        let p = plan(InvestigateParams {
            task: "where are threads stored?".into(),
            files: Some(vec!["src/threads".into()]),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(p.explore, Some(DEFAULT_STEPS));
        assert_eq!(p.files, ["src/threads"]);
        assert!(p.request.contains("## Task\nwhere are threads stored?"));
    }
}

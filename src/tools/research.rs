//! `research`: Gemini's Deep Research agent researches a question on the web and answers with
//! a cited report. Off unless `GEMINI_MCP_DEEP_RESEARCH=1` (it browses the web): the pipeline
//! refuses the call, and the MCP server does not list the tool, while it is off. Nothing of the
//! project goes with the question unless it is named in `files`, which pass the sandbox and
//! redaction as every tool's do.

use schemars::JsonSchema;
use serde::Deserialize;

use super::params::Params;
use super::{Common, Plan, Tool, ToolError, optional_text, paths, required_text, section};

#[derive(Debug, Clone, Default, Deserialize, JsonSchema, clap::Args)]
pub struct ResearchParams {
    /// The question to research on the web; self-contained (the agent does not ask back).
    #[arg(
        value_name = "QUESTION",
        help = "The question to research on the web, self-contained (\"-\" reads it from stdin)"
    )]
    pub question: String,
    /// What the answer is for: the project, constraints, what is known already.
    #[arg(long, value_name = "TEXT")]
    pub context: Option<String>,
    /// Project files to send with the question (nothing else of the project is sent).
    #[arg(
        long = "file",
        short = 'f',
        value_name = "PATH",
        help = "A project file or directory to send with the question; repeat for several"
    )]
    pub files: Option<Vec<String>>,
    /// Thread to continue: a reply's id, or "latest".
    #[arg(
        long,
        value_name = "ID",
        help = "Continue a conversation: the continuation_id of an earlier reply, or \"latest\""
    )]
    pub continuation_id: Option<String>,
}

impl Params for ResearchParams {
    const TOOL: Tool = Tool::Research;

    fn plan(self) -> Result<Plan, ToolError> {
        plan(self)
    }

    fn text(&mut self) -> Option<&mut String> {
        Some(&mut self.question)
    }
}

pub fn plan(p: ResearchParams) -> Result<Plan, ToolError> {
    let common = Common {
        continuation_id: p.continuation_id,
        ..Common::default()
    };
    let mut plan = Plan::new(Tool::Research, common)?;
    let question = required_text("question", p.question)?;
    let context = optional_text("context", p.context)?;
    section(&mut plan.request, "The question", Some(&question));
    section(&mut plan.request, "Context", context.as_deref());
    plan.files = paths("files", p.files)?;
    Ok(plan)
}

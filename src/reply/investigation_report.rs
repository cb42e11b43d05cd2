//! What an investigation reports besides the answer: the steps Gemini took with the read-only
//! project tools, the files it read, why it stopped and what it used. The reply shows it and the
//! thread keeps one line per step; the loop that fills it is `pipeline::investigation`.

use serde_json::Value;

use crate::gemini::Usage;

/// Why the investigation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Gemini answered on its own.
    Answered,
    MaxSteps,
    TokenBudget,
    Deadline,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Answered => "answered",
            StopReason::MaxSteps => "max_steps",
            StopReason::TokenBudget => "token_budget",
            StopReason::Deadline => "deadline",
        }
    }
}

/// One tool call Gemini made.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub tool: String,
    pub arguments: Value,
    /// One line: what it found, or why it was refused.
    pub outcome: String,
    /// Tokens of the result sent back.
    pub tokens: u64,
}

/// What the investigation did besides the answer.
#[derive(Debug, Clone)]
pub struct Investigation {
    pub steps: Vec<Step>,
    /// Files whose lines Gemini read, in first-read order.
    pub files_read: Vec<String>,
    pub stop: StopReason,
    /// Summed over every request of the loop.
    pub usage: Usage,
    /// Requests sent to Gemini.
    pub requests: u32,
    /// What Gemini received of each file it read (the numbered blocks, with where their lines
    /// are), held for checking the findings' locations against it; neither shown nor kept in
    /// the thread.
    pub read: Vec<(String, crate::collector::render::Frame)>,
}

/// The steps as the thread keeps them: one line each, so a later turn knows what was looked at
/// without the results themselves.
pub fn steps_note(inv: &Investigation) -> String {
    let mut s = format!(
        "## Investigation ({} steps, {})\n",
        inv.steps.len(),
        inv.stop.as_str()
    );
    for step in &inv.steps {
        s.push_str("- ");
        s.push_str(&step.outcome);
        s.push('\n');
    }
    s
}

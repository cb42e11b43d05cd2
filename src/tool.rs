//! The tools, as one closed type and one table: names, system prompts, default temperatures and
//! default rate limits. A leaf: every layer may import it, and it imports nothing of the crate.

/// Every tool name, in `tools/list` order: the tools that ask Gemini, then `listmodels`.
pub const TOOL_NAMES: &[&str] = &[
    "analyze",
    "chat",
    "codereview",
    "debug",
    "investigate",
    "listmodels",
    "precommit",
    "thinkdeep",
];

/// The tools that ask Gemini, as a closed type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    Chat,
    ThinkDeep,
    Analyze,
    CodeReview,
    Debug,
    Precommit,
    Investigate,
}

impl Tool {
    /// Every tool that asks Gemini.
    pub const ALL: [Tool; 7] = [
        Tool::Chat,
        Tool::ThinkDeep,
        Tool::Analyze,
        Tool::CodeReview,
        Tool::Debug,
        Tool::Precommit,
        Tool::Investigate,
    ];

    /// The tool of this MCP name (`chat`, `thinkdeep`, …).
    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Tool::Chat => "chat",
            Tool::ThinkDeep => "thinkdeep",
            Tool::Analyze => "analyze",
            Tool::CodeReview => "codereview",
            Tool::Debug => "debug",
            Tool::Precommit => "precommit",
            Tool::Investigate => "investigate",
        }
    }

    /// The tool's system prompt, compiled in.
    pub fn system_prompt(self) -> &'static str {
        match self {
            Tool::Chat => include_str!("../prompts/chat.md"),
            Tool::ThinkDeep => include_str!("../prompts/thinkdeep.md"),
            Tool::Analyze => include_str!("../prompts/analyze.md"),
            Tool::CodeReview => include_str!("../prompts/codereview.md"),
            Tool::Debug => include_str!("../prompts/debug.md"),
            Tool::Precommit => include_str!("../prompts/precommit.md"),
            Tool::Investigate => include_str!("../prompts/investigate.md"),
        }
    }

    /// Sampling temperature sent to models that take one by default (2.5); 3.x and later get
    /// none unless the user asked.
    pub fn default_temperature(self) -> f32 {
        match self {
            Tool::Chat => 0.5,
            Tool::ThinkDeep => 0.7,
            _ => 0.2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_are_the_tools_and_listmodels_in_order() {
        let mut names: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
        names.push("listmodels");
        names.sort_unstable();
        assert_eq!(names, TOOL_NAMES);
        for name in TOOL_NAMES {
            assert_eq!(
                Tool::from_name(name).map(Tool::name),
                (*name != "listmodels").then_some(*name)
            );
        }
    }
}

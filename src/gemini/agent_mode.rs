//! The approval modes of the Gemini CLI's agent: how much it may do, as ACP session modes name
//! them. Vocabulary shared by the configuration (which modes the operator allows), the tools
//! (`investigate`'s `approval_mode`), the pipeline and the ACP backend that enforces them.

use serde::Serialize;

/// How much the agent may do, as ACP session modes name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum AgentMode {
    /// Read-only: the agent plans and reads (the default).
    #[serde(rename = "plan")]
    Plan,
    /// The agent asks before every action; we answer as for `plan`.
    #[serde(rename = "default")]
    Default,
    /// Edits inside the roots are allowed; commands are not.
    #[serde(rename = "autoEdit")]
    AutoEdit,
    /// Everything is allowed, commands included.
    #[serde(rename = "yolo")]
    Yolo,
}

impl AgentMode {
    pub const ALL: [AgentMode; 4] = [
        AgentMode::Plan,
        AgentMode::Default,
        AgentMode::AutoEdit,
        AgentMode::Yolo,
    ];

    /// The ACP mode id.
    pub fn id(self) -> &'static str {
        match self {
            AgentMode::Plan => "plan",
            AgentMode::Default => "default",
            AgentMode::AutoEdit => "autoEdit",
            AgentMode::Yolo => "yolo",
        }
    }

    /// Reads an ACP mode id, or the CLI's spelling (`auto_edit`).
    pub fn parse(s: &str) -> Option<AgentMode> {
        match s.trim() {
            "plan" => Some(AgentMode::Plan),
            "default" => Some(AgentMode::Default),
            "autoEdit" | "auto_edit" => Some(AgentMode::AutoEdit),
            "yolo" => Some(AgentMode::Yolo),
            _ => None,
        }
    }

    /// Whether the mode changes files or runs commands, so the configuration must allow it.
    pub fn writes(self) -> bool {
        matches!(self, AgentMode::AutoEdit | AgentMode::Yolo)
    }

    /// The mode the CLI's session is set to: the modes that write run in the CLI's `default`, so
    /// that it asks before each edit and command (our policy file says `ask_user` for them) and
    /// this module answers.
    pub fn session_mode(self) -> AgentMode {
        match self {
            AgentMode::AutoEdit | AgentMode::Yolo => AgentMode::Default,
            read_only => read_only,
        }
    }

    /// The CLI's own tools the agent gets (`tools.core`): none while it reads only (it reads
    /// through ours); its edit tools in `autoEdit`; and its shell in `yolo`.
    pub fn cli_tools(self) -> &'static [&'static str] {
        match self {
            AgentMode::Plan | AgentMode::Default => &[],
            AgentMode::AutoEdit => &["replace", "write_file"],
            AgentMode::Yolo => &["replace", "write_file", "run_shell_command"],
        }
    }

    /// One line for the reply: which policy applied, and in the modes that write, what no
    /// longer holds.
    pub fn describe(self) -> &'static str {
        match self {
            AgentMode::Plan => {
                "plan (read-only): reads inside the project allowed, everything else rejected"
            }
            AgentMode::Default => {
                "default: every action asked for; reads inside the project allowed, everything else rejected"
            }
            AgentMode::AutoEdit => {
                "autoEdit (allowed by GEMINI_MCP_ACP_ALLOW_MODES): reads through the server's tools; each edit asked \
                 for and allowed inside the project (not secret files, not .git), commands rejected. Not held in \
                 this mode: the Gemini CLI's edit tools open the files they change themselves, beside the server's \
                 sandbox and secret redaction, and send their lines to Gemini"
            }
            AgentMode::Yolo => {
                "yolo (allowed by GEMINI_MCP_ACP_ALLOW_MODES): reads through the server's tools; each edit asked for \
                 and allowed inside the project (not secret files, not .git); shell commands allowed. Not held in \
                 this mode: the Gemini CLI's edit tools and its shell open files themselves, beside the server's \
                 sandbox and secret redaction: a command can read or change any file this user can, secret files \
                 and files outside the project included, and its output goes to Gemini unredacted"
            }
        }
    }
}

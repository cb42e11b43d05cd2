//! Workflows offered as MCP prompts (hosts show them as slash commands): each renders a message
//! telling the agent which of our tools to call and how. They cost no `tools/list` space, so
//! this is where workflows that other servers add as extra tools belong. No MCP types here.

use std::collections::BTreeMap;

use crate::tools::ToolError;

/// One argument of a workflow.
#[derive(Debug, Clone, Copy)]
pub struct Argument {
    pub name: &'static str,
    pub description: &'static str,
    pub required: bool,
}

/// A workflow: its name (the slash command), a one-line description and its arguments.
#[derive(Debug, Clone, Copy)]
pub struct Workflow {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub arguments: &'static [Argument],
}

const fn arg(name: &'static str, description: &'static str, required: bool) -> Argument {
    Argument {
        name,
        description,
        required,
    }
}

pub const WORKFLOWS: &[Workflow] = &[
    Workflow {
        name: "review-changes",
        title: "Review changes before committing",
        description: "Have Gemini review the pending git changes (precommit) and fix what it finds before committing.",
        arguments: &[
            arg("goal", "What the change is for (optional).", false),
            arg(
                "compare_to",
                "Review everything since this branch or commit instead of the working tree (optional).",
                false,
            ),
        ],
    },
    Workflow {
        name: "review-code",
        title: "Code review",
        description: "Have Gemini review files or directories (codereview): findings with severity, file:line and fix.",
        arguments: &[
            arg(
                "paths",
                "Files or directories, separated by spaces or commas.",
                true,
            ),
            arg("focus", "What to look at hardest (optional).", false),
        ],
    },
    Workflow {
        name: "second-opinion",
        title: "Second opinion on the plan",
        description: "Have Gemini challenge and extend your current plan (thinkdeep) before you act on it.",
        arguments: &[arg(
            "plan",
            "The plan to check (optional: the agent's current plan).",
            false,
        )],
    },
    Workflow {
        name: "challenge",
        title: "Challenge a claim",
        description: "Argue against a claim with Gemini's help before agreeing with it.",
        arguments: &[arg("claim", "The claim to test.", true)],
    },
    Workflow {
        name: "security-audit",
        title: "Security audit",
        description: "Have Gemini audit files or directories for security problems (analyze, security).",
        arguments: &[arg(
            "paths",
            "Files or directories, separated by spaces or commas.",
            true,
        )],
    },
    Workflow {
        name: "root-cause",
        title: "Root cause of an error",
        description: "Find the root cause of an error with Gemini (debug) before changing code.",
        arguments: &[
            arg("error", "The error: message, stack trace or symptom.", true),
            arg("paths", "Files that may be involved (optional).", false),
        ],
    },
];

/// The workflow called `name`.
pub fn find(name: &str) -> Option<&'static Workflow> {
    WORKFLOWS.iter().find(|w| w.name == name)
}

/// The message of workflow `name` with `args`: a required argument missing (or blank) and an
/// argument it does not take are errors naming them.
pub fn render(name: &str, args: &BTreeMap<String, String>) -> Result<String, ToolError> {
    let w = find(name).ok_or_else(|| {
        let names: Vec<&str> = WORKFLOWS.iter().map(|w| w.name).collect();
        ToolError::invalid(
            "name",
            format!("no prompt `{name}`; the prompts are {}", names.join(", ")),
        )
    })?;
    for key in args.keys() {
        if !w.arguments.iter().any(|a| a.name == key) {
            let names: Vec<&str> = w.arguments.iter().map(|a| a.name).collect();
            return Err(ToolError::invalid(
                key,
                format!(
                    "`{}` takes no argument `{key}`; its arguments are {}",
                    w.name,
                    names.join(", ")
                ),
            ));
        }
    }
    let get = |n: &str| {
        args.get(n)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    for a in w.arguments.iter().filter(|a| a.required) {
        if get(a.name).is_none() {
            return Err(ToolError::invalid(
                a.name,
                format!("`{}` needs `{}`: {}", w.name, a.name, a.description),
            ));
        }
    }
    let paths = || {
        let list: Vec<String> = get("paths")
            .unwrap_or_default()
            .split([',', ' ', '\n'])
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| format!("\"{}\"", p.replace('"', "\\\"")))
            .collect();
        format!("[{}]", list.join(", "))
    };
    let quoted = |s: String| serde_json::to_string(&s).unwrap_or_default();
    Ok(match w.name {
        "review-changes" => {
            let mut call = String::from("{\"path\": \".\"");
            if let Some(goal) = get("goal") {
                call.push_str(&format!(", \"original_request\": {}", quoted(goal)));
            }
            if let Some(base) = get("compare_to") {
                call.push_str(&format!(", \"compare_to\": {}", quoted(base)));
            }
            call.push('}');
            format!(
                "Before committing, have Gemini review the pending changes: call the gemini server's `precommit` tool \
                 with {call}. Then fix every critical and high finding (or explain why it is wrong), run the tests, and \
                 report Gemini's verdict and what you changed. Do not commit while the verdict is `do_not_commit`."
            )
        }
        "review-code" => {
            let focus = get("focus")
                .map(|f| format!(", \"focus_on\": {}", quoted(f)))
                .unwrap_or_default();
            format!(
                "Call the gemini server's `codereview` tool with {{\"files\": {}, \"context\": \"<what this code is for \
                 and what changed, in your words>\"{focus}}}. Then go through the findings by severity: for each, say \
                 whether you agree, and fix the ones you agree with.",
                paths()
            )
        }
        "second-opinion" => {
            let plan = get("plan").unwrap_or_else(|| {
                "<your current plan: the problem, what you found, what you intend to do and why>".into()
            });
            format!(
                "Before acting, get a second opinion: call the gemini server's `thinkdeep` tool with \
                 {{\"current_analysis\": {}}} (add the relevant `files`). Compare Gemini's answer with your plan, say \
                 where it changes your mind and where it does not, and continue with the revised plan.",
                quoted(plan)
            )
        }
        "challenge" => format!(
            "Do not agree with this claim yet: {}. Call the gemini server's `chat` tool asking Gemini for the \
             strongest case against it (counter-examples, hidden assumptions, what would have to be true), with the \
             relevant `files`. Then weigh both sides and say whether the claim holds, holds with conditions, or \
             fails — with the evidence.",
            quoted(get("claim").unwrap_or_default())
        ),
        "security-audit" => format!(
            "Call the gemini server's `analyze` tool with {{\"files\": {}, \"question\": \"Audit this code for \
             security problems: injection, authentication and authorisation, secrets, unsafe input handling, path \
             traversal, deserialisation, resource exhaustion. Name file:line and the fix for each.\", \
             \"analysis_type\": \"security\"}}. Then list the problems by severity, confirm each against the code, and \
             fix the confirmed ones.",
            paths()
        ),
        "root-cause" => {
            let files = if get("paths").is_some() {
                format!(", \"files\": {}", paths())
            } else {
                String::new()
            };
            format!(
                "Find the root cause before changing code: call the gemini server's `debug` tool with \
                 {{\"error_description\": {}, \"error_context\": \"<the stack trace, logs and what you tried>\"{files}}}. \
                 Check Gemini's hypotheses against the code, confirm the root cause (a failing test if you can), then fix \
                 it.",
                quoted(get("error").unwrap_or_default())
            )
        }
        _ => unreachable!("every workflow is rendered above"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_workflow_renders_and_names_its_tool() {
        for (w, tool) in WORKFLOWS.iter().zip([
            "precommit",
            "codereview",
            "thinkdeep",
            "chat",
            "analyze",
            "debug",
        ]) {
            let mut a = BTreeMap::new();
            for arg in w.arguments {
                a.insert(arg.name.to_string(), "src/lib.rs".to_string());
            }
            let text = render(w.name, &a).unwrap();
            assert!(text.contains(&format!("`{tool}`")), "{}: {text}", w.name);
        }
    }

    #[test]
    fn missing_unknown_and_blank_arguments_are_named() {
        let e = render("review-code", &args(&[])).unwrap_err();
        assert_eq!(e.field(), Some("paths"));
        let e = render("review-code", &args(&[("paths", "  ")])).unwrap_err();
        assert_eq!(e.field(), Some("paths"));
        let e = render("challenge", &args(&[("claim", "x"), ("extra", "y")])).unwrap_err();
        assert_eq!(e.field(), Some("extra"));
        let e = render("nope", &args(&[])).unwrap_err();
        assert!(e.to_string().contains("review-changes"), "{e}");
    }

    #[test]
    fn arguments_are_quoted_as_json() {
        let text = render(
            "review-changes",
            &args(&[("goal", "say \"hi\""), ("compare_to", "main")]),
        )
        .unwrap();
        assert!(
            text.contains(
                r#"{"path": ".", "original_request": "say \"hi\"", "compare_to": "main"}"#
            ),
            "{text}"
        );
        let text = render("security-audit", &args(&[("paths", "src/a.rs, src/b")])).unwrap();
        assert!(text.contains(r#"["src/a.rs", "src/b"]"#), "{text}");
    }
}

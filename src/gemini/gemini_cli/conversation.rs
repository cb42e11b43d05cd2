//! What both Gemini CLI backends send: the conversation as one prompt text ([`render_prompt`];
//! the CLI keeps no history of ours) and the system prompt with the answer format the CLI has no
//! flag for ([`system_prompt`]).

use crate::gemini::vocabulary::{GenerateRequest, Message, Part, Role};

/// The conversation as one prompt text. A single message is sent as it is; a longer
/// conversation is framed with one marker line per message, so the model can tell the turns
/// apart and knows which request to answer.
pub fn render_prompt(contents: &[Message]) -> String {
    let text_of = |m: &Message| {
        m.parts
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(t.as_str()),
                Part::Image { .. } | Part::Recorded(_) | Part::FunctionResponse { .. } => None,
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    };
    match contents {
        [] => String::new(),
        [only] => text_of(only),
        [earlier @ .., last] => {
            let mut out = String::from(
                "This conversation continues. Its earlier messages follow, oldest first, each under a \
                 `=== … ===` marker line; answer the new request at the end.\n",
            );
            let mut turn = 0;
            for m in earlier {
                let who = match m.role {
                    Role::User => {
                        turn += 1;
                        "user"
                    }
                    Role::Model => "you (Gemini)",
                };
                out.push_str(&format!("\n=== turn {} · {who} ===\n", turn.max(1)));
                out.push_str(&text_of(m));
                out.push('\n');
            }
            out.push_str("\n=== the new request · user ===\n");
            out.push_str(&text_of(last));
            out
        }
    }
}

/// The system prompt, with the JSON answer format stated when JSON mode was asked for (the CLI
/// has no flag for a response schema).
pub fn system_prompt(req: &GenerateRequest) -> String {
    let mut s = req.system_instruction.clone();
    if let Some(schema) = &req.response_schema {
        let schema = serde_json::to_string_pretty(schema).unwrap_or_else(|_| schema.to_string());
        s.push_str(
            "\n\n# Answer format\n\nAnswer with exactly one JSON object and nothing else: no prose before or after \
             it, no Markdown fences. The object must match this JSON Schema:\n\n",
        );
        s.push_str(&schema);
        s.push('\n');
    }
    s
}

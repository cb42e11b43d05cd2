//! Questions inside the call (MCP 2026-07-28 multi-round-trip requests, SEP-2322). When Gemini
//! answers that it needs more files (a reply with status `requires_clarification` naming
//! `files_needed`) and the client accepts form elicitation, the call does not end with that
//! reply: it ends with an `input_required` result asking the user which of the named files to
//! send. The client makes the same call again with the answer (`inputResponses`) and the
//! `requestState` it was given; the call then continues the thread Gemini's question opened, with
//! the chosen files added to `files`, so Gemini's next request holds them. Declined, cancelled
//! or with nothing chosen, the call answers with the reply it would have given without asking.
//!
//! A client that accepts no elicitation, speaks an earlier revision, or runs the call as a task,
//! gets today's reply: its text names the files and the `continuation_id` to call again with.
//!
//! The `requestState` is the client's to hold and echo, so it is read as input like any other:
//! the files it names are only offered (what is sent passes the sandbox and the secret rules as
//! any `files` entry does), the thread it names is continued only by its owner, and the reply
//! it carries is the caller's own. Nothing in it is trusted that the caller could not pass as
//! arguments; a state that does not decode, or names another tool, is refused as a bad param.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolResponse, CallToolResult, ElicitationAction, InputRequest, InputRequests,
    InputRequiredResult, InputResponses, JsonObject, ProtocolVersion,
};
use rmcp::service::RequestContext;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The key of the one input request a clarification makes.
pub const FILES: &str = "files";
/// The largest `requestState` made: a clarification whose reply is larger is not asked
/// inside the call (it is answered as today).
const MAX_STATE_CHARS: usize = 64 * 1024;
/// The state's layout version.
const VERSION: u32 = 1;

/// What a clarification round carries from one call to the next (the `requestState`).
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Asked {
    v: u32,
    /// The tool the call was made to.
    tool: String,
    /// The thread Gemini's question was saved in.
    thread: String,
    /// The files Gemini asked for, as it named them.
    files: Vec<String>,
    /// The reply the call gave before asking (what a declined question answers with).
    reply: Value,
}

/// Whether a call may ask its client a question inside the call: the request speaks
/// 2026-07-28 or later, declares form elicitation, and is not run as a task (a task's reply is
/// read later by polling, where no question can be answered).
pub fn may_ask(ctx: &RequestContext<RoleServer>) -> bool {
    let modern = ctx
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
    let in_task = ctx.extensions.get::<super::tasks::StatusLine>().is_some();
    let elicits_forms = ctx
        .client_capabilities()
        .and_then(|c| c.elicitation)
        // A client that declares `elicitation: {}` supports forms (the 2025-11-25 rule).
        .is_some_and(|e| e.form.is_some() || e.url.is_none());
    modern && elicits_forms && !in_task
}

/// The answer of a later round: what to do with the call's arguments before it runs.
pub enum Answer {
    /// Run the call on these arguments (the thread continued, the chosen files added).
    Continue(JsonObject),
    /// Answer with this result, without calling Gemini (the question was declined).
    Reply(CallToolResult),
}

/// Reads a round's `requestState` and `inputResponses` for `tool`; a first round (neither is
/// present) runs on its arguments as they are.
pub fn answer(
    tool: &str,
    mut args: JsonObject,
    state: Option<&str>,
    responses: Option<&InputResponses>,
) -> Result<Answer, ErrorData> {
    let Some(state) = state else {
        if responses.is_some_and(|r| !r.is_empty()) {
            return Err(bad(
                "inputResponses",
                "answers were sent without the `requestState` of the round they answer",
            ));
        }
        return Ok(Answer::Continue(args));
    };
    let asked = decode(state)?;
    if asked.tool != tool {
        return Err(bad(
            "requestState",
            &format!(
                "it belongs to a call of `{}`, not `{}`",
                crate::echo::echo(&asked.tool),
                crate::echo::echo(tool)
            ),
        ));
    }
    let Some(response) = responses.and_then(|r| r.get(FILES)) else {
        return Err(bad(
            "inputResponses",
            &format!("the answer to `{FILES}` (the files Gemini asked for) is missing"),
        ));
    };
    let response: rmcp::model::ElicitResult = serde_json::from_value(response.clone())
        .map_err(|e| bad(&format!("inputResponses.{FILES}"), &e.to_string()))?;
    let chosen = match (response.action, response.content) {
        (ElicitationAction::Accept, Some(content)) => chosen(&asked, &content)?,
        (ElicitationAction::Accept, None) => {
            return Err(bad(
                &format!("inputResponses.{FILES}"),
                "an accepted answer carries `content` with the chosen `files`",
            ));
        }
        _ => Vec::new(),
    };
    if chosen.is_empty() {
        let reply = serde_json::from_value::<CallToolResult>(asked.reply)
            .map_err(|e| bad("requestState", &format!("its reply does not read: {e}")))?;
        return Ok(Answer::Reply(reply));
    }
    let files = args
        .entry("files")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !files.is_array() {
        *files = Value::Array(Vec::new());
    }
    if let Value::Array(list) = files {
        for path in chosen {
            if !list.iter().any(|p| p.as_str() == Some(path.as_str())) {
                list.push(Value::String(path));
            }
        }
    }
    args.insert("continuation_id".into(), Value::String(asked.thread));
    Ok(Answer::Continue(args))
}

/// The files an accepted answer chose: each one Gemini asked for.
fn chosen(asked: &Asked, content: &Value) -> Result<Vec<String>, ErrorData> {
    let field = format!("inputResponses.{FILES}.content.files");
    let Some(list) = content.get("files").and_then(Value::as_array) else {
        return Err(bad(&field, "an array of the requested paths is required"));
    };
    let mut out = Vec::new();
    for item in list {
        let Some(path) = item.as_str() else {
            return Err(bad(&field, "each entry is a path (a string)"));
        };
        if !asked.files.iter().any(|f| f == path) {
            return Err(bad(
                &field,
                &format!(
                    "{} is not one of the files Gemini asked for ({})",
                    crate::echo::echo(path),
                    asked.files.join(", ")
                ),
            ));
        }
        if !out.iter().any(|p: &String| p == path) {
            out.push(path.to_string());
        }
    }
    Ok(out)
}

/// The question to ask instead of ending the call with `result`, when `result` is a reply that
/// asks for files and carries the thread to continue; `None` otherwise.
pub fn question(tool: &str, result: &CallToolResult) -> Option<CallToolResponse> {
    let structured = result.structured_content.as_ref()?;
    if result.is_error == Some(true)
        || structured.get("status").and_then(Value::as_str) != Some("requires_clarification")
    {
        return None;
    }
    let thread = structured.get("continuation_id")?.as_str()?.to_string();
    let clarification = structured.get("clarification")?;
    let ask = clarification
        .get("question")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let files: Vec<String> = clarification
        .get("files_needed")?
        .as_array()?
        .iter()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect();
    if files.is_empty() {
        return None;
    }
    let asked = Asked {
        v: VERSION,
        tool: tool.to_string(),
        thread,
        files,
        reply: serde_json::to_value(result).ok()?,
    };
    let state = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&asked).ok()?);
    if state.len() > MAX_STATE_CHARS {
        return None;
    }
    let request: InputRequest = serde_json::from_value(elicitation(ask, &asked.files)).ok()?;
    let mut requests = InputRequests::new();
    requests.insert(FILES.into(), request);
    Some(CallToolResponse::InputRequired(InputRequiredResult::new(
        Some(requests),
        Some(state),
    )))
}

/// The form that asks which of `files` to send.
fn elicitation(ask: &str, files: &[String]) -> Value {
    let message = format!(
        "Gemini needs more before it can answer: {ask}\n\nIt asks for {}: {}. Choose the ones to send; \
         they pass the same sandbox and secret rules as any file. Decline to get Gemini's question \
         back instead.",
        if files.len() == 1 { "this file" } else { "these files" },
        files.join(", ")
    );
    json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "files": {
                        "type": "array",
                        "title": "Files to send to Gemini",
                        "description": "The files Gemini asked for; leave out any you do not want sent.",
                        "items": {"type": "string", "enum": files},
                        "default": files,
                    }
                },
                "required": ["files"]
            }
        }
    })
}

fn decode(state: &str) -> Result<Asked, ErrorData> {
    let bytes = URL_SAFE_NO_PAD
        .decode(state.trim())
        .map_err(|_| bad("requestState", "it is not the state this server gave"))?;
    let asked: Asked = serde_json::from_slice(&bytes)
        .map_err(|_| bad("requestState", "it is not the state this server gave"))?;
    if asked.v != VERSION {
        return Err(bad(
            "requestState",
            "it was made by another version of this server",
        ));
    }
    Ok(asked)
}

fn bad(field: &str, message: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("invalid `{field}`: {message}; call the tool again without `requestState` and `inputResponses`"),
        Some(json!({ "field": field })),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;

    fn clarification(files: &[&str]) -> CallToolResult {
        let mut r = CallToolResult::success(vec![ContentBlock::text("Gemini needs more")]);
        r.structured_content = Some(json!({
            "status": "requires_clarification",
            "clarification": {"question": "Which store?", "files_needed": files},
            "continuation_id": "7d1c3e52-0f3c-4f0e-9a55-0a3b1c2d3e4f",
        }));
        r
    }

    fn state_of(response: &CallToolResponse) -> (String, Value) {
        let CallToolResponse::InputRequired(r) = response else {
            panic!("not input_required: {response:?}")
        };
        let wire = serde_json::to_value(r).unwrap();
        (r.request_state.clone().unwrap(), wire)
    }

    fn accept(files: &[&str]) -> InputResponses {
        let mut m = InputResponses::new();
        m.insert(
            FILES.into(),
            json!({"action": "accept", "content": {"files": files}}),
        );
        m
    }

    #[test]
    fn a_reply_asking_for_files_becomes_a_form_naming_them() {
        let q = question("codereview", &clarification(&["src/db.rs", "src/pool.rs"])).unwrap();
        let (_, wire) = state_of(&q);
        assert_eq!(wire["resultType"], "input_required");
        let form = &wire["inputRequests"]["files"];
        assert_eq!(form["method"], "elicitation/create");
        assert_eq!(form["params"]["mode"], "form");
        let message = form["params"]["message"].as_str().unwrap();
        assert!(message.contains("Which store?") && message.contains("src/db.rs, src/pool.rs"));
        assert_eq!(
            form["params"]["requestedSchema"]["properties"]["files"]["items"]["enum"],
            json!(["src/db.rs", "src/pool.rs"])
        );
    }

    #[test]
    fn only_a_clarification_with_files_and_a_thread_is_asked() {
        assert!(question("chat", &clarification(&[])).is_none());
        let mut no_thread = clarification(&["a.rs"]);
        no_thread
            .structured_content
            .as_mut()
            .unwrap()
            .as_object_mut()
            .unwrap()
            .remove("continuation_id");
        assert!(question("chat", &no_thread).is_none());
        let mut answered = clarification(&["a.rs"]);
        answered.structured_content.as_mut().unwrap()["status"] = json!("success");
        assert!(question("chat", &answered).is_none());
    }

    #[test]
    fn an_accepted_answer_continues_the_thread_with_the_chosen_files() {
        let q = question("codereview", &clarification(&["src/db.rs", "src/pool.rs"])).unwrap();
        let (state, _) = state_of(&q);
        let mut args = JsonObject::new();
        args.insert("files".into(), json!(["src/main.rs"]));
        args.insert("context".into(), json!("review"));
        let Answer::Continue(args) =
            answer("codereview", args, Some(&state), Some(&accept(&["src/pool.rs"]))).unwrap()
        else {
            panic!("not continued")
        };
        assert_eq!(args["files"], json!(["src/main.rs", "src/pool.rs"]));
        assert_eq!(
            args["continuation_id"],
            "7d1c3e52-0f3c-4f0e-9a55-0a3b1c2d3e4f"
        );
        assert_eq!(args["context"], "review");
    }

    #[test]
    fn a_declined_or_empty_answer_gives_the_reply_as_it_was() {
        let original = clarification(&["src/db.rs"]);
        let (state, _) = state_of(&question("chat", &original).unwrap());
        for response in [
            json!({"action": "decline"}),
            json!({"action": "cancel"}),
            json!({"action": "accept", "content": {"files": []}}),
        ] {
            let mut m = InputResponses::new();
            m.insert(FILES.into(), response.clone());
            let Answer::Reply(r) =
                answer("chat", JsonObject::new(), Some(&state), Some(&m)).unwrap()
            else {
                panic!("{response}: not the reply")
            };
            assert_eq!(
                serde_json::to_value(&r).unwrap(),
                serde_json::to_value(&original).unwrap()
            );
        }
    }

    #[test]
    fn answers_that_do_not_fit_the_question_are_refused_naming_the_field() {
        let (state, _) = state_of(&question("chat", &clarification(&["src/db.rs"])).unwrap());
        let cases: Vec<(&str, Option<&str>, Option<InputResponses>, &str)> = vec![
            ("chat", Some(&state), Some(accept(&["/etc/passwd"])), "inputResponses.files.content.files"),
            ("chat", Some(&state), Some(InputResponses::new()), "`inputResponses`"),
            ("debug", Some(&state), Some(accept(&["src/db.rs"])), "`requestState`"),
            ("chat", Some("not-a-state!"), Some(accept(&["src/db.rs"])), "`requestState`"),
            ("chat", None, Some(accept(&["src/db.rs"])), "`inputResponses`"),
        ];
        for (tool, state, responses, field) in cases {
            let Err(e) = answer(tool, JsonObject::new(), state, responses.as_ref()) else {
                panic!("{tool} {state:?}: accepted")
            };
            assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS);
            assert!(e.message.contains(field), "{field} in {}", e.message);
        }
        let mut args = JsonObject::new();
        args.insert("prompt".into(), json!("hi"));
        let Answer::Continue(first) = answer("chat", args.clone(), None, None).unwrap() else {
            panic!("a first round is not run as it is")
        };
        assert_eq!(first, args);
    }
}

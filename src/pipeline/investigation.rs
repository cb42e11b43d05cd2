//! The investigation loop, a step of the pipeline: Gemini's function calls are answered by the
//! read-only project tools ([`crate::explore`]) until Gemini answers in text or a limit stops it.
//!
//! Each request is the one before with the model's turn (replayed exactly as received, thought
//! signatures included) and the function responses appended, so every request begins with the
//! bytes of the previous one (Gemini's implicit prefix cache). The calls of one turn run at the
//! same time. When a limit is reached (steps, the token budget of the results, the deadline),
//! Gemini is asked once more with function calling off for its best answer from what it has.
//!
//! Gemini 2.x refuses function calling in JSON mode (a 400; Gemini 3 takes both): on those
//! models a structured answer (a review) is explored for in text, then asked for in one last
//! request without tools, holding a transcript of the steps (calls and results as text: no
//! function parts without their declarations) and the text answer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::meter::Meter;
use crate::collector::tokens;
use crate::explore::{Explorer, Outcome};
use crate::gemini::{
    CallContext, FunctionCall, Functions, Gemini, GeminiError, GenerateRequest, GenerateResponse,
    Message, Part, Role, Usage,
};
use crate::reply::investigation_report::{Investigation, Step, StopReason};
use crate::tools::ToolError;

/// Least room, in tokens, worth cutting a result into; with less the result is withheld.
const MIN_CUT_TOKENS: u64 = 150;
/// Longest string of a call's arguments shown in a step, in characters.
pub const ARGUMENT_CHARS: usize = 200;
/// Longest arguments shown in a step, as JSON, in characters.
pub const ARGUMENTS_CHARS: usize = 1_000;
/// Longest outcome line of a step, in characters.
pub const OUTCOME_CHARS: usize = 300;

/// What bounds one investigation.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Function calls, all turns together.
    pub max_steps: u32,
    /// Tokens of tool results sent to Gemini, all steps together.
    pub token_budget: u64,
    /// Time after which no new step starts.
    pub deadline: Duration,
    /// The time to live of the context caches of the investigation's growing front
    /// (`cache::for_step`); `None`: none is made.
    pub cache: Option<Duration>,
}

/// What Gemini is told when `stop`, a limit, ends the investigation.
fn instruction(stop: StopReason, limits: &Limits) -> String {
    let limit = match stop {
        StopReason::Answered => return String::new(),
        StopReason::MaxSteps => format!("the step limit ({} tool calls)", limits.max_steps),
        StopReason::TokenBudget => format!(
            "the token budget for tool results ({} tokens)",
            limits.token_budget
        ),
        StopReason::Deadline => format!("the time limit ({:?})", limits.deadline),
    };
    format!(
        "The investigation has reached {limit}; no more tool calls are possible. Answer the task \
         now from what you have found, citing path:line, and say what you could not check."
    )
}

/// Runs the loop from `req` (the call's first request) to Gemini's answer. Each request passes
/// `meter` (the daily caps) on its own.
pub async fn run(
    gemini: &Arc<Gemini>,
    meter: &Meter,
    explorer: Arc<Explorer>,
    mut req: GenerateRequest,
    limits: Limits,
    ctx: &CallContext,
) -> Result<(GenerateResponse, Investigation), ToolError> {
    let started = Instant::now();
    req.functions = Some(Functions {
        declarations: Explorer::declarations(),
        allow: true,
    });
    let structured = if req.model.calls_functions_in_json_mode() {
        None
    } else {
        req.response_schema.take()
    };
    let mut inv = Investigation {
        steps: Vec::new(),
        files_read: Vec::new(),
        stop: StopReason::Answered,
        usage: Usage::default(),
        requests: 0,
        read: Vec::new(),
    };
    let mut result_tokens = 0u64;
    let mut forced = false;
    // The cache of the front, deleted when the investigation ends, however it ends.
    let mut held = super::cache::StepCache::new(gemini.clone());
    loop {
        if ctx.cancel.is_cancelled() {
            return Err(GeminiError::Cancelled.into());
        }
        let remaining = limits.deadline.saturating_sub(started.elapsed());
        inv.requests += 1;
        match limits.cache {
            Some(ttl) if !forced => held.attach(meter, &mut req, inv.requests, ttl, ctx).await,
            // The forced answer changes `toolConfig`, which no request beside a cache may send.
            _ => req.cache = None,
        }
        let answer = if forced {
            meter.generate(gemini, req.clone(), ctx).await?
        } else {
            match tokio::time::timeout(remaining, meter.generate(gemini, req.clone(), ctx)).await {
                Ok(answer) => answer?,
                Err(_) => {
                    ctx.report("the investigation's time is up; asking for the answer");
                    force(&mut req, &mut inv, StopReason::Deadline, &limits);
                    forced = true;
                    continue;
                }
            }
        };
        inv.usage += answer.usage;
        if answer.calls.is_empty() || forced {
            let Some(schema) = structured else {
                return Ok((answer, inv));
            };
            ctx.report("asking for the structured answer");
            let mut req = structure(req, &answer, schema);
            req.cache = None;
            inv.requests += 1;
            let answer = meter.generate(gemini, req, ctx).await?;
            inv.usage += answer.usage;
            return Ok((answer, inv));
        }
        req.contents.push(Message {
            role: Role::Model,
            parts: answer.turn.clone(),
        });
        let (responses, budget_hit) = answer_calls(
            &explorer,
            &answer.calls,
            &mut inv,
            &limits,
            result_tokens,
            ctx,
        )
        .await;
        result_tokens += inv
            .steps
            .iter()
            .rev()
            .take(answer.calls.len())
            .map(|s| s.tokens)
            .sum::<u64>();
        req.contents.push(Message {
            role: Role::User,
            parts: responses,
        });
        let stop = if inv.steps.len() as u32 >= limits.max_steps {
            Some(StopReason::MaxSteps)
        } else if budget_hit || result_tokens >= limits.token_budget {
            Some(StopReason::TokenBudget)
        } else if started.elapsed() >= limits.deadline {
            Some(StopReason::Deadline)
        } else {
            None
        };
        if let Some(stop) = stop {
            ctx.report(format!("{}: asking for the answer", stop.as_str()));
            force(&mut req, &mut inv, stop, &limits);
            forced = true;
        }
    }
}

/// What Gemini is told in the last request of an investigation on a model that takes no
/// function calling in JSON mode.
const STRUCTURE: &str = "Now give your answer above in the JSON form the response schema asks for. Keep \
every file path, line number and quoted line exactly as found in the files read above. There are no tools \
in this request.";

/// The request for the structured answer after `prose`, the investigation's text answer to
/// `req`: no tools, the response schema, the conversation with its function calls and results
/// written out as text, then the answer and [`STRUCTURE`].
fn structure(req: GenerateRequest, prose: &GenerateResponse, schema: Value) -> GenerateRequest {
    let mut contents: Vec<Message> = req
        .contents
        .iter()
        .map(|m| Message {
            role: m.role,
            parts: m.parts.iter().filter_map(transcribed).collect(),
        })
        .filter(|m| !m.parts.is_empty())
        .collect();
    contents.push(Message::model(prose.text.clone()));
    contents.push(Message::user(STRUCTURE));
    GenerateRequest {
        contents,
        functions: None,
        response_schema: Some(schema),
        ..req
    }
}

/// A part as text for a request without tools: a function call or result written out, a
/// model's recorded text as it was, a part with nothing to read (a lone signature) dropped.
fn transcribed(part: &Part) -> Option<Part> {
    match part {
        Part::Recorded(raw) => {
            if let Some(call) = raw.get("functionCall") {
                let name = call.get("name").and_then(Value::as_str).unwrap_or("?");
                let args = call.get("args").cloned().unwrap_or(Value::Null);
                return Some(Part::Text(format!("(I called {name} with {args}.)")));
            }
            raw.get("text")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(|t| Part::Text(t.to_string()))
        }
        Part::FunctionResponse { name, response, .. } => {
            let (what, text) = match (response.get("output"), response.get("error")) {
                (Some(o), _) => ("returned", o),
                (None, Some(e)) => ("failed", e),
                (None, None) => ("returned", response),
            };
            let text = text
                .as_str()
                .map_or_else(|| text.to_string(), str::to_string);
            Some(Part::Text(format!("({name} {what}:)\n{text}")))
        }
        other => Some(other.clone()),
    }
}

/// Turns function calling off and tells Gemini why, in the last user turn (appended, so the
/// request still begins with the previous one's contents).
fn force(req: &mut GenerateRequest, inv: &mut Investigation, stop: StopReason, limits: &Limits) {
    inv.stop = stop;
    if let Some(f) = req.functions.as_mut() {
        f.allow = false;
    }
    let text = Part::Text(instruction(stop, limits));
    match req.contents.last_mut() {
        Some(m) if m.role == Role::User => m.parts.push(text),
        _ => req.contents.push(Message {
            role: Role::User,
            parts: vec![text],
        }),
    }
}

/// Runs the calls of one turn at the same time (those within the step limit; the rest are
/// answered as not run), keeps their results within the token budget (`spent` before this
/// turn), records each as a step, reports it, and returns the function responses in the order
/// of the calls, and whether the budget stopped a result.
async fn answer_calls(
    explorer: &Arc<Explorer>,
    calls: &[FunctionCall],
    inv: &mut Investigation,
    limits: &Limits,
    spent: u64,
    ctx: &CallContext,
) -> (Vec<Part>, bool) {
    let room = (limits.max_steps as usize).saturating_sub(inv.steps.len());
    let mut outcomes = run_calls(explorer, calls, room).await;
    let budget_hit = keep_within_budget(explorer, calls, &mut outcomes, limits, spent).await;
    let mut parts = Vec::with_capacity(calls.len());
    for (call, (outcome, step_tokens)) in calls.iter().zip(outcomes) {
        if let Some(frame) = &outcome.read {
            if !inv.files_read.contains(&frame.path) {
                inv.files_read.push(frame.path.clone());
            }
            inv.read.push((outcome.text.clone(), frame.clone()));
        }
        let step = Step {
            tool: shown(&call.name, OUTCOME_CHARS),
            arguments: shown_arguments(&call.args),
            outcome: shown(&outcome.summary, OUTCOME_CHARS),
            tokens: step_tokens,
        };
        ctx.step(step.outcome.clone());
        inv.steps.push(step);
        let key = if outcome.ok { "output" } else { "error" };
        parts.push(Part::FunctionResponse {
            id: call.id.clone(),
            name: call.name.clone(),
            response: json!({ key: outcome.text }),
        });
    }
    (parts, budget_hit)
}

/// The first `room` calls run at the same time, off the runtime; the rest answered as not run.
/// Each outcome with the tokens of its text.
async fn run_calls(
    explorer: &Arc<Explorer>,
    calls: &[FunctionCall],
    room: usize,
) -> Vec<(Outcome, u64)> {
    let running: Vec<_> = calls
        .iter()
        .take(room)
        .map(|call| {
            let explorer = explorer.clone();
            let (name, args) = (call.name.clone(), call.args.clone());
            // Reading and counting are blocking work: off the runtime, one thread per call.
            tokio::task::spawn_blocking(move || {
                let outcome = explorer.execute(&name, &args);
                let tokens = tokens::count(&outcome.text);
                (outcome, tokens)
            })
        })
        .collect();
    let mut outcomes: Vec<(Outcome, u64)> = Vec::with_capacity(calls.len());
    for (call, task) in calls.iter().zip(futures::future::join_all(running).await) {
        outcomes.push(task.unwrap_or_else(|e| {
            let text = format!(
                "The call {} failed inside the server: {e}. Try another way.",
                shown(&call.name, OUTCOME_CHARS)
            );
            let summary = format!("{} — failed", call.name);
            (refused(summary, text), 0)
        }));
    }
    for call in calls.iter().skip(outcomes.len()) {
        let text = "Not run: the investigation's step limit was reached.";
        let summary = format!("{} — not run (step limit)", call.name);
        outcomes.push((refused(summary, text.into()), 0));
    }
    outcomes
}

/// Keeps the results, in the order of the calls, within the budget: the result that would pass
/// it is cut to the room left (saying so, and what to ask for instead), or withheld when too
/// little room is left; the results after it are withheld. The results sent never pass the
/// budget. Returns whether a result was cut or withheld.
async fn keep_within_budget(
    explorer: &Arc<Explorer>,
    calls: &[FunctionCall],
    outcomes: &mut [(Outcome, u64)],
    limits: &Limits,
    mut spent: u64,
) -> bool {
    let budget = limits.token_budget;
    let mut hit = false;
    for (call, (outcome, tokens)) in calls.iter().zip(outcomes.iter_mut()) {
        let room = budget.saturating_sub(spent);
        if *tokens > 0 && (hit || *tokens > room) {
            let cut = if hit {
                None
            } else {
                let (explorer, call, whole) = (explorer.clone(), call.clone(), outcome.clone());
                tokio::task::spawn_blocking(move || {
                    cut_to_fit(&explorer, &call, whole, room, budget)
                })
                .await
                .ok()
                .flatten()
            };
            hit = true;
            (*outcome, *tokens) = cut.unwrap_or_else(|| {
                let text = format!(
                    "Not sent: the investigation's results have reached their budget of {budget} tokens. \
                     Answer from what you have, and say what you could not read."
                );
                let summary = format!("{} — not sent (token budget)", call.name);
                (refused(summary, text), 0)
            });
        }
        spent += *tokens;
    }
    hit
}

/// The result of `call` cut to at most `room` tokens, with a line saying it was cut to fit the
/// budget and what to ask for instead; `None` when too little room is left to be worth it.
/// A read is run again with a smaller cap (so it ends on a whole line and says where to read
/// on); other results are cut on a line. Blocking.
fn cut_to_fit(
    explorer: &Explorer,
    call: &FunctionCall,
    whole: Outcome,
    room: u64,
    budget: u64,
) -> Option<(Outcome, u64)> {
    let note = format!(
        "(This result was cut to fit the investigation's token budget of {budget} tokens for all \
         results: the rest was not sent. Ask for a narrower range or a more specific search.)\n"
    );
    if room < MIN_CUT_TOKENS || !whole.ok {
        return None;
    }
    let target = room.checked_sub(tokens::count(&note))?;
    let (mut chars, mut tokens_now) = (whole.text.len(), tokens::count(&whole.text));
    for _ in 0..4 {
        // Characters in proportion to the tokens wanted, with a margin for uneven text.
        chars = ((chars as f64) * (target as f64) / (tokens_now.max(1) as f64) * 0.9) as usize;
        let mut cut = if call.name == "read_file" {
            explorer.execute_within(&call.name, &call.args, chars)
        } else {
            whole.clone().capped(chars)
        };
        cut.text.push_str(&note);
        tokens_now = tokens::count(&cut.text);
        if tokens_now <= room && cut.ok {
            cut.summary = format!("{} — cut to fit the token budget", cut.summary);
            return Some((cut, tokens_now));
        }
        chars = cut.text.len();
    }
    None
}

/// `text` on one line, at most `max` characters, marked where it was cut.
fn shown(text: &str, max: usize) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let total = one_line.chars().count();
    if total <= max {
        return one_line;
    }
    let kept: String = one_line.chars().take(max).collect();
    format!("{kept}… [cut: {total} characters]")
}

/// A call's arguments as a step shows them: every string at most [`ARGUMENT_CHARS`], and the
/// whole at most [`ARGUMENTS_CHARS`] as JSON (else one string saying how long they were), each
/// cut marked. What Gemini writes cannot crowd the answer out of the reply.
pub fn shown_arguments(args: &Value) -> Value {
    fn cap_strings(v: &Value) -> Value {
        match v {
            Value::String(s) if s.chars().count() > ARGUMENT_CHARS => {
                let kept: String = s.chars().take(ARGUMENT_CHARS).collect();
                Value::String(format!("{kept}… [cut: {} characters]", s.chars().count()))
            }
            Value::Array(a) => Value::Array(a.iter().map(cap_strings).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, v)| (shown(k, ARGUMENT_CHARS), cap_strings(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    let capped = cap_strings(args);
    let json = capped.to_string();
    if json.chars().count() <= ARGUMENTS_CHARS {
        return capped;
    }
    Value::String(format!(
        "{}… [arguments cut: {} characters of JSON]",
        json.chars().take(ARGUMENTS_CHARS / 2).collect::<String>(),
        args.to_string().chars().count()
    ))
}

fn refused(summary: String, text: String) -> Outcome {
    Outcome {
        text,
        summary,
        ok: false,
        read: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_show_arguments_and_outcomes_bounded_and_marked() {
        let huge = "x".repeat(60_000);
        let shown_args = shown_arguments(&json!({"pattern": huge, "path": "src"}));
        let pattern = shown_args["pattern"].as_str().unwrap();
        assert!(pattern.ends_with("… [cut: 60000 characters]"), "{pattern}");
        assert_eq!(pattern.chars().count(), ARGUMENT_CHARS + 25);
        assert_eq!(shown_args["path"], "src");
        // Many strings, each short, but too long together: one marked string.
        let many: serde_json::Map<String, Value> = (0..100)
            .map(|i| (format!("k{i}"), json!("y".repeat(150))))
            .collect();
        let whole = shown_arguments(&Value::Object(many));
        let whole = whole.as_str().unwrap();
        assert!(whole.contains("[arguments cut: "), "{whole}");
        assert!(whole.chars().count() < ARGUMENTS_CHARS);
        // Small arguments are shown as they are.
        let small = json!({"path": "src/lib.rs", "start_line": 3});
        assert_eq!(shown_arguments(&small), small);
        // An outcome is one line, bounded.
        let line = shown(&format!("searched `{huge}\n` — 0 hits"), OUTCOME_CHARS);
        assert!(!line.contains('\n'));
        assert!(line.ends_with("characters]") && line.chars().count() < OUTCOME_CHARS + 40);
        assert_eq!(shown("read a.rs:1–3", OUTCOME_CHARS), "read a.rs:1–3");
    }
}

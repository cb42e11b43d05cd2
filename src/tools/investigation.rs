//! The investigation loop, inside the one pipeline: Gemini's function calls are answered by the
//! read-only project tools ([`crate::explore`]) until Gemini answers in text or a limit stops it.
//!
//! Each request is the one before with the model's turn (replayed exactly as received, thought
//! signatures included) and the function responses appended, so every request begins with the
//! bytes of the previous one (Gemini's implicit prefix cache). The calls of one turn run at the
//! same time. When a limit is reached (steps, the token budget of the results, the deadline),
//! Gemini is asked once more with function calling off for its best answer from what it has.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::collector::tokens;
use crate::explore::{Explorer, Outcome};
use crate::gemini::{
    CallContext, FunctionCall, Functions, Gemini, GeminiError, GenerateRequest, GenerateResponse,
    Message, Part, Role, Usage,
};

/// What bounds one investigation.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Function calls, all turns together.
    pub max_steps: u32,
    /// Tokens of tool results sent to Gemini, all steps together.
    pub token_budget: u64,
    /// Time after which no new step starts.
    pub deadline: Duration,
}

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

    /// What Gemini is told when a limit ends the investigation.
    fn instruction(self, limits: &Limits) -> String {
        let limit = match self {
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
}

/// Runs the loop from `req` (the call's first request) to Gemini's answer.
pub async fn run(
    gemini: &Gemini,
    explorer: Arc<Explorer>,
    mut req: GenerateRequest,
    limits: Limits,
    ctx: &CallContext,
) -> Result<(GenerateResponse, Investigation), GeminiError> {
    let started = Instant::now();
    req.functions = Some(Functions {
        declarations: Explorer::declarations(),
        allow: true,
    });
    let mut inv = Investigation {
        steps: Vec::new(),
        files_read: Vec::new(),
        stop: StopReason::Answered,
        usage: Usage::default(),
        requests: 0,
    };
    let mut result_tokens = 0u64;
    let mut forced = false;
    loop {
        if ctx.cancel.is_cancelled() {
            return Err(GeminiError::Cancelled);
        }
        let remaining = limits.deadline.saturating_sub(started.elapsed());
        inv.requests += 1;
        let answer = if forced {
            gemini.generate(req.clone(), ctx).await?
        } else {
            match tokio::time::timeout(remaining, gemini.generate(req.clone(), ctx)).await {
                Ok(answer) => answer?,
                Err(_) => {
                    ctx.report("the investigation's time is up; asking for the answer");
                    force(&mut req, &mut inv, StopReason::Deadline, &limits);
                    forced = true;
                    continue;
                }
            }
        };
        add(&mut inv.usage, answer.usage);
        if answer.calls.is_empty() || forced {
            return Ok((answer, inv));
        }
        req.contents.push(Message {
            role: Role::Model,
            parts: answer.turn.clone(),
        });
        let responses = answer_calls(
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
        } else if result_tokens >= limits.token_budget {
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

/// Turns function calling off and tells Gemini why, in the last user turn (appended, so the
/// request still begins with the previous one's contents).
fn force(req: &mut GenerateRequest, inv: &mut Investigation, stop: StopReason, limits: &Limits) {
    inv.stop = stop;
    if let Some(f) = req.functions.as_mut() {
        f.allow = false;
    }
    let text = Part::Text(stop.instruction(limits));
    match req.contents.last_mut() {
        Some(m) if m.role == Role::User => m.parts.push(text),
        _ => req.contents.push(Message {
            role: Role::User,
            parts: vec![text],
        }),
    }
}

/// Runs the calls of one turn at the same time (those within the step limit; the rest are
/// answered as not run), records each as a step, reports it, and returns the function responses
/// in the order of the calls. Once the results, in order, have spent the token budget (`spent`
/// before this turn), the later ones are withheld: the budget is passed by one result at most.
async fn answer_calls(
    explorer: &Arc<Explorer>,
    calls: &[FunctionCall],
    inv: &mut Investigation,
    limits: &Limits,
    mut spent: u64,
    ctx: &CallContext,
) -> Vec<Part> {
    let room = (limits.max_steps as usize).saturating_sub(inv.steps.len());
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
                call.name
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
    for (call, (outcome, tokens)) in calls.iter().zip(outcomes.iter_mut()) {
        if spent >= limits.token_budget && *tokens > 0 {
            let text = format!(
                "Not sent: the investigation's results have reached their budget of {} tokens.",
                limits.token_budget
            );
            let summary = format!("{} — not sent (token budget)", call.name);
            *outcome = refused(summary, text);
            *tokens = 0;
        }
        spent += *tokens;
    }
    let mut parts = Vec::with_capacity(calls.len());
    for (call, (outcome, step_tokens)) in calls.iter().zip(outcomes) {
        if let Some(path) = &outcome.read
            && !inv.files_read.contains(path)
        {
            inv.files_read.push(path.clone());
        }
        ctx.step(outcome.summary.clone());
        inv.steps.push(Step {
            tool: call.name.clone(),
            arguments: call.args.clone(),
            outcome: outcome.summary,
            tokens: step_tokens,
        });
        let key = if outcome.ok { "output" } else { "error" };
        parts.push(Part::FunctionResponse {
            id: call.id.clone(),
            name: call.name.clone(),
            response: json!({ key: outcome.text }),
        });
    }
    parts
}

fn refused(summary: String, text: String) -> Outcome {
    Outcome {
        text,
        summary,
        ok: false,
        read: None,
    }
}

fn add(sum: &mut Usage, u: Usage) {
    sum.input += u.input;
    sum.output += u.output;
    sum.thinking += u.thinking;
    sum.cached += u.cached;
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

//! What one prompt produced ([`AgentRun`]), folded from the session's updates as they arrive,
//! and the wait for its answer: cancellation sends `session/cancel`, then kills the process.

use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, PromptResponse, SessionId, SessionUpdate, ToolCallStatus,
    ToolKind,
};
use serde::Serialize;
use tokio::sync::mpsc;

use super::rpc::Event;
use super::target::{self, Location, Shown, reported_input};
use super::policy::Decision;
use super::process::Process;
use super::lock;
use crate::collector::Collector;
use crate::gemini::vocabulary::{CallContext, Usage};

/// How long a cancelled prompt may take to stop after `session/cancel` before its process is
/// killed.
const CANCEL_GRACE: Duration = Duration::from_secs(3);

/// One tool call of the agent, as the reply shows it (see `target`: paths as the collector
/// shows them, every string redacted).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentToolCall {
    pub id: String,
    pub title: String,
    /// `read`, `search`, `edit`, `execute`, …
    pub kind: String,
    /// What it reached, in one line: its files (`path:line`) and what it looked for or ran.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub target: String,
    /// The arguments as the agent reported them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<serde_json::Value>,
    /// `pending`, `in_progress`, `completed` or `failed`.
    pub status: String,
    /// Files it touched, as the agent reported them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<Location>,
}

impl AgentToolCall {
    /// The files it touched: those reported, else those its arguments name.
    pub fn files(&self) -> Vec<String> {
        target::reached(&self.locations, self.arguments.as_ref())
            .into_iter()
            .map(|l| l.path)
            .collect()
    }

    fn retarget(&mut self) {
        self.target = target::target(&self.locations, self.arguments.as_ref());
    }
}

/// One entry of the agent's plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanItem {
    pub content: String,
    pub priority: String,
    pub status: String,
}

/// What one prompt produced.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AgentRun {
    /// The agent's messages, all of them.
    pub messages: String,
    /// Its messages since its last tool call: the answer (what it said before a tool call is
    /// narration of what it is about to do).
    pub last_message: String,
    pub thought: String,
    pub tool_calls: Vec<AgentToolCall>,
    pub plan: Vec<PlanItem>,
    /// `end_turn`, `max_tokens`, `max_turn_requests`, `refusal` or `cancelled`.
    pub stop_reason: String,
    pub session_id: String,
    /// Every permission request and our answer.
    pub permissions: Vec<Decision>,
    /// How the session was reached: `new`, `live` or `loaded`.
    pub session: String,
    #[serde(skip)]
    pub usage: Option<Usage>,
}

impl AgentRun {
    /// The agent's stop reason in Gemini's terms (`STOP`, `MAX_TOKENS`), for the reply's "answer
    /// cut" notice.
    pub fn finish_reason(&self) -> String {
        match self.stop_reason.as_str() {
            "end_turn" => "STOP".into(),
            "max_tokens" => "MAX_TOKENS".into(),
            other => other.into(),
        }
    }

    /// The answer: the agent's last message, or all it said when it said nothing after its
    /// last tool call.
    pub fn answer(&self) -> &str {
        if self.last_message.trim().is_empty() {
            &self.messages
        } else {
            &self.last_message
        }
    }
}

/// How a prompt's wait ended.
pub(super) enum Waited {
    Answered(Result<PromptResponse, agent_client_protocol::Error>),
    Cancelled,
    TimedOut,
}

/// Waits for one prompt's answer, folding its updates into the run.
pub(super) struct Waiting {
    pub(super) process: Arc<Process>,
    pub(super) session_id: String,
    pub(super) events: mpsc::UnboundedReceiver<Event>,
    pub(super) ctx: CallContext,
    /// Cancelled when the call is (or its future is dropped).
    pub(super) stop: tokio_util::sync::CancellationToken,
    pub(super) timeout: Duration,
    /// How the calls' paths are shown (none: as reported, redacted).
    pub(super) collector: Option<Arc<Collector>>,
}

impl Waiting {
    /// On `stop` or the deadline: `session/cancel`; an agent that has not stopped
    /// [`CANCEL_GRACE`] later is killed with its process group.
    pub(super) async fn wait(
        mut self,
        sent: agent_client_protocol::v1::SentRequest<PromptResponse>,
        mut run: AgentRun,
    ) -> (AgentRun, Waited) {
        let answer = sent.block_task();
        tokio::pin!(answer);
        let deadline = tokio::time::sleep(self.timeout);
        tokio::pin!(deadline);
        let grace = tokio::time::sleep(Duration::from_secs(86_400 * 365));
        tokio::pin!(grace);
        let mut stopping: Option<Waited> = None;
        let waited = loop {
            tokio::select! {
                r = &mut answer => break match stopping.take() {
                    Some(why) => why,
                    None => Waited::Answered(r),
                },
                Some(event) = self.events.recv() => absorb(&mut run, event, &self.ctx, self.shown()),
                _ = self.stop.cancelled(), if stopping.is_none() => {
                    stopping = Some(Waited::Cancelled);
                    self.cancel(grace.as_mut());
                }
                _ = &mut deadline, if stopping.is_none() => {
                    stopping = Some(Waited::TimedOut);
                    self.cancel(grace.as_mut());
                }
                _ = &mut grace => {
                    tracing::warn!("the Gemini CLI (ACP) did not stop after session/cancel; killing it");
                    self.process.kill();
                    break stopping.take().unwrap_or(Waited::Cancelled);
                }
            }
        };
        // Updates sent before the answer are already queued: the connection routes in order.
        while let Ok(event) = self.events.try_recv() {
            absorb(&mut run, event, &self.ctx, self.shown());
        }
        lock(&self.process.routes).remove(&self.session_id);
        (run, waited)
    }

    fn shown(&self) -> Shown<'_> {
        Shown {
            collector: self.collector.as_deref(),
        }
    }

    fn cancel(&self, grace: std::pin::Pin<&mut tokio::time::Sleep>) {
        let _ = self
            .process
            .cx
            .send_notification(CancelNotification::new(SessionId::new(
                self.session_id.clone(),
            )));
        grace.reset(tokio::time::Instant::now() + CANCEL_GRACE);
    }
}

/// Folds one event into the run, reporting tool calls as steps.
fn absorb(run: &mut AgentRun, event: Event, ctx: &CallContext, shown: Shown<'_>) {
    match event {
        Event::Permission(d) => {
            ctx.step(format!(
                "{} {}: {}",
                if d.allowed { "allowed" } else { "rejected" },
                d.tool,
                d.reason
            ));
            run.permissions.push(d);
        }
        Event::Update(update) => match *update {
            SessionUpdate::AgentMessageChunk(c) => {
                if let ContentBlock::Text(t) = c.content {
                    run.messages.push_str(&t.text);
                    run.last_message.push_str(&t.text);
                }
            }
            SessionUpdate::AgentThoughtChunk(c) => {
                if let ContentBlock::Text(t) = c.content {
                    run.thought.push_str(&t.text);
                }
            }
            SessionUpdate::ToolCall(call) => {
                let mut entry = AgentToolCall {
                    id: call.tool_call_id.0.to_string(),
                    title: shown.text(&call.title),
                    kind: kind_name(call.kind),
                    target: String::new(),
                    arguments: reported_input(call.raw_input.as_ref(), &call.content)
                        .map(|v| shown.input(&v)),
                    status: status_name(call.status),
                    locations: shown.locations(&call.locations),
                };
                entry.retarget();
                let step = if entry.target.is_empty() || entry.title.contains(&entry.target) {
                    format!("{} {}", entry.kind, entry.title)
                } else {
                    format!("{} {} {}", entry.kind, entry.title, entry.target)
                };
                ctx.step(step);
                run.last_message.clear();
                run.tool_calls.push(entry);
            }
            SessionUpdate::ToolCallUpdate(update) => {
                let id = update.tool_call_id.0.to_string();
                // A call the agent asked permission for is announced by that request, not by a
                // `tool_call`: its first update starts its entry.
                if !run.tool_calls.iter().any(|c| c.id == id) {
                    run.last_message.clear();
                    run.tool_calls.push(AgentToolCall {
                        id: id.clone(),
                        title: String::new(),
                        kind: kind_name(ToolKind::Other),
                        target: String::new(),
                        arguments: None,
                        status: status_name(ToolCallStatus::Pending),
                        locations: Vec::new(),
                    });
                }
                if let Some(entry) = run.tool_calls.iter_mut().find(|c| c.id == id) {
                    let f = update.fields;
                    if let Some(s) = f.status {
                        entry.status = status_name(s);
                    }
                    if let Some(t) = f.title {
                        entry.title = shown.text(&t);
                    }
                    if let Some(k) = f.kind {
                        entry.kind = kind_name(k);
                    }
                    // Only `rawInput`: an update's content is the tool's result, not its input.
                    if let Some(input) = f.raw_input.filter(|v| !v.is_null()) {
                        entry.arguments = Some(shown.input(&input));
                    }
                    if let Some(l) = f.locations.filter(|l| !l.is_empty()) {
                        entry.locations = shown.locations(&l);
                    }
                    entry.retarget();
                }
            }
            SessionUpdate::Plan(plan) => {
                run.plan = plan
                    .entries
                    .into_iter()
                    .map(|e| PlanItem {
                        content: e.content,
                        priority: json_name(&e.priority),
                        status: json_name(&e.status),
                    })
                    .collect();
            }
            _ => {}
        },
    }
}

fn json_name(v: &impl Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn kind_name(k: ToolKind) -> String {
    json_name(&k)
}

fn status_name(s: ToolCallStatus) -> String {
    json_name(&s)
}

/// Usage from `{input_tokens, output_tokens, …}` (the CLI's `_meta.quota.token_count`) or
/// ACP's `{inputTokens, outputTokens, thoughtTokens, cachedReadTokens}`.
pub(super) fn usage_of(v: &serde_json::Value) -> Option<Usage> {
    let n = |keys: &[&str]| keys.iter().find_map(|k| v.get(*k).and_then(|x| x.as_u64()));
    let input = n(&["input_tokens", "inputTokens"])?;
    Some(Usage {
        input,
        output: n(&["output_tokens", "outputTokens"]).unwrap_or(0),
        thinking: n(&["thought_tokens", "thoughtTokens"]).unwrap_or(0),
        cached: n(&["cached_tokens", "cachedReadTokens"]).unwrap_or(0),
    })
}

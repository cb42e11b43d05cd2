//! The two revisions' shapes of a task. The 2026-07-28 extension (`io.modelcontextprotocol/tasks`,
//! rmcp's model types): a task's fields flattened beside `resultType: "task"`, `ttlMs` and
//! `pollIntervalMs`, the reply inline in `tasks/get`, an empty `tasks/cancel` acknowledgement.
//! The 2025-11-25 form (SEP-1686, which rmcp does not model): `{"task": {...}}` from
//! `tools/call`, `ttl` and `pollInterval`, the reply from `tasks/result`, the task from
//! `tasks/cancel`, `tasks/list`, and each tool's `execution.taskSupport` in `tools/list`.

use rmcp::model::{
    DetailedTask, GetTaskResult, JsonObject, ProtocolVersion, Task, TaskPayload, TaskStatus,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use super::state::State;
use crate::store::tasks::TaskId;

/// Which revision's tasks a request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// 2026-07-28: the `io.modelcontextprotocol/tasks` extension.
    Extension,
    /// 2025-11-25 (SEP-1686): `capabilities.tasks`, `params.task`, `tasks/result`.
    Sep1686,
}

/// The revision of the request's session or of the request itself.
pub fn form_of(ctx: &RequestContext<RoleServer>) -> Form {
    match ctx.protocol_version() {
        Some(v) if v.as_str() >= ProtocolVersion::V_2026_07_28.as_str() => Form::Extension,
        _ => Form::Sep1686,
    }
}

/// Whether the request (or its session) declared the tasks extension.
pub fn declares_extension(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities()
        .is_some_and(|c| c.supports_tasks())
}

/// The `taskId` of a 2025-11-25 request's params.
pub fn task_id_param(params: &Value) -> Result<String, ErrorData> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| ErrorData::invalid_params("invalid `taskId`: a string is required", None))
}

fn iso(ms: u64) -> String {
    chrono::DateTime::from_timestamp_millis(ms as i64)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A status as both revisions spell it.
pub fn status_name(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::InputRequired => "input_required",
        TaskStatus::Completed => "completed",
        TaskStatus::Failed => "failed",
        TaskStatus::Cancelled => "cancelled",
        _ => "working",
    }
}

/// The 2026-07-28 task.
pub fn task(id: TaskId, state: &State) -> Task {
    let mut task = Task::new(
        id.hyphenated().to_string(),
        state.status,
        iso(state.created_ms),
        iso(state.updated_ms),
    )
    .with_ttl_ms(state.ttl_ms)
    .with_poll_interval_ms(state.poll_ms);
    task.status_message = state.message.clone();
    task
}

/// The 2025-11-25 task.
pub fn sep1686_task(id: &str, state: &State) -> Value {
    let mut task = json!({
        "taskId": id,
        "status": status_name(state.status),
        "createdAt": iso(state.created_ms),
        "lastUpdatedAt": iso(state.updated_ms),
        "ttl": state.ttl_ms,
        "pollInterval": state.poll_ms,
    });
    if let Some(m) = &state.message {
        task["statusMessage"] = json!(m);
    }
    task
}

/// The 2025-11-25 answer to a `tools/call` that started a task.
pub fn created_sep1686(id: TaskId, state: &State) -> Value {
    json!({ "task": sep1686_task(&id.hyphenated().to_string(), state) })
}

/// The 2026-07-28 `tasks/get`: the task, with its reply or error inline once finished.
pub fn detailed(id: &str, state: &State) -> GetTaskResult {
    let task_id = id.trim().parse::<TaskId>().unwrap_or_default();
    let payload = match state.status {
        TaskStatus::Completed => TaskPayload::Completed {
            result: state.result.clone().unwrap_or_default(),
        },
        TaskStatus::Failed => TaskPayload::Failed {
            error: state.error.clone().unwrap_or_default(),
        },
        TaskStatus::Cancelled => TaskPayload::Cancelled,
        _ => TaskPayload::Working,
    };
    GetTaskResult::new(DetailedTask::new(task(task_id, state), payload))
}

/// The 2025-11-25 `tasks/cancel`: the task as it now stands, cancelled.
pub fn cancelled_sep1686(id: &str, state: &State) -> Value {
    let mut state = state.clone();
    state.status = TaskStatus::Cancelled;
    state.message = Some(format!("{}: cancelled; no turn was saved", state.tool));
    state.updated_ms = crate::store::now_ms();
    sep1686_task(id, &state)
}

/// The 2025-11-25 `tasks/result` once the task is finished: the reply a plain call gives, with
/// the task it came from in `_meta`; the error of a failed task; an error for a cancelled one.
pub fn result(id: &str, state: &State) -> Result<Value, ErrorData> {
    let related = json!({ "taskId": id });
    match state.status {
        TaskStatus::Completed => {
            let mut result = state.result.clone().unwrap_or_default();
            result.remove("resultType");
            let meta = result
                .entry("_meta")
                .or_insert_with(|| Value::Object(JsonObject::new()));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert("io.modelcontextprotocol/related-task".into(), related);
            }
            Ok(Value::Object(result))
        }
        TaskStatus::Failed => {
            let stored = state.error.clone().unwrap_or_default();
            let mut error: ErrorData = serde_json::from_value(Value::Object(stored))
                .unwrap_or_else(|_| ErrorData::internal_error("the task failed", None));
            error.data = Some(json!({ "io.modelcontextprotocol/related-task": related }));
            Err(error)
        }
        _ => Err(ErrorData::invalid_request(
            format!(
                "task {} was cancelled before it finished; it has no result and saved no turn",
                crate::echo::echo(id)
            ),
            Some(json!({ "io.modelcontextprotocol/related-task": related })),
        )),
    }
}

/// The 2025-11-25 `tasks/list`.
pub fn list(tasks: &[(TaskId, State)]) -> Value {
    let tasks: Vec<Value> = tasks
        .iter()
        .map(|(id, state)| sep1686_task(&id.hyphenated().to_string(), state))
        .collect();
    json!({ "tasks": tasks })
}

//! MCP tasks at the edge: a tool call whose reply is delivered later. The client asks for one —
//! in the 2026-07-28 revision by declaring the `io.modelcontextprotocol/tasks` extension (the
//! server then makes every model-backed call a task), in the 2025-11-25 revision (SEP-1686) by a
//! `task` in the call's params — and gets a task at once; it polls `tasks/get`, reads the reply
//! (inline in `tasks/get` when done, or `tasks/result`), and may `tasks/cancel` it.
//!
//! A task runs the very call a plain `tools/call` runs ([`TaskServer`] hands the same request
//! to the same handler): the same admission, caps, audit record, metrics and turn; only how the
//! reply reaches the client changes. Its record lives in the thread store (`store::tasks`), so
//! any instance on the same store answers for it; the instance running it renews a lease on
//! the record and reads its cancel flag there, so a cancel sent to another instance reaches it.
//! A task whose lease lapsed (its instance died) reads as failed, with the reason: it is not
//! resumed, since its plan is not stored and running it again would spend the Gemini call twice
//! (docs/decisions/0037-tasks-in-the-thread-store.md).
//!
//! `wire` holds the two revisions' shapes; this file the life cycle, and the server as the tasks
//! see it ([`Host`]).

mod state;
mod wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CreateTaskResult, CustomRequest, CustomResult,
    ErrorCode, GetTaskResult, JsonObject, ServerResult, TaskStatus,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::caller::owner_of;
use crate::store::tasks::{TaskEntry, TaskId};
use crate::gemini::BackgroundRun;
use crate::store::{Owner, ThreadStore, now_ms};

use state::State;
pub use wire::Form;

/// A task's lifetime when the client names none: longer than any call's deadline, so a task
/// that runs to its end is still there to be read.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30 * 60);
/// The longest lifetime a client may ask for.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 3600);
/// The shortest.
pub const MIN_TTL: Duration = Duration::from_secs(1);
/// How often the client is told to poll.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// How long a record is vouched for by the instance running it; renewed well before.
pub const LEASE: Duration = Duration::from_secs(10);
/// How often the instance running a task reads its cancel flag and renews its lease.
const BEAT: Duration = Duration::from_millis(500);
/// Most tasks `tasks/list` shows.
const LIST_LIMIT: usize = 100;

/// Whether a tool asks a model (and so may run as a task): every tool but those that answer at
/// once from what the server knows (`listmodels`, and the seed servers' listings and reset).
pub fn asks_a_model(tool: &str) -> bool {
    const INSTANT: &[&str] = &["list_models", "list_sessions", "reset_session"];
    tool != crate::tools::spec::LISTMODELS.name && !INSTANT.contains(&tool)
}

/// What the running call last said it is doing (its progress messages); the runner writes it
/// into the record. Put in the call's extensions, read by `Server::run`.
#[derive(Clone, Default)]
pub struct StatusLine(Arc<Mutex<Option<String>>>);

impl StatusLine {
    pub fn set(&self, message: &str) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(message.to_string());
    }

    fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl State {
    /// The record as any instance reads it at `now`: a task still marked running whose lease
    /// lapsed failed with its instance, and one past its TTL failed as expired.
    fn seen(entry: &TaskEntry, now: u64) -> Option<State> {
        let mut state: State = serde_json::from_str(&entry.state).ok()?;
        if state.status.is_terminal() {
            return Some(state);
        }
        if now >= state.created_ms + state.ttl_ms {
            state.fail(now, expired(state.ttl_ms));
        } else if entry.lease_ms < now && state.can_be_taken_up() {
            state.message = Some(format!(
                "{}: the instance running it stopped; its run goes on at Google, and the next tasks/get on any \
                 instance takes it up",
                state.tool
            ));
        } else if entry.lease_ms < now {
            state.fail(
                now,
                format!(
                    "the server instance running this task stopped before it finished (last seen {} s ago); \
                     its reply is lost and no turn was saved: call the tool again",
                    (now - entry.lease_ms + LEASE.as_millis() as u64) / 1000
                ),
            );
        }
        Some(state)
    }

    /// Whether another instance can finish the task when the one running it stops: its call
    /// started a background run at Google, and its params are kept to take the run up.
    fn can_be_taken_up(&self) -> bool {
        !self.status.is_terminal() && self.background.is_some() && self.request.is_some()
    }

    fn fail(&mut self, now: u64, message: String) {
        self.status = TaskStatus::Failed;
        self.message = Some(message.clone());
        self.error = Some(error_object(&ErrorData::internal_error(message, None)));
        self.updated_ms = now;
    }

    /// When the record may go: a finished task is kept for its TTL after it finished; a
    /// running one until one TTL after it would have expired.
    fn expires_ms(&self) -> u64 {
        if self.status.is_terminal() {
            self.updated_ms + self.ttl_ms
        } else {
            self.created_ms + 2 * self.ttl_ms
        }
    }
}

fn expired(ttl_ms: u64) -> String {
    format!(
        "the task ran past its time to live ({} s) and was stopped; no turn was saved: call the tool again, \
         asking for a longer `ttl`",
        ttl_ms / 1000
    )
}

fn error_object(e: &ErrorData) -> JsonObject {
    match serde_json::to_value(e) {
        Ok(Value::Object(map)) => map,
        _ => JsonObject::new(),
    }
}

/// A task this instance runs.
struct Running {
    cancel: CancellationToken,
    /// Why it was stopped by this instance, when it was (shutdown).
    stopped: Arc<Mutex<Option<String>>>,
}

/// The server as its tasks see it: where their records are kept, the tasks it runs, its tools
/// and their checks, and the plain call a task runs (`Server` is the one there is).
pub(super) trait Host: Clone + Send + Sync + 'static {
    /// The thread store, which keeps the tasks' records.
    fn store(&self) -> &dyn ThreadStore;
    /// The tasks this instance runs.
    fn tasks(&self) -> &Arc<Tasks>;
    /// Whether `tool` is one of this server's tools.
    fn has_tool(&self, tool: &str) -> bool;
    /// Refuses at once a call whose arguments its plain call would refuse as a JSON-RPC error
    /// (a bad argument, a path outside the sandbox): no task is made for it.
    fn check(&self, request: &CallToolRequestParams) -> Result<(), ErrorData>;
    /// A plain `tools/call`: the tool's route.
    fn plain_call(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, ErrorData>> + Send;
}

/// The tasks of one server process: where records are kept (the app's store) and the tasks this
/// instance runs.
pub struct Tasks {
    running: Mutex<HashMap<TaskId, Running>>,
}

impl Default for Tasks {
    fn default() -> Self {
        Tasks::new()
    }
}

impl Tasks {
    pub fn new() -> Tasks {
        Tasks {
            running: Mutex::default(),
        }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<TaskId, Running>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tasks this instance runs now.
    pub fn in_flight(&self) -> usize {
        self.running().len()
    }

    /// Stops every task this instance still runs (the server is shutting down): each is
    /// recorded as failed, saying so, and no turn is saved. Waits up to `grace` for the records.
    pub async fn abandon(&self, grace: Duration) {
        let n = {
            let running = self.running();
            for task in running.values() {
                *task.stopped.lock().unwrap_or_else(|e| e.into_inner()) = Some(
                    "the server shut down before the task finished; no turn was saved: call the tool again"
                        .into(),
                );
                task.cancel.cancel();
            }
            running.len()
        };
        if n == 0 {
            return;
        }
        tracing::info!(tasks = n, "stopping the tasks still running");
        let deadline = tokio::time::Instant::now() + grace;
        while self.in_flight() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Starts `request` as a task of `owner` and returns its first state at once (after its
    /// record is stored, so a `tasks/get` on any instance finds it).
    async fn start<H: Host>(
        self: &Arc<Self>,
        server: H,
        ttl: Duration,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(TaskId, State), ErrorData> {
        let tool = request.name.to_string();
        let owner = owner_of(&ctx);
        let id = TaskId::new_v4();
        let now = now_ms();
        let state = State {
            v: 1,
            tool: tool.clone(),
            status: TaskStatus::Working,
            message: Some(format!("{tool}: starting")),
            created_ms: now,
            updated_ms: now,
            ttl_ms: ttl.as_millis() as u64,
            poll_ms: POLL_INTERVAL.as_millis() as u64,
            result: None,
            error: None,
            background: None,
            request: None,
        };
        let store = server.store();
        write(store, id, &owner, &state).await.map_err(|e| {
            ErrorData::internal_error(format!("the task could not be stored: {e}"), None)
        })?;
        tracing::debug!(task = %id, tool = %tool, "the call runs as a task");
        self.run_here(server, id, owner, state.clone(), request, ctx, BackgroundRun::default());
        Ok((id, state))
    }

    /// Runs `request` as task `id` on this instance, its record already written: the call runs
    /// on its own, renewing the record, and `background` is the run at Google it starts or
    /// takes up.
    #[allow(clippy::too_many_arguments)]
    fn run_here<H: Host>(
        self: &Arc<Self>,
        server: H,
        id: TaskId,
        owner: Owner,
        state: State,
        request: CallToolRequestParams,
        mut ctx: RequestContext<RoleServer>,
        background: BackgroundRun,
    ) {
        let cancel = CancellationToken::new();
        let stopped = Arc::new(Mutex::new(None));
        self.running().insert(
            id,
            Running {
                cancel: cancel.clone(),
                stopped: stopped.clone(),
            },
        );
        // The call runs on its own: the request that started it is answered now. Progress goes
        // to the record, not to a token the client stops listening to with this answer.
        let status = StatusLine::default();
        ctx.ct = cancel.clone();
        ctx.meta.remove("progressToken");
        ctx.extensions.insert(status.clone());
        ctx.extensions.insert(background.clone());
        let tasks = self.clone();
        let params = serde_json::to_value(&request).unwrap_or_default();
        tokio::spawn(async move {
            let run = Run {
                id,
                owner,
                state,
                cancel,
                stopped,
                status,
                background,
                params,
            };
            run.drive(&server, request, ctx).await;
            tasks.running().remove(&id);
        });
    }

    /// The task `id` of `owner` as it stands, taken up by this instance first when the one
    /// running it stopped while its call's run went on at Google ([`Tasks::take_up`]). `ctx`
    /// is the request that asks (the same owner's `tasks/get` or `tasks/cancel`).
    async fn read_taking_up<H: Host>(
        self: &Arc<Self>,
        server: &H,
        id: &str,
        owner: &Owner,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<State, ErrorData> {
        let entry = self.entry(server, id, owner).await?;
        let entry = self.take_up(server, entry, ctx).await?;
        State::seen(&entry, now_ms()).ok_or_else(|| unknown(id))
    }

    /// `entry`, or the record this instance claimed for it, when the instance running the task
    /// stopped while its call's run went on at Google (a background run, `research`): the
    /// store writes the claim only over the lapsed lease that was read, so one instance wins,
    /// and the winner runs the same call again with that run's id, so the call polls Google for
    /// it instead of starting another.
    async fn take_up<H: Host>(
        self: &Arc<Self>,
        server: &H,
        entry: TaskEntry,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<TaskEntry, ErrorData> {
        let now = now_ms();
        let Ok(mut state) = serde_json::from_str::<State>(&entry.state) else {
            return Ok(entry);
        };
        let orphan = state.can_be_taken_up()
            && entry.lease_ms < now
            && now < state.created_ms + state.ttl_ms
            && !self.running().contains_key(&entry.id);
        let (true, Some(run), Some(params)) = (orphan, state.background.clone(), state.request.clone()) else {
            return Ok(entry);
        };
        let Ok(request) = serde_json::from_value::<CallToolRequestParams>(params) else {
            return Ok(entry);
        };
        state.message = Some(format!("{}: taken up by another instance", state.tool));
        state.updated_ms = now;
        let claimed = TaskEntry {
            state: serde_json::to_string(&state).unwrap_or_default(),
            lease_ms: now + LEASE.as_millis() as u64,
            ..entry.clone()
        };
        let won = server
            .store()
            .claim_task(&claimed, entry.lease_ms, state.expires_ms())
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        if !won {
            return Ok(entry);
        }
        tracing::info!(task = %entry.id, "taking up a task whose instance stopped: its run goes on at Google");
        let owner = entry.owner.clone();
        self.run_here(server.clone(), entry.id, owner, state, request, ctx.clone(), BackgroundRun::of(run));
        Ok(claimed)
    }

    /// The record of task `id` of `owner`; another owner's task is unknown.
    async fn entry(&self, server: &impl Host, id: &str, owner: &Owner) -> Result<TaskEntry, ErrorData> {
        let Ok(task) = id.trim().parse::<TaskId>() else {
            return Err(unknown(id));
        };
        let entry = server
            .store()
            .get_task(task)
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        match entry {
            Some(e) if &e.owner == owner => Ok(e),
            _ => Err(unknown(id)),
        }
    }

    /// The task `id` of `owner` as it stands; another owner's task is unknown.
    async fn read(&self, server: &impl Host, id: &str, owner: &Owner) -> Result<State, ErrorData> {
        let entry = self.entry(server, id, owner).await?;
        State::seen(&entry, now_ms()).ok_or_else(|| unknown(id))
    }

    /// Asks the task to stop (wherever it runs); the answer is its state after the request.
    async fn cancel(&self, server: &impl Host, id: &str, owner: &Owner) -> Result<State, ErrorData> {
        let state = self.read(server, id, owner).await?;
        if state.status.is_terminal() {
            return Err(ErrorData::invalid_params(
                format!(
                    "task {} is already {}; a finished task cannot be cancelled",
                    crate::echo::echo(id),
                    wire::status_name(state.status)
                ),
                None,
            ));
        }
        let task: TaskId = id.trim().parse().map_err(|_| unknown(id))?;
        if let Some(r) = self.running().get(&task) {
            r.cancel.cancel();
        }
        server
            .store()
            .cancel_task(task)
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(state)
    }

    /// `owner`'s tasks, newest first.
    async fn list(
        &self,
        server: &impl Host,
        owner: &Owner,
    ) -> Result<Vec<(TaskId, State)>, ErrorData> {
        let entries = server
            .store()
            .list_tasks(owner, LIST_LIMIT)
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let now = now_ms();
        Ok(entries
            .iter()
            .filter_map(|e| Some((e.id, State::seen(e, now)?)))
            .collect())
    }

    /// Waits until the task is finished (`tasks/result`), reading the record at the poll interval.
    async fn finished(
        &self,
        server: &impl Host,
        id: &str,
        owner: &Owner,
        ct: &CancellationToken,
    ) -> Result<State, ErrorData> {
        loop {
            let state = self.read(server, id, owner).await?;
            if state.status.is_terminal() {
                return Ok(state);
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                _ = ct.cancelled() => return Err(ErrorData::invalid_request("cancelled", None)),
            }
        }
    }
}

fn unknown(id: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "unknown task: {} (no such task, it expired after its time to live, or it belongs to another client)",
            crate::echo::echo(id)
        ),
        None,
    )
}

/// Writes `state` as the record of task `id`, vouched for until a lease from now.
async fn write(
    store: &dyn crate::store::ThreadStore,
    id: TaskId,
    owner: &Owner,
    state: &State,
) -> Result<(), crate::store::ThreadError> {
    let entry = TaskEntry {
        id,
        owner: owner.clone(),
        created_ms: state.created_ms,
        state: serde_json::to_string(state).unwrap_or_default(),
        lease_ms: now_ms() + LEASE.as_millis() as u64,
        cancel: false,
    };
    store.put_task(&entry, state.expires_ms()).await
}

/// One task being run by this instance.
struct Run {
    id: TaskId,
    owner: Owner,
    state: State,
    cancel: CancellationToken,
    stopped: Arc<Mutex<Option<String>>>,
    status: StatusLine,
    /// The background run at Google the call starts or takes up.
    background: BackgroundRun,
    /// The call's params, kept in the record once it starts a background run.
    params: Value,
}

impl Run {
    /// Runs the call to its end (or its cancellation, or its TTL) while renewing the record,
    /// then writes the outcome.
    async fn drive(
        mut self,
        server: &impl Host,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) {
        let store = server.store();
        let started = tokio::time::Instant::now();
        let work = server.plain_call(request, ctx);
        tokio::pin!(work);
        // A task taken up by this instance keeps its own time to live.
        let left = (self.state.created_ms + self.state.ttl_ms).saturating_sub(now_ms());
        let expiry = tokio::time::sleep(Duration::from_millis(left));
        tokio::pin!(expiry);
        let mut beat = tokio::time::interval(BEAT);
        let mut renewed = tokio::time::Instant::now();
        let mut expired_now = false;
        let outcome = loop {
            tokio::select! {
                r = &mut work => break Some(r),
                _ = &mut expiry, if !expired_now => {
                    expired_now = true;
                    self.cancel.cancel();
                }
                _ = beat.tick() => {
                    if !self.cancel.is_cancelled()
                        && let Ok(Some(e)) = store.get_task(self.id).await
                        && e.cancel
                    {
                        self.cancel.cancel();
                    }
                    let message = self
                        .status
                        .get()
                        .map(|m| format!("{}: {m} ({} s)", self.state.tool, started.elapsed().as_secs()));
                    let mut changed = message.is_some() && message != self.state.message;
                    let run = self.background.id();
                    if run.is_some() && run != self.state.background {
                        // The record now says which run at Google is the call's.
                        self.state.background = run;
                        self.state.request = Some(self.params.clone());
                        changed = true;
                    }
                    if changed || renewed.elapsed() >= LEASE / 3 {
                        if message.is_some() && message != self.state.message {
                            self.state.message = message;
                        }
                        self.state.updated_ms = now_ms();
                        if let Err(e) = write(store, self.id, &self.owner, &self.state).await {
                            tracing::warn!(task = %self.id, "cannot renew the task's record: {e}");
                        } else {
                            renewed = tokio::time::Instant::now();
                        }
                    }
                }
            }
        };
        let now = now_ms();
        let stopped = self
            .stopped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match (outcome, stopped) {
            (_, Some(reason)) => self.state.fail(now, reason),
            _ if expired_now => self.state.fail(now, expired(self.state.ttl_ms)),
            _ if self.cancel.is_cancelled() => {
                self.state.status = TaskStatus::Cancelled;
                self.state.message =
                    Some(format!("{}: cancelled; no turn was saved", self.state.tool));
                self.state.updated_ms = now;
            }
            (Some(Ok(response)), None) => {
                let result = match response {
                    CallToolResponse::Complete(r) => serde_json::to_value(&r),
                    CallToolResponse::InputRequired(r) => serde_json::to_value(&r),
                    CallToolResponse::Task(r) => serde_json::to_value(&r),
                    other => serde_json::to_value(ServerResult::from(other)),
                };
                self.state.status = TaskStatus::Completed;
                self.state.message = Some(format!("{}: done", self.state.tool));
                self.state.result = Some(match result {
                    Ok(Value::Object(map)) => map,
                    _ => JsonObject::new(),
                });
                self.state.updated_ms = now;
            }
            (Some(Err(e)), None) => {
                self.state.status = TaskStatus::Failed;
                self.state.message = Some(e.message.to_string());
                self.state.error = Some(error_object(&e));
                self.state.updated_ms = now;
            }
            (None, None) => self.state.fail(now, "the task stopped".into()),
        }
        if let Err(e) = write(store, self.id, &self.owner, &self.state).await {
            tracing::warn!(task = %self.id, "cannot store the task's outcome: {e}");
        }
    }
}

/// The 2025-11-25 methods `jsonrpc::screen` hands the server under their own names (rmcp
/// would parse `tasks/get` and `tasks/cancel` as the extension's, and `tools/call` without its
/// `task`), and `tasks/result` and `tasks/list`, which rmcp does not know.
pub const SEP1686_METHODS: &[&str] = &[
    crate::jsonrpc::SEP1686_CALL,
    crate::jsonrpc::SEP1686_GET,
    crate::jsonrpc::SEP1686_CANCEL,
    "tasks/result",
    "tasks/list",
];

/// Whether a call of `tool` may run as a task.
fn runs_as_task(server: &impl Host, tool: &str) -> bool {
    server.has_tool(tool) && asks_a_model(tool)
}

/// `tools/call`: a task when the request declares the 2026-07-28 tasks extension and the
/// tool asks a model; the plain call otherwise.
pub(super) async fn call_or_start<H: Host>(
    server: &H,
    request: CallToolRequestParams,
    ctx: RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let as_task = wire::form_of(&ctx) == Form::Extension
        && wire::declares_extension(&ctx)
        && runs_as_task(server, &request.name);
    if !as_task {
        return server.plain_call(request, ctx).await;
    }
    server.check(&request)?;
    let (id, state) = server
        .tasks()
        .start(server.clone(), DEFAULT_TTL, request, ctx)
        .await?;
    Ok(CallToolResponse::Task(CreateTaskResult::new(wire::task(
        id, &state,
    ))))
}

/// `tasks/get` (2026-07-28).
pub(super) async fn get_task_state<H: Host>(
    server: &H,
    id: &str,
    ctx: &RequestContext<RoleServer>,
) -> Result<GetTaskResult, ErrorData> {
    let state = server
        .tasks()
        .read_taking_up(server, id, &owner_of(ctx), ctx)
        .await?;
    Ok(wire::detailed(id, &state))
}

/// `tasks/cancel` (2026-07-28).
pub(super) async fn cancel_task_of<H: Host>(
    server: &H,
    id: &str,
    ctx: &RequestContext<RoleServer>,
) -> Result<(), ErrorData> {
    let owner = owner_of(ctx);
    // A run going on at Google for a stopped instance is taken up, so the cancel reaches it.
    server.tasks().read_taking_up(server, id, &owner, ctx).await?;
    server.tasks().cancel(server, id, &owner).await.map(|_| ())
}

/// `tasks/update` (2026-07-28): no task of ours asks for input yet, so responses to requests
/// it did not make are ignored, as the extension says, once the task is known to be the
/// caller's.
pub(super) async fn update_task_of<H: Host>(
    server: &H,
    id: &str,
    ctx: &RequestContext<RoleServer>,
) -> Result<(), ErrorData> {
    server
        .tasks()
        .read(server, id, &owner_of(ctx))
        .await
        .map(|_| ())
}

/// The 2025-11-25 task methods ([`SEP1686_METHODS`]).
pub(super) async fn sep1686<H: Host>(
    server: &H,
    request: CustomRequest,
    ctx: RequestContext<RoleServer>,
) -> Result<CustomResult, ErrorData> {
    let owner = owner_of(&ctx);
    let params = request.params.unwrap_or(Value::Null);
    let id = || wire::task_id_param(&params);
    let answer = match request.method.as_str() {
        crate::jsonrpc::SEP1686_CALL => {
            let ttl = params
                .get("task")
                .and_then(|t| t.get("ttl"))
                .and_then(Value::as_u64)
                .map_or(DEFAULT_TTL, Duration::from_millis)
                .clamp(MIN_TTL, MAX_TTL);
            let call: CallToolRequestParams =
                serde_json::from_value(params.clone()).map_err(|e| {
                    ErrorData::invalid_params(
                        format!("invalid params for `tools/call`: {e}"),
                        None,
                    )
                })?;
            if !server.has_tool(call.name.as_ref()) {
                return Err(ErrorData::invalid_params(
                    format!("tool not found: {}", crate::echo::echo(&call.name)),
                    None,
                ));
            }
            if !asks_a_model(&call.name) {
                return Err(ErrorData::new(
                    ErrorCode::METHOD_NOT_FOUND,
                    format!(
                        "`{}` answers at once and cannot run as a task (its `execution.taskSupport` is `forbidden`): call it without `task`",
                        crate::echo::echo(&call.name)
                    ),
                    None,
                ));
            }
            server.check(&call)?;
            let (id, state) = server.tasks().start(server.clone(), ttl, call, ctx).await?;
            wire::created_sep1686(id, &state)
        }
        crate::jsonrpc::SEP1686_GET => {
            let id = id()?;
            wire::sep1686_task(
                &id,
                &server.tasks().read_taking_up(server, &id, &owner, &ctx).await?,
            )
        }
        crate::jsonrpc::SEP1686_CANCEL => {
            let id = id()?;
            wire::cancelled_sep1686(&id, &server.tasks().cancel(server, &id, &owner).await?)
        }
        "tasks/result" => {
            let id = id()?;
            wire::result(&id, &server.tasks().finished(server, &id, &owner, &ctx.ct).await?)?
        }
        _ => wire::list(&server.tasks().list(server, &owner).await?),
    };
    Ok(CustomResult(answer))
}

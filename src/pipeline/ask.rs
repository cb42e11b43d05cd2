//! The ask step: the request built from the plan, the history and the material, and Gemini's
//! answer to it — one request, an investigation (the loop of function calls over the read-only
//! project tools, `investigation`), or the Gemini CLI's own agent. Every request passes the
//! call's meter (the daily caps).

use std::sync::Arc;

use super::gather::Material;
use super::meter::Meter;
use super::blocking::blocking;
use super::services::Services;
use super::{earlier_turns, investigation, prompt};
use crate::gemini::models::ModelInfo;
use crate::gemini::{CallContext, GenerateRequest, GenerateResponse, Message, Part, ServiceTier};
use crate::reply::investigation_report::Investigation;
use crate::reply::review;
use crate::caps::{Estimate, Hold};
use crate::tools::{Output, Plan, ToolError};

/// What Gemini did besides answering: an investigation with our tools, or the Gemini CLI's
/// agent with its own.
pub(super) enum Explored {
    Investigation(Investigation),
    Agent(crate::gemini::AgentRun, crate::gemini::AgentMode),
}

/// The request to Gemini, and the turn's text after its files (what the thread keeps: history
/// re-renders the turn as its files, re-read, followed by exactly this text).
pub(super) fn build_request(
    plan: &Plan,
    model: ModelInfo,
    system: String,
    mut contents: Vec<Message>,
    omitted_turns: usize,
    material: &Material,
) -> (GenerateRequest, String) {
    let tail = prompt::turn_tail(
        material.diff.as_ref().map(|d| d.text.as_str()),
        &material.skipped,
        &plan.request,
    );
    let mut text = prompt::user_turn(&material.collected.files, &tail);
    if contents.is_empty() && omitted_turns > 0 {
        text.insert_str(0, &earlier_turns::omitted_note(omitted_turns));
    }
    let mut parts = vec![Part::Text(text)];
    parts.extend(material.images.iter().map(|i| Part::Image {
        mime: i.mime.clone(),
        data: i.data.clone(),
    }));
    contents.push(Message {
        role: crate::gemini::Role::User,
        parts,
    });
    let temperature = temperature_for(plan, &model);
    let response_schema = match plan.output {
        Output::Review { verdict, .. } => Some(review::response_schema(verdict)),
        Output::Text => None,
    };
    let request = GenerateRequest {
        model,
        system_instruction: system,
        contents,
        thinking: plan.thinking,
        temperature,
        response_schema,
        web_search: plan.web_search,
        cache: None,
        previous: None,
        agent: None,
        functions: None,
    };
    (request, tail)
}

/// The temperature sent to `model`: the call's, else the tool's default where the model takes
/// one (Gemini 3 and later are best left at theirs).
pub(super) fn temperature_for(plan: &Plan, model: &ModelInfo) -> Option<f32> {
    plan.temperature
        .or_else(|| (!model.is_level_family()).then(|| plan.tool.default_temperature()))
}

/// Gemini's answer to `request`: one call, or an investigation (the loop of function calls
/// over the read-only project tools) when the plan asks for one. `room` is what is left of
/// the context budget for the investigation's tool results. The answer's usage is the
/// loop's sum. Every request, whatever the engine, passes `meter` (the daily caps).
pub(super) async fn ask(
    services: &Services,
    plan: &Plan,
    request: GenerateRequest,
    room: u64,
    thread: &str,
    meter: &Meter,
    ctx: &CallContext,
) -> Result<(GenerateResponse, Option<Explored>), ToolError> {
    if let Some(mode) = plan.agent {
        let (answer, run) = ask_agent(services, request, mode, thread, meter, ctx).await?;
        return Ok((answer, Some(Explored::Agent(run, mode))));
    }
    let Some(steps) = plan.explore else {
        return Ok((meter.generate(&services.gemini, request, ctx).await?, None));
    };
    let settings = services.config.explore;
    let limits = investigation::Limits {
        max_steps: steps.min(settings.max_steps),
        token_budget: settings.token_budget.min(room),
        deadline: settings.deadline,
        cache: (services.config.calls.context_cache && services.gemini.keeps_caches())
            .then(|| services.config.calls.context_cache_ttl.min(settings.deadline)),
    };
    let explorer = Arc::new(
        crate::explore::Explorer::new(services.collector.clone())
            .with_result_chars(settings.result_chars)
            .with_ignore(plan.ignore.clone()),
    );
    let (mut answer, inv) =
        investigation::run(&services.gemini, meter, explorer, request, limits, ctx).await?;
    answer.usage = inv.usage;
    Ok((answer, Some(Explored::Investigation(inv))))
}

/// The Gemini CLI's own agent answers `request` (its last user turn; the whole conversation
/// when the agent's session has to be rebuilt), exploring with its own tools under `mode`.
/// The agent's requests are its own: the caps are checked with the conversation it is handed
/// before it starts, and its usage is counted when it ends.
async fn ask_agent(
    services: &Services,
    request: GenerateRequest,
    mode: crate::gemini::AgentMode,
    thread: &str,
    meter: &Meter,
    ctx: &CallContext,
) -> Result<(GenerateResponse, crate::gemini::AgentRun), ToolError> {
    let pool = services.gemini.agents()?;
    pool.check_mode(mode)?;
    let last = request
        .contents
        .last()
        .map(|m| crate::gemini::render_prompt(std::slice::from_ref(m)))
        .unwrap_or_default();
    let rebuilt =
        (request.contents.len() > 1).then(|| crate::gemini::render_prompt(&request.contents));
    let instructions = agent_instructions(mode, services.collector.sandbox().roots());
    let prompt = crate::gemini::AgentPrompt {
        text: format!("{instructions}\n\n{last}"),
        rebuilt: rebuilt.map(|r| format!("{instructions}\n\n{r}")),
        mode,
        model: request.model.id.clone(),
        thread: Some(thread.to_string()),
    };
    let hold = if meter.is_on() {
        let (text, rebuilt) = (prompt.text.clone(), prompt.rebuilt.clone());
        let estimate =
            blocking(move || Estimate::of_agent_prompt(&text, rebuilt.as_deref())).await?;
        // The agent's requests are its own and carry no tier: standard.
        meter
            .admit(&estimate, &request.model, ServiceTier::Standard)
            .await?
    } else {
        Hold::none()
    };
    let run = meter
        .timed(&request.model.id, pool.prompt(prompt, ctx))
        .await?;
    meter
        .record(
            hold,
            &request.model.id,
            &run.usage.unwrap_or_default(),
            ServiceTier::Standard,
        )
        .await;
    let answer = GenerateResponse {
        text: run.answer().to_string(),
        usage: run.usage.unwrap_or_default(),
        finish_reason: Some(run.finish_reason()),
        ..GenerateResponse::default()
    };
    Ok((answer, run))
}

/// What the Gemini CLI's agent is told before the task, under `mode`; in the modes that write,
/// where the project is (the CLI's own tools resolve a relative path against its working
/// directory, which is not the project, and our policy refuses a change there).
fn agent_instructions(mode: crate::gemini::AgentMode, roots: &[std::path::PathBuf]) -> String {
    use crate::gemini::AgentMode;
    let at = || match roots.first() {
        Some(root) => format!(
            " The project's root is `{}`: name each file you change by its absolute path under it.",
            crate::collector::sandbox::shown(root).display()
        ),
        None => String::new(),
    };
    match mode {
        AgentMode::Plan | AgentMode::Default => {
            "You are investigating this project for another engineer: read what you need (read-only; \
             do not change files or run commands), then answer in Markdown, citing `path:line` for every claim about the code."
                .to_string()
        }
        AgentMode::AutoEdit => format!(
            "You are working on this project for another engineer: read what you need through the project tools, make the \
             changes the task asks for (edits inside the project only; do not run commands), then answer in Markdown: what \
             you changed and why, citing `path:line`.{}",
            at()
        ),
        AgentMode::Yolo => format!(
            "You are working on this project for another engineer: read what you need through the project tools, make the \
             changes the task asks for (edits inside the project only) and run the commands it needs, then answer in \
             Markdown: what you changed and ran and why, citing `path:line`.{}",
            at()
        ),
    }
}

/// The agent's work as the thread keeps it: one line per tool call, with what it reached.
pub(super) fn agent_note(run: &crate::gemini::AgentRun) -> String {
    let mut s = format!(
        "## Gemini CLI agent ({} tool calls, {})\n",
        run.tool_calls.len(),
        run.stop_reason
    );
    for c in &run.tool_calls {
        let target = if c.target.is_empty() || c.title.contains(&c.target) {
            String::new()
        } else {
            format!(" {}", c.target)
        };
        s.push_str(&format!(
            "- {} {}{target} ({})\n",
            c.kind, c.title, c.status
        ));
    }
    s
}

//! The one pipeline every tool goes through, in steps of their own:
//! plan → thread (load) → budget and history (`budget`) → files or git diff (`gather`) → prompt
//! → Gemini (`ask`: one request, an investigation, or the Gemini CLI's agent; every request
//! through the daily caps' `meter`) → the answer read (`answer`: its findings' locations checked
//! against what was sent and their edits against the files, `verify`) → thread (save: `save`) →
//! reply → the call's audit record (`record`: written once the call ends, whatever its outcome,
//! or when it is abandoned).
//!
//! [`run`] drives the steps over the [`Services`] the application owns (`app::App`: built once,
//! shared by every call). Nothing here knows MCP or the command line; the edges call the app.
//! Blocking work (reading files, git, token counting) runs in `spawn_blocking`; nothing here
//! blocks the runtime.

mod answer;
mod ask;
mod blocking;
mod cache;
mod window;
pub mod earlier_turns;
mod gather;
pub mod investigation;
pub mod meter;
mod chain;
mod consensus;
pub mod preview;
pub mod prompt;
mod record;
pub mod review_rules;
mod save;
mod services;
mod verify;

use std::sync::Arc;

use tracing::Instrument;

use crate::gemini::{CallContext, GeminiError};
use crate::reply::investigation_report::steps_note;
use crate::store::{Owner, Thread, ThreadError, ThreadId};
use crate::tools::{Continuation, Plan, Reply, Tool, ToolError};
use answer::{check_edits, finish_reply, read_answer};
use blocking::{INLINE_COUNT_BYTES, blocking};
use ask::{Explored, agent_note, ask, build_request};
use window::{budget, model_for};
use gather::{Gathered, Material, gather};
use meter::Meter;
use record::Trail;
use save::save_turn;

pub use services::Services;

/// A call prepared up to the Gemini step: the request as it will leave, and what it was made of.
struct Prepared {
    plan: Plan,
    id: ThreadId,
    /// What the thread cost before this turn.
    earlier_cost: f64,
    /// The input window for this call (history, material and the rest).
    total: u64,
    history_tokens: u64,
    omitted_turns: usize,
    material: Material,
    /// What is sent, indexed (for reviews and dry runs; empty otherwise).
    sent: verify::Sent,
    request: crate::gemini::GenerateRequest,
    tail: String,
    /// Values redacted from the call's own text, per rule.
    text_redactions: crate::redact::Counts,
    /// The context cache the thread's last turn left (`cache`).
    kept_cache: Option<crate::store::ContextCache>,
    /// The interaction the thread's last turn left stored at Google.
    kept_interaction: Option<crate::store::StoredInteraction>,
    /// The rules a review follows (none for other tools).
    rules: crate::rules::Rules,
    /// The models of a consensus (`None`: one model).
    members: Option<Vec<consensus::Member>>,
}

/// What preparing a call comes to.
// One value per call, moved once.
#[allow(clippy::large_enum_variant)]
enum Prepare {
    Ready(Prepared),
    /// Answered without Gemini (precommit with nothing to review).
    Answered(Reply),
}

/// The steps before Gemini: the call's text redacted, the model, the thread, the budget and
/// history, the material (diff, files, images), the request.
async fn prepare(
    services: &Services,
    mut plan: Plan,
    ctx: &CallContext,
    dry_run: bool,
) -> Result<Prepare, ToolError> {
    let research = &services.config.gemini.research;
    if plan.tool == Tool::Research && !research.enabled {
        return Err(GeminiError::NotConfigured {
            message: "`research` is off: it hands the question to Gemini's Deep Research agent, which browses \
                      the web for minutes and is billed per run. Turn it on with GEMINI_MCP_DEEP_RESEARCH=1"
                .into(),
        }
        .into());
    }
    let text_redactions = redact_plan_text(&mut plan).await?;
    if !dry_run {
        // A dry run asks Gemini nothing, not even the model list.
        services.refresh_models(false).await;
    }
    // The tokenizer loads on the first call, beside the work (an idle server stays small).
    services.collector.warm_up();
    let model = model_for(services, &plan)?;
    let members = consensus::members(services, &plan)?;
    let rules = review_rules::gather(services, &plan).await?;
    plan.ignore = rules.ignore.clone();
    let (id, thread) = load_thread(services, plan.continuation, &plan.owner).await?;
    if let Some(t) = &thread
        && t.turns.len() as u32 >= services.config.threads.max_turns
    {
        return Err(ThreadError::Full {
            id: id.to_string(),
            max: services.config.threads.max_turns,
        }
        .into());
    }
    let system = prompt::system_instruction(
        &tool_prompt(&plan),
        rules.prompt().as_deref(),
        plan.system_extra.as_deref(),
    );
    ctx.report("reading files");
    let earlier_cost = thread_cost(services.gemini.catalogue().prices(), thread.as_ref());
    let last_turn = thread.as_ref().and_then(|t| t.turns.last());
    let kept_cache = last_turn.and_then(|t| t.context_cache.clone());
    let kept_interaction = last_turn.and_then(|t| t.interaction.clone());
    // A consensus's one request must fit every model's window.
    let window = members
        .as_deref()
        .and_then(consensus::narrowest)
        .filter(|m| m.input_limit < model.input_limit)
        .unwrap_or(&model);
    let (total, history) = budget(services, &plan, window, &system, thread).await?;
    let material = match gather(
        services,
        &plan,
        total.saturating_sub(history.tokens),
        &history,
    )
    .await?
    {
        Gathered::Material(m) => m,
        Gathered::NothingToReview(reply) => return Ok(Prepare::Answered(reply)),
    };
    let omitted_turns = history.omitted_turns;
    let index = dry_run || matches!(plan.output, crate::tools::Output::Review { .. });
    let sent = if index {
        let files = material
            .collected
            .files
            .iter()
            .map(|f| (f.text.as_str(), std::slice::from_ref(&f.frame)));
        let diff = material
            .diff
            .as_ref()
            .map(|d| (d.text.as_str(), d.frames.as_slice()));
        let earlier = history
            .messages
            .iter()
            .zip(&history.frames)
            .map(|(m, frames)| (earlier_turns::message_text(m), frames.as_slice()));
        verify::Sent::index(files.chain(diff).chain(earlier))
    } else {
        verify::Sent::default()
    };
    let (mut request, tail) = build_request(
        &plan,
        model,
        system,
        history.messages,
        omitted_turns,
        &material,
    );
    if plan.tool == Tool::Research {
        request.agent = Some(crate::gemini::Agent {
            id: research.agent.clone(),
            hold_tokens: research.hold_tokens,
        });
    }
    Ok(Prepare::Ready(Prepared {
        plan,
        id,
        earlier_cost,
        total,
        history_tokens: history.tokens,
        omitted_turns,
        material,
        sent,
        request,
        tail,
        text_redactions,
        kept_cache,
        kept_interaction,
        rules,
        members,
    }))
}

/// What a call would send, without sending it: the pipeline stopped before the Gemini step
/// (`--dry-run`), so its figures are those of the real call.
pub async fn preview(
    services: &Services,
    plan: Plan,
    show_request: bool,
    ctx: &CallContext,
) -> Result<preview::Preview, ToolError> {
    match prepare(services, plan, ctx, true).await? {
        Prepare::Answered(reply) => Ok(preview::Preview::answered(reply)),
        Prepare::Ready(p) => {
            // What the cache step would do (one body of its rule with the call's).
            let cache = if p.plan.agent.is_none() && p.plan.explore.is_none() && p.members.is_none() {
                let front = cache::Front {
                    history_tokens: p.history_tokens,
                    omitted_turns: p.omitted_turns,
                    first: first_head(&p.plan, &p.material, p.history_tokens),
                };
                Some(cache::decide(services, &p.request, p.kept_cache.clone(), &front).await)
            } else {
                None
            };
            let call = preview::Prepared {
                request: &p.request,
                material: &p.material,
                sent: &p.sent,
                explicit: &p.plan.files,
                prompt_redactions: p.text_redactions.total(),
                cache: cache.as_ref(),
            };
            let report = preview::Preview::of(services, call, show_request).await?;
            match &p.members {
                Some(members) => {
                    let (requests, synthesis) =
                        consensus::planned(&p.plan, &p.request, members).await?;
                    report.with_consensus(services, requests, synthesis).await
                }
                None => Ok(report),
            }
        }
    }
}

/// Runs one tool call of `client` end to end: the steps before Gemini ([`prepare`]), Gemini,
/// the answer read, the turn saved, the reply; then its audit record, whatever the outcome.
pub async fn run(
    services: &Services,
    client: &str,
    plan: Plan,
    ctx: &CallContext,
) -> Result<Reply, ToolError> {
    let meter = services.meter(&plan.owner);
    let meter = Arc::new(if plan.over_ceiling_ok {
        meter.without_ceiling()
    } else {
        meter
    });
    let mut trail = Trail::begin(services, client, &plan, meter.clone());
    let span = trail.span();
    let result = steps(services, plan, ctx, &meter, &mut trail)
        .instrument(span)
        .await;
    trail.finish(result.as_ref().err()).await;
    result
}

/// What the Gemini step came to: the reply read from the answer, and what the thread keeps.
struct Asked {
    answer: crate::gemini::GenerateResponse,
    explored: Option<Explored>,
    reply: Reply,
    model_used: String,
    context_cache: Option<crate::store::ContextCache>,
    interaction: Option<crate::store::StoredInteraction>,
    /// What the consensus's other requests cost besides `answer` (0 for one model).
    others_usd: f64,
    /// Every request's usage, when `answer` holds only one of them (a consensus).
    usage: Option<crate::gemini::Usage>,
}

/// The steps of [`run`], telling `trail` what the call sends as they learn it.
async fn steps(
    services: &Services,
    plan: Plan,
    ctx: &CallContext,
    meter: &Meter,
    trail: &mut Trail,
) -> Result<Reply, ToolError> {
    let Prepared {
        plan,
        id,
        earlier_cost,
        total,
        history_tokens,
        omitted_turns,
        material,
        mut sent,
        request,
        tail,
        text_redactions,
        kept_cache,
        kept_interaction,
        rules,
        members,
    } = match prepare(services, plan, ctx, false).await? {
        Prepare::Ready(p) => p,
        Prepare::Answered(reply) => return Ok(reply),
    };
    trail.thread(&id.to_string());
    trail.model(&request.model.id);
    trail.redactions(&text_redactions);
    trail.material(&material);
    ctx.report("waiting for Gemini");
    let schedule = request
        .model
        .schedule_notice(services.gemini.catalogue().prices().clock().today());
    let asked = match members {
        Some(members) => {
            let asked = consensus::Asked {
                plan: &plan,
                rules: &rules,
                material: &material,
                sent: &sent,
            };
            ask_many(services, asked, request, members, meter, ctx)
                .await
                .map_err(|e| what_to_narrow(e, &material, history_tokens))?
        }
        None => {
            let one = One {
                plan: &plan,
                rules: &rules,
                material: &material,
                sent: &mut sent,
                thread: id.to_string(),
                room: total
                    .saturating_sub(history_tokens)
                    .saturating_sub(material.tokens()),
                front: cache::Front {
                    history_tokens,
                    omitted_turns,
                    first: first_head(&plan, &material, history_tokens),
                },
                kept_cache,
                kept_interaction,
            };
            ask_one(services, one, request, meter, ctx).await?
        }
    };
    trail.model(&asked.model_used);
    let Asked {
        answer,
        explored,
        mut reply,
        model_used,
        context_cache,
        interaction,
        others_usd,
        usage,
    } = asked;
    if let Some(Explored::Investigation(inv)) = &explored {
        trail.read(&inv.files_read);
    }
    let tail = explored_tail(tail, explored.as_ref());
    save_turn(
        services,
        id,
        &plan,
        tail,
        &material,
        &answer,
        &model_used,
        context_cache,
        meter.cache_usd() + others_usd,
        interaction,
        &mut reply,
    )
    .await?;
    // What the meter counted for the call's requests, each priced as the model and at the
    // service tier that served it (an investigation's requests may be served at different
    // tiers, a consensus's are of several models).
    let cost = meter.seen().cost_usd;
    finish_reply(&mut reply, model_used, &answer, &material, omitted_turns);
    if let Some(notice) = schedule.filter(|_| answer.fallback.is_none()) {
        reply.note(notice);
    }
    if let Some(note) = rules.note() {
        reply.note(note);
    }
    priced(services, &mut reply, (&answer, usage), cost, earlier_cost);
    match explored {
        Some(Explored::Investigation(inv)) => reply.set_investigation(inv),
        Some(Explored::Agent(run, mode)) => reply.set_agent(&run, mode),
        None => {}
    }
    reply.meta.redactions += text_redactions.total() + rules.redactions;
    // Not rendered here: the edge finishes it, whole (the command line) or fitted to the
    // client's cap (MCP).
    Ok(reply)
}

/// The turn's text as the thread keeps it: an investigation's steps or the agent's work after
/// the request.
fn explored_tail(tail: String, explored: Option<&Explored>) -> String {
    match explored {
        Some(Explored::Investigation(inv)) => format!("{tail}\n\n{}", steps_note(inv)),
        Some(Explored::Agent(run, _)) => format!("{tail}\n\n{}", agent_note(run)),
        None => tail,
    }
}

/// The reply's usage (`usage`, every request's, when `answer` holds only one of them) priced:
/// what this call cost (`cost`, every request summed), the thread with it, and the tier that
/// served it.
fn priced(
    services: &Services,
    reply: &mut Reply,
    (answer, usage): (&crate::gemini::GenerateResponse, Option<crate::gemini::Usage>),
    cost: Option<f64>,
    earlier_cost: f64,
) {
    if let Some(usage) = usage {
        reply.meta.usage = Some(usage.into());
    }
    if let Some(usage) = reply.meta.usage.as_mut() {
        usage.cost_usd = cost;
        usage.thread_cost_usd = cost.map(|c| c + earlier_cost);
        usage.tier = answer.service_tier.map(|t| t.as_str().to_string());
        usage.tier_asked = services.gemini.tier_sent().map(|t| t.as_str().to_string());
    }
}

/// The Gemini step with several models (`consensus`).
async fn ask_many(
    services: &Services,
    asked: consensus::Asked<'_>,
    request: crate::gemini::GenerateRequest,
    members: Vec<consensus::Member>,
    meter: &Meter,
    ctx: &CallContext,
) -> Result<Asked, ToolError> {
    let done = consensus::run(services, asked, request, members, meter, ctx).await?;
    Ok(Asked {
        answer: done.answer,
        explored: None,
        reply: done.reply,
        model_used: done.model,
        context_cache: None,
        interaction: None,
        others_usd: done.others_usd,
        usage: Some(done.usage),
    })
}

/// What the Gemini step with one model needs of the prepared call.
struct One<'a> {
    plan: &'a Plan,
    rules: &'a crate::rules::Rules,
    material: &'a Material,
    /// What was sent, to which an investigation adds what it read.
    sent: &'a mut verify::Sent,
    thread: String,
    /// What is left of the context budget for an investigation's tool results.
    room: u64,
    front: cache::Front,
    kept_cache: Option<crate::store::ContextCache>,
    kept_interaction: Option<crate::store::StoredInteraction>,
}

/// The Gemini step with one model: the request with its context cache or stored interaction,
/// one request (or an investigation, or the Gemini CLI's agent), the answer read and its
/// edits checked.
async fn ask_one(
    services: &Services,
    one: One<'_>,
    request: crate::gemini::GenerateRequest,
    meter: &Meter,
    ctx: &CallContext,
) -> Result<Asked, ToolError> {
    let (plan, material) = (one.plan, one.material);
    let model_id = request.model.id.clone();
    let history_tokens = one.front.history_tokens;
    let (request, context_cache) = if plan.agent.is_none() && plan.explore.is_none() {
        cache::attach(services, request, one.kept_cache, one.front, meter, ctx).await
    } else {
        (request, cache::Kept::default())
    };
    let (request, chained) = chain::attach(services, plan, request, one.kept_interaction);
    let (answer, explored) = ask(services, plan, request, one.room, &one.thread, meter, ctx)
        .await
        .map_err(|e| what_to_narrow(e, material, history_tokens))?;
    let context_cache = cache::settled(services, meter, &answer, context_cache).await;
    let model_used = answer.model_version.clone().unwrap_or(model_id);
    if let Some(Explored::Investigation(inv)) = &explored {
        one.sent.add_all(&inv.read);
    }
    let mut reply = read_answer(
        plan,
        one.rules,
        &answer.text,
        material.diff.as_ref(),
        one.sent,
    )?;
    check_edits(services, &mut reply).await?;
    let interaction = chain::record(chained, &answer, &model_used);
    Ok(Asked {
        answer,
        explored,
        reply,
        model_used,
        context_cache,
        interaction,
        others_usd: 0.0,
        usage: None,
    })
}

/// A first call's (no earlier turn) files and diff, when it sends some: what a later call
/// sending the same may read from a cache (`cache::first`).
fn first_head(plan: &Plan, material: &Material, history_tokens: u64) -> Option<cache::Head> {
    let files = &material.collected.files;
    let diff = material.diff.as_ref();
    let bytes = prompt::head_len(files, diff.map(|d| d.text.as_str()));
    (history_tokens == 0 && bytes > 0).then(|| cache::Head {
        owner: plan.owner.clone(),
        bytes,
        tokens: material.tokens(),
    })
}

/// The thread `continuation` names, if `owner` may continue it here: another client's thread
/// is refused without saying whose, and one from another project unless
/// `GEMINI_MCP_SHARE_THREADS_ACROSS_PROJECTS` allows it.
async fn load_thread(
    services: &Services,
    continuation: Option<Continuation>,
    owner: &Owner,
) -> Result<(ThreadId, Option<Thread>), ToolError> {
    let Some(continuation) = continuation else {
        return Ok((ThreadId::new(), None));
    };
    let span = crate::traces::store_load(services.store.kind());
    let found = find_thread(services, continuation, owner)
        .instrument(span.clone())
        .await;
    let turns = found.as_ref().map(|(_, t)| t.turns.len() as u32);
    crate::traces::stored(&span, turns.map_err(ToolError::kind));
    found.map(|(id, thread)| (id, Some(thread)))
}

/// The thread `continuation` names, if `owner` may continue it here ([`load_thread`]).
async fn find_thread(
    services: &Services,
    continuation: Continuation,
    owner: &Owner,
) -> Result<(ThreadId, Thread), ToolError> {
    let id = match continuation {
        Continuation::Thread(id) => id,
        Continuation::Latest => services
            .store
            .latest(&services.project(), owner)
            .await?
            .ok_or(ThreadError::NoLatest)?,
    };
    let thread = services.store.load(id).await?;
    if thread.owner != *owner {
        return Err(ThreadError::Foreign { id: id.to_string() }.into());
    }
    if thread.project != services.project() && !services.config.calls.share_threads_across_projects
    {
        return Err(ThreadError::OtherProject {
            id: id.to_string(),
            project: thread.project.replace('\n', ", "),
        }
        .into());
    }
    Ok((id, thread))
}

/// The tool's system prompt, with what the project tools are for when the call may explore.
fn tool_prompt(plan: &Plan) -> String {
    let base = plan.tool.system_prompt();
    if plan.explore.is_some() && plan.tool != crate::tools::Tool::Investigate {
        format!("{}\n\n{}", base.trim_end(), prompt::EXPLORE.trim_end())
    } else {
        base.to_string()
    }
}

/// Redacts the call's own text in place: it leaves the machine (and is kept in the thread) like
/// a file does, so it is redacted like one — agents paste logs and configs into
/// `error_context` and `prompt`. One regex pass over text already capped in size. Returns how
/// many values were replaced, per rule.
async fn redact_plan_text(plan: &mut Plan) -> Result<crate::redact::Counts, ToolError> {
    let texts = (std::mem::take(&mut plan.request), plan.system_extra.take());
    let size = texts.0.len() + texts.1.as_ref().map_or(0, String::len);
    let (request, system_extra, n) = if size > INLINE_COUNT_BYTES {
        blocking(move || redact_call_text(texts)).await?
    } else {
        redact_call_text(texts)
    };
    (plan.request, plan.system_extra) = (request, system_extra);
    Ok(n)
}

/// The call's own texts (request, caller's system addition) redacted, and how many values were.
fn redact_call_text(
    (request, extra): (String, Option<String>),
) -> (String, Option<String>, crate::redact::Counts) {
    let (request, mut n) = crate::redact::redact_counted(&request);
    let extra = extra.map(|e| {
        let (clean, m) = crate::redact::redact_counted(&e);
        n.merge(&m);
        clean
    });
    (request, extra, n)
}

/// A refusal by a cap or the per-call ceiling, with what made the request large: its largest
/// files and the earlier turns.
fn what_to_narrow(e: ToolError, material: &Material, history_tokens: u64) -> ToolError {
    let mut files: Vec<(&str, u64)> = material
        .collected
        .files
        .iter()
        .map(|f| (f.display.as_str(), f.tokens))
        .collect();
    if let Some(d) = &material.diff {
        files.push(("the diff", d.tokens));
    }
    files.sort_by_key(|(_, t)| std::cmp::Reverse(*t));
    let mut more = String::new();
    if !files.is_empty() {
        let largest: Vec<String> = files
            .iter()
            .take(3)
            .map(|(p, t)| format!("{p} ({t} tokens)"))
            .collect();
        more.push_str(&format!(" The largest sent: {}.", largest.join(", ")));
    }
    if history_tokens > 0 {
        more.push_str(&format!(" The earlier turns: {history_tokens} tokens."));
    }
    match e {
        ToolError::SpendingCap(m) => ToolError::SpendingCap(m + &more),
        ToolError::OverCallCeiling {
            message,
            estimate_usd,
        } => ToolError::OverCallCeiling {
            message: message + &more,
            estimate_usd,
        },
        other => other,
    }
}

/// The estimated cost of a thread's stored turns, at today's prices and the tier each was
/// served at (turns of models without a known price count nothing).
fn thread_cost(prices: &crate::gemini::prices::PriceList, thread: Option<&Thread>) -> f64 {
    thread.map_or(0.0, |t| {
        t.turns
            .iter()
            .filter_map(|turn| {
                prices
                    .estimate(&turn.model, &turn.usage.into(), turn.usage.tier)
                    .map(|answer| answer + turn.extra_usd)
            })
            .sum()
    })
}

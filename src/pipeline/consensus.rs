//! Consensus: a fan-out of the ask step. The one request the pipeline built is asked of each
//! model at once, each told its stance in its own system instruction; none sees another's
//! answer (every request is the same request, made before any answer exists). Each answer is
//! read and verified as a single call's is (`answer::read_answer`, `check_edits`); a review's
//! findings are then merged by verified location (`verify::merge`); and a model of the user's
//! choice (`model`, else the default) writes the synthesis from the answers with the models'
//! names left out. A model that fails leaves the answer to the others and is named.
//!
//! Money: before the first request, the whole consensus (every model's request and an estimate
//! of the synthesis) is checked against the per-call ceiling and the daily caps
//! ([`Meter::check_together`]); then each request is admitted and counted on its own as usual.

use futures::future::join_all;

use super::answer::{check_edits, read_answer};
use super::blocking::{INLINE_COUNT_BYTES, blocking};
use super::gather::Material;
use super::ask::temperature_for;
use super::meter::{Meter, answer_usd};
use super::services::Services;
use super::verify::{Sent, merge::merge};
use crate::caps::Estimate;
use crate::collector::tokens;
use crate::gemini::models::ModelInfo;
use crate::gemini::{CallContext, GenerateRequest, GenerateResponse, Message, Part, Role, Usage};
use crate::reply::consensus::{ConsensusView, MemberView};
use crate::reply::review::{self, Verdict};
use crate::reply::{Body, Reply, ReviewBody};
use crate::rules::Rules;
use crate::tools::consensus::{Seat, Seats, Stance};
use crate::tools::{Plan, ToolError};

/// Tokens a model's answer is estimated at, for the synthesis's input before the answers exist.
const ANSWER_ESTIMATE_TOKENS: u64 = 2_000;

/// What the synthesising model is told.
const SYNTHESIS: &str = "You combine the independent answers several reviewers gave to the same request into one \
answer for the engineer who asked. The reviewers are anonymous; some were asked to argue for or against, and their \
stance is given with their answer. Say where they agree, where they disagree and why, and which view the evidence \
in their answers supports; keep every concrete point (file:line citations included) that matters, drop repetition, \
and do not invent anything none of them said. Answer in Markdown.";

/// One model of a consensus, resolved.
#[derive(Debug, Clone)]
pub(super) struct Member {
    pub model: ModelInfo,
    pub stance: Option<Stance>,
}

/// The models `plan` asks, resolved in the catalogue (`None`: one model, no consensus). A name
/// the catalogue does not know is refused naming its entry; two names of one model with one
/// stance are refused.
pub(super) fn members(services: &Services, plan: &Plan) -> Result<Option<Vec<Member>>, ToolError> {
    let (seats, field): (&[Seat], _) = match &plan.consensus {
        None => return Ok(None),
        Some(Seats::Named(seats)) => (seats, "models"),
        Some(Seats::Default) => (&services.config.calls.consensus_models, "GEMINI_MCP_CONSENSUS_MODELS"),
    };
    let catalogue = services.gemini.catalogue();
    let mut out: Vec<Member> = Vec::new();
    for (i, seat) in seats.iter().enumerate() {
        let model = catalogue
            .resolve(&seat.model)
            .map_err(|e| ToolError::invalid(&format!("{field}[{i}]"), e.to_string()))?;
        if out
            .iter()
            .any(|m| m.model.id == model.id && m.stance == seat.stance)
        {
            return Err(ToolError::invalid(
                &format!("{field}[{i}]"),
                format!(
                    "`{}` is {}, named already; name each model once (or give it another stance)",
                    seat.model, model.id
                ),
            ));
        }
        out.push(Member {
            model,
            stance: seat.stance,
        });
    }
    Ok(Some(out))
}

/// The member whose input window is the smallest: the budget every request must fit.
pub(super) fn narrowest(members: &[Member]) -> Option<&ModelInfo> {
    members
        .iter()
        .map(|m| &m.model)
        .min_by_key(|m| m.input_limit)
}

/// What a consensus call was made of: the plan, the review's rules and what was sent.
pub(super) struct Asked<'a> {
    pub plan: &'a Plan,
    pub rules: &'a Rules,
    pub material: &'a Material,
    pub sent: &'a Sent,
}

/// A consensus answered: the reply, and what the thread keeps of it.
pub(super) struct Done {
    /// What the thread keeps as the turn's answer: the merged review as JSON, or the synthesis
    /// with each model's answer; its usage is the writer's (the synthesis, else the one model
    /// that answered).
    pub answer: GenerateResponse,
    /// The model that wrote `answer`.
    pub model: String,
    pub reply: Reply,
    /// What the call's other requests cost, in USD (part of the thread's cost besides `answer`).
    pub others_usd: f64,
    /// Every request's usage, summed.
    pub usage: Usage,
}

/// One model's outcome.
struct Outcome {
    member: Member,
    result: Result<(GenerateResponse, Reply), ToolError>,
}

/// Asks every member `request` at once and makes one answer of theirs (see the module docs).
pub(super) async fn run(
    services: &Services,
    asked: Asked<'_>,
    request: GenerateRequest,
    members: Vec<Member>,
    meter: &Meter,
    ctx: &CallContext,
) -> Result<Done, ToolError> {
    let writer = request.model.clone();
    let requests: Vec<GenerateRequest> = members
        .iter()
        .map(|m| member_request(asked.plan, &request, m))
        .collect();
    let synthesis_estimate = synthesis_estimate(asked.plan, members.len()).await?;
    let tier = services.gemini.tier_sent().unwrap_or_default();
    meter
        .check_together(&requests, (synthesis_estimate, &writer), tier)
        .await?;
    ctx.report(format!("asking {} models at once", members.len()));
    let answered = std::sync::atomic::AtomicUsize::new(0);
    let of = members.len();
    let asks = requests.into_iter().map(|req| {
        let (answered, asked) = (&answered, &asked);
        async move {
            let model = req.model.id.clone();
            let outcome = ask_member(services, asked, req, meter, ctx).await;
            // Each answer is a step the client sees, as it comes.
            let k = answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            let what = if outcome.is_ok() { "answered" } else { "failed" };
            ctx.step(format!("{model} {what} ({k} of {of})"));
            outcome
        }
    });
    let results = join_all(asks).await;
    let outcomes: Vec<Outcome> = members
        .into_iter()
        .zip(results)
        .map(|(member, result)| Outcome { member, result })
        .collect();
    combine(services, &asked, outcomes, writer, meter, ctx).await
}

/// A member's request and its stance's name.
pub(super) type StancedRequest = (GenerateRequest, Option<&'static str>);

/// What a consensus would send, for a dry run: each member's request with its stance, and the
/// synthesis's estimate with its model (the request's).
pub(super) async fn planned<'a>(
    plan: &Plan,
    request: &'a GenerateRequest,
    members: &[Member],
) -> Result<(Vec<StancedRequest>, (Estimate, &'a ModelInfo)), ToolError> {
    let requests = members
        .iter()
        .map(|m| (member_request(plan, request, m), m.stance.map(Stance::as_str)))
        .collect();
    let synthesis = synthesis_estimate(plan, members.len()).await?;
    Ok((requests, (synthesis, &request.model)))
}

/// The synthesis's input, estimated before the answers exist (a long request counted off the
/// runtime's threads).
async fn synthesis_estimate(plan: &Plan, members: usize) -> Result<Estimate, ToolError> {
    let request = plan.request.clone();
    let count = move || tokens::count(&request);
    let counted = if plan.request.len() > INLINE_COUNT_BYTES {
        blocking(count).await?
    } else {
        count()
    };
    Ok(Estimate {
        system: tokens::count(SYNTHESIS),
        turn: counted + ANSWER_ESTIMATE_TOKENS * members as u64,
        ..Estimate::default()
    })
}

/// `request` as `member` is asked it: its model, the temperature it takes, its stance.
fn member_request(plan: &Plan, request: &GenerateRequest, member: &Member) -> GenerateRequest {
    let mut req = request.clone();
    req.model = member.model.clone();
    req.temperature = temperature_for(plan, &member.model);
    if let Some(stance) = member.stance {
        req.system_instruction = format!(
            "{}\n\n# Your stance\n{}",
            req.system_instruction.trim_end(),
            stance.instruction()
        );
    }
    req
}

/// One member's answer, read and verified as a single call's is.
async fn ask_member(
    services: &Services,
    asked: &Asked<'_>,
    req: GenerateRequest,
    meter: &Meter,
    ctx: &CallContext,
) -> Result<(GenerateResponse, Reply), ToolError> {
    let answer = meter.generate(&services.gemini, req, ctx).await?;
    let mut reply = read_answer(
        asked.plan,
        asked.rules,
        &answer.text,
        asked.material.diff.as_ref(),
        asked.sent,
    )?;
    check_edits(services, &mut reply).await?;
    Ok((answer, reply))
}

/// The members' outcomes made one answer: the views, the merged findings, the synthesis.
async fn combine(
    services: &Services,
    asked: &Asked<'_>,
    outcomes: Vec<Outcome>,
    writer: ModelInfo,
    meter: &Meter,
    ctx: &CallContext,
) -> Result<Done, ToolError> {
    let prices = services.gemini.catalogue().prices();
    let mut view = ConsensusView::default();
    let mut answered: Vec<(Member, GenerateResponse, Reply)> = Vec::new();
    let mut failures = Vec::new();
    let mut first_error = None;
    for o in outcomes {
        let stance = o.member.stance.map(|s| s.as_str().to_string());
        match o.result {
            Ok((answer, reply)) => {
                let model = answer
                    .model_version
                    .clone()
                    .unwrap_or_else(|| o.member.model.id.clone());
                let review = match &reply.body {
                    Body::Review(r) => Some(r),
                    _ => None,
                };
                view.models.push(MemberView {
                    model,
                    stance,
                    status: "answered".into(),
                    answer: Some(match review {
                        Some(r) => r.summary.clone(),
                        None => reply.body.text().to_string(),
                    }),
                    verdict: review.and_then(|r| r.verdict),
                    findings: review.map(|r| r.findings.len()),
                    cost_usd: answer_usd(prices, &answer, &o.member.model.id),
                    ..MemberView::default()
                });
                answered.push((o.member, answer, reply));
            }
            Err(e) => {
                let label = match &stance {
                    Some(s) => format!("{} ({s})", o.member.model.id),
                    None => o.member.model.id.clone(),
                };
                failures.push(format!("{label} failed ({e}); the answer is the other models'."));
                view.models.push(MemberView {
                    model: o.member.model.id.clone(),
                    stance,
                    status: "failed".into(),
                    error: Some(e.to_string()),
                    ..MemberView::default()
                });
                first_error.get_or_insert(e);
            }
        }
    }
    if answered.is_empty() {
        // Every model failed: the call fails as a single call would, with the first error.
        return Err(first_error.unwrap_or_else(|| ToolError::Internal("no model was asked".into())));
    }
    let is_review = matches!(asked.plan.output, crate::tools::Output::Review { .. });
    let reviewed = answered
        .iter()
        .any(|(_, _, r)| matches!(r.body, Body::Review(_)));
    let mut usage = Usage::default();
    for (_, a, _) in &answered {
        usage += a.usage;
    }
    if is_review && !reviewed {
        return Ok(asked_back(services, answered, view, failures, usage, meter));
    }
    let synthesis = if answered.len() >= 2 {
        let req = synthesis_request(asked.plan, &writer, &answered, is_review);
        match meter.generate(&services.gemini, req, ctx).await {
            Ok(a) => Some(a),
            Err(e) => {
                failures.push(format!(
                    "The synthesis by {} failed ({e}); the models' answers are shown as they are.",
                    writer.id
                ));
                None
            }
        }
    } else {
        None
    };
    if let Some(s) = &synthesis {
        usage += s.usage;
        view.synthesis_by = Some(s.model_version.clone().unwrap_or_else(|| writer.id.clone()));
        view.synthesis_cost_usd = answer_usd(prices, s, &writer.id);
    }
    let synthesis_text = synthesis.as_ref().map(|s| crate::redact::redact(&s.text).0);
    let mut reply = if is_review {
        merged_review(&answered, synthesis_text)
    } else {
        let text = synthesis_text.unwrap_or_else(|| match answered.as_slice() {
            [(_, _, only)] => only.body.text().to_string(),
            _ => "The models' answers follow, as each gave it.".to_string(),
        });
        Reply::answer(text)
    };
    for note in failures {
        reply.note(note);
    }
    let (answer, model) = thread_answer(&reply, &view, synthesis, &answered, &writer);
    reply.meta.consensus = Some(view);
    Ok(Done {
        others_usd: others_usd(services, meter, &model, &answer),
        answer,
        model,
        reply,
        usage,
    })
}

/// A review no model could make without more material: the first model's question stands, with
/// the views of all (`usage`, every request's).
fn asked_back(
    services: &Services,
    mut answered: Vec<(Member, GenerateResponse, Reply)>,
    view: ConsensusView,
    failures: Vec<String>,
    usage: Usage,
    meter: &Meter,
) -> Done {
    let (member, answer, mut reply) = answered.swap_remove(0);
    for note in failures {
        reply.note(note);
    }
    reply.meta.consensus = Some(view);
    Done {
        others_usd: others_usd(services, meter, &member.model.id, &answer),
        model: member.model.id.clone(),
        answer,
        reply,
        usage,
    }
}

/// What the call's requests cost besides `answer` as the thread prices its turn (`model`'s
/// prices, `answer`'s usage): the rest of what the meter counted.
fn others_usd(services: &Services, meter: &Meter, model: &str, answer: &GenerateResponse) -> f64 {
    let own = services
        .gemini
        .catalogue()
        .prices()
        .estimate(model, &answer.usage, answer.billed_tier)
        .unwrap_or(0.0);
    (meter.seen().cost_usd.unwrap_or(0.0) - own).max(0.0)
}

/// The synthesis's request: the call's request, then each answer under a number and its
/// stance, with no model's name.
fn synthesis_request(
    plan: &Plan,
    writer: &ModelInfo,
    answered: &[(Member, GenerateResponse, Reply)],
    is_review: bool,
) -> GenerateRequest {
    let mut text = format!("# The request\n\n{}\n", plan.request.trim_end());
    for (i, (member, _, reply)) in answered.iter().enumerate() {
        let stance = member
            .stance
            .map_or(String::new(), |s| format!(" (asked to argue {})", stance_words(s)));
        text.push_str(&format!("\n# Answer {}{stance}\n\n", i + 1));
        match &reply.body {
            Body::Review(r) => {
                text.push_str(r.summary.trim_end());
                text.push('\n');
                for f in &r.findings {
                    text.push_str(&format!(
                        "- {} {}: {}\n",
                        f.severity.as_str(),
                        review::citation(&f.file, f.line),
                        f.title
                    ));
                }
            }
            body => {
                text.push_str(body.text().trim_end());
                text.push('\n');
            }
        }
    }
    if is_review {
        text.push_str(
            "\nWrite the review's summary: two to five sentences on what the reviewers agree on and where they differ. \
             The findings themselves are listed to the engineer separately.",
        );
    }
    GenerateRequest {
        model: writer.clone(),
        system_instruction: SYNTHESIS.to_string(),
        contents: vec![Message {
            role: Role::User,
            parts: vec![Part::Text(text)],
        }],
        thinking: plan.thinking,
        temperature: temperature_for(plan, writer),
        response_schema: None,
        web_search: false,
        cache: None,
        previous: None,
        agent: None,
        functions: None,
    }
}

fn stance_words(s: Stance) -> &'static str {
    match s {
        Stance::For => "for",
        Stance::Against => "against",
        Stance::Neutral => "neutrally",
    }
}

/// The members' reviews as one: the findings merged by verified location, the synthesis (or
/// each summary) as the summary, the verdict most models gave (the stricter at a tie).
fn merged_review(answered: &[(Member, GenerateResponse, Reply)], synthesis: Option<String>) -> Reply {
    let reviews: Vec<(&Member, &ReviewBody)> = answered
        .iter()
        .filter_map(|(m, _, r)| match &r.body {
            Body::Review(v) => Some((m, v)),
            _ => None,
        })
        .collect();
    let findings = merge(
        reviews
            .iter()
            .map(|(m, r)| (m.model.id.clone(), r.findings.clone()))
            .collect(),
    );
    let summary = synthesis.unwrap_or_else(|| {
        reviews
            .iter()
            .map(|(m, r)| format!("{}: {}", m.model.id, r.summary.trim()))
            .collect::<Vec<_>>()
            .join("\n\n")
    });
    let verdicts: Vec<Verdict> = reviews.iter().filter_map(|(_, r)| r.verdict).collect();
    let verdict = [Verdict::DoNotCommit, Verdict::NeedsChanges, Verdict::Ready]
        .into_iter()
        .max_by_key(|v| verdicts.iter().filter(|w| *w == v).count())
        .filter(|_| !verdicts.is_empty());
    let (filtered_out, min) = reviews
        .first()
        .map_or((0, review::Severity::Low), |(_, r)| (r.filtered_out, r.min));
    Reply::review(ReviewBody {
        summary,
        findings,
        verdict,
        filtered_out,
        min,
    })
}

/// What the thread keeps of the consensus, and the model that wrote it.
fn thread_answer(
    reply: &Reply,
    view: &ConsensusView,
    synthesis: Option<GenerateResponse>,
    answered: &[(Member, GenerateResponse, Reply)],
    writer: &ModelInfo,
) -> (GenerateResponse, String) {
    let text = match &reply.body {
        Body::Review(r) => serde_json::json!({
            "summary": r.summary,
            "verdict": r.verdict,
            "findings": r.findings,
        })
        .to_string(),
        body => format!("{}{}", body.text(), view.render(true)),
    };
    let sources = answered
        .iter()
        .flat_map(|(_, a, _)| a.sources.iter().cloned())
        .collect::<Vec<_>>();
    let (mut answer, model) = match synthesis {
        Some(s) => (s, writer.id.clone()),
        None => {
            let (m, a, _) = &answered[0];
            (a.clone(), m.model.id.clone())
        }
    };
    answer.text = text;
    answer.sources = dedup(sources);
    answer.fallback = None;
    (answer, model)
}

fn dedup(mut sources: Vec<crate::gemini::Source>) -> Vec<crate::gemini::Source> {
    let mut seen = std::collections::HashSet::new();
    sources.retain(|s| seen.insert(s.uri.clone()));
    sources
}

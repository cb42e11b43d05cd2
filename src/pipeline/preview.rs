//! A dry run's report: what a call would send, made from the request the pipeline built and
//! stopped before the Gemini step, so every figure is the real call's — the files with their
//! tokens and priority, what was left out and why, each redaction (rule, file, line; never the
//! value), the model and thinking, the input tokens as the daily caps count them, and a cost band
//! (the answer's length is unknown: from nothing to the model's output limit). With
//! `show_request`, the request body exactly as the API backend would send it.

use serde::Serialize;
use serde_json::Value;

use super::services::Services;
use super::gather::Material;
use super::verify::Sent;
use crate::collector::classify::{Class, classify};
use crate::gemini::{GenerateRequest, Usage};
use crate::reply::{LeftOut, Reply};
use crate::caps::Estimate;
use crate::tools::ToolError;

/// What a call would send.
#[derive(Debug, Clone, Serialize)]
pub struct Preview {
    /// The model id asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The thinking level asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<&'static str>,
    /// The agent that would run instead of a model (`research`), in the background at Google;
    /// `model` is what its usage is priced at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The files sent, in the order they are sent.
    pub files: Vec<PreviewFile>,
    /// The diff sent (precommit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<DiffPreview>,
    /// What was left out, with why.
    pub skipped: Vec<LeftOut>,
    /// Each value replaced before sending.
    pub redactions: Vec<Redaction>,
    /// Values replaced in the call's own text (prompt, context).
    pub prompt_redactions: usize,
    /// The input tokens, by part, as the daily caps count them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<InputTokens>,
    /// What the call would cost: input only, up to input and the longest answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<CostBand>,
    /// The request body as it would leave (`--show-request`; the API backend only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<Value>,
    /// Why there is nothing to send (precommit with no change), or what the figures leave out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// A consensus: what each model's request and the synthesis would cost (`cost_usd` is
    /// their sum).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub consensus: Vec<ModelCost>,
}

/// One request of a consensus, estimated.
#[derive(Debug, Clone, Serialize)]
pub struct ModelCost {
    pub model: String,
    /// for, against or neutral; `synthesis` for the request that combines the answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    pub input_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<CostBand>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PreviewFile {
    pub path: String,
    pub tokens: u64,
    /// The order files are admitted in under the budget: explicit, source, config, docs,
    /// other, low.
    pub priority: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct DiffPreview {
    /// Changed files, as listed to Gemini.
    pub files: Vec<String>,
    pub tokens: u64,
}

/// One replaced value: where, and by which rule; never the value.
#[derive(Debug, Clone, Serialize)]
pub struct Redaction {
    pub rule: String,
    pub file: String,
    /// The line in the file (none for a line a diff removes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct InputTokens {
    pub total: u64,
    pub system: u64,
    pub history: u64,
    pub turn: u64,
    pub images: u64,
    pub declarations: u64,
    /// What an agent's run is held at for its own reading (`GEMINI_MCP_DEEP_RESEARCH_TOKENS`).
    #[serde(skip_serializing_if = "is_zero")]
    pub agent: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct CostBand {
    pub low: f64,
    pub high: f64,
    /// The output limit the high end assumes.
    pub output_limit: u64,
}

fn priority(class: Class) -> &'static str {
    match class {
        Class::Explicit => "explicit",
        Class::Source => "source",
        Class::ConfigBuild => "config",
        Class::Docs => "docs",
        Class::Other => "other",
        Class::Low => "low",
    }
}

/// What a call prepared up to the Gemini step is made of, as the report reads it.
pub(super) struct Prepared<'a> {
    pub request: &'a GenerateRequest,
    /// The material sent, indexed as `sent`.
    pub material: &'a Material,
    pub sent: &'a Sent,
    /// The files the call named.
    pub explicit: &'a [String],
    /// Values redacted from the call's own text.
    pub prompt_redactions: usize,
    /// What the cache step would do (`None`: it does not run for this call).
    pub cache: Option<&'a super::cache::Decision>,
}

impl Preview {
    /// A call answered without Gemini (precommit with nothing pending): nothing would be sent.
    pub fn answered(reply: Reply) -> Preview {
        Preview {
            model: None,
            thinking: None,
            agent: None,
            files: Vec::new(),
            diff: None,
            skipped: reply.meta.files.skipped.clone(),
            redactions: Vec::new(),
            prompt_redactions: 0,
            input: None,
            cost_usd: None,
            request: None,
            consensus: Vec::new(),
            notes: vec![format!(
                "Nothing would be sent: {}",
                reply.answer_text().trim()
            )],
        }
    }

    /// The report of a prepared call.
    pub(super) async fn of(
        services: &Services,
        call: Prepared<'_>,
        show_request: bool,
    ) -> Result<Preview, ToolError> {
        let Prepared {
            request,
            material,
            sent,
            explicit,
            prompt_redactions,
            cache,
        } = call;
        let req = request.clone();
        let estimate = super::blocking::blocking(move || Estimate::of(&req)).await?;
        let model = &request.model;
        let input = estimate.total();
        let prices = services.gemini.catalogue().prices();
        // At the tier the call would ask for (what served it is known only after).
        let tier = services.gemini.tier_sent().unwrap_or_default();
        let mut notes = Vec::new();
        let (cached, making) = cache_effect(prices, &model.id, cache, &mut notes);
        let cost_usd = band(prices, model, (input, cached), tier)
            .zip(making)
            .map(|(b, making)| CostBand {
                low: b.low + making,
                high: b.high + making,
                ..b
            });
        if let Some(notice) = model.schedule_notice(prices.clock().today()) {
            notes.push(notice);
        }
        if cost_usd.is_none() {
            notes.push(format!(
                "No price is known for {}: no cost band (give it one with {}; under a USD cap the call would be refused).",
                model.id,
                crate::gemini::prices::PRICES_SETTING
            ));
        }
        let request_body = show_request
            .then(|| request_body(services, request, &mut notes))
            .transpose()?
            .flatten();
        if let Some(agent) = &request.agent {
            notes.push(format!(
                "{} would run in the background at Google and read the web on its own: the run is held at {} tokens \
                 (GEMINI_MCP_DEEP_RESEARCH_TOKENS) against the caps before it starts, and its real usage is counted \
                 after. Its searches are not in the figures.",
                agent.id, agent.hold_tokens
            ));
        }
        if request.functions.is_some() {
            notes.push(
                "An investigation sends more as Gemini reads files: the figures are its first \
                 request."
                    .into(),
            );
        }
        Ok(Preview {
            model: Some(model.id.clone()),
            thinking: request.agent.is_none().then(|| request.thinking.as_str()),
            agent: request.agent.as_ref().map(|a| a.id.clone()),
            files: material
                .collected
                .files
                .iter()
                .map(|f| {
                    let class = if explicit.iter().any(|e| same_file(e, &f.display)) {
                        Class::Explicit
                    } else {
                        classify(std::path::Path::new(&f.display))
                    };
                    PreviewFile {
                        path: f.display.clone(),
                        tokens: f.tokens,
                        priority: priority(class),
                    }
                })
                .collect(),
            diff: material.diff.as_ref().map(|d| DiffPreview {
                files: d.changed.iter().map(|c| c.path.clone()).collect(),
                tokens: d.tokens,
            }),
            skipped: material.skipped.iter().cloned().map(Into::into).collect(),
            redactions: sent
                .redactions()
                .map(|(file, line, rule)| Redaction {
                    rule: rule.clone(),
                    file: file.clone(),
                    line: *line,
                })
                .collect(),
            prompt_redactions,
            input: Some(InputTokens {
                total: input,
                system: estimate.system,
                history: estimate.history,
                turn: estimate.turn,
                images: estimate.images,
                declarations: estimate.declarations,
                agent: estimate.agent,
            }),
            cost_usd,
            request: request_body,
            notes,
            consensus: Vec::new(),
        })
    }

    /// The report of a consensus: each of `requests` (one per model, `roles` their stances) and
    /// the synthesis (`synthesis`, estimated before its input exists) priced, the cost band
    /// their sum; the rest is the first request's report (`self`).
    pub(super) async fn with_consensus(
        mut self,
        services: &Services,
        requests: Vec<(GenerateRequest, Option<&'static str>)>,
        synthesis: (Estimate, &crate::gemini::ModelInfo),
    ) -> Result<Preview, ToolError> {
        let prices = services.gemini.catalogue().prices();
        let tier = services.gemini.tier_sent().unwrap_or_default();
        let mut rows = Vec::new();
        for (req, role) in requests {
            let model = req.model.clone();
            let estimate = super::blocking::blocking(move || Estimate::of(&req)).await?;
            rows.push(ModelCost {
                model: model.id.clone(),
                role: role.map(String::from),
                input_tokens: estimate.total(),
                cost_usd: band(prices, &model, (estimate.total(), 0), tier),
            });
        }
        let (estimate, writer) = synthesis;
        rows.push(ModelCost {
            model: writer.id.clone(),
            role: Some("synthesis".into()),
            input_tokens: estimate.total(),
            cost_usd: band(prices, writer, (estimate.total(), 0), tier),
        });
        self.cost_usd = rows
            .iter()
            .map(|r| r.cost_usd)
            .try_fold((0.0, 0.0), |(l, h), c| c.map(|c| (l + c.low, h + c.high)))
            .map(|(low, high)| CostBand {
                low,
                high,
                output_limit: rows.iter().filter_map(|r| r.cost_usd).map(|c| c.output_limit).max().unwrap_or(0),
            });
        self.notes.push(format!(
            "A consensus of {} models, asked at once, then a synthesis by {}: the cost is the sum of the {} requests (the synthesis's input is estimated before the answers exist). The caps refuse the whole consensus before the first request when the sum would pass them.",
            rows.len() - 1,
            writer.id,
            rows.len()
        ));
        self.consensus = rows;
        Ok(self)
    }

    /// The report as text for a terminal.
    pub fn render(&self) -> String {
        let mut out = String::from("Dry run: nothing was sent.\n");
        if let (Some(m), Some(t)) = (&self.model, self.thinking) {
            out.push_str(&format!("\nModel: {m}, thinking {t}\n"));
        }
        if let (Some(a), Some(m)) = (&self.agent, &self.model) {
            out.push_str(&format!("\nAgent: {a}, in the background (priced as {m})\n"));
        }
        if let Some(i) = &self.input {
            out.push_str(&format!(
                "Input: {} tokens (system {}, earlier turns {}, this turn {}, images {}, schema and declarations {})\n",
                i.total, i.system, i.history, i.turn, i.images, i.declarations
            ));
            if i.agent > 0 {
                out.push_str(&format!(
                    "  of which {} held for the agent's own reading\n",
                    i.agent
                ));
            }
        }
        if let Some(c) = &self.cost_usd {
            out.push_str(&format!(
                "Cost: ${:.4} to ${:.4} (the answer's length is unknown: from none to the {}-token output limit)\n",
                c.low, c.high, c.output_limit
            ));
        }
        if !self.files.is_empty() {
            out.push_str(&format!("\nFiles ({}):\n", self.files.len()));
            for f in &self.files {
                out.push_str(&format!(
                    "  {:>8} tokens  {:<8}  {}\n",
                    f.tokens, f.priority, f.path
                ));
            }
        }
        if let Some(d) = &self.diff {
            out.push_str(&format!(
                "\nDiff: {} changed file(s), {} tokens\n",
                d.files.len(),
                d.tokens
            ));
            for f in &d.files {
                out.push_str(&format!("  {f}\n"));
            }
        }
        if !self.skipped.is_empty() {
            out.push_str(&format!("\nLeft out ({}):\n", self.skipped.len()));
            for s in &self.skipped {
                out.push_str(&format!("  {}: {}\n", s.path, s.described));
            }
        }
        if !self.redactions.is_empty() || self.prompt_redactions > 0 {
            let total = self.redactions.len() + self.prompt_redactions;
            out.push_str(&format!("\nRedacted before sending ({total}):\n"));
            for r in &self.redactions {
                match r.line {
                    Some(l) => out.push_str(&format!("  {}:{l}  {}\n", r.file, r.rule)),
                    None => out.push_str(&format!("  {} (a removed line)  {}\n", r.file, r.rule)),
                }
            }
            if self.prompt_redactions > 0 {
                out.push_str(&format!(
                    "  {} in the call's own text\n",
                    self.prompt_redactions
                ));
            }
        }
        for n in &self.notes {
            out.push_str(&format!("\n{n}\n"));
        }
        if !self.consensus.is_empty() {
            out.push_str("\nConsensus:\n");
            for r in &self.consensus {
                let role = r.role.as_deref().map_or(String::new(), |r| format!(" ({r})"));
                let cost = r.cost_usd.map_or("no known price".to_string(), |c| {
                    format!("${:.4} to ${:.4}", c.low, c.high)
                });
                out.push_str(&format!(
                    "  {}{role}: {} tokens in, {cost}\n",
                    r.model, r.input_tokens
                ));
            }
        }
        if let Some(r) = &self.request {
            out.push_str("\nRequest body:\n");
            out.push_str(&serde_json::to_string_pretty(r).unwrap_or_default());
            out.push('\n');
        }
        out
    }
}

/// What `input` tokens (`cached` of them read from a cache) cost on `model` at `tier`: with no
/// answer, and with the longest one; `None` when the model has no known price.
fn band(
    prices: &crate::gemini::prices::PriceList,
    model: &crate::gemini::ModelInfo,
    (input, cached): (u64, u64),
    tier: crate::gemini::ServiceTier,
) -> Option<CostBand> {
    let at = |output: u64| {
        let usage = Usage {
            input,
            output,
            cached: cached.min(input),
            ..Usage::default()
        };
        prices.estimate(&model.id, &usage, tier)
    };
    at(0).zip(at(model.output_limit)).map(|(low, high)| CostBand {
        low,
        high,
        output_limit: model.output_limit,
    })
}

/// A file named in the request (as given, maybe `./`-prefixed or absolute) is the file shown.
fn same_file(given: &str, shown: &str) -> bool {
    let given = given.trim_start_matches("./");
    given == shown || given.ends_with(&format!("/{shown}"))
}

/// The tokens a context cache would serve the call, and what making one would cost first (its
/// creation and storage; `None`: no price is known); a note saying which.
fn cache_effect(
    prices: &crate::gemini::prices::PriceList,
    model: &str,
    cache: Option<&super::cache::Decision>,
    notes: &mut Vec<String>,
) -> (u64, Option<f64>) {
    let holds = cache.map_or("", |d| d.holds());
    match cache.map(|d| (&d.action, &d.usable)) {
        Some((super::cache::Action::Make { tokens, ttl, .. }, _)) => {
            let (creation, storage) = prices.cache_cost(model, *tokens, *ttl);
            notes.push(format!(
                "A context cache of {holds} ({tokens} tokens) would be made for {} s and read at the cached price; its creation and storage{} are in the cost.",
                ttl.as_secs(),
                creation
                    .zip(storage)
                    .map(|(c, s)| format!(" (${c:.4} and ${s:.4})"))
                    .unwrap_or_default()
            ));
            (*tokens, creation.zip(storage).map(|(c, s)| c + s))
        }
        Some((super::cache::Action::KeepSeen { ttl }, _)) => {
            notes.push(format!(
                "No context cache: this call's system instruction, files and diff would be recorded as seen, and a call sending them again within {} s would make one.",
                ttl.as_secs()
            ));
            (0, Some(0.0))
        }
        Some((_, Some(kept))) => {
            let whose = if cache.is_some_and(|d| d.first.is_some()) {
                "A context cache made by an earlier call would serve the system instruction, the files and the diff"
            } else {
                "The thread's context cache would serve the earlier turns"
            };
            notes.push(format!(
                "{whose} ({} tokens, at the cached price).",
                kept.tokens
            ));
            (kept.tokens, Some(0.0))
        }
        _ => (0, Some(0.0)),
    }
}

/// The request body exactly as it would leave (`--show-request`); `None`, with a note, for the
/// Gemini CLI backend, which is sent a prompt of its own.
fn request_body(
    services: &Services,
    request: &GenerateRequest,
    notes: &mut Vec<String>,
) -> Result<Option<Value>, ToolError> {
    match services.gemini.request_body(request) {
        Some(body) => Ok(Some(serde_json::from_slice(&body?).map_err(|e| {
            ToolError::Internal(format!("the request body is not JSON: {e}"))
        })?)),
        None => {
            notes.push(
                "The Gemini CLI backend is sent a prompt of its own, not this request \
                 body: --show-request shows the API's."
                    .into(),
            );
            Ok(None)
        }
    }
}

//! The daily caps (`GEMINI_MCP_DAILY_TOKENS`, `GEMINI_MCP_DAILY_USD`), typed: what a request
//! is estimated at ([`Estimate`], every part of the request as the backend sends it), whom it
//! counts against ([`SpendKey`]: the project and, over HTTP, the client) and on which UTC
//! [`Day`], when it is refused ([`Caps::check`]), and what calls in flight hold ([`Holds`]).
//!
//! The thread store keeps what each key spent each day (`ThreadStore::add_spend`, `spent`), in
//! the stored form of [`SpendKey::stored`] and [`Day`]'s `YYYY-MM-DD`, unchanged since the caps
//! were strings, so existing counts keep counting. The pipeline's meter
//! (`pipeline::meter::Meter`) puts it together: every request to Gemini is checked before it is
//! sent and counted when answered.
//!
//! Calls in flight hold their estimate ([`Holds`]) from admission until their usage is counted,
//! so two calls admitted at once cannot both pass a cap that only one of them fits under. The
//! holds are the process's (one server or CLI, one per `App`); instances sharing a store see
//! each other's calls only once they are counted.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::collector::tokens;
use crate::gemini::{GenerateRequest, Part, Role};

/// A daily cap would be passed: the request is refused before Gemini is called. The message
/// says the estimate, the cap, what was spent, what to narrow and when the count resets.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SpendError {
    #[error("{0}")]
    Cap(String),
    /// The call's estimate passes the per-call ceiling (`GEMINI_MCP_CALL_USD`).
    #[error("{message}")]
    OverCall { message: String, estimate_usd: f64 },
}

/// What was spent: tokens (input, output and thinking) and estimated cost in millionths of a
/// dollar.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Spent {
    pub tokens: u64,
    pub micro_usd: u64,
}

/// Whom a request counts against: the project (its roots, one per line) for every call, and
/// the HTTP client (its owner's digest) too when the call is not local.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SpendKey {
    Project(String),
    Client(String),
}

impl SpendKey {
    /// The key as the stores keep it: `project\n<roots>` or `client\n<owner>` (Redis keeps
    /// its digest). Unchanged since keys were strings: existing counts keep counting.
    pub fn stored(&self) -> String {
        match self {
            SpendKey::Project(project) => format!("project\n{project}"),
            SpendKey::Client(owner) => format!("client\n{owner}"),
        }
    }

    /// Who the cap applies to, as a refusal says it.
    fn whose(&self) -> &'static str {
        match self {
            SpendKey::Project(_) => "this project",
            SpendKey::Client(_) => "this client",
        }
    }
}

/// A day in UTC, the unit the caps count in; stored and shown as `YYYY-MM-DD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Day(i64);

impl Day {
    /// Today in UTC, by the system clock: the caps count real days, whatever day the dated
    /// rules are read at.
    pub fn today() -> Day {
        Day(crate::clock::Clock::system().today())
    }

    /// The UTC day of a Unix time in milliseconds.
    pub fn of_ms(ms: u64) -> Day {
        Day((ms / 1000) as i64 / 86_400)
    }
}

impl fmt::Display for Day {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::git::date(self.0 * 86_400))
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub use crate::collector::images::IMAGE_TOKENS;
/// Requests up to this size are estimated where they are (well under a millisecond); larger ones
/// in `spawn_blocking`.
pub const INLINE_BYTES: usize = 16 * 1024;

/// The caps, as configured.
#[derive(Debug, Clone, Copy, Default)]
pub struct Caps {
    pub daily_tokens: Option<u64>,
    pub daily_usd: Option<f64>,
    /// The most one call may cost, estimated before each of its requests
    /// (`GEMINI_MCP_CALL_USD`).
    pub call_usd: Option<f64>,
}

impl Caps {
    /// Whether a daily cap applies (the spend is counted per day only then).
    pub fn any(self) -> bool {
        self.daily_tokens.is_some() || self.daily_usd.is_some()
    }

    /// The input's estimated cost, `input_usd` (`None`: `model` has no known price); under a
    /// USD cap or the per-call ceiling a model without a price is refused, never counted as
    /// free.
    pub fn priced(self, input_usd: Option<f64>, model: &str) -> Result<f64, SpendError> {
        match input_usd {
            Some(usd) => Ok(usd),
            None if self.daily_usd.is_none() && self.call_usd.is_none() => Ok(0.0),
            None => {
                let setting = if self.daily_usd.is_some() {
                    "GEMINI_MCP_DAILY_USD"
                } else {
                    "GEMINI_MCP_CALL_USD"
                };
                Err(SpendError::Cap(format!(
                    "{model} has no known price, so its cost cannot be held to the cap in {setting}. \
                     Gemini was not called. Give it a price with {} (e.g. \
                     {model}=1.5/9: USD per million input/output tokens, from \
                     https://ai.google.dev/gemini-api/docs/pricing), or pick a model that has one \
                     (the `listmodels` tool shows the prices).",
                    crate::gemini::prices::PRICES_SETTING
                )))
            }
        }
    }

    /// Refuses a request whose input (about `input_usd` on `model`) would take the call past
    /// the per-call ceiling, `call_usd` being what its earlier requests cost (an investigation
    /// makes several).
    pub fn check_call(
        self,
        call_usd: f64,
        estimate: &Estimate,
        input_usd: f64,
        model: &str,
    ) -> Result<(), SpendError> {
        let Some(ceiling) = self.call_usd else {
            return Ok(());
        };
        let total = call_usd + input_usd;
        if total <= ceiling {
            return Ok(());
        }
        let advice = match estimate.advice() {
            a if a.is_empty() => " Raise the ceiling".to_string(),
            a => format!(" To fit, {a}; or raise the ceiling"),
        };
        let before = if call_usd > 0.0 {
            format!(" after ${call_usd:.4} spent by its earlier requests")
        } else {
            String::new()
        };
        Err(SpendError::OverCall {
            message: format!(
                "this call would cost about ${total:.4} on {model}{before} — its input alone \
                 (about {} tokens: {}), before Gemini's answer — over the per-call ceiling of \
                 ${ceiling:.2} (GEMINI_MCP_CALL_USD). Gemini was not called.{advice} \
                 (GEMINI_MCP_CALL_USD), or see what would be sent with --dry-run.",
                estimate.total(),
                estimate.parts(),
            ),
            estimate_usd: total,
        })
    }

    /// Refuses a request estimated at `estimate` (its input costing about `input_usd` on
    /// `model`) when what `key` spent today, counted and held, and it together pass a cap.
    pub fn check(
        self,
        key: &SpendKey,
        spent: Spent,
        estimate: &Estimate,
        input_usd: f64,
        model: &str,
    ) -> Result<(), SpendError> {
        let need = estimate.total();
        let whose = key.whose();
        let advice = match estimate.advice() {
            a if a.is_empty() => " Raise the cap".to_string(),
            a => format!(" To fit, {a}; or raise the cap"),
        };
        if let Some(cap) = self.daily_tokens
            && spent.tokens + need > cap
        {
            return Err(SpendError::Cap(format!(
                "the daily token cap of {cap} (GEMINI_MCP_DAILY_TOKENS) for {whose} would be passed: {} tokens \
                 spent today and this request needs about {need} tokens of input ({}) on {model}, before \
                 Gemini's answer. Gemini was not called.{advice}, or wait: it resets at 00:00 UTC ({}).",
                spent.tokens,
                estimate.parts(),
                until_midnight()
            )));
        }
        let spent_usd = spent.micro_usd as f64 / 1e6;
        if let Some(cap) = self.daily_usd
            && spent_usd + input_usd > cap
        {
            return Err(SpendError::Cap(format!(
                "the daily spending cap of ${cap:.2} (GEMINI_MCP_DAILY_USD) for {whose} would be passed: about \
                 ${spent_usd:.4} spent today and this request's input (about {need} tokens: {}) costs about \
                 ${input_usd:.4} on {}. Gemini was not called.{advice}, or wait: it resets at 00:00 UTC \
                 ({}).",
                estimate.parts(),
                model,
                until_midnight()
            )));
        }
        Ok(())
    }
}

/// The input tokens of one request, by where they come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Estimate {
    /// The system instruction.
    pub system: u64,
    /// The thread's earlier turns (every message before the last user turn without tool results).
    pub history: u64,
    /// The new turn: the files, the diff and the call's own text.
    pub turn: u64,
    /// Inline images.
    pub images: u64,
    /// An investigation's function calls and their results so far.
    pub steps: u64,
    /// Function declarations and the response schema.
    pub declarations: u64,
    /// What an agent run (`research`) is held at for its own reading of the web
    /// (`GEMINI_MCP_DEEP_RESEARCH_TOKENS`).
    pub agent: u64,
}

impl Estimate {
    /// Counts `req` as the backend will send it: every part of every message, the system
    /// instruction, the declarations and the schema. Blocking for a large request.
    pub fn of(req: &GenerateRequest) -> Estimate {
        let mut e = Estimate {
            system: tokens::count(&req.system_instruction),
            agent: req.agent.as_ref().map_or(0, |a| a.hold_tokens),
            ..Estimate::default()
        };
        if let Some(f) = &req.functions {
            e.declarations += tokens::count(&f.declarations.to_string());
        }
        if let Some(s) = &req.response_schema {
            e.declarations += tokens::count(&s.to_string());
        }
        // The new turn: the last user message made of text (an investigation's later requests
        // end with function results, counted as steps).
        let turn_at = req
            .contents
            .iter()
            .rposition(|m| m.role == Role::User && m.parts.iter().all(is_plain));
        let steps_from = req
            .contents
            .iter()
            .position(|m| m.parts.iter().any(|p| !is_plain(p)))
            .unwrap_or(req.contents.len());
        for (i, m) in req.contents.iter().enumerate() {
            for p in &m.parts {
                let n = match p {
                    Part::Text(t) => tokens::count(t),
                    Part::Image { mime, data } => {
                        e.images += crate::collector::images::inline_tokens(mime, data);
                        continue;
                    }
                    Part::Recorded(v) => tokens::count(&v.to_string()),
                    Part::FunctionResponse { name, response, .. } => {
                        tokens::count(name) + tokens::count(&response.to_string())
                    }
                };
                if i >= steps_from {
                    e.steps += n;
                } else if Some(i) == turn_at {
                    e.turn += n;
                } else {
                    e.history += n;
                }
            }
        }
        e
    }

    /// The Gemini CLI agent's prompt as it is handed over: the new turn's `text`, within the
    /// whole `conversation` when the agent is given it (its session holds the earlier turns
    /// either way). Blocking for a large prompt.
    pub fn of_agent_prompt(text: &str, conversation: Option<&str>) -> Estimate {
        let turn = tokens::count(text);
        let whole = conversation.map_or(turn, tokens::count);
        Estimate {
            turn,
            history: whole.saturating_sub(turn),
            ..Estimate::default()
        }
    }

    /// Both estimates, part by part.
    pub fn plus(&self, o: &Estimate) -> Estimate {
        Estimate {
            system: self.system + o.system,
            history: self.history + o.history,
            turn: self.turn + o.turn,
            images: self.images + o.images,
            steps: self.steps + o.steps,
            declarations: self.declarations + o.declarations,
            agent: self.agent + o.agent,
        }
    }

    pub fn total(&self) -> u64 {
        self.system
            + self.history
            + self.turn
            + self.images
            + self.steps
            + self.declarations
            + self.agent
    }

    /// "system instruction 310, files and text 1,402, …": the nonzero parts.
    pub fn parts(&self) -> String {
        let named = [
            ("system instruction", self.system),
            ("earlier turns", self.history),
            ("this turn's files and text", self.turn),
            ("images", self.images),
            ("the investigation's steps so far", self.steps),
            ("tool declarations and schema", self.declarations),
            ("the research agent's own reading, held", self.agent),
        ];
        named
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(what, n)| format!("{what} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// What to narrow, from the parts that weigh most.
    pub fn advice(&self) -> String {
        let mut ways = Vec::new();
        if self.turn > 0 {
            ways.push("send fewer or smaller files (or a smaller diff) and a shorter prompt");
        }
        if self.history > 0 {
            ways.push("start a new conversation instead of continuing this one");
        }
        if self.images > 0 {
            ways.push("send fewer images");
        }
        if self.steps > 0 {
            ways.push("ask a narrower task or lower max_steps");
        }
        if self.agent > 0 {
            ways.push("lower GEMINI_MCP_DEEP_RESEARCH_TOKENS");
        }
        ways.join("; ")
    }
}

/// A text part or an image: what the pipeline sends, as opposed to function calls and results.
fn is_plain(p: &Part) -> bool {
    matches!(p, Part::Text(_) | Part::Image { .. })
}

/// The request's size in bytes, roughly (images left out), to choose where to count it.
pub fn approximate_bytes(req: &GenerateRequest) -> usize {
    messages_bytes(&req.contents) + req.system_instruction.len()
}

/// The size in bytes of `messages`, roughly (images left out; a document counted by its bytes,
/// which its page count reads).
pub fn messages_bytes(messages: &[crate::gemini::Message]) -> usize {
    messages
        .iter()
        .flat_map(|m| &m.parts)
        .map(|p| match p {
            Part::Text(t) => t.len(),
            Part::Image { mime, data } if mime == "application/pdf" => data.len(),
            Part::Image { .. } => 0,
            // Function calls and results: their JSON is about as long as their strings.
            Part::Recorded(v) | Part::FunctionResponse { response: v, .. } => json_len(v),
        })
        .sum()
}

fn json_len(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::String(s) => s.len(),
        serde_json::Value::Array(a) => a.iter().map(json_len).sum(),
        serde_json::Value::Object(o) => o.iter().map(|(k, v)| k.len() + json_len(v)).sum(),
        _ => 8,
    }
}

/// The estimates of the requests admitted and not yet counted, per key: what the next
/// admission adds to what the store says was spent. One per `App`.
#[derive(Default)]
pub struct Holds {
    /// Admitting (store read, check, hold) and counting (store write, release) take turns, so an
    /// admission never sees a request neither held nor counted.
    turn: tokio::sync::Mutex<()>,
    held: Mutex<HashMap<SpendKey, Spent>>,
}

impl Holds {
    /// Waits for the turn to admit or count: held until the guard is dropped.
    pub async fn turn(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.turn.lock().await
    }

    /// What the calls in flight hold against `key`.
    pub fn held(&self, key: &SpendKey) -> Spent {
        lock(&self.held).get(key).copied().unwrap_or_default()
    }

    /// Holds `amount` against each of `keys` until the returned [`Hold`] is dropped.
    pub fn hold(self: &Arc<Holds>, keys: &[SpendKey], amount: Spent) -> Hold {
        self.change(keys, amount, true);
        Hold {
            holds: Some((self.clone(), keys.to_vec())),
            amount,
        }
    }

    fn change(&self, keys: &[SpendKey], by: Spent, add: bool) {
        let mut held = lock(&self.held);
        for key in keys {
            let h = held.entry(key.clone()).or_default();
            if add {
                h.tokens += by.tokens;
                h.micro_usd += by.micro_usd;
            } else {
                h.tokens = h.tokens.saturating_sub(by.tokens);
                h.micro_usd = h.micro_usd.saturating_sub(by.micro_usd);
            }
            if h.tokens == 0 && h.micro_usd == 0 {
                held.remove(key);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One admitted request's estimate, held until its usage is counted (the meter's `record`) or
/// the request is given up (dropped).
pub struct Hold {
    holds: Option<(Arc<Holds>, Vec<SpendKey>)>,
    amount: Spent,
}

impl Hold {
    /// Nothing held: no cap applies.
    pub fn none() -> Hold {
        Hold {
            holds: None,
            amount: Spent::default(),
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some((holds, keys)) = self.holds.take() {
            holds.change(&keys, self.amount, false);
        }
    }
}

/// How long until 00:00 UTC, e.g. `in 5 h 12 min`.
fn until_midnight() -> String {
    let secs = now_ms() / 1000;
    let left = 86_400 - secs % 86_400;
    format!("in {} h {} min", left / 3600, (left % 3600) / 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemini::{Functions, Message, ThinkingMode};
    use serde_json::json;

    fn request(contents: Vec<Message>) -> GenerateRequest {
        GenerateRequest {
            system_instruction: "You review code. ".repeat(20),
            thinking: ThinkingMode::Medium,
            ..GenerateRequest::for_tests("flash", contents)
        }
    }

    #[test]
    fn a_model_without_a_price_is_refused_under_a_usd_cap_and_free_only_without_one() {
        let tokens_only = Caps {
            daily_tokens: Some(1_000),
            ..Caps::default()
        };
        assert_eq!(tokens_only.priced(None, "gemini-3.6-flash").unwrap(), 0.0);
        for caps in [
            Caps {
                daily_usd: Some(1.0),
                ..Caps::default()
            },
            Caps {
                call_usd: Some(0.5),
                ..Caps::default()
            },
        ] {
            let e = caps
                .priced(None, "gemini-3.6-flash")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("gemini-3.6-flash has no known price")
                    && e.contains("GEMINI_MCP_PRICES")
                    && e.contains("Gemini was not called"),
                "{e}"
            );
            assert_eq!(caps.priced(Some(0.25), "gemini-3.8-flash").unwrap(), 0.25);
        }
    }

    #[test]
    fn the_estimate_counts_every_part_of_the_request() {
        let prompt = "Explain the parser's error recovery in detail. ".repeat(100);
        let only_prompt = request(vec![Message::user(prompt.clone())]);
        let e = Estimate::of(&only_prompt);
        assert_eq!(e.turn, tokens::count(&prompt));
        assert_eq!(e.system, tokens::count(&only_prompt.system_instruction));
        assert!(e.turn > 500, "{e:?}");
        assert_eq!(e.history + e.steps + e.images + e.declarations, 0);

        let mut with_all = request(vec![
            Message::user("first question"),
            Message::model("first answer"),
            Message {
                role: Role::User,
                parts: vec![
                    Part::Text(prompt.clone()),
                    Part::Image {
                        mime: "image/png".into(),
                        data: Arc::new(vec![0; 10]),
                    },
                ],
            },
            Message {
                role: Role::Model,
                parts: vec![Part::Recorded(
                    json!({"functionCall": {"name": "read_file", "args": {"path": "src/lib.rs"}}}),
                )],
            },
            Message {
                role: Role::User,
                parts: vec![Part::FunctionResponse {
                    id: None,
                    name: "read_file".into(),
                    response: json!({"output": "1│ fn main() {}\n".repeat(50)}),
                }],
            },
        ]);
        with_all.functions = Some(Functions {
            declarations: json!([{"name": "read_file", "description": "Read a file."}]),
            allow: true,
        });
        let e = Estimate::of(&with_all);
        assert_eq!(e.turn, tokens::count(&prompt));
        assert_eq!(
            e.history,
            tokens::count("first question") + tokens::count("first answer")
        );
        assert_eq!(e.images, IMAGE_TOKENS);
        assert!(e.steps > 100, "{e:?}");
        assert!(e.declarations > 5, "{e:?}");
        assert_eq!(
            e.total(),
            e.system + e.history + e.turn + e.images + e.steps + e.declarations
        );
        let parts = e.parts();
        assert!(parts.contains("this turn's files and text") && parts.contains("images 3000"));
        assert!(e.advice().contains("fewer or smaller files"));
        assert!(e.advice().contains("max_steps"));
    }

    /// The stored keys and days are the strings the caps counted under before they were typed:
    /// what a store holds from an earlier version keeps counting.
    #[test]
    fn keys_and_days_are_stored_as_before() {
        assert_eq!(
            SpendKey::Project("/work/a\n/work/b".into()).stored(),
            "project\n/work/a\n/work/b"
        );
        assert_eq!(SpendKey::Client("3f2a9c".into()).stored(), "client\n3f2a9c");
        // `YYYY-MM-DD` of the UTC day, as the date part of the threads' `iso` times was.
        assert_eq!(Day::of_ms(0).to_string(), "1970-01-01");
        assert_eq!(
            Day::of_ms(1_763_942_400_000 + 3_723_000).to_string(),
            "2025-11-24"
        );
        assert_eq!(Day::of_ms(1_763_942_400_000 - 1).to_string(), "2025-11-23");
        assert!(Day::of_ms(0) < Day::of_ms(86_400_000));
        assert_eq!(Day::today(), Day::of_ms(now_ms()));
    }
}

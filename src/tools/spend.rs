//! The daily caps (`GEMINI_MCP_DAILY_TOKENS`, `GEMINI_MCP_DAILY_USD`): the one gate every request
//! to Gemini passes, whatever the engine.
//!
//! [`Meter::generate`] is the only way the pipeline and the investigation loop reach
//! [`Gemini::generate`]: it estimates the request it is handed — the very value the backend
//! sends, so the estimate cannot drift from what goes out — refuses it before Gemini when what
//! was spent today plus the estimate would pass a cap, and counts the answer's usage at once
//! (each request of an investigation is checked and counted on its own). The Gemini CLI's agent,
//! whose requests are its own, is checked with its prompt before it starts and counted after.
//!
//! Calls in flight hold their estimate ([`Holds`]) from admission until their usage is counted,
//! so two calls admitted at once cannot both pass a cap that only one of them fits under. The
//! holds are the process's (one server or CLI); instances sharing a store see each other's calls
//! only once they are counted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::collector::tokens;
use crate::gemini::{
    CallContext, Gemini, GenerateRequest, GenerateResponse, ModelInfo, Part, Role, Usage, prices,
};
use crate::threads::{Owner, Spent, ThreadStore};

use super::ToolError;

/// What one inline image costs, as budgeted and estimated (Gemini's image tokens are not counted
/// locally).
pub const IMAGE_TOKENS: u64 = 3_000;
/// Requests up to this size are estimated where they are (well under a millisecond); larger ones
/// in `spawn_blocking`.
const INLINE_BYTES: usize = 16 * 1024;

/// The caps, as configured.
#[derive(Debug, Clone, Copy, Default)]
pub struct Caps {
    pub daily_tokens: Option<u64>,
    pub daily_usd: Option<f64>,
}

impl Caps {
    fn any(self) -> bool {
        self.daily_tokens.is_some() || self.daily_usd.is_some()
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
}

impl Estimate {
    /// Counts `req` as the backend will send it: every part of every message, the system
    /// instruction, the declarations and the schema. Blocking for a large request.
    pub fn of(req: &GenerateRequest) -> Estimate {
        let mut e = Estimate {
            system: tokens::count(&req.system_instruction),
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
                    Part::Image { .. } => {
                        e.images += IMAGE_TOKENS;
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

    /// [`Estimate::of`], off the runtime's threads when the request is large.
    async fn of_request(req: &GenerateRequest) -> Result<Estimate, ToolError> {
        if approximate_bytes(req) <= INLINE_BYTES {
            return Ok(Estimate::of(req));
        }
        let req = req.clone();
        tokio::task::spawn_blocking(move || Estimate::of(&req))
            .await
            .map_err(|e| ToolError::Internal(format!("a background task failed: {e}")))
    }

    pub fn total(&self) -> u64 {
        self.system + self.history + self.turn + self.images + self.steps + self.declarations
    }

    /// "system instruction 310, files and text 1,402, …": the nonzero parts.
    fn parts(&self) -> String {
        let named = [
            ("system instruction", self.system),
            ("earlier turns", self.history),
            ("this turn's files and text", self.turn),
            ("images", self.images),
            ("the investigation's steps so far", self.steps),
            ("tool declarations and schema", self.declarations),
        ];
        named
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(what, n)| format!("{what} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// What to narrow, from the parts that weigh most.
    fn advice(&self) -> String {
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
        ways.join("; ")
    }
}

/// A text part or an image: what the pipeline sends, as opposed to function calls and results.
fn is_plain(p: &Part) -> bool {
    matches!(p, Part::Text(_) | Part::Image { .. })
}

/// The request's size in bytes, roughly (images left out), to choose where to count it.
fn approximate_bytes(req: &GenerateRequest) -> usize {
    let parts: usize = req
        .contents
        .iter()
        .flat_map(|m| &m.parts)
        .map(|p| match p {
            Part::Text(t) => t.len(),
            Part::Image { .. } => 0,
            // Function calls and results: their JSON is about as long as their strings.
            Part::Recorded(v) | Part::FunctionResponse { response: v, .. } => json_len(v),
        })
        .sum();
    parts + req.system_instruction.len()
}

fn json_len(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::String(s) => s.len(),
        serde_json::Value::Array(a) => a.iter().map(json_len).sum(),
        serde_json::Value::Object(o) => o.iter().map(|(k, v)| k.len() + json_len(v)).sum(),
        _ => 8,
    }
}

/// One call's meter: the caps, the keys it counts against (the project and, over HTTP, the
/// client) and the store that keeps the day's count.
pub struct Meter {
    caps: Caps,
    keys: Vec<String>,
    store: Arc<dyn ThreadStore>,
    holds: Arc<Holds>,
}

/// The estimates of the requests admitted and not yet counted, per key: what the next
/// admission adds to what the store says was spent. One per pipeline.
#[derive(Default)]
pub struct Holds {
    /// Admitting (store read, check, hold) and counting (store write, release) take turns, so an
    /// admission never sees a request neither held nor counted.
    turn: tokio::sync::Mutex<()>,
    held: Mutex<HashMap<String, Spent>>,
}

impl Holds {
    fn held(&self, key: &str) -> Spent {
        lock(&self.held).get(key).copied().unwrap_or_default()
    }

    fn change(&self, keys: &[String], by: Spent, add: bool) {
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

/// One admitted request's estimate, held until its usage is counted ([`Meter::record`]) or
/// the request is given up (dropped).
pub struct Hold {
    holds: Option<(Arc<Holds>, Vec<String>)>,
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

impl Meter {
    /// A meter for a call of `owner` in `project` (the roots, one per line). Without caps it
    /// counts nothing.
    pub fn new(
        caps: Caps,
        store: Arc<dyn ThreadStore>,
        holds: Arc<Holds>,
        project: &str,
        owner: &Owner,
    ) -> Meter {
        let mut keys = Vec::new();
        if caps.any() {
            keys.push(format!("project\n{project}"));
            if !owner.is_local() {
                keys.push(format!("client\n{}", owner.as_str()));
            }
        }
        Meter {
            caps,
            keys,
            store,
            holds,
        }
    }

    /// Gemini's answer to `req`, if `req` fits under the caps; its usage is counted at once.
    pub async fn generate(
        &self,
        gemini: &Gemini,
        req: GenerateRequest,
        ctx: &CallContext,
    ) -> Result<GenerateResponse, ToolError> {
        let hold = if self.keys.is_empty() {
            Hold::none()
        } else {
            let estimate = Estimate::of_request(&req).await?;
            self.admit(&estimate, &req.model).await?
        };
        let model = req.model.id.clone();
        let answer = gemini.generate(req, ctx).await?;
        let used = answer.model_version.as_deref().unwrap_or(&model);
        self.record(hold, used, &answer.usage).await;
        Ok(answer)
    }

    /// Refuses a request estimated at `estimate` when what was spent today, what calls in
    /// flight hold and it together pass a cap, saying the estimate, the cap, what was spent, what
    /// to narrow and when the count resets; else holds the estimate until [`Meter::record`].
    pub async fn admit(&self, estimate: &Estimate, model: &ModelInfo) -> Result<Hold, ToolError> {
        if self.keys.is_empty() {
            return Ok(Hold::none());
        }
        let _turn = self.holds.turn.lock().await;
        let day = utc_day();
        let need = estimate.total();
        let input_usd = prices::estimate(
            &model.id,
            &Usage {
                input: need,
                ..Default::default()
            },
            prices::today(),
        )
        .unwrap_or(0.0);
        for key in &self.keys {
            let stored = self.store.spent(key, &day).await?;
            let held = self.holds.held(key);
            let spent = Spent {
                tokens: stored.tokens + held.tokens,
                micro_usd: stored.micro_usd + held.micro_usd,
            };
            let whose = if key.starts_with("client") {
                "this client"
            } else {
                "this project"
            };
            let advice = match estimate.advice() {
                a if a.is_empty() => " Raise the cap".to_string(),
                a => format!(" To fit, {a}; or raise the cap"),
            };
            if let Some(cap) = self.caps.daily_tokens
                && spent.tokens + need > cap
            {
                return Err(ToolError::SpendingCap(format!(
                    "the daily token cap of {cap} (GEMINI_MCP_DAILY_TOKENS) for {whose} would be passed: {} tokens \
                     spent today and this request needs about {need} tokens of input ({}), before Gemini's \
                     answer. Gemini was not called.{advice}, or wait: it resets at 00:00 UTC ({}).",
                    spent.tokens,
                    estimate.parts(),
                    until_midnight()
                )));
            }
            let spent_usd = spent.micro_usd as f64 / 1e6;
            if let Some(cap) = self.caps.daily_usd
                && spent_usd + input_usd > cap
            {
                return Err(ToolError::SpendingCap(format!(
                    "the daily spending cap of ${cap:.2} (GEMINI_MCP_DAILY_USD) for {whose} would be passed: about \
                     ${spent_usd:.4} spent today and this request's input (about {need} tokens: {}) costs about \
                     ${input_usd:.4} on {}. Gemini was not called.{advice}, or wait: it resets at 00:00 UTC \
                     ({}).",
                    estimate.parts(),
                    model.id,
                    until_midnight()
                )));
            }
        }
        let amount = Spent {
            tokens: need,
            micro_usd: (input_usd * 1e6).round() as u64,
        };
        self.holds.change(&self.keys, amount, true);
        Ok(Hold {
            holds: Some((self.holds.clone(), self.keys.clone())),
            amount,
        })
    }

    /// Counts a request's usage against the caps and releases its hold; a store failure is
    /// logged, not fatal (the answer is already here).
    pub async fn record(&self, hold: Hold, model: &str, usage: &Usage) {
        if self.keys.is_empty() {
            return;
        }
        let _turn = self.holds.turn.lock().await;
        let cost = prices::estimate(model, usage, prices::today());
        let add = Spent {
            tokens: usage.input + usage.output + usage.thinking,
            micro_usd: cost.map_or(0, |c| (c * 1e6).round() as u64),
        };
        let day = utc_day();
        for key in &self.keys {
            if let Err(e) = self.store.add_spend(key, &day, add).await {
                tracing::warn!("could not count this call against the daily cap: {e}");
            }
        }
        drop(hold);
    }

    /// Whether any cap applies (an estimate is made only then).
    pub fn is_on(&self) -> bool {
        !self.keys.is_empty()
    }
}

/// Today in UTC, `YYYY-MM-DD`.
fn utc_day() -> String {
    super::threads::iso(crate::threads::now_ms())[..10].to_string()
}

/// How long until 00:00 UTC, e.g. `in 5 h 12 min`.
fn until_midnight() -> String {
    let secs = crate::threads::now_ms() / 1000;
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
            model: crate::gemini::Catalogue::builtin("flash")
                .resolve("flash")
                .expect("flash resolves"),
            system_instruction: "You review code. ".repeat(20),
            contents,
            thinking: ThinkingMode::Medium,
            temperature: None,
            response_schema: None,
            web_search: false,
            functions: None,
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

    /// Two calls admitted before either is counted cannot both pass a cap only one fits under:
    /// the first holds its estimate until its usage is counted (or it is given up).
    #[tokio::test]
    async fn calls_in_flight_hold_their_estimate_until_counted() {
        let store: Arc<dyn ThreadStore> = Arc::new(crate::threads::memory::MemoryStore::new(
            std::time::Duration::from_secs(60),
            10,
        ));
        let caps = Caps {
            daily_tokens: Some(1_000),
            daily_usd: None,
        };
        let meter = Meter::new(caps, store, Arc::default(), "/p", &Owner::local());
        let model = request(Vec::new()).model;
        let each = Estimate {
            turn: 600,
            ..Estimate::default()
        };
        let first = meter.admit(&each, &model).await.expect("the first fits");
        let refused = meter.admit(&each, &model).await;
        assert!(
            matches!(&refused, Err(ToolError::SpendingCap(m)) if m.contains("600 tokens")),
            "the second is refused while the first is in flight: {:?}",
            refused.err()
        );
        // Counted at what it really used, the first leaves room for another.
        let used = Usage {
            input: 100,
            ..Usage::default()
        };
        meter.record(first, &model.id, &used).await;
        let second = meter
            .admit(&each, &model)
            .await
            .expect("room after counting");
        // Given up (an error, a cancellation), a hold is released with nothing counted.
        drop(second);
        let third = meter
            .admit(&each, &model)
            .await
            .expect("room after giving up");
        drop(third);
    }
}

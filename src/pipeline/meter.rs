//! The meter every request to Gemini of a call passes: [`Meter::generate`] is the only way the
//! pipeline and the investigation loop reach [`Gemini::generate`]. It estimates the request it is
//! handed — the very value the backend sends, so the estimate cannot drift from what goes out —,
//! refuses it before Gemini when what was spent today plus the estimate would pass a cap, or
//! what the call has cost plus the estimate would pass the per-call ceiling
//! ([`crate::caps`]), and counts the answer's usage at once (each request of an investigation is
//! checked and counted on its own). The Gemini CLI's agent, whose requests are its own, is
//! checked with its prompt before it starts ([`Meter::admit`]) and counted after
//! ([`Meter::record`]). The meter also keeps what the call's requests were and used
//! ([`Meter::seen`]: their hashes as sent, the usage and cost summed) for its audit record, and
//! how long the call waited on Gemini ([`Meter::waited`]); each request's latency, tokens and
//! cost go to the metrics as it ends.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::gemini::prices::PriceList;
use crate::gemini::{
    CallContext, Gemini, GenerateRequest, GenerateResponse, ModelInfo, ServiceTier, Usage,
};
use crate::metrics::Metrics;
use crate::caps::{
    Caps, Day, Estimate, Hold, Holds, INLINE_BYTES, SpendKey, Spent, approximate_bytes,
};
use crate::store::{Owner, ThreadStore};
use crate::tools::ToolError;

/// One call's meter: the caps, the keys it counts against (the project and, over HTTP, the
/// client) and the store that keeps the day's count.
pub struct Meter {
    caps: Caps,
    prices: PriceList,
    keys: Vec<SpendKey>,
    store: Arc<dyn ThreadStore>,
    holds: Arc<Holds>,
    /// What this call's requests have cost so far, in millionths of a dollar (for the per-call
    /// ceiling).
    call_micro_usd: std::sync::atomic::AtomicU64,
    seen: std::sync::Mutex<Seen>,
    metrics: Arc<Metrics>,
    /// Time spent waiting on Gemini so far, in nanoseconds.
    waited_nanos: std::sync::atomic::AtomicU64,
    /// What this call spent on context caches (their creation and storage), in millionths of a
    /// dollar: kept on the turn, since the turn's usage is the answer's.
    cache_micro_usd: std::sync::atomic::AtomicU64,
}

/// What a call's requests were and used, so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seen {
    /// Hex SHA-256 of each request body as sent (the API backends), in order.
    pub requests: Vec<String>,
    /// Summed over the requests answered.
    pub usage: Usage,
    /// Summed estimates; `None` once a request of a model without a known price used tokens.
    pub cost_usd: Option<f64>,
}

impl Meter {
    /// A meter for a call of `owner` in `project` (the roots, one per line). Without caps it
    /// counts nothing.
    pub fn new(
        caps: Caps,
        prices: PriceList,
        store: Arc<dyn ThreadStore>,
        holds: Arc<Holds>,
        project: &str,
        owner: &Owner,
        metrics: Arc<Metrics>,
    ) -> Meter {
        let mut keys = Vec::new();
        if caps.any() {
            keys.push(SpendKey::Project(project.to_string()));
            if !owner.is_local() {
                keys.push(SpendKey::Client(owner.as_str().to_string()));
            }
        }
        Meter {
            caps,
            prices,
            keys,
            store,
            holds,
            call_micro_usd: std::sync::atomic::AtomicU64::new(0),
            seen: std::sync::Mutex::new(Seen {
                cost_usd: Some(0.0),
                ..Seen::default()
            }),
            metrics,
            waited_nanos: std::sync::atomic::AtomicU64::new(0),
            cache_micro_usd: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// How long the call's requests have waited on Gemini so far.
    pub fn waited(&self) -> Duration {
        Duration::from_nanos(self.waited_nanos.load(Ordering::Relaxed))
    }

    /// `work` (a request to Gemini of `model`, or the Gemini CLI's agent), its time counted as
    /// the call's wait on Gemini and in the metrics' request latency — also when it is dropped
    /// unfinished (the call cancelled, an investigation's deadline).
    pub async fn timed<T, E>(
        &self,
        model: &str,
        work: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        let mut waiting = Waiting {
            meter: self,
            model,
            started: Instant::now(),
            outcome: "cancelled",
        };
        let result = work.await;
        waiting.outcome = if result.is_ok() { "ok" } else { "error" };
        result
    }

    /// What the call's requests were and used, so far.
    pub fn seen(&self) -> Seen {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// A meter with the per-call ceiling lifted (the user, asked, said to go on); the daily
    /// caps still hold.
    pub fn without_ceiling(mut self) -> Meter {
        self.caps.call_usd = None;
        self
    }

    /// Gemini's answer to `req`, if `req` fits under the caps; its usage is counted at once.
    pub async fn generate(
        &self,
        gemini: &Gemini,
        req: GenerateRequest,
        ctx: &CallContext,
    ) -> Result<GenerateResponse, ToolError> {
        let hold = if self.is_on() {
            let estimate = estimate(&req).await?;
            let asked = gemini.tier_sent().unwrap_or_default();
            self.admit(&estimate, &req.model, asked).await?
        } else {
            Hold::none()
        };
        let model = req.model.id.clone();
        let answer = self.timed(&model, gemini.generate(req, ctx)).await?;
        if let Some(sent) = &answer.request_sha256 {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.requests.push(sent.clone());
        }
        let used = priced_as(&self.prices, &answer, &model);
        self.record(hold, used, &answer.usage, answer.billed_tier)
            .await;
        Ok(answer)
    }

    /// Makes an explicit context cache of `req`'s system instruction and first `covers`
    /// messages (`tokens`, as estimated), kept for `ttl`, if it and `req` together fit under the
    /// caps: made, its
    /// tokens are counted as input at the standard tier and its storage for the whole `ttl` at
    /// the storage price. `Ok(None)` when the backend keeps no caches.
    pub async fn make_cache(
        &self,
        gemini: &Gemini,
        req: &GenerateRequest,
        covers: usize,
        tokens: u64,
        ttl: std::time::Duration,
        ctx: &CallContext,
    ) -> Result<Option<crate::gemini::api::cache::Made>, ToolError> {
        let model = &req.model;
        let hold = if self.is_on() {
            // The cache is made for the request that follows: it is made only if both fit, so
            // a cap never refuses the request after its cache was paid for.
            let mut estimate = estimate(req).await?;
            estimate.history += tokens;
            self.admit(&estimate, model, ServiceTier::Standard).await?
        } else {
            Hold::none()
        };
        let made = self
            .timed(
                &model.id,
                gemini.create_cache(req, covers, ttl, "gemini-mcp thread", ctx),
            )
            .await?;
        let Some(made) = made else {
            return Ok(None);
        };
        self.cache_event("made");
        let usage = Usage {
            input: made.tokens,
            ..Usage::default()
        };
        self.record(hold, &model.id, &usage, ServiceTier::Standard)
            .await;
        let (creation, storage) = self.prices.cache_cost(&model.id, made.tokens, ttl);
        self.record_usd(&model.id, storage).await;
        let spent = creation.unwrap_or(0.0) + storage.unwrap_or(0.0);
        self.cache_micro_usd.fetch_add(
            (spent * 1e6).round() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(Some(made))
    }

    /// Counts a context cache's `outcome` (made, used, lost, failed) in the metrics.
    pub fn cache_event(&self, outcome: &'static str) {
        self.metrics.context_cache(outcome);
    }

    /// What this call spent on context caches, in USD (creation and storage).
    pub fn cache_usd(&self) -> f64 {
        self.cache_micro_usd
            .load(std::sync::atomic::Ordering::Relaxed) as f64
            / 1e6
    }

    /// Counts a cost that is not a request's tokens (a cache's storage) against the call, the
    /// metrics and the daily caps; `None` (no price known) makes the call's cost unknown.
    async fn record_usd(&self, model: &str, usd: Option<f64>) {
        self.metrics
            .tokens(model, crate::metrics::Tokens::default(), usd);
        let micro = usd.map_or(0, |c| (c * 1e6).round() as u64);
        self.call_micro_usd
            .fetch_add(micro, std::sync::atomic::Ordering::Relaxed);
        {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.cost_usd = match (seen.cost_usd, usd) {
                (Some(sum), Some(c)) => Some(sum + c),
                _ => None,
            };
        }
        if self.keys.is_empty() || micro == 0 {
            return;
        }
        let _turn = self.holds.turn().await;
        let add = Spent {
            tokens: 0,
            micro_usd: micro,
        };
        let day = Day::today();
        for key in &self.keys {
            if let Err(e) = self.store.add_spend(key, day, add).await {
                tracing::warn!("could not count this call against the daily cap: {e}");
            }
        }
    }

    /// Refuses a request estimated at `estimate` (priced at `tier`, the tier asked for) when
    /// what was spent today, what calls in flight hold and it together pass a cap, saying the
    /// estimate, the cap, what was spent, what to narrow and when the count resets; else holds
    /// the estimate until [`Meter::record`].
    pub async fn admit(
        &self,
        estimate: &Estimate,
        model: &ModelInfo,
        tier: ServiceTier,
    ) -> Result<Hold, ToolError> {
        if !self.is_on() {
            return Ok(Hold::none());
        }
        let input_usd = self.input_usd(estimate, model, tier)?;
        let Some(_turn) = self.check_caps(estimate, input_usd, &model.id).await? else {
            return Ok(Hold::none());
        };
        let amount = Spent {
            tokens: estimate.total(),
            micro_usd: (input_usd * 1e6).round() as u64,
        };
        Ok(self.holds.hold(&self.keys, amount))
    }

    /// Refuses the requests of a consensus, `requests` (each asked of its own model) and `more`
    /// (the synthesis, estimated before its input exists), before the first is sent, when
    /// together they would pass the per-call ceiling or a daily cap. Nothing is held: each
    /// request is then admitted on its own as it goes ([`Meter::generate`]).
    pub async fn check_together(
        &self,
        requests: &[GenerateRequest],
        more: (Estimate, &ModelInfo),
        tier: ServiceTier,
    ) -> Result<(), ToolError> {
        if !self.is_on() {
            return Ok(());
        }
        let mut sum = more.0;
        let mut usd = self.input_usd(&more.0, more.1, tier)?;
        for req in requests {
            let e = estimate(req).await?;
            usd += self.input_usd(&e, &req.model, tier)?;
            sum = sum.plus(&e);
        }
        let names: Vec<&str> = requests.iter().map(|r| r.model.id.as_str()).collect();
        let label = format!(
            "{} (a consensus of {} models and its synthesis on {})",
            names.join(" + "),
            names.len(),
            more.1.id
        );
        self.check_caps(&sum, usd, &label).await?;
        Ok(())
    }

    /// Refuses `estimate` (its input costing `usd`, on `model`, a model or what a consensus
    /// asks) when what the call spent and it would pass the per-call ceiling, or what each key
    /// spent today, counted and held, and it would pass a daily cap. `Some`: the keys were
    /// checked, and the turn is still held so the caller can hold the estimate before another
    /// call checks; `None`: no daily cap applies.
    async fn check_caps(
        &self,
        estimate: &Estimate,
        usd: f64,
        model: &str,
    ) -> Result<Option<tokio::sync::MutexGuard<'_, ()>>, ToolError> {
        let call_usd = self
            .call_micro_usd
            .load(std::sync::atomic::Ordering::Relaxed) as f64
            / 1e6;
        self.caps.check_call(call_usd, estimate, usd, model)?;
        if self.keys.is_empty() {
            return Ok(None);
        }
        let turn = self.holds.turn().await;
        let day = Day::today();
        for key in &self.keys {
            let stored = self.store.spent(key, day).await?;
            let held = self.holds.held(key);
            let spent = Spent {
                tokens: stored.tokens + held.tokens,
                micro_usd: stored.micro_usd + held.micro_usd,
            };
            self.caps.check(key, spent, estimate, usd, model)?;
        }
        Ok(Some(turn))
    }

    /// The input of `estimate` on `model` at `tier`, in USD, as the caps price it.
    fn input_usd(
        &self,
        estimate: &Estimate,
        model: &ModelInfo,
        tier: ServiceTier,
    ) -> Result<f64, ToolError> {
        let usage = Usage {
            input: estimate.total(),
            ..Default::default()
        };
        Ok(self
            .caps
            .priced(self.prices.estimate(&model.id, &usage, tier), &model.id)?)
    }

    /// Counts a request's usage, priced at `tier` (the tier that served it), against the caps
    /// and releases its hold; a store failure is logged, not fatal (the answer is already here).
    pub async fn record(&self, hold: Hold, model: &str, usage: &Usage, tier: ServiceTier) {
        let cost = self.prices.estimate(model, usage, tier);
        let tokens = crate::metrics::Tokens {
            input: usage.input,
            output: usage.output,
            cached: usage.cached,
            thinking: usage.thinking,
        };
        self.metrics.tokens(model, tokens, cost);
        if let Some(c) = cost {
            self.call_micro_usd.fetch_add(
                (c * 1e6).round() as u64,
                std::sync::atomic::Ordering::Relaxed,
            );
        }
        {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.usage += *usage;
            let used = usage.input + usage.output + usage.thinking > 0;
            seen.cost_usd = match (seen.cost_usd, cost) {
                (Some(sum), Some(c)) => Some(sum + c),
                (sum, None) if !used => sum,
                _ => None,
            };
        }
        if self.keys.is_empty() {
            return;
        }
        let _turn = self.holds.turn().await;
        let add = Spent {
            tokens: usage.input + usage.output + usage.thinking,
            micro_usd: cost.map_or(0, |c| (c * 1e6).round() as u64),
        };
        let day = Day::today();
        for key in &self.keys {
            if let Err(e) = self.store.add_spend(key, day, add).await {
                tracing::warn!("could not count this call against the daily cap: {e}");
            }
        }
        drop(hold);
    }

    /// Whether any cap or the per-call ceiling applies (an estimate is made only then).
    pub fn is_on(&self) -> bool {
        !self.keys.is_empty() || self.caps.call_usd.is_some()
    }
}

/// A wait on Gemini in progress: counted when it ends or is given up.
struct Waiting<'a> {
    meter: &'a Meter,
    model: &'a str,
    started: Instant,
    /// `ok` or `error` once answered; `cancelled` while not.
    outcome: &'static str,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let took = self.started.elapsed();
        self.meter.waited_nanos.fetch_add(
            u64::try_from(took.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        self.meter.metrics.request(self.model, self.outcome, took);
    }
}

/// [`Estimate::of`], off the runtime's threads when the request is large.
/// The model `answer` (to a request of `asked`) is priced as: the model that answered (a
/// fallback's), else the model asked for when the version the API reports has no price of its
/// own.
pub fn priced_as<'a>(prices: &PriceList, answer: &'a GenerateResponse, asked: &'a str) -> &'a str {
    answer
        .model_version
        .as_deref()
        .filter(|v| prices.price(v).is_some())
        .or(answer.fallback.as_ref().map(|f| f.to.as_str()))
        .unwrap_or(asked)
}

/// What `answer` (to a request of `asked`) cost, priced as the meter counted it.
pub fn answer_usd(prices: &PriceList, answer: &GenerateResponse, asked: &str) -> Option<f64> {
    prices.estimate(priced_as(prices, answer, asked), &answer.usage, answer.billed_tier)
}

async fn estimate(req: &GenerateRequest) -> Result<Estimate, ToolError> {
    if approximate_bytes(req) <= INLINE_BYTES {
        return Ok(Estimate::of(req));
    }
    let req = req.clone();
    tokio::task::spawn_blocking(move || Estimate::of(&req))
        .await
        .map_err(|e| ToolError::Internal(format!("a background task failed: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prices() -> PriceList {
        PriceList::at(crate::clock::Clock::on("2026-11-27").unwrap())
    }

    fn model() -> ModelInfo {
        crate::gemini::Catalogue::builtin("flash", prices())
            .resolve("flash")
            .expect("flash resolves")
    }

    /// Two calls admitted before either is counted cannot both pass a cap only one fits under:
    /// the first holds its estimate until its usage is counted (or it is given up).
    #[tokio::test]
    async fn calls_in_flight_hold_their_estimate_until_counted() {
        let store: Arc<dyn ThreadStore> = Arc::new(crate::store::memory::MemoryStore::new(
            std::time::Duration::from_secs(60),
            10,
        ));
        let caps = Caps {
            daily_tokens: Some(1_000),
            daily_usd: None,
            call_usd: None,
        };
        let meter = Meter::new(
            caps,
            prices(),
            store,
            Arc::default(),
            "/p",
            &Owner::local(),
            Arc::default(),
        );
        let model = model();
        let each = Estimate {
            turn: 600,
            ..Estimate::default()
        };
        let standard = ServiceTier::Standard;
        let first = meter
            .admit(&each, &model, standard)
            .await
            .expect("the first fits");
        let refused = meter.admit(&each, &model, standard).await;
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
        meter.record(first, &model.id, &used, standard).await;
        let second = meter
            .admit(&each, &model, standard)
            .await
            .expect("room after counting");
        // Given up (an error, a cancellation), a hold is released with nothing counted.
        drop(second);
        let third = meter
            .admit(&each, &model, standard)
            .await
            .expect("room after giving up");
        drop(third);
    }
}

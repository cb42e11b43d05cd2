//! The retry loop of the REST backend: 408/429/500/502/503/504 retried with full-jitter
//! exponential backoff, honouring `RetryInfo` and the call deadline; 400/403/404 never.
//!
//! Each attempt reports how it failed as a [`Failure`]: the error, and whether it is worth
//! another attempt (`Retryable`). Classifying errors is the API client's job; this module owns
//! only *when* to try again: full-jitter exponential backoff (a uniform delay in
//! `0..=min(max_delay, initial × 2ⁿ)`), at most `max_attempts` attempts, never sleeping past the
//! call's deadline, and waiting at least as long as Google's `RetryInfo.retryDelay` asks.
//!
//! A small loop rather than `backon`: `backon`'s jitter is additive (`d..2d`), not full jitter,
//! and the policy has per-error rules (a minimum delay from the error, "retry an empty answer only
//! once") that read more plainly as code than as adapters. Sleeping uses `tokio::time`, so tests
//! with a paused clock run the whole schedule instantly.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::gemini::vocabulary::{CallContext, GeminiError};

/// When to try again: from `Config` (`GEMINI_MAX_ATTEMPTS`, `GEMINI_RETRY_INITIAL_MS`,
/// `GEMINI_RETRY_MAX_MS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per call, the first included (at least 1).
    pub max_attempts: u32,
    /// The backoff cap before the first retry; doubled per retry.
    pub initial_delay: Duration,
    /// Cap on one backoff delay (a `RetryInfo` delay may exceed it).
    pub max_delay: Duration,
}

/// How one attempt failed.
#[derive(Debug)]
pub struct Failure {
    pub error: GeminiError,
    pub retry: Retryable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retryable {
    /// Final: 400/403/404, a blocked prompt, a daily quota, an answer already under way.
    No,
    /// Transient (408/429/5xx, network, truncated stream): back off, waiting at least `at_least`.
    Yes { at_least: Option<Duration> },
    /// Worth exactly one more attempt per call (an empty `STOP` answer, often a hidden block).
    Once,
}

impl Failure {
    pub fn fatal(error: GeminiError) -> Failure {
        Failure {
            error,
            retry: Retryable::No,
        }
    }
    pub fn transient(error: GeminiError) -> Failure {
        Failure {
            error,
            retry: Retryable::Yes { at_least: None },
        }
    }
}

impl RetryPolicy {
    /// The backoff cap before retry number `retry` (1 = the first retry): `initial × 2^(retry-1)`,
    /// at most `max_delay`.
    pub fn ceiling(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.saturating_sub(1).min(31));
        self.initial_delay
            .saturating_mul(factor)
            .min(self.max_delay)
    }

    /// Full jitter: a uniform delay in `0..=ceiling(retry)`.
    fn jittered(&self, retry: u32, rng: &mut fastrand::Rng) -> Duration {
        self.ceiling(retry).mul_f64(rng.f64())
    }
}

/// Runs `attempt` (given the attempt number, from 1) until it succeeds, fails for good, runs out
/// of attempts, or the next sleep would end after `deadline`; returns the last error then.
/// Progress reports and `tracing` say what is being retried and when.
pub async fn run<T, F, Fut>(
    policy: &RetryPolicy,
    ctx: &CallContext,
    deadline: Instant,
    mut attempt: F,
) -> Result<T, GeminiError>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
{
    let mut rng = fastrand::Rng::new();
    let mut once_used = false;
    let mut n = 1;
    loop {
        let failure = match attempt(n).await {
            Ok(v) => return Ok(v),
            Err(f) => f,
        };
        let at_least = match failure.retry {
            Retryable::No => return Err(failure.error),
            Retryable::Once if once_used => return Err(failure.error),
            Retryable::Once => {
                once_used = true;
                None
            }
            Retryable::Yes { at_least } => at_least,
        };
        if n >= policy.max_attempts.max(1) {
            return Err(tried(failure.error, n));
        }
        let delay = policy
            .jittered(n, &mut rng)
            .max(at_least.unwrap_or_default());
        if Instant::now() + delay >= deadline {
            tracing::info!(
                attempt = n,
                delay_ms = delay.as_millis() as u64,
                "not retrying: the wait would pass the call's deadline"
            );
            return Err(tried(failure.error, n));
        }
        tracing::info!(
            attempt = n,
            of = policy.max_attempts,
            delay_ms = delay.as_millis() as u64,
            error = %failure.error,
            "retrying a Gemini call"
        );
        ctx.report(format!(
            "Gemini answered with {}; retrying in {:.1}s (attempt {} of {})",
            summary(&failure.error),
            delay.as_secs_f64(),
            n + 1,
            policy.max_attempts
        ));
        tokio::time::sleep(delay).await;
        n += 1;
    }
}

/// Says in an API error's advice how often it was tried, when that was more than once.
fn tried(error: GeminiError, attempts: u32) -> GeminiError {
    match error {
        GeminiError::Api {
            status,
            code,
            message,
            hint,
        } if attempts > 1 => GeminiError::Api {
            status,
            code,
            message,
            hint: format!("{hint} (tried {attempts} times)"),
        },
        other => other,
    }
}

/// A few words for progress messages.
fn summary(e: &GeminiError) -> String {
    match e {
        GeminiError::Api { status, code, .. } => format!("{status} {code}"),
        GeminiError::Empty { .. } => "an empty answer".into(),
        GeminiError::Transport { .. } => "a network error".into(),
        GeminiError::Malformed { .. } => "a broken stream".into(),
        GeminiError::Stalled { .. } => "silence".into(),
        _ => "an error".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn policy(max_attempts: u32) -> RetryPolicy {
        RetryPolicy {
            max_attempts,
            initial_delay: Duration::from_secs(2),
            max_delay: Duration::from_secs(30),
        }
    }

    fn unavailable() -> GeminiError {
        GeminiError::Api {
            status: 503,
            code: "UNAVAILABLE".into(),
            message: "overloaded".into(),
            hint: "later".into(),
        }
    }

    /// Runs the loop over scripted outcomes; returns the result, the attempt count and the
    /// (paused) clock time at each attempt, relative to the start.
    async fn drive(
        policy: RetryPolicy,
        deadline_after: Duration,
        outcomes: Vec<Result<&'static str, Failure>>,
    ) -> (Result<&'static str, GeminiError>, Vec<Duration>) {
        let start = Instant::now();
        let outcomes = Arc::new(Mutex::new(outcomes.into_iter()));
        let times = Arc::new(Mutex::new(Vec::new()));
        let ctx = CallContext::default();
        let r = run(&policy, &ctx, start + deadline_after, |_n| {
            let outcomes = outcomes.clone();
            let times = times.clone();
            async move {
                times.lock().unwrap().push(start.elapsed());
                outcomes
                    .lock()
                    .unwrap()
                    .next()
                    .expect("more attempts than scripted")
            }
        })
        .await;
        let times = times.lock().unwrap().clone();
        (r, times)
    }

    #[test]
    fn ceiling_doubles_and_caps() {
        let p = policy(5);
        let got: Vec<u64> = (1..=6).map(|n| p.ceiling(n).as_secs()).collect();
        assert_eq!(got, vec![2, 4, 8, 16, 30, 30]);
        assert_eq!(p.ceiling(200), Duration::from_secs(30));
    }

    #[test]
    fn jitter_stays_within_the_ceiling_and_varies() {
        let p = policy(5);
        let mut rng = fastrand::Rng::with_seed(7);
        let samples: Vec<Duration> = (0..200).map(|_| p.jittered(3, &mut rng)).collect();
        assert!(samples.iter().all(|d| *d <= Duration::from_secs(8)));
        assert!(samples.iter().any(|d| *d < Duration::from_secs(4)));
        assert!(samples.iter().any(|d| *d > Duration::from_secs(4)));
    }

    #[tokio::test(start_paused = true)]
    async fn transient_errors_retry_up_to_max_attempts_with_growing_waits() {
        let outcomes = (0..5)
            .map(|_| Err(Failure::transient(unavailable())))
            .collect();
        let (r, times) = drive(policy(5), Duration::from_secs(600), outcomes).await;
        let e = r.unwrap_err();
        assert!(matches!(e, GeminiError::Api { status: 503, .. }));
        assert!(e.to_string().ends_with("(tried 5 times)"), "{e}");
        assert_eq!(times.len(), 5);
        // Each wait lies within its full-jitter ceiling: 2, 4, 8, 16 s.
        for (i, pair) in times.windows(2).enumerate() {
            let wait = pair[1] - pair[0];
            assert!(
                wait <= policy(5).ceiling(i as u32 + 1),
                "wait {i}: {wait:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn success_after_retries_is_returned() {
        let outcomes = vec![
            Err(Failure::transient(unavailable())),
            Err(Failure::transient(unavailable())),
            Ok("answer"),
        ];
        let (r, times) = drive(policy(5), Duration::from_secs(600), outcomes).await;
        assert_eq!(r.unwrap(), "answer");
        assert_eq!(times.len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn fatal_errors_are_not_retried() {
        let outcomes = vec![Err(Failure::fatal(GeminiError::MaxTokens))];
        let (r, times) = drive(policy(5), Duration::from_secs(600), outcomes).await;
        assert!(matches!(r, Err(GeminiError::MaxTokens)));
        assert_eq!(times.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_info_sets_a_minimum_wait() {
        let quota = || Failure {
            error: unavailable(),
            retry: Retryable::Yes {
                at_least: Some(Duration::from_secs(45)),
            },
        };
        let outcomes = vec![Err(quota()), Err(quota()), Ok("answer")];
        let (r, times) = drive(policy(5), Duration::from_secs(600), outcomes).await;
        assert_eq!(r.unwrap(), "answer");
        // 45 s is above every backoff ceiling here (2 s, 4 s): the waits are exactly 45 s.
        assert_eq!(times[1] - times[0], Duration::from_secs(45));
        assert_eq!(times[2] - times[1], Duration::from_secs(45));
    }

    #[tokio::test(start_paused = true)]
    async fn once_retryable_errors_get_exactly_one_retry() {
        let empty = || Failure {
            error: GeminiError::Empty {
                finish_reason: "STOP".into(),
            },
            retry: Retryable::Once,
        };
        let (r, times) = drive(
            policy(5),
            Duration::from_secs(600),
            vec![Err(empty()), Err(empty())],
        )
        .await;
        assert!(matches!(r, Err(GeminiError::Empty { .. })));
        assert_eq!(times.len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn no_sleep_past_the_deadline() {
        let slow = || Failure {
            error: unavailable(),
            retry: Retryable::Yes {
                at_least: Some(Duration::from_secs(100)),
            },
        };
        let (r, times) = drive(
            policy(5),
            Duration::from_secs(150),
            vec![Err(slow()), Err(slow())],
        )
        .await;
        assert!(matches!(r, Err(GeminiError::Api { status: 503, .. })));
        // One retry after 100 s; a second wait would end at 200 s > 150 s.
        assert_eq!(times, vec![Duration::ZERO, Duration::from_secs(100)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_single_attempt_policy_never_retries() {
        let (r, times) = drive(
            policy(1),
            Duration::from_secs(600),
            vec![Err(Failure::transient(unavailable()))],
        )
        .await;
        assert!(!r.unwrap_err().to_string().contains("tried"));
        assert_eq!(times.len(), 1);
    }
}

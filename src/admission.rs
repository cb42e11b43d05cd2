//! Admission of tool calls: per-tool rate limits (GCRA, with `governor`), a per-client
//! concurrency limit, and the drain gate that refuses new calls once the server is shutting down
//! while counting the calls still in flight.
//!
//! The gate sits in front of the pipeline (`Server::call_tool_with`), after the arguments were
//! parsed and planned (a refused argument costs no quota), and before any Gemini call. It is
//! transport-agnostic: HTTP builds one with the rate limits on by default; stdio builds one only
//! when `GEMINI_MCP_RATE_LIMITS` is set explicitly. Limits are per process: N instances behind a
//! load balancer admit up to N times a client's limit (documented in the README).
//!
//! A std mutex guards the concurrency counts: it is held for a map update, never across an
//! `.await`.

use std::collections::HashMap;
use std::fmt;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

/// Who is calling, for the per-client limits: a token's label when the transport authenticates
/// (never the token itself), else the peer address; `stdio` for the one stdio client.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientId(pub String);

/// The unit of a rate: calls per second, minute or hour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Per {
    Second,
    Minute,
    Hour,
}

impl Per {
    fn as_str(self) -> &'static str {
        match self {
            Per::Second => "s",
            Per::Minute => "min",
            Per::Hour => "h",
        }
    }
    fn word(self) -> &'static str {
        match self {
            Per::Second => "second",
            Per::Minute => "minute",
            Per::Hour => "hour",
        }
    }
}

/// `count` calls per `per`, with a burst of `count` (GCRA: one call's worth of quota comes back
/// every `per / count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub count: NonZeroU32,
    pub per: Per,
}

impl Rate {
    fn quota(self) -> Quota {
        match self.per {
            Per::Second => Quota::per_second(self.count),
            Per::Minute => Quota::per_minute(self.count),
            Per::Hour => Quota::per_hour(self.count),
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.count, self.per.as_str())
    }
}

/// Per-tool rate limits, by tool name; a tool not named has none. Empty = off. The names are
/// taken as written: which names are tools is the tools' table's to say (`tools::spec`, which
/// also holds the defaults).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RateLimits(pub Vec<(String, Rate)>);

impl RateLimits {
    pub fn is_off(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, tool: &str) -> Option<Rate> {
        self.0.iter().find(|(t, _)| t == tool).map(|(_, r)| *r)
    }
}

impl std::str::FromStr for RateLimits {
    type Err = String;

    /// `off`, or `tool=N/unit` items separated by commas, unit `s`, `min` or `h` (the long
    /// forms `sec`, `second`, `minute`, `hour` too). The list replaces the built-in table.
    fn from_str(s: &str) -> Result<RateLimits, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("off") || s.eq_ignore_ascii_case("none") {
            return Ok(RateLimits::default());
        }
        let mut out: Vec<(String, Rate)> = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, rate) = item
                .split_once('=')
                .ok_or_else(|| format!("`{item}` is not `tool=N/unit` (e.g. chat=10/min)"))?;
            let tool = name.trim().to_string();
            let (count, unit) = rate
                .trim()
                .split_once('/')
                .ok_or_else(|| format!("`{item}`: the rate must be N/unit, e.g. 10/min"))?;
            let count: u32 = count
                .trim()
                .parse()
                .map_err(|_| format!("`{item}`: `{count}` is not a whole number of calls"))?;
            let count = NonZeroU32::new(count).ok_or_else(|| {
                format!("`{item}`: a rate of 0 would refuse every call; disable the tool with DISABLED_TOOLS instead")
            })?;
            let per = match unit.trim() {
                "s" | "sec" | "second" => Per::Second,
                "min" | "minute" => Per::Minute,
                "h" | "hour" => Per::Hour,
                other => {
                    return Err(format!("`{item}`: unit `{other}` is not one of s, min, h"));
                }
            };
            if out.iter().any(|(t, _)| *t == tool) {
                return Err(format!("`{tool}` is named twice"));
            }
            out.push((tool, Rate { count, per }));
        }
        if out.is_empty() {
            return Err("names no limit; use `off` to switch rate limits off".into());
        }
        Ok(RateLimits(out))
    }
}

impl fmt::Display for RateLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_off() {
            return f.write_str("off");
        }
        for (i, (tool, rate)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{tool}={rate}")?;
        }
        Ok(())
    }
}

/// Why a call was not admitted. The message says which limit and when to retry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "rate limit reached: `{tool}` allows {rate} call{} per {per} per client (GEMINI_MCP_RATE_LIMITS); retry in {} s",
        if *rate == 1 { "" } else { "s" },
        retry_after.as_secs_f64().ceil().max(1.0) as u64
    )]
    Rate {
        tool: String,
        rate: u32,
        per: &'static str,
        retry_after: Duration,
    },
    #[error(
        "too many calls in flight from this client: the limit is {limit} at a time (GEMINI_MCP_HTTP_CLIENT_CONCURRENCY); retry when one of them has finished"
    )]
    Concurrency { limit: usize },
    #[error(
        "the server is shutting down and takes no new calls; send the call again (another instance, or this one once restarted, will answer)"
    )]
    ShuttingDown,
}

impl Refusal {
    /// When a retry can succeed, if known.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Refusal::Rate { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }
}

/// The admission gate. Cheap to share (`Arc`).
pub struct Gate {
    rates: Vec<(String, Rate, DefaultKeyedRateLimiter<ClientId>)>,
    /// Calls in flight per client, and the limit (`None`: unlimited).
    concurrency: Option<usize>,
    in_flight: Arc<Mutex<HashMap<ClientId, usize>>>,
    /// Every admitted call holds a token; closed when draining.
    tracker: TaskTracker,
}

/// Held for the duration of one admitted call.
pub struct Admission {
    _token: TaskTrackerToken,
    client: ClientId,
    in_flight: Option<Arc<Mutex<HashMap<ClientId, usize>>>>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Some(map) = &self.in_flight {
            let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(n) = map.get_mut(&self.client) {
                *n -= 1;
                if *n == 0 {
                    map.remove(&self.client);
                }
            }
        }
    }
}

impl Gate {
    /// A gate with these rate limits and at most `concurrency` calls in flight per client.
    pub fn new(rates: &RateLimits, concurrency: Option<usize>) -> Gate {
        Gate {
            rates: rates
                .0
                .iter()
                .map(|(tool, rate)| (tool.clone(), *rate, RateLimiter::keyed(rate.quota())))
                .collect(),
            concurrency,
            in_flight: Arc::new(Mutex::new(HashMap::new())),
            tracker: TaskTracker::new(),
        }
    }

    /// Admits one call of `tool` from `client`, or says why not. The call counts as in flight
    /// until the returned [`Admission`] is dropped.
    pub fn admit(&self, tool: &str, client: &ClientId) -> Result<Admission, Refusal> {
        if self.tracker.is_closed() {
            return Err(Refusal::ShuttingDown);
        }
        // Concurrency first: a call refused for concurrency must not spend rate quota.
        let in_flight = match self.concurrency {
            None => None,
            Some(limit) => {
                let mut map = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
                let n = map.entry(client.clone()).or_insert(0);
                if *n >= limit {
                    return Err(Refusal::Concurrency { limit });
                }
                *n += 1;
                Some(self.in_flight.clone())
            }
        };
        let admission = Admission {
            _token: self.tracker.token(),
            client: client.clone(),
            in_flight,
        };
        if let Some((_, rate, limiter)) = self.rates.iter().find(|(t, _, _)| t == tool)
            && let Err(not_until) = limiter.check_key(client)
        {
            // `admission` drops here and gives the concurrency slot back.
            return Err(Refusal::Rate {
                tool: tool.to_string(),
                rate: rate.count.get(),
                per: rate.per.word(),
                retry_after: not_until.wait_time_from(DefaultClock::default().now()),
            });
        }
        Ok(admission)
    }

    /// Calls admitted and not finished.
    pub fn in_flight(&self) -> usize {
        self.tracker.len()
    }

    /// Refuses every new call from now on.
    pub fn close(&self) {
        self.tracker.close();
    }

    /// Waits until the gate is closed and no admitted call is left.
    pub async fn drained(&self) {
        self.tracker.wait().await;
    }

    /// Forgets clients whose quota has fully come back (bounds the limiters' memory); call it
    /// now and then.
    pub fn forget_idle_clients(&self) {
        for (_, _, limiter) in &self.rates {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(s: &str) -> ClientId {
        ClientId(s.into())
    }

    #[test]
    fn parses_and_prints_rate_limits() {
        let text = "chat=10/min,analyze=5/min,investigate=3/min";
        let r: RateLimits = text.parse().unwrap();
        assert_eq!(r.to_string(), text);
        assert_eq!(r.get("chat").map(|r| r.count.get()), Some(10));
        assert!("off".parse::<RateLimits>().unwrap().is_off());
        let r: RateLimits = " chat = 2/s , precommit=1/hour".parse().unwrap();
        assert_eq!(r.to_string(), "chat=2/s,precommit=1/h");
        assert_eq!(r.get("debug"), None);
    }

    #[test]
    fn bad_rate_limits_say_what_is_wrong() {
        for (text, needle) in [
            ("chat", "not `tool=N/unit`"),
            ("chat=ten/min", "not a whole number"),
            ("chat=0/min", "a rate of 0"),
            ("chat=1/day", "unit `day`"),
            ("chat=1/min,chat=2/min", "named twice"),
            (",", "names no limit"),
        ] {
            let err = text.parse::<RateLimits>().unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn rate_limit_is_per_client_and_per_tool_and_says_when_to_retry() {
        let gate = Gate::new(&"chat=2/min".parse().unwrap(), None);
        let a = client("a");
        assert!(gate.admit("chat", &a).is_ok());
        assert!(gate.admit("chat", &a).is_ok());
        let refused = gate.admit("chat", &a).err().expect("third call refused");
        let Refusal::Rate { retry_after, .. } = &refused else {
            panic!("{refused:?}")
        };
        assert!(*retry_after > Duration::ZERO && *retry_after <= Duration::from_secs(30));
        let text = refused.to_string();
        assert!(text.contains("`chat` allows 2 calls per minute"), "{text}");
        assert!(text.contains("retry in "), "{text}");
        // Another client, and another tool, are not affected.
        assert!(gate.admit("chat", &client("b")).is_ok());
        assert!(gate.admit("debug", &a).is_ok());
    }

    #[test]
    fn concurrency_is_per_client_and_released_on_drop() {
        let gate = Gate::new(&RateLimits::default(), Some(2));
        let a = client("a");
        let first = gate.admit("chat", &a).unwrap();
        let _second = gate.admit("chat", &a).unwrap();
        assert_eq!(
            gate.admit("chat", &a).err(),
            Some(Refusal::Concurrency { limit: 2 })
        );
        assert!(gate.admit("chat", &client("b")).is_ok());
        assert_eq!(gate.in_flight(), 2);
        drop(first);
        let _third = gate.admit("chat", &a).unwrap();
        assert_eq!(gate.in_flight(), 2);
    }

    #[test]
    fn a_call_refused_for_concurrency_spends_no_rate_quota() {
        let gate = Gate::new(&"chat=1/min".parse().unwrap(), Some(1));
        let a = client("a");
        let held = gate.admit("debug", &a).unwrap();
        assert!(matches!(
            gate.admit("chat", &a),
            Err(Refusal::Concurrency { .. })
        ));
        drop(held);
        assert!(gate.admit("chat", &a).is_ok());
    }

    #[tokio::test]
    async fn closing_refuses_new_calls_and_drains_the_admitted_ones() {
        let gate = Arc::new(Gate::new(&RateLimits::default(), None));
        let call = gate.admit("chat", &client("a")).unwrap();
        gate.close();
        assert_eq!(
            gate.admit("chat", &client("a")).err(),
            Some(Refusal::ShuttingDown)
        );
        let waiter = tokio::spawn({
            let gate = gate.clone();
            async move { gate.drained().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(call);
        waiter.await.unwrap();
        assert_eq!(gate.in_flight(), 0);
    }
}

//! The cache step (explicit context caching, `GEMINI_MCP_CONTEXT_CACHE`): a continued thread's
//! request is answered from a cache at Google holding its stable front — the system instruction
//! and the thread's earlier turns — and sends only the new turn, whose tokens are then billed at
//! the cached price (a tenth) plus the cache's storage.
//!
//! When: a thread's second turn on, whatever its tool, when the front reaches the model's least
//! cacheable size (a continued thread is likely to be continued again; a cache pays from its
//! second use, its creation costing the front at the input price); a first call makes none
//! unless another call sent its very front before ([`first`]: a review re-run), nor does a call
//! with web search, nor the Gemini CLI; an
//! investigation caches its own growing front instead ([`StepCache`]). What the thread's last
//! turn left (`store::ContextCache`) is used while its model is the request's, it has not
//! expired, and the request's own first messages have the digest it holds — so a changed file
//! (its earlier turn re-rendered with the new content), an earlier turn left out or another
//! model never reads a stale cache. One cache serves the thread across tools: a cache holds the
//! system instruction of the call that made it, so a call of another tool (another system
//! instruction) sends its own at the head of its new turn, marked as this turn's instructions
//! ([`own_instructions`]). When the part sent past the cache has grown larger than the cache, a
//! new one over the whole front replaces it. A
//! cache is kept for `GEMINI_MCP_CONTEXT_CACHE_TTL_SECS`, never past the thread's own expiry;
//! one left behind (a call that failed, a server that stopped) expires by its TTL at Google.
//!
//! Money: making one goes through the call's meter (the caps, the metrics, the audit's usage):
//! its tokens as input, its storage for the whole TTL. A cache that cannot be made (a quota, an
//! error) costs the call nothing but the whole request, which is sent as before.

mod decision;
mod first;

use std::time::Duration;

pub(super) use decision::{Action, Decision};
use decision::{MARGIN, min_tokens};
pub(super) use first::Head;

use super::Services;
use super::blocking::{INLINE_COUNT_BYTES, blocking};
use super::meter::Meter;
use crate::collector::tokens;
use crate::gemini::{CacheUse, CallContext, GenerateRequest, Part};
use crate::store::{ContextCache, now_ms};

/// What the window step found of the thread's front.
pub(super) struct Front {
    /// What the earlier turns count.
    pub history_tokens: u64,
    /// How many of the oldest turns no longer fit (the front then changes every turn).
    pub omitted_turns: usize,
    /// A first call's files and diff (`None` for a continued thread's call, or a call with
    /// neither): a front another call sent too is read from a cache ([`first`]).
    pub first: Option<Head>,
}

/// What the cache step leaves once the request is sent: the cache the thread keeps, and the
/// front whose cache a first call read.
#[derive(Default)]
pub(super) struct Kept {
    pub thread: Option<ContextCache>,
    front: Option<String>,
}

/// What the cache step does for `request`, given what the thread's last turn left (`kept`).
pub(super) async fn decide(
    services: &Services,
    request: &GenerateRequest,
    kept: Option<ContextCache>,
    front: &Front,
) -> Decision {
    let calls = &services.config.calls;
    let covers = request.contents.len().saturating_sub(1);
    let nothing = Decision::nothing();
    // A thread whose oldest turns no longer fit changes its front every turn: a cache of it
    // would be made each turn and serve none.
    let eligible = front.omitted_turns == 0
        && calls.context_cache
        && services.gemini.keeps_caches()
        && request.functions.is_none()
        && request.agent.is_none()
        && !request.web_search;
    if !eligible {
        return nothing;
    }
    if covers == 0 {
        return match &front.first {
            Some(head) => first::decide(services, request, head).await,
            None => nothing,
        };
    }
    if covers < 2 {
        return nothing;
    }
    let now = now_ms();
    let name = kept.as_ref().map(|k| k.name.clone());
    let usable = kept.filter(|k| {
        k.model == request.model.id
            && k.covers <= covers
            && k.expires_ms > now + MARGIN.as_millis() as u64
            && (request.front_digest(k.covers) == k.digest || same_messages(request, k))
    });
    // A cache whose front no longer matches (a file changed, another model) serves no later
    // request either: it is deleted rather than kept until it expires.
    let stale = name.filter(|_| usable.is_none());
    if let Some(k) = &usable {
        let past = front_tokens(request, k.covers, covers).await;
        if past <= k.tokens {
            return Decision {
                usable,
                stale,
                action: Action::UseKept,
                first: None,
            };
        }
    }
    // A cache pays from its second use (its creation costs the front at the input price, and
    // its storage): one is made from a thread's second turn, which says the thread goes on.
    let tokens = tokens::count(&request.system_instruction) + front.history_tokens;
    let action = if tokens >= min_tokens(&request.model.id) {
        Action::Make {
            tokens,
            covers,
            ttl: calls.context_cache_ttl.min(services.config.threads.ttl),
        }
    } else {
        Action::None
    };
    Decision {
        usable,
        stale,
        action,
        first: None,
    }
}

/// `request` answered from a cache when that pays, and the cache the thread keeps after this
/// call (`None`: none). `kept` is what the thread's last turn left.
pub(super) async fn attach(
    services: &Services,
    request: GenerateRequest,
    kept: Option<ContextCache>,
    front: Front,
    meter: &Meter,
    ctx: &CallContext,
) -> (GenerateRequest, Kept) {
    let decision = decide(services, &request, kept, &front).await;
    if decision.first.is_some() {
        let (request, front) = first::attach(services, request, decision, meter, ctx).await;
        return (
            request,
            Kept {
                thread: None,
                front,
            },
        );
    }
    let (request, thread) = for_thread(services, request, decision, meter, ctx).await;
    (
        request,
        Kept {
            thread,
            front: None,
        },
    )
}

/// [`attach`] for a continued thread's request.
async fn for_thread(
    services: &Services,
    mut request: GenerateRequest,
    decision: Decision,
    meter: &Meter,
    ctx: &CallContext,
) -> (GenerateRequest, Option<ContextCache>) {
    let Decision {
        usable,
        stale,
        action,
        ..
    } = decision;
    if let Some(name) = stale {
        forget(services, name);
    }
    let (tokens, covers, ttl) = match action {
        Action::None | Action::UseKept | Action::KeepSeen { .. } => {
            return with_kept(request, usable);
        }
        Action::Make {
            tokens,
            covers,
            ttl,
        } => (tokens, covers, ttl),
    };
    let now = now_ms();
    match meter
        .make_cache(&services.gemini, &request, covers, tokens, ttl, ctx)
        .await
    {
        Ok(Some(made)) => {
            if let Some(old) = usable {
                forget(services, old.name);
            }
            let record = ContextCache {
                name: made.name.clone(),
                model: request.model.id.clone(),
                covers,
                digest: request.front_digest(covers),
                messages_digest: messages_only(&request, covers),
                tokens: made.tokens.max(tokens),
                expires_ms: now + ttl.as_millis() as u64,
            };
            request.cache = Some(CacheUse {
                name: made.name,
                covers,
            });
            (request, Some(record))
        }
        Ok(None) => with_kept(request, usable),
        Err(e) => {
            // A refused or failed cache costs the call nothing but the whole request.
            meter.cache_event("failed");
            tracing::info!(model = %request.model.id, "no context cache made: {e}");
            with_kept(request, usable)
        }
    }
}

/// The cache the thread keeps once `answer` is in: the one the request used, unless Google
/// had lost it (then forgotten); counted as used or lost.
pub(super) async fn settled(
    services: &Services,
    meter: &Meter,
    answer: &crate::gemini::GenerateResponse,
    kept: Kept,
) -> Option<ContextCache> {
    let Kept { thread: used, front } = kept;
    if let Some(key) = &front {
        first::settled(services, answer.cache_lost, key).await;
    }
    if answer.cache_lost {
        meter.cache_event("lost");
        return None;
    }
    if used.is_some() || front.is_some() {
        meter.cache_event("used");
    }
    used
}

/// `request` answered from the cache the thread already has, if it has a usable one; a cache
/// made with another system instruction (another tool's) gets this call's at the head of the
/// new turn ([`own_instructions`]).
fn with_kept(
    mut request: GenerateRequest,
    usable: Option<ContextCache>,
) -> (GenerateRequest, Option<ContextCache>) {
    if let Some(k) = &usable {
        if request.front_digest(k.covers) != k.digest {
            own_instructions(&mut request);
        }
        request.cache = Some(CacheUse {
            name: k.name.clone(),
            covers: k.covers,
        });
    }
    (request, usable)
}

/// Hex SHA-256 of the first `covers` messages alone (no system instruction): what a cache
/// shares with a request of another tool.
fn messages_only(request: &GenerateRequest, covers: usize) -> String {
    crate::gemini::messages_digest("", &request.contents[..covers.min(request.contents.len())])
}

/// Whether `kept` holds `request`'s first messages byte for byte, whatever system instruction
/// it was made with (a cache stored before it kept that digest serves only its own).
fn same_messages(request: &GenerateRequest, kept: &ContextCache) -> bool {
    !kept.messages_digest.is_empty() && messages_only(request, kept.covers) == kept.messages_digest
}

/// The heading of a call's own instructions sent in its turn (the cache holds another's).
pub(super) const OWN_INSTRUCTIONS: &str = "# Instructions for this turn";

/// Puts `request`'s system instruction at the head of its new turn (its last message), marked
/// as taking the place of the cached one: a cache holds the system instruction of the call that
/// made it, and nothing may be sent beside it.
fn own_instructions(request: &mut GenerateRequest) {
    let system = std::mem::take(&mut request.system_instruction);
    if system.trim().is_empty() {
        return;
    }
    let head = format!(
        "{OWN_INSTRUCTIONS}\n\nFor this turn, follow these instructions in place of the system instruction above.\n\n{}\n\n---\n\n",
        system.trim_end()
    );
    if let Some(last) = request.contents.last_mut() {
        match last.parts.first_mut() {
            Some(Part::Text(t)) => t.insert_str(0, &head),
            _ => last.parts.insert(0, Part::Text(head)),
        }
    }
}

/// Tokens of the text of messages `from..to` (images at their flat rate); a large span is
/// counted off the runtime's threads.
async fn front_tokens(request: &GenerateRequest, from: usize, to: usize) -> u64 {
    let span = &request.contents[from.min(to)..to.min(request.contents.len())];
    let count = |span: &[crate::gemini::Message]| -> u64 {
        span.iter()
            .flat_map(|m| &m.parts)
            .map(|p| match p {
                Part::Text(t) => tokens::count(t),
                Part::Image { mime, data } => crate::collector::images::inline_tokens(mime, data),
                Part::Recorded(v) => tokens::count(&v.to_string()),
                Part::FunctionResponse { response, .. } => tokens::count(&response.to_string()),
            })
            .sum()
    };
    if crate::caps::messages_bytes(span) <= INLINE_COUNT_BYTES {
        return count(span);
    }
    let span = span.to_vec();
    // A count that could not be made is taken as too large to cache: nothing is made of it.
    blocking(move || count(&span)).await.unwrap_or(u64::MAX)
}

/// Deletes a cache the thread no longer uses, in the background (it expires by itself anyway).
pub(super) fn forget(services: &Services, name: String) {
    let gemini = services.gemini.clone();
    tokio::spawn(async move {
        if let Err(e) = gemini.delete_cache(&name).await {
            tracing::info!("could not delete a context cache (it expires by itself): {e}");
        }
    });
}

/// The context cache of an investigation's front: its requests grow by a model turn and the
/// function results each step, so from its third request the front (system instruction, the
/// function declarations, every message but the last) is cached, and later steps send only
/// what follows; renewed when the part past it outgrows it; deleted when the investigation
/// ends. It is the call's own: no thread keeps it.
pub(super) struct StepCache {
    gemini: std::sync::Arc<crate::gemini::Gemini>,
    held: Option<ContextCache>,
}

impl StepCache {
    pub(super) fn new(gemini: std::sync::Arc<crate::gemini::Gemini>) -> StepCache {
        StepCache { gemini, held: None }
    }

    /// Names the cache in `request` (the investigation's `n`th), making or renewing it when
    /// that pays.
    pub(super) async fn attach(
        &mut self,
        meter: &Meter,
        request: &mut GenerateRequest,
        n: u32,
        ttl: Duration,
        ctx: &CallContext,
    ) {
        request.cache = None;
        let covers = request.contents.len().saturating_sub(1);
        if n < 3 || covers < 2 || request.web_search {
            return;
        }
        if let Some(h) = &self.held {
            let past = front_tokens(request, h.covers, covers).await;
            if h.covers <= covers && past <= h.tokens && request.front_digest(h.covers) == h.digest {
                request.cache = Some(CacheUse {
                    name: h.name.clone(),
                    covers: h.covers,
                });
                return;
            }
        }
        let declarations = request
            .functions
            .as_ref()
            .map_or(String::new(), |f| f.declarations.to_string());
        // A text has no more tokens than bytes: a front too short by its bytes (roughly) is
        // not counted, so the first small steps cost no count.
        let bytes = request.system_instruction.len()
            + declarations.len()
            + crate::caps::messages_bytes(&request.contents[..covers]);
        if (bytes as u64) < min_tokens(&request.model.id) {
            return;
        }
        let front = tokens::count(&request.system_instruction)
            + tokens::count(&declarations)
            + front_tokens(request, 0, covers).await;
        if front < min_tokens(&request.model.id) {
            return;
        }
        match meter
            .make_cache(&self.gemini, request, covers, front, ttl, ctx)
            .await
        {
            Ok(Some(made)) => {
                if let Some(old) = self.held.take() {
                    self.forget(old.name);
                }
                request.cache = Some(CacheUse {
                    name: made.name.clone(),
                    covers,
                });
                self.held = Some(ContextCache {
                    name: made.name,
                    model: request.model.id.clone(),
                    covers,
                    digest: request.front_digest(covers),
                    // The investigation's own: no other call reads it.
                    messages_digest: String::new(),
                    tokens: made.tokens.max(front),
                    expires_ms: now_ms() + ttl.as_millis() as u64,
                });
            }
            Ok(None) => {}
            Err(e) => {
                meter.cache_event("failed");
                tracing::info!(model = %request.model.id, "no context cache made: {e}");
            }
        }
    }

    fn forget(&self, name: String) {
        let gemini = self.gemini.clone();
        tokio::spawn(async move {
            if let Err(e) = gemini.delete_cache(&name).await {
                tracing::info!("could not delete a context cache (it expires by itself): {e}");
            }
        });
    }
}

impl Drop for StepCache {
    fn drop(&mut self) {
        if let Some(h) = self.held.take()
            && tokio::runtime::Handle::try_current().is_ok()
        {
            self.forget(h.name);
        }
    }
}

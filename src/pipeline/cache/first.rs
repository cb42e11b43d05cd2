//! The cache step for a first call: a front sent again by another call. A call that starts a
//! thread has no earlier turn to cache, but its system instruction, its files and its diff may
//! be what an earlier call sent too: a review re-run over an unchanged change, a second question
//! about the same files. Its front is kept in the store as seen (`store::fronts`), under a
//! digest of the owner, the model and those bytes, for `GEMINI_MCP_CONTEXT_CACHE_TTL_SECS`; the
//! call that sends the same front again within that time makes a cache of it and records it
//! there, and later calls read that cache. A one-off call makes none: its front is only
//! recorded, which costs nothing at Google.
//!
//! The new turn is then sent as two user messages, its head (the files and the diff, which the
//! cache holds) and the rest (what was left out, the request, images): a cache holds whole
//! messages. A changed file, another diff, another system instruction (another tool, other
//! rules) or another model gives another digest, so nothing stale is read. A cache Google lost
//! is recorded as gone, and the next call sending the front makes a new one. No thread owns such
//! a cache: it expires at Google by its TTL.

use std::time::Duration;

use sha2::{Digest, Sha256};

use super::decision::{Action, Decision, Found, MARGIN, min_tokens};
use crate::collector::tokens;
use crate::gemini::{CacheUse, CallContext, GenerateRequest, Message, Part};
use crate::pipeline::meter::Meter;
use crate::pipeline::services::Services;
use crate::store::fronts::SeenFront;
use crate::store::{ContextCache, Owner, now_ms};

/// A first call's files and diff, at the head of its new turn's text.
pub(crate) struct Head {
    /// Whose call it is: a front is found only by calls of the same client.
    pub owner: Owner,
    /// The bytes of the files' and the diff's blocks at the head of the text
    /// (`prompt::head_len`).
    pub bytes: usize,
    /// What they count.
    pub tokens: u64,
}

/// What the cache step would do for a first call sending `head`: record its front as seen,
/// make a cache of a front seen before, or read the cache made of it.
pub(super) async fn decide(services: &Services, request: &GenerateRequest, head: &Head) -> Decision {
    let tokens = tokens::count(&request.system_instruction) + head.tokens;
    if head.bytes == 0 || tokens < min_tokens(&request.model.id) {
        return Decision::nothing();
    }
    let Some(text) = head_of(request, head.bytes) else {
        return Decision::nothing();
    };
    // What a cache of the divided request's head holds (`GenerateRequest::front_digest(1)`).
    let digest = crate::gemini::messages_digest(&request.system_instruction, &[Message::user(text)]);
    let key = key_of(&head.owner, &request.model.id, &digest);
    let seen = match services.store.seen_front(&key).await {
        Ok(seen) => seen,
        Err(e) => {
            // The store is down: the call is sent whole, as without a cache.
            tracing::info!("the fronts seen could not be read, no context cache: {e}");
            return Decision::nothing();
        }
    };
    let ttl = services.config.calls.context_cache_ttl;
    let now = now_ms();
    let usable = seen.as_ref().and_then(|s| s.cache.clone()).filter(|c| {
        c.model == request.model.id
            && c.covers == 1
            && c.digest == digest
            && c.expires_ms > now + MARGIN.as_millis() as u64
    });
    let action = match (&seen, &usable) {
        (_, Some(_)) => Action::UseKept,
        // Seen before (or its cache expired or was lost): sent a second time, it is likely sent
        // again, so a cache pays.
        (Some(_), None) => Action::Make {
            tokens,
            covers: 1,
            ttl,
        },
        (None, None) => Action::KeepSeen { ttl },
    };
    Decision {
        usable,
        stale: None,
        action,
        first: Some(Found {
            key,
            at: head.bytes,
            digest,
        }),
    }
}

/// `request` as `decision` says (a first call's): its front recorded as seen, or read from a
/// cache of it (made now when it was seen before). Also returns the key of the front whose cache
/// the request names, to forget a cache Google lost ([`settled`]).
pub(super) async fn attach(
    services: &Services,
    mut request: GenerateRequest,
    decision: Decision,
    meter: &Meter,
    ctx: &CallContext,
) -> (GenerateRequest, Option<String>) {
    let Some(found) = decision.first else {
        return (request, None);
    };
    match decision.action {
        Action::None => (request, None),
        Action::KeepSeen { ttl } => {
            keep(services, &found.key, &SeenFront::default(), ttl).await;
            (request, None)
        }
        Action::UseKept => match decision.usable {
            Some(kept) if divide(&mut request, found.at) => {
                request.cache = Some(CacheUse {
                    name: kept.name,
                    covers: 1,
                });
                (request, Some(found.key))
            }
            _ => (request, None),
        },
        Action::Make { tokens, ttl, .. } => {
            // Divided for the cache's making; sent as one message, as before, if none is made.
            let mut divided = request.clone();
            if !divide(&mut divided, found.at) {
                return (request, None);
            }
            let now = now_ms();
            match meter
                .make_cache(&services.gemini, &divided, 1, tokens, ttl, ctx)
                .await
            {
                Ok(Some(made)) => {
                    let record = ContextCache {
                        name: made.name.clone(),
                        model: divided.model.id.clone(),
                        covers: 1,
                        digest: found.digest,
                        messages_digest: String::new(),
                        tokens: made.tokens.max(tokens),
                        expires_ms: now + ttl.as_millis() as u64,
                    };
                    let front = SeenFront {
                        cache: Some(record),
                    };
                    keep(services, &found.key, &front, ttl).await;
                    divided.cache = Some(CacheUse {
                        name: made.name,
                        covers: 1,
                    });
                    (divided, Some(found.key))
                }
                Ok(None) => (request, None),
                Err(e) => {
                    meter.cache_event("failed");
                    tracing::info!(model = %request.model.id, "no context cache made: {e}");
                    (request, None)
                }
            }
        }
    }
}

/// Once the answer is in: a cache Google no longer had is recorded as gone (the front stays
/// seen, so the next call sending it makes a new one).
pub(super) async fn settled(services: &Services, lost: bool, key: &str) {
    if lost {
        let ttl = services.config.calls.context_cache_ttl;
        keep(services, key, &SeenFront::default(), ttl).await;
    }
}

/// Keeps `front` under `key` for `ttl`; a store that cannot keep it costs only a later cache.
async fn keep(services: &Services, key: &str, front: &SeenFront, ttl: Duration) {
    let expires = now_ms() + ttl.as_millis() as u64;
    if let Err(e) = services.store.keep_front(key, front, expires).await {
        tracing::info!("a front seen could not be kept: {e}");
    }
}

/// Where the front `digest` of `owner`'s calls to `model` is kept: a hex SHA-256 (the store
/// keeps nothing of the front itself but the cache's name).
fn key_of(owner: &Owner, model: &str, digest: &str) -> String {
    let mut h = Sha256::new();
    for field in ["front", owner.as_str(), model, digest] {
        h.update((field.len() as u64).to_le_bytes());
        h.update(field.as_bytes());
    }
    hex::encode(h.finalize())
}

/// The head of `request`'s new turn, its first `at` bytes, when it is a first call's (one
/// message) whose text divides there, before the rest.
fn head_of(request: &GenerateRequest, at: usize) -> Option<&str> {
    let [only] = request.contents.as_slice() else {
        return None;
    };
    let Some(Part::Text(text)) = only.parts.first() else {
        return None;
    };
    (at > 0 && at < text.len() && text.is_char_boundary(at)).then(|| &text[..at])
}

/// Divides `request`'s new turn after its head ([`head_of`]) into two user messages, the head
/// (files and diff) and the rest; `false`, leaving it as it was, when it has no such head.
fn divide(request: &mut GenerateRequest, at: usize) -> bool {
    if head_of(request, at).is_none() {
        return false;
    }
    let Some(Part::Text(text)) = request.contents[0].parts.first_mut() else {
        return false;
    };
    let rest = text.split_off(at);
    let head = std::mem::replace(text, rest);
    request.contents.insert(0, Message::user(head));
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemini::Role;

    fn request(contents: Vec<Message>) -> GenerateRequest {
        GenerateRequest {
            system_instruction: "You review code.".into(),
            ..GenerateRequest::for_tests("flash", contents)
        }
    }

    /// The head and the rest, byte for byte what the one message held, an image kept with the
    /// rest; no division inside a character, at either end, or of a continued thread's request.
    #[test]
    fn a_new_turn_divides_after_its_head_only() {
        let image = Part::Image {
            mime: "image/png".into(),
            data: std::sync::Arc::new(vec![1, 2, 3]),
        };
        let one = Message {
            role: Role::User,
            parts: vec![Part::Text("HEAD é\n\nrequest".into()), image.clone()],
        };
        let req = request(vec![one.clone()]);
        let at = "HEAD é\n\n".len();
        let mut d = req.clone();
        assert!(divide(&mut d, at));
        assert_eq!(d.contents.len(), 2);
        assert_eq!(d.contents[0], Message::user("HEAD é\n\n"));
        assert_eq!(
            d.contents[1].parts,
            vec![Part::Text("request".into()), image]
        );
        assert_eq!(d.system_instruction, req.system_instruction);
        // The digest the decision keys the front by is the divided request's own.
        let digest = crate::gemini::messages_digest(
            &req.system_instruction,
            &[Message::user(head_of(&req, at).unwrap())],
        );
        assert_eq!(d.front_digest(1), digest);
        for wrong in ["HEAD ".len() + 1, 0, "HEAD é\n\nrequest".len()] {
            let mut same = req.clone();
            assert!(!divide(&mut same, wrong), "{wrong}");
            assert_eq!(same.contents, req.contents, "left as it was");
        }
        let mut thread = request(vec![one.clone(), Message::model("answer"), one]);
        assert!(!divide(&mut thread, at));
    }

    /// The key tells apart each of what it is made of, and is a hex SHA-256.
    #[test]
    fn a_key_is_one_clients_one_models_one_front() {
        let (a, b) = (Owner::local(), Owner::for_token(b"b"));
        let k = key_of(&a, "m", "d");
        assert!(k.len() == 64 && k.bytes().all(|c| c.is_ascii_hexdigit()), "{k}");
        assert_ne!(k, key_of(&b, "m", "d"));
        assert_ne!(k, key_of(&a, "n", "d"));
        assert_ne!(k, key_of(&a, "m", "e"));
        assert_eq!(k, key_of(&a, "m", "d"));
    }
}

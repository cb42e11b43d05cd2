//! What the cache step decides for a request (`cache::decide`), apart from doing it, so that
//! `--dry-run` shows what the call would do: the thread's step and a first call's
//! (`cache::first`) answer in these terms.

use std::time::Duration;

use crate::store::ContextCache;

/// A cache that expires sooner than this is not used (the request could arrive after it).
pub(super) const MARGIN: Duration = Duration::from_secs(60);

/// The least number of tokens `model` caches (Google's minimums, docs of 2026-07: 2,048 for
/// the 2.5 models, 4,096 for the 3.x ones).
pub(crate) fn min_tokens(model: &str) -> u64 {
    if model.starts_with("gemini-2.") {
        2048
    } else {
        4096
    }
}

/// What the cache step would do for a request: nothing, read the thread's cache, or make one.
/// `cache::decide` says it without side effects, so `--dry-run` shows what the call would do.
#[derive(Debug)]
pub(crate) struct Decision {
    /// The thread's cache, when it still serves this request.
    pub usable: Option<ContextCache>,
    /// The thread's cache, when it no longer matches (to be deleted).
    pub stale: Option<String>,
    pub action: Action,
    /// A first call's front, where it is kept (`cache::first`).
    pub first: Option<Found>,
}

impl Decision {
    pub(super) fn nothing() -> Decision {
        Decision {
            usable: None,
            stale: None,
            action: Action::None,
            first: None,
        }
    }

    /// What a cache would hold, in words.
    pub(crate) fn holds(&self) -> &'static str {
        if self.first.is_some() {
            "the system instruction, the files and the diff, which an earlier call sent too"
        } else {
            "the system instruction and earlier turns"
        }
    }
}

#[derive(Debug, PartialEq)]
pub(crate) enum Action {
    /// The request is sent whole (or from `usable`, when there is one).
    None,
    /// `usable` serves the request as it is.
    UseKept,
    /// A cache of the front (`tokens`, the first `covers` messages) is made for `ttl` and
    /// serves the request.
    Make {
        tokens: u64,
        covers: usize,
        ttl: Duration,
    },
    /// A first call's front is recorded as seen for `ttl`, and the request sent whole.
    KeepSeen { ttl: Duration },
}

/// Where a first call's front is kept (`store::fronts`), and where its new turn divides.
#[derive(Debug)]
pub(crate) struct Found {
    pub(super) key: String,
    pub(super) at: usize,
    /// What a cache of the head holds (`GenerateRequest::front_digest` of the divided request).
    pub(super) digest: String,
}

//! The conversation the Interactions API keeps for a thread (`GEMINI_API_SURFACE=interactions`
//! with `GEMINI_MCP_INTERACTIONS_STORE=1`): a turn's answer is stored at Google, its id kept on
//! the turn ([`StoredInteraction`]), and the next turn sends only what is new with
//! `previous_interaction_id`.
//!
//! Truth: the record keeps the digest of the messages Google's chain holds, as the next
//! request rebuilds them (the earlier turns re-rendered from the re-read files and the stored,
//! redacted answer). The chain is continued only when the new request's first messages
//! digest the same and the model is the one that answered. A file changed since, an earlier
//! turn the window left out, or another model sends the whole history. An interaction gone at
//! Google (404) is sent again whole by the REST client. Calls that explore (an investigation,
//! the Gemini CLI's agent) are sent whole: their requests hold steps no thread replays.

use super::Services;
use crate::gemini::{GenerateRequest, GenerateResponse, Message, PreviousInteraction};
use crate::store::StoredInteraction;
use crate::tools::Plan;

/// The messages a stored answer's chain will hold (`None`: the call is not chained).
pub(super) struct Front(Option<Vec<Message>>);

/// `request` continuing the thread's stored interaction when its chain still holds the
/// request's first messages; and what to record once answered.
pub(super) fn attach(
    services: &Services,
    plan: &Plan,
    mut request: GenerateRequest,
    kept: Option<StoredInteraction>,
) -> (GenerateRequest, Front) {
    if !services.gemini.stores_interactions() || plan.agent.is_some() || plan.explore.is_some() {
        return (request, Front(None));
    }
    if let Some(k) = kept
        && k.model == request.model.id
        && k.covers < request.contents.len()
        && crate::gemini::messages_digest("", &request.contents[..k.covers]) == k.digest
    {
        request.previous = Some(PreviousInteraction {
            id: k.id,
            covers: k.covers,
        });
    }
    let front = request.contents.clone();
    (request, Front(Some(front)))
}

/// The record of the interaction Google stored for `answer`, holding the request's messages
/// and the answer as the next turn's history renders it (redacted, as the turn stores it).
pub(super) fn record(front: Front, answer: &GenerateResponse, model: &str) -> Option<StoredInteraction> {
    let (Some(mut messages), Some(id)) = (front.0, answer.interaction_id.clone()) else {
        return None;
    };
    messages.push(Message::model(crate::redact::redact(&answer.text).0));
    Some(StoredInteraction {
        id,
        model: model.to_string(),
        covers: messages.len(),
        digest: crate::gemini::messages_digest("", &messages),
    })
}

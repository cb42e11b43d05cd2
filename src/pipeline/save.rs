//! The save step: the turn stored in the thread (the request's text after its files, the files
//! with their hashes, the answer, the usage), and the reply told how to continue.

use tracing::Instrument;

use super::gather::Material;
use super::blocking::{INLINE_COUNT_BYTES, blocking};
use super::services::Services;
use crate::collector::tokens;
use crate::gemini::GenerateResponse;
use crate::reply::SavedTurn;
use crate::store::{ContextCache, FileRef, ThreadId, Turn, now_ms};
use crate::tools::{Plan, Reply, ToolError};

/// Stores the turn and tells the reply how to continue; a turn that cannot be stored is
/// said in the reply, and the answer is still returned.
#[allow(clippy::too_many_arguments)]
pub(super) async fn save_turn(
    services: &Services,
    id: ThreadId,
    plan: &Plan,
    tail: String,
    material: &Material,
    answer: &GenerateResponse,
    model_used: &str,
    context_cache: Option<ContextCache>,
    extra_usd: f64,
    interaction: Option<crate::store::StoredInteraction>,
    reply: &mut Reply,
) -> Result<(), ToolError> {
    // A diff makes the tail large: count it off the runtime's threads.
    let request_tokens = if tail.len() > INLINE_COUNT_BYTES {
        let t = tail.clone();
        blocking(move || tokens::count(&t)).await?
    } else {
        tokens::count(&tail)
    };
    let turn = Turn {
        tool: plan.tool.name().to_string(),
        request_tokens,
        // A consensus keeps more than its writer wrote (every model's answer): counted.
        response_tokens: if answer.usage.output > 0 && reply.meta.consensus.is_none() {
            answer.usage.output
        } else {
            tokens::count(&answer.text)
        },
        request: tail,
        files: material
            .collected
            .files
            .iter()
            .map(|f| FileRef {
                path: f.path.display().to_string(),
                hash: f.hash.clone(),
                tokens: f.tokens,
            })
            .collect(),
        // Stored as the reply shows it: a value Gemini wrote out (one the Gemini CLI's tools
        // read, one it remembered) is kept neither in the thread nor in the next turn's history.
        response: crate::redact::redact(&answer.text).0,
        model: model_used.to_string(),
        usage: crate::store::Usage {
            tier: answer.billed_tier,
            ..answer.usage.into()
        },
        at_ms: now_ms(),
        // The tail begins with the diff (`prompt::turn_tail`): its frames are the diff's.
        frames: material
            .diff
            .as_ref()
            .map(|d| d.frames.clone())
            .unwrap_or_default(),
        context_cache,
        extra_usd,
        interaction,
    };
    let span = crate::traces::store_save(services.store.kind());
    let appended = services
        .store
        .append(id, &services.project(), &plan.owner, &turn)
        .instrument(span.clone())
        .await;
    crate::traces::stored(&span, appended.as_ref().copied().map_err(|_| "thread"));
    match appended {
        Ok(count) => {
            reply.saved = Some(SavedTurn {
                continuation_id: id.to_string(),
                remaining_turns: services.config.threads.max_turns.saturating_sub(count),
            });
        }
        Err(e) => {
            // The answer is not lost: it is returned, with why it could not be kept.
            tracing::warn!(error = %e, "could not save the turn");
            reply.note(format!(
                "This answer could not be saved to the conversation: {e}"
            ));
        }
    }
    Ok(())
}

//! The context window's shares: the model the call uses, and what of its input window is left
//! for history and material once the system prompt, the request and the reserves are counted;
//! the thread's history rebuilt within its share.

use super::blocking::blocking;
use super::earlier_turns;
use super::services::Services;
use crate::collector::tokens;
use crate::gemini::models::ModelInfo;
use crate::caps::IMAGE_TOKENS;
use crate::store::Thread;
use crate::tools::{Plan, ToolError};

/// Tokens kept free for per-message framing the local count cannot see.
const FRAMING_RESERVE: u64 = 1_024;
/// Tokens kept for the separators between files and the "Not included: …" note (up to 50
/// entries), which the collector's per-file counts do not include.
const NOTE_RESERVE: u64 = 1_500;
/// Share of the context budget history may take when files also need room.
const HISTORY_SHARE: f64 = 0.4;

/// The model the plan names (or the default), resolved in the catalogue.
pub(super) fn model_for(services: &Services, plan: &Plan) -> Result<ModelInfo, ToolError> {
    let name = plan
        .model
        .clone()
        .unwrap_or_else(|| services.gemini.catalogue().default_name().to_string());
    services
        .gemini
        .catalogue()
        .resolve(&name)
        .map_err(|e| ToolError::invalid("model", e.to_string()))
}

/// The tokens left for history and material — the model's input window (capped by
/// `MAX_CONTEXT_TOKENS`) minus the system prompt, the request and the reserves — and the
/// thread's history rebuilt within its share. Counting (and, on the first call, loading the
/// tokenizer) is blocking work.
pub(super) async fn budget(
    services: &Services,
    plan: &Plan,
    model: &ModelInfo,
    system: &str,
    thread: Option<Thread>,
) -> Result<(u64, earlier_turns::History), ToolError> {
    let margin = if model.tokenizer_measured() {
        0.95
    } else {
        0.90
    };
    let window = (model.input_limit as f64 * margin) as u64;
    let cap = services
        .config
        .calls
        .max_context_tokens
        .map_or(window, |cap| cap.min(window));
    let images_cost = IMAGE_TOKENS * plan.images.len() as u64;
    let wants_material = !plan.files.is_empty() || plan.git.is_some();
    let collector = services.collector.clone();
    let (system, request) = (system.to_string(), plan.request.clone());
    blocking(move || {
        let fixed = tokens::count(&system)
            + tokens::count(&request)
            + FRAMING_RESERVE
            + NOTE_RESERVE
            + images_cost;
        let total = cap.saturating_sub(fixed);
        let history_budget = if wants_material {
            (total as f64 * HISTORY_SHARE) as u64
        } else {
            total
        };
        let history = match thread {
            Some(t) => earlier_turns::rebuild(&t, &collector, history_budget),
            None => earlier_turns::History::default(),
        };
        (total, history)
    })
    .await
}

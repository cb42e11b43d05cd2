//! The gather step: what a call sends besides its text, within its budget — the diff (for
//! precommit), the files asked for and the thread's files that changed, the images — or, when
//! precommit finds nothing pending, the reply without asking Gemini.

use tracing::Instrument;

use super::blocking::blocking;
use super::earlier_turns;
use super::services::Services;
use crate::collector::{CollectRequest, Collected, ImageEntry, Skipped};
use crate::git::{DiffContext, DiffRequest};
use crate::reply::Reply;
use crate::tools::{Plan, ToolError};

/// What a call sends besides its text.
pub(super) struct Material {
    pub(super) diff: Option<DiffContext>,
    pub(super) collected: Collected,
    pub(super) images: Vec<ImageEntry>,
    /// Files and diffs left out, with why.
    pub(super) skipped: Vec<Skipped>,
}

impl Material {
    /// Tokens of the files and the diff.
    pub(super) fn tokens(&self) -> u64 {
        self.collected.tokens + self.diff.as_ref().map_or(0, |d| d.tokens)
    }
}

// One value per call, moved once: the size difference costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
pub(super) enum Gathered {
    Material(Material),
    /// Precommit found no pending change: the reply, without asking Gemini.
    NothingToReview(Reply),
}

/// What the call sends besides its text, within `budget`: the diff (for precommit), the
/// files asked for plus the thread's files that changed since they were sent (their notes in
/// the history point here), and the images.
pub(super) async fn gather(
    services: &Services,
    plan: &Plan,
    budget: u64,
    history: &earlier_turns::History,
) -> Result<Gathered, ToolError> {
    let span = crate::traces::collect();
    let gathered = gather_in(services, plan, budget, history)
        .instrument(span.clone())
        .await;
    match &gathered {
        Ok(Gathered::Material(m)) => {
            let diff_blocks = m.diff.as_ref().map_or(0, |d| d.sent.len());
            let (files, images) = (m.collected.files.len(), m.images.len());
            crate::traces::collected(
                &span,
                files,
                m.skipped.len(),
                diff_blocks,
                images,
                m.tokens(),
            );
        }
        Ok(Gathered::NothingToReview(_)) => crate::traces::collected(&span, 0, 0, 0, 0, 0),
        Err(e) => crate::traces::failed(&span, e.kind()),
    }
    gathered
}

/// The body of [`gather`], inside its span.
async fn gather_in(
    services: &Services,
    plan: &Plan,
    mut budget: u64,
    history: &earlier_turns::History,
) -> Result<Gathered, ToolError> {
    let mut diff: Option<DiffContext> = None;
    if let Some(g) = &plan.git {
        let req = DiffRequest {
            budget,
            ignore: plan.ignore.clone(),
            ..g.clone()
        };
        let collector = services.collector.clone();
        let d = blocking(move || crate::git::read_changes(&collector, &req)).await??;
        if d.changed.is_empty() {
            return Ok(Gathered::NothingToReview(nothing_to_review(&g.path, &d)));
        }
        budget = budget.saturating_sub(d.tokens);
        diff = Some(d);
    }
    let mut paths = plan.files.clone();
    for p in &history.resend {
        if !paths.contains(p) {
            paths.push(p.clone());
        }
    }
    let collected = if paths.is_empty() {
        Collected::default()
    } else {
        let req = CollectRequest {
            paths,
            budget,
            already_sent: history.sent.clone(),
            ignore: plan.ignore.clone(),
        };
        let collector = services.collector.clone();
        blocking(move || collector.collect(&req)).await??
    };
    let images = if plan.images.is_empty() {
        Vec::new()
    } else {
        let paths = plan.images.clone();
        let collector = services.collector.clone();
        blocking(move || collector.images(&paths)).await??
    };
    let mut skipped = collected.skipped.clone();
    if let Some(d) = &diff {
        skipped.extend(d.skipped.iter().cloned());
    }
    Ok(Gathered::Material(Material {
        diff,
        collected,
        images,
        skipped,
    }))
}

fn nothing_to_review(path: &str, d: &DiffContext) -> Reply {
    Reply::nothing_to_review(format!(
        "Nothing to review: no pending changes in {path} (repositories: {}).",
        d.repos.join(", ")
    ))
}

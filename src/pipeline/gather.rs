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
    let (documents, mut paths) = documents_of(plan);
    for p in &history.resend {
        if !paths.contains(p) {
            paths.push(p.clone());
        }
    }
    let images = if plan.images.is_empty() {
        Vec::new()
    } else {
        let paths = plan.images.clone();
        let collector = services.collector.clone();
        blocking(move || collector.images(&paths)).await??
    };
    let mut inline = images;
    if !documents.is_empty() {
        // Documents first: their pages are known once read, and the files fit in what is left.
        let images_bytes: u64 = inline.iter().map(|i| i.data.len() as u64).sum();
        let collector = services.collector.clone();
        let uploads = services.gemini.takes_files();
        let docs =
            blocking(move || collector.documents(&documents, images_bytes, uploads)).await??;
        let pages: u64 = docs
            .iter()
            .map(|d| d.tokens)
            .sum();
        if pages > budget {
            return Err(ToolError::invalid(
                "files",
                format!(
                    "the documents come to about {pages} tokens ({} a page), over the {budget} left of the model's window for this call; send fewer or shorter documents",
                    crate::collector::images::PDF_PAGE_TOKENS
                ),
            ));
        }
        budget -= pages;
        inline.extend(docs);
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
    let mut skipped = collected.skipped.clone();
    if let Some(d) = &diff {
        skipped.extend(d.skipped.iter().cloned());
    }
    Ok(Gathered::Material(Material {
        diff,
        collected,
        images: inline,
        skipped,
    }))
}

/// The documents (PDFs, by their `.pdf` name) among the files `plan` names, for the tools that
/// read documents (chat, analyze, thinkdeep), and the other paths. A PDF found in a named
/// directory is not sent (left out as binary): only one named is.
fn documents_of(plan: &Plan) -> (Vec<String>, Vec<String>) {
    use crate::tools::Tool;
    if !matches!(plan.tool, Tool::Chat | Tool::Analyze | Tool::ThinkDeep) {
        return (Vec::new(), plan.files.clone());
    }
    plan.files.iter().cloned().partition(|p| {
        std::path::Path::new(p.trim())
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("pdf"))
    })
}

fn nothing_to_review(path: &str, d: &DiffContext) -> Reply {
    Reply::nothing_to_review(format!(
        "Nothing to review: no pending changes in {path} (repositories: {}).",
        d.repos.join(", ")
    ))
}

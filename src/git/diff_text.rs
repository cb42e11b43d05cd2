//! Rendering the changes for Gemini under a token budget.
//!
//! The text is, per repository: a header (branch, what was compared, notes) and the list of every
//! changed file with its status, then the diffs section by section (each file between
//! `--- BEGIN DIFF: <path> (<status>, <section>) #<tag> ---` and `--- END DIFF: <path> #<tag> ---`
//! markers, redacted). The tag is the first 64 bits of the SHA-256 of the diff as sent: a removed
//! line can read `--- END DIFF: <path> ---` (a SQL or Lua comment `-- END DIFF…`), but it cannot
//! carry the tag of the diff it is part of, so Gemini (told so by the prompt) can tell the real
//! end from a forged one. Where each diff's lines are is kept as data (`DiffContext::frames`),
//! which is what the findings are checked against. The header and the list
//! are always sent, so a file whose diff is left out is still named. Diffs are admitted by
//! priority (source, then configuration and build files, then docs, then lock files, data, logs
//! and generated files; deleted files last); every diff that does not fit is listed in `skipped`.
//! When every diff fits, the full new content of modified files is added, numbered, in priority
//! order while the budget allows (and at most [`CONTEXT_CAP`] tokens of it), and the text says
//! which files. Token counting is the bulk of the cost of a large change: once the budget is
//! nearly full, only what surely fits is counted.
//!
//! Patches are built (each file's content loaded) in the same priority order, as the budget
//! reaches them: once a diff did not fit, a file is read only if an upper estimate of its diff
//! from its sizes would still fit. So with tens of thousands of untracked files only those the
//! budget can take are read; the others are listed as left out, unread. When every diff fits,
//! every patch is built, and the text is what building them all up front would give.

use std::collections::HashMap;
use std::path::Path;

use super::changes::{Body, Content, FileChange, MAX_FILE_BYTES, Section};
use super::discover::Found;
use super::context::{ChangedFile, DiffContext, SentBlock};
use super::error::GitError;
use crate::collector::classify::{Class, classify};
use crate::collector::render::{Frame, FrameKind, newlines};
use crate::collector::{Sandbox, SkipReason, Skipped, secrets, tokens};
use crate::redact::redact_counted;

/// A repository as shown, with what was read from it.
#[derive(Debug, Clone, Default)]
pub(super) struct RepoView {
    /// Relative to the sandbox root (`.` for the root itself), or absolute when outside it.
    pub display: String,
    /// Prepended to file paths when several repositories are reviewed (`libs/a/`), else empty.
    pub prefix: String,
    pub head: String,
    pub sections: Vec<(Section, String)>,
    pub notes: Vec<String>,
}

/// Entries listed per repository before the list is cut short.
const LIST_MAX: usize = 1000;

/// Most tokens of full file content added as context: beyond this a large change costs more
/// than the extra context is worth (every token is paid for on every call of the thread).
pub(super) const CONTEXT_CAP: u64 = 100_000;

/// One changed file as listed: all its changes (a file can be both staged and unstaged).
struct Listed {
    repo: usize,
    path: String,
    status: &'static str,
    old_path: Option<String>,
    sections: Vec<Section>,
    note: Option<String>,
}

struct Block {
    file: usize,
    text: String,
    /// Where its patch's lines are in `text`.
    frame: Frame,
    /// Counted once it was worth counting.
    tokens: Option<u64>,
    /// Its patch was never built: the budget was full before it came to it.
    unread: bool,
}

/// How patches are built on demand (over the repositories' diffs, kept by the caller).
pub(super) struct Patches<'a> {
    /// Builds a change's patch: loads its file (see `changes::build`).
    pub build: &'a dyn Fn(&mut FileChange) -> Result<(), GitError>,
    /// An upper estimate, in bytes, of an unbuilt change's diff block (see `changes::size_bound`).
    pub bound: &'a dyn Fn(&FileChange) -> u64,
}

/// The diff text for Gemini within `budget`: the header and list of changed files, then the
/// diffs by priority (what does not fit is listed as left out), then — when every diff is in —
/// the full content of changed files for context.
pub(super) fn render(
    sandbox: &Sandbox,
    found: &[Found],
    repos: &[RepoView],
    mut files: Vec<FileChange>,
    budget: u64,
    patches: &Patches<'_>,
) -> Result<DiffContext, GitError> {
    let mut ctx = DiffContext {
        repos: repos.iter().map(|r| r.display.clone()).collect(),
        ..DiffContext::default()
    };
    let floor = header_floor(repos, &files, &ctx, budget);
    let built = diff_blocks(
        sandbox, found, repos, &mut files, budget, floor, patches, &mut ctx,
    )?;
    let (files, mut blocks) = drop_gone(files, built);
    let listed = list_changes(repos, &files, &mut ctx);

    // The header and the list are always sent (in short form if they would crowd out the
    // diffs), and so are the section headings; then diffs by priority.
    let (header, mut used) = header(repos, &listed, &ctx, budget);
    let headings = headings(repos, &files, &blocks);
    used += headings.iter().map(|(.., h)| tokens::count(h)).sum::<u64>();
    let mut order: Vec<usize> = (0..blocks.len()).collect();
    order.sort_by_key(|&b| (priority(&files[blocks[b].file]), b));
    let (included, left_out) = fit_diffs(
        repos,
        &files,
        &mut blocks,
        &order,
        budget,
        &mut used,
        &mut ctx,
    );

    // The text, in reading order: per repository, per section, per file. A heading whose
    // diffs were all left out is still sent (and counted): it tells Gemini the section exists.
    let mut lines = newlines(&header);
    let mut text = header;
    for (r, section, heading) in &headings {
        text.push_str(heading);
        lines += newlines(heading);
        for (b, block) in blocks.iter().enumerate() {
            let f = &files[block.file];
            if included[b] && f.repo == *r && f.section == *section {
                ctx.frames.push(block.frame.shifted(lines));
                text.push_str(&block.text);
                lines += newlines(&block.text);
                let tokens = block.tokens.unwrap_or_else(|| tokens::count(&block.text));
                ctx.sent
                    .push(SentBlock::of(shown(repos, f), &block.text, tokens));
            }
        }
    }
    if !left_out {
        let context = Context {
            sandbox,
            found,
            repos,
            files: &files,
        };
        used = context.add(&blocks, &order, budget, used, &mut text, &mut ctx);
    }
    dedupe(&mut ctx.skipped);
    ctx.text = text;
    ctx.tokens = used;
    Ok(ctx)
}

/// A changed file's path as shown: its repository's prefix, escaped and redacted (the diff text
/// itself is redacted as a whole; git quotes control characters there).
fn shown(repos: &[RepoView], f: &FileChange) -> String {
    format!("{}{}", repos[f.repo].prefix, secrets::shown_name(&f.path))
}

/// The list of changed files, one entry per file (a file can be both staged and unstaged), with
/// a note and a skip reason for each one whose diff is not shown; `ctx` gets the changed files,
/// the skipped ones and the secret files.
fn list_changes(repos: &[RepoView], files: &[FileChange], ctx: &mut DiffContext) -> Vec<Listed> {
    let mut listed: Vec<Listed> = Vec::new();
    let mut by_path: HashMap<(usize, &str), usize> = HashMap::new();
    for f in files {
        let i = *by_path.entry((f.repo, f.path.as_str())).or_insert_with(|| {
            listed.push(Listed {
                repo: f.repo,
                path: f.path.clone(),
                status: f.status,
                old_path: f.old_path.clone(),
                sections: Vec::new(),
                note: None,
            });
            listed.len() - 1
        });
        if !listed[i].sections.contains(&f.section) {
            listed[i].sections.push(f.section);
        }
        if matches!(f.body, Body::Secret { .. }) && f.status != "deleted" {
            let path = shown(repos, f);
            if !ctx.secret_files.contains(&path) {
                ctx.secret_files.push(path);
            }
        }
        let (note, reason) = body_note(f);
        if let Some(note) = note {
            listed[i].note.get_or_insert(note);
        }
        if let Some(reason) = reason {
            push_skipped(&mut ctx.skipped, shown(repos, f), reason);
        }
    }
    ctx.changed = listed
        .iter()
        .map(|l| ChangedFile {
            repo: repos[l.repo].display.clone(),
            path: secrets::shown_name(&l.path),
            status: l.status.to_string(),
            old_path: l.old_path.as_deref().map(secrets::shown_name),
        })
        .collect();
    listed
}

/// Why a change's diff is not shown, as a note in the list and a reason among the skipped.
fn body_note(f: &FileChange) -> (Option<String>, Option<SkipReason>) {
    match &f.body {
        Body::Patch(_) => (None, None),
        Body::Secret { rule } if f.status == "deleted" => (
            Some(format!("looks like a secret ({rule}); content not shown")),
            Some(SkipReason::Secret),
        ),
        Body::Secret { rule } => (
            Some(format!(
                "LOOKS LIKE A SECRET (matches {rule}); its content was not sent"
            )),
            Some(SkipReason::Secret),
        ),
        Body::Binary { old, new } => (
            Some(format!(
                "binary ({} → {}); not shown",
                human(*old),
                human(*new)
            )),
            Some(SkipReason::Binary),
        ),
        Body::TooLarge { size } => (
            Some(format!(
                "{}, over the {} limit; not shown",
                human(*size),
                human(MAX_FILE_BYTES)
            )),
            Some(SkipReason::TooLarge),
        ),
        Body::Ignored => (
            Some("ignored by the repository's ignore_patterns; not sent".into()),
            Some(SkipReason::Ignored),
        ),
        Body::Conflicted => (Some("unresolved merge conflict".into()), None),
        Body::Unreadable => (
            Some("git could not read it".into()),
            Some(SkipReason::Unreadable),
        ),
        // Left out over budget, by the fit.
        Body::Unbuilt(_) | Body::Gone => (None, None),
    }
}

/// The diffs, per changed file (`None`: no diff), in priority order: an unbuilt patch is built
/// (its file read) while the budget may still take it, then redacted and counted. The header is
/// not known yet (binary files get a note): `floor` tokens of it are counted, no more than it
/// will cost, so every diff the fit can take is built. Once one did not fit, a file is read only
/// if an upper estimate from its sizes fits what is left, and a diff is counted only if it surely
/// fits (as in [`fit_diffs`]).
#[allow(clippy::too_many_arguments)]
fn diff_blocks(
    sandbox: &Sandbox,
    found: &[Found],
    repos: &[RepoView],
    files: &mut [FileChange],
    budget: u64,
    floor: u64,
    patches: &Patches<'_>,
    ctx: &mut DiffContext,
) -> Result<Vec<Option<Block>>, GitError> {
    let mut order: Vec<usize> = (0..files.len())
        .filter(|&i| matches!(files[i].body, Body::Patch(_) | Body::Unbuilt(_)))
        .collect();
    order.sort_by_key(|&i| (priority(&files[i]), i));
    let mut blocks: Vec<Option<Block>> = (0..files.len()).map(|_| None).collect();
    let (mut used, mut missed) = (floor, false);
    for i in order {
        let room = budget.saturating_sub(used);
        if matches!(files[i].body, Body::Unbuilt(_)) {
            if missed && upper_bound_len((patches.bound)(&files[i])) > room {
                blocks[i] = Some(Block {
                    file: i,
                    text: String::new(),
                    frame: patch_frame(String::new(), 0),
                    tokens: None,
                    unread: true,
                });
                continue;
            }
            (patches.build)(&mut files[i])?;
        }
        let Body::Patch(patch) = &files[i].body else {
            continue;
        };
        let (text, frame) =
            block_text(sandbox, &found[files[i].repo], repos, &files[i], patch, ctx);
        let tokens = (!missed || upper_bound(&text) <= room).then(|| tokens::count(&text));
        match tokens {
            Some(t) if t <= room => used += t,
            _ => missed = true,
        }
        blocks[i] = Some(Block {
            file: i,
            text,
            frame,
            tokens,
            unread: false,
        });
    }
    Ok(blocks)
}

/// A diff between its markers (tagged: see the module docs), redacted (`ctx` counts the
/// redactions), and where its lines are in the block.
fn block_text(
    sandbox: &Sandbox,
    found: &Found,
    repos: &[RepoView],
    f: &FileChange,
    patch: &str,
    ctx: &mut DiffContext,
) -> (String, Frame) {
    let path = shown(repos, f);
    let (patch, keys) = redact_key_lines(sandbox, found, f, patch);
    let (mut patch, n) = redact_counted(&patch);
    ctx.redactions.add("private-key", keys);
    ctx.redactions.merge(&n);
    if !patch.ends_with('\n') {
        patch.push('\n');
    }
    let tag = frame_tag(&patch);
    let text = format!(
        "--- BEGIN DIFF: {path} ({}, {}) #{tag} ---\n{patch}--- END DIFF: {path} #{tag} ---\n\n",
        f.status,
        f.section.short()
    );
    let frame = patch_frame(path, newlines(&patch));
    (text, frame)
}

/// A diff block's frame: `lines` lines of patch after its begin marker.
fn patch_frame(path: String, lines: usize) -> Frame {
    Frame {
        path,
        at: 1,
        lines,
        kind: FrameKind::Patch,
    }
}

/// The tag of a diff's markers: the first 64 bits of the SHA-256 of the patch as sent, in hex.
/// A line of the patch cannot hold it (it would have to hold a hash of itself).
fn frame_tag(patch: &str) -> String {
    use sha2::Digest;
    hex::encode(&sha2::Sha256::digest(patch.as_bytes())[..8])
}

/// The changes without those whose patch came out empty (unchanged after all), and the diff
/// blocks of the others, in file order.
fn drop_gone(files: Vec<FileChange>, built: Vec<Option<Block>>) -> (Vec<FileChange>, Vec<Block>) {
    let mut kept = Vec::with_capacity(files.len());
    let mut blocks = Vec::new();
    for (f, block) in files.into_iter().zip(built) {
        if matches!(f.body, Body::Gone) {
            continue;
        }
        if let Some(mut block) = block {
            block.file = kept.len();
            blocks.push(block);
        }
        kept.push(f);
    }
    (kept, blocks)
}

/// The header (the secret warning and the list of changed files, or a one-line summary when the
/// list would take more than half the budget) and its tokens.
fn header(repos: &[RepoView], listed: &[Listed], ctx: &DiffContext, budget: u64) -> (String, u64) {
    let header = full_header(repos, listed, ctx);
    let used = tokens::count(&header);
    if used <= budget / 2 {
        return (header, used);
    }
    let header = short_header(repos, listed, ctx);
    let used = tokens::count(&header);
    (header, used)
}

/// The header with the list of changed files.
fn full_header(repos: &[RepoView], listed: &[Listed], ctx: &DiffContext) -> String {
    let warning = secret_warning(&ctx.secret_files);
    let mut header = format!("# Changes to review\n\n{warning}");
    header.push_str(&list_text(repos, listed));
    header
}

/// The header with a one-line summary instead of the list.
fn short_header(repos: &[RepoView], listed: &[Listed], ctx: &DiffContext) -> String {
    format!(
        "# Changes to review\n\n{}{} changed file(s) in {} repositories ({}); the list is left out to fit the token budget.\n\n",
        secret_warning(&ctx.secret_files),
        listed.len(),
        repos.len(),
        ctx.repos.join(", ")
    )
}

/// What the header costs at least, before any patch is built: the unbuilt files listed without
/// the notes some will get (binary). Those notes only lengthen the list; when even the longest
/// of them would keep it within half the budget, the list is sent, else the header may be the
/// summary.
fn header_floor(repos: &[RepoView], files: &[FileChange], ctx: &DiffContext, budget: u64) -> u64 {
    let mut probe = DiffContext {
        repos: ctx.repos.clone(),
        ..DiffContext::default()
    };
    let listed = list_changes(repos, files, &mut probe);
    let full = tokens::count(&full_header(repos, &listed, &probe));
    let unbuilt = files
        .iter()
        .filter(|f| matches!(f.body, Body::Unbuilt(_)))
        .count()
        .min(LIST_MAX * repos.len()) as u64;
    let note = tokens::count(" — binary (1023.9 KiB → 1023.9 KiB); not shown") + 2;
    if full.saturating_add(unbuilt.saturating_mul(note)) <= budget / 2 {
        full
    } else {
        full.min(tokens::count(&short_header(repos, &listed, &probe)))
    }
}

/// A heading per repository section that has diffs.
fn headings(
    repos: &[RepoView],
    files: &[FileChange],
    blocks: &[Block],
) -> Vec<(usize, Section, String)> {
    let mut headings = Vec::new();
    for (r, view) in repos.iter().enumerate() {
        for (section, title) in &view.sections {
            if blocks
                .iter()
                .any(|b| files[b.file].repo == r && files[b.file].section == *section)
            {
                let heading = if repos.len() > 1 {
                    format!("## {title} in `{}`\n\n", view.display)
                } else {
                    format!("## {title}\n\n")
                };
                headings.push((r, *section, heading));
            }
        }
    }
    headings
}

/// Takes diffs in `order` while they fit in the budget; the others are listed as left out.
/// Returns which were taken and whether any was left out; `used` grows by what was taken.
fn fit_diffs(
    repos: &[RepoView],
    files: &[FileChange],
    blocks: &mut [Block],
    order: &[usize],
    budget: u64,
    used: &mut u64,
    ctx: &mut DiffContext,
) -> (Vec<bool>, bool) {
    let mut included = vec![false; blocks.len()];
    let mut left_out = false;
    for &b in order {
        // Once a diff did not fit, the budget is nearly full: only diffs that surely fit (by
        // an upper bound) are counted, so the tail of a huge change costs nothing.
        let room = budget.saturating_sub(*used);
        let block = &mut blocks[b];
        let fits = if block.unread || (left_out && upper_bound(&block.text) > room) {
            None
        } else {
            let text = &block.text;
            Some(*block.tokens.get_or_insert_with(|| tokens::count(text))).filter(|&t| t <= room)
        };
        if let Some(t) = fits {
            *used += t;
            included[b] = true;
        } else {
            left_out = true;
            push_skipped(
                &mut ctx.skipped,
                shown(repos, &files[blocks[b].file]),
                SkipReason::OverBudget,
            );
        }
    }
    (included, left_out)
}

/// What the full content of changed files is read from.
struct Context<'a> {
    sandbox: &'a Sandbox,
    found: &'a [Found],
    repos: &'a [RepoView],
    files: &'a [FileChange],
}

const CONTEXT_HEADING: &str =
    "## Full content of changed files, for context\n\nThe new version of: .\n\n";

impl Context<'_> {
    /// Full content of the changed files, for context (only when every diff is in): in
    /// priority order, the newest version of each, while it fits in what is left of the budget
    /// and under [`CONTEXT_CAP`]. Appends to `text` and returns the tokens used.
    fn add(
        &self,
        blocks: &[Block],
        order: &[usize],
        budget: u64,
        used: u64,
        text: &mut String,
        ctx: &mut DiffContext,
    ) -> u64 {
        let limit = budget.min(used.saturating_add(CONTEXT_CAP));
        let mut reserved = used + tokens::count(CONTEXT_HEADING);
        let mut accepted: Vec<(String, String, Frame, crate::redact::Counts, u64)> = Vec::new();
        // The first file that does not fit ends it.
        for i in self.candidates(blocks, order) {
            if reserved >= limit {
                break;
            }
            let f = &self.files[i];
            let Some(content) = read_content(self.sandbox, &self.found[f.repo], f) else {
                continue;
            };
            if shows_everything(&f.shown_lines, &content) {
                continue;
            }
            let path = shown(self.repos, f);
            let (content, n) = redact_counted(&content);
            let (mut block, frame) = crate::collector::render::framed(
                &path,
                &content,
                &["full content, new version".to_string()],
            );
            block.push('\n');
            // Its name in the heading costs too.
            let t = tokens::count(&block);
            let cost = t + tokens::count(&path) + 1;
            if reserved + cost > limit {
                break;
            }
            reserved += cost;
            accepted.push((path, block, frame, n, t));
        }
        // The heading is counted as sent; should it come out longer than reserved, the last
        // files go.
        while !accepted.is_empty() {
            let names: Vec<&str> = accepted.iter().map(|(p, ..)| p.as_str()).collect();
            let heading = format!(
                "## Full content of changed files, for context\n\nThe new version of: {}.\n\n",
                names.join(", ")
            );
            let total =
                used + tokens::count(&heading) + accepted.iter().map(|(.., t)| t).sum::<u64>();
            if total > budget {
                accepted.pop();
                continue;
            }
            text.push_str(&heading);
            let mut lines = newlines(text);
            for (path, block, frame, n, t) in accepted {
                ctx.frames.push(frame.shifted(lines));
                lines += newlines(&block);
                text.push_str(&block);
                ctx.redactions.merge(&n);
                ctx.sent.push(SentBlock::of(path.clone(), &block, t));
                ctx.context_files.push((path, t));
            }
            return total;
        }
        used
    }

    /// The files whose content may be added, in priority order, each once (its newest version).
    fn candidates(&self, blocks: &[Block], order: &[usize]) -> Vec<usize> {
        let files = self.files;
        let mut newest: HashMap<(usize, &str), usize> = HashMap::new();
        for &b in order {
            let i = blocks[b].file;
            if files[i].content.is_some() {
                newest.insert((files[i].repo, files[i].path.as_str()), i);
            }
        }
        let mut seen = std::collections::HashSet::new();
        let mut candidates = Vec::new();
        for &b in order {
            let key = (
                files[blocks[b].file].repo,
                files[blocks[b].file].path.as_str(),
            );
            if let Some(&i) = newest.get(&key)
                && seen.insert(key)
            {
                candidates.push(i);
            }
        }
        candidates
    }
}

/// A generous bound on a text's token count (every o200k token is at least one byte, and the
/// calibration adds well under half). It only decides what is not worth counting once the
/// budget is nearly full; nothing relies on it for the budget itself.
fn upper_bound(text: &str) -> u64 {
    upper_bound_len(text.len() as u64)
}

/// [`upper_bound`] of a text of `len` bytes.
fn upper_bound_len(len: u64) -> u64 {
    len.saturating_mul(3) / 2 + 1
}

fn push_skipped(skipped: &mut Vec<Skipped>, path: String, reason: SkipReason) {
    skipped.push(Skipped { path, reason });
}

/// Each (path, reason) once, in first-seen order (a file both staged and unstaged is pushed
/// twice). A hash set, not a search of the list per entry: that was quadratic, seconds for tens
/// of thousands of untracked files.
fn dedupe(skipped: &mut Vec<Skipped>) {
    let mut seen = std::collections::HashSet::with_capacity(skipped.len());
    skipped.retain(|s| seen.insert((s.path.clone(), s.reason)));
}

fn secret_warning(secret_files: &[String]) -> String {
    if secret_files.is_empty() {
        return String::new();
    }
    format!(
        "WARNING: {} changed file(s) look like secrets by their names: {}. Their content was not sent. \
         Committing a secret is a critical finding: say so, and how to remove it from the change.\n\n",
        secret_files.len(),
        secret_files
            .iter()
            .map(|s| format!("`{s}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Per repository: head, scope, notes, what was compared, and every changed file.
fn list_text(repos: &[RepoView], listed: &[Listed]) -> String {
    let mut s = String::new();
    for (r, view) in repos.iter().enumerate() {
        s.push_str(&format!(
            "## Repository `{}` ({})\n",
            view.display, view.head
        ));
        for note in &view.notes {
            s.push_str(&format!("Note: {note}\n"));
        }
        let titles: Vec<&str> = view.sections.iter().map(|(_, t)| t.as_str()).collect();
        if !titles.is_empty() {
            s.push_str(&format!("Compared: {}.\n", titles.join("; ")));
        }
        let mine: Vec<&Listed> = listed.iter().filter(|l| l.repo == r).collect();
        if mine.is_empty() {
            s.push_str("No changes.\n\n");
            continue;
        }
        s.push_str(&format!("Changed files ({}):\n", mine.len()));
        for l in mine.iter().take(LIST_MAX) {
            let sections: Vec<&str> = l.sections.iter().map(|x| x.short()).collect();
            let path = secrets::shown_name(&l.path);
            s.push_str(&format!("- {}: {}{path}", l.status, view.prefix));
            if let Some(old) = &l.old_path {
                let old = secrets::shown_name(old);
                s.push_str(&format!(" (from {}{old})", view.prefix));
            }
            s.push_str(&format!(" [{}]", sections.join(", ")));
            if let Some(note) = &l.note {
                s.push_str(&format!(" — {note}"));
            }
            s.push('\n');
        }
        if mine.len() > LIST_MAX {
            s.push_str(&format!("- … and {} more\n", mine.len() - LIST_MAX));
        }
        s.push('\n');
    }
    s
}

/// Lower is sent first: files still present before deleted ones, then by the collector's
/// priority class (the one classifier, so a file ranks the same in codereview and precommit).
fn priority(f: &FileChange) -> (bool, Class) {
    (f.status == "deleted", class(&f.path))
}

/// The class of a changed file, from its repository-relative path.
pub(super) fn class(path: &str) -> Class {
    classify(Path::new(path))
}

/// A diff's lines that lie in a private key block of the file's old or new version (read in
/// full: a hunk inside a key shows neither its BEGIN nor its END line), redacted.
fn redact_key_lines(
    sandbox: &Sandbox,
    found: &Found,
    f: &FileChange,
    text: &str,
) -> (String, usize) {
    let old = f
        .old_blob
        .and_then(|id| found.repo.find_blob(id).ok())
        .filter(|b| !b.is_binary() && b.size() as u64 <= MAX_FILE_BYTES)
        .map_or_else(Vec::new, |b| {
            crate::redact::key_blocks(&String::from_utf8_lossy(b.content()))
        });
    let new =
        read_content(sandbox, found, f).map_or_else(Vec::new, |c| crate::redact::key_blocks(&c));
    crate::redact::redact_diff_keys(text, &old, &new)
}

/// The new version of a file: from the object database (staged, committed), or from the work
/// tree through the sandbox.
fn read_content(sandbox: &Sandbox, found: &Found, f: &FileChange) -> Option<String> {
    let bytes = match f.content? {
        Content::Blob(id) => {
            let blob = found.repo.find_blob(id).ok()?;
            if blob.is_binary() || blob.size() as u64 > MAX_FILE_BYTES {
                return None;
            }
            blob.content().to_vec()
        }
        Content::Workdir => {
            let canon = std::fs::canonicalize(found.workdir.join(&f.path)).ok()?;
            crate::collector::read_file(&sandbox.check(&canon)?, MAX_FILE_BYTES).ok()?
        }
    };
    if bytes[..bytes.len().min(8192)].contains(&0) {
        return None;
    }
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// Whether the diff's hunks already show every line of `content`.
fn shows_everything(shown: &[(u32, u32)], content: &str) -> bool {
    let lines = content.lines().count() as u32;
    let mut next = 1;
    for &(start, end) in shown {
        if start > next {
            return false;
        }
        next = next.max(end + 1);
    }
    next > lines
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b < 1024 => format!("{b} B"),
        b if b < 1024 * 1024 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_put_source_first_and_generated_last() {
        for (path, want) in [
            ("src/main.rs", Class::Source),
            ("web/app.tsx", Class::Source),
            ("Cargo.toml", Class::ConfigBuild),
            ("Makefile", Class::ConfigBuild),
            (".github/workflows/ci.yml", Class::ConfigBuild),
            ("README.md", Class::Docs),
            ("LICENSE", Class::Docs),
            ("Cargo.lock", Class::Low),
            ("package-lock.json", Class::Low),
            ("tests/fixtures/big.rs", Class::Low),
            ("dist/app.min.js", Class::Low),
            ("server.log", Class::Low),
        ] {
            assert_eq!(class(path), want, "{path}");
        }
    }

    /// Precommit orders changed files as codereview orders files: Cython before docs, and
    /// JSON-lines data after them (the two once used different tables and disagreed).
    #[test]
    fn changed_files_rank_as_the_collector_ranks_files() {
        let mut paths = vec![
            "README.md",
            "events.jsonl",
            "src/parser.pyx",
            "weird.decTest",
        ];
        paths.sort_by_key(|p| class(p));
        assert_eq!(
            paths,
            [
                "src/parser.pyx",
                "README.md",
                "weird.decTest",
                "events.jsonl"
            ]
        );
        let mut by_collector = paths.clone();
        by_collector.reverse();
        by_collector.sort_by_key(|p| classify(Path::new(p)));
        assert_eq!(by_collector, paths);
    }

    #[test]
    fn context_is_skipped_when_the_diff_shows_the_whole_file() {
        assert!(shows_everything(&[(1, 3)], "a\nb\nc\n"));
        assert!(shows_everything(&[(1, 2), (3, 3)], "a\nb\nc"));
        assert!(!shows_everything(&[(1, 2)], "a\nb\nc\n"));
        assert!(!shows_everything(&[(2, 3)], "a\nb\nc\n"));
        assert!(!shows_everything(&[], "a\n"));
    }
}

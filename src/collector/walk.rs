//! Discovery: turns the requested paths into candidate files (nothing is read yet) and the files
//! left out for reasons known from their names and metadata alone.
//!
//! Directories expand with the `ignore` crate's parallel walker: .gitignore (also outside a git
//! repository), .ignore and `.geminiignore` inside the roots are respected (read by
//! [`Ignores`]: regular files only, nothing above the root), hidden and VCS folders skipped, and a
//! few folders that are never project source (`node_modules`, `__pycache__`, `site-packages`,
//! ...) pruned. Symlinks are not followed by the walker: each one is resolved here, reported if
//! it leads outside the roots or nowhere, taken as a file if it names one, and walked as a further
//! directory if it names a directory not walked yet (so loops end). FIFOs, sockets and devices are
//! reported, never opened.
//!
//! Regular files are not even `stat`ed here (the file type comes from the directory listing):
//! their size is learnt when the fill opens them, and files the fill never reaches cost nothing
//! beyond their directory entry.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};

use globset::GlobSet;
use ignore::{WalkBuilder, WalkState};

use super::classify::{Class, classify};
use super::ignores::Ignores;
use super::sandbox::{Sandbox, SandboxedPath};
use super::secrets::SecretNames;
use super::skip::{SkipReason, Skipped};

/// Directories pruned from every walk (never project source, often huge).
pub const PRUNED_DIRS: &[&str] = &[
    "node_modules",
    "__pycache__",
    "site-packages",
    "dist-packages",
    "bower_components",
    "jspm_packages",
];

/// A file to consider for sending.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub path: SandboxedPath,
    pub display: String,
    pub class: Class,
    /// Components below the requested directory (0 for files named explicitly).
    pub depth: u32,
    /// Index of the request (among the paths asked for) that reached it.
    pub request: u32,
}

impl Candidate {
    /// The priority order: class, then nearer the request, then request order, then path.
    pub fn key(&self) -> (Class, u32, u32, &str) {
        (self.class, self.depth, self.request, &self.display)
    }
}

/// What the walker needs besides the directory.
pub struct WalkRules<'a> {
    pub sandbox: &'a Sandbox,
    pub secrets: &'a SecretNames,
    pub include: Option<&'a GlobSet>,
    pub exclude: Option<&'a GlobSet>,
    pub threads: usize,
    /// Set when a symlink led to a file or directory inside the roots (so the same file may
    /// have been reached twice).
    pub linked: AtomicBool,
}

enum Found {
    File(Candidate),
    Skip(Skipped),
    /// A symlink to a directory inside the roots, at this depth.
    Dir(SandboxedPath, u32),
}

/// Walks `dir` (and the in-root directories its symlinks lead to). Returns candidates and skips
/// in no particular order; the caller sorts.
pub fn walk(
    rules: &WalkRules<'_>,
    dir: &SandboxedPath,
    request: u32,
    walked: &mut BTreeSet<PathBuf>,
) -> (Vec<Candidate>, Vec<Skipped>) {
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    let mut queue = vec![(dir.clone(), 0u32)];
    while let Some((dir, base_depth)) = queue.pop() {
        if walked.iter().any(|w| dir.as_path().starts_with(w)) {
            continue;
        }
        walked.insert(dir.as_path().to_path_buf());
        let mut more = Vec::new();
        for found in walk_one(rules, &dir, base_depth, request) {
            match found {
                Found::File(c) => files.push(c),
                Found::Skip(s) => skipped.push(s),
                Found::Dir(dir, depth) => more.push((dir, depth)),
            }
        }
        // Shortest first, so a directory and its subdirectory are walked once, deterministically.
        more.sort_by(|a, b| b.0.as_path().cmp(a.0.as_path()));
        queue.extend(more);
    }
    (files, skipped)
}

fn walk_one(
    rules: &WalkRules<'_>,
    dir: &SandboxedPath,
    base_depth: u32,
    request: u32,
) -> Vec<Found> {
    // Ignore files are read by `Ignores` (regular files inside the roots only); the crate reads
    // none.
    let ignores = Arc::new(Ignores::new(rules.sandbox, dir.as_path(), false));
    let filter = ignores.clone();
    let mut b = WalkBuilder::new(dir.as_path());
    b.hidden(false)
        .ignore(false)
        .git_ignore(false)
        .git_exclude(false)
        .git_global(false)
        .parents(false)
        .follow_links(false)
        .threads(rules.threads)
        .filter_entry(move |e| {
            if e.depth() == 0 {
                return true;
            }
            let name = e.file_name().to_string_lossy();
            let is_dir = e.file_type().is_some_and(|t| t.is_dir());
            // Hidden directories (VCS folders among them) and never-source folders are pruned;
            // hidden files go on, to be reported if they are secrets.
            if is_dir && (name.starts_with('.') || PRUNED_DIRS.contains(&name.as_ref())) {
                return false;
            }
            if filter.ignored(e.path(), is_dir) {
                return false;
            }
            if is_dir {
                filter.enter(e.path());
            }
            true
        });
    let (tx, rx) = mpsc::channel();
    b.build_parallel().run(|| {
        let tx = tx.clone();
        Box::new(move |entry| {
            if let Some(found) = visit(rules, dir, entry, base_depth, request) {
                let _ = tx.send(found);
            }
            WalkState::Continue
        })
    });
    drop(tx);
    let mut found: Vec<Found> = rx.into_iter().collect();
    found.extend(ignores.refused().into_iter().map(Found::Skip));
    found
}

fn visit(
    rules: &WalkRules<'_>,
    root: &SandboxedPath,
    entry: Result<ignore::DirEntry, ignore::Error>,
    base_depth: u32,
    request: u32,
) -> Option<Found> {
    let sandbox = rules.sandbox;
    let entry = match entry {
        Ok(e) => e,
        Err(e) => {
            tracing::debug!(error = %e, "walk error");
            return error_path(&e).map(|p| {
                Found::Skip(Skipped {
                    path: sandbox.display_path(&p),
                    reason: SkipReason::Unreadable,
                })
            });
        }
    };
    if entry.depth() == 0 {
        return None;
    }
    let depth = base_depth + u32::try_from(entry.depth()).unwrap_or(u32::MAX);
    let ft = entry.file_type()?;
    if ft.is_dir() {
        return None;
    }
    // The name is made only for a file reported here; `file` makes its own.
    let skip = |reason| {
        Some(Found::Skip(Skipped {
            path: sandbox.display_path(entry.path()),
            reason,
        }))
    };
    let hidden = entry.file_name().to_string_lossy().starts_with('.');
    if ft.is_symlink() {
        // Resolve it ourselves: outside the roots is reported, never followed.
        let Ok(target) = std::fs::canonicalize(entry.path()) else {
            return skip(SkipReason::Unreadable); // dangling, or a loop of links
        };
        let Some(target) = sandbox.check(&target) else {
            return skip(SkipReason::OutsideRoot);
        };
        let Ok(meta) = std::fs::metadata(target.as_path()) else {
            return skip(SkipReason::Unreadable);
        };
        if meta.is_dir() {
            // Pruned like a real directory of that name would be.
            let name = entry.file_name().to_string_lossy();
            if hidden || PRUNED_DIRS.contains(&name.as_ref()) {
                return None;
            }
            rules.linked.store(true, Ordering::Relaxed);
            return Some(Found::Dir(target, depth));
        }
        if hidden && rules.secrets.rule(entry.path(), Path::new("")).is_none() {
            return None;
        }
        if !meta.is_file() {
            return skip(SkipReason::NotRegular);
        }
        rules.linked.store(true, Ordering::Relaxed);
        return file(rules, target, Some(entry.path()), depth, request);
    }
    let path = root.walked(entry.path())?;
    if hidden {
        // Hidden files are not sent; those that look like secrets are reported as such.
        return rules
            .secrets
            .rule(path.as_path(), sandbox.relative(&path))
            .and_then(|_| skip(SkipReason::Secret));
    }
    if !ft.is_file() {
        return skip(SkipReason::NotRegular);
    }
    file(rules, path, None, depth, request)
}

/// A regular file, reached directly or through the symlink `link`.
fn file(
    rules: &WalkRules<'_>,
    path: SandboxedPath,
    link: Option<&Path>,
    depth: u32,
    request: u32,
) -> Option<Found> {
    let sandbox = rules.sandbox;
    let display = sandbox.display(&path);
    // Reported under the name it was reached by (the link's, for a symlink).
    let skip = |reason| {
        let shown = link.map_or_else(|| display.clone(), |l| sandbox.display_path(l));
        Some(Found::Skip(Skipped {
            path: shown,
            reason,
        }))
    };
    let relative = sandbox.relative(&path);
    if rules.secrets.rule(path.as_path(), relative).is_some()
        || link.is_some_and(|l| super::secrets::name_rule(l).is_some())
    {
        return skip(SkipReason::Secret);
    }
    if rules.exclude.is_some_and(|g| g.is_match(relative))
        || rules.include.is_some_and(|g| !g.is_match(relative))
    {
        return skip(SkipReason::Ignored);
    }
    Some(Found::File(Candidate {
        class: classify(relative),
        path,
        display,
        depth,
        request,
    }))
}

/// The path of an I/O error met while walking (permission denied, vanished). Errors in ignore
/// files themselves (a bad glob) are only logged: they say nothing about a file to report.
fn error_path(e: &ignore::Error) -> Option<PathBuf> {
    match e {
        ignore::Error::WithPath { path, err } => {
            matches!(innermost(err), ignore::Error::Io(_)).then(|| path.clone())
        }
        ignore::Error::WithDepth { err, .. } => error_path(err),
        _ => None,
    }
}

fn innermost(e: &ignore::Error) -> &ignore::Error {
    match e {
        ignore::Error::WithPath { err, .. }
        | ignore::Error::WithDepth { err, .. }
        | ignore::Error::WithLineNumber { err, .. } => innermost(err),
        other => other,
    }
}

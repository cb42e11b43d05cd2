//! The sandboxed file collector: resolves requested paths inside the project roots, expands
//! directories, reads text files with line numbers, redacts secrets and fits the result into a
//! token budget by priority. Synchronous: the async shell calls it through `spawn_blocking`;
//! it uses every core itself (walking, reading and counting in parallel).
//!
//! Only `sandbox::SandboxedPath` can be opened (by `sandbox::open`, the one place that opens
//! user files); it is built only by `Sandbox::resolve`/`check`, after canonicalisation.
//!
//! A request runs in two phases. Discovery (`walk`) turns the requested paths into candidate
//! files from names and metadata alone, reporting what is left out for reasons known without
//! reading (outside the root, secret by name, ignored by pattern, too large, not a regular file).
//! The fill (`fill`) sorts the candidates by priority (`classify`) and reads, redacts
//! (`secrets`), numbers (`render`) and counts (`tokens`) them in parallel until the budget is
//! full.
//!
//! What an edit may write is the collector's rule too (`edits`): the verify step and the command
//! line's outputs read an edit's file only through it.

pub mod bpe;
pub mod classify;
pub mod edits;
mod entry;
mod fill;
#[cfg(windows)]
pub mod handle;
pub mod ignores;
pub mod images;
pub mod o200k;
pub mod pieces;
mod read;
pub mod render;
pub mod rules_file;
pub mod sandbox;
pub mod secrets;
mod skip;
#[cfg(test)]
mod tests;
pub mod tokens;
mod walk;
pub mod windows_path;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

pub use entry::{FileEntry, ImageEntry};
pub use read::{MAX_FILE_BYTES, Unread, line_count};
pub use sandbox::{Sandbox, SandboxError, SandboxedPath};
pub use skip::{SkipReason, Skipped};

/// What to collect.
#[derive(Debug, Clone, Default)]
pub struct CollectRequest {
    /// Paths as the user gave them (files or directories, relative to the first root or absolute).
    pub paths: Vec<String>,
    /// Token budget for the file blocks together.
    pub budget: u64,
    /// Files already sent in the thread: canonical path -> content hash. Unchanged ones are
    /// skipped with `AlreadySent`.
    pub already_sent: HashMap<PathBuf, String>,
    /// A team's `ignore_patterns` (`crate::rules`): files they match are never read, and are
    /// named among the skipped, whether walked or named.
    pub ignore: Option<Arc<crate::rules::Ignore>>,
}

#[derive(Debug, Clone, Default)]
pub struct Collected {
    /// In the order they are to be sent (stable for the same request and tree).
    pub files: Vec<FileEntry>,
    pub skipped: Vec<Skipped>,
    /// Sum of `files[].tokens`.
    pub tokens: u64,
    /// Secret-looking values replaced, over all files, per rule.
    pub redactions: crate::redact::Counts,
}

/// What a walk would consider: display paths in priority order, and what was left out.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    pub files: Vec<String>,
    pub skipped: Vec<Skipped>,
}

/// One file read as text, redacted.
#[derive(Debug, Clone)]
pub struct ReadText {
    /// The path as shown.
    pub display: String,
    pub text: String,
    /// Secret-looking values replaced.
    pub redactions: usize,
}

/// A request the collector refuses as a whole.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CollectError {
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// A file named explicitly that is a secret by name: refused, not silently dropped.
    #[error(
        "{path} looks like a secret file ({rule}) and is never sent. Leave it out, or copy the non-secret parts into another file."
    )]
    SecretRefused { path: String, rule: String },
    #[error("{path}: {message}")]
    Image { path: String, message: String },
    #[error("invalid collector configuration: {0}")]
    Config(String),
    /// A file asked for by name that cannot be read as text (binary, too large, not a regular
    /// file, gone).
    #[error("{path} cannot be read as text: {why}")]
    Unreadable { path: String, why: String },
}

/// What the collector is configured with (`PROJECT_ROOT`, `GEMINI_MCP_SECRET_FILES`,
/// `GEMINI_MCP_INCLUDE`, `GEMINI_MCP_EXCLUDE`).
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// Canonical sandbox roots.
    pub roots: Vec<PathBuf>,
    /// Extra file-name globs treated as secrets (added to the built-in list).
    pub secret_globs: Vec<String>,
    /// When non-empty, directory walks keep only files matching one of these globs.
    pub include_globs: Vec<String>,
    pub exclude_globs: Vec<String>,
}

impl Settings {
    /// Compiles the globs: the error names the setting and the pattern.
    pub fn check(&self) -> Result<(), CollectError> {
        self.compile().map(|_| ())
    }

    fn compile(
        &self,
    ) -> Result<(secrets::SecretNames, Option<GlobSet>, Option<GlobSet>), CollectError> {
        let secrets = secrets::SecretNames::new(&self.secret_globs)
            .map_err(|e| CollectError::Config(format!("GEMINI_MCP_SECRET_FILES: {e}")))?;
        let include = globs("GEMINI_MCP_INCLUDE", &self.include_globs)?;
        let exclude = globs("GEMINI_MCP_EXCLUDE", &self.exclude_globs)?;
        Ok((secrets, include, exclude))
    }
}

/// The collector, built once from its settings and shared.
pub struct Collector {
    sandbox: Sandbox,
    secrets: secrets::SecretNames,
    include: Option<GlobSet>,
    exclude: Option<GlobSet>,
    threads: usize,
    /// Persistent workers for reading and counting (see `fill`); `None` runs on the caller.
    pool: Option<Arc<rayon::ThreadPool>>,
    /// The background warm-up of the tokenizer and the workers, until it is waited for.
    warming: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Set once a warm-up has been started.
    warmed: std::sync::atomic::AtomicBool,
}

impl Collector {
    /// Builds the collector (its worker threads, no tokenizer yet: see [`warm_up`](Self::warm_up)).
    pub fn new(settings: &Settings) -> Result<Collector, CollectError> {
        let (secrets, include, exclude) = settings.compile()?;
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
        Ok(Collector {
            sandbox: Sandbox::new(settings.roots.clone()),
            secrets,
            include,
            exclude,
            threads,
            pool: None,
            warming: std::sync::Mutex::new(None),
            warmed: std::sync::atomic::AtomicBool::new(false),
        }
        .with_threads(threads))
    }

    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// Worker threads used for walking, reading and counting.
    pub fn with_threads(mut self, threads: usize) -> Collector {
        self.threads = threads.max(1);
        self.pool = match rayon::ThreadPoolBuilder::new()
            .num_threads(self.threads)
            .thread_name(|i| format!("collector-{i}"))
            .build()
        {
            Ok(p) => Some(Arc::new(p)),
            Err(e) => {
                tracing::warn!(error = %e, "no worker threads; collecting on one thread");
                None
            }
        };
        self
    }

    /// Loads and warms the tokenizer on the workers in a background thread (the vocabulary's
    /// table, 2 MiB built in milliseconds, each worker's first pieces and the secret rules'
    /// automata), beside the request's walking and reading. Idempotent. The server calls it on
    /// its first tool call, never at startup: an idle server stays small; the command line calls
    /// it at once.
    pub fn warm_up(&self) {
        let mut warming = match self.warming.lock() {
            Ok(w) => w,
            Err(p) => p.into_inner(),
        };
        if warming.is_some() || self.warmed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let pool = self.pool.clone();
        *warming = std::thread::Builder::new()
            .name("tokenizer-warm-up".into())
            .spawn(move || {
                tokens::warm_up();
                if let Some(pool) = pool {
                    pool.broadcast(|_| tokens::warm_up());
                }
            })
            .ok();
    }

    /// [`collect`](Self::collect) for files counted before: a file whose content hash is
    /// `known[path].0` takes `known[path].1` as its token count instead of being counted again.
    /// History re-reads every file of a thread on each continued call, and counting is most of
    /// the cost of that (BENCHMARKS.md, Thread store).
    pub fn collect_counted(
        &self,
        req: &CollectRequest,
        known: &HashMap<PathBuf, (String, u64)>,
    ) -> Result<Collected, CollectError> {
        self.collect_with(req, known)
    }

    /// Waits until a background warm-up started by [`warm_up`](Self::warm_up) is done. Never
    /// needed for correctness: a request before then only waits for the vocabulary.
    pub fn wait_ready(&self) {
        let handle = match self.warming.lock() {
            Ok(mut w) => w.take(),
            Err(p) => p.into_inner().take(),
        };
        if let Some(h) = handle {
            let _ = h.join();
        }
    }

    /// The secret-file rule `path` (a sandboxed path) matches: the built-in rules of
    /// [`secret_rule`] plus the globs of `GEMINI_MCP_SECRET_FILES`.
    pub fn secret_rule(&self, path: &SandboxedPath) -> Option<String> {
        self.secrets
            .rule(path.as_path(), self.sandbox.relative(path))
    }

    /// [`Collector::secret_rule`] for a path that may not exist (a deleted or renamed file in a
    /// git change): matched by name only, never opened. `path` is absolute; the configured globs
    /// see it relative to the root that holds it.
    pub fn secret_name_rule(&self, path: &std::path::Path) -> Option<String> {
        let relative = self
            .sandbox
            .roots()
            .iter()
            .find_map(|r| path.strip_prefix(r).ok())
            .unwrap_or(path);
        self.secrets.rule(path, relative)
    }

    /// Resolves, walks, reads, numbers, redacts and budgets. Files named explicitly come first.
    ///
    /// Refused as a whole (nothing is read): a path outside the roots (or missing), and a file
    /// named explicitly that is a secret by its name.
    pub fn collect(&self, req: &CollectRequest) -> Result<Collected, CollectError> {
        self.collect_with(req, &HashMap::new())
    }

    fn collect_with(
        &self,
        req: &CollectRequest,
        counted: &HashMap<PathBuf, (String, u64)>,
    ) -> Result<Collected, CollectError> {
        let started = std::time::Instant::now();
        // Resolve everything first: one bad path refuses the request before anything is read.
        let mut resolved = Vec::with_capacity(req.paths.len());
        for raw in &req.paths {
            let p = self.sandbox.resolve(raw)?;
            let meta = std::fs::metadata(p.as_path()).map_err(|_| SandboxError::NotFound {
                path: raw.clone(),
                root: self.sandbox.roots()[p.root_index()].display().to_string(),
            })?;
            if !meta.is_dir() {
                let given = secrets::name_rule(Path::new(raw)).map(str::to_string);
                if let Some(rule) = given.or_else(|| self.secret_rule(&p)) {
                    return Err(CollectError::SecretRefused {
                        path: raw.clone(),
                        rule,
                    });
                }
            }
            resolved.push((p, meta));
        }

        let rules = walk::WalkRules {
            sandbox: &self.sandbox,
            secrets: &self.secrets,
            include: self.include.as_ref(),
            exclude: self.exclude.as_ref(),
            threads: self.threads,
            linked: AtomicBool::new(false),
        };
        let mut candidates = Vec::new();
        let mut skipped = Vec::new();
        let mut walked = BTreeSet::new();
        for (request, (p, meta)) in resolved.into_iter().enumerate() {
            let request = u32::try_from(request).unwrap_or(u32::MAX);
            let display = self.sandbox.display(&p);
            if meta.is_dir() {
                let (files, skips) = walk::walk(&rules, &p, request, &mut walked);
                candidates.extend(files);
                skipped.extend(skips);
            } else if !meta.file_type().is_file() {
                skipped.push(Skipped {
                    path: display,
                    reason: SkipReason::NotRegular,
                });
            } else {
                candidates.push(walk::Candidate {
                    path: p,
                    display,
                    class: classify::Class::Explicit,
                    depth: 0,
                    request,
                });
            }
        }
        if let Some(ignore) = &req.ignore {
            leave_out_ignored(ignore, &mut candidates, &mut skipped);
        }
        let walked_files = candidates.len();

        // Priority order, then the same file reached twice (two requests, or a symlink) is kept
        // once, at its best rank.
        candidates.sort_unstable_by(|a, b| a.key().cmp(&b.key()));
        if req.paths.len() > 1 || rules.linked.load(Ordering::Relaxed) {
            let keep: Vec<bool> = {
                let mut seen = HashSet::with_capacity(candidates.len());
                candidates
                    .iter()
                    .map(|c| seen.insert(c.path.as_path()))
                    .collect()
            };
            let mut keep = keep.into_iter();
            candidates.retain(|_| keep.next().unwrap_or(false));
        }
        skipped.sort_by(|a, b| {
            (a.path.as_str(), a.reason.describe()).cmp(&(b.path.as_str(), b.reason.describe()))
        });
        skipped.dedup();

        let discovered_ms = started.elapsed().as_millis() as u64;
        let prior = fill::Prior {
            already_sent: &req.already_sent,
            counted,
        };
        let filled = fill::fill(&candidates, req.budget, prior, self.pool.as_deref());
        skipped.extend(filled.skipped);
        let tokens = filled.files.iter().map(|f| f.tokens).sum();
        let mut redactions = crate::redact::Counts::default();
        for f in &filled.files {
            redactions.merge(&f.redactions);
        }
        tracing::debug!(
            candidates = walked_files,
            unique = candidates.len(),
            sent = filled.files.len(),
            skipped = skipped.len(),
            tokens,
            budget = req.budget,
            opened = filled.opened,
            counted_bytes = filled.counted_bytes,
            discovered_ms,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "collected"
        );
        Ok(Collected {
            files: filled.files,
            skipped,
            tokens,
            redactions,
        })
    }

    /// Reads images (png, jpeg, webp, gif, recognised by their first bytes) inside the sandbox.
    /// The files a walk of `raw` (a directory, or one file) would consider, by the same rules
    /// as [`Collector::collect`] (roots, ignore files, configured globs, symlinks, secret names),
    /// in priority order, with what was left out and why. Nothing is read.
    pub fn list(&self, raw: &str) -> Result<Listing, CollectError> {
        let (files, skipped) = self.candidates(raw)?;
        Ok(Listing {
            files: files.into_iter().map(|c| c.display).collect(),
            skipped,
        })
    }

    /// Reads every text file a [`Collector::list`] of `raw` holds whose display path `keep`
    /// accepts, through the same sandbox (binary, too large, special or changed files are passed
    /// over), on all cores, and hands each file's bytes, unredacted, to `visit`. Returns what
    /// `visit` kept, in listing order. For searching: whatever `visit` shows of a file must go
    /// through redaction first.
    pub fn scan<T: Send>(
        &self,
        raw: &str,
        keep: impl Fn(&str) -> bool + Sync,
        visit: impl Fn(&str, &[u8]) -> Option<T> + Sync,
    ) -> Result<Vec<T>, CollectError> {
        use rayon::prelude::*;
        let (files, _) = self.candidates(raw)?;
        Ok(files
            .par_iter()
            .filter(|c| keep(&c.display))
            .filter_map(|c| {
                let bytes = read::open(&c.path, MAX_FILE_BYTES)
                    .and_then(|o| o.read_bytes(MAX_FILE_BYTES, true, || {}))
                    .ok()?;
                visit(&c.display, &bytes)
            })
            .collect())
    }

    /// The files a listing of `raw` holds, in priority order, and what was left out.
    fn candidates(&self, raw: &str) -> Result<(Vec<walk::Candidate>, Vec<Skipped>), CollectError> {
        let p = self.sandbox.resolve(raw)?;
        let meta = std::fs::metadata(p.as_path()).map_err(|_| SandboxError::NotFound {
            path: raw.to_string(),
            root: self.sandbox.roots()[p.root_index()].display().to_string(),
        })?;
        if !meta.is_dir() {
            let display = self.sandbox.display(&p);
            return Ok(match self.secret_rule(&p) {
                Some(_) => (
                    Vec::new(),
                    vec![Skipped {
                        path: display,
                        reason: SkipReason::Secret,
                    }],
                ),
                None => (
                    vec![walk::Candidate {
                        path: p,
                        display,
                        class: classify::Class::Source,
                        depth: 0,
                        request: 0,
                    }],
                    Vec::new(),
                ),
            });
        }
        let rules = walk::WalkRules {
            sandbox: &self.sandbox,
            secrets: &self.secrets,
            include: self.include.as_ref(),
            exclude: self.exclude.as_ref(),
            threads: self.threads,
            linked: AtomicBool::new(false),
        };
        let (mut files, mut skipped) = walk::walk(&rules, &p, 0, &mut BTreeSet::new());
        files.sort_unstable_by(|a, b| a.key().cmp(&b.key()));
        skipped.sort_by(|a, b| a.path.cmp(&b.path));
        Ok((files, skipped))
    }

    /// One file as text, redacted, for reading a part of it: refused like a named file in
    /// [`Collector::collect`] when it is a secret by name; binary, too large, not a regular file
    /// or gone: [`CollectError::Unreadable`].
    pub fn read_text(&self, raw: &str) -> Result<ReadText, CollectError> {
        let p = self.sandbox.resolve(raw)?;
        let display = self.sandbox.display(&p);
        self.refuse_secret(raw, &p)?;
        let text = read::open(&p, MAX_FILE_BYTES)
            .and_then(read::Opened::read_text)
            .map_err(|why| CollectError::Unreadable {
                path: display.clone(),
                why: why.to_string(),
            })?;
        Ok(redacted(display, text))
    }

    /// A file named `raw` (resolved to `p`) that is a secret by its name, given or resolved:
    /// refused.
    fn refuse_secret(&self, raw: &str, p: &SandboxedPath) -> Result<(), CollectError> {
        let given = secrets::name_rule(Path::new(raw)).map(str::to_string);
        match given.or_else(|| self.secret_rule(p)) {
            Some(rule) => Err(CollectError::SecretRefused {
                path: raw.to_string(),
                rule,
            }),
            None => Ok(()),
        }
    }
}

/// Leaves out the candidates a team's `ignore_patterns` match, walked or named, naming them
/// among the skipped.
fn leave_out_ignored(
    ignore: &crate::rules::Ignore,
    candidates: &mut Vec<walk::Candidate>,
    skipped: &mut Vec<Skipped>,
) {
    candidates.retain(|c| {
        let ignored = ignore.ignores(c.path.as_path());
        if ignored {
            skipped.push(Skipped {
                path: c.display.clone(),
                reason: SkipReason::Ignored,
            });
        }
        !ignored
    });
}

/// A file's text as [`Collector::read_text`] returns it: redacted.
fn redacted(display: String, text: read::Text) -> ReadText {
    let (text, redactions) = crate::redact::redact(&text.text);
    ReadText {
        display,
        text,
        redactions,
    }
}

fn globs(setting: &str, patterns: &[String]) -> Result<Option<GlobSet>, CollectError> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        // File names are case-insensitive on Windows: so are the patterns there.
        let glob = GlobBuilder::new(p).case_insensitive(cfg!(windows)).build();
        b.add(glob.map_err(|e| CollectError::Config(format!("{setting}: {e}")))?);
    }
    b.build()
        .map(Some)
        .map_err(|e| CollectError::Config(format!("{setting}: {e}")))
}

/// Reads a sandboxed file whole, for the other readers of user files (the git reader's work-tree
/// content): opened by [`sandbox::open`] (non-blocking, no symlink followed), a regular file of at
/// most `max` bytes, unchanged while read. Binary detection is left to the caller.
pub fn read_file(p: &SandboxedPath, max: u64) -> Result<Vec<u8>, Unread> {
    read::open(p, max)?.read_bytes(max, false, || {})
}

/// The built-in secret-file rule a path's file name matches (`.env*`, `*.pem`, `*.key`,
/// `id_rsa*`, credential stores and files), if any. Used for walking, explicit requests and git
/// changes alike; [`Collector::secret_rule`] adds the configured `GEMINI_MCP_SECRET_FILES` globs.
pub fn secret_rule(path: &std::path::Path) -> Option<&'static str> {
    secrets::name_rule(path)
}

/// A symbolic link in a test's tree, made as the platform makes one: on Windows a directory link
/// when the target is a directory (a relative target read from the link's directory), a file
/// link otherwise (a dangling one too).
#[cfg(test)]
pub(crate) fn symlink(target: impl AsRef<Path>, link: impl AsRef<Path>) {
    let (target, link) = (target.as_ref(), link.as_ref());
    #[cfg(unix)]
    let made = std::os::unix::fs::symlink(target, link);
    #[cfg(windows)]
    let made = match link
        .parent()
        .unwrap_or(Path::new("."))
        .join(target)
        .is_dir()
    {
        true => std::os::windows::fs::symlink_dir(target, link),
        false => std::os::windows::fs::symlink_file(target, link),
    };
    made.unwrap_or_else(|e| panic!("symlink {} -> {}: {e}", link.display(), target.display()));
    // Wine's CreateSymbolicLinkW reports success and makes nothing.
    assert!(
        link.symlink_metadata().is_ok(),
        "no link was made at {}",
        link.display()
    );
}

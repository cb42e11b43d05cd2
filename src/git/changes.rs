//! Reading one repository's changes with git2, in one pass per diff: HEAD → index (staged),
//! index → work tree (unstaged; untracked files as additions, .gitignore respected), or
//! merge-base(`compare_to`, HEAD) → the pending state.
//!
//! `compare_to` keeps uncommitted work: the diff runs from the merge base to the work tree
//! (through the index) when unstaged changes are included, to the index when only staged ones
//! are, and to HEAD when neither is; untracked files are added when included. So "since main"
//! means what the branch will contribute once the pending work is committed (the peer reviewed
//! commits only and missed the work in progress).
//!
//! Each changed file becomes one [`FileChange`]: a unified diff, or only its name when its
//! content must not or cannot be shown (a secret by name: never read; binary; over the size cap;
//! a merge conflict). Renames and copies are detected (untracked files too), mode changes named.
//!
//! Building a file's patch loads its content (and looks up its attributes), so it is not done
//! here: a change that needs one is [`Body::Unbuilt`], and [`build`] makes its patch when the
//! budget reaches it (`render` takes them in priority order and stops once the budget is full).
//! Files past the budget are never read (but the one whose diff, counted, showed it full).

use std::path::Path;

use git2::{
    Commit, Delta, Diff, DiffFindOptions, DiffOptions, ErrorCode, FileMode, Index, Oid, Patch,
    Repository,
};

use super::discover::Found;
use super::error::GitError;
use super::request::DiffRequest;
use crate::collector::Collector;

/// Files over this size are named, never diffed (the collector's cap).
pub(super) const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

/// Which comparison a change comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Section {
    /// HEAD → index.
    Staged,
    /// Index → work tree.
    Unstaged,
    /// New files git does not track yet.
    Untracked,
    /// merge-base(compare_to, HEAD) → work tree, index or HEAD.
    Since,
}

impl Section {
    pub fn short(self) -> &'static str {
        match self {
            Section::Staged => "staged",
            Section::Unstaged => "unstaged",
            Section::Untracked => "untracked",
            Section::Since => "since compare_to",
        }
    }
}

/// What is shown of a changed file.
#[derive(Debug, Clone)]
pub(super) enum Body {
    /// A unified diff (`diff --git` header included).
    Patch(String),
    /// Binary content: named with its sizes, never dumped.
    Binary { old: u64, new: u64 },
    /// Over [`MAX_FILE_BYTES`].
    TooLarge { size: u64 },
    /// A secret by its name: never read.
    Secret { rule: String },
    /// Matched by a team's `ignore_patterns`: never read.
    Ignored,
    /// An unresolved merge conflict in the index.
    Conflicted,
    /// git could not read it.
    Unreadable,
    /// Its patch is not built yet (see [`build`]); never read if the budget does not reach it.
    Unbuilt(Pending),
    /// Its patch turned out empty (the file is unchanged after all): not reviewed.
    Gone,
}

/// Where an unbuilt patch comes from.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pending {
    /// Index into the repository's [`RepoChanges::diffs`].
    diff: usize,
    /// The delta's index in that diff.
    delta: usize,
    status: Delta,
    submodule: bool,
    /// The new version is read from the work tree (else from its blob).
    workdir: bool,
}

/// Where the new version's full content can be read, for context.
#[derive(Debug, Clone, Copy)]
pub(super) enum Content {
    Blob(Oid),
    Workdir,
}

#[derive(Debug, Clone)]
pub(super) struct FileChange {
    /// Index into the repositories (set by the caller).
    pub repo: usize,
    pub section: Section,
    pub status: &'static str,
    /// Relative to the repository, `/`-separated.
    pub path: String,
    pub old_path: Option<String>,
    pub body: Body,
    pub content: Option<Content>,
    /// The old version's blob, when there is one (its key blocks are redacted in the diff).
    pub old_blob: Option<Oid>,
    /// Lines of the new version the diff shows (its hunks' new ranges, 1-based, inclusive):
    /// when they cover the whole file, its full content would add nothing.
    pub shown_lines: Vec<(u32, u32)>,
}

/// One repository's changes.
#[derive(Default)]
pub(super) struct RepoChanges<'r> {
    /// Branch and HEAD, as shown.
    pub head: String,
    /// The comparisons made, with their titles, in order.
    pub sections: Vec<(Section, String)>,
    pub notes: Vec<String>,
    pub files: Vec<FileChange>,
    /// `compare_to` names nothing here; uncommitted work was read instead.
    pub bad_ref: Option<GitError>,
    /// The diffs the unbuilt patches come from.
    pub diffs: Vec<Diff<'r>>,
}

/// Reads one repository. `prefix` is prepended to paths in diff headers when several
/// repositories are reviewed (e.g. `libs/a/`), so every path Gemini sees is unambiguous.
pub(super) fn read<'r>(
    collector: &Collector,
    found: &'r Found,
    display: &str,
    prefix: &str,
    req: &DiffRequest,
) -> Result<RepoChanges<'r>, GitError> {
    let repo = &found.repo;
    let err = |e: git2::Error| GitError::git(display, &e);
    let mut out = RepoChanges::default();

    if let Some(file) = &req.index_file
        && index_belongs_to(repo, file)
    {
        let mut index = Index::open(file).map_err(err)?;
        repo.set_index(&mut index).map_err(err)?;
    }
    let index = repo.index().map_err(err)?;
    let head = match repo.head() {
        Ok(r) => Some(r.peel_to_commit().map_err(err)?),
        Err(e) if matches!(e.code(), ErrorCode::UnbornBranch | ErrorCode::NotFound) => None,
        Err(e) => return Err(err(e)),
    };
    out.head = describe_head(repo, head.as_ref());
    let head_tree = head.as_ref().map(Commit::tree).transpose().map_err(err)?;
    let reader = Reader {
        collector,
        found,
        prefix,
        ignore: req.ignore.as_deref(),
    };

    let view = Compare {
        repo,
        reader: &reader,
        index: &index,
        head_tree: head_tree.as_ref(),
    };
    if let Some(reference) = &req.compare_to {
        match merge_base(repo, reference, head.as_ref()) {
            Ok(base) => {
                view.since(base, reference, req, &mut out).map_err(err)?;
                return Ok(out);
            }
            Err(message) => {
                let e = GitError::BadRef {
                    reference: reference.clone(),
                    repo: display.to_string(),
                    message,
                };
                out.notes
                    .push(format!("{e}; only its uncommitted changes are reviewed."));
                out.bad_ref = Some(e);
            }
        }
    }
    view.uncommitted(head.is_some(), req, &mut out)
        .map_err(err)?;
    Ok(out)
}

/// What the comparisons of one repository are made between.
struct Compare<'r, 'a> {
    repo: &'r Repository,
    reader: &'a Reader<'a>,
    index: &'a Index,
    head_tree: Option<&'a git2::Tree<'a>>,
}

impl<'r> Compare<'r, '_> {
    /// Everything since the merge base `base` of `reference` and HEAD: to the work tree when
    /// unstaged changes are reviewed, else to the index when staged ones are, else to HEAD.
    fn since(
        &self,
        base: Oid,
        reference: &str,
        req: &DiffRequest,
        out: &mut RepoChanges<'r>,
    ) -> Result<(), git2::Error> {
        let (repo, reader) = (self.repo, self.reader);
        let base_tree = repo.find_commit(base).and_then(|c| c.tree())?;
        let short = short_id(base);
        let (mut diff, to) = if req.include_unstaged {
            let mut o = reader.options(req.include_untracked);
            let d = repo.diff_tree_to_workdir_with_index(Some(&base_tree), Some(&mut o))?;
            (d, "work tree (commits, staged and unstaged changes)")
        } else if req.include_staged {
            let mut o = reader.options(false);
            let d = repo.diff_tree_to_index(Some(&base_tree), Some(self.index), Some(&mut o))?;
            (d, "index (commits and staged changes)")
        } else {
            let mut o = reader.options(false);
            let d = repo.diff_tree_to_tree(Some(&base_tree), self.head_tree, Some(&mut o))?;
            (d, "HEAD (commits only)")
        };
        find_renames(&mut diff, req.include_unstaged && req.include_untracked)?;
        out.sections.push((
            Section::Since,
            format!("Changes since `{reference}` (merge base {short} → {to})"),
        ));
        reader.collect(diff, out, |_| Some(Section::Since), req.include_unstaged)?;
        if req.include_untracked && !req.include_unstaged {
            untracked_only(repo, reader, self.index, out)?;
        }
        Ok(())
    }

    /// The uncommitted work: staged (HEAD → index), unstaged (index → work tree) and untracked
    /// files, as asked.
    fn uncommitted(
        &self,
        has_head: bool,
        req: &DiffRequest,
        out: &mut RepoChanges<'r>,
    ) -> Result<(), git2::Error> {
        let (repo, reader) = (self.repo, self.reader);
        if req.include_staged {
            let mut o = reader.options(false);
            let mut diff =
                repo.diff_tree_to_index(self.head_tree, Some(self.index), Some(&mut o))?;
            find_renames(&mut diff, false)?;
            let from = if has_head { "HEAD" } else { "no commits yet" };
            out.sections
                .push((Section::Staged, format!("Staged changes ({from} → index)")));
            reader.collect(diff, out, |_| Some(Section::Staged), false)?;
        }
        if req.include_unstaged {
            let mut o = reader.options(req.include_untracked);
            let mut diff = repo.diff_index_to_workdir(Some(self.index), Some(&mut o))?;
            find_renames(&mut diff, req.include_untracked)?;
            out.sections.push((
                Section::Unstaged,
                "Unstaged changes (index → work tree)".into(),
            ));
            if req.include_untracked {
                out.sections.push((
                    Section::Untracked,
                    "Untracked files (new, not yet added; shown as additions)".into(),
                ));
            }
            reader.collect(
                diff,
                out,
                |status| match status {
                    Delta::Untracked => Some(Section::Untracked),
                    _ => Some(Section::Unstaged),
                },
                true,
            )?;
        } else if req.include_untracked {
            untracked_only(repo, reader, self.index, out)?;
        }
        Ok(())
    }
}

/// Untracked files alone (when unstaged changes are not reviewed).
fn untracked_only<'r>(
    repo: &'r Repository,
    reader: &Reader<'_>,
    index: &Index,
    out: &mut RepoChanges<'r>,
) -> Result<(), git2::Error> {
    let mut o = reader.options(true);
    let diff = repo.diff_index_to_workdir(Some(index), Some(&mut o))?;
    out.sections.push((
        Section::Untracked,
        "Untracked files (new, not yet added; shown as additions)".into(),
    ));
    reader.collect(
        diff,
        out,
        |status| (status == Delta::Untracked).then_some(Section::Untracked),
        true,
    )
}

struct Reader<'a> {
    collector: &'a Collector,
    found: &'a Found,
    prefix: &'a str,
    /// A team's `ignore_patterns`: a change they match is named, never read.
    ignore: Option<&'a crate::rules::Ignore>,
}

impl Reader<'_> {
    fn options(&self, untracked: bool) -> DiffOptions {
        let mut o = DiffOptions::new();
        o.include_typechange(true)
            .ignore_submodules(false)
            .max_size(MAX_FILE_BYTES as i64)
            .context_lines(3)
            .id_abbrev(7);
        if untracked {
            o.include_untracked(true)
                .recurse_untracked_dirs(true)
                .show_untracked_content(true);
        }
        if !self.prefix.is_empty() {
            o.old_prefix(format!("a/{}", self.prefix))
                .new_prefix(format!("b/{}", self.prefix));
        }
        if let Some(scope) = &self.found.scope {
            o.pathspec(scope.as_str()).disable_pathspec_match(true);
        }
        o
    }

    /// Turns a diff's deltas into changes, their patches unbuilt, and keeps the diff for
    /// [`build`]. `section` says where a delta belongs (None: not wanted); `workdir` whether
    /// its new version is read from the work tree (else from its blob).
    fn collect<'r>(
        &self,
        diff: Diff<'r>,
        out: &mut RepoChanges<'r>,
        section: impl Fn(Delta) -> Option<Section>,
        workdir: bool,
    ) -> Result<(), git2::Error> {
        let d = out.diffs.len();
        for i in 0..diff.deltas().len() {
            if let Some(change) = self.change(&diff, d, i, &section, workdir) {
                out.files.push(change);
            }
        }
        out.diffs.push(diff);
        Ok(())
    }

    /// The `i`th change of `diff` (the repository's `d`th), or `None` for what is not reviewed
    /// here (unmodified, ignored, a directory such as a nested repository, a section not asked
    /// for). Nothing of the file is read: what its name, status and size decide is set, the
    /// rest left [`Body::Unbuilt`].
    fn change(
        &self,
        diff: &Diff<'_>,
        d: usize,
        i: usize,
        section: &impl Fn(Delta) -> Option<Section>,
        workdir: bool,
    ) -> Option<FileChange> {
        let delta = diff.get_delta(i)?;
        let status = delta.status();
        if matches!(status, Delta::Unmodified | Delta::Ignored) {
            return None;
        }
        let section = section(status)?;
        let (old, new) = (delta.old_file(), delta.new_file());
        let path = file_path(&new).or_else(|| file_path(&old))?;
        // A directory git did not descend into: a nested repository, reviewed on its own
        // when it lies within max_depth.
        if path.ends_with('/') || new.mode() == FileMode::Tree {
            return None;
        }
        let old_path = matches!(status, Delta::Renamed | Delta::Copied)
            .then(|| file_path(&old))
            .flatten()
            .filter(|o| *o != path);
        let submodule = new.mode() == FileMode::Commit || old.mode() == FileMode::Commit;
        let mut change = FileChange {
            repo: 0,
            section,
            status: if submodule {
                "submodule"
            } else {
                status_name(status)
            },
            path,
            old_path,
            body: Body::Unreadable,
            content: None,
            old_blob: Some(old.id()).filter(|id| !id.is_zero()),
            shown_lines: Vec::new(),
        };
        // Built-in names and the configured GEMINI_MCP_SECRET_FILES globs, as for files.
        let rule = |p: &str| self.collector.secret_name_rule(&self.found.workdir.join(p));
        let secret = rule(&change.path).or_else(|| change.old_path.as_deref().and_then(rule));
        if let Some(rule) = secret {
            // Never loaded: its content must not leave the machine.
            change.body = Body::Secret { rule };
            return Some(change);
        }
        let ignored = |p: &str| {
            self.ignore
                .is_some_and(|i| i.ignores(&self.found.workdir.join(p)))
        };
        if ignored(&change.path) {
            change.body = Body::Ignored;
            return Some(change);
        }
        match status {
            Delta::Conflicted => {
                change.body = Body::Conflicted;
                return Some(change);
            }
            Delta::Unreadable => return Some(change),
            _ => {}
        }
        let size = old.size().max(new.size());
        if !submodule && size > MAX_FILE_BYTES {
            change.body = Body::TooLarge { size };
            return Some(change);
        }
        change.body = Body::Unbuilt(Pending {
            diff: d,
            delta: i,
            status,
            submodule,
            workdir,
        });
        Some(change)
    }
}

/// Builds an unbuilt change's patch (loading the file's content) from its repository's
/// `diffs`: its body becomes the patch, a binary note, or [`Body::Gone`]. Other changes are
/// left as they are.
pub(super) fn build(diffs: &[Diff<'_>], change: &mut FileChange) -> Result<(), git2::Error> {
    let Body::Unbuilt(p) = change.body else {
        return Ok(());
    };
    let Some(diff) = diffs.get(p.diff) else {
        change.body = Body::Unreadable;
        return Ok(());
    };
    let Some(mut patch) = Patch::from_diff(diff, p.delta)? else {
        change.body = Body::Gone;
        return Ok(());
    };
    let content = |id: Oid| {
        if p.workdir {
            Content::Workdir
        } else {
            Content::Blob(id)
        }
    };
    patch_body(&mut patch, p.status, p.submodule, &content, change)
}

/// An upper estimate of the bytes an unbuilt change's diff block takes, from the file's sizes
/// and path (nothing read): each byte of either version at most four bytes in the patch (an
/// invalid byte is shown as a three-byte U+FFFD; a line adds its sign), plus headers. A bound on what is worth
/// reading once the budget is nearly full, never used for the budget itself.
pub(super) fn size_bound(diffs: &[Diff<'_>], change: &FileChange) -> u64 {
    let Body::Unbuilt(p) = change.body else {
        return 0;
    };
    let sizes = diffs
        .get(p.diff)
        .and_then(|d| d.get_delta(p.delta))
        .map_or(0, |d| {
            d.old_file().size().saturating_add(d.new_file().size())
        });
    let path = (change.path.len() + change.old_path.as_ref().map_or(0, String::len)) as u64;
    sizes
        .saturating_mul(4)
        .saturating_add(path * 8)
        .saturating_add(512)
}

/// The change's body from its patch: binary files named, not dumped; submodules and mode
/// changes named by their status; for a modified text file, where its new content comes from
/// and which of its lines the hunks show.
fn patch_body(
    patch: &mut Patch<'_>,
    status: Delta,
    submodule: bool,
    content: &impl Fn(Oid) -> Content,
    change: &mut FileChange,
) -> Result<(), git2::Error> {
    let (binary, hunks, old_mode, new_mode, old_size, new_size, new_id) = {
        let d = patch.delta();
        (
            d.flags().is_binary() || d.old_file().is_binary() || d.new_file().is_binary(),
            patch.num_hunks(),
            d.old_file().mode(),
            d.new_file().mode(),
            d.old_file().size(),
            d.new_file().size(),
            d.new_file().id(),
        )
    };
    if submodule {
        change.status = "submodule";
    } else if binary {
        change.body = Body::Binary {
            old: old_size,
            new: new_size,
        };
        return Ok(());
    } else if status == Delta::Modified && hunks == 0 && old_mode != new_mode {
        change.status = "mode_changed";
    }
    let buf = patch.to_buf()?;
    change.body = Body::Patch(String::from_utf8_lossy(&buf).into_owned());
    if !submodule
        && hunks > 0
        && matches!(
            status,
            Delta::Modified | Delta::Renamed | Delta::Copied | Delta::Typechange
        )
        && new_mode != FileMode::Link
    {
        change.content = Some(content(new_id));
        for h in 0..hunks {
            let (hunk, _) = patch.hunk(h)?;
            if hunk.new_lines() > 0 {
                change
                    .shown_lines
                    .push((hunk.new_start(), hunk.new_start() + hunk.new_lines() - 1));
            }
        }
    }
    Ok(())
}

fn find_renames(diff: &mut Diff<'_>, untracked: bool) -> Result<(), git2::Error> {
    let mut f = DiffFindOptions::new();
    f.renames(true).for_untracked(untracked);
    diff.find_similar(Some(&mut f))
}

fn file_path(f: &git2::DiffFile<'_>) -> Option<String> {
    f.path_bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
}

fn status_name(d: Delta) -> &'static str {
    match d {
        Delta::Added => "added",
        Delta::Deleted => "deleted",
        Delta::Modified => "modified",
        Delta::Renamed => "renamed",
        Delta::Copied => "copied",
        Delta::Untracked => "untracked",
        Delta::Typechange => "type_changed",
        Delta::Conflicted => "conflicted",
        Delta::Unreadable => "unreadable",
        Delta::Unmodified | Delta::Ignored => "unmodified",
    }
}

fn short_id(id: Oid) -> String {
    let s = id.to_string();
    s.chars().take(7).collect()
}

/// The merge base of `reference` and HEAD, or why there is none (as text for `BadRef`).
fn merge_base(
    repo: &Repository,
    reference: &str,
    head: Option<&Commit<'_>>,
) -> Result<Oid, String> {
    let target = repo
        .revparse_single(reference)
        .map_err(|e| e.message().to_string())?
        .peel_to_commit()
        .map_err(|_| "it does not name a commit".to_string())?;
    let head = head.ok_or_else(|| "HEAD has no commits yet".to_string())?;
    repo.merge_base(target.id(), head.id()).map_err(|e| {
        if e.code() == ErrorCode::NotFound {
            "it has no common ancestor with HEAD".to_string()
        } else {
            e.message().to_string()
        }
    })
}

/// `branch `main`, HEAD 1a2b3c4 "subject"`, `detached HEAD 1a2b3c4`, or `no commits yet`.
fn describe_head(repo: &Repository, head: Option<&Commit<'_>>) -> String {
    let branch = repo
        .find_reference("HEAD")
        .ok()
        .and_then(|r| r.symbolic_target().ok().flatten().map(String::from))
        .map(|t| t.trim_start_matches("refs/heads/").to_string());
    match (head, branch) {
        (None, Some(b)) => format!("branch `{b}`, no commits yet"),
        (None, None) => "no commits yet".into(),
        (Some(c), b) => {
            let summary = c.summary().ok().flatten().unwrap_or("").to_string();
            let at = match b {
                Some(b) => format!("branch `{b}`, HEAD {}", short_id(c.id())),
                None => format!("detached HEAD {}", short_id(c.id())),
            };
            if summary.is_empty() {
                at
            } else {
                format!("{at} \"{summary}\"")
            }
        }
    }
}

/// Whether `file` lies in this repository's git directory (the only index we may swap in).
fn index_belongs_to(repo: &Repository, file: &Path) -> bool {
    let Ok(git_dir) = std::fs::canonicalize(repo.path()) else {
        return false;
    };
    file.parent()
        .and_then(|p| std::fs::canonicalize(p).ok())
        .is_some_and(|p| p == git_dir)
}

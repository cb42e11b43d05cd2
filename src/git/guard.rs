//! What libgit2 will read for a repository, checked before it reads it. libgit2 opens files
//! itself (not through the sandbox) and follows whatever the metadata says: a `.git` file or
//! symlink, `commondir`, `objects/info/alternates`, `core.worktree`, config includes. Each of those
//! must resolve inside the allowed area, and every file it may open must be a regular file (a
//! FIFO would block the call forever), or the repository is refused naming what is wrong.
//!
//! The allowed area is the roots. A repository found by looking upward, above the roots (the
//! project is a folder of a larger repository the user chose), is the user's own, not metadata
//! from inside the project: its locations are not checked, only the types of its files, and
//! only changes below the start directory are read from it.
//!
//! The checks run once per repository before it is opened: `lstat`s of the files libgit2 reads,
//! a listing of `refs/`, `logs/` and `objects/` (file types from the directory entries), and a
//! listing of the reviewed part of the work tree (the folders git descends into) for
//! `.gitignore`, `.gitattributes` and `.gitmodules`.
//! A file swapped for a FIFO between the check and libgit2's read is not covered.

use std::fs::FileType;
use std::path::{Path, PathBuf};

use git2::Repository;

use crate::collector::Sandbox;

/// Files of a git directory that libgit2 may open.
const GIT_FILES: &[&str] = &[
    "HEAD",
    "config",
    "config.worktree",
    "index",
    "packed-refs",
    "shallow",
    "commondir",
    "gitdir",
    "FETCH_HEAD",
    "ORIG_HEAD",
    "MERGE_HEAD",
    "MERGE_MSG",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "info/exclude",
    "info/grafts",
    "info/attributes",
    "info/sparse-checkout",
    "objects/info/alternates",
    "objects/info/packs",
];

/// Folders of a git directory whose every file libgit2 may open.
const GIT_TREES: &[&str] = &["refs", "logs", "objects"];

/// Files of the work tree that libgit2 reads for a diff.
const WORKTREE_FILES: &[&str] = &[".gitignore", ".gitattributes", ".gitmodules"];

/// What separates the roots of `PROJECT_ROOT` (`std::env::split_paths`).
const ROOTS_SEPARATOR: &str = if cfg!(windows) { ";" } else { ":" };

/// Largest `.git` file, `commondir` or `alternates` read.
const MAX_POINTER_BYTES: u64 = 64 * 1024;

/// Where libgit2 may read.
pub(super) struct Area<'a> {
    pub sandbox: &'a Sandbox,
    /// The repository was found above the roots (it contains them): its locations are the
    /// user's own and not checked, only the types of its files (see the module docs).
    pub upward: bool,
}

impl Area<'_> {
    fn allows(&self, canonical: &Path) -> bool {
        self.upward || self.sandbox.check(canonical).is_some()
    }

    fn roots(&self) -> String {
        let roots: Vec<String> = self
            .sandbox
            .roots()
            .iter()
            .map(|r| crate::collector::sandbox::shown(r).display().to_string())
            .collect();
        roots.join(ROOTS_SEPARATOR)
    }
}

/// Why a repository is refused: the text says what points where, and what to do.
pub(super) struct Refusal {
    pub message: String,
    /// Something points outside the roots (else: a file is not regular or cannot be read).
    pub outside: bool,
}

impl From<String> for Refusal {
    fn from(message: String) -> Refusal {
        Refusal {
            message,
            outside: false,
        }
    }
}

/// Checks the repository whose `.git` entry is in `dir`, before libgit2 opens it.
///
/// The same on Windows: std reports symbolic links, junctions and mount points alike as links
/// (resolved and checked here as on Unix), a named pipe cannot sit in a directory there, and the
/// pointer files are read through the sandbox's handle proof ([`read_small_capped`]).
pub(super) fn check_git(area: &Area<'_>, dir: &Path) -> Result<(), Refusal> {
    let dotgit = dir.join(".git");
    let meta = std::fs::symlink_metadata(&dotgit)
        .map_err(|e| Refusal::from(format!("{}: {e}", show(&dotgit))))?;
    let git_dir = if meta.file_type().is_symlink() {
        let target = resolve(area, &dotgit, "is a symlink to")?;
        if target.is_file() {
            pointer_target(area, &target, dir)?
        } else {
            target
        }
    } else if meta.is_dir() {
        dotgit.clone()
    } else if meta.is_file() {
        pointer_target(area, &dotgit, dir)?
    } else {
        return Err(not_regular(&dotgit, meta.file_type()).into());
    };
    check_git_dir(area, &git_dir, true)
}

/// The directory a `.git` file (`gitdir: <path>`) names, checked.
fn pointer_target(area: &Area<'_>, file: &Path, base: &Path) -> Result<PathBuf, Refusal> {
    let text = read_small(file)?;
    let line = text.lines().next().unwrap_or("").trim();
    let Some(target) = line.strip_prefix("gitdir:") else {
        return Err(format!(
            "{} is not a `gitdir: <path>` file; remove it or make it point at a git directory inside PROJECT_ROOT",
            show(file)
        ).into());
    };
    follow(area, file, base, target.trim(), "points to")
}

/// Checks a git directory: its files, its trees, its common directory and alternates.
fn check_git_dir(area: &Area<'_>, git_dir: &Path, follow_common: bool) -> Result<(), Refusal> {
    for name in GIT_FILES {
        check_file(area, &git_dir.join(name))?;
    }
    for tree in GIT_TREES {
        check_tree(area, &git_dir.join(tree), 0)?;
    }
    check_config(&git_dir.join("config"))?;
    let commondir = git_dir.join("commondir");
    if follow_common && commondir.exists() {
        let text = read_small(&commondir)?;
        let common = follow(area, &commondir, git_dir, text.trim(), "points to")?;
        check_git_dir(area, &common, false)?;
    }
    check_alternates(area, &git_dir.join("objects"), 0)
}

/// `objects/info/alternates`: each object store it names, checked (git allows five levels).
fn check_alternates(area: &Area<'_>, objects: &Path, depth: u32) -> Result<(), Refusal> {
    let file = objects.join("info/alternates");
    if std::fs::symlink_metadata(&file).is_err() || depth > 5 {
        return Ok(());
    }
    let text = read_small(&file)?;
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let store = follow(area, &file, objects, line, "names the object store")?;
        check_tree(area, &store, 0)?;
        check_alternates(area, &store, depth + 1)?;
    }
    Ok(())
}

/// A path named inside `file`, resolved against `base` and checked to lie in the area.
fn follow(
    area: &Area<'_>,
    file: &Path,
    base: &Path,
    named: &str,
    verb: &str,
) -> Result<PathBuf, Refusal> {
    let path = base.join(named);
    let target = std::fs::canonicalize(&path)
        .map_err(|e| format!("{} {verb} {}, which cannot be read: {e}", show(file), named))?;
    if !area.allows(&target) {
        return Err(outside(area, file, verb, &target));
    }
    if !target.is_dir() {
        return Err(format!(
            "{} {verb} {}, which is not a directory",
            show(file),
            show(&target)
        )
        .into());
    }
    Ok(target)
}

/// A symlink resolved and checked to lie in the area.
fn resolve(area: &Area<'_>, link: &Path, verb: &str) -> Result<PathBuf, Refusal> {
    let target = std::fs::canonicalize(link)
        .map_err(|e| format!("{} is a symlink that cannot be followed: {e}", show(link)))?;
    if area.allows(&target) {
        Ok(target)
    } else {
        Err(outside(area, link, verb, &target))
    }
}

/// A file libgit2 may open: absent, or regular (through symlinks inside the area).
fn check_file(area: &Area<'_>, path: &Path) -> Result<(), Refusal> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    check_entry(area, path, meta.file_type())
}

fn check_entry(area: &Area<'_>, path: &Path, ft: FileType) -> Result<(), Refusal> {
    if ft.is_file() || ft.is_dir() {
        return Ok(());
    }
    if ft.is_symlink() {
        let target = resolve(area, path, "is a symlink to")?;
        let meta = std::fs::metadata(&target).map_err(|e| format!("{}: {e}", show(path)))?;
        return if meta.is_file() || meta.is_dir() {
            Ok(())
        } else {
            Err(not_regular(path, meta.file_type()).into())
        };
    }
    Err(not_regular(path, ft).into())
}

/// Every entry below `dir` (types from the directory listing; symlinks resolved).
fn check_tree(area: &Area<'_>, dir: &Path, depth: u32) -> Result<(), Refusal> {
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return Ok(());
    };
    let dir = if meta.file_type().is_symlink() {
        resolve(area, dir, "is a symlink to")?
    } else {
        dir.to_path_buf()
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let Ok(ft) = entry.file_type() else { continue };
        let path = entry.path();
        if ft.is_dir() {
            if depth < 16 {
                check_tree(area, &path, depth + 1)?;
            }
        } else {
            check_entry(area, &path, ft)?;
        }
    }
    Ok(())
}

/// Config includes would make libgit2 read files from anywhere: refused.
fn check_config(path: &Path) -> Result<(), Refusal> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(());
    }
    let text = read_small_capped(path, 4 * 1024 * 1024)?;
    for line in text.lines() {
        let Some(header) = line.trim_start().strip_prefix('[') else {
            continue;
        };
        let name: String = header
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if name.to_ascii_lowercase().starts_with("include") {
            return Err(format!(
                "{} has an [{name}] section: git would read the included files from wherever they are; remove the include to review this repository",
                show(path)
            ).into());
        }
    }
    Ok(())
}

/// After opening: the work tree must lie in the area.
pub(super) fn check_workdir(area: &Area<'_>, dir: &Path, workdir: &Path) -> Result<(), Refusal> {
    if area.allows(workdir) {
        Ok(())
    } else {
        Err(format!(
            "the work tree of the repository at {} is {} (core.worktree), outside PROJECT_ROOT ({}); unset core.worktree or add that directory to PROJECT_ROOT",
            show(dir),
            show(workdir),
            area.roots()
        ).into())
    }
}

/// The ignore, attribute and submodule files libgit2 reads in the work tree: in `top` and each
/// directory down to `scope`, and below `scope` in every directory git descends into (not
/// ignored ones; nested repositories and `.git` are checked on their own). A directory's own
/// files are checked before asking git whether its subdirectories are ignored, so git only ever
/// reads files already checked.
pub(super) fn check_worktree(
    area: &Area<'_>,
    repo: &Repository,
    top: &Path,
    scope: &Path,
) -> Result<(), Refusal> {
    let chain: Vec<&Path> = scope
        .ancestors()
        .take_while(|d| d.starts_with(top))
        .collect();
    for dir in chain.into_iter().rev() {
        for name in WORKTREE_FILES {
            check_file(area, &dir.join(name))?;
        }
    }
    check_worktree_below(area, repo, top, scope, 0)
}

fn check_worktree_below(
    area: &Area<'_>,
    repo: &Repository,
    top: &Path,
    dir: &Path,
    depth: u32,
) -> Result<(), Refusal> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    let mut subdirs = Vec::new();
    for entry in entries.flatten() {
        let Ok(ft) = entry.file_type() else { continue };
        let name = entry.file_name();
        if ft.is_dir() {
            if name != ".git" {
                subdirs.push(entry.path());
            }
        } else if WORKTREE_FILES.iter().any(|w| name == *w) {
            check_entry(area, &entry.path(), ft)?;
        }
    }
    if depth >= 64 {
        return Ok(());
    }
    for sub in subdirs {
        let nested = std::fs::symlink_metadata(sub.join(".git")).is_ok();
        let ignored = sub
            .strip_prefix(top)
            .ok()
            .is_some_and(|rel| repo.is_path_ignored(rel).unwrap_or(false));
        if !nested && !ignored {
            check_worktree_below(area, repo, top, &sub, depth + 1)?;
        }
    }
    Ok(())
}

fn read_small(path: &Path) -> Result<String, Refusal> {
    read_small_capped(path, MAX_POINTER_BYTES)
}

/// Reads a small file non-blocking, refusing anything but a regular file.
#[cfg(unix)]
fn read_small_capped(path: &Path, cap: u64) -> Result<String, Refusal> {
    use rustix::fs::{Mode, OFlags};
    use std::io::Read;
    let err = |e: std::io::Error| format!("{}: {e}", show(path));
    // Canonical, so no symlink is left to follow; non-blocking, so a FIFO cannot hang the open.
    let canonical = std::fs::canonicalize(path).map_err(err)?;
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    let file = std::fs::File::from(
        rustix::fs::open(&canonical, flags, Mode::empty()).map_err(|e| err(e.into()))?,
    );
    let meta = file.metadata().map_err(err)?;
    if !meta.is_file() {
        return Err(not_regular(path, meta.file_type()).into());
    }
    let mut bytes = Vec::new();
    file.take(cap).read_to_end(&mut bytes).map_err(err)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Reads a small file, refusing anything but a regular file on a disk reached without a reparse
/// point on the way (the sandbox's proof on the handle).
#[cfg(windows)]
fn read_small_capped(path: &Path, cap: u64) -> Result<String, Refusal> {
    use std::io::Read;
    let err = |e: std::io::Error| format!("{}: {e}", show(path));
    let canonical = std::fs::canonicalize(path).map_err(err)?;
    let file = crate::collector::handle::open_exact(&canonical).map_err(err)?;
    let meta = file.metadata().map_err(err)?;
    if !meta.is_file() {
        return Err(not_regular(path, meta.file_type()).into());
    }
    let mut bytes = Vec::new();
    file.take(cap).read_to_end(&mut bytes).map_err(err)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn outside(area: &Area<'_>, at: &Path, verb: &str, target: &Path) -> Refusal {
    let message = format!(
        "{} {verb} {}, outside PROJECT_ROOT ({}); git would read it on our behalf. Make it point inside PROJECT_ROOT, or add {} to PROJECT_ROOT (roots are separated by `{ROOTS_SEPARATOR}`)",
        show(at),
        show(target),
        area.roots(),
        show(target),
    );
    Refusal {
        message,
        outside: true,
    }
}

fn not_regular(path: &Path, ft: FileType) -> String {
    #[cfg(unix)]
    let kind = {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            "a FIFO"
        } else if ft.is_socket() {
            "a socket"
        } else if ft.is_block_device() || ft.is_char_device() {
            "a device"
        } else {
            "not a regular file"
        }
    };
    #[cfg(windows)]
    let kind = {
        let _ = ft;
        "not a regular file"
    };
    format!(
        "{} is {kind}: git would block reading it. Replace it with a regular file or remove it",
        show(path)
    )
}

fn show(p: &Path) -> String {
    format!("`{}`", crate::collector::sandbox::shown(p).display())
}

//! The sandbox: an allowlist of canonical roots, and the one place that opens user files.
//!
//! A path is accepted only after it has been canonicalised (every symlink resolved) and found
//! inside a root; the proof is the `SandboxedPath` type, the only thing [`open`] accepts.
//!
//! Opening closes the gap between the check and the open: on Linux the canonical path is opened
//! with `openat2(RESOLVE_NO_SYMLINKS)`, so a symlink swapped into any component after the check
//! makes the open fail instead of leading outside; elsewhere (or where `openat2` is unavailable)
//! `O_NOFOLLOW` protects the last component. Files are opened non-blocking, so a FIFO swapped in
//! after the type check cannot hang the server, and the caller checks the opened file's type.
//!
//! On Windows, the path's form is checked first ([`super::windows_path`]: no device names,
//! streams, trailing dots or device namespaces), and the open is proven on the handle
//! ([`super::handle`]): no reparse point in the last name, a file on a disk, and the handle's
//! final path exactly the checked one, so nothing swapped in after the check leads elsewhere.

use std::fs::File;
use std::io;
use std::path::{Component, Path, PathBuf};

/// A canonical path inside one of the roots.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SandboxedPath {
    path: PathBuf,
    root: usize,
}

impl SandboxedPath {
    pub fn as_path(&self) -> &Path {
        &self.path
    }
    /// Index of the root it lies in.
    pub fn root_index(&self) -> usize {
        self.root
    }

    /// A path met below this directory by a walk that follows no symlinks (so it is canonical
    /// by construction: this directory joined with names read from the directories below).
    pub(crate) fn walked(&self, path: &Path) -> Option<SandboxedPath> {
        below(&self.path, path).map(|_| SandboxedPath {
            path: path.to_path_buf(),
            root: self.root,
        })
    }
}

/// `path` below `dir` (byte-wise: both are canonical), as the part after `dir/`.
#[cfg(unix)]
fn below<'a>(dir: &Path, path: &'a Path) -> Option<&'a [u8]> {
    use std::os::unix::ffi::OsStrExt;
    let (d, p) = (dir.as_os_str().as_bytes(), path.as_os_str().as_bytes());
    let rest = p.strip_prefix(d)?;
    if rest.is_empty() || d.ends_with(b"/") {
        Some(rest)
    } else {
        rest.strip_prefix(b"/")
    }
}

/// `path` below `dir` (component-wise), as the part after `dir\\`, in `OsStr`'s encoding.
#[cfg(windows)]
fn below<'a>(dir: &Path, path: &'a Path) -> Option<&'a [u8]> {
    path.strip_prefix(dir)
        .ok()
        .map(|rest| rest.as_os_str().as_encoded_bytes())
}

/// A path refused by the sandbox. Maps to JSON-RPC -32001 naming the path and the root.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SandboxError {
    #[error("{} is outside the project root {root}: only files under PROJECT_ROOT can be read", crate::echo::echo(.path))]
    Outside { path: String, root: String },
    #[error("{} does not exist (paths are relative to {root}, or absolute)", crate::echo::echo(.path))]
    NotFound { path: String, root: String },
    #[error("{} is not a valid path: {message}", crate::echo::echo(.path))]
    Invalid { path: String, message: String },
}

impl SandboxError {
    pub fn path(&self) -> &str {
        match self {
            SandboxError::Outside { path, .. }
            | SandboxError::NotFound { path, .. }
            | SandboxError::Invalid { path, .. } => path,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Sandbox {
    roots: Vec<PathBuf>,
}

impl Sandbox {
    /// `roots` must already be canonical (the configuration canonicalises them).
    pub fn new(roots: Vec<PathBuf>) -> Sandbox {
        Sandbox { roots }
    }

    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    fn roots_display(&self) -> String {
        self.roots
            .iter()
            .map(|r| shown(r).display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn outside(&self, raw: &str) -> SandboxError {
        SandboxError::Outside {
            path: raw.to_string(),
            root: self.roots_display(),
        }
    }

    /// Resolves a user-given path (relative to the first root, or absolute) and checks it.
    ///
    /// `~` is not expanded (it would name the home directory, which is not a root). A path that
    /// does not exist is reported as missing only if its nearest existing ancestor lies inside a
    /// root; otherwise it is refused as outside, so nothing is revealed about the world outside.
    pub fn resolve(&self, raw: &str) -> Result<SandboxedPath, SandboxError> {
        if raw.is_empty() || raw.contains('\0') {
            return Err(SandboxError::Invalid {
                path: raw.escape_debug().to_string(),
                message: "empty or contains a NUL byte".into(),
            });
        }
        #[cfg(windows)]
        if let Some(message) = super::windows_path::refused_form(raw) {
            return Err(SandboxError::Invalid {
                path: raw.escape_debug().to_string(),
                message,
            });
        }
        if raw.starts_with('~') {
            return Err(self.outside(raw));
        }
        let given = Path::new(raw);
        let Some(first) = self.roots.first() else {
            return Err(self.outside(raw));
        };
        let joined = if given.is_absolute() {
            given.to_path_buf()
        } else {
            first.join(given)
        };
        match std::fs::canonicalize(&joined) {
            Ok(canon) => self.check(&canon).ok_or_else(|| self.outside(raw)),
            Err(_) => {
                // Missing (or a dangling or looping symlink): say so only from inside the roots.
                let ancestor_inside = joined
                    .ancestors()
                    .skip(1)
                    .find_map(|a| std::fs::canonicalize(a).ok())
                    .is_some_and(|a| self.roots.iter().any(|r| a.starts_with(r)));
                if ancestor_inside {
                    Err(SandboxError::NotFound {
                        path: raw.to_string(),
                        root: self.roots_display(),
                    })
                } else {
                    Err(self.outside(raw))
                }
            }
        }
    }

    /// Accepts a canonical path (absolute, symlinks resolved) if it lies inside a root. The
    /// caller vouches that `canonical` is canonical; [`open`] enforces it on Linux by refusing
    /// any symlink on the way.
    pub fn check(&self, canonical: &Path) -> Option<SandboxedPath> {
        if !canonical.is_absolute()
            || canonical.components().any(|c| match c {
                Component::CurDir | Component::ParentDir => true,
                // A stream of a file (`name:stream`) is not the file.
                Component::Normal(name) => cfg!(windows) && name.as_encoded_bytes().contains(&b':'),
                _ => false,
            })
        {
            return None;
        }
        self.roots
            .iter()
            .position(|r| canonical.starts_with(r))
            .map(|root| SandboxedPath {
                path: canonical.to_path_buf(),
                root,
            })
    }

    /// The path as shown to users and Gemini: relative to its root when there is one root,
    /// absolute otherwise.
    pub fn display(&self, p: &SandboxedPath) -> String {
        self.display_path(&p.path)
    }

    /// [`Sandbox::display`] for any path met inside the roots (e.g. a symlink while walking).
    /// Escaped and redacted ([`super::secrets::shown_name`]): the name goes into prompts.
    pub fn display_path(&self, p: &Path) -> String {
        // Byte-wise (`below`), not `Path::strip_prefix`: this runs for every file walked, and the
        // component-wise comparison was a tenth of a 100,000-file walk.
        if self.roots.len() == 1
            && let Some(rel) = below(&self.roots[0], p)
        {
            return if rel.is_empty() {
                ".".into()
            } else {
                let rel = String::from_utf8_lossy(rel);
                // With `/` on every platform, as git and Gemini's citations write a path.
                #[cfg(windows)]
                let rel = rel.replace('\\', "/");
                super::secrets::shown_name(&rel)
            };
        }
        super::secrets::shown_name(&shown(p).display().to_string())
    }

    /// The path below its root (for include/exclude and secret globs).
    pub fn relative<'a>(&self, p: &'a SandboxedPath) -> &'a Path {
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            below(&self.roots[p.root], &p.path)
                .map_or(&p.path, |rel| Path::new(std::ffi::OsStr::from_bytes(rel)))
        }
        #[cfg(windows)]
        p.path.strip_prefix(&self.roots[p.root]).unwrap_or(&p.path)
    }
}

/// Opens a sandboxed path for reading: read-only, non-blocking, close-on-exec, never following
/// a symlink (see the module docs). The caller must check the opened file's type.
#[cfg(unix)]
pub fn open(p: &SandboxedPath) -> io::Result<File> {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
        let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        match rustix::fs::openat2(rustix::fs::CWD, &p.path, flags, Mode::empty(), resolve) {
            Ok(fd) => return Ok(File::from(fd)),
            // Kernels before 5.6, or seccomp filters that refuse it: fall back below.
            Err(e) if e == rustix::io::Errno::NOSYS || e == rustix::io::Errno::PERM => {}
            Err(e) => return Err(e.into()),
        }
    }
    open_nofollow(&p.path)
}

#[cfg(unix)]
fn open_nofollow(path: &Path) -> io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    Ok(File::from(rustix::fs::open(path, flags, Mode::empty())?))
}

/// Opens a sandboxed path for reading, proven on the handle ([`super::handle`]). The caller
/// must check the opened file's type.
#[cfg(windows)]
pub fn open(p: &SandboxedPath) -> io::Result<File> {
    super::handle::open_exact(&p.path)
}

/// `path` below `root` as shown: its names joined with `/` on every platform (as git and
/// Gemini's citations write a path); `None` when it is not below `root`.
pub fn shown_below(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    if rel.as_os_str().is_empty() {
        return None;
    }
    let names: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    Some(names.join("/"))
}

/// A canonical path as people write it: on Windows without the `\\?\` that canonical paths
/// carry, where that changes nothing (`dunce`).
pub fn shown(p: &Path) -> &Path {
    #[cfg(windows)]
    let p = dunce::simplified(p);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_below_a_root_are_shown_with_slashes() {
        let root = Path::new("/p");
        assert_eq!(
            shown_below(root, Path::new("/p/src/a.rs")).as_deref(),
            Some("src/a.rs")
        );
        assert_eq!(shown_below(root, Path::new("/q/a.rs")), None);
        assert_eq!(shown_below(root, root), None);
        assert_eq!(shown_below(root, Path::new("/p-evil/a.rs")), None);
    }

    #[test]
    fn check_refuses_non_canonical_forms() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let s = Sandbox::new(vec![root.clone()]);
        assert!(s.check(&root.join("a")).is_some());
        assert!(s.check(&root.join("a/../../etc")).is_none());
        assert!(s.check(Path::new("relative")).is_none());
        assert!(s.check(Path::new("/etc/passwd")).is_none());
        // A sibling whose name extends the root's is not inside it.
        let sibling = PathBuf::from(format!("{}-evil/x", root.display()));
        assert!(s.check(&sibling).is_none());
        let dir = s.check(&root.join("d")).unwrap();
        assert!(dir.walked(&sibling).is_none());
        assert!(
            dir.walked(&PathBuf::from(format!("{}/d-evil/x", root.display())))
                .is_none()
        );
        assert!(dir.walked(&root.join("d/x/y")).is_some());
        assert_eq!(
            s.relative(&dir.walked(&root.join("d/x")).unwrap()),
            Path::new("d/x")
        );
        assert_eq!(s.display_path(&root.join("d/x")), "d/x");
        assert_eq!(s.display_path(&root), ".");
    }

    #[test]
    fn open_refuses_a_symlink_even_on_a_checked_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("real"), "x").unwrap();
        crate::collector::symlink(root.join("real"), root.join("link"));
        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::write(root.join("d/f"), "y").unwrap();
        crate::collector::symlink(root.join("d"), root.join("dlink"));
        let s = Sandbox::new(vec![root.clone()]);
        // `check` trusts its caller; `open` still refuses to go through a symlink (the race
        // where a component is swapped for a symlink after the check).
        let link = s.check(&root.join("link")).unwrap();
        assert!(open(&link).is_err());
        let through = s.check(&root.join("dlink/f")).unwrap();
        #[cfg(target_os = "linux")]
        assert!(open(&through).is_err());
        let _ = through;
        assert!(open(&s.check(&root.join("real")).unwrap()).is_ok());
    }
}

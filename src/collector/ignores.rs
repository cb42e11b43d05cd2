//! The ignore files the walkers obey, read by us rather than by the `ignore` crate: `.gitignore`,
//! `.ignore` and `.geminiignore` in directories inside the roots (from the root down), and
//! `.git/info/exclude` of a repository whose `.git` is a directory inside the roots.
//!
//! Why not the crate's own handling: it reads the ignore files of every directory above the walk
//! up to `/` (even with `parents(false)`, which only stops applying them), follows `.git` files to
//! read `info/exclude` wherever they point, and opens each file with a blocking `open`, so a FIFO
//! named `.gitignore` hangs the call. Here every file is opened non-blocking through the sandbox
//! and read only if it is a regular file inside the roots; one that is not (a FIFO, a socket, a
//! symlink leading outside) holds no rules and is reported. Matching uses the crate's
//! [`Gitignore`] with its precedence: `.geminiignore`, then `.ignore`, then `.gitignore`, then
//! `info/exclude`, the deepest directory first within each; git's files count only inside a
//! repository when `require_git` is set, and not above the nearest one.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::sandbox::{self, Sandbox};
use super::skip::{SkipReason, Skipped};

/// Largest ignore file read (larger ones are reported and hold no rules).
const MAX_IGNORE_BYTES: u64 = 4 * 1024 * 1024;

/// The rules of one directory, chained to its parent's.
struct Node {
    parent: Option<Arc<Node>>,
    custom: Gitignore,
    ignore: Gitignore,
    git: Gitignore,
    exclude: Gitignore,
    has_git: bool,
}

impl Node {
    fn chain(self: &Arc<Node>) -> impl Iterator<Item = &Node> {
        std::iter::successors(Some(&**self), |n| n.parent.as_deref())
    }
}

/// The ignore rules of a walk, built directory by directory as the walk enters them.
pub struct Ignores {
    sandbox: Sandbox,
    require_git: bool,
    dirs: RwLock<HashMap<PathBuf, Arc<Node>>>,
    start: Arc<Node>,
    refused: Mutex<Vec<Skipped>>,
}

impl Ignores {
    /// The rules for a walk of `start` (canonical, inside a root): those of the directories from
    /// its root down to it. Nothing above the root is read.
    pub fn new(sandbox: &Sandbox, start: &Path, require_git: bool) -> Ignores {
        let mut me = Ignores {
            sandbox: sandbox.clone(),
            require_git,
            dirs: RwLock::new(HashMap::new()),
            start: Arc::new(Node {
                parent: None,
                custom: Gitignore::empty(),
                ignore: Gitignore::empty(),
                git: Gitignore::empty(),
                exclude: Gitignore::empty(),
                has_git: false,
            }),
            refused: Mutex::new(Vec::new()),
        };
        let root = sandbox.roots().iter().find(|r| start.starts_with(r));
        let mut chain: Vec<&Path> = start
            .ancestors()
            .take_while(|a| root.is_some_and(|r| a.starts_with(r)))
            .collect();
        chain.reverse();
        let mut node = None;
        for dir in chain {
            node = Some(me.node(dir, node));
        }
        if let Some(node) = node {
            me.start = node;
        }
        me
    }

    /// Called when the walk enters `dir` (an accepted directory below the start): reads its
    /// ignore files.
    pub fn enter(&self, dir: &Path) {
        let parent = dir.parent().map(|p| self.lookup(p));
        let node = self.node(dir, parent);
        if let Ok(mut dirs) = self.dirs.write() {
            dirs.insert(dir.to_path_buf(), node);
        }
    }

    /// Whether `path` (met in a directory the walk entered) is ignored.
    pub fn ignored(&self, path: &Path, is_dir: bool) -> bool {
        let Some(parent) = path.parent() else {
            return false;
        };
        let node = self.lookup(parent);
        let any_git = !self.require_git || node.chain().any(|n| n.has_git);
        let (mut c, mut i, mut g, mut x) = (Match::None, Match::None, Match::None, Match::None);
        let mut saw_git = false;
        for n in node.chain() {
            if c.is_none() {
                c = n.custom.matched(path, is_dir);
            }
            if i.is_none() {
                i = n.ignore.matched(path, is_dir);
            }
            if any_git && !saw_git {
                if g.is_none() {
                    g = n.git.matched(path, is_dir);
                }
                if x.is_none() {
                    x = n.exclude.matched(path, is_dir);
                }
            }
            saw_git |= n.has_git;
        }
        c.or(i).or(g).or(x).is_ignore()
    }

    /// Ignore files that were not read (not regular, outside the roots, unreadable).
    pub fn refused(&self) -> Vec<Skipped> {
        self.refused
            .lock()
            .map(|mut r| std::mem::take(&mut *r))
            .unwrap_or_default()
    }

    fn lookup(&self, dir: &Path) -> Arc<Node> {
        self.dirs
            .read()
            .ok()
            .and_then(|d| d.get(dir).cloned())
            .unwrap_or_else(|| self.start.clone())
    }

    fn node(&self, dir: &Path, parent: Option<Arc<Node>>) -> Arc<Node> {
        let git_entry = std::fs::symlink_metadata(dir.join(".git")).ok();
        let has_git = git_entry.is_some();
        // Only a `.git` directory's own exclude file: a `.git` file may point anywhere.
        let exclude = if git_entry.is_some_and(|m| m.is_dir()) {
            self.matcher(dir, &[".git/info/exclude"])
        } else {
            Gitignore::empty()
        };
        let node = Node {
            custom: self.matcher(dir, &[".geminiignore"]),
            ignore: self.matcher(dir, &[".ignore"]),
            git: self.matcher(dir, &[".gitignore"]),
            exclude,
            has_git,
            parent,
        };
        if !node.has_git
            && [&node.custom, &node.ignore, &node.git, &node.exclude]
                .iter()
                .all(|m| m.is_empty())
            && let Some(parent) = &node.parent
        {
            return parent.clone();
        }
        Arc::new(node)
    }

    fn matcher(&self, dir: &Path, names: &[&str]) -> Gitignore {
        let mut b = GitignoreBuilder::new(dir);
        let mut any = false;
        for name in names {
            let path = dir.join(name);
            if let Some(text) = self.read(&path) {
                any = true;
                let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
                for line in text.lines() {
                    // A bad glob is skipped, as git does.
                    let _ = b.add_line(Some(path.clone()), line);
                }
            }
        }
        if !any {
            return Gitignore::empty();
        }
        b.build().unwrap_or_else(|_| Gitignore::empty())
    }

    /// The text of an ignore file, if it is a regular file inside the roots.
    fn read(&self, path: &Path) -> Option<String> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        let refuse = |reason| {
            if let Ok(mut r) = self.refused.lock() {
                r.push(Skipped {
                    path: self.sandbox.display_path(path),
                    reason,
                });
            }
            None
        };
        let canonical = if meta.file_type().is_symlink() {
            match std::fs::canonicalize(path) {
                Ok(c) => c,
                Err(_) => return refuse(SkipReason::Unreadable),
            }
        } else {
            path.to_path_buf()
        };
        let Some(checked) = self.sandbox.check(&canonical) else {
            return refuse(SkipReason::OutsideRoot);
        };
        let Ok(file) = sandbox::open(&checked) else {
            return refuse(SkipReason::Unreadable);
        };
        match file.metadata() {
            Ok(m) if m.is_file() && m.len() <= MAX_IGNORE_BYTES => {}
            Ok(m) if m.is_file() => return refuse(SkipReason::TooLarge),
            Ok(_) => return refuse(SkipReason::NotRegular),
            Err(_) => return refuse(SkipReason::Unreadable),
        }
        let mut bytes = Vec::new();
        if file.take(MAX_IGNORE_BYTES).read_to_end(&mut bytes).is_err() {
            return refuse(SkipReason::Unreadable);
        }
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }
}

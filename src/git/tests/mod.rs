//! `read_changes` on real repositories built with git2: what would be sent to Gemini.
//!
//! One file a subject: `kinds` (the kinds of change and how they read), `repositories` (which
//! are read: nested ones, a subdirectory), `compare` (`compare_to`), `budget`, `secrets`. The
//! scratch repositories they build are made here.

use std::path::{Path, PathBuf};

use git2::{IndexAddOption, Repository, Signature};

use super::*;
use crate::collector::Collector;
use crate::config::Config;

mod budget;
mod compare;
mod kinds;
mod repositories;
mod secrets;

/// A scratch directory and the sandbox rooted at it.
struct Scratch {
    _dir: tempfile::TempDir,
    root: PathBuf,
    collector: Collector,
}

fn scratch() -> Scratch {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let collector = Collector::new(&Config::for_tests(&root).collector()).unwrap();
    Scratch {
        _dir: dir,
        root,
        collector,
    }
}

fn init(dir: &Path) -> Repository {
    std::fs::create_dir_all(dir).unwrap();
    let repo = Repository::init(dir).unwrap();
    let mut cfg = repo.config().unwrap();
    cfg.set_str("user.name", "Test").unwrap();
    cfg.set_str("user.email", "test@example.com").unwrap();
    repo
}

fn write(repo: &Repository, rel: &str, content: impl AsRef<[u8]>) {
    let path = repo.workdir().unwrap().join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

fn stage(repo: &Repository, rel: &str) {
    let mut index = repo.index().unwrap();
    if repo.workdir().unwrap().join(rel).exists() {
        index.add_path(Path::new(rel)).unwrap();
    } else {
        index.remove_path(Path::new(rel)).unwrap();
    }
    index.write().unwrap();
}

fn stage_all(repo: &Repository) {
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"].iter(), IndexAddOption::DEFAULT, None)
        .unwrap();
    index.write().unwrap();
}

fn commit(repo: &Repository, message: &str) -> git2::Oid {
    let mut index = repo.index().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = Signature::now("Test", "test@example.com").unwrap();
    let parent = repo.head().ok().map(|h| h.peel_to_commit().unwrap());
    let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
        .unwrap()
}

fn request(path: &str) -> DiffRequest {
    DiffRequest {
        path: path.into(),
        include_staged: true,
        include_unstaged: true,
        include_untracked: true,
        compare_to: None,
        max_depth: 5,
        budget: 200_000,
        index_file: None,
        ignore: None,
    }
}

fn read(s: &Scratch, req: &DiffRequest) -> DiffContext {
    read_changes(&s.collector, req).unwrap()
}

/// (repo, path, status) of every changed file.
fn changed(d: &DiffContext) -> Vec<(String, String, String)> {
    d.changed
        .iter()
        .map(|c| (c.repo.clone(), c.path.clone(), c.status.clone()))
        .collect()
}

fn c(repo: &str, path: &str, status: &str) -> (String, String, String) {
    (repo.into(), path.into(), status.into())
}

/// The text between a section heading and the next heading of the same level.
fn section<'a>(text: &'a str, heading: &str) -> &'a str {
    let start = text
        .find(heading)
        .unwrap_or_else(|| panic!("no `{heading}` in:\n{text}"));
    let rest = &text[start + heading.len()..];
    let end = rest.find("\n## ").map_or(rest.len(), |i| i + 1);
    &rest[..end]
}

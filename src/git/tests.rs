//! `read_changes` on real repositories built with git2: what would be sent to Gemini.

use std::path::{Path, PathBuf};

use git2::{IndexAddOption, Repository, Signature};

use super::*;
use crate::collector::{Collector, SkipReason};
use crate::config::Config;

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

#[test]
fn staged_unstaged_and_untracked_each_in_their_section() {
    let s = scratch();
    let repo = init(&s.root);
    write(&repo, "src/staged.rs", "fn a() {}\n");
    write(&repo, "src/unstaged.rs", "fn b() {}\n");
    write(&repo, ".gitignore", "*.log\n");
    stage_all(&repo);
    commit(&repo, "first");
    write(&repo, "src/staged.rs", "fn a() { staged_change(); }\n");
    stage(&repo, "src/staged.rs");
    write(&repo, "src/unstaged.rs", "fn b() { unstaged_change(); }\n");
    write(&repo, "src/new.rs", "fn untracked_new() {}\n");
    write(&repo, "debug.log", "ignored_by_gitignore\n");

    let d = read(&s, &request("."));
    assert_eq!(d.repos, vec!["."]);
    assert_eq!(
        changed(&d),
        vec![
            c(".", "src/staged.rs", "modified"),
            c(".", "src/new.rs", "untracked"),
            c(".", "src/unstaged.rs", "modified"),
        ]
    );
    let staged = section(&d.text, "## Staged changes (HEAD → index)");
    assert!(staged.contains("+fn a() { staged_change(); }"), "{staged}");
    assert!(!staged.contains("unstaged_change"), "{staged}");
    let unstaged = section(&d.text, "## Unstaged changes (index → work tree)");
    assert!(unstaged.contains("-fn b() {}"), "{unstaged}");
    assert!(
        unstaged.contains("+fn b() { unstaged_change(); }"),
        "{unstaged}"
    );
    let untracked = section(&d.text, "## Untracked files");
    assert!(untracked.contains("+fn untracked_new() {}"), "{untracked}");
    assert!(!d.text.contains("ignored_by_gitignore"), "{}", d.text);
    assert!(!d.text.contains("debug.log"), "{}", d.text);
    assert!(d.skipped.is_empty(), "{:?}", d.skipped);
    // The count is the text's, piece by piece.
    let whole = crate::collector::tokens::count(&d.text);
    assert!(
        d.tokens * 10 >= whole * 9 && d.tokens * 10 <= whole * 11,
        "{} vs {whole}",
        d.tokens
    );
}

#[test]
fn include_flags_select_what_is_read() {
    let s = scratch();
    let repo = init(&s.root);
    write(&repo, "a.rs", "one\n");
    write(&repo, "b.rs", "one\n");
    stage_all(&repo);
    commit(&repo, "first");
    write(&repo, "a.rs", "staged\n");
    stage(&repo, "a.rs");
    write(&repo, "b.rs", "unstaged\n");
    write(&repo, "c.rs", "untracked\n");

    for (staged, unstaged, untracked, want) in [
        (true, false, false, vec!["a.rs"]),
        (false, true, false, vec!["b.rs"]),
        (false, false, true, vec!["c.rs"]),
        (true, false, true, vec!["a.rs", "c.rs"]),
    ] {
        let mut req = request(".");
        req.include_staged = staged;
        req.include_unstaged = unstaged;
        req.include_untracked = untracked;
        let d = read(&s, &req);
        let paths: Vec<&str> = d.changed.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(
            paths, want,
            "staged {staged} unstaged {unstaged} untracked {untracked}"
        );
    }
}

#[test]
fn a_file_both_staged_and_modified_again_is_listed_once_with_both_diffs() {
    let s = scratch();
    let repo = init(&s.root);
    // Line 10 of 20 changes twice; a small file whose diff shows all of it changes too.
    let lib = |v: &str| {
        (1..=20)
            .map(|i| {
                if i == 10 {
                    format!("{v}\n")
                } else {
                    format!("line {i}\n")
                }
            })
            .collect::<String>()
    };
    write(&repo, "lib.rs", lib("v1"));
    write(&repo, "small.rs", "old\n");
    stage_all(&repo);
    commit(&repo, "first");
    write(&repo, "lib.rs", lib("v2"));
    stage(&repo, "lib.rs");
    write(&repo, "lib.rs", lib("v3"));
    write(&repo, "small.rs", "new\n");
    let d = read(&s, &request("."));
    assert_eq!(
        changed(&d),
        vec![c(".", "lib.rs", "modified"), c(".", "small.rs", "modified")]
    );
    assert!(
        d.text.contains("- modified: lib.rs [staged, unstaged]"),
        "{}",
        d.text
    );
    assert!(section(&d.text, "## Staged").contains("+v2"));
    assert!(section(&d.text, "## Unstaged").contains("+v3"));
    // The full content added as context is the newest version; small.rs's diff already shows
    // all of it.
    let context: Vec<&str> = d.context_files.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(context, vec!["lib.rs"]);
    let context = section(&d.text, "## Full content of changed files");
    // Numbered like every file the collector sends: width of the last line number.
    assert!(context.contains("\n10│ v3\n11│ line 11\n"), "{context}");
    assert!(context.contains("\n 1│ line 1\n"), "{context}");
}

#[test]
fn unborn_head_reviews_the_staged_files_as_additions() {
    let s = scratch();
    let repo = init(&s.root);
    write(&repo, "main.rs", "fn main() { first_ever(); }\n");
    stage(&repo, "main.rs");
    let d = read(&s, &request("."));
    assert_eq!(changed(&d), vec![c(".", "main.rs", "added")]);
    assert!(d.text.contains("no commits yet"), "{}", d.text);
    let staged = section(&d.text, "## Staged changes (no commits yet → index)");
    assert!(staged.contains("+fn main() { first_ever(); }"), "{staged}");
}

#[test]
fn no_changes_gives_an_empty_list_and_the_repository() {
    let s = scratch();
    let repo = init(&s.root);
    write(&repo, "a.rs", "x\n");
    stage_all(&repo);
    commit(&repo, "first");
    let d = read(&s, &request("."));
    assert!(d.changed.is_empty());
    assert_eq!(d.repos, vec!["."]);
    // A fresh repository with nothing at all is not an error either.
    let s2 = scratch();
    init(&s2.root);
    assert!(read(&s2, &request(".")).changed.is_empty());
}

#[test]
fn not_a_repository_is_an_error_naming_the_path() {
    let s = scratch();
    std::fs::create_dir_all(s.root.join("plain")).unwrap();
    let err = read_changes(&s.collector, &request("plain")).unwrap_err();
    assert!(
        matches!(&err, GitError::NotARepository { path, max_depth: 5 } if path == "plain"),
        "{err:?}"
    );
    // Outside the sandbox: a sandbox error, not a look at the other directory.
    let err = read_changes(&s.collector, &request("/")).unwrap_err();
    assert!(matches!(err, GitError::Sandbox(_)), "{err:?}");
}

#[test]
fn nested_repositories_are_found_and_reviewed_with_their_own_paths() {
    let s = scratch();
    let outer = init(&s.root);
    write(&outer, ".gitignore", "ignored/\n");
    write(&outer, "top.rs", "top\n");
    stage_all(&outer);
    commit(&outer, "outer");
    write(&outer, "top.rs", "top changed\n");

    let inner = init(&s.root.join("libs/inner"));
    write(&inner, "src/lib.rs", "inner\n");
    stage(&inner, "src/lib.rs");
    commit(&inner, "inner");
    write(&inner, "src/lib.rs", "inner changed\n");

    // Nested inside the nested one: repositories nest.
    let deep = init(&s.root.join("libs/inner/deep"));
    write(&deep, "d.rs", "deep new\n");
    stage(&deep, "d.rs");

    // Vendored, ignored and hidden folders are not searched.
    for skipped in ["node_modules/pkg", "ignored/repo", ".hidden/repo"] {
        let r = init(&s.root.join(skipped));
        write(&r, "x.rs", "must not be seen\n");
        stage(&r, "x.rs");
    }

    let d = read(&s, &request("."));
    assert_eq!(d.repos, vec![".", "libs/inner", "libs/inner/deep"]);
    assert_eq!(
        changed(&d),
        vec![
            c(".", "top.rs", "modified"),
            c("libs/inner", "src/lib.rs", "modified"),
            c("libs/inner/deep", "d.rs", "added"),
        ]
    );
    assert!(!d.text.contains("must not be seen"), "{}", d.text);
    // The outer repository does not list the nested ones' files as untracked.
    assert!(!d.text.contains("untracked: libs/"), "{}", d.text);
    // With several repositories, paths in diff headers carry the repository.
    assert!(
        d.text.contains("--- BEGIN DIFF: libs/inner/src/lib.rs"),
        "{}",
        d.text
    );
    assert!(d.text.contains("+++ b/libs/inner/src/lib.rs"), "{}", d.text);
    assert!(d.text.contains("+++ b/top.rs"), "{}", d.text);

    // max_depth bounds the search: depth 2 reaches libs/inner, not libs/inner/deep.
    let mut req = request(".");
    req.max_depth = 2;
    assert_eq!(read(&s, &req).repos, vec![".", "libs/inner"]);
    req.max_depth = 0;
    assert_eq!(read(&s, &req).repos, vec!["."]);

    // Starting inside the nested repository reviews it alone, with its own paths.
    let d = read(&s, &request("libs/inner"));
    assert_eq!(d.repos, vec!["libs/inner", "libs/inner/deep"]);
    assert!(d.text.contains("+++ b/libs/inner/src/lib.rs"), "{}", d.text);
}

#[test]
fn nested_repositories_without_a_containing_one() {
    let s = scratch();
    for name in ["a", "b"] {
        let r = init(&s.root.join(name));
        write(&r, "f.rs", format!("in {name}\n"));
        stage(&r, "f.rs");
    }
    let d = read(&s, &request("."));
    assert_eq!(d.repos, vec!["a", "b"]);
    assert_eq!(
        changed(&d),
        vec![c("a", "f.rs", "added"), c("b", "f.rs", "added")]
    );
}

#[test]
fn a_subdirectory_limits_the_review_to_changes_under_it() {
    let s = scratch();
    let repo = init(&s.root);
    write(&repo, "app/a.rs", "a\n");
    write(&repo, "other/b.rs", "b\n");
    stage_all(&repo);
    commit(&repo, "first");
    write(&repo, "app/a.rs", "a changed\n");
    write(&repo, "other/b.rs", "b changed\n");
    write(&repo, "app/new.rs", "new\n");
    let d = read(&s, &request("app"));
    assert_eq!(
        changed(&d),
        vec![
            c(".", "app/a.rs", "modified"),
            c(".", "app/new.rs", "untracked")
        ]
    );
    assert!(!d.text.contains("b changed"), "{}", d.text);
}

#[test]
fn the_repository_may_contain_the_sandbox_root() {
    // PROJECT_ROOT is a subdirectory of the repository: only changes inside it are read.
    let dir = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(dir.path()).unwrap();
    let repo = init(&top);
    write(&repo, "inside/a.rs", "a\n");
    write(&repo, "outside/b.rs", "b\n");
    stage_all(&repo);
    commit(&repo, "first");
    write(&repo, "inside/a.rs", "a changed\n");
    write(&repo, "outside/b.rs", "secret outside the root\n");
    let collector = Collector::new(&Config::for_tests(&top.join("inside")).collector()).unwrap();
    let d = read_changes(&collector, &request(".")).unwrap();
    assert_eq!(changed(&d).len(), 1, "{:?}", d.changed);
    assert_eq!(d.changed[0].path, "inside/a.rs");
    assert!(!d.text.contains("secret outside the root"), "{}", d.text);
}

#[test]
fn renames_and_mode_changes_are_named() {
    let s = scratch();
    let repo = init(&s.root);
    let body = "fn long_enough_to_be_recognised_as_the_same_file() {\n    let a = 1;\n    let b = 2;\n    println!(\"{}\", a + b);\n}\n";
    write(&repo, "old_name.rs", body);
    write(&repo, "run.sh", "#!/bin/sh\necho hi\n");
    stage_all(&repo);
    commit(&repo, "first");
    std::fs::rename(s.root.join("old_name.rs"), s.root.join("new_name.rs")).unwrap();
    stage(&repo, "old_name.rs");
    stage(&repo, "new_name.rs");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            s.root.join("run.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        stage(&repo, "run.sh");
    }
    let d = read(&s, &request("."));
    let renamed = d.changed.iter().find(|c| c.path == "new_name.rs").unwrap();
    assert_eq!(renamed.status, "renamed");
    assert_eq!(renamed.old_path.as_deref(), Some("old_name.rs"));
    assert!(
        d.text.contains("- renamed: new_name.rs (from old_name.rs)"),
        "{}",
        d.text
    );
    assert!(d.text.contains("rename from old_name.rs"), "{}", d.text);
    #[cfg(unix)]
    {
        let run = d.changed.iter().find(|c| c.path == "run.sh").unwrap();
        assert_eq!(run.status, "mode_changed");
        assert!(d.text.contains("new mode 100755"), "{}", d.text);
    }
    assert_eq!(d.changed.len(), if cfg!(unix) { 2 } else { 1 });
}

#[test]
fn a_rename_in_the_work_tree_is_paired_with_its_untracked_new_name() {
    let s = scratch();
    let repo = init(&s.root);
    let body = "pub fn unchanged_body() -> u32 {\n    40 + 2\n}\n\npub fn other() {}\n";
    write(&repo, "before.rs", body);
    stage_all(&repo);
    commit(&repo, "first");
    std::fs::rename(s.root.join("before.rs"), s.root.join("after.rs")).unwrap();
    let d = read(&s, &request("."));
    assert_eq!(changed(&d), vec![c(".", "after.rs", "renamed")]);
    assert_eq!(d.changed[0].old_path.as_deref(), Some("before.rs"));
}

#[test]
fn binary_files_are_named_never_dumped() {
    let s = scratch();
    let repo = init(&s.root);
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    png.extend(std::iter::repeat_n(b'Z', 3000));
    write(&repo, "logo.png", &png);
    stage(&repo, "logo.png");
    write(&repo, "untracked.bin", b"\0\x01\x02ZZZZZZZZZZZZZZZZ");
    let d = read(&s, &request("."));
    assert_eq!(
        changed(&d),
        vec![
            c(".", "logo.png", "added"),
            c(".", "untracked.bin", "untracked")
        ]
    );
    assert!(
        d.text
            .contains("- added: logo.png [staged] — binary (0 B → 2.9 KiB)"),
        "{}",
        d.text
    );
    assert!(!d.text.contains("ZZZZ"), "{}", d.text);
    assert!(!d.text.contains("BEGIN DIFF: logo.png"), "{}", d.text);
    let reasons: Vec<(&str, SkipReason)> = d
        .skipped
        .iter()
        .map(|s| (s.path.as_str(), s.reason))
        .collect();
    assert_eq!(
        reasons,
        vec![
            ("logo.png", SkipReason::Binary),
            ("untracked.bin", SkipReason::Binary)
        ]
    );
}

#[test]
fn submodules_are_named() {
    let s = scratch();
    // A repository to use as the submodule's content.
    let sub_src = tempfile::tempdir().unwrap();
    let lib = init(sub_src.path());
    write(&lib, "lib.rs", "lib\n");
    stage(&lib, "lib.rs");
    let first = commit(&lib, "lib one");
    write(&lib, "lib.rs", "lib two\n");
    stage(&lib, "lib.rs");
    let second = commit(&lib, "lib two");

    let repo = init(&s.root);
    write(&repo, "a.rs", "a\n");
    stage(&repo, "a.rs");
    commit(&repo, "first");
    let url = sub_src.path().to_string_lossy().into_owned();
    let mut sm = repo
        .submodule(&url, Path::new("vendored_lib"), true)
        .unwrap();
    let sub_repo = sm.clone(None).unwrap();
    sub_repo.set_head_detached(first).unwrap();
    sub_repo
        .checkout_head(Some(git2::build::CheckoutBuilder::new().force()))
        .unwrap();
    sm.add_finalize().unwrap();
    commit(&repo, "add submodule");
    // Move the submodule to its second commit and stage that.
    sub_repo.set_head_detached(second).unwrap();
    sub_repo
        .checkout_head(Some(git2::build::CheckoutBuilder::new().force()))
        .unwrap();
    stage(&repo, "vendored_lib");

    let mut req = request(".");
    req.max_depth = 0;
    let d = read(&s, &req);
    assert_eq!(changed(&d), vec![c(".", "vendored_lib", "submodule")]);
    let staged = section(&d.text, "## Staged");
    assert!(
        staged.contains(&format!("+Subproject commit {second}")),
        "{staged}"
    );
    assert!(
        staged.contains(&format!("-Subproject commit {first}")),
        "{staged}"
    );
}

#[test]
fn compare_to_reviews_the_branch_since_the_merge_base_plus_pending_work() {
    let s = scratch();
    let repo = init(&s.root);
    write(&repo, "base.rs", "base\n");
    stage_all(&repo);
    let base = commit(&repo, "base");
    let main_branch = repo.head().unwrap().shorthand().unwrap().to_string();
    // A feature branch with one commit.
    let base_commit = repo.find_commit(base).unwrap();
    repo.branch("feature", &base_commit, false).unwrap();
    repo.set_head("refs/heads/feature").unwrap();
    write(&repo, "feature.rs", "committed on feature\n");
    stage(&repo, "feature.rs");
    commit(&repo, "feature work");
    // main moves on after the branch point: not part of the feature's change.
    let feature_head = repo.head().unwrap().peel_to_commit().unwrap();
    let sig = Signature::now("T", "t@example.com").unwrap();
    let mut b = repo
        .treebuilder(Some(&base_commit.tree().unwrap()))
        .unwrap();
    let blob = repo.blob(b"only on main\n").unwrap();
    b.insert("main_only.rs", blob, 0o100644).unwrap();
    let tree = repo.find_tree(b.write().unwrap()).unwrap();
    let main_next = repo
        .commit(None, &sig, &sig, "main moves", &tree, &[&base_commit])
        .unwrap();
    repo.reference(
        &format!("refs/heads/{main_branch}"),
        main_next,
        true,
        "test",
    )
    .unwrap();
    assert_eq!(
        repo.head().unwrap().peel_to_commit().unwrap().id(),
        feature_head.id()
    );
    // Pending work on top.
    write(
        &repo,
        "feature.rs",
        "committed on feature\nplus uncommitted\n",
    );
    write(&repo, "brand_new.rs", "untracked on feature\n");

    let mut req = request(".");
    req.compare_to = Some(main_branch.clone());
    let d = read(&s, &req);
    assert_eq!(
        changed(&d),
        vec![
            c(".", "brand_new.rs", "untracked"),
            c(".", "feature.rs", "added")
        ]
    );
    let since = section(&d.text, &format!("## Changes since `{main_branch}`"));
    assert!(since.contains("+committed on feature"), "{since}");
    assert!(since.contains("+plus uncommitted"), "{since}");
    assert!(!d.text.contains("only on main"), "{}", d.text);

    // Committed work only.
    req.include_staged = false;
    req.include_unstaged = false;
    req.include_untracked = false;
    let d = read(&s, &req);
    assert_eq!(changed(&d), vec![c(".", "feature.rs", "added")]);
    assert!(!d.text.contains("plus uncommitted"), "{}", d.text);

    // A tag and a commit id work too.
    repo.tag_lightweight("v1", base_commit.as_object(), false)
        .unwrap();
    for reference in ["v1".to_string(), base.to_string()] {
        req.compare_to = Some(reference);
        assert_eq!(read(&s, &req).changed.len(), 1);
    }
}

#[test]
fn a_bad_compare_to_is_a_bad_ref_error() {
    let s = scratch();
    let repo = init(&s.root);
    write(&repo, "a.rs", "a\n");
    stage_all(&repo);
    commit(&repo, "first");
    let mut req = request(".");
    req.compare_to = Some("no-such-branch".into());
    let err = read_changes(&s.collector, &req).unwrap_err();
    assert!(
        matches!(&err, GitError::BadRef { reference, repo, .. } if reference == "no-such-branch" && repo == "."),
        "{err:?}"
    );

    // Unborn HEAD: nothing to compare against.
    let s2 = scratch();
    let fresh = init(&s2.root);
    write(&fresh, "a.rs", "a\n");
    stage(&fresh, "a.rs");
    let mut req = request(".");
    req.compare_to = Some("HEAD".into());
    let err = read_changes(&s2.collector, &req).unwrap_err();
    assert!(matches!(err, GitError::BadRef { .. }), "{err:?}");
}

#[test]
fn compare_to_missing_in_one_nested_repository_reviews_its_pending_work() {
    let s = scratch();
    let outer = init(&s.root);
    write(&outer, "a.rs", "a\n");
    stage_all(&outer);
    commit(&outer, "first");
    let head = outer.head().unwrap().peel_to_commit().unwrap();
    outer
        .tag_lightweight("release", head.as_object(), false)
        .unwrap();
    write(&outer, "a.rs", "a changed\n");
    let inner = init(&s.root.join("inner"));
    write(&inner, "b.rs", "b\n");
    stage(&inner, "b.rs");
    commit(&inner, "inner");
    write(&inner, "b.rs", "b changed\n");

    let mut req = request(".");
    req.compare_to = Some("release".into());
    let d = read(&s, &req);
    assert_eq!(
        changed(&d),
        vec![c(".", "a.rs", "modified"), c("inner", "b.rs", "modified")]
    );
    assert!(
        d.text
            .contains("compare_to `release` is not a branch, tag or commit in inner"),
        "{}",
        d.text
    );
}

#[test]
fn the_budget_goes_to_source_first_and_every_left_out_diff_is_listed() {
    let s = scratch();
    let repo = init(&s.root);
    let keep = |body: &str| {
        (1..=30)
            .map(|i| {
                if i == 15 {
                    format!("fn keep() {{ {body} }}\n")
                } else {
                    format!("// line {i}\n")
                }
            })
            .collect::<String>()
    };
    write(&repo, "keep.rs", keep(""));
    stage_all(&repo);
    commit(&repo, "first");
    let big = |tag: &str| {
        (0..300)
            .map(|i| format!("{tag} line {i} with some words to count\n"))
            .collect::<String>()
    };
    write(&repo, "a_docs.md", big("docs"));
    write(&repo, "Cargo.lock", big("lock"));
    write(&repo, "keep.rs", keep("changed_source();"));
    stage_all(&repo);

    let mut req = request(".");
    req.budget = 2_000;
    let d = read(&s, &req);
    assert_eq!(d.changed.len(), 3);
    assert!(d.text.contains("changed_source"), "{}", d.text);
    assert!(d.tokens <= req.budget, "{} > {}", d.tokens, req.budget);
    let over: Vec<&str> = d
        .skipped
        .iter()
        .filter(|s| s.reason == SkipReason::OverBudget)
        .map(|s| s.path.as_str())
        .collect();
    assert_eq!(over, vec!["a_docs.md", "Cargo.lock"]);
    // Left-out files are still named in the list.
    assert!(
        d.text.contains("- added: Cargo.lock [staged]"),
        "{}",
        d.text
    );
    // No full-content context while diffs are left out.
    assert!(d.context_files.is_empty());

    // With room for everything, nothing is skipped and the modified file's content is added.
    req.budget = 200_000;
    let d = read(&s, &req);
    assert!(d.skipped.is_empty(), "{:?}", d.skipped);
    assert_eq!(
        d.context_files
            .iter()
            .map(|(p, _)| p.as_str())
            .collect::<Vec<_>>(),
        vec!["keep.rs"]
    );
    assert!(
        d.text.contains("The new version of: keep.rs."),
        "{}",
        d.text
    );
}

#[test]
fn the_index_file_of_a_commit_in_progress_is_read_instead() {
    // `git commit -a` hands the hook a temporary index holding what is about to be committed.
    let s = scratch();
    let repo = init(&s.root);
    write(&repo, "a.rs", "a\n");
    stage_all(&repo);
    commit(&repo, "first");
    write(&repo, "a.rs", "about to be committed\n");
    let mut tmp = repo.index().unwrap();
    tmp.add_path(Path::new("a.rs")).unwrap();
    let lock = repo.path().join("next-index.lock");
    let tree = tmp.write_tree().unwrap();
    let mut idx = git2::Index::open(&lock).unwrap();
    idx.read_tree(&repo.find_tree(tree).unwrap()).unwrap();
    idx.write().unwrap();

    let mut req = request(".");
    req.include_unstaged = false;
    req.include_untracked = false;
    assert!(
        read(&s, &req).changed.is_empty(),
        "the real index has nothing staged"
    );
    req.index_file = Some(lock);
    let d = read(&s, &req);
    assert_eq!(changed(&d), vec![c(".", "a.rs", "modified")]);
    assert!(d.text.contains("+about to be committed"), "{}", d.text);
}

#[test]
fn staged_secrets_are_named_and_never_sent() {
    // Relies on the collector's rules: `.env*` and `id_rsa*`/`*.pem` are secrets by name.
    let s = scratch();
    let repo = init(&s.root);
    write(&repo, "app.rs", "fn app() {}\n");
    stage_all(&repo);
    commit(&repo, "first");
    let env_value = "STRIPE_KEY=sk_live_51HxTESTvalueNEVERsent0123456789";
    let key_body = "MIIEowIBAAKCAQEAtestKEYbodyNEVERsent";
    write(&repo, ".env", format!("{env_value}\n"));
    write(
        &repo,
        "deploy/id_rsa",
        format!("-----BEGIN RSA PRIVATE KEY-----\n{key_body}\n-----END RSA PRIVATE KEY-----\n"),
    );
    write(&repo, "app.rs", "fn app() { load_env(); }\n");
    stage_all(&repo);

    let d = read(&s, &request("."));
    assert_eq!(d.secret_files, vec![".env", "deploy/id_rsa"]);
    assert!(!d.text.contains("sk_live_51HxTEST"), "{}", d.text);
    assert!(!d.text.contains(key_body), "{}", d.text);
    // Named, with the warning Gemini turns into a finding.
    assert!(
        d.text
            .contains("WARNING: 2 changed file(s) look like secrets"),
        "{}",
        d.text
    );
    assert!(
        d.text
            .contains("- added: .env [staged] — LOOKS LIKE A SECRET"),
        "{}",
        d.text
    );
    let secret_skips: Vec<&str> = d
        .skipped
        .iter()
        .filter(|s| s.reason == SkipReason::Secret)
        .map(|s| s.path.as_str())
        .collect();
    assert_eq!(secret_skips, vec![".env", "deploy/id_rsa"]);
    // The rest of the change is still reviewed.
    assert!(d.text.contains("+fn app() { load_env(); }"), "{}", d.text);
}

#[test]
fn configured_secret_globs_apply_to_changes_in_nested_repositories_too() {
    // GEMINI_MCP_SECRET_FILES globs match the name, or the path below the sandbox root (not
    // below the repository): `vault/**` here names a folder of the nested repository.
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let mut config = Config::for_tests(&root);
    config.secret_globs = vec!["*.sealed".into(), "libs/inner/vault/**".into()];
    let s = Scratch {
        collector: Collector::new(&config.collector()).unwrap(),
        _dir: dir,
        root,
    };
    let outer = init(&s.root);
    write(&outer, "main.rs", "fn main() {}\n");
    stage(&outer, "main.rs");
    commit(&outer, "first");
    let inner = init(&s.root.join("libs/inner"));
    write(&inner, "lib.rs", "pub fn f() {}\n");
    stage_all(&inner);
    commit(&inner, "first");

    write(
        &outer,
        "prod.sealed",
        "{\"token\": \"sealed-value-never-sent\"}\n",
    );
    write(&inner, "vault/notes.txt", "vault-value-never-sent\n");
    write(&inner, "lib.rs", "pub fn f() { g(); }\n");
    stage(&outer, "prod.sealed");
    stage_all(&inner);

    let d = read(&s, &request("."));
    assert!(!d.text.contains("sealed-value-never-sent"), "{}", d.text);
    assert!(!d.text.contains("vault-value-never-sent"), "{}", d.text);
    assert!(
        d.text.contains("GEMINI_MCP_SECRET_FILES `*.sealed`"),
        "{}",
        d.text
    );
    assert!(
        d.text
            .contains("GEMINI_MCP_SECRET_FILES `libs/inner/vault/**`"),
        "{}",
        d.text
    );
    assert_eq!(d.secret_files.len(), 2, "{:?}", d.secret_files);
    // The rest of the change is still reviewed.
    assert!(d.text.contains("+pub fn f() { g(); }"), "{}", d.text);
}

#[test]
fn secret_values_in_ordinary_files_are_redacted() {
    // Relies on the collector's `redact`: a private key block in a source file is replaced.
    let s = scratch();
    let repo = init(&s.root);
    write(&repo, "a.rs", "x\n");
    stage_all(&repo);
    commit(&repo, "first");
    let body = "MIIEpAIBAAKCAQEA3redactMEpleaseTHISisNOTreal";
    write(
        &repo,
        "a.rs",
        format!(
            "const KEY: &str = \"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----\";\n"
        ),
    );
    let d = read(&s, &request("."));
    assert!(!d.text.contains(body), "{}", d.text);
    assert!(d.redactions.total() >= 1);
}

#[test]
fn the_text_as_sent_never_exceeds_the_budget() {
    // Many files of several kinds, across two repositories, so headings, the list, diffs and
    // context all compete; the count is made on the whole text, as Gemini receives it.
    let s = scratch();
    let outer = init(&s.root);
    let inner = init(&s.root.join("nested"));
    for (repo, n) in [(&outer, 30), (&inner, 20)] {
        for i in 0..n {
            let body: String = (0..40)
                .map(|l| format!("fn f{i}_{l}() {{ let x = {l}; }}\n"))
                .collect();
            write(repo, &format!("src/f{i:02}.rs"), &body);
            write(
                repo,
                &format!("docs/d{i:02}.md"),
                format!("# Doc {i}\n\nSome words.\n"),
            );
        }
        stage_all(repo);
        commit(repo, "first");
        for i in 0..n {
            let body: String = (0..40)
                .map(|l| {
                    format!(
                        "fn f{i}_{l}() {{ let x = {}; }}\n",
                        if l % 9 == 0 { l * 2 } else { l }
                    )
                })
                .collect();
            write(repo, &format!("src/f{i:02}.rs"), &body);
            if i % 3 == 0 {
                stage(repo, &format!("src/f{i:02}.rs"));
            }
            write(
                repo,
                &format!("src/new{i:02}.rs"),
                "pub fn brand_new() {}\n",
            );
        }
    }
    let whole = read(&s, &request("."));
    assert!(whole.skipped.is_empty());
    assert!(!whole.context_files.is_empty());
    for budget in [500, 1_500, 4_000, 10_000, 25_000, 60_000, whole.tokens] {
        let mut req = request(".");
        req.budget = budget;
        let d = read(&s, &req);
        let sent = crate::collector::tokens::count(&d.text);
        assert!(d.tokens <= budget, "budget {budget}: reported {}", d.tokens);
        assert!(sent <= budget, "budget {budget}: the text counts {sent}");
        // Whatever was left out is listed, and nothing listed as left out is in the text.
        for skip in &d.skipped {
            assert!(
                !d.text.contains(&format!("--- BEGIN DIFF: {} ", skip.path)),
                "{} is both skipped and sent",
                skip.path
            );
        }
        let sent_diffs = d.text.matches("--- BEGIN DIFF: ").count();
        let over = d
            .skipped
            .iter()
            .filter(|k| k.reason == SkipReason::OverBudget)
            .count();
        assert_eq!(sent_diffs + over, d.changed.len(), "budget {budget}");
    }
}

/// A hundred thousand changed files whose diffs are left out (untracked binaries here), some
/// reported twice, are each listed as left out once. The duplicates are found by a hash set: a
/// search of the list per entry was quadratic, most of precommit's time at 50,000 files (the
/// figures are in BENCHMARKS.md; no timing is asserted here).
#[test]
fn a_hundred_thousand_left_out_files_are_each_listed_once() {
    let s = scratch();
    let repo = init(&s.root);
    drop(repo);
    let found = discover::find(s.collector.sandbox(), &s.root, 0)
        .unwrap()
        .found;
    let repos = vec![diff_text::RepoView {
        display: ".".into(),
        sections: vec![(changes::Section::Untracked, "Untracked files".into())],
        ..diff_text::RepoView::default()
    }];
    let files: Vec<changes::FileChange> = (0..100_000)
        .chain(0..1_000)
        .map(|i| changes::FileChange {
            repo: 0,
            section: changes::Section::Untracked,
            status: "untracked",
            path: format!("gen/d{}/f{i}.bin", i / 100),
            old_path: None,
            body: changes::Body::Binary { old: 0, new: 9 },
            content: None,
            old_blob: None,
            shown_lines: Vec::new(),
        })
        .collect();
    // Nothing to build: every body is known.
    let patches = diff_text::Patches {
        build: &|_| Ok(()),
        bound: &|_| 0,
    };
    let ctx = diff_text::render(
        s.collector.sandbox(),
        &found,
        &repos,
        files,
        200_000,
        &patches,
    )
    .unwrap();
    assert_eq!(ctx.skipped.len(), 100_000);
    assert!(ctx.skipped.iter().all(|k| k.reason == SkipReason::Binary));
    let distinct: std::collections::HashSet<_> = ctx.skipped.iter().map(|k| &k.path).collect();
    assert_eq!(distinct.len(), 100_000);
}

/// Untracked files past the budget are never read: their patches are built only as the budget
/// reaches them, in priority order. Here source files come first and most of 80 data files are
/// left out; inotify reports every open of a file in the data folder (a stat or a directory listing
/// opens nothing). Of the left-out files only the first is opened: its diff, counted, showed the
/// budget full (same-sized files after it cannot fit, by their sizes).
// Linux's inotify is what reports opens (Windows' change notifications report writes only).
#[cfg(target_os = "linux")]
#[test]
fn untracked_files_past_the_budget_are_never_opened() {
    use rustix::fs::inotify;

    let s = scratch();
    let repo = init(&s.root);
    let source = (0..40)
        .map(|i| format!("pub fn f{i}() -> u32 {{ {i} }}\n"))
        .collect::<String>();
    for i in 0..5 {
        write(&repo, &format!("src/m{i}.rs"), &source);
    }
    let data = (0..60)
        .map(|i| format!("row {i}, with a few words in it\n"))
        .collect::<String>();
    for i in 0..80 {
        write(&repo, &format!("data/t{i:02}.csv"), &data);
    }
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).unwrap();
    inotify::add_watch(&fd, s.root.join("data"), inotify::WatchFlags::OPEN).unwrap();

    let mut req = request(".");
    req.budget = 10_000;
    let d = read(&s, &req);
    assert_eq!(d.changed.len(), 85);
    assert!(d.tokens <= req.budget, "{} > {}", d.tokens, req.budget);
    assert!(d.text.contains("pub fn f39()"), "{}", d.text);
    let over: Vec<&str> = d
        .skipped
        .iter()
        .filter(|k| k.reason == SkipReason::OverBudget)
        .map(|k| k.path.as_str())
        .collect();
    assert!(over.len() >= 50, "{over:?}");
    assert!(over.iter().all(|p| p.starts_with("data/")), "{over:?}");

    let mut buf = vec![std::mem::MaybeUninit::<u8>::uninit(); 64 * 1024];
    let mut events = inotify::Reader::new(&fd, &mut buf);
    let mut opened = Vec::new();
    while let Ok(event) = events.next() {
        if let Some(name) = event.file_name() {
            opened.push(format!("data/{}", name.to_string_lossy()));
        }
    }
    let read_anyway: Vec<&String> = opened
        .iter()
        .filter(|o| over.contains(&o.as_str()))
        .collect();
    assert!(
        read_anyway.len() <= 1,
        "left out, yet opened: {read_anyway:?}"
    );
}

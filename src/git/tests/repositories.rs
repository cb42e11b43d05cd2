//! Which repositories are read: nested ones with their own paths, with or without a containing
//! one, a subdirectory limiting the review, a repository containing the sandbox root.

use super::*;
use crate::collector::Collector;
use crate::config::Config;

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

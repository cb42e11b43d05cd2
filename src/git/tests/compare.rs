//! `compare_to`: the branch since the merge base plus pending work, a bad ref, and a ref missing
//! in one nested repository.

use git2::Signature;

use super::*;

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

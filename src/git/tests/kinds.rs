//! The kinds of change and how they read: staged, unstaged and untracked in their sections, the
//! include flags, a file staged and modified again, an unborn HEAD, no changes, not a repository,
//! renames and mode changes, binary files, submodules, the index of a commit in progress.

use std::path::Path;

use super::*;
use crate::collector::SkipReason;

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

//! The budget: source first and every left-out diff listed, the text as sent never over it, a
//! hundred thousand left-out files listed once each, untracked files past it never opened.

use super::*;
use crate::collector::SkipReason;

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

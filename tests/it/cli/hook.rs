//! The pre-commit hook installed in a repository and run by a real `git commit`.

use super::{changed_project, fake, gemini_mcp, project, review, run, vars, with};

#[test]
fn the_hook_blocks_a_commit_it_cannot_review_and_uninstalls() {
    if crate::support::git_missing() {
        return;
    }
    let p = project();
    let r = run(gemini_mcp(&p.root, &[]).args(["hook", "install"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let hook = p.repo.path().join("hooks/pre-commit");
    assert!(
        r.stdout.contains(&hook.display().to_string()),
        "{}",
        r.stdout
    );

    // Installing again updates our own hook in place.
    let r = run(gemini_mcp(&p.root, &[]).args(["hook", "install", "--fail-on", "critical"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        std::fs::read_to_string(&hook)
            .unwrap()
            .contains("--fail-on critical")
    );

    // No key: the review cannot run, so the commit does not happen.
    p.write("src/new.rs", "pub fn new_code() {}\n");
    p.stage("src/new.rs");
    let before = p.head();
    let r = p.git(&["commit", "-q", "-m", "add new code"], &[]);
    assert_ne!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("GEMINI_API_KEY"), "{}", r.stderr);
    assert_eq!(p.head(), before);
    // --no-verify skips it.
    let r = p.git(&["commit", "-q", "--no-verify", "-m", "add new code"], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_ne!(p.head(), before);

    let r = run(gemini_mcp(&p.root, &[]).args(["hook", "uninstall"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!hook.exists());

    // Another tool's hook is neither replaced nor removed.
    std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
    let r = run(gemini_mcp(&p.root, &[]).args(["hook", "install"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--force"), "{}", r.stderr);
    let r = run(gemini_mcp(&p.root, &[]).args(["hook", "uninstall"]));
    assert_eq!(r.code, 2);
    assert_eq!(
        std::fs::read_to_string(&hook).unwrap(),
        "#!/bin/sh\nexit 0\n"
    );
}

#[test]
fn the_hook_passes_and_fails_real_commits() {
    if crate::support::git_missing() {
        return;
    }
    let p = project();
    let fake = fake();
    let v = vars(&fake);
    let env = with(&v);
    let r = run(gemini_mcp(&p.root, &env).args(["hook", "install", "--fail-on", "high"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    // An unstaged edit that is not part of any commit below.
    p.write(
        "src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 {\n    a + b + UNSTAGED\n}\n",
    );

    // A clean review: the commit goes through (whatever PROJECT_ROOT the shell has).
    let elsewhere = tempfile::tempdir().unwrap();
    let mut env = env.to_vec();
    env.push(("PROJECT_ROOT", elsewhere.path().to_str().unwrap()));
    p.write("src/good.rs", "pub fn good() {}\n");
    p.stage("src/good.rs");
    fake.push(review(&[("low", "src/good.rs", Some(1))], "ready"));
    let before = p.head();
    let r = p.git(&["commit", "-q", "-m", "good"], &env);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_ne!(p.head(), before);
    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 1);
    let text = sent[0].last_user_text();
    assert!(text.contains("+pub fn good() {}"), "{text}");
    assert!(
        !text.contains("UNSTAGED"),
        "the hook reviews what is committed only: {text}"
    );
    assert_eq!(
        sent[0].body["serviceTier"], "flex",
        "the hook asks for the flex tier"
    );

    // A high finding: the commit is refused, and git shows why.
    p.write(
        "src/bad.rs",
        "pub fn bad() { unsafe { std::ptr::null::<u8>().read(); } }\n",
    );
    p.stage("src/bad.rs");
    fake.push(review(&[("high", "src/bad.rs", Some(1))], "do_not_commit"));
    let before = p.head();
    let r = p.git(&["commit", "-q", "-m", "bad"], &env);
    assert_ne!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(p.head(), before);
    let shown = format!("{}{}", r.stdout, r.stderr);
    assert!(
        shown.contains("[HIGH]") && shown.contains("FAIL: 1 finding(s) at or above high"),
        "{shown}"
    );
    assert_eq!(fake.generate_requests().len(), 2);
}

#[test]
fn the_hook_reviews_what_commit_a_commits() {
    if crate::support::git_missing() {
        return;
    }
    // `git commit -a` stages into a temporary index and hands it to the hook as GIT_INDEX_FILE.
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    let env = with(&v);
    let r = run(gemini_mcp(&p.root, &env).args(["hook", "install"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    fake.push(review(&[], "ready"));
    let r = p.git(&["commit", "-q", "-a", "-m", "subtract"], &env);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let sent = fake.generate_requests();
    assert_eq!(sent.len(), 1, "the change was reviewed, not found empty");
    let text = sent[0].last_user_text();
    assert!(text.contains("## Staged changes (HEAD → index)"), "{text}");
    assert!(text.contains("+    a - b"), "{text}");
}

//! A review interrupted by a signal exits 2 at once, even from a blocking read.

use std::process::Command;

use super::{changed_project, fake, gemini_mcp, project, vars, with};
use crate::support::fake_gemini::Script;

#[test]
fn an_interrupted_review_exits_2_at_once() {
    let p = changed_project();
    let fake = fake();
    let v = vars(&fake);
    fake.push(Script::echo().delay_headers(std::time::Duration::from_secs(30)));
    let child = gemini_mcp(&p.root, &with(&v))
        .arg("precommit")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the request is at the fake, then stop the review.
    let started = std::time::Instant::now();
    while fake.generate_requests().is_empty() {
        assert!(
            started.elapsed().as_secs() < 20,
            "the request never arrived"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(started.elapsed().as_secs() < 20, "it waited for the answer");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(out.stdout.is_empty());
}

/// Sends SIGTERM to `child` once it has had `after` to start, and returns its exit code, its
/// stderr and how long it took to exit (failing the test if it has not exited 5 s later).
fn terminate(
    mut child: std::process::Child,
    after: std::time::Duration,
) -> (Option<i32>, String, std::time::Duration) {
    use std::io::Read;
    std::thread::sleep(after);
    let sent = std::time::Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut stderr)
                .unwrap();
            return (status.code(), stderr, sent.elapsed());
        }
        if sent.elapsed() > std::time::Duration::from_secs(5) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running 5 s after SIGTERM");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn a_run_stuck_in_a_blocking_read_exits_2_on_sigterm() {
    let p = project();
    let fake = fake();
    let v = vars(&fake);
    // `chat -` reads the prompt from a stdin that never ends.
    let child = gemini_mcp(&p.root, &with(&v))
        .args(["chat", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (code, stderr, _) = terminate(child, std::time::Duration::from_millis(500));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(fake.generate_requests().is_empty());
}

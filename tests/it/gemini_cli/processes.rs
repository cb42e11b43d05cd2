//! The CLI's process group: killed whole on timeout, cancellation or an abandoned call, a leader
//! ignoring SIGTERM killed after the grace, calls in flight killed for a signal handler, helpers
//! left after a normal exit swept.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gemini_mcp_server::gemini::headless::CliBackend;
use gemini_mcp_server::gemini::{CallContext, GeminiError};
use tokio_util::sync::CancellationToken;

use super::{SUCCESS, StandIn, alive, ctx, eventually_dead, request};

async fn eventually_gone(path: &Path) {
    let until = Instant::now() + Duration::from_secs(5);
    while path.exists() {
        assert!(Instant::now() < until, "{} still exists", path.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A stand-in that starts a helper which ignores SIGTERM (as a relaunched CLI child could), then
/// blocks; both pids are recorded.
const HANGS_WITH_HELPER: &str = r#"
cat > /dev/null
( trap '' TERM; exec sleep 1000 ) &
echo $! > "$d/helper.pid"
echo started > "$d/started"
sleep 1000
"#;

#[tokio::test]
async fn gemini_cli_timeout_kills_the_whole_process_group_and_cleans_up() {
    let s = StandIn::new(HANGS_WITH_HELPER);
    let mut config = s.config();
    config.gemini.call_timeout = Duration::from_millis(1500);
    let backend =
        CliBackend::new(s.program(), &config.gemini()).with_kill_grace(Duration::from_millis(300));
    let started = Instant::now();
    let err = backend.generate(&request("hi"), &ctx()).await.unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(err, GeminiError::Timeout { after } if after == Duration::from_millis(1500)),
        "{err:?}"
    );
    assert!(err.to_string().contains("GEMINI_TIMEOUT_SECS"), "{err}");
    assert!(took < Duration::from_secs(6), "took {took:?}");
    let leader: i32 = s.rec(1, "pid").trim().parse().unwrap();
    let helper: i32 = s.rec(1, "helper.pid").trim().parse().unwrap();
    // The helper ignores SIGTERM: only the group SIGKILL ends it.
    eventually_dead(leader).await;
    eventually_dead(helper).await;
    let system_md = PathBuf::from(s.rec(1, "system_md_path"));
    assert!(!system_md.parent().unwrap().exists());
}

#[tokio::test]
async fn gemini_cli_a_leader_ignoring_sigterm_is_killed_after_the_grace() {
    let s = StandIn::new(&format!("trap '' TERM\n{HANGS_WITH_HELPER}"));
    let mut config = s.config();
    config.gemini.call_timeout = Duration::from_millis(500);
    let backend =
        CliBackend::new(s.program(), &config.gemini()).with_kill_grace(Duration::from_millis(400));
    let err = backend.generate(&request("hi"), &ctx()).await.unwrap_err();
    assert!(matches!(err, GeminiError::Timeout { .. }), "{err:?}");
    eventually_dead(s.rec(1, "pid").trim().parse().unwrap()).await;
    eventually_dead(s.rec(1, "helper.pid").trim().parse().unwrap()).await;
}

#[tokio::test]
async fn gemini_cli_cancellation_kills_the_whole_process_group_and_cleans_up() {
    let s = StandIn::new(HANGS_WITH_HELPER);
    let backend = s.backend();
    let cancel = CancellationToken::new();
    let call = CallContext {
        cancel: cancel.clone(),
        progress: None,
        ..CallContext::default()
    };
    let req = request("hi");
    let run = tokio::spawn(async move { backend.generate(&req, &call).await });
    s.wait_for(1, "started").await;
    let started = Instant::now();
    cancel.cancel();
    let err = run.await.unwrap().unwrap_err();
    assert!(matches!(err, GeminiError::Cancelled), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    eventually_dead(s.rec(1, "pid").trim().parse().unwrap()).await;
    eventually_dead(s.rec(1, "helper.pid").trim().parse().unwrap()).await;
    let system_md = PathBuf::from(s.rec(1, "system_md_path"));
    assert!(!system_md.parent().unwrap().exists());
}

#[tokio::test]
async fn gemini_cli_an_abandoned_call_leaves_no_process_and_no_file() {
    // The MCP server drops the call's future when the client cancels: the drop must clean up.
    let s = StandIn::new(HANGS_WITH_HELPER);
    let backend = s.backend();
    let req = request("hi");
    let run = tokio::spawn(async move { backend.generate(&req, &CallContext::default()).await });
    s.wait_for(1, "started").await;
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    eventually_dead(s.rec(1, "pid").trim().parse().unwrap()).await;
    eventually_dead(s.rec(1, "helper.pid").trim().parse().unwrap()).await;
    let system_md = PathBuf::from(s.rec(1, "system_md_path"));
    eventually_gone(system_md.parent().unwrap()).await;
}

#[tokio::test]
async fn gemini_cli_abort_all_kills_calls_in_flight_for_a_signal_handler() {
    let s = StandIn::new(HANGS_WITH_HELPER);
    let backend = s.backend();
    let other = s.backend(); // another backend's calls are not touched
    let req = request("hi");
    let b = backend.clone();
    let run = tokio::spawn(async move { b.generate(&req, &CallContext::default()).await });
    s.wait_for(1, "started").await;
    other.abort_all();
    assert!(alive(s.rec(1, "helper.pid").trim().parse().unwrap()));
    backend.abort_all();
    let system_md = PathBuf::from(s.rec(1, "system_md_path"));
    // Synchronous: the group is killed and the directory gone when it returns.
    assert!(!system_md.parent().unwrap().exists());
    let err = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("the call ends")
        .unwrap()
        .unwrap_err();
    assert!(err.to_string().contains("killed by signal 9"), "{err}");
    eventually_dead(s.rec(1, "pid").trim().parse().unwrap()).await;
    eventually_dead(s.rec(1, "helper.pid").trim().parse().unwrap()).await;
}

#[tokio::test]
async fn gemini_cli_helpers_left_after_a_normal_exit_are_swept() {
    let s = StandIn::new(&format!(
        "( trap '' TERM; exec sleep 1000 ) &\necho $! > \"$d/helper.pid\"\n{SUCCESS}"
    ));
    let resp = tokio::time::timeout(
        Duration::from_secs(10),
        s.backend().generate(&request("hi"), &ctx()),
    )
    .await
    .expect("a helper holding the pipes must not block the call")
    .unwrap();
    assert_eq!(resp.text, "FAKE-REPLY: the code is fine");
    eventually_dead(s.rec(1, "helper.pid").trim().parse().unwrap()).await;
}

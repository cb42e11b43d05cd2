//! The faults particular to each store: the store chosen by the settings, Redis killed and
//! restarted, Redis down at start, corrupt values and rows, Redis's round trips counted, and two
//! processes sharing the embedded store.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gemini_mcp_server::config::{Config, Secret, StoreChoice};
use gemini_mcp_server::store::{self, ThreadError, ThreadId, ThreadStore};

use super::{HOUR, local, turn};
use crate::support::redis::RedisServer;

fn redis_config(dir: &Path, url: &str, prefix: &str, max_turns: u32) -> Config {
    let mut c = Config::for_tests(dir);
    c.threads.store = StoreChoice::Auto;
    c.threads.redis_url = Some(Secret::new(url));
    c.threads.key_prefix = prefix.into();
    c.threads.max_turns = max_turns;
    c
}

#[tokio::test]
async fn thread_store_selection() {
    if crate::support::redis_missing() {
        return;
    }
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut c = Config::for_tests(dir.path());
    c.threads.state_dir = dir.path().join("state");
    for (store, url, expected) in [
        (StoreChoice::Auto, None, "embedded"),
        (StoreChoice::Auto, Some(redis.url()), "redis"),
        (StoreChoice::Redis, Some(redis.url()), "redis"),
        (StoreChoice::Embedded, Some(redis.url()), "embedded"),
        (StoreChoice::Memory, Some(redis.url()), "memory"),
    ] {
        c.threads.store = store;
        c.threads.redis_url = url.map(Secret::new);
        let s = store::open(&c.threads()).await.unwrap();
        assert_eq!(s.kind(), expected, "{store:?}");
    }
    assert!(dir.path().join("state").join("threads.sqlite3").is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_store_redis_killed_and_restarted() {
    const PASSWORD: &str = "s3cret-pw-4711";
    if crate::support::redis_missing() {
        return;
    }
    let mut redis = RedisServer::start_with_password(PASSWORD);
    let dir = tempfile::tempdir().unwrap();
    let s = store::open(&redis_config(dir.path(), &redis.url(), "kill", 20).threads())
        .await
        .unwrap();
    let id = ThreadId::new();
    s.append(id, "/p", &local(), &turn(1)).await.unwrap();

    redis.kill();
    let place = format!("127.0.0.1:{}", redis.port());
    let started = Instant::now();
    let errors = [
        s.load(id).await.unwrap_err(),
        s.append(id, "/p", &local(), &turn(2)).await.unwrap_err(),
        s.latest("/p", &local()).await.unwrap_err(),
        s.ping().await.unwrap_err(),
    ];
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "errors took {:?}",
        started.elapsed()
    );
    for e in &errors {
        let msg = e.to_string();
        eprintln!("while Redis is down: {msg}");
        assert!(
            matches!(e, ThreadError::Unavailable { store: "redis", .. }),
            "{e:?}"
        );
        assert!(msg.contains(&place), "names where Redis was: {msg}");
        assert!(msg.contains("try again"), "says what to do: {msg}");
        assert!(!msg.contains(PASSWORD), "leaks the password: {msg}");
    }

    eprintln!("errors after {:?}", started.elapsed());
    // Back (empty: it persisted nothing). The very next call works again.
    redis.restart();
    let err = s.load(id).await.unwrap_err();
    assert!(
        matches!(err, ThreadError::NotFound { .. }),
        "the lost thread is reported as unknown, not as an outage: {err:?}"
    );
    let fresh = ThreadId::new();
    assert_eq!(s.append(fresh, "/p", &local(), &turn(3)).await.unwrap(), 1);
    assert_eq!(s.load(fresh).await.unwrap().turns, vec![turn(3)]);
    assert_eq!(s.latest("/p", &local()).await.unwrap(), Some(fresh));
    s.ping().await.unwrap();
}

#[tokio::test]
async fn thread_store_redis_down_at_start_names_redis_url() {
    let port = crate::support::redis::free_port();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("redis://:hunter2-secret@127.0.0.1:{port}/3");
    let started = Instant::now();
    let Err(e) = store::open(&redis_config(dir.path(), &url, "down", 20).threads()).await else {
        panic!("opened a store on a port where nothing listens");
    };
    assert!(started.elapsed() < Duration::from_secs(10));
    let msg = e.to_string();
    assert!(msg.contains("REDIS_URL"), "{msg}");
    assert!(msg.contains(&format!("127.0.0.1:{port}/3")), "{msg}");
    assert!(!msg.contains("hunter2"), "{msg}");
}

#[tokio::test]
async fn thread_store_redis_corrupt_values_are_errors_for_that_thread() {
    if crate::support::redis_missing() {
        return;
    }
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let s = store::open(&redis_config(dir.path(), &redis.url(), "cor", 20).threads())
        .await
        .unwrap();
    let [foreign, bad_turn, bad_version, healthy] = [(); 4].map(|_| ThreadId::new());
    for id in [bad_turn, bad_version, healthy] {
        s.append(id, "/p", &local(), &turn(1)).await.unwrap();
    }
    redis.cli(&["SET", &format!("cor:thread:{foreign}"), "not a thread"]);
    redis.cli(&[
        "RPUSH",
        &format!("cor:thread:{bad_turn}:turns"),
        "{\"tool\": 5",
    ]);
    redis.cli(&["HSET", &format!("cor:thread:{bad_version}"), "v", "99"]);

    let corrupt = |e: ThreadError, needle: &str| {
        assert!(matches!(e, ThreadError::Corrupt { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(msg.contains(needle), "{msg}");
        assert!(msg.contains("new thread"), "says what to do: {msg}");
    };
    corrupt(s.load(foreign).await.unwrap_err(), "another type");
    corrupt(
        s.append(foreign, "/p", &local(), &turn(2))
            .await
            .unwrap_err(),
        "string",
    );
    corrupt(s.load(bad_turn).await.unwrap_err(), "turn 2");
    corrupt(s.load(bad_version).await.unwrap_err(), "format version");
    corrupt(
        s.append(bad_version, "/p", &local(), &turn(2))
            .await
            .unwrap_err(),
        "format version",
    );
    // The foreign value is left alone, and the other threads are unaffected.
    assert_eq!(
        redis.cli(&["GET", &format!("cor:thread:{foreign}")]).trim(),
        "not a thread"
    );
    assert_eq!(s.load(healthy).await.unwrap().turns, vec![turn(1)]);

    // A foreign value where the project index lives.
    let index = redis.cli(&["KEYS", "cor:project:*"]);
    let index = index.trim();
    assert!(index.starts_with("cor:project:"), "{index}");
    redis.cli(&["DEL", index]);
    redis.cli(&["SET", index, "x"]);
    corrupt(s.latest("/p", &local()).await.unwrap_err(), "project index");
    corrupt(
        s.append(ThreadId::new(), "/p", &local(), &turn(1))
            .await
            .unwrap_err(),
        "project index",
    );
    s.ping().await.unwrap();
}

#[tokio::test]
async fn thread_store_redis_listing_is_one_script_call_however_many_threads() {
    if crate::support::redis_missing() {
        return;
    }
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let s = store::open(&redis_config(dir.path(), &redis.url(), "ls", 20).threads())
        .await
        .unwrap();
    for n in 0..1_000 {
        s.append(ThreadId::new(), "/p", &local(), &turn(n))
            .await
            .unwrap();
    }
    // Once to load the script into Redis's cache, then counted.
    assert_eq!(s.list("/p", &local(), 20).await.unwrap().len(), 20);
    redis.cli(&["CONFIG", "RESETSTAT"]);
    let listed = s.list("/p", &local(), 20).await.unwrap();
    assert_eq!(listed.len(), 20);
    let stats = redis.cli(&["INFO", "commandstats"]);
    let calls = |name: &str| -> u64 {
        stats
            .lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
            .and_then(|r| r.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    assert_eq!(calls("evalsha"), 1, "one round trip:\n{stats}");
    assert_eq!(calls("eval"), 0, "{stats}");
    // Inside the script: bounded by the limit, not by the 1,000 threads.
    assert_eq!(calls("hmget"), 20, "{stats}");
    assert_eq!(calls("llen"), 20, "{stats}");
    assert_eq!(calls("zrevrange"), 1, "{stats}");
}

#[tokio::test]
async fn thread_store_redis_load_is_one_pipeline_of_two_commands() {
    if crate::support::redis_missing() {
        return;
    }
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let s = store::open(&redis_config(dir.path(), &redis.url(), "rt", 20).threads())
        .await
        .unwrap();
    let id = ThreadId::new();
    for n in 0..20 {
        s.append(id, "/p", &local(), &turn(n)).await.unwrap();
    }
    redis.cli(&["CONFIG", "RESETSTAT"]);
    assert_eq!(s.load(id).await.unwrap().turns.len(), 20);
    let stats = redis.cli(&["INFO", "commandstats"]);
    let mut calls: Vec<(String, u64)> = stats
        .lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let n = rest
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_string(), n))
        })
        .filter(|(name, _)| name != "info" && !name.starts_with("config"))
        .collect();
    calls.sort();
    assert_eq!(
        calls,
        vec![("hgetall".to_string(), 1), ("lrange".to_string(), 1)],
        "a 20-turn load is two commands, not one per turn:\n{stats}"
    );
}

#[tokio::test]
async fn thread_store_embedded_corrupt_rows_are_errors_for_that_thread() {
    use gemini_mcp_server::store::embedded::{EmbeddedStore, FILE_NAME};
    let dir = tempfile::tempdir().unwrap();
    let s = EmbeddedStore::open(dir.path(), HOUR, 20).await.unwrap();
    let (bad, healthy) = (ThreadId::new(), ThreadId::new());
    for id in [bad, healthy] {
        s.append(id, "/p", &local(), &turn(1)).await.unwrap();
        s.append(id, "/p", &local(), &turn(2)).await.unwrap();
    }
    let db = rusqlite::Connection::open(dir.path().join(FILE_NAME)).unwrap();
    db.execute(
        "UPDATE turns SET body = '{\"tool\": 5' WHERE thread = ?1 AND seq = 1",
        [bad.to_string()],
    )
    .unwrap();
    let e = s.load(bad).await.unwrap_err();
    assert!(matches!(e, ThreadError::Corrupt { .. }), "{e:?}");
    assert!(e.to_string().contains("turn 2"), "{e}");
    assert_eq!(s.load(healthy).await.unwrap().turns, vec![turn(1), turn(2)]);
    // Appending to the damaged thread still works; only reading it reports the damage.
    assert_eq!(s.append(bad, "/p", &local(), &turn(3)).await.unwrap(), 3);

    db.execute(
        "UPDATE threads SET id = 'not-a-uuid', written = 1000 WHERE id = ?1",
        [healthy.to_string()],
    )
    .unwrap();
    let e = s.latest("/p", &local()).await.unwrap_err();
    assert!(matches!(e, ThreadError::Corrupt { .. }), "{e:?}");
}

const CHILD_DIR: &str = "GEMINI_MCP_TEST_THREADS_DIR";

const CHILD_THREAD: &str = "GEMINI_MCP_TEST_THREADS_ID";

const SHARED_MAX: u32 = 40;

/// The second process of `thread_store_embedded_shared_by_two_processes`: 25 appends to the
/// thread it is given, at the same time as the first process's 25.
#[test]
#[ignore = "run as the second process of thread_store_embedded_shared_by_two_processes"]
fn thread_store_embedded_child_process() {
    use gemini_mcp_server::store::embedded::EmbeddedStore;
    let dir = PathBuf::from(std::env::var(CHILD_DIR).expect("started by the parent test"));
    let id: ThreadId = std::env::var(CHILD_THREAD).unwrap().parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let s = Arc::new(EmbeddedStore::open(&dir, HOUR, SHARED_MAX).await.unwrap());
        std::fs::write(dir.join("child-ready"), "").unwrap();
        wait_for(&dir.join("go")).await;
        let ok = append_many(s, id, 100..125).await;
        println!("CHILD_OK={ok}");
    });
}

async fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Appends `turn(n)` for each n at once; returns how many were kept. `Full` is the only error
/// allowed.
async fn append_many(
    s: Arc<gemini_mcp_server::store::embedded::EmbeddedStore>,
    id: ThreadId,
    ns: std::ops::Range<usize>,
) -> usize {
    let tasks: Vec<_> = ns
        .map(|n| {
            let s = s.clone();
            tokio::spawn(async move { s.append(id, "/shared", &local(), &turn(n)).await })
        })
        .collect();
    let mut ok = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => ok += 1,
            Err(ThreadError::Full { .. }) => {}
            Err(e) => panic!("append failed: {e}"),
        }
    }
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_store_embedded_shared_by_two_processes() {
    use gemini_mcp_server::store::embedded::EmbeddedStore;
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(
        EmbeddedStore::open(dir.path(), HOUR, SHARED_MAX)
            .await
            .unwrap(),
    );
    let id = ThreadId::new();
    let child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "threads::faults::thread_store_embedded_child_process",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_DIR, dir.path())
        .env(CHILD_THREAD, id.to_string())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_for(&dir.path().join("child-ready")).await;
    std::fs::write(dir.path().join("go"), "").unwrap();
    let parent_ok = append_many(s.clone(), id, 0..25).await;
    let out = child.wait_with_output().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed:\n{stdout}");
    let child_ok: usize = stdout
        .lines()
        .find_map(|l| l.strip_prefix("CHILD_OK="))
        .unwrap_or_else(|| panic!("no CHILD_OK line in:\n{stdout}"))
        .parse()
        .unwrap();

    // 50 appends from two processes, 40 allowed: exactly 40 kept, none lost or doubled.
    assert_eq!(parent_ok + child_ok, SHARED_MAX as usize);
    assert!(
        parent_ok >= 15 && child_ok >= 15,
        "{parent_ok} + {child_ok}"
    );
    let turns = s.load(id).await.unwrap().turns;
    assert_eq!(turns.len(), SHARED_MAX as usize);
    let mut requests: Vec<&str> = turns.iter().map(|t| t.request.as_str()).collect();
    requests.sort();
    requests.dedup();
    assert_eq!(
        requests.len(),
        SHARED_MAX as usize,
        "a turn was stored twice"
    );
}

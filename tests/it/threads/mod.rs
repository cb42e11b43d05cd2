//! Thread stores: one table of behavioural cases run against all three stores (memory, embedded,
//! Redis on a private `redis-server` and on a private Redis Cluster), then the faults particular
//! to each: Redis killed and
//! restarted, Redis down at start, corrupt values, two processes sharing the embedded store.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use futures::FutureExt;
use gemini_mcp_server::config::{Config, Secret, StoreChoice};
use gemini_mcp_server::store::Usage;
use gemini_mcp_server::store::{self, FileRef, Owner, ThreadError, ThreadId, ThreadStore, Turn};

use crate::support::redis::{RedisCluster, RedisServer};

const HOUR: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Backend {
    Memory,
    Embedded,
    Redis,
    RedisCluster,
}

/// Opens stores of one backend, each in a fresh namespace (state directory or key prefix).
struct Fixture {
    backend: Backend,
    dir: tempfile::TempDir,
    redis: Option<RedisServer>,
    cluster: Option<RedisCluster>,
    next: AtomicU32,
}

impl Fixture {
    fn new(backend: Backend) -> Fixture {
        Fixture {
            backend,
            dir: tempfile::tempdir().unwrap(),
            redis: (backend == Backend::Redis).then(RedisServer::start),
            cluster: (backend == Backend::RedisCluster).then(RedisCluster::start),
            next: AtomicU32::new(0),
        }
    }

    fn config(&self, namespace: u32, ttl: Duration, max_turns: u32) -> Config {
        let mut c = Config::for_tests(self.dir.path());
        c.thread_ttl = ttl;
        c.max_turns = max_turns;
        c.state_dir = self.dir.path().join(format!("state-{namespace}"));
        c.key_prefix = format!("test{namespace}");
        match self.backend {
            Backend::Memory => c.store = StoreChoice::Memory,
            Backend::Embedded => c.store = StoreChoice::Auto,
            Backend::Redis => {
                c.store = StoreChoice::Auto;
                c.redis_url = Some(Secret::new(self.redis.as_ref().unwrap().url()));
            }
            Backend::RedisCluster => {
                c.store = StoreChoice::Auto;
                c.redis_url = Some(Secret::new(self.cluster.as_ref().unwrap().url()));
            }
        }
        c
    }

    /// A store in a namespace of its own.
    async fn store(&self, ttl: Duration, max_turns: u32) -> Arc<dyn ThreadStore> {
        Arc::clone(&self.pair(ttl, max_turns).await.0)
    }

    /// Two handles on one namespace: two connections (embedded, Redis) or one store (memory).
    async fn pair(
        &self,
        ttl: Duration,
        max_turns: u32,
    ) -> (Arc<dyn ThreadStore>, Arc<dyn ThreadStore>) {
        let ns = self.next.fetch_add(1, Ordering::SeqCst);
        let c = self.config(ns, ttl, max_turns);
        let a = store::open(&c.threads()).await.unwrap();
        let expected = match self.backend {
            Backend::Memory => "memory",
            Backend::Embedded => "embedded",
            Backend::Redis | Backend::RedisCluster => "redis",
        };
        assert_eq!(a.kind(), expected);
        let b = match self.backend {
            Backend::Memory => Arc::clone(&a),
            _ => store::open(&c.threads()).await.unwrap(),
        };
        (a, b)
    }
}

fn turn(n: usize) -> Turn {
    Turn {
        tool: ["chat", "codereview", "analyze"][n % 3].into(),
        request: format!("request {n}: what about ünïcödé — and \"quotes\"?\n"),
        files: (0..n % 3)
            .map(|i| FileRef {
                path: format!("/project/src/f{i}.rs"),
                hash: format!("{:064x}", n * 10 + i),
                tokens: 100 + i as u64,
            })
            .collect(),
        response: format!("answer {n}"),
        model: "gemini-2.5-pro".into(),
        usage: Usage {
            input: 1000 + n as u64,
            output: 50,
            thinking: 7,
            cached: 3,
            ..Usage::default()
        },
        at_ms: 1_700_000_000_000 + n as u64,
        request_tokens: 12,
        response_tokens: 3,
        frames: Vec::new(),
    }
}

fn local() -> Owner {
    Owner::local()
}

type Case = for<'a> fn(&'a Fixture) -> Pin<Box<dyn Future<Output = ()> + 'a>>;

/// The behavioural suite: every store must pass every case.
const CASES: &[(&str, Case)] = &[
    ("unknown id is not found", |f| Box::pin(unknown_id(f))),
    ("turns load back in order, intact", |f| {
        Box::pin(round_trip(f))
    }),
    ("threads are independent", |f| Box::pin(independent(f))),
    ("latest is the newest thread of the project", |f| {
        Box::pin(latest(f))
    }),
    ("max turns refuses the next turn", |f| {
        Box::pin(max_turns(f))
    }),
    ("ttl expires a thread; writes refresh it", |f| {
        Box::pin(ttl(f))
    }),
    ("50 concurrent appends lose nothing", |f| {
        Box::pin(concurrent_appends(f))
    }),
    ("max turns holds under the race", |f| {
        Box::pin(max_turns_race(f))
    }),
    ("ping answers", |f| Box::pin(ping(f))),
    ("a thread belongs to its owner", |f| Box::pin(owners(f))),
    (
        "listing: newest first, summarised, per project and owner; delete",
        |f| Box::pin(list_and_delete(f)),
    ),
];

/// A listing shows the caller's live threads of one project, newest first, each with its tools
/// (first use first), turn count, first and last times and the opening words of its first
/// request; deleting removes a thread from loads and listings, and only its owner may.
async fn list_and_delete(f: &Fixture) {
    let s = f.store(HOUR, 20).await;
    let other = Owner::for_token(b"someone else");
    assert_eq!(s.list("/l", &local(), 10).await.unwrap(), vec![]);
    let (a, b, c) = (ThreadId::new(), ThreadId::new(), ThreadId::new());
    let mut first = turn(0);
    first.request = "## Question\nWhere does the rate limiter admit a burst of requests?\n".into();
    s.append(a, "/l", &local(), &first).await.unwrap();
    s.append(a, "/l", &local(), &turn(1)).await.unwrap();
    s.append(a, "/l", &local(), &turn(3)).await.unwrap();
    s.append(b, "/l", &local(), &turn(2)).await.unwrap();
    s.append(c, "/l", &other, &turn(2)).await.unwrap();
    s.append(ThreadId::new(), "/elsewhere", &local(), &turn(2))
        .await
        .unwrap();
    let listed = s.list("/l", &local(), 10).await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(
        ids,
        [b.to_string(), a.to_string()],
        "newest first, own project and owner only"
    );
    let la = &listed[1];
    assert_eq!(la.turns, 3);
    assert_eq!(la.tools, ["chat", "codereview"]);
    assert_eq!(la.created_ms, turn(0).at_ms);
    assert_eq!(la.last_ms, turn(3).at_ms);
    assert_eq!(
        la.title,
        "Where does the rate limiter admit a burst of requests?"
    );
    assert_eq!(s.list("/l", &local(), 1).await.unwrap().len(), 1, "limit");
    assert_eq!(s.list("/l", &other, 10).await.unwrap()[0].id, c.to_string());

    let err = s.delete(a, &other).await.unwrap_err();
    assert!(matches!(err, ThreadError::Foreign { .. }), "{err:?}");
    assert!(s.load(a).await.is_ok(), "a refused delete removed nothing");
    assert!(s.delete(a, &local()).await.unwrap());
    assert!(!s.delete(a, &local()).await.unwrap(), "already gone");
    assert!(matches!(
        s.load(a).await.unwrap_err(),
        ThreadError::NotFound { .. }
    ));
    let ids: Vec<String> = s
        .list("/l", &local(), 10)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(ids, [b.to_string()]);
}

/// The owner is stored with the first turn and checked in the same step as every append;
/// `latest` sees only the caller's own threads.
async fn owners(f: &Fixture) {
    let (s, other_handle) = f.pair(HOUR, 20).await;
    let (alice, bob) = (
        Owner::for_token(b"alice-token"),
        Owner::for_token(b"bob-token"),
    );
    assert_ne!(alice, bob);
    assert!(!alice.as_str().contains("alice-token"), "{alice:?}");
    let (a, b, l) = (ThreadId::new(), ThreadId::new(), ThreadId::new());
    s.append(a, "/p", &alice, &turn(1)).await.unwrap();
    s.append(b, "/p", &bob, &turn(2)).await.unwrap();
    s.append(l, "/p", &local(), &turn(3)).await.unwrap();
    assert_eq!(s.load(a).await.unwrap().owner, alice);
    assert_eq!(other_handle.load(b).await.unwrap().owner, bob);
    assert_eq!(s.load(l).await.unwrap().owner, local());
    for (id, intruder) in [(a, &bob), (b, &alice), (l, &alice), (a, &local())] {
        let err = other_handle
            .append(id, "/p", intruder, &turn(9))
            .await
            .unwrap_err();
        assert!(matches!(err, ThreadError::Foreign { .. }), "{err:?}");
        assert!(
            err.to_string().contains("belongs to another client"),
            "{err}"
        );
    }
    assert_eq!(
        s.load(a).await.unwrap().turns,
        vec![turn(1)],
        "nothing was appended"
    );
    assert_eq!(s.latest("/p", &alice).await.unwrap(), Some(a));
    assert_eq!(s.latest("/p", &bob).await.unwrap(), Some(b));
    assert_eq!(s.latest("/p", &local()).await.unwrap(), Some(l));
    assert_eq!(
        s.latest("/p", &Owner::for_token(b"carol")).await.unwrap(),
        None
    );
}

async fn unknown_id(f: &Fixture) {
    let s = f.store(HOUR, 20).await;
    let err = s.load(ThreadId::new()).await.unwrap_err();
    assert!(matches!(err, ThreadError::NotFound { .. }), "{err:?}");
    assert!(
        err.to_string().contains("without continuation_id"),
        "the error says how to start a new thread: {err}"
    );
}

async fn round_trip(f: &Fixture) {
    let s = f.store(HOUR, 20).await;
    let id = ThreadId::new();
    for n in 0..5 {
        assert_eq!(
            s.append(id, "/project", &local(), &turn(n)).await.unwrap(),
            n as u32 + 1
        );
    }
    let t = s.load(id).await.unwrap();
    assert_eq!(t.id, id);
    assert_eq!(t.project, "/project");
    assert_eq!(t.turns, (0..5).map(turn).collect::<Vec<_>>());
}

async fn independent(f: &Fixture) {
    let s = f.store(HOUR, 20).await;
    let (a, b) = (ThreadId::new(), ThreadId::new());
    s.append(a, "/p", &local(), &turn(1)).await.unwrap();
    s.append(b, "/p", &local(), &turn(2)).await.unwrap();
    s.append(a, "/p", &local(), &turn(3)).await.unwrap();
    assert_eq!(s.load(a).await.unwrap().turns, vec![turn(1), turn(3)]);
    assert_eq!(s.load(b).await.unwrap().turns, vec![turn(2)]);
}

async fn latest(f: &Fixture) {
    let s = f.store(HOUR, 20).await;
    assert_eq!(s.latest("/p1", &local()).await.unwrap(), None);
    let (a, b, c) = (ThreadId::new(), ThreadId::new(), ThreadId::new());
    s.append(a, "/p1", &local(), &turn(1)).await.unwrap();
    s.append(b, "/p1", &local(), &turn(2)).await.unwrap();
    s.append(c, "/p2", &local(), &turn(3)).await.unwrap();
    assert_eq!(s.latest("/p1", &local()).await.unwrap(), Some(b));
    assert_eq!(s.latest("/p2", &local()).await.unwrap(), Some(c));
    assert_eq!(s.latest("/p3", &local()).await.unwrap(), None);
    // Writing to an older thread makes it the newest.
    s.append(a, "/p1", &local(), &turn(4)).await.unwrap();
    assert_eq!(s.latest("/p1", &local()).await.unwrap(), Some(a));
}

async fn max_turns(f: &Fixture) {
    let s = f.store(HOUR, 3).await;
    let id = ThreadId::new();
    for n in 1..=3 {
        assert_eq!(
            s.append(id, "/p", &local(), &turn(n)).await.unwrap(),
            n as u32
        );
    }
    let err = s.append(id, "/p", &local(), &turn(4)).await.unwrap_err();
    assert!(matches!(err, ThreadError::Full { max: 3, .. }), "{err:?}");
    assert!(err.to_string().contains("MAX_CONVERSATION_TURNS"), "{err}");
    assert_eq!(s.load(id).await.unwrap().turns.len(), 3);
}

async fn ttl(f: &Fixture) {
    let s = f.store(Duration::from_millis(1_000), 20).await;
    let id = ThreadId::new();
    s.append(id, "/ttl", &local(), &turn(1)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    s.append(id, "/ttl", &local(), &turn(2)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    // 1.2 s after the first write, 0.6 s after the last: alive.
    assert_eq!(s.load(id).await.unwrap().turns.len(), 2);
    assert_eq!(s.latest("/ttl", &local()).await.unwrap(), Some(id));
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let err = s.load(id).await.unwrap_err();
    assert!(matches!(err, ThreadError::NotFound { .. }), "{err:?}");
    assert_eq!(s.latest("/ttl", &local()).await.unwrap(), None);
}

/// 50 appends at once to one thread, half through each of two handles on the same store.
/// Returns a handle and each append's outcome.
async fn race(
    f: &Fixture,
    max_turns: u32,
) -> (
    Arc<dyn ThreadStore>,
    ThreadId,
    Vec<Result<u32, ThreadError>>,
) {
    let (a, b) = f.pair(HOUR, max_turns).await;
    let id = ThreadId::new();
    let tasks: Vec<_> = (0..50)
        .map(|n| {
            let s = if n % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move { s.append(id, "/race", &local(), &turn(n)).await })
        })
        .collect();
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap());
    }
    (a, id, results)
}

async fn concurrent_appends(f: &Fixture) {
    let (s, id, results) = race(f, 100).await;
    let mut counts: Vec<u32> = results.into_iter().map(|r| r.unwrap()).collect();
    counts.sort_unstable();
    assert_eq!(
        counts,
        (1..=50).collect::<Vec<_>>(),
        "each append saw its own count"
    );
    let mut requests: Vec<String> = s
        .load(id)
        .await
        .unwrap()
        .turns
        .into_iter()
        .map(|t| t.request)
        .collect();
    requests.sort();
    let mut expected: Vec<String> = (0..50).map(|n| turn(n).request).collect();
    expected.sort();
    assert_eq!(requests, expected, "no turn lost or duplicated");
}

async fn max_turns_race(f: &Fixture) {
    let (s, id, results) = race(f, 20).await;
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let full = results
        .iter()
        .filter(|r| matches!(r, Err(ThreadError::Full { max: 20, .. })))
        .count();
    assert_eq!((ok, full), (20, 30), "{results:?}");
    assert_eq!(s.load(id).await.unwrap().turns.len(), 20);
}

async fn ping(f: &Fixture) {
    f.store(HOUR, 20).await.ping().await.unwrap();
}

async fn run_suite(backend: Backend) {
    if matches!(backend, Backend::Redis | Backend::RedisCluster) && crate::support::redis_missing()
    {
        return;
    }
    let fixture = Fixture::new(backend);
    let mut failed = Vec::new();
    for (name, case) in CASES {
        let started = Instant::now();
        let outcome = AssertUnwindSafe(case(&fixture)).catch_unwind().await;
        eprintln!(
            "{backend:?}: {name}: {} ({} ms)",
            if outcome.is_ok() { "ok" } else { "FAILED" },
            started.elapsed().as_millis()
        );
        if outcome.is_err() {
            failed.push(*name);
        }
    }
    assert!(failed.is_empty(), "{backend:?} store failed: {failed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_store_suite_memory() {
    run_suite(Backend::Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_store_suite_embedded() {
    run_suite(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_store_suite_redis() {
    run_suite(Backend::Redis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_store_suite_redis_cluster() {
    run_suite(Backend::RedisCluster).await;
}

// ---- Faults and backend-specific behaviour ----

fn redis_config(dir: &Path, url: &str, prefix: &str, max_turns: u32) -> Config {
    let mut c = Config::for_tests(dir);
    c.store = StoreChoice::Auto;
    c.redis_url = Some(Secret::new(url));
    c.key_prefix = prefix.into();
    c.max_turns = max_turns;
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
    c.state_dir = dir.path().join("state");
    for (store, url, expected) in [
        (StoreChoice::Auto, None, "embedded"),
        (StoreChoice::Auto, Some(redis.url()), "redis"),
        (StoreChoice::Redis, Some(redis.url()), "redis"),
        (StoreChoice::Embedded, Some(redis.url()), "embedded"),
        (StoreChoice::Memory, Some(redis.url()), "memory"),
    ] {
        c.store = store;
        c.redis_url = url.map(Secret::new);
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
            "threads::thread_store_embedded_child_process",
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

// ---- History through the real collector ----

/// Turns as the pipeline stores them, for files read through the real collector.
fn sent_turn(
    collector: &gemini_mcp_server::collector::Collector,
    paths: &[&str],
    request: &str,
    already: &std::collections::HashMap<PathBuf, String>,
) -> (Turn, String) {
    use gemini_mcp_server::collector::CollectRequest;
    use gemini_mcp_server::pipeline::prompt;
    let c = collector
        .collect(&CollectRequest {
            paths: paths.iter().map(|p| p.to_string()).collect(),
            budget: 1_000_000,
            already_sent: already.clone(),
        })
        .unwrap();
    let tail = prompt::turn_tail(None, &c.skipped, request);
    let text = prompt::user_turn(&c.files, &tail);
    let turn = Turn {
        tool: "analyze".into(),
        request: tail,
        files: c
            .files
            .iter()
            .map(|f| FileRef {
                path: f.path.display().to_string(),
                hash: f.hash.clone(),
                tokens: f.tokens,
            })
            .collect(),
        response: format!("answer to {request}"),
        model: "m".into(),
        usage: Usage::default(),
        at_ms: 0,
        request_tokens: 0,
        response_tokens: 0,
        frames: Vec::new(),
    };
    (turn, text)
}

#[test]
fn thread_history_through_the_collector_rerenders_turns_byte_for_byte() {
    use gemini_mcp_server::collector::Collector;
    use gemini_mcp_server::pipeline::earlier_turns;
    use gemini_mcp_server::store::Thread;
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/a.rs"), "fn a() -> u32 {\n    1\n}\n").unwrap();
    std::fs::write(root.join("src/b.rs"), "fn b() -> u32 {\n    2\n}\n").unwrap();
    let collector = Collector::new(&Config::for_tests(&root).collector()).unwrap();
    let mut thread = Thread {
        id: ThreadId::new(),
        project: root.display().to_string(),
        owner: Owner::local(),
        turns: Vec::new(),
    };

    // Call one sends a (given relative); call two asks for a (absolute) and b.
    let (t1, text1) = sent_turn(&collector, &["src/a.rs"], "one", &Default::default());
    thread.turns.push(t1);
    let h = earlier_turns::rebuild(&thread, &collector, 100_000);
    assert_eq!(earlier_turns::message_text(&h.messages[0]), text1);
    let a = root.join("src/a.rs").display().to_string();
    let (t2, _) = sent_turn(&collector, &[a.as_str(), "src/b.rs"], "two", &h.sent);
    assert_eq!(t2.files.len(), 1, "a is already in the thread: only b goes");
    thread.turns.push(t2);

    // a changes: its first turn gets a note, and it must go with the next call.
    std::fs::write(root.join("src/a.rs"), "fn a() -> u32 {\n    41 + 1\n}\n").unwrap();
    let h = earlier_turns::rebuild(&thread, &collector, 100_000);
    assert_eq!(h.resend, vec![a.clone()]);
    let first = earlier_turns::message_text(&h.messages[0]);
    assert!(
        first.contains("src/a.rs: sent here, but it has changed since"),
        "{first}"
    );
    assert!(
        !first.contains("    1\n") && !first.contains("41 + 1"),
        "{first}"
    );
    let (t3, text3) = sent_turn(&collector, &[a.as_str()], "three", &h.sent);
    assert!(text3.contains("41 + 1"), "{text3}");
    thread.turns.push(t3);
    let h = earlier_turns::rebuild(&thread, &collector, 100_000);
    assert!(h.resend.is_empty());
    assert_eq!(earlier_turns::message_text(&h.messages[4]), text3);
    let all: String = h.messages.iter().map(earlier_turns::message_text).collect();
    assert_eq!(all.matches("41 + 1").count(), 1, "{all}");
}

// ---- End to end: the real binary over stdio, the fake Gemini API behind it ----

mod e2e {
    use serde_json::{Value, json};

    use crate::support::fake_gemini::{FakeGemini, Recorded};
    use crate::support::mcp::{self, KEY, call, text};
    use crate::support::redis::RedisServer;

    fn structured(r: &rmcp::model::CallToolResult) -> Value {
        r.structured_content.clone().expect("structured content")
    }

    /// What Gemini read for one call: the system instruction, then every message in order.
    fn prompt_text(r: &Recorded) -> String {
        let mut s = r.system_text();
        for (role, t) in r.messages() {
            s.push_str(&format!("\n<{role}>\n{t}"));
        }
        s
    }

    fn shared_prefix_ratio(a: &str, b: &str) -> f64 {
        let shared = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
        shared as f64 / a.len() as f64
    }

    /// Server A starts a thread, server B continues it by id, A continues with "latest", A
    /// stops and a third process C continues it with another tool.
    async fn two_servers_continue_one_thread(store: &[(&str, &str)]) {
        let fake = FakeGemini::start();
        let dir = tempfile::tempdir().unwrap();
        let base = fake.base_url();
        let mut vars = vec![("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", base.as_str())];
        vars.extend_from_slice(store);
        let a = mcp::start(dir.path(), &vars).await;
        let b = mcp::start(dir.path(), &vars).await;

        let first = call(
            &a,
            "chat",
            json!({"prompt": "first: is the parser's error recovery sound?"}),
        )
        .await
        .unwrap();
        assert_ne!(first.is_error, Some(true), "{}", text(&first));
        let id = structured(&first)["continuation_id"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(structured(&first)["remaining_turns"], 19);

        let steps: [(&mcp::Client, &str, Value); 2] = [
            (
                &b,
                "chat",
                json!({"prompt": "second: and on nested blocks?", "continuation_id": id}),
            ),
            (
                &a,
                "chat",
                json!({"prompt": "third: summarise", "continuation_id": "latest"}),
            ),
        ];
        for (n, (client, tool, args)) in steps.into_iter().enumerate() {
            let r = call(client, tool, args).await.unwrap();
            assert_ne!(r.is_error, Some(true), "{}", text(&r));
            let s = structured(&r);
            assert_eq!(s["continuation_id"], id.as_str(), "the same thread");
            assert_eq!(s["remaining_turns"], 18 - n);
            assert!(
                text(&r).contains(&format!("turns={}", n + 2)),
                "Gemini saw the whole thread: {}",
                text(&r)
            );
        }
        a.cancel().await.unwrap();
        b.cancel().await.unwrap();

        let c = mcp::start(dir.path(), &vars).await;
        let r = call(
            &c,
            "debug",
            json!({"error_description": "fourth: a panic in recovery", "continuation_id": id}),
        )
        .await
        .unwrap();
        assert_ne!(r.is_error, Some(true), "{}", text(&r));
        assert_eq!(structured(&r)["remaining_turns"], 16);
        c.cancel().await.unwrap();

        // Each request's messages begin with the previous request's, byte for byte; with the
        // same tool (same system instruction) the whole prompt does (Gemini's prefix cache).
        let sent = fake.generate_requests();
        assert_eq!(sent.len(), 4);
        for (n, pair) in sent.windows(2).enumerate() {
            let (before, after) = (pair[0].messages(), pair[1].messages());
            assert_eq!(after.len(), before.len() + 2, "call {}", n + 2);
            assert_eq!(
                after[..before.len()],
                before[..],
                "call {} rewrote history",
                n + 2
            );
        }
        for n in 0..2 {
            let ratio = shared_prefix_ratio(&prompt_text(&sent[n]), &prompt_text(&sent[n + 1]));
            eprintln!(
                "shared prefix, call {} -> {}: {:.1}%",
                n + 1,
                n + 2,
                ratio * 100.0
            );
            assert!(ratio > 0.9, "call {} shares {:.1}%", n + 2, ratio * 100.0);
        }
        // Every question is in the last prompt's user messages once: no history repeated (the
        // fake's answers echo the question, so model messages are left out of the count).
        let users: String = sent[3]
            .messages()
            .into_iter()
            .filter(|(role, _)| role == "user")
            .map(|(_, t)| t)
            .collect();
        for q in ["first:", "second:", "third:", "fourth:"] {
            assert_eq!(users.matches(q).count(), 1, "{q} in:\n{users}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn thread_two_servers_share_the_embedded_store() {
        // mcp::command gives both processes the same GEMINI_MCP_STATE_DIR (under the root).
        two_servers_continue_one_thread(&[("GEMINI_MCP_STORE", "embedded")]).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn thread_two_servers_share_redis() {
        if crate::support::redis_missing() {
            return;
        }
        let redis = RedisServer::start();
        let url = redis.url();
        two_servers_continue_one_thread(&[
            ("GEMINI_MCP_STORE", "auto"),
            ("REDIS_URL", url.as_str()),
            ("GEMINI_MCP_KEY_PREFIX", "e2e"),
        ])
        .await;
        assert!(
            redis.cli(&["KEYS", "e2e:thread:*"]).contains("e2e:thread:"),
            "the thread lives in Redis"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn thread_redis_outage_seen_through_the_server() {
        const PASSWORD: &str = "outage-pw-9931";
        if crate::support::redis_missing() {
            return;
        }
        let mut redis = RedisServer::start_with_password(PASSWORD);
        let fake = FakeGemini::start();
        let dir = tempfile::tempdir().unwrap();
        let (base, url) = (fake.base_url(), redis.url());
        let client = mcp::start(
            dir.path(),
            &[
                ("GEMINI_API_KEY", KEY),
                ("GEMINI_BASE_URL", base.as_str()),
                ("GEMINI_MCP_STORE", "auto"),
                ("REDIS_URL", url.as_str()),
            ],
        )
        .await;
        let first = call(&client, "chat", json!({"prompt": "one"}))
            .await
            .unwrap();
        let id = structured(&first)["continuation_id"]
            .as_str()
            .unwrap()
            .to_string();

        redis.kill();
        // Continuing needs the thread: a clear isError reply, and Gemini is not called.
        let calls_before = fake.generate_requests().len();
        let r = call(
            &client,
            "chat",
            json!({"prompt": "two", "continuation_id": id}),
        )
        .await
        .unwrap();
        assert_eq!(r.is_error, Some(true));
        let msg = text(&r);
        assert!(msg.contains("Redis") && msg.contains("try again"), "{msg}");
        assert!(!msg.contains(PASSWORD), "{msg}");
        assert_eq!(fake.generate_requests().len(), calls_before);
        // A new question is still answered, and says it could not be kept.
        let r = call(&client, "chat", json!({"prompt": "three"}))
            .await
            .unwrap();
        assert_ne!(r.is_error, Some(true), "{}", text(&r));
        assert!(text(&r).contains("could not be saved"), "{}", text(&r));
        assert!(structured(&r)["continuation_id"].is_null());

        // Redis is back (empty): the same server process works again.
        redis.restart();
        let r = call(&client, "chat", json!({"prompt": "four"}))
            .await
            .unwrap();
        assert_ne!(r.is_error, Some(true), "{}", text(&r));
        let fresh = structured(&r)["continuation_id"]
            .as_str()
            .unwrap()
            .to_string();
        let r = call(
            &client,
            "chat",
            json!({"prompt": "five", "continuation_id": fresh}),
        )
        .await
        .unwrap();
        assert_ne!(r.is_error, Some(true), "{}", text(&r));
        assert!(text(&r).contains("turns=2"), "{}", text(&r));
        client.cancel().await.unwrap();
    }

    #[tokio::test]
    async fn thread_server_refuses_to_start_when_redis_is_down() {
        let dir = tempfile::tempdir().unwrap();
        let port = crate::support::redis::free_port();
        let url = format!("redis://:startup-pw-5150@127.0.0.1:{port}/0");
        let out = mcp::command(
            dir.path(),
            &[
                ("GEMINI_API_KEY", KEY),
                ("GEMINI_MCP_STORE", "auto"),
                ("REDIS_URL", url.as_str()),
            ],
        )
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("REDIS_URL"), "{stderr}");
        assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
        assert!(!stderr.contains("startup-pw"), "{stderr}");
        assert!(out.stdout.is_empty(), "stdout carries only MCP messages");
    }

    /// A thread stays in the project (roots) it was started in: a server on other roots sharing
    /// the same store refuses it, naming the project and the setting, unless the setting allows it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn thread_from_another_project_is_refused_unless_sharing_is_allowed() {
        let fake = FakeGemini::start();
        let dir = tempfile::tempdir().unwrap();
        let (one, two) = (dir.path().join("one"), dir.path().join("two"));
        for root in [&one, &two] {
            let (rel, content) = crate::support::project::MAIN_RS;
            crate::support::project::write(root, rel, content);
        }
        let state = dir.path().join("state");
        let (base, state) = (fake.base_url(), state.display().to_string());
        let vars = |share: &'static str| {
            vec![
                ("GEMINI_API_KEY", KEY),
                ("GEMINI_BASE_URL", base.as_str()),
                ("GEMINI_MCP_STORE", "embedded"),
                ("GEMINI_MCP_STATE_DIR", state.as_str()),
                ("GEMINI_MCP_SHARE_THREADS_ACROSS_PROJECTS", share),
            ]
        };
        let in_one = mcp::start(&one, &vars("0")).await;
        let first = call(&in_one, "chat", json!({"prompt": "started in one"}))
            .await
            .unwrap();
        let id = structured(&first)["continuation_id"]
            .as_str()
            .unwrap()
            .to_string();

        let in_two = mcp::start(&two, &vars("0")).await;
        for continuation in [id.as_str(), "latest"] {
            let r = call(
                &in_two,
                "chat",
                json!({"prompt": "continue in two", "continuation_id": continuation}),
            )
            .await
            .unwrap();
            assert_eq!(r.is_error, Some(true), "{continuation}: {}", text(&r));
            if continuation == "latest" {
                // `latest` looks only at this project's threads.
                assert!(text(&r).contains("no earlier thread"), "{}", text(&r));
                continue;
            }
            let canonical = one.canonicalize().unwrap().display().to_string();
            assert!(
                text(&r).contains(&format!("started in another project ({canonical})")),
                "{}",
                text(&r)
            );
            assert!(
                text(&r).contains("GEMINI_MCP_SHARE_THREADS_ACROSS_PROJECTS=1"),
                "{}",
                text(&r)
            );
        }
        assert_eq!(
            fake.generate_requests().len(),
            1,
            "refusals never reach Gemini"
        );

        let shared = mcp::start(&two, &vars("1")).await;
        let r = call(
            &shared,
            "chat",
            json!({"prompt": "continue in two, shared", "continuation_id": id}),
        )
        .await
        .unwrap();
        assert_ne!(r.is_error, Some(true), "{}", text(&r));
        assert_eq!(structured(&r)["continuation_id"], id.as_str());
        assert_eq!(structured(&r)["remaining_turns"], 18);
    }
}

#[test]
fn thread_history_reuses_stored_token_counts_for_unchanged_files() {
    use gemini_mcp_server::collector::{CollectRequest, Collector};
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(root.join("a.rs"), "fn a() -> u32 {\n    1\n}\n".repeat(20)).unwrap();
    let collector = Collector::new(&Config::for_tests(&root).collector()).unwrap();
    let req = CollectRequest {
        paths: vec!["a.rs".into()],
        budget: 100_000,
        already_sent: Default::default(),
    };
    let counted = collector.collect(&req).unwrap().files.remove(0);
    assert!(counted.tokens > 7);
    let path = counted.path.clone();
    let with = |hash: &str| {
        let known = [(path.clone(), (hash.to_string(), 7))]
            .into_iter()
            .collect();
        collector
            .collect_counted(&req, &known)
            .unwrap()
            .files
            .remove(0)
    };
    let reused = with(&counted.hash);
    assert_eq!(
        reused.tokens, 7,
        "the stored count is used for the same content"
    );
    assert_eq!(reused.text, counted.text);
    assert_eq!(
        with("0000").tokens,
        counted.tokens,
        "other content is counted"
    );
}

/// The daily cap is counted in Redis: a call on one instance spends it, the next call on
/// another instance is refused before Gemini is called, saying the cap, the spend and when it
/// resets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daily_cap_is_shared_by_instances_on_one_redis() {
    use crate::support::fake_gemini::{FakeGemini, Script};
    use crate::support::mcp::{self, KEY};
    use serde_json::json;
    if crate::support::redis_missing() {
        return;
    }
    let redis = RedisServer::start();
    let dir = crate::support::project::with(&[crate::support::project::MAIN_RS]);
    let fake = FakeGemini::start();
    let url = fake.base_url();
    let redis_url = redis.url();
    let vars = [
        ("GEMINI_API_KEY", KEY),
        ("GEMINI_BASE_URL", url.as_str()),
        ("GEMINI_MCP_STORE", "redis"),
        ("REDIS_URL", redis_url.as_str()),
        ("GEMINI_MCP_DAILY_TOKENS", "5000"),
    ];
    let one = mcp::start(dir.path(), &vars).await;
    let two = mcp::start(dir.path(), &vars).await;
    fake.push(Script::text("spent").usage(6_000, 100, 0, 0));
    let r = mcp::call(&one, "chat", json!({"prompt": "first"}))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", mcp::text(&r));
    let r = mcp::call(&two, "chat", json!({"prompt": "second"}))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true), "{}", mcp::text(&r));
    let t = mcp::text(&r);
    assert!(
        t.contains("daily token cap of 5000 (GEMINI_MCP_DAILY_TOKENS)")
            && t.contains("6100 tokens spent today")
            && t.contains("00:00 UTC"),
        "{t}"
    );
    assert_eq!(
        fake.generate_requests().len(),
        1,
        "the refused call reached Gemini"
    );
    one.cancel().await.unwrap();
    two.cancel().await.unwrap();
}

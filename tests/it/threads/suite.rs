//! The table of behavioural cases, run against all three stores: memory, embedded, and Redis on a
//! private `redis-server` and on a private Redis Cluster.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use futures::FutureExt;
use gemini_mcp_server::config::{Config, Secret, StoreChoice};
use gemini_mcp_server::store::{self, Owner, ThreadError, ThreadId, ThreadStore};

use super::{HOUR, local, turn};
use crate::support::redis::{RedisCluster, RedisServer};

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
        c.threads.ttl = ttl;
        c.threads.max_turns = max_turns;
        c.threads.state_dir = self.dir.path().join(format!("state-{namespace}"));
        c.threads.key_prefix = format!("test{namespace}");
        match self.backend {
            Backend::Memory => c.threads.store = StoreChoice::Memory,
            Backend::Embedded => c.threads.store = StoreChoice::Auto,
            Backend::Redis => {
                c.threads.store = StoreChoice::Auto;
                c.threads.redis_url = Some(Secret::new(self.redis.as_ref().unwrap().url()));
            }
            Backend::RedisCluster => {
                c.threads.store = StoreChoice::Auto;
                c.threads.redis_url = Some(Secret::new(self.cluster.as_ref().unwrap().url()));
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
    (
        "one of two handles claims a task whose lease lapsed; the cancel flag stays",
        |f| Box::pin(claim_task(f)),
    ),
    (
        "a front kept by one handle is read by another, replaced, and gone at its expiry",
        |f| Box::pin(fronts(f)),
    ),
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

/// Two instances read a task whose instance stopped (its lease lapsed) and both claim it with
/// the lease they read: exactly one wins, and the record is the winner's; a claim with a lease
/// that is no longer the record's, or of a task that is gone, writes nothing; a cancel request
/// recorded before the claim stays.
async fn claim_task(f: &Fixture) {
    use gemini_mcp_server::store::tasks::TaskEntry;
    let (a, b) = f.pair(HOUR, 20).await;
    let now = store::now_ms();
    let far = now + 3_600_000;
    let entry = TaskEntry {
        id: uuid::Uuid::new_v4(),
        owner: local(),
        created_ms: now,
        state: "{\"by\":\"first\"}".into(),
        lease_ms: now - 1_000,
        cancel: false,
    };
    a.put_task(&entry, far).await.unwrap();
    a.cancel_task(entry.id).await.unwrap();
    let claim = |by: &str| TaskEntry {
        state: format!("{{\"by\":\"{by}\"}}"),
        lease_ms: now + 10_000,
        ..entry.clone()
    };
    let (ca, cb) = (claim("a"), claim("b"));
    let (wa, wb) = tokio::join!(
        a.claim_task(&ca, entry.lease_ms, far),
        b.claim_task(&cb, entry.lease_ms, far)
    );
    let (wa, wb) = (wa.unwrap(), wb.unwrap());
    assert!(wa ^ wb, "exactly one claim wins: {wa} {wb}");
    let got = b.get_task(entry.id).await.unwrap().expect("the record");
    let winner = if wa { "a" } else { "b" };
    assert_eq!(got.state, format!("{{\"by\":\"{winner}\"}}"));
    assert_eq!(got.lease_ms, now + 10_000);
    assert!(got.cancel, "the cancel request stays");
    // The lease read is stale now: a late claim writes nothing.
    assert!(
        !a.claim_task(&claim("late"), entry.lease_ms, far)
            .await
            .unwrap()
    );
    let gone = TaskEntry {
        id: uuid::Uuid::new_v4(),
        ..claim("gone")
    };
    assert!(!a.claim_task(&gone, entry.lease_ms, far).await.unwrap());
    assert!(a.get_task(gone.id).await.unwrap().is_none());
}

/// A front one instance kept is what another reads under the same key (and nothing under
/// another); a later write replaces it whole; a record is gone once its expiry passed.
async fn fronts(f: &Fixture) {
    use gemini_mcp_server::store::ContextCache;
    use gemini_mcp_server::store::fronts::SeenFront;
    let (a, b) = f.pair(HOUR, 20).await;
    let key = |n: u8| format!("{n:02x}").repeat(32);
    let now = store::now_ms();
    assert_eq!(b.seen_front(&key(1)).await.unwrap(), None);
    let seen = SeenFront::default();
    a.keep_front(&key(1), &seen, now + 60_000).await.unwrap();
    assert_eq!(b.seen_front(&key(1)).await.unwrap(), Some(seen));
    assert_eq!(b.seen_front(&key(2)).await.unwrap(), None);
    let cached = SeenFront {
        cache: Some(ContextCache {
            name: "cachedContents/abc".into(),
            model: "gemini-2.5-pro".into(),
            covers: 1,
            digest: "d".repeat(64),
            messages_digest: String::new(),
            tokens: 9_000,
            expires_ms: now + 60_000,
        }),
    };
    b.keep_front(&key(1), &cached, now + 60_000).await.unwrap();
    assert_eq!(a.seen_front(&key(1)).await.unwrap(), Some(cached.clone()));
    // A record that expires in a moment is gone once it has.
    a.keep_front(&key(3), &cached, store::now_ms() + 300)
        .await
        .unwrap();
    assert!(b.seen_front(&key(3)).await.unwrap().is_some());
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    assert_eq!(b.seen_front(&key(3)).await.unwrap(), None);
    assert_eq!(a.seen_front(&key(1)).await.unwrap(), Some(cached));
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

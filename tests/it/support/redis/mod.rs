//! A private `redis-server` for one test: a free loopback port, no persistence (`--save ""
//! --appendonly no`) unless started with [`RedisServer::start_persistent`], its own working
//! directory, killed (SIGKILL) on drop. Never the system Redis. [`RedisCluster`]: a private Redis
//! Cluster the same way (`cluster.rs`).
//!
//! `GEMINI_MCP_TEST_REDIS_SERVER` names another server binary for both (a `valkey-server`: the
//! same tests then run against Valkey); `redis-cli` drives either.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod cluster;
pub use cluster::{RedisCluster, Tls, TlsServer};

/// Why no private Redis can be started here (the server the tests start, [`server_binary`], or
/// `redis-cli` not on `PATH`), or `None`. Windows has no Redis of its own (the release workflow installs one); Wine's prefix
/// has none. (The tests skip on it through `support::redis_missing`.)
pub fn why_missing() -> Option<String> {
    let server = server_binary();
    let absent: Vec<&str> = [server.as_str(), "redis-cli"]
        .into_iter()
        .filter(|program| {
            !Command::new(program)
                .arg("--version")
                .stdin(Stdio::null())
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .collect();
    (!absent.is_empty()).then(|| {
        format!(
            "{} not found on PATH (this test starts a private Redis)",
            absent.join(" and ")
        )
    })
}

pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    password: Option<String>,
    /// An append-only file fsynced on every write, kept in `dir` across restarts.
    persistent: bool,
    dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts a server without a password.
    pub fn start() -> RedisServer {
        RedisServer::start_with(None)
    }

    /// Starts a server that requires `password` (`--requirepass`).
    pub fn start_with_password(password: &str) -> RedisServer {
        RedisServer::start_with(Some(password.to_string()))
    }

    /// Starts a server that keeps its data across [`kill`](Self::kill) and
    /// [`restart`](Self::restart): `--appendonly yes --appendfsync always`, so every write it
    /// acknowledged is on disk before the reply.
    pub fn start_persistent() -> RedisServer {
        RedisServer::start_inner(None, true)
    }

    fn start_with(password: Option<String>) -> RedisServer {
        RedisServer::start_inner(password, false)
    }

    fn start_inner(password: Option<String>, persistent: bool) -> RedisServer {
        // A port picked by the kernel can be taken again before redis-server binds it: retry.
        for _ in 0..5 {
            let mut server = RedisServer {
                child: None,
                port: free_port(),
                password: password.clone(),
                persistent,
                dir: tempfile::tempdir().expect("temp dir for redis-server"),
            };
            if server.spawn() {
                return server;
            }
        }
        panic!("redis-server did not start on a free port after 5 attempts");
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://[:password@]127.0.0.1:<port>/0`
    pub fn url(&self) -> String {
        match &self.password {
            Some(p) => format!("redis://:{p}@127.0.0.1:{}/0", self.port),
            None => format!("redis://127.0.0.1:{}/0", self.port),
        }
    }

    /// Kills the server (SIGKILL, as a crash would) and waits for it to exit.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port (empty unless persistent).
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.spawn() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not restart on port {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs one command through `redis-cli` and returns its raw output.
    pub fn cli(&self, args: &[&str]) -> String {
        let mut cmd = Command::new("redis-cli");
        cmd.args([
            "-h",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "--no-auth-warning",
        ]);
        if let Some(p) = &self.password {
            cmd.args(["-a", p]);
        }
        let out = cmd.args(args).output().expect("redis-cli runs");
        assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Spawns redis-server and waits until it answers PING; false if it exited (port taken).
    fn spawn(&mut self) -> bool {
        let mut cmd = Command::new(server_binary());
        cmd.args([
            "--port",
            &self.port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            if self.persistent { "yes" } else { "no" },
            "--appendfsync",
            "always",
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
        ])
        .arg("--dir")
        .arg(self.dir.path());
        if let Some(p) = &self.password {
            cmd.args(["--requirepass", p]);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed and on PATH");
        self.child = ready_within_10s(child, || self.answers_ping());
        self.child.is_some()
    }

    fn answers_ping(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
        let mut req = String::new();
        if let Some(p) = &self.password {
            req.push_str(&format!("AUTH {p}\r\n"));
        }
        req.push_str("PING\r\n");
        if s.write_all(req.as_bytes()).is_err() {
            return false;
        }
        let mut buf = [0u8; 64];
        let mut got = Vec::new();
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            if String::from_utf8_lossy(&got).contains("+PONG") {
                return true;
            }
        }
        false
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The server binary the tests start: `redis-server`, or `GEMINI_MCP_TEST_REDIS_SERVER`.
pub fn server_binary() -> String {
    std::env::var("GEMINI_MCP_TEST_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into())
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// `child` once `ready` says so (polled every 20 ms for 10 s); `None`, the child stopped, when it
/// exits first or never gets ready.
fn ready_within_10s(mut child: Child, ready: impl Fn() -> bool) -> Option<Child> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return None;
        }
        if ready() {
            return Some(child);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

//! A private Redis Cluster for one test: six servers on free loopback ports (three masters,
//! three replicas: `--cluster-enabled yes`, joined by `redis-cli --cluster create
//! --cluster-replicas 1`), each in its own directory, no persistence, a node timeout of
//! 1000 ms so a killed master's replica takes over within seconds, and every server killed
//! (SIGKILL) on drop. Ready when every node agrees the cluster is `ok`, knows all its nodes
//! and every replica is in sync with its master. [`RedisCluster::start_tls`]: three masters
//! speaking only TLS (clients, bus and replication), with certificates of a private CA
//! ([`Tls`]); [`TlsServer`]: one server the same way.

// The failover test (SIGSTOP) is Unix-only; what only it uses is unused on Windows.
#![cfg_attr(not(unix), allow(dead_code))]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{free_port, ready_within_10s, server_binary};

/// Masters (each with one replica, unless TLS).
const MASTERS: usize = 3;

/// A private CA and a certificate it signed for `127.0.0.1` and `localhost` (made by `openssl`).
pub struct Tls {
    dir: tempfile::TempDir,
}

impl Tls {
    pub fn make() -> Arc<Tls> {
        let dir = tempfile::tempdir().expect("temp dir for certificates");
        let run = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(dir.path())
                .output()
                .expect("openssl is installed and on PATH");
            assert!(out.status.success(), "openssl {args:?}: {out:?}");
        };
        run(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=gemini-mcp test CA",
        ]);
        run(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ]);
        std::fs::write(
            dir.path().join("san.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        )
        .unwrap();
        run(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "san.ext",
        ]);
        Arc::new(Tls { dir })
    }

    /// The CA's certificate (PEM), for `GEMINI_MCP_REDIS_CA_FILE`.
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    fn file(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

/// One server speaking only TLS, with [`Tls`]'s certificate; killed on drop.
pub struct TlsServer {
    node: Node,
}

impl TlsServer {
    pub fn start(tls: &Arc<Tls>) -> TlsServer {
        TlsServer {
            node: Node::start(false, Some(tls.clone())),
        }
    }

    /// `rediss://127.0.0.1:<port>/0`
    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}/0", self.node.port)
    }
}

struct Node {
    port: u16,
    /// The cluster bus port, kept across a restart.
    bus: u16,
    cluster: bool,
    tls: Option<Arc<Tls>>,
    child: Option<Child>,
    /// Stopped by [`RedisCluster::freeze`]: it would not answer `redis-cli`.
    frozen: bool,
    dir: tempfile::TempDir,
}

/// A role in `CLUSTER NODES`, as one node sees it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub port: u16,
    pub master: bool,
    pub failed: bool,
    /// Slot ranges, for a master.
    pub slots: Vec<(u16, u16)>,
}

pub struct RedisCluster {
    nodes: Vec<Node>,
    tls: bool,
}

impl RedisCluster {
    /// Starts six servers and joins them into a cluster; panics (with the nodes' view) if it is
    /// not ready within 30 s.
    pub fn start() -> RedisCluster {
        RedisCluster::start_with(None)
    }

    /// Three masters without replicas, speaking only TLS with `tls`'s certificate.
    pub fn start_tls(tls: &Arc<Tls>) -> RedisCluster {
        RedisCluster::start_with(Some(tls.clone()))
    }

    fn start_with(tls: Option<Arc<Tls>>) -> RedisCluster {
        let (count, replicas) = if tls.is_some() {
            (MASTERS, "0")
        } else {
            (2 * MASTERS, "1")
        };
        let nodes: Vec<Node> = (0..count).map(|_| Node::start(true, tls.clone())).collect();
        let cluster = RedisCluster {
            nodes,
            tls: tls.is_some(),
        };
        let addrs: Vec<String> = cluster
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
            .args(cluster.nodes[0].tls_args())
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", replicas, "--cluster-yes"])
            .output()
            .expect("redis-cli is installed and on PATH");
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        cluster.wait_until("ready", Duration::from_secs(30), |c| c.is_ready());
        cluster
    }

    /// `redis+cluster://127.0.0.1:<p1>,127.0.0.1:<p2>,127.0.0.1:<p3>`: three of the six as seeds.
    pub fn url(&self) -> String {
        let seeds: Vec<String> = self.nodes[..3]
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let scheme = if self.tls { "rediss" } else { "redis" };
        format!("{scheme}+cluster://{}", seeds.join(","))
    }

    /// The same cluster as a comma-separated list of `redis://` URLs, every node a seed.
    pub fn url_list(&self) -> String {
        let urls: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port))
            .collect();
        urls.join(",")
    }

    /// Runs one command through `redis-cli -c` (following redirections) on a live node.
    pub fn cli(&self, args: &[&str]) -> String {
        let node = self
            .nodes
            .iter()
            .find(|n| n.child.is_some() && !n.frozen)
            .expect("a live node");
        node.cli_c(args)
    }

    /// The slot of `key`.
    pub fn slot(&self, key: &str) -> u16 {
        self.cli(&["CLUSTER", "KEYSLOT", key])
            .trim()
            .parse()
            .expect("CLUSTER KEYSLOT answers a number")
    }

    /// The live master serving `slot`, as a live node sees the cluster.
    pub fn master_of(&self, slot: u16) -> Seen {
        self.view()
            .into_iter()
            .find(|s| s.master && !s.failed && s.slots.iter().any(|&(a, b)| a <= slot && slot <= b))
            .unwrap_or_else(|| panic!("no master serves slot {slot}:\n{}", self.nodes_text()))
    }

    /// Kills (SIGKILL, as a crash would) the master serving `slot`; returns its port.
    pub fn kill_master_of(&mut self, slot: u16) -> u16 {
        let master = self.master_of(slot);
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port == master.port)
            .expect("the master is one of ours");
        node.kill();
        master.port
    }

    /// Kills (SIGKILL) the node on `port`, whatever its role (a stopped one too).
    pub fn kill(&mut self, port: u16) {
        self.nodes
            .iter_mut()
            .find(|n| n.port == port)
            .expect("one of our nodes")
            .kill();
    }

    /// The port of a replica of the master on `port`.
    pub fn replica_of(&self, port: u16) -> u16 {
        let view = self.nodes_text();
        let id = view
            .lines()
            .find(|l| parse_line(l).is_some_and(|s| s.port == port))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_else(|| panic!("no node on port {port}:\n{view}"))
            .to_string();
        view.lines()
            .filter(|l| l.split_whitespace().nth(3) == Some(id.as_str()))
            .find_map(parse_line)
            .unwrap_or_else(|| panic!("the master on port {port} has no replica:\n{view}"))
            .port
    }

    /// Stops (SIGSTOP) the node on `port`, or lets it go on (SIGCONT): a stopped replica
    /// receives nothing from its master, as a slow or partitioned one.
    #[cfg(unix)]
    pub fn freeze(&mut self, port: u16, frozen: bool) {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port == port)
            .expect("one of ours");
        let pid = node.child.as_ref().expect("a live node").id();
        let signal = if frozen {
            Signal::SIGSTOP
        } else {
            Signal::SIGCONT
        };
        kill(Pid::from_raw(pid as i32), signal).expect("signal a cluster node");
        node.frozen = frozen;
    }

    /// Writes `bytes` bytes under `key` straight to the node on `port` (a master serving the
    /// key's slot): a stopped replica's socket buffers fill up, and what its master writes after
    /// stays in the master's memory until the replica reads again.
    pub fn ballast(&self, port: u16, key: &str, bytes: usize) {
        let client = ::redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let mut conn = client.get_connection().expect("connect to a master");
        let _: () = ::redis::cmd("SET")
            .arg(key)
            .arg(vec![b'x'; bytes])
            .query(&mut conn)
            .expect("SET the ballast");
    }

    /// Waits until a live node other than `dead` serves `slot` and the cluster is `ok` again.
    pub fn wait_for_new_master(&self, slot: u16, dead: u16) {
        self.wait_until("a replica promoted", Duration::from_secs(30), |c| {
            c.live().all(|n| n.cluster_ok())
                && c.view().iter().any(|s| {
                    s.master
                        && !s.failed
                        && s.port != dead
                        && s.slots.iter().any(|&(a, b)| a <= slot && slot <= b)
                })
        });
    }

    /// Starts the node on `port` again (it was killed): it rejoins from its `nodes.conf`, as a
    /// replica of whoever took its slots, and the cluster is ready again (every replica in sync).
    pub fn restart(&mut self, port: u16) {
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port == port)
            .expect("one of our nodes");
        assert!(node.spawn(), "the node on port {port} did not start again");
        self.wait_until("ready after a restart", Duration::from_secs(30), |c| {
            c.is_ready()
        });
    }

    /// `CLUSTER NODES` as a live node sees it, parsed.
    pub fn view(&self) -> Vec<Seen> {
        self.nodes_text().lines().filter_map(parse_line).collect()
    }

    fn nodes_text(&self) -> String {
        self.cli(&["CLUSTER", "NODES"])
    }

    fn live(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| n.child.is_some() && !n.frozen)
    }

    fn is_ready(&self) -> bool {
        let nodes_agree = self.nodes.iter().all(|n| {
            let info = n.cli_c(&["CLUSTER", "INFO"]);
            info.contains("cluster_state:ok")
                && info.contains(&format!("cluster_known_nodes:{}", self.nodes.len()))
        });
        if !nodes_agree {
            return false;
        }
        // Every node in its final role as this node sees it: a replica still announced as an
        // empty master (gossip not yet caught up, as under load) is not ready.
        let view = self.view();
        let masters: Vec<&Seen> = view.iter().filter(|s| s.master).collect();
        view.len() == self.nodes.len()
            && masters.len() == MASTERS
            && masters.iter().all(|m| !m.slots.is_empty())
            && view.iter().filter(|s| !s.master).all(|replica| {
                let node = self.nodes.iter().find(|n| n.port == replica.port);
                node.is_some_and(|n| {
                    n.cli_c(&["INFO", "replication"])
                        .contains("master_link_status:up")
                })
            })
    }

    fn wait_until(&self, what: &str, limit: Duration, mut ready: impl FnMut(&Self) -> bool) {
        let deadline = Instant::now() + limit;
        while !ready(self) {
            assert!(
                Instant::now() < deadline,
                "the Redis Cluster was not {what} within {limit:?}:\n{}",
                self.nodes_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Node {
    /// Starts one cluster-enabled server on a free port (its bus on another); retries when a port
    /// was taken in between.
    fn start(cluster: bool, tls: Option<Arc<Tls>>) -> Node {
        for _ in 0..5 {
            let mut node = Node {
                port: free_port(),
                bus: free_port(),
                cluster,
                tls: tls.clone(),
                child: None,
                frozen: false,
                dir: tempfile::tempdir().expect("temp dir for a cluster node"),
            };
            if node.spawn() {
                return node;
            }
        }
        panic!("a cluster node did not start on a free port after 5 attempts");
    }

    fn spawn(&mut self) -> bool {
        let port = self.port.to_string();
        let mut cmd = Command::new(server_binary());
        match &self.tls {
            None => cmd.args(["--port", &port]),
            Some(tls) => cmd
                .args(["--port", "0", "--tls-port", &port])
                .args(["--tls-cert-file", &tls.file("server.pem")])
                .args(["--tls-key-file", &tls.file("server.key")])
                .args(["--tls-ca-cert-file", &tls.file("ca.pem")])
                .args(["--tls-auth-clients", "no"])
                .args(["--tls-cluster", "yes", "--tls-replication", "yes"]),
        };
        if self.cluster {
            cmd.args(["--cluster-port", &self.bus.to_string()])
                .args(["--cluster-enabled", "yes"])
                .args(["--cluster-config-file", "nodes.conf"])
                .args(["--cluster-node-timeout", "1000"])
                // A replica in sync at once (no 5 s wait for more replicas), and one that lost
                // its master long ago still takes over: the tests kill masters on purpose.
                .args(["--repl-diskless-sync-delay", "0"])
                .args(["--cluster-replica-validity-factor", "0"]);
        }
        let child = cmd
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--daemonize", "no", "--loglevel", "warning"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the Redis server binary is installed and on PATH");
        self.child = ready_within_10s(child, || self.cli_c(&["PING"]).trim() == "PONG");
        self.child.is_some()
    }

    fn cluster_ok(&self) -> bool {
        self.cli_c(&["CLUSTER", "INFO"])
            .contains("cluster_state:ok")
    }

    /// `redis-cli -c -p <port> args…`: its output, empty when it cannot connect.
    fn cli_c(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(self.tls_args())
            .args(["-c", "-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli is installed and on PATH");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `redis-cli`'s TLS arguments for this node.
    fn tls_args(&self) -> Vec<String> {
        match &self.tls {
            Some(tls) => vec!["--tls".into(), "--cacert".into(), tls.file("ca.pem")],
            None => vec![],
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.frozen = false;
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One line of `CLUSTER NODES`: `<id> <ip:port@bus> <flags> <master> <ping> <pong> <epoch>
/// <link> <slot>…`.
fn parse_line(line: &str) -> Option<Seen> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 8 {
        return None;
    }
    let port = f[1].split('@').next()?.rsplit(':').next()?.parse().ok()?;
    let flags: Vec<&str> = f[2].split(',').collect();
    let slots = f[8..]
        .iter()
        .filter(|s| !s.starts_with('['))
        .filter_map(|s| match s.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => s.parse().ok().map(|a| (a, a)),
        })
        .collect();
    Some(Seen {
        port,
        master: flags.contains(&"master"),
        failed: flags.contains(&"fail") || flags.contains(&"fail?"),
        slots,
    })
}

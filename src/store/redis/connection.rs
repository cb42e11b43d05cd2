//! How the thread store and the HTTP sessions reach Redis: `REDIS_URL` read once into a
//! [`Target`] (one node, or a cluster's seed nodes) and one connection type over both
//! ([`Connection`]: the driver's connection manager or its cluster client, each behind the
//! driver's `aio::ConnectionLike`), so every command, script and pipeline is written once.
//!
//! The forms of `REDIS_URL`:
//! - `redis://[user:password@]host:port/db`, `rediss://…` (TLS), `redis+unix:///path?db=N`: one
//!   Redis (or Valkey) server, as always;
//! - `redis+cluster://[user:password@]host:port[,host:port…]` (`rediss+cluster://` with TLS): a
//!   Redis Cluster (or Valkey cluster), reached through any of the seed nodes named; the client
//!   learns the rest of the topology from them and follows it (`MOVED`/`ASK`, failovers);
//! - several URLs separated by commas, `redis://h1:7000,redis://h2:7000`: a cluster too, with the
//!   same credentials and TLS on each.
//!
//! A cluster has only database 0. TLS checks the server's certificate against the system's
//! roots, or only against `GEMINI_MCP_REDIS_CA_FILE` when that is set (a private CA, as
//! Memorystore's). Nothing here prints the URL: messages name `REDIS_URL`, the hosts and ports.
//!
//! After a failover the cluster client keeps sending a slot's commands to its old master until
//! something tells it the topology changed: a `MOVED`, a refused or closed connection. A master
//! that stops answering without closing its connections (a crashed host, a partition, a stopped
//! process) tells it nothing, and every command to its slots times out, long after its replica
//! was promoted. So a command that times out on a cluster renews the client ([`Cluster::renew`]):
//! a fresh one learns the topology from the seed nodes again (those that answer) and replaces the
//! old for every later command. The thread store then tries the operation once more where that
//! is safe (`super`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{
    Cmd, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, Pipeline, RedisError, RedisFuture,
    TlsCertificates, Value,
};

/// Deadline for one connection attempt.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Deadline for one command's answer on an open connection.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a cluster client's renewal may take: connecting to the seed nodes (one that does not
/// answer is waited for up to a response's deadline) and reading the topology.
const RENEW_TIMEOUT: Duration = Duration::from_secs(8);

/// The forms `REDIS_URL` may take, for messages.
const FORMS: &str = "expected redis://[user:password@]host:port/db (rediss:// for TLS) for one \
     Redis, or redis+cluster://[user:password@]host:port[,host:port…] (rediss+cluster:// for \
     TLS) or a comma-separated list of redis:// URLs for a Redis Cluster";

/// One server, or a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    Single,
    Cluster,
}

/// Where `REDIS_URL` points, parsed once. Its `Debug` shows the topology and the place only
/// (the nodes hold the password).
pub struct Target {
    pub topology: Topology,
    nodes: Vec<ConnectionInfo>,
    /// `host:port/db`, or `host:port,host:port (cluster)`: for messages (never the URL).
    pub place: String,
    /// The password, to scrub from any error text the driver produces.
    pub password: Option<String>,
}

impl Target {
    /// Reads `url`. The error names `REDIS_URL` and the accepted forms, never the value.
    pub fn parse(url: &str) -> Result<Target, UrlError> {
        let url = url.trim();
        let invalid = |why: &str| UrlError(format!("is not a valid Redis URL ({why}); {FORMS}"));
        let cluster_form = ["redis+cluster://", "rediss+cluster://"]
            .iter()
            .find_map(|s| {
                url.strip_prefix(s)
                    .map(|rest| (s.starts_with("rediss"), rest))
            });
        let (topology, urls) = match cluster_form {
            Some((tls, rest)) => (Topology::Cluster, seed_urls(tls, rest).map_err(&invalid)?),
            None if url.contains(',') => (
                Topology::Cluster,
                url.split(',').map(|u| u.trim().to_string()).collect(),
            ),
            None => (Topology::Single, vec![url.to_string()]),
        };
        let nodes = urls
            .iter()
            .map(|u| {
                u.as_str()
                    .into_connection_info()
                    .map_err(|_| invalid("a node's address or scheme cannot be read"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let Some(first) = nodes.first() else {
            return Err(invalid("it names no node"));
        };
        let password = first
            .redis_settings()
            .password()
            .filter(|p| !p.is_empty())
            .map(String::from);
        let place = match topology {
            Topology::Single => format!("{}/{}", first.addr(), first.redis_settings().db()),
            Topology::Cluster => {
                if nodes.iter().any(|n| n.redis_settings().db() != 0) {
                    return Err(UrlError(format!(
                        "names a database other than 0 for a Redis Cluster, which has only \
                         database 0: drop the /db from REDIS_URL; {FORMS}"
                    )));
                }
                if nodes
                    .iter()
                    .any(|n| matches!(n.addr(), ConnectionAddr::Unix(_)))
                {
                    return Err(invalid(
                        "a cluster is reached over TCP: a Unix socket cannot name its nodes",
                    ));
                }
                let addrs: Vec<String> = nodes.iter().map(|n| n.addr().to_string()).collect();
                format!("{} (cluster)", addrs.join(","))
            }
        };
        Ok(Target {
            topology,
            nodes,
            place,
            password,
        })
    }

    /// Connects and returns the connection, or the driver's error (not yet scrubbed).
    /// `ca_pem`: the only roots TLS trusts, when set.
    pub async fn connect(&self, ca_pem: Option<&[u8]>) -> Result<Connection, RedisError> {
        let certs = |pem: &[u8]| TlsCertificates {
            client_tls: None,
            root_cert: Some(pem.to_vec()),
        };
        match self.topology {
            Topology::Single => {
                let info = self.nodes[0].clone();
                let client = match ca_pem {
                    Some(pem) => redis::Client::build_with_tls(info, certs(pem))?,
                    None => redis::Client::open(info)?,
                };
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(CONNECT_TIMEOUT))
                    .set_response_timeout(Some(RESPONSE_TIMEOUT))
                    .set_number_of_retries(2)
                    .set_min_delay(Duration::from_millis(100))
                    .set_max_delay(Duration::from_secs(1));
                Ok(Connection::Single(
                    ConnectionManager::new_with_config(client, config).await?,
                ))
            }
            Topology::Cluster => {
                // Retries span a failover (the replica's promotion takes about the cluster's
                // node timeout); each store operation is bounded by its own deadline anyway.
                let mut builder = ClusterClient::builder(self.nodes.clone())
                    .connection_timeout(CONNECT_TIMEOUT)
                    .response_timeout(RESPONSE_TIMEOUT)
                    .retries(30)
                    .min_retry_wait(100)
                    .max_retry_wait(1_000);
                if let Some(pem) = ca_pem {
                    builder = builder.certs(certs(pem));
                }
                let client = builder.build()?;
                let conn = client.get_async_connection().await?;
                Ok(Connection::Cluster(Arc::new(Cluster {
                    client,
                    current: Mutex::new(Current {
                        generation: 0,
                        conn,
                    }),
                    renewing: tokio::sync::Mutex::new(()),
                })))
            }
        }
    }
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("topology", &self.topology)
            .field("place", &self.place)
            .finish_non_exhaustive()
    }
}

/// What is wrong with `REDIS_URL` (never its value): shown as `REDIS_URL <reason>`.
#[derive(Debug)]
pub struct UrlError(String);

impl UrlError {
    /// What is wrong, after the setting's name.
    pub fn reason(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for UrlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "REDIS_URL {}", self.0)
    }
}

/// The seed nodes of `redis+cluster://[userinfo@]host:port,host:port[/db][?query]` as one URL
/// each, with the userinfo, path and query repeated (the driver decodes each).
fn seed_urls(tls: bool, rest: &str) -> Result<Vec<String>, &'static str> {
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (format!("{u}@"), h),
        None => (String::new(), authority),
    };
    let scheme = if tls { "rediss" } else { "redis" };
    let urls: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|h| format!("{scheme}://{userinfo}{h}{tail}"))
        .collect();
    if urls.is_empty() {
        return Err("it names no host:port");
    }
    Ok(urls)
}

/// One connection to Redis, a single server's or a cluster's: cheap to clone (both share one
/// multiplexed connection per node), reconnecting by itself.
#[derive(Clone)]
pub enum Connection {
    Single(ConnectionManager),
    Cluster(Arc<Cluster>),
}

impl Connection {
    /// Which cluster client is in use now (0 for one server): pass it to [`Connection::renew`]
    /// after an attempt made now timed out.
    pub fn generation(&self) -> u64 {
        match self {
            Connection::Single(_) => 0,
            Connection::Cluster(c) => c.current().generation,
        }
    }

    /// After an attempt with client `generation` timed out: on a cluster, a client of the
    /// topology as the seed nodes tell it now (made here unless another caller made one since);
    /// `true` when there is one to try again with. One server: `false` (its connection manager
    /// reconnects by itself, and the same server would be asked again).
    pub async fn renew(&self, generation: u64) -> bool {
        match self {
            Connection::Single(_) => false,
            Connection::Cluster(c) => c.clone().renew(generation).await,
        }
    }
}

/// A cluster's client and the connection of its newest topology.
pub struct Cluster {
    client: ClusterClient,
    current: Mutex<Current>,
    /// Held while a renewal reads the topology: one at a time.
    renewing: tokio::sync::Mutex<()>,
}

/// The connection commands go through now, and which renewal made it.
#[derive(Clone)]
struct Current {
    generation: u64,
    conn: ClusterConnection,
}

impl Cluster {
    fn current(&self) -> Current {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces the connection of `stale` (a command through it timed out) by a fresh one that
    /// reads the topology from the seed nodes. `true` when a newer connection is in place, made
    /// here or by a renewal before; `false` when none could be made (the old one stays).
    async fn renew(self: Arc<Self>, stale: u64) -> bool {
        let _one = self.renewing.lock().await;
        if self.current().generation != stale {
            return true;
        }
        tracing::warn!(
            "a Redis Cluster node did not answer in time: reading the topology again from the \
             seed nodes of REDIS_URL"
        );
        let fresh = tokio::time::timeout(RENEW_TIMEOUT, self.client.get_async_connection()).await;
        match fresh {
            Ok(Ok(conn)) => {
                *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Current {
                    generation: stale + 1,
                    conn,
                };
                tracing::info!("Redis Cluster topology read again; later commands follow it");
                true
            }
            Ok(Err(e)) => {
                tracing::warn!(error = ?e.kind(), "the Redis Cluster topology could not be read again");
                false
            }
            Err(_) => {
                tracing::warn!(
                    "the Redis Cluster topology could not be read again within {} s",
                    RENEW_TIMEOUT.as_secs()
                );
                false
            }
        }
    }

    /// After a command through `generation`'s connection ended with `result`: a timeout renews
    /// the connection, in a task of its own (a caller's deadline cannot cut it short), so the
    /// next command follows the topology as it is now.
    fn after<T>(self: &Arc<Self>, generation: u64, result: &Result<T, RedisError>) {
        if result.as_ref().is_err_and(RedisError::is_timeout) {
            tokio::spawn(self.clone().renew(generation));
        }
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(c) => c.req_packed_command(cmd),
            Connection::Cluster(cluster) => {
                let cluster = cluster.clone();
                Box::pin(async move {
                    let Current {
                        generation,
                        mut conn,
                    } = cluster.current();
                    let result = conn.req_packed_command(cmd).await;
                    cluster.after(generation, &result);
                    result
                })
            }
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Connection::Cluster(cluster) => {
                let cluster = cluster.clone();
                Box::pin(async move {
                    let Current {
                        generation,
                        mut conn,
                    } = cluster.current();
                    let result = conn.req_packed_commands(pipeline, offset, count).await;
                    cluster.after(generation, &result);
                    result
                })
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(c) => c.get_db(),
            Connection::Cluster(_) => 0,
        }
    }
}

/// `text` with the URL and the password replaced by `***` (driver errors should not hold them,
/// but nothing that reaches a log or a reply is trusted to).
pub fn scrub(text: &str, url: &str, password: Option<&str>) -> String {
    let mut out = text.to_string();
    if !url.is_empty() {
        out = out.replace(url, "***");
    }
    if let Some(p) = password.filter(|p| p.len() >= 3) {
        out = out.replace(p, "***");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrub_hides_url_and_password() {
        let s = scrub(
            "failed redis://:hunter22@h:1/0 auth hunter22",
            "redis://:hunter22@h:1/0",
            Some("hunter22"),
        );
        assert_eq!(s, "failed *** auth ***");
    }

    /// Each form of `REDIS_URL`: its topology, where it points (as messages say it) and its
    /// password, known for scrubbing.
    #[test]
    fn the_url_forms() {
        let cases: &[(&str, Topology, &str, Option<&str>)] = &[
            (
                "redis://127.0.0.1:6379/2",
                Topology::Single,
                "127.0.0.1:6379/2",
                None,
            ),
            (
                "rediss://:pw-123@cache.example:6380/0",
                Topology::Single,
                "cache.example:6380/0",
                Some("pw-123"),
            ),
            (
                "redis+cluster://a:7000,b:7001,c:7002",
                Topology::Cluster,
                "a:7000,b:7001,c:7002 (cluster)",
                None,
            ),
            (
                "rediss+cluster://user:s%40cret@a:7000,b:7001/0",
                Topology::Cluster,
                "a:7000,b:7001 (cluster)",
                Some("s@cret"),
            ),
            (
                "redis://:pw-1@h1:7000, redis://:pw-1@h2:7000",
                Topology::Cluster,
                "h1:7000,h2:7000 (cluster)",
                Some("pw-1"),
            ),
        ];
        for (url, topology, place, password) in cases {
            let t = Target::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_eq!(t.topology, *topology, "{url}");
            assert_eq!(t.place, *place, "{url}");
            assert_eq!(t.password.as_deref(), *password, "{url}");
        }
        let tls = Target::parse("rediss+cluster://a:7000,b:7001").unwrap();
        assert!(
            tls.nodes
                .iter()
                .all(|n| matches!(n.addr(), ConnectionAddr::TcpTls { .. })),
            "every seed node speaks TLS"
        );
    }

    /// A wrong URL names `REDIS_URL` and what it should look like, never the value.
    #[test]
    fn wrong_urls_name_the_setting_and_the_fix_not_the_value() {
        for (url, needle) in [
            ("notaurl://:topsecret@@", "redis+cluster://"),
            ("redis+cluster://:topsecret@", "names no host"),
            ("redis+cluster://:topsecret@a:7000/3", "database 0"),
            (
                "redis://:topsecret@a:7000/1,redis://:topsecret@b:7000/1",
                "database 0",
            ),
            ("redis://:topsecret@a:7000,ftp://b", "cannot be read"),
        ] {
            let e = Target::parse(url).unwrap_err().to_string();
            assert!(e.contains("REDIS_URL"), "{url}: {e}");
            assert!(e.contains(needle), "{url}: {e}");
            assert!(!e.contains("topsecret"), "{url}: {e}");
        }
    }
}

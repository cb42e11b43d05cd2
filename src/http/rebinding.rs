//! DNS-rebinding protection for every route (`/mcp`, `/healthz`, `/readyz`, `/metrics`): the
//! `Host` and `Origin` of each request checked against one allowlist, before anything else
//! reads the request.
//!
//! A page on another site whose name is rebound to this machine's address reaches the server
//! with its own name in `Host`; a browser page of another origin says so in `Origin`. So a
//! request is served only when its `Host` is a loopback name (`localhost`, `127.0.0.1`, `::1`),
//! the address the client dialled (the connection's own local address: a probe or a scraper
//! addressing an instance by its IP — a rebound name is never an address), or a name of
//! `GEMINI_MCP_HTTP_ALLOWED_HOSTS`; and, when it has an `Origin`, only when that is a loopback
//! page or one of `GEMINI_MCP_HTTP_ALLOWED_ORIGINS` (`*` in either switches that check off).
//! Refusals are 403 (a malformed or missing `Host` 400), with rmcp's wording.
//!
//! rmcp has the same check inside its Streamable HTTP service, for `/mcp` only; it is switched
//! off there (`mcp_config`) so that every route runs this one. The matching is rmcp's: host
//! names without case or brackets, a port in an entry must be the request's; an origin entry's
//! port `:*` takes any port, a given port the one the origin names or its scheme implies, no
//! port any port.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::IncomingStream;
use tokio::net::TcpListener;

/// Hosts always accepted in `Host` (rmcp's loopback defaults).
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];
/// Browser origins always accepted: pages served from this machine.
const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

/// Both ends of a connection, for every request on it: the client's address (who is calling,
/// without tokens: `auth`) and the address it dialled (accepted in `Host`).
#[derive(Clone, Copy, Debug)]
pub struct Connection {
    pub peer: SocketAddr,
    pub local: Option<SocketAddr>,
}

impl Connected<IncomingStream<'_, TcpListener>> for Connection {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Connection {
        Connection {
            peer: *stream.remote_addr(),
            local: stream.io().local_addr().ok(),
        }
    }
}

/// A host name and maybe a port, as compared: lower case, without IPv6 brackets.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Authority {
    host: String,
    port: Option<u16>,
}

impl Authority {
    fn new(host: &str, port: Option<u16>) -> Authority {
        Authority {
            host: host.trim_matches(['[', ']']).to_ascii_lowercase(),
            port,
        }
    }

    /// An allowlist entry: `host` or `host:port`.
    fn entry(raw: &str) -> Option<Authority> {
        let raw = raw.trim();
        if raw.is_empty() {
            return None;
        }
        Some(match raw.parse::<axum::http::uri::Authority>() {
            Ok(a) => Authority::new(a.host(), a.port_u16()),
            Err(_) => Authority::new(raw, None),
        })
    }

    /// Whether the entry `self` accepts the request's `host`.
    fn accepts(&self, host: &Authority) -> bool {
        self.host == host.host && self.port.is_none_or(|p| host.port == Some(p))
    }
}

/// A request's `Origin`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Origin {
    Null,
    Site {
        scheme: String,
        host: String,
        port: Option<u16>,
    },
}

impl Origin {
    fn parse(value: &str) -> Option<Origin> {
        let value = value.trim();
        if value.eq_ignore_ascii_case("null") {
            return Some(Origin::Null);
        }
        let uri = value.parse::<Uri>().ok()?;
        let authority = uri.authority()?;
        Some(Origin::Site {
            scheme: uri.scheme_str()?.to_ascii_lowercase(),
            host: Authority::new(authority.host(), None).host,
            port: authority.port_u16(),
        })
    }
}

/// An allowed origin's port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Port {
    /// `:*`, or none given.
    Any,
    Exact(u16),
}

/// An allowlist entry of origins.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AllowedOrigin {
    origin: Origin,
    port: Port,
}

impl AllowedOrigin {
    fn entry(raw: &str) -> Option<AllowedOrigin> {
        let raw = raw.trim();
        let (base, any) = match raw.strip_suffix(":*") {
            Some(base) => (base, true),
            None => (raw, false),
        };
        let origin = Origin::parse(base)?;
        let port = match &origin {
            Origin::Site { port: Some(_), .. } if any => return None,
            Origin::Null if any => return None,
            Origin::Site { port: Some(p), .. } => Port::Exact(*p),
            _ => Port::Any,
        };
        Some(AllowedOrigin { origin, port })
    }

    fn accepts(&self, origin: &Origin) -> bool {
        match (&self.origin, origin) {
            (Origin::Null, Origin::Null) => true,
            (
                Origin::Site {
                    scheme: a_scheme,
                    host: a_host,
                    ..
                },
                Origin::Site { scheme, host, port },
            ) => {
                let implied = || match scheme.as_str() {
                    "http" => Some(80),
                    "https" => Some(443),
                    _ => None,
                };
                a_scheme == scheme
                    && a_host == host
                    && match self.port {
                        Port::Any => true,
                        Port::Exact(p) => port.or_else(implied) == Some(p),
                    }
            }
            _ => false,
        }
    }
}

/// What every route accepts in `Host` and `Origin`.
#[derive(Debug)]
pub struct Allowlist {
    /// Loopback names and the configured ones; `None`: any host (`*`).
    hosts: Option<Vec<Authority>>,
    /// Loopback pages and the configured ones; `None`: any origin (`*`).
    origins: Option<Vec<AllowedOrigin>>,
}

impl Allowlist {
    /// From `GEMINI_MCP_HTTP_ALLOWED_HOSTS` and `GEMINI_MCP_HTTP_ALLOWED_ORIGINS` (each `None`
    /// for `*`), besides the loopback ones.
    pub fn new(hosts: Option<&[String]>, origins: Option<&[String]>) -> Allowlist {
        Allowlist {
            hosts: hosts.map(|extra| {
                LOOPBACK_HOSTS
                    .iter()
                    .copied()
                    .chain(extra.iter().map(String::as_str))
                    .filter_map(Authority::entry)
                    .collect()
            }),
            origins: origins.map(|extra| {
                LOOPBACK_ORIGINS
                    .iter()
                    .copied()
                    .chain(extra.iter().map(String::as_str))
                    .filter_map(AllowedOrigin::entry)
                    .collect()
            }),
        }
    }

    /// Whether a request to `uri` with `headers`, on a connection to `dialled`, may be served;
    /// else the refusal.
    fn admit(
        &self,
        uri: &Uri,
        headers: &HeaderMap,
        dialled: Option<IpAddr>,
    ) -> Result<(), (StatusCode, &'static str)> {
        if let Some(hosts) = &self.hosts {
            let host = host_of(uri, headers)?;
            let own_address = dialled.is_some_and(|ip| {
                host.host.parse::<IpAddr>().ok().map(canonical) == Some(canonical(ip))
            });
            if !own_address && !hosts.iter().any(|h| h.accepts(&host)) {
                tracing::warn!(host = ?host.host, "refused a request whose Host is not allowed (DNS rebinding?)");
                return Err((
                    StatusCode::FORBIDDEN,
                    "Forbidden: Host header is not allowed",
                ));
            }
        }
        let (Some(origins), Some(origin)) = (&self.origins, headers.get(header::ORIGIN)) else {
            return Ok(());
        };
        let origin = origin
            .to_str()
            .ok()
            .and_then(Origin::parse)
            .ok_or((StatusCode::FORBIDDEN, "Forbidden: Invalid Origin header"))?;
        if !origins.iter().any(|o| o.accepts(&origin)) {
            tracing::warn!("refused a request from a browser origin that is not allowed");
            return Err((
                StatusCode::FORBIDDEN,
                "Forbidden: Origin header is not allowed",
            ));
        }
        Ok(())
    }
}

/// An address as compared: an IPv4 address mapped into IPv6 (a dual-stack socket's) as itself.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The request's `Host`, or HTTP/2's `:authority` when there is none.
fn host_of(uri: &Uri, headers: &HeaderMap) -> Result<Authority, (StatusCode, &'static str)> {
    let bad = (StatusCode::BAD_REQUEST, "Bad Request: Invalid Host header");
    match headers.get(header::HOST) {
        Some(host) => {
            let host = host.to_str().map_err(|_| bad)?;
            let a = host
                .parse::<axum::http::uri::Authority>()
                .map_err(|_| bad)?;
            Ok(Authority::new(a.host(), a.port_u16()))
        }
        None => uri
            .authority()
            .map(|a| Authority::new(a.host(), a.port_u16()))
            .ok_or((StatusCode::BAD_REQUEST, "Bad Request: missing Host header")),
    }
}

/// The middleware in front of every route.
pub async fn check(State(allow): State<Arc<Allowlist>>, req: Request, next: Next) -> Response {
    let dialled = req
        .extensions()
        .get::<ConnectInfo<Connection>>()
        .and_then(|c| c.0.local)
        .map(|a| a.ip());
    match allow.admit(req.uri(), req.headers(), dialled) {
        Ok(()) => next.run(req).await,
        Err(refusal) => refusal.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn hosts_origins_and_the_dialled_address() {
        let list = Allowlist::new(
            Some(&["mcp.example.com".into(), "mcp.internal:8080".into()]),
            Some(&[
                "https://app.example.com:443".into(),
                "https://any.example:*".into(),
            ]),
        );
        let uri: Uri = "/metrics".parse().unwrap();
        let dialled: Option<IpAddr> = Some("10.0.0.5".parse().unwrap());
        for (pairs, ok) in [
            (&[("host", "localhost:8765")][..], true),
            (&[("host", "[::1]:8765")], true),
            (&[("host", "MCP.example.com")], true),
            (&[("host", "mcp.internal:8080")], true),
            (&[("host", "mcp.internal:9090")], false),
            (&[("host", "10.0.0.5:8765")], true),
            (&[("host", "10.0.0.6:8765")], false),
            (&[("host", "evil.example")], false),
            (
                &[("host", "localhost"), ("origin", "http://localhost:3000")],
                true,
            ),
            (
                &[("host", "localhost"), ("origin", "https://app.example.com")],
                true,
            ),
            (
                &[
                    ("host", "localhost"),
                    ("origin", "https://app.example.com:8443"),
                ],
                false,
            ),
            (
                &[("host", "localhost"), ("origin", "http://app.example.com")],
                false,
            ),
            (
                &[
                    ("host", "localhost"),
                    ("origin", "https://any.example:1234"),
                ],
                true,
            ),
            (&[("host", "localhost"), ("origin", "null")], false),
            (
                &[("host", "localhost"), ("origin", "https://evil.example")],
                false,
            ),
        ] {
            let got = list.admit(&uri, &headers(pairs), dialled).is_ok();
            assert_eq!(got, ok, "{pairs:?}");
        }
        // A dual-stack socket's address is its IPv4 one.
        let mapped: Option<IpAddr> = Some("::ffff:10.0.0.5".parse().unwrap());
        assert!(
            list.admit(&uri, &headers(&[("host", "10.0.0.5")]), mapped)
                .is_ok()
        );
        // No Host and no authority: 400.
        assert_eq!(
            list.admit(&uri, &HeaderMap::new(), dialled).unwrap_err().0,
            StatusCode::BAD_REQUEST
        );
        // `*` switches each check off.
        let open = Allowlist::new(None, None);
        let evil = headers(&[("host", "evil.example"), ("origin", "https://evil.example")]);
        assert!(open.admit(&uri, &evil, None).is_ok());
    }
}

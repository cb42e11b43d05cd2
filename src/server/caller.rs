//! Who is calling and from where, read from a request's context: the client the HTTP transport
//! identified, the trace the call continues, and whose threads it may continue.

use rmcp::RoleServer;
use rmcp::service::RequestContext;

use crate::admission::ClientId;
use crate::store::Owner;

/// The caller, as the HTTP transport identified it (`ClientId` in the request's extensions);
/// `stdio` otherwise.
pub(super) fn client_of(ctx: &RequestContext<RoleServer>) -> ClientId {
    ctx.extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.extensions.get::<ClientId>())
        .cloned()
        .unwrap_or_else(|| ClientId("stdio".into()))
}

/// The caller's trace a call continues (W3C Trace Context): the `traceparent` header (with its
/// `tracestate`) of the HTTP request carrying the call, else `_meta.traceparent` (and
/// `_meta.tracestate`, SEP-414) of the call itself. An invalid or repeated header is ignored,
/// as is an invalid `_meta` value: the call then starts a trace of its own.
pub(super) fn trace_parent_of(ctx: &RequestContext<RoleServer>) -> Option<crate::traces::Parent> {
    use crate::traces::Parent;
    let from_header = ctx
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| {
            let one = |name: &str| {
                let mut values = p.headers.get_all(name).iter();
                match (values.next(), values.next()) {
                    (Some(v), None) => v.to_str().ok(),
                    _ => None,
                }
            };
            Parent::parse(one("traceparent")?, one("tracestate"))
        });
    from_header.or_else(|| Parent::parse(ctx.meta.get_traceparent()?, ctx.meta.get_tracestate()))
}

/// Whose threads the caller may continue: the owner the HTTP transport put in the request's
/// extensions; `local` otherwise.
pub(super) fn owner_of(ctx: &RequestContext<RoleServer>) -> Owner {
    ctx.extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.extensions.get::<Owner>())
        .cloned()
        .unwrap_or_default()
}

//! Who may call `/mcp`: the bearer-token check, and the caller's identity for the per-client
//! limits.
//!
//! Tokens are compared as SHA-256 digests with `subtle`'s constant-time equality, against every
//! configured token without an early exit, so neither the content nor the length of a token
//! leaks through timing. A token is never logged, echoed or put in an error; a client is known
//! by its token's position (`token#2`), or by its peer address when no token is configured; the
//! threads and sessions it opens belong to its [`Owner`], a digest of its token (`local` without
//! tokens: then only loopback callers exist, all of them the local user).

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::Secret;
use crate::admission::ClientId;
use crate::store::Owner;

/// The accepted tokens, kept as digests.
pub struct Tokens {
    digests: Vec<[u8; 32]>,
    /// The owner of each token's threads and sessions, in the same order.
    owners: Vec<Owner>,
}

/// Why a request was not authenticated.
#[derive(Debug, PartialEq, Eq)]
pub enum Denied {
    /// No `Authorization: Bearer …` header.
    Missing,
    /// A bearer token that is not one of ours.
    Invalid,
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

impl Tokens {
    pub fn new(tokens: &[Secret]) -> Tokens {
        Tokens {
            digests: tokens
                .iter()
                .map(|t| digest(t.expose().as_bytes()))
                .collect(),
            owners: tokens
                .iter()
                .map(|t| Owner::for_token(t.expose().as_bytes()))
                .collect(),
        }
    }

    /// No token configured: every request is let through (loopback only; see `http::serve`).
    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    /// The index of the token `authorization` carries (the value of the `Authorization` header).
    pub fn check(&self, authorization: Option<&[u8]>) -> Result<usize, Denied> {
        let presented = authorization.and_then(bearer).ok_or(Denied::Missing)?;
        let presented = digest(presented);
        let mut found: Option<usize> = None;
        for (i, d) in self.digests.iter().enumerate() {
            // Every digest is compared; the branch below depends only on the outcome.
            if bool::from(d.ct_eq(&presented)) {
                found = Some(i);
            }
        }
        found.ok_or(Denied::Invalid)
    }

    /// Authenticates `req` and returns who is calling (for the limits) and whose threads and
    /// sessions it may use, or why not ([`unauthorized`] answers).
    pub fn identify(&self, req: &Request<Body>) -> Result<(ClientId, Owner), Denied> {
        if self.is_empty() {
            let peer = req
                .extensions()
                .get::<ConnectInfo<super::rebinding::Connection>>()
                .map_or_else(|| "unknown".to_string(), |c| c.0.peer.ip().to_string());
            return Ok((ClientId(format!("peer:{peer}")), Owner::local()));
        }
        let header = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes);
        self.check(header)
            .map(|i| (ClientId(format!("token#{}", i + 1)), self.owners[i].clone()))
    }
}

/// The token of an `Authorization: Bearer <token>` value (scheme case-insensitive).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let value = value.trim_ascii();
    let (scheme, rest) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") || rest.first() != Some(&b' ') {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

/// 401 with `WWW-Authenticate` (RFC 6750) and a JSON body saying what to send.
pub fn unauthorized(denied: Denied) -> Response {
    unauthorized_for(denied, "GEMINI_MCP_HTTP_TOKEN")
}

/// [`unauthorized`], naming `setting` as where the token is configured.
pub fn unauthorized_for(denied: Denied, setting: &str) -> Response {
    let (challenge, message) = match denied {
        Denied::Missing => (
            r#"Bearer realm="gemini-mcp""#,
            format!(
                "this server needs a bearer token: send `Authorization: Bearer <token>` with the token configured in the server's {setting}"
            ),
        ),
        Denied::Invalid => (
            r#"Bearer realm="gemini-mcp", error="invalid_token", error_description="the token is not valid for this server""#,
            "the bearer token is not valid for this server".to_string(),
        ),
    };
    let body = serde_json::json!({ "error": "unauthorized", "message": message });
    let mut resp = (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    resp.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(challenge),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_configured_bearer_tokens() {
        let tokens = Tokens::new(&[Secret::new("alpha-token"), Secret::new("beta")]);
        for (header, expected) in [
            (Some("Bearer alpha-token"), Ok(0)),
            (Some("bearer   beta "), Ok(1)),
            (Some("BEARER beta"), Ok(1)),
            (Some("Bearer alpha"), Err(Denied::Invalid)),
            (Some("Bearer alpha-token-and-more"), Err(Denied::Invalid)),
            (Some("Bearer "), Err(Denied::Missing)),
            (Some("Basic YWxwaGEtdG9rZW4="), Err(Denied::Missing)),
            (Some("Bearertoken"), Err(Denied::Missing)),
            (Some("alpha-token"), Err(Denied::Missing)),
            (None, Err(Denied::Missing)),
        ] {
            assert_eq!(
                tokens.check(header.map(str::as_bytes)),
                expected,
                "{header:?}"
            );
        }
    }

    #[test]
    fn a_refusal_names_the_scheme_and_never_the_token() {
        let tokens = Tokens::new(&[Secret::new("s3cret-value")]);
        let req = Request::builder()
            .header(header::AUTHORIZATION, "Bearer s3cret-valu")
            .body(Body::empty())
            .unwrap();
        let resp = unauthorized(tokens.identify(&req).unwrap_err());
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
        let challenge = resp.headers()[header::WWW_AUTHENTICATE].to_str().unwrap();
        assert!(challenge.starts_with("Bearer "), "{challenge}");
        assert!(challenge.contains("invalid_token"), "{challenge}");
        assert!(!challenge.contains("s3cret"), "{challenge}");
    }
}

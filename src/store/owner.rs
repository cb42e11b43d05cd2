//! Who a thread belongs to ([`Owner`]): `local`, or a digest of an HTTP client's bearer token.

use serde::{Deserialize, Serialize};

/// Who a thread belongs to: `local` (stdio, the command line, HTTP without tokens, and threads
/// stored before owners existed) or `token:<digest>` for an HTTP client, the digest being a
/// domain-separated SHA-256 of its token (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Owner(String);

impl Owner {
    /// The local user.
    pub fn local() -> Owner {
        Owner(LOCAL_OWNER.to_string())
    }

    /// An owner as stored; an empty or missing one is `local`.
    pub fn stored(raw: Option<&str>) -> Owner {
        match raw.map(str::trim) {
            None | Some("") => Owner::local(),
            Some(o) => Owner(o.to_string()),
        }
    }

    /// The HTTP client presenting `token`: a digest that cannot be turned back into the token.
    pub fn for_token(token: &[u8]) -> Owner {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(b"gemini-mcp thread owner\0");
        h.update(token);
        Owner(format!("token:{}", &hex::encode(h.finalize())[..32]))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_local(&self) -> bool {
        self.0 == LOCAL_OWNER
    }
}

impl Default for Owner {
    fn default() -> Self {
        Owner::local()
    }
}

/// The stored owner of local threads, and of threads stored before owners existed.
pub const LOCAL_OWNER: &str = "local";

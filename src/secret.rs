//! A value that must never be shown: API keys, tokens, a Redis URL with its password; and the
//! one way credentials written into a URL setting are taken out of it ([`without_user_info`]).

use std::fmt;

/// A value that must never reach a log, an error or a reply. `Debug` and `Display` print a
/// placeholder; the value is only reachable through [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }
    /// The raw value, for the one place that has to send it (an HTTP header, a Redis URL).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// A URL of a setting with its user info (`scheme://user:password@host`) taken out, and the
/// `Authorization` header value that carries it instead (HTTP Basic, as curl and the HTTP
/// clients send user info).
///
/// No HTTP client is handed a URL that holds credentials: what prints a URL it was handed —
/// its connection pool's lines at `trace` (hyper's `("http", user:password@host)`), its
/// errors, `doctor` — shows the authority whole, in shapes the value rules cannot tell from
/// other text. Taken out when the setting is read, the credentials exist only as a [`Secret`]
/// and in the header sent (marked sensitive).
#[derive(Debug)]
pub struct UserInfo {
    /// The URL without user info.
    pub url: reqwest::Url,
    /// `Basic <base64 of user:password>`, the user info's percent-encoding undone; `None`
    /// when the URL had none.
    pub authorization: Option<Secret>,
}

/// `raw` parsed, its user info taken out ([`UserInfo`]). The error never quotes `raw`.
pub fn without_user_info(raw: &str) -> Result<UserInfo, String> {
    let mut url = reqwest::Url::parse(raw.trim()).map_err(|e| e.to_string())?;
    let authorization = (!url.username().is_empty() || url.password().is_some()).then(|| {
        use base64::Engine as _;
        let pair = format!(
            "{}:{}",
            percent_decoded(url.username()),
            percent_decoded(url.password().unwrap_or(""))
        );
        Secret::new(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        ))
    });
    if authorization.is_some() {
        // Only a URL that cannot have user info (`mailto:`, `data:`) refuses these.
        url.set_username("")
            .and_then(|()| url.set_password(None))
            .map_err(|()| "this kind of URL cannot carry user info".to_string())?;
    }
    Ok(UserInfo { url, authorization })
}

/// `%XX` escapes undone (user info is percent-encoded in a URL); bytes that are not UTF-8 are
/// shown as U+FFFD.
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'?'));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_info_leaves_the_url_for_a_basic_header() {
        let u = without_user_info("https://gw:p%40ss%3Aw0rd@proxy.example:8443/gemini").unwrap();
        assert_eq!(u.url.as_str(), "https://proxy.example:8443/gemini");
        // base64 of `gw:p@ss:w0rd`.
        assert_eq!(
            u.authorization.as_ref().map(Secret::expose),
            Some("Basic Z3c6cEBzczp3MHJk")
        );
        let token_only = without_user_info("http://tok3n@collector:4318").unwrap();
        assert_eq!(token_only.url.as_str(), "http://collector:4318/");
        assert_eq!(
            token_only.authorization.as_ref().map(Secret::expose),
            Some("Basic dG9rM246")
        );
        let plain = without_user_info("http://collector:4318/v1/traces?x=1").unwrap();
        assert_eq!(plain.url.as_str(), "http://collector:4318/v1/traces?x=1");
        assert!(plain.authorization.is_none());
        let bad = without_user_info("http://u:S3cret@[::1").unwrap_err();
        assert!(!bad.contains("S3cret"), "{bad}");
        assert!(
            !format!("{:?}", without_user_info("http://u:S3cret@h").unwrap()).contains("S3cret")
        );
    }
}

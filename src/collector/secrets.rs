//! Secrets: files that are secrets by their name (never read), and secret-looking values in text
//! about to be sent (replaced by a marker before they leave the machine).
//!
//! Names: a fixed table of rules (`.env*`, `*.pem`, `*.key`, `id_rsa*`, credential stores, ...),
//! matched case-insensitively on the file name, plus the globs configured in
//! `GEMINI_MCP_SECRET_FILES` (see [`SecretNames`]).
//!
//! Values: well-known key and token shapes (private key blocks, AWS, GitHub, Google, Slack,
//! OpenAI/Anthropic, Stripe, JWTs, bearer tokens, passwords in URLs) and generic
//! `password = "..."`-style assignments. One combined regex finds candidates in a single pass;
//! the rule that matched is then identified on the candidate alone, so text without secrets costs
//! one scan. A replacement keeps the line count of what it replaces, so line numbers still match
//! the file. Generic assignments need a value that looks like a secret (no code punctuation,
//! letters and digits or enough entropy), so ordinary code such as `token = next_token()` is left
//! alone.

use std::path::Path;
use std::sync::LazyLock;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use regex::Regex;

/// The built-in secret-file rule a path's file name matches, if any.
pub fn name_rule(path: &Path) -> Option<&'static str> {
    let name = path.file_name()?.to_str()?.to_ascii_lowercase();
    let (stem, ext) = match name.rsplit_once('.') {
        Some((s, e)) if !s.is_empty() => (s, e),
        _ => (name.as_str(), ""),
    };
    const KEY_EXTS: &[(&str, &str)] = &[
        ("pem", "*.pem"),
        ("key", "*.key"),
        ("p12", "*.p12"),
        ("pfx", "*.pfx"),
        ("jks", "*.jks"),
        ("keystore", "*.keystore"),
        ("ppk", "*.ppk"),
        ("tfstate", "*.tfstate"),
    ];
    const STORES: &[&str] = &[
        ".netrc",
        "_netrc",
        ".pgpass",
        ".git-credentials",
        ".htpasswd",
        ".pypirc",
    ];
    const DATA_EXTS: &[&str] = &[
        "",
        "json",
        "yml",
        "yaml",
        "toml",
        "ini",
        "xml",
        "csv",
        "txt",
        "conf",
        "cfg",
        "env",
        "properties",
    ];
    if name.starts_with(".env") {
        return Some(".env*");
    }
    if let Some((_, rule)) = KEY_EXTS.iter().find(|(e, _)| *e == ext && stem != name) {
        return Some(rule);
    }
    if ["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"]
        .iter()
        .any(|p| name.starts_with(p))
    {
        return Some("id_rsa* (SSH private key)");
    }
    if let Some(store) = STORES.iter().find(|s| **s == name) {
        return Some(store);
    }
    if DATA_EXTS.contains(&ext) {
        if stem.ends_with("credentials") {
            return Some("credentials file");
        }
        if stem == "secret" || stem.ends_with("secrets") {
            return Some("secrets file");
        }
    }
    if ext == "json" && (stem.starts_with("client_secret") || stem.contains("service-account")) {
        return Some("Google client secret or service account key");
    }
    None
}

/// The built-in rules plus the configured globs.
#[derive(Debug, Clone)]
pub struct SecretNames {
    globs: GlobSet,
    patterns: Vec<String>,
}

impl SecretNames {
    /// `patterns` are globs matched against the file name and the path below its root.
    pub fn new(patterns: &[String]) -> Result<SecretNames, globset::Error> {
        let mut b = GlobSetBuilder::new();
        for p in patterns {
            b.add(GlobBuilder::new(p).case_insensitive(true).build()?);
        }
        Ok(SecretNames {
            globs: b.build()?,
            patterns: patterns.to_vec(),
        })
    }

    /// The rule `path` (absolute) matches; `relative` is its path below the root.
    pub fn rule(&self, path: &Path, relative: &Path) -> Option<String> {
        if let Some(r) = name_rule(path) {
            return Some(r.to_string());
        }
        if self.patterns.is_empty() {
            return None;
        }
        let name = path.file_name().map(Path::new)?;
        let hit = self
            .globs
            .matches(name)
            .into_iter()
            .chain(self.globs.matches(relative))
            .min()?;
        Some(format!("GEMINI_MCP_SECRET_FILES `{}`", self.patterns[hit]))
    }
}

/// A value-shape rule: a name for the marker, a pattern, the capture group to replace (0 = the
/// whole match) and a check the captured value must pass.
#[derive(Clone)]
struct Rule {
    kind: &'static str,
    re: Regex,
    group: usize,
    check: fn(&str) -> bool,
}

#[derive(Clone)]
struct Rules {
    any: Regex,
    each: Vec<Rule>,
}

/// A rule as written: marker name, pattern, group to replace, check on the value.
type RuleSpec = (&'static str, &'static str, usize, fn(&str) -> bool);

/// Shape rules, most specific first (the combined regex prefers earlier rules).
const RULES: &[RuleSpec] = &[
    (
        "private-key",
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?s:.)*?(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\z)",
        0,
        always,
    ),
    (
        "aws-access-key",
        r"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}(?-u:\b)",
        0,
        always,
    ),
    (
        "github-token",
        r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})",
        0,
        always,
    ),
    (
        "google-api-key",
        r"(?-u:\b)AIza[0-9A-Za-z_\-]{35}",
        0,
        always,
    ),
    (
        "google-oauth-token",
        r"(?-u:\b)ya29\.[0-9A-Za-z_\-]{20,}",
        0,
        always,
    ),
    (
        "slack-token",
        r"(?-u:\b)xox[abposr]-[0-9A-Za-z\-]{10,250}",
        0,
        letters_and_digits,
    ),
    (
        "slack-webhook",
        r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]{20,}",
        0,
        always,
    ),
    (
        "stripe-key",
        r"(?-u:\b)(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}",
        0,
        always,
    ),
    (
        "api-key",
        r"(?-u:\b)sk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
        0,
        letters_and_digits,
    ),
    (
        "jwt",
        r"(?-u:\b)eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        0,
        always,
    ),
    (
        "bearer-token",
        r"(?i)(?-u:\b)bearer[ \t]+([A-Za-z0-9_\-.=+/~]{20,})",
        1,
        letters_and_digits,
    ),
    (
        "url-password",
        r"(?i)(?-u:\b)[a-z][a-z0-9+.\-]*://[^\s/:@'\x22]*:([^\s/@'\x22]{3,})@",
        1,
        not_placeholder,
    ),
    (
        "password",
        r#"(?i)[a-z0-9_.\-]*(?:password|passwd|pwd|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|credential)[a-z0-9_.\-]*["']?[ \t]*(?::=|=>|:|=)[ \t]*(?:"([A-Za-z0-9!#%&+\-./:=?@_~]{6,200})"|'([A-Za-z0-9!#%&+\-./:=?@_~]{6,200})')"#,
        FIRST_GROUP,
        secret_looking,
    ),
    (
        "password",
        r#"(?i)[a-z0-9_.\-]*(?:password|passwd|pwd|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|credential)[a-z0-9_.\-]*[ \t]*(?::=|=>|:|=)[ \t]*([A-Za-z0-9!%&+\-./=?@_~]{8,200})[ \t]*(?:[,;]|\r?\n|\z)"#,
        1,
        unquoted_secret_looking,
    ),
];

/// Replace the first capture group that took part in the match.
const FIRST_GROUP: usize = usize::MAX;

fn always(_: &str) -> bool {
    true
}

fn letters_and_digits(v: &str) -> bool {
    v.bytes().any(|b| b.is_ascii_digit()) && v.bytes().any(|b| b.is_ascii_alphabetic())
}

fn not_placeholder(v: &str) -> bool {
    !(v.starts_with('$')
        || v.starts_with('<')
        || v.starts_with('{')
        || v.bytes().all(|b| b == b'*'))
}

/// A generic assigned value that looks like a secret: not a URL or a path, and either letters
/// and digits mixed or high entropy.
fn secret_looking(v: &str) -> bool {
    if v.contains("://") || v.starts_with('/') || v.starts_with('.') {
        return false;
    }
    let lower = v.to_ascii_lowercase();
    if ["true", "false", "null", "none", "required", "optional"].contains(&lower.as_str()) {
        return false;
    }
    letters_and_digits(v) || entropy(v) >= 3.0
}

/// An unquoted value could be an identifier in code (`token = self.tokenizer`): it must mix
/// letters and digits.
fn unquoted_secret_looking(v: &str) -> bool {
    secret_looking(v) && letters_and_digits(v)
}

/// Shannon entropy in bits per byte.
fn entropy(v: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in v.bytes() {
        counts[usize::from(b)] += 1;
    }
    let n = v.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

static COMPILED: LazyLock<Result<Rules, regex::Error>> = LazyLock::new(|| {
    let mut each = Vec::with_capacity(RULES.len());
    for (kind, pattern, group, check) in RULES {
        each.push(Rule {
            kind,
            re: Regex::new(&format!("^(?:{pattern})"))?,
            group: *group,
            check: *check,
        });
    }
    let any = RULES
        .iter()
        .map(|(_, p, _, _)| format!("(?:{p})"))
        .collect::<Vec<_>>()
        .join("|");
    Ok(Rules {
        any: Regex::new(&any)?,
        each,
    })
});

thread_local! {
    /// Each thread's own copy: a regex's match-time caches sit in a pool that only its first
    /// user reaches without a lock, so threads sharing one regex contend.
    static LOCAL: Option<Rules> = COMPILED.as_ref().ok().cloned();
}

/// Replaces secret-looking values; returns the text and how many were replaced. Fails closed:
/// if the rules could not be compiled (a bug caught by the tests), the whole text is withheld.
pub fn redact(text: &str) -> (String, usize) {
    LOCAL.with(|rules| match rules {
        Some(rules) => redact_with(rules, text),
        None => {
            tracing::error!("secret rules do not compile; withholding text");
            let lines = text.matches('\n').count();
            (format!("[REDACTED:unavailable]{}", "\n".repeat(lines)), 1)
        }
    })
}

fn redact_with(rules: &Rules, text: &str) -> (String, usize) {
    if !rules.any.is_match(text) {
        return (text.to_string(), 0);
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut count = 0;
    let mut at = 0;
    while let Some(m) = rules.any.find_at(text, at) {
        at = m.end().max(m.start() + 1);
        // Which rule matched: the first one that matches here (anchored, so each try is short).
        let here = &text[m.start()..];
        let Some((rule, caps)) = rules
            .each
            .iter()
            .find_map(|r| r.re.captures(here).map(|c| (r, c)))
        else {
            continue;
        };
        let value = if rule.group == FIRST_GROUP {
            caps.iter().skip(1).flatten().next()
        } else {
            caps.get(rule.group)
        };
        let Some(value) = value else { continue };
        let (start, end) = (m.start() + value.start(), m.start() + value.end());
        if start < copied {
            continue;
        }
        if !(rule.check)(value.as_str()) {
            // A rejected candidate (a generic `name = value` whose value does not look secret)
            // may cover a specific shape inside it, e.g. `aws_access_key_id=AKIA…`: look
            // again from the next character instead of skipping the whole candidate.
            at = m.start() + here.chars().next().map_or(1, char::len_utf8);
            continue;
        }
        out.push_str(&text[copied..start]);
        out.push_str("[REDACTED:");
        out.push_str(rule.kind);
        out.push(']');
        for _ in 0..memchr::memchr_iter(b'\n', value.as_str().as_bytes()).count() {
            out.push('\n');
        }
        copied = end;
        count += 1;
    }
    out.push_str(&text[copied..]);
    (out, count)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn the_rules_compile() {
        assert!(COMPILED.is_ok(), "{:?}", COMPILED.as_ref().err());
    }

    #[test]
    fn secret_names() {
        for (name, rule) in [
            (".env", Some(".env*")),
            (".env.production", Some(".env*")),
            (".ENV.local", Some(".env*")),
            ("server.pem", Some("*.pem")),
            ("tls.KEY", Some("*.key")),
            ("id_rsa", Some("id_rsa* (SSH private key)")),
            ("id_ed25519.pub", Some("id_rsa* (SSH private key)")),
            (".netrc", Some(".netrc")),
            (".git-credentials", Some(".git-credentials")),
            ("credentials", Some("credentials file")),
            ("credentials.json", Some("credentials file")),
            ("gcp-credentials.json", Some("credentials file")),
            ("secrets.yaml", Some("secrets file")),
            (
                "client_secret_123.json",
                Some("Google client secret or service account key"),
            ),
            ("terraform.tfstate", Some("*.tfstate")),
            // Ordinary source files that merely talk about secrets.
            ("credentials.py", None),
            ("secrets.rs", None),
            ("key.rs", None),
            ("keys.json", None),
            ("main.rs", None),
            ("environment.md", None),
            ("pem", None),
            ("README.md", None),
        ] {
            assert_eq!(name_rule(Path::new(name)), rule, "{name}");
        }
        assert_eq!(name_rule(Path::new("/a/b/.env")), Some(".env*"));
    }

    #[test]
    fn configured_secret_globs() {
        let names = SecretNames::new(&["*.secret".into(), "vault/**".into()]).unwrap();
        let r = names.rule(Path::new("/p/a/b.SECRET"), Path::new("a/b.SECRET"));
        assert_eq!(r.as_deref(), Some("GEMINI_MCP_SECRET_FILES `*.secret`"));
        let r = names.rule(Path::new("/p/vault/x.txt"), Path::new("vault/x.txt"));
        assert_eq!(r.as_deref(), Some("GEMINI_MCP_SECRET_FILES `vault/**`"));
        assert_eq!(names.rule(Path::new("/p/a.txt"), Path::new("a.txt")), None);
        assert!(
            names
                .rule(Path::new("/p/.env"), Path::new(".env"))
                .is_some()
        );
        assert!(SecretNames::new(&["a[".into()]).is_err());
    }

    /// Realistic fake secrets (random-looking, right shapes; none is a real credential).
    pub const FAKE: &[(&str, &str)] = &[
        (
            "private-key",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\nVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n-----END RSA PRIVATE KEY-----",
        ),
        (
            "private-key",
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----",
        ),
        ("aws-access-key", "AKIAQ3EGVP7MZL2XK4RT"),
        ("github-token", "ghp_4Kx9Qm2Lp7Zr8Wv3Ty6Ub1Nc5Hd0Jf2Ga8Se"),
        (
            "github-token",
            "github_pat_11ABCDE2Y0q8ZkLmNoPqRs_TuVwXyZ0123456789abcdefGHIJKLmnopQRstu",
        ),
        ("google-api-key", "AIzaSyD3x7Kq9-LmZ2pR8vT1wY4uB6nC0eF5gHj"),
        (
            "slack-token",
            "xoxb-2943872165-4820917364815-Zq8Lm3Pw7Xr2Tn5Vb9Ky1Hc4",
        ),
        (
            "api-key",
            "sk-proj-Q7mZ2xL9pR4vT8wY1uB6nC3eF5gHjK0dS2aL7qW9eR4tY6uI8oP1",
        ),
        (
            "api-key",
            "sk-ant-api03-Zx8Cv7Bn6Mq5Lw4Ke3Jr2Ht1Gy0Fu9Di8So7Ap6Qz5Wx4Ec3Rv2Tb1Yn0Um9Ik8Ol7Pp6-AbCdEf",
        ),
        (
            "jwt",
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkphbmUifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        ),
        ("stripe-key", "sk_live_51Hx7Qm2Lp7Zr8Wv3Ty6Ub1Nc5"),
    ];

    #[test]
    fn known_shapes_are_redacted_and_counted() {
        for (kind, secret) in FAKE {
            let text = format!("before\nconst X = \"{secret}\";\nafter\n");
            let (out, n) = redact(&text);
            assert_eq!(n, 1, "{kind}: {out}");
            assert!(!out.contains(secret), "{kind} leaked: {out}");
            assert!(out.contains(&format!("[REDACTED:{kind}]")), "{kind}: {out}");
            assert_eq!(
                out.lines().count(),
                text.lines().count(),
                "{kind}: line count changed"
            );
            assert!(
                out.starts_with("before\n") && out.ends_with("after\n"),
                "{out}"
            );
        }
    }

    #[test]
    fn generic_assignments_are_redacted() {
        for line in [
            "DB_PASSWORD=s3cr3tP4ssw0rd",
            "password: \"correct-horse-battery-staple\"",
            "secret: 'Xk29dLq7Pw'",
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "\"api_key\": \"f8a9c2d1e4b7a6c5\"",
            "export GITHUB_TOKEN=abc123def456ghi789",
            "client.login(password=\"hunter2hunter\")",
            "redis://:pw0rd@cache.internal:6379/0",
            "Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        ] {
            let (out, n) = redact(line);
            assert_eq!(n, 1, "{line} -> {out}");
            assert!(out.contains("[REDACTED:"), "{line} -> {out}");
        }
        // The key stays, so the reader still sees what was there.
        let (out, _) = redact("DB_PASSWORD=s3cr3tP4ssw0rd\n");
        assert_eq!(out, "DB_PASSWORD=[REDACTED:password]\n");
    }

    #[test]
    fn ordinary_code_is_left_alone() {
        for line in [
            "let token = next_token();",
            "max_tokens = 4096",
            "password = get_password()",
            "self.password = password",
            "api_key: Option<Secret>,",
            "pub secret_globs: Vec<String>,",
            "token_type = \"bearer\"",
            "password_file = \"/etc/app/password.txt\"",
            "token_url = \"https://oauth2.googleapis.com/token\"",
            "TOKEN_RE = re.compile(r\"[a-z]+\")",
            "author = \"Jane Doe <jane@example.com>\"",
            "if secret is None: return",
            "password: str = Field(default=None)",
            "key = \"AIzaSyTESTKEY-never-printed\"",
            "the sk-learn library",
            "password = \"xxxxxxxx\"",
            "api_key = ${API_KEY}",
        ] {
            let (out, n) = redact(line);
            assert_eq!((out.as_str(), n), (line, 0), "{line}");
        }
    }

    #[test]
    fn an_unterminated_private_key_is_redacted_to_the_end() {
        let text = "a\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nMIIEvQ\n";
        let (out, n) = redact(text);
        assert_eq!(n, 1);
        assert_eq!(out, "a\n[REDACTED:private-key]\n\n\n");
    }

    #[test]
    fn several_secrets_are_all_counted() {
        let text = FAKE
            .iter()
            .map(|(_, s)| format!("x = {s}\n"))
            .collect::<String>();
        let (out, n) = redact(&text);
        assert_eq!(n, FAKE.len(), "{out}");
        for (_, s) in FAKE {
            assert!(!out.contains(s));
        }
    }
}

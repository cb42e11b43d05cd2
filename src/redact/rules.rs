//! The value-shape rules of [`super`] as a table: each rule's marker name, pattern, the part it
//! replaces and the check the value must pass. SECURITY.md lists every rule; keep the two in step.

/// A rule as written: marker name, pattern, group to replace, check on the value.
pub(super) type RuleSpec = (&'static str, &'static str, usize, fn(&str) -> bool);

/// Shape rules, most specific first (where two overlap, the marker names the earlier rule).
/// Runs of name characters are bounded (`{0,64}`), so a candidate is short and finding which
/// rule it is costs little even inside a megabyte of identifier characters.
/// SECURITY.md lists them; keep the two in step.
pub(super) const RULES: &[RuleSpec] = &[
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
        "gitlab-token",
        r"(?-u:\b)(?:glpat|gldt|glrt|glptt|glsoat|glft|glcbt)-[0-9A-Za-z_\-]{20,255}",
        0,
        always,
    ),
    (
        "huggingface-token",
        r"(?-u:\b)hf_[A-Za-z0-9]{30,255}(?-u:\b)",
        0,
        mixed_case,
    ),
    (
        "google-api-key",
        r"(?-u:\b)AIza[0-9A-Za-z_\-]{35}",
        0,
        always,
    ),
    (
        "google-oauth-token",
        r"(?-u:\b)ya29\.[0-9A-Za-z_\-.]+",
        0,
        always,
    ),
    (
        "google-oauth-client-secret",
        r"(?-u:\b)GOCSPX-[0-9A-Za-z_\-]{20,255}",
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
        "sendgrid-key",
        r"(?-u:\b)SG\.[0-9A-Za-z_\-]{16,32}\.[0-9A-Za-z_\-]{30,64}",
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
        "kubeconfig-client-data",
        r#"(?-u:\b)client-(?:key|certificate)-data["']?[ \t]*:[ \t]*["']?([A-Za-z0-9+/]{16,}={0,2})"#,
        1,
        always,
    ),
    (
        "token",
        r#"(?m)(?:^|[ \t"'{,+\-])(?:id-|access-|refresh-)?token["']?[ \t]*:[ \t]*(?:"([A-Za-z0-9._~+/=\-]{16,})"|'([A-Za-z0-9._~+/=\-]{16,})'|([A-Za-z0-9._~+/=\-]{16,})[ \t]*\r?$)"#,
        FIRST_GROUP,
        unquoted_secret_looking,
    ),
    (
        "docker-auth",
        r#""auth"[ \t]*:[ \t]*"([A-Za-z0-9+/]{8,}={0,2})""#,
        1,
        basic_credentials,
    ),
    (
        "docker-auth",
        r#""(?:identitytoken|registrytoken)"[ \t]*:[ \t]*"([A-Za-z0-9._~+/=\-]{16,})""#,
        1,
        always,
    ),
    (
        "azure-key",
        r"(?i)(?-u:\b)(?:AccountKey|SharedAccessKey)[ \t]*=[ \t]*([A-Za-z0-9+/]{20,}={0,2})",
        1,
        always,
    ),
    (
        "basic-auth",
        r"(?i)(?-u:\b)basic[ \t]+([A-Za-z0-9+/]{8,}={0,2})",
        1,
        basic_credentials,
    ),
    (
        "bearer-token",
        r"(?i)(?-u:\b)bearer[ \t]+([A-Za-z0-9_\-.=+/~]{16,})",
        1,
        always,
    ),
    (
        "url-password",
        r"(?i)(?-u:\b)[a-z][a-z0-9+.\-]{0,31}://[^\s/:@'\x22]{0,256}:([^\s/@'\x22]{3,256})@",
        1,
        not_placeholder,
    ),
    (
        "password",
        r#"(?i)[a-z0-9_.\-]{0,64}(?:password|passwd|pwd|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|credential)[a-z0-9_.\-]{0,64}["']?[ \t]*(?::=|=>|:|=)[ \t]*(?:"([A-Za-z0-9!#%&+\-./:=?@_~]{6,200})"|'([A-Za-z0-9!#%&+\-./:=?@_~]{6,200})')"#,
        FIRST_GROUP,
        secret_looking,
    ),
    (
        "password",
        r#"(?i)[a-z0-9_.\-]{0,64}(?:password|passwd|pwd|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|credential)[a-z0-9_.\-]{0,64}[ \t]*(?::=|=>|:|=)[ \t]*([A-Za-z0-9!%&+\-./=?@_~]{8,200})[ \t]*(?:[,;]|\r?\n|\z)"#,
        1,
        unquoted_secret_looking,
    ),
];

/// Replace the first capture group that took part in the match.
pub(super) const FIRST_GROUP: usize = usize::MAX;

fn always(_: &str) -> bool {
    true
}

fn letters_and_digits(v: &str) -> bool {
    v.bytes().any(|b| b.is_ascii_digit()) && v.bytes().any(|b| b.is_ascii_alphabetic())
}

/// Random-looking letters: upper and lower case mixed (an identifier seldom is, past 30).
fn mixed_case(v: &str) -> bool {
    v.bytes().any(|b| b.is_ascii_uppercase()) && v.bytes().any(|b| b.is_ascii_lowercase())
}

/// HTTP Basic credentials: base64 of `user:password`.
fn basic_credentials(v: &str) -> bool {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(v)
        .is_ok_and(|raw| raw.contains(&b':') && raw.iter().all(|b| !b.is_ascii_control()))
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

//! The value-shape rules of [`super`] as a table: each rule's marker name, pattern, the part it
//! replaces, the check the value must pass, and its keywords. SECURITY.md lists every rule; keep
//! the two in step.

/// A rule as written.
pub(super) struct Spec {
    /// The marker's name: `[REDACTED:<kind>]`.
    pub kind: &'static str,
    pub pattern: &'static str,
    /// The capture group replaced (0 = the whole match, [`FIRST_GROUP`]).
    pub group: usize,
    /// The pattern begins `(?:(?-u:\b)|_)` and what follows never begins with `_`: a match
    /// beginning with `_` took it as glue, which is not part of the match.
    ///
    /// How a token glued to a name by `_` (`key_AKIA…`, `x_ghp_…`) is found: a rule's leading
    /// word boundary `(?-u:\b)` does not see it (`_` is a word character), so the patterns of
    /// the tokens with a distinctive prefix begin with a word boundary or one `_` instead, and
    /// say so here: the search counts the `_` outside the match (`search::whole_and_value`), so
    /// it stays, and a glued token is a candidate like a free-standing one (a rejected one is
    /// stepped over whole, as before). No capture group marks it: reading a match's groups
    /// costs a pass of a slower engine over the match, which made a megabyte-long rejected
    /// candidate three times slower. Not for `hf_` (model code names things
    /// `convert_hf_GPTNeoXForCausalLM…`), nor for the words `basic` and `bearer`
    /// (`use_bearer`), where a name before the word is a name.
    pub glue: bool,
    /// What the replaced value must pass.
    pub check: fn(&str) -> bool,
    /// Literals every match of the pattern contains, in the pattern's case (any case when the
    /// pattern starts with `(?i)`). Text holding none of them cannot match, so the rule is not
    /// run on it (`super::keywords`).
    pub keywords: &'static [&'static str],
    /// How far from a keyword a match can lie.
    pub reach: Reach,
}

/// Where a rule's match lies, given a keyword in it: what its search must cover.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Reach {
    /// Within the keyword's line: no match holds a `\n` but as its last byte (the patterns'
    /// classes and repetitions exclude it). The rule is searched on those lines only.
    Line,
    /// Starting at the keyword itself (the pattern begins with it), however far it runs: the
    /// rule is tried, anchored, at each keyword.
    FromKeyword,
}

/// The generic `name = value` rules' keywords: their alternation of names, spelled out.
const GENERIC_KEYWORDS: &[&str] = &[
    "passw", // password, passwd
    "pwd",
    "secret",
    "token",
    "apikey",
    "api_key",
    "api-key",
    "accesskey",
    "access_key",
    "access-key",
    "privatekey",
    "private_key",
    "private-key",
    "credential",
];

/// Shape rules, most specific first (where two overlap, the marker names the earlier rule).
/// Runs of name characters are bounded (`{0,64}`), so a candidate is short and finding which
/// rule it is costs little even inside a megabyte of identifier characters.
/// SECURITY.md lists them; keep the two in step.
pub(super) const RULES: &[Spec] = &[
    Spec {
        kind: "private-key",
        pattern: r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?s:.)*?(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\z)",
        group: 0,
        check: always,
        glue: false,
        keywords: &["-----BEGIN"],
        reach: Reach::FromKeyword,
    },
    Spec {
        kind: "aws-access-key",
        pattern: r"(?:(?-u:\b)|_)((?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16})(?:(?-u:\b)|_)",
        group: 1,
        check: always,
        glue: true,
        keywords: &[
            "AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA",
        ],
        reach: Reach::Line,
    },
    Spec {
        kind: "github-token",
        pattern: r"(?:(?-u:\b)|_)(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})",
        group: 0,
        check: always,
        glue: true,
        keywords: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
        reach: Reach::Line,
    },
    Spec {
        kind: "gitlab-token",
        pattern: r"(?:(?-u:\b)|_)(?:glpat|gldt|glrt|glptt|glsoat|glft|glcbt)-[0-9A-Za-z_\-]{20,255}",
        group: 0,
        check: always,
        glue: true,
        keywords: &[
            "glpat-", "gldt-", "glrt-", "glptt-", "glsoat-", "glft-", "glcbt-",
        ],
        reach: Reach::Line,
    },
    Spec {
        kind: "huggingface-token",
        pattern: r"(?-u:\b)hf_[A-Za-z0-9]{30,255}(?-u:\b)",
        group: 0,
        check: mixed_case,
        glue: false,
        keywords: &["hf_"],
        reach: Reach::Line,
    },
    Spec {
        kind: "google-api-key",
        pattern: r"(?:(?-u:\b)|_)AIza[0-9A-Za-z_\-]{35}",
        group: 0,
        check: always,
        glue: true,
        keywords: &["AIza"],
        reach: Reach::Line,
    },
    Spec {
        kind: "google-oauth-token",
        pattern: r"(?:(?-u:\b)|_)ya29\.[0-9A-Za-z_\-.]+",
        group: 0,
        check: always,
        glue: true,
        keywords: &["ya29."],
        reach: Reach::Line,
    },
    Spec {
        kind: "google-oauth-client-secret",
        pattern: r"(?:(?-u:\b)|_)GOCSPX-[0-9A-Za-z_\-]{20,255}",
        group: 0,
        check: always,
        glue: true,
        keywords: &["GOCSPX-"],
        reach: Reach::Line,
    },
    Spec {
        kind: "slack-token",
        pattern: r"(?:(?-u:\b)|_)xox[abposr]-[0-9A-Za-z\-]{10,250}",
        group: 0,
        check: letters_and_digits,
        glue: true,
        keywords: &["xox"],
        reach: Reach::Line,
    },
    Spec {
        kind: "slack-webhook",
        pattern: r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]{20,}",
        group: 0,
        check: always,
        glue: false,
        keywords: &["https://hooks.slack.com/services/"],
        reach: Reach::Line,
    },
    Spec {
        kind: "sendgrid-key",
        pattern: r"(?:(?-u:\b)|_)SG\.[0-9A-Za-z_\-]{16,32}\.[0-9A-Za-z_\-]{30,64}",
        group: 0,
        check: always,
        glue: true,
        keywords: &["SG."],
        reach: Reach::Line,
    },
    Spec {
        kind: "stripe-key",
        pattern: r"(?:(?-u:\b)|_)(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}",
        group: 0,
        check: always,
        glue: true,
        keywords: &["sk_live_", "sk_test_", "rk_live_", "rk_test_"],
        reach: Reach::Line,
    },
    Spec {
        kind: "api-key",
        pattern: r"(?:(?-u:\b)|_)sk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
        group: 0,
        check: letters_and_digits,
        glue: true,
        keywords: &["sk-"],
        reach: Reach::Line,
    },
    Spec {
        kind: "jwt",
        pattern: r"(?:(?-u:\b)|_)eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        group: 0,
        check: always,
        glue: true,
        keywords: &["eyJ"],
        reach: Reach::Line,
    },
    Spec {
        kind: "kubeconfig-client-data",
        pattern: r#"(?:(?-u:\b)|_)client-(?:key|certificate)-data["']?[ \t]*:[ \t]*["']?([A-Za-z0-9+/]{16,}={0,2})"#,
        group: 1,
        check: always,
        glue: true,
        keywords: &["client-key-data", "client-certificate-data"],
        reach: Reach::Line,
    },
    Spec {
        kind: "token",
        pattern: r#"(?m)(?:^|[ \t"'{,+\-])(?:id-|access-|refresh-)?token["']?[ \t]*:[ \t]*(?:"([A-Za-z0-9._~+/=\-]{16,})"|'([A-Za-z0-9._~+/=\-]{16,})'|([A-Za-z0-9._~+/=\-]{16,})[ \t]*\r?$)"#,
        group: FIRST_GROUP,
        check: unquoted_secret_looking,
        glue: false,
        keywords: &["token"],
        reach: Reach::Line,
    },
    Spec {
        kind: "docker-auth",
        pattern: r#""auth"[ \t]*:[ \t]*"([A-Za-z0-9+/]{8,}={0,2})""#,
        group: 1,
        check: basic_credentials,
        glue: false,
        keywords: &["\"auth\""],
        reach: Reach::Line,
    },
    Spec {
        kind: "docker-auth",
        pattern: r#""(?:identitytoken|registrytoken)"[ \t]*:[ \t]*"([A-Za-z0-9._~+/=\-]{16,})""#,
        group: 1,
        check: always,
        glue: false,
        keywords: &["\"identitytoken\"", "\"registrytoken\""],
        reach: Reach::Line,
    },
    Spec {
        kind: "azure-key",
        pattern: r"(?i)(?:(?-u:\b)|_)(?:AccountKey|SharedAccessKey)[ \t]*=[ \t]*([A-Za-z0-9+/]{20,}={0,2})",
        group: 1,
        check: always,
        glue: true,
        keywords: &["accountkey", "sharedaccesskey"],
        reach: Reach::Line,
    },
    Spec {
        kind: "basic-auth",
        pattern: r"(?i)(?-u:\b)basic[ \t]+([A-Za-z0-9+/]{8,}={0,2})",
        group: 1,
        check: basic_credentials,
        glue: false,
        keywords: &["basic"],
        reach: Reach::Line,
    },
    Spec {
        kind: "bearer-token",
        pattern: r"(?i)(?-u:\b)bearer[ \t]+([A-Za-z0-9_\-.=+/~]{16,})",
        group: 1,
        check: always,
        glue: false,
        keywords: &["bearer"],
        reach: Reach::Line,
    },
    Spec {
        kind: "url-password",
        pattern: r"(?i)(?:(?-u:\b)|_)[a-z][a-z0-9+.\-]{0,31}://[^\s/:@'\x22]{0,256}:([^\s/@'\x22]{3,256})@",
        group: 1,
        check: not_placeholder,
        glue: true,
        keywords: &["://"],
        reach: Reach::Line,
    },
    Spec {
        kind: "password",
        pattern: r#"(?i)[a-z0-9_.\-]{0,64}(?:password|passwd|pwd|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|credential)[a-z0-9_.\-]{0,64}["']?[ \t]*(?::=|=>|:|=)[ \t]*(?:"([A-Za-z0-9!#%&+\-./:=?@_~]{6,200})"|'([A-Za-z0-9!#%&+\-./:=?@_~]{6,200})')"#,
        group: FIRST_GROUP,
        check: secret_looking,
        glue: false,
        keywords: GENERIC_KEYWORDS,
        reach: Reach::Line,
    },
    Spec {
        kind: "password",
        pattern: r#"(?i)[a-z0-9_.\-]{0,64}(?:password|passwd|pwd|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|credential)[a-z0-9_.\-]{0,64}[ \t]*(?::=|=>|:|=)[ \t]*([A-Za-z0-9!%&+\-./=?@_~]{8,200})[ \t]*(?:[,;]|\r?\n|\z)"#,
        group: 1,
        check: unquoted_secret_looking,
        glue: false,
        keywords: GENERIC_KEYWORDS,
        reach: Reach::Line,
    },
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

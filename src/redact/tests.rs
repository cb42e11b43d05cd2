//! The redaction rules as a specification: the shapes each rule takes and leaves.

use super::*;

#[test]
fn the_rules_compile() {
    assert!(COMPILED.is_ok(), "{:?}", COMPILED.as_ref().err());
    // A rule takes glue exactly when its pattern begins with it (after its flags).
    for spec in RULES {
        let body = spec.pattern.trim_start_matches("(?i)");
        assert_eq!(
            spec.glue,
            body.starts_with(r"(?:(?-u:\b)|_)"),
            "{}",
            spec.kind
        );
    }
}

/// One body for every part: what the Gemini CLI backend's messages were scrubbed of (short
/// OAuth tokens, bearer values of letters alone) is redacted everywhere, and a message is
/// scrubbed by the same rules as a file.
#[test]
fn messages_and_files_share_the_rules() {
    let text = "token ya29.a0AfH6SMBxyz and Bearer abcdefghijklmnopqrstu and \
                AIzaSyA1234567890abcdefghijklmnopqrstuv";
    let (redacted, n) = redact(text);
    assert_eq!(n, 3, "{redacted}");
    assert!(
        redacted.contains("[REDACTED:google-oauth-token]"),
        "{redacted}"
    );
    assert!(redacted.contains("[REDACTED:bearer-token]"), "{redacted}");
    let scrubbed = scrub(text);
    assert_eq!(
        scrubbed,
        "token [redacted] and Bearer [redacted] and [redacted]"
    );
}

#[test]
fn key_blocks_are_found_by_line() {
    let text = "a\n-----BEGIN PRIVATE KEY-----\nb1\nb2\n-----END PRIVATE KEY-----\nc\n\
                -----BEGIN OPENSSH PRIVATE KEY-----\nd1\n";
    assert_eq!(key_blocks(text), vec![(2, 5), (7, 8)]);
    let closed_at_eof = "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----";
    assert_eq!(key_blocks(closed_at_eof), vec![(1, 3)]);
    assert_eq!(key_blocks("no keys here\n"), vec![]);
}

#[test]
fn diff_lines_inside_key_blocks_are_redacted_on_both_sides() {
    // Old: key on lines 2-9; new: key on lines 2-10 (one line added after line 5, line 7
    // removed, line 8 changed).
    let patch = "diff --git a/k.rs b/k.rs\n--- a/k.rs\n+++ b/k.rs\n\
                 @@ -3,7 +3,8 @@ fn x\n b1\n b2\n b3\n+ADDED\n b4\n-b5\n-b6\n+b6new\n+b6more\n b7\n\
                 @@ -20,2 +21,2 @@\n-old\n+new\n\\ No newline at end of file\n";
    let (out, n) = redact_diff_keys(patch, &[(2, 9)], &[(2, 10)]);
    assert_eq!(
        out,
        "diff --git a/k.rs b/k.rs\n--- a/k.rs\n+++ b/k.rs\n\
         @@ -3,7 +3,8 @@\n [REDACTED:private-key]\n [REDACTED:private-key]\n \
         [REDACTED:private-key]\n+[REDACTED:private-key]\n [REDACTED:private-key]\n\
         -[REDACTED:private-key]\n-[REDACTED:private-key]\n+[REDACTED:private-key]\n\
         +[REDACTED:private-key]\n [REDACTED:private-key]\n\
         @@ -20,2 +21,2 @@\n-old\n+new\n\\ No newline at end of file\n"
    );
    assert_eq!(n, 1);
    // Only the new side has a key: a removed line outside it stays, context inside goes.
    let patch = "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n";
    let (out, n) = redact_diff_keys(patch, &[], &[(2, 3)]);
    assert_eq!(
        out,
        "@@ -1,3 +1,3 @@\n a\n-b\n+[REDACTED:private-key]\n [REDACTED:private-key]\n"
    );
    assert_eq!(n, 1);
    assert_eq!(redact_diff_keys(patch, &[], &[]), (patch.to_string(), 0));
}

#[test]
fn a_rejected_candidate_hides_no_secret() {
    // The generic rule rejects the value, yet the shapes inside and after it are found.
    for (text, kind) in [
        ("aws_access_key_id=AKIAQ3EGVP7MZL2XK4RT\n", "aws-access-key"),
        (
            "token_url=https://x.io/t,AKIAQ3EGVP7MZL2XK4RT\n",
            "aws-access-key",
        ),
        ("password=\"required\" secret=\"hunter2hunter\"", "password"),
        (
            "aaaaaaaaaaaaaaaapassword=\"required\" api_key=\"f8a9c2d1e4b7a6c5\"",
            "password",
        ),
    ] {
        let (out, n) = redact(text);
        assert_eq!(n, 1, "{text} -> {out}");
        assert!(
            out.contains(&format!("[REDACTED:{kind}]")),
            "{text} -> {out}"
        );
    }
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
    ("gitlab-token", "glpat-Zq8Lm3Pw7Xr2Tn5Vb9Ky"),
    ("huggingface-token", "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"),
    (
        "google-oauth-client-secret",
        "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",
    ),
    (
        "sendgrid-key",
        "SG.Zq8Lm3Pw7Xr2Tn5Vb9Ky1H.c4AbCdEf6Gh8Ij0Kl2Mn4Op6Qr8St0Uv2Wx4Yz6Ab8Cd",
    ),
    (
        "azure-key",
        "AccountKey=Zq8Lm3Pw7Xr2Tn5Vb9Ky1Hc4AbCdEf6Gh8Ij0Kl2Mn4Op6Qr8==",
    ),
    ("basic-auth", "Basic YWxpY2U6czNjcjN0LXBhc3N3b3Jk"),
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

/// A kubeconfig's client key and certificate (base64 of PEM, kilobytes long) and its users'
/// tokens (any length: a cloud provider's token runs to hundreds of characters), and a docker
/// `config.json`'s `auths` (base64 of `user:password`) and identity tokens.
#[test]
fn kubeconfig_and_docker_credentials_are_redacted() {
    let key = "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFcEFJQkFBS0NBUUVBdkh6WnE4TG0zUHc3WHIyVG41VmI5S3kxSGM0QWJDZEVmNkdoOElqMEtsMk1uNE9wNlFyOFN0MFV2Mld4NFl6NkFiOENkCg==";
    let cert = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSURFekNDQWZ1Z0F3SUJBZ0lJYlE4S3BkN0VKa2d3RFFZSktvWklodmNOQVFFTEJRQXdGVEVUTUJFR0ExVUUKQXhNS2EzVmlaWEp1WlhSbGN6QWVGdzB5TURBME1ERXdNREF3TURCYUZ3MHlNVEF6TXpFd01EQXdNREJhTURReA==";
    let eks = format!(
        "k8s-aws-v1.{}",
        "aHR0cHM6Ly9zdHMuYW1hem9uYXdzLmNvbS8_QWN0aW9uPUdldENhbGxlcklkZW50aXR5".repeat(5)
    );
    let sa = "9f8e7d6c5b4a39281706f5e4d3c2b1a0Zq8Lm3Pw7Xr2";
    let cases: Vec<(String, &str, &str)> = vec![
        (format!("    client-key-data: {key}\n"), key, "kubeconfig-client-data"),
        (format!("    client-certificate-data: {cert}\n"), cert, "kubeconfig-client-data"),
        (format!("{{\"client-key-data\": \"{key}\"}}"), key, "kubeconfig-client-data"),
        (format!("+    client-key-data: {key}\n"), key, "kubeconfig-client-data"),
        (format!("  user:\n    token: {eks}\n"), &eks, "token"),
        (format!("- name: sa\n  user:\n    token: \"{sa}\"\n"), sa, "token"),
        (format!("+    token: {eks}\r\n"), &eks, "token"),
        (format!("  12│     token: {sa}\n"), sa, "token"),
        (format!("      id-token: {sa}\n"), sa, "token"),
        (format!("{{\"users\":[{{\"user\":{{\"token\":\"{eks}\"}}}}]}}"), &eks, "token"),
        (
            "{\"auths\": {\"https://index.docker.io/v1/\": {\"auth\": \"ZG9ja2VydXNlcjpkY2tyX3BhdF9acThMbTNQdzdYcjJUbjVWYjlLeTFIYzQ=\"}}}".into(),
            "ZG9ja2VydXNlcjpkY2tyX3BhdF9acThMbTNQdzdYcjJUbjVWYjlLeTFIYzQ=",
            "docker-auth",
        ),
        (
            "\t\t\t\"auth\": \"Ym90OnMzY3IzdC1SZWdpc3RyeS1QYXNz\"\n".into(),
            "Ym90OnMzY3IzdC1SZWdpc3RyeS1QYXNz",
            "docker-auth",
        ),
        (
            format!("\"ghcr.io\": {{\"identitytoken\": \"{sa}\"}}"),
            sa,
            "docker-auth",
        ),
    ];
    let mut leaked = Vec::new();
    for (text, secret, kind) in &cases {
        let (out, n) = redact(text);
        if n != 1 || out.contains(secret) || !out.contains(&format!("[REDACTED:{kind}]")) {
            leaked.push(format!("{text:?} -> {out:?} ({n})"));
        }
        assert_eq!(out.lines().count(), text.lines().count(), "{out}");
    }
    assert!(leaked.is_empty(), "{}", leaked.join("\n"));
}

/// The new shapes are anchored on their keys in YAML or JSON and on their values: `token:` in
/// code, placeholders and a docker `auth` that is no `user:password` are left alone.
#[test]
fn token_words_in_code_are_left_alone() {
    for line in [
        "  token: string;",
        "  token: ${{ secrets.GITHUB_TOKEN }}",
        "    token: process.env.NPM_TOKEN",
        "const opts = { token: getToken(), retries: 3 };",
        "token: Option<String>,",
        "  token: some_long_identifier_name",
        "      token: <your-token-here>",
        "    client-key-data: <base64 of the key>",
        "\"auth\": \"required\"",
        "\"auth\": \"dGhpcyBpcyBub3QgYSBwYWly\"",
        "fn token(&self) -> &str { &self.token }",
        "    refresh_token: self.refresh_token.clone(),",
    ] {
        let (out, n) = redact(line);
        assert_eq!((out.as_str(), n), (line, 0), "{line}");
    }
}

/// The counts per rule name each rule as its marker does, and add up to the total.
#[test]
fn redactions_are_counted_per_rule() {
    let text = format!(
        "a = \"{}\"\nb = \"{}\"\nc = \"{}\"\n",
        "AKIAQWERTYUIOPASDFGH", "AKIAZXCVBNMASDFGHJKL", "ghp_R2d2C3poBB8LukeLeiaHanChewie01234567"
    );
    let (out, counts) = redact_counted(&text);
    let per_rule: Vec<(&str, usize)> = counts.iter().collect();
    assert_eq!(
        per_rule,
        [("aws-access-key", 2), ("github-token", 1)],
        "{out}"
    );
    assert_eq!(counts.total(), redact(&text).1);
    assert_eq!(redact_counted("nothing here").1, Counts::default());
}

/// A token glued to an identifier by `_` (`x_ghp_…`, `key_AKIA…`, `AKIA…_old`), which a word
/// boundary does not see (`_` is a word character), is redacted like a free-standing one; the
/// `_` and the name around it stay.
#[test]
fn tokens_glued_by_underscores_are_redacted() {
    let ghp = "ghp_4Kx9Qm2Lp7Zr8Wv3Ty6Ub1Nc5Hd0Jf2Ga8Se";
    let aws = "AKIAQ3EGVP7MZL2XK4RT";
    let aws2 = "AKIAZXCVBNMASDFGHJKL";
    let cases: Vec<(String, &str, &str)> = vec![
        (format!("x_{ghp}"), "x_[REDACTED:github-token]", ghp),
        (
            format!("key_{aws}\n"),
            "key_[REDACTED:aws-access-key]\n",
            aws,
        ),
        (
            format!("KEY__{aws} "),
            "KEY__[REDACTED:aws-access-key] ",
            aws,
        ),
        (format!("{aws}_old"), "[REDACTED:aws-access-key]_old", aws),
        (
            format!("id_{aws}_{aws2}"),
            "id_[REDACTED:aws-access-key]_[REDACTED:aws-access-key]",
            aws2,
        ),
        (
            "stripe_sk_live_51Hx7Qm2Lp7Zr8Wv3Ty6Ub1Nc5".into(),
            "stripe_[REDACTED:stripe-key]",
            "51Hx7Qm2Lp7Zr8Wv3Ty6Ub1Nc5",
        ),
        (
            "google_AIzaSyD3x7Kq9-LmZ2pR8vT1wY4uB6nC0eF5gHj".into(),
            "google_[REDACTED:google-api-key]",
            "AIzaSyD3x7Kq9",
        ),
        (
            "openai_sk-proj-Q7mZ2xL9pR4vT8wY1uB6nC3eF5gHjK0dS2aL7qW9eR4tY6uI8oP1".into(),
            "openai_[REDACTED:api-key]",
            "Q7mZ2xL9pR4v",
        ),
        (
            "slack_xoxb-2943872165-4820917364815-Zq8Lm3Pw7Xr2Tn5Vb9Ky1Hc4".into(),
            "slack_[REDACTED:slack-token]",
            "2943872165",
        ),
        (
            "gl_glpat-Zq8Lm3Pw7Xr2Tn5Vb9Ky".into(),
            "gl_[REDACTED:gitlab-token]",
            "Zq8Lm3Pw7Xr2Tn5Vb9Ky",
        ),
        (
            "oauth_ya29.a0AfH6SMBxyz".into(),
            "oauth_[REDACTED:google-oauth-token]",
            "a0AfH6SMBxyz",
        ),
        (
            "client_GOCSPX-Zq8Lm3Pw7Xr2Tn5Vb9Ky1Hc4AbCd".into(),
            "client_[REDACTED:google-oauth-client-secret]",
            "Zq8Lm3Pw7Xr2",
        ),
        (
            "mail_SG.Zq8Lm3Pw7Xr2Tn5Vb9Ky1H.c4AbCdEf6Gh8Ij0Kl2Mn4Op6Qr8St0Uv2Wx4Yz6Ab8Cd".into(),
            "mail_[REDACTED:sendgrid-key]",
            "Zq8Lm3Pw7Xr2",
        ),
        (
            "session_eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fw".into(),
            "session_[REDACTED:jwt]",
            "SflKxwRJSMeKKF2QT4fw",
        ),
        (
            "Storage_AccountKey=Zq8Lm3Pw7Xr2Tn5Vb9Ky1Hc4AbCdEf6Gh8==".into(),
            "Storage_AccountKey=[REDACTED:azure-key]",
            "Zq8Lm3Pw7Xr2",
        ),
        (
            "DB_postgres://app:pw0rd-9x@db.internal/app".into(),
            "DB_postgres://app:[REDACTED:url-password]@db.internal/app",
            "pw0rd-9x",
        ),
    ];
    let mut wrong = Vec::new();
    for (text, want, secret) in &cases {
        let (out, _) = redact(text);
        if out != *want || out.contains(secret) {
            wrong.push(format!("{text:?} -> {out:?}, want {want:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// What the glue must not sweep in: identifiers that merely contain a rule's prefix after `_`
/// (Hugging Face's `hf_` in model code is a name, not a token: its rule keeps the word
/// boundary), and the words of the keyword rules (`use_bearer`, `http_basic`).
#[test]
fn identifiers_with_a_prefix_after_an_underscore_are_left_alone() {
    for line in [
        "model = convert_hf_GPTNeoXForCausalLMWithValueHead(config)",
        "let use_bearer = true_when_the_header_is_present;",
        "fn http_basic thisIsNotBase64AtAll",
        "risk_live_assessment_for_the_quarter",
        "my_sk-learn",
    ] {
        let (out, n) = redact(line);
        assert_eq!((out.as_str(), n), (line, 0), "{line}");
    }
}

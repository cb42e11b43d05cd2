//! The keyword search finds exactly what the earlier engine (one regex of all the rules over the
//! whole text, `reference.rs`) found, and runs a rule only where its keywords are.

use super::search::{accepted, runs};
use super::tests::FAKE;

#[path = "../../tests/it/hardening/adversarial.rs"]
mod adversarial;

fn keyword_search(text: &str) -> Vec<(usize, usize, usize)> {
    let (_, mut spans) = accepted(text).unwrap();
    spans.sort_unstable();
    spans
}

fn same_as_before(text: &str) {
    let (before, _) = super::reference::accepted(text);
    assert_eq!(keyword_search(text), before, "{text:?}");
}

/// Pieces of the rules' shapes (keywords in every case and in the spellings Unicode folds to
/// them, values, separators, line ends) put together at random: where the two searches could
/// part (a keyword on another line than its value, one rule's keyword inside another's match,
/// a candidate's name part holding a shape, a rejected value before a real one).
#[test]
fn the_keyword_search_finds_what_one_regex_of_all_rules_found() {
    const PIECES: &[&str] = &[
        "password",
        "PASSWORD",
        "Passwd",
        "paſſword",
        "pwd",
        "secret",
        "SECRET",
        "token",
        "Token",
        "TOKEN",
        "to\u{212A}en",
        "api_key",
        "API-KEY",
        "apikey",
        "access_key",
        "ACCESSKEY",
        "private-key",
        "credential",
        "AccountKey",
        "SharedAccessKey",
        "basic ",
        "Basic ",
        "BASIC\t",
        "bearer ",
        "Bearer ",
        "https://",
        "redis://",
        "://",
        "u:",
        ":pw0rd@",
        "@",
        "AKIA",
        "key_",
        "x_",
        "__",
        "ASIA",
        "akia",
        "ghp_",
        "github_pat_",
        "glpat-",
        "hf_",
        "AIza",
        "ya29.",
        "GOCSPX-",
        "xoxb-",
        "xoxp-",
        "https://hooks.slack.com/services/",
        "SG.",
        "sk_live_",
        "rk_test_",
        "sk-",
        "sk-proj-",
        "sk-ant-",
        "eyJ",
        "client-key-data",
        "client-certificate-data",
        "\"auth\"",
        "\"identitytoken\"",
        "\"registrytoken\"",
        "id-",
        "access-",
        "refresh-",
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----END RSA PRIVATE KEY-----",
        "-----BEGIN PRIVATE KEY-----",
        "\n",
        "\r\n",
        "\n\n",
        " ",
        "  ",
        "\t",
        "=",
        ":",
        ": ",
        ":=",
        "=>",
        " = ",
        "\"",
        "'",
        ",",
        ";",
        "{",
        "}",
        "(",
        ")",
        ".",
        "-",
        "_",
        "/",
        "+",
        "$",
        "<",
        "*",
        "│",
        "é",
        "ſ",
        "\u{212A}",
        "Q3EGVP7MZL2XK4RT",
        "ZG9ja2VydXNlcjpwYXNz",
        "YWxpY2U6czNjcjN0LXBhc3N3b3Jk",
        "4Kx9Qm2Lp7Zr8Wv3Ty6Ub1Nc5Hd0Jf2Ga8Se",
        "Zq8Lm3Pw7Xr2Tn5Vb9Ky",
        "hunter2hunter",
        "s3cr3tP4ssw0rd",
        "abcdefghijklmnopqrstuvwxyz",
        "0123456789",
        "required",
        "x",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "==",
        "k8s",
    ];
    let mut seed = 0x51_7CC1_B727_220Au64;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..10_000 {
        let len = 1 + (rand() % 40) as usize;
        let text: String = (0..len)
            .map(|_| PIECES[(rand() % PIECES.len() as u64) as usize])
            .collect();
        same_as_before(&text);
    }
}

#[test]
fn the_keyword_search_agrees_on_real_and_adversarial_text() {
    for (_, secret) in FAKE {
        same_as_before(secret);
        same_as_before(&format!("x = \"{secret}\"\ny = {secret};\n"));
    }
    for (_, text) in adversarial::inputs(20_000) {
        same_as_before(&text);
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = 0;
    for dir in ["src", "tests", "fixtures", "benches"] {
        for entry in ignore::Walk::new(root.join(dir)).flatten() {
            if let Ok(text) = std::fs::read_to_string(entry.path()) {
                same_as_before(&text);
                files += 1;
            }
        }
    }
    assert!(files > 100, "{files} files");
}

/// A rule none of whose keywords is in the text is not run; text without any keyword runs no
/// regex at all.
#[test]
fn a_rule_without_its_keywords_is_not_run() {
    let runs_of = |text: &str| -> Vec<&'static str> {
        let mut kinds: Vec<&str> = runs(text)
            .into_iter()
            .filter(|&(_, n)| n > 0)
            .map(|(kind, _)| kind)
            .collect();
        kinds.dedup();
        kinds
    };
    assert_eq!(
        runs_of("fn main() { println!(\"hello\"); }\n"),
        Vec::<&str>::new()
    );
    assert_eq!(
        runs_of("Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0\n"),
        ["bearer-token"]
    );
    assert_eq!(
        runs_of("const K = \"AKIAQ3EGVP7MZL2XK4RT\";"),
        ["aws-access-key"]
    );
    // Lower case is not the AWS rule's keyword: it is not run, and nothing is found.
    assert_eq!(runs_of("akiaq3egvp7mzl2xk4rt"), Vec::<&str>::new());
    assert_eq!(keyword_search("akiaq3egvp7mzl2xk4rt"), []);
}

/// A rule that ignores case finds its keyword in any case (and in the characters Unicode folds
/// to its letters), as its regex does; a rule that does not, only in its own.
#[test]
fn keywords_are_matched_in_the_rules_case() {
    for text in [
        "Authorization: BEARER 9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        "authorization: bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        "DB_PASSWORD=s3cr3tP4ssw0rd",
        "db_password=s3cr3tP4ssw0rd",
        "db_paſſword=s3cr3tP4ssw0rd",
        "API_\u{212A}EY=s3cr3tP4ssw0rd",
    ] {
        let (out, n) = super::redact(text);
        assert_eq!(n, 1, "{text} -> {out}");
        same_as_before(text);
    }
    // `eyJ` (the JWT rule's keyword) in another case is no JWT.
    let jwt = FAKE.iter().find(|(k, _)| *k == "jwt").unwrap().1;
    assert_eq!(super::redact(jwt).1, 1);
    assert_eq!(super::redact(&jwt.replace("eyJ", "EYJ")).1, 0);
    same_as_before(&jwt.replace("eyJ", "EYJ"));
}

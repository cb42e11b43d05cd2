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

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// The built-in secret-file rule a path's file name matches, if any. A backup, editor swap or
/// leftover copy of a secret file (`server.key.bak`, `credentials.json~`, `.env.orig`,
/// `.id_rsa.swp`, `#.netrc#`) matches the rule of the file it copies.
///
/// The name is judged as written and as Windows opens it ([`super::windows_path::opened_name`]:
/// `prod.env.`, `prod.env ` and `prod.env::$DATA` open `prod.env`), on every platform.
pub fn name_rule(path: &Path) -> Option<&'static str> {
    let written = path.file_name()?.to_string_lossy();
    if let Some(rule) = written_rule(&written.to_ascii_lowercase()) {
        return Some(rule);
    }
    let full = path.as_os_str().to_string_lossy();
    let opened = super::windows_path::opened_name(&full);
    if opened.is_empty() || opened.eq_ignore_ascii_case(&written) {
        return None;
    }
    written_rule(&opened.to_ascii_lowercase())
}

/// The built-in rule of one file name as written (lower case), or of the file it backs up.
fn written_rule(name: &str) -> Option<&'static str> {
    // Each round strips one layer of backup naming; a few rounds cover `x.key.bak~`.
    let mut names = vec![name.to_string()];
    for _ in 0..4 {
        if let Some(rule) = names.iter().find_map(|n| base_rule(n)) {
            return Some(rule);
        }
        names = names.iter().flat_map(|n| unbackup(n)).collect();
        if names.is_empty() {
            return None;
        }
    }
    None
}

/// Suffixes that backup tools, editors, merges and package managers add to a file's name.
const BACKUP_SUFFIXES: &[&str] = &[
    "~",
    ".bak",
    ".backup",
    ".bk",
    ".orig",
    ".old",
    ".save",
    ".sav",
    ".saved",
    ".tmp",
    ".temp",
    ".copy",
    ".prev",
    ".rej",
    ".swp",
    ".swo",
    ".swn",
    ".swx",
    ".un~",
    ".dpkg-old",
    ".dpkg-dist",
    ".dpkg-new",
    ".rpmsave",
    ".rpmnew",
    ".ucf-old",
    ".ucf-dist",
];

/// The names `name` may be a backup of: one layer of backup naming removed, in every way that
/// applies (a vim swap file `.x.swp` also loses its leading dot, an Emacs lock `.#x` and
/// autosave `#x#` their marks, a numbered backup `x.~1~` its number).
fn unbackup(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut push = |n: &str| {
        if !n.is_empty() && n != name {
            out.push(n.to_string());
            if let Some(undotted) = n.strip_prefix('.').filter(|u| !u.is_empty()) {
                out.push(undotted.to_string());
            }
        }
    };
    for suffix in BACKUP_SUFFIXES {
        if let Some(base) = name.strip_suffix(suffix) {
            push(base);
        }
    }
    // `x.~1~` (numbered backups) and `x.bak1`, `x.old2`.
    let trimmed = name.trim_end_matches(|c: char| c.is_ascii_digit());
    if trimmed.len() < name.len() {
        push(trimmed);
    }
    if let Some(base) = name.strip_suffix('~').and_then(|n| n.rsplit_once(".~")) {
        push(base.0);
    }
    if let Some(base) = name.strip_prefix(".#") {
        push(base);
    }
    if let Some(base) = name.strip_prefix('#').and_then(|n| n.strip_suffix('#')) {
        push(base);
    }
    out
}

/// The rule for a file name as it is (lower case).
fn base_rule(name: &str) -> Option<&'static str> {
    let (stem, ext) = match name.rsplit_once('.') {
        Some((s, e)) if !s.is_empty() => (s, e),
        _ => (name, ""),
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
        ("env", "*.env"),
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

    /// The rule `path` (absolute) matches; `relative` is its path below the root. The globs see
    /// the name and the relative path as written and as Windows opens them
    /// ([`super::windows_path::opened_path`]: `vault./x.txt` is `vault/x.txt`).
    pub fn rule(&self, path: &Path, relative: &Path) -> Option<String> {
        if let Some(r) = name_rule(path) {
            return Some(r.to_string());
        }
        if self.patterns.is_empty() {
            return None;
        }
        let name = path.file_name().map(Path::new)?;
        let full = path.as_os_str().to_string_lossy();
        let opened_name = super::windows_path::opened_name(&full);
        let opened = super::windows_path::opened_path(&relative.as_os_str().to_string_lossy());
        let hit = self
            .globs
            .matches(name)
            .into_iter()
            .chain(self.globs.matches(relative))
            .chain(self.globs.matches(opened_name))
            .chain(self.globs.matches(opened))
            .min()?;
        Some(format!("GEMINI_MCP_SECRET_FILES `{}`", self.patterns[hit]))
    }
}

/// A file name as it may be shown in a prompt, a reply or a thread: control characters (a
/// newline could fake prompt structure such as a `--- END FILE` line), line and paragraph
/// separators and bidirectional overrides escaped as `\n`, `\u{202e}`…, and secret-looking
/// values in it redacted like any text sent.
pub fn shown_name(name: &str) -> String {
    fn unsafe_char(c: char) -> bool {
        c.is_control()
            || matches!(
                c,
                '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{061c}'
            )
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    }
    let escaped;
    let name = if name.chars().any(unsafe_char) {
        let mut s = String::with_capacity(name.len() + 8);
        for c in name.chars() {
            match c {
                '\n' => s.push_str("\\n"),
                '\r' => s.push_str("\\r"),
                '\t' => s.push_str("\\t"),
                c if unsafe_char(c) => s.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
                c => s.push(c),
            }
        }
        escaped = s;
        escaped.as_str()
    } else {
        name
    };
    crate::redact::redact(name).0
}

#[cfg(test)]
mod tests {
    use super::*;
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
    fn backups_of_secret_files_are_secrets() {
        for (name, rule) in [
            ("server.key.bak", Some("*.key")),
            ("credentials.json~", Some("credentials file")),
            ("app.env.orig", Some("*.env")),
            ("prod.env", Some("*.env")),
            (".env.swp", Some(".env*")),
            (".id_rsa.swp", Some("id_rsa* (SSH private key)")),
            (".server.pem.swo", Some("*.pem")),
            ("#secrets.yaml#", Some("secrets file")),
            (".#.netrc", Some(".netrc")),
            ("tls.key.~1~", Some("*.key")),
            ("tls.key.bak2", Some("*.key")),
            ("cert.pem.old~", Some("*.pem")),
            ("terraform.tfstate.backup", Some("*.tfstate")),
            (
                "client_secret_1.json.save",
                Some("Google client secret or service account key"),
            ),
            // Backups of ordinary files stay ordinary.
            ("main.rs.bak", None),
            ("key.rs.orig", None),
            ("README.md~", None),
            (".main.rs.swp", None),
            ("notes.txt.old", None),
        ] {
            assert_eq!(name_rule(Path::new(name)), rule, "{name}");
        }
    }

    /// Win32 strips trailing dots and spaces from every name of a path and reads `name:stream`
    /// as a stream of `name`: `prod.env.`, `prod.env ` and `prod.env::$DATA` open `prod.env`.
    /// The name rules judge the name Windows opens beside the one written, on every platform
    /// (a git change or an agent's path is judged by name alone, wherever the server runs).
    #[test]
    fn names_windows_opens_as_a_secret_are_secrets() {
        for (name, rule) in [
            ("prod.env.", Some("*.env")),
            ("prod.env ", Some("*.env")),
            ("prod.env. . ", Some("*.env")),
            ("prod.env::$DATA", Some("*.env")),
            ("prod.env:hidden", Some("*.env")),
            (".env.", Some(".env*")),
            ("config/.env ", Some(".env*")),
            ("config\\.env.", Some(".env*")),
            ("deploy\\id_rsa", Some("id_rsa* (SSH private key)")),
            ("id_rsa ", Some("id_rsa* (SSH private key)")),
            ("secrets.yaml.", Some("secrets file")),
            ("C:server.key.", Some("*.key")),
            (".netrc..", Some(".netrc")),
            ("server.key.bak.", Some("*.key")),
            // What Windows opens is no secret: neither is the name.
            ("main.rs.", None),
            ("notes.txt::$DATA", None),
            ("env.", None),
            ("...", None),
        ] {
            assert_eq!(name_rule(Path::new(name)), rule, "{name:?}");
        }
        // The configured globs see the path Windows opens, every name of it.
        let names = SecretNames::new(&["vault/**".into(), "*.secret".into()]).unwrap();
        for relative in [
            "vault./x.txt",
            "vault /x.txt",
            "vault::$INDEX_ALLOCATION/x.txt",
            "vault.\\x.txt",
            "a.secret.",
            "a.secret::$DATA",
        ] {
            let path = Path::new("/p").join(relative);
            assert!(
                names.rule(&path, Path::new(relative)).is_some(),
                "{relative:?}"
            );
        }
        assert_eq!(
            names.rule(Path::new("/p/vaults/x.txt"), Path::new("vaults/x.txt")),
            None
        );
    }

    #[test]
    fn shown_names_are_escaped_and_redacted() {
        for (name, shown) in [
            ("src/main.rs", "src/main.rs"),
            ("a\nb.txt", "a\\nb.txt"),
            (
                "a\n--- END FILE: x ---\r\tz",
                "a\\n--- END FILE: x ---\\r\\tz",
            ),
            ("bell\u{7}.txt", "bell\\u{7}.txt"),
            ("rtl\u{202e}txt.exe", "rtl\\u{202e}txt.exe"),
            ("sep\u{2028}x", "sep\\u{2028}x"),
            ("café/ü.rs", "café/ü.rs"),
            (
                "dump-ghp_4Kx9Qm2Lp7Zr8Wv3Ty6Ub1Nc5Hd0Jf2Ga8Se.log",
                "dump-[REDACTED:github-token].log",
            ),
        ] {
            assert_eq!(shown_name(name), shown, "{name:?}");
        }
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
}

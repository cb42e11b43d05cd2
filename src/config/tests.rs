use super::*;
use std::collections::HashMap;

fn load(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut map = map;
    map.entry("HOME".into())
        .or_insert_with(|| dir.path().to_string_lossy().into_owned());
    Config::load(&|k| map.get(k).cloned(), dir.path())
}

#[test]
fn defaults() {
    let c = load(&[]).unwrap();
    assert_eq!(c.gemini.default_model, "pro");
    assert_eq!(c.threads.max_turns, 20);
    assert_eq!(c.threads.ttl, Duration::from_secs(3 * 3600));
    assert_eq!(
        c.gemini.base_url,
        "https://generativelanguage.googleapis.com"
    );
    assert_eq!(c.gemini.backend, BackendChoice::Auto);
    assert!(c.gemini.api_key.is_none());
    assert_eq!(c.collector.roots.len(), 1);
}

#[test]
fn bad_values_name_the_setting() {
    for (vars, name) in [
        (vec![("GEMINI_BACKEND", "rest")], "GEMINI_BACKEND"),
        (
            vec![("GEMINI_API_SURFACE", "interaction")],
            "GEMINI_API_SURFACE",
        ),
        (
            vec![("GEMINI_MCP_INTERACTIONS_STORE", "always")],
            "GEMINI_MCP_INTERACTIONS_STORE",
        ),
        (
            vec![("MAX_CONVERSATION_TURNS", "many")],
            "MAX_CONVERSATION_TURNS",
        ),
        (vec![("MAX_CONTEXT_TOKENS", "12")], "MAX_CONTEXT_TOKENS"),
        (
            vec![("GEMINI_BASE_URL", "localhost:8080")],
            "GEMINI_BASE_URL",
        ),
        (
            vec![("GEMINI_BASE_URL", "http://x/v1beta")],
            "GEMINI_BASE_URL",
        ),
        (
            vec![("GEMINI_BASE_URL", "https://proxy/?tenant=a&key=k")],
            "GEMINI_BASE_URL",
        ),
        (
            vec![
                ("GEMINI_API_KEY", "one-key"),
                ("GEMINI_BASE_URL", "https://proxy/?key=other-key"),
            ],
            "GEMINI_BASE_URL",
        ),
        (
            vec![
                ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
                ("GOOGLE_VERTEX_BASE_URL", "https://u:pw@proxy"),
            ],
            "GOOGLE_VERTEX_BASE_URL",
        ),
        (
            vec![("PROJECT_ROOT", "/definitely/not/here")],
            "PROJECT_ROOT",
        ),
        (vec![("PROJECT_ROOT", "/")], "PROJECT_ROOT"),
        (vec![("GEMINI_MCP_STORE", "redis")], "REDIS_URL"),
        (vec![("REDIS_URL", "redis+cluster://:pw@")], "REDIS_URL"),
        (vec![("REDIS_URL", "redis+cluster://h:7000/2")], "REDIS_URL"),
        (
            vec![("GEMINI_MCP_REDIS_WAIT_REPLICAS", "all")],
            "GEMINI_MCP_REDIS_WAIT_REPLICAS",
        ),
        // Tool names (DISABLED_TOOLS, GEMINI_MCP_RATE_LIMITS) are checked against the tools'
        // table by `tools::spec::check_settings`, whose tests hold those cases.
        (vec![("GEMINI_TIMEOUT_SECS", "0")], "GEMINI_TIMEOUT_SECS"),
        (
            vec![("GEMINI_MCP_AUDIT_LOG_MAX_MB", "0")],
            "GEMINI_MCP_AUDIT_LOG_MAX_MB",
        ),
        (vec![("GEMINI_MCP_AUDIT_LOG", "/")], "GEMINI_MCP_AUDIT_LOG"),
        // A device (a symbolic link the same way): never written through.
        (
            vec![("GEMINI_MCP_AUDIT_LOG", "/dev/null")],
            "GEMINI_MCP_AUDIT_LOG",
        ),
        (
            vec![("GEMINI_MCP_AUDIT_LOG", "/definitely/not/here/audit.jsonl")],
            "GEMINI_MCP_AUDIT_LOG",
        ),
        (
            vec![("GEMINI_MCP_RATE_LIMITS", "chat=0/min")],
            "GEMINI_MCP_RATE_LIMITS",
        ),
        (
            vec![("GEMINI_MCP_HTTP_CLIENT_CONCURRENCY", "0")],
            "GEMINI_MCP_HTTP_CLIENT_CONCURRENCY",
        ),
        (
            vec![("GEMINI_MCP_HTTP_MAX_BODY_BYTES", "10")],
            "GEMINI_MCP_HTTP_MAX_BODY_BYTES",
        ),
        (
            vec![("GEMINI_MCP_HTTP_SHUTDOWN_SECS", "-1")],
            "GEMINI_MCP_HTTP_SHUTDOWN_SECS",
        ),
        (
            vec![("GEMINI_MCP_METRICS_TOKEN", "two words")],
            "GEMINI_MCP_METRICS_TOKEN",
        ),
        (
            vec![("GEMINI_MCP_METRICS_TOKEN_FILE", "/definitely/not/here")],
            "GEMINI_MCP_METRICS_TOKEN_FILE",
        ),
    ] {
        let err = load(&vars).unwrap_err().to_string();
        assert!(err.starts_with(name), "{vars:?}: {err}");
        // A URL's credentials are not quoted back.
        for value in ["other-key", ":pw@", "one-key"] {
            assert!(!err.contains(value), "{vars:?}: {err}");
        }
    }
}

#[test]
fn secrets_never_print() {
    let c = load(&[
        ("GEMINI_API_KEY", "AIzaSyTESTKEY-never-printed"),
        ("REDIS_URL", "redis://:pw@h/0"),
        (
            "GEMINI_BASE_URL",
            "https://gw:gw-pass-3@proxy.example/gemini/",
        ),
    ])
    .unwrap();
    let dump = format!("{c:?}");
    assert!(!dump.contains("AIzaSyTESTKEY"), "{dump}");
    assert!(!dump.contains(":pw@"), "{dump}");
    assert!(!dump.contains("gw-pass-3"), "{dump}");
    assert_eq!(c.gemini.base_url, "https://proxy.example/gemini");
    assert_eq!(
        c.gemini.api_key.unwrap().expose(),
        "AIzaSyTESTKEY-never-printed"
    );
}

#[test]
fn http_tokens_one_per_client_from_env_or_file() {
    let c = load(&[("GEMINI_MCP_HTTP_TOKEN", " alpha , beta,")]).unwrap();
    let got: Vec<&str> = c.http.tokens.iter().map(Secret::expose).collect();
    assert_eq!(got, ["alpha", "beta"]);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens");
    std::fs::write(&file, "first-token\n\nsecond-token\n").unwrap();
    let f = file.to_string_lossy().into_owned();
    let c = load(&[("GEMINI_MCP_HTTP_TOKEN_FILE", &f)]).unwrap();
    assert_eq!(c.http.tokens.len(), 2);
    assert_eq!(c.http.tokens[1].expose(), "second-token");

    let err = load(&[("GEMINI_MCP_HTTP_TOKEN", "ok,has space-SECRETPART")])
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("GEMINI_MCP_HTTP_TOKEN"), "{err}");
    assert!(err.contains("token #2"), "{err}");
    assert!(!err.contains("SECRETPART"), "{err}");
    assert!(!format!("{c:?}").contains("second-token"));
}

/// `/metrics` has tokens of its own, from the environment or a file, kept apart from the
/// clients'.
#[test]
fn metrics_tokens_from_env_or_file() {
    let c = load(&[("GEMINI_MCP_HTTP_TOKEN", "client")]).unwrap();
    assert!(c.http.metrics_tokens.is_empty());
    let c = load(&[("GEMINI_MCP_METRICS_TOKEN", "scraper-a, scraper-b")]).unwrap();
    let got: Vec<&str> = c.http.metrics_tokens.iter().map(Secret::expose).collect();
    assert_eq!(got, ["scraper-a", "scraper-b"]);
    assert!(c.http.tokens.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("metrics-token");
    std::fs::write(&file, "from-a-file\n").unwrap();
    let f = file.to_string_lossy().into_owned();
    let c = load(&[("GEMINI_MCP_METRICS_TOKEN_FILE", &f)]).unwrap();
    assert_eq!(c.http.metrics_tokens[0].expose(), "from-a-file");
    assert!(!format!("{c:?}").contains("from-a-file"));
}

#[test]
fn http_settings_and_rate_limits() {
    let c = load(&[]).unwrap();
    assert_eq!(c.tools.rate_limits, None);
    assert_eq!(c.http.max_body_bytes, 4 * 1024 * 1024);
    assert_eq!(c.http.client_concurrency, 16);
    assert_eq!(c.http.shutdown_grace, Duration::from_secs(30));
    assert_eq!(c.http.allowed_hosts, Some(vec![]));
    let c = load(&[
        ("GEMINI_MCP_RATE_LIMITS", "off"),
        (
            "GEMINI_MCP_HTTP_ALLOWED_HOSTS",
            "mcp.example.com, mcp.internal:8080",
        ),
        ("GEMINI_MCP_HTTP_ALLOWED_ORIGINS", "*"),
    ])
    .unwrap();
    assert!(c.tools.rate_limits.unwrap().is_off());
    assert_eq!(
        c.http.allowed_hosts,
        Some(vec!["mcp.example.com".into(), "mcp.internal:8080".into()])
    );
    assert_eq!(c.http.allowed_origins, None);
}

/// Every variable the loader reads is a setting of the table or one a setting declares it
/// reads (`also_reads`); the others are the OS's search path (`PATH`, `PATHEXT`) and the
/// Gemini CLI's home (`GEMINI_CLI_HOME`, `USERPROFILE`), not settings. And every item of the
/// table is read.
#[test]
fn the_loader_reads_only_what_the_table_names() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().to_string_lossy().into_owned();
    let env = |k: &str| (k == "HOME").then(|| home.clone());
    let src = Source::new(&env, BTreeMap::new(), dir.path());
    Config::read(&src).unwrap();
    let read = src.read.borrow().clone();
    let mut named: std::collections::BTreeSet<&str> = SETTINGS
        .iter()
        .flat_map(|s| std::iter::once(s.name).chain(s.also_reads.iter().copied()))
        .collect();
    named.insert("PATH");
    named.insert("PATHEXT");
    named.extend(["GEMINI_CLI_HOME", "USERPROFILE"]);
    let unnamed: Vec<&String> = read
        .iter()
        .filter(|r| !named.contains(r.as_str()))
        .collect();
    assert!(unnamed.is_empty(), "read but not in the table: {unnamed:?}");
    for s in SETTINGS.iter().filter(|s| s.name != "GEMINI_MCP_CONFIG") {
        assert!(
            read.contains(s.name),
            "{} is in the table but never read",
            s.name
        );
    }
}

#[test]
fn the_day_and_the_prices_are_read_or_refused_by_name() {
    let c = load(&[
        ("GEMINI_MCP_TODAY", "2027-01-01"),
        ("GEMINI_MCP_PRICES", "gemini-3.6-flash=1.5/9"),
    ])
    .unwrap();
    assert_eq!(
        c.gemini.prices.clock(),
        crate::clock::Clock::on("2027-01-01").unwrap()
    );
    let one = crate::gemini::Usage {
        input: 1_000_000,
        ..Default::default()
    };
    // The date moves the dated price; the configured price applies.
    use crate::gemini::ServiceTier::Standard;
    assert_eq!(
        c.gemini.prices.estimate("gemini-3.8-flash", &one, Standard),
        Some(1.5)
    );
    assert_eq!(
        c.gemini.prices.estimate("gemini-3.6-flash", &one, Standard),
        Some(1.5)
    );
    for (var, value, says) in [
        ("GEMINI_MCP_TODAY", "tomorrow", "YYYY-MM-DD"),
        ("GEMINI_MCP_TODAY", "2026-02-30", "YYYY-MM-DD"),
        (
            "GEMINI_MCP_PRICES",
            "gemini-3.6-flash=cheap",
            "model=input/output",
        ),
    ] {
        let e = load(&[(var, value)]).unwrap_err().to_string();
        assert!(e.contains(var) && e.contains(says), "{var}={value}: {e}");
    }
}

#[test]
fn google_api_key_is_accepted() {
    let c = load(&[("GOOGLE_API_KEY", "k2")]).unwrap();
    assert_eq!(c.gemini.api_key.unwrap().expose(), "k2");
}

/// Every row reads its own default: set to it, the configuration is the one it has unset.
#[test]
fn every_default_is_read_by_its_row() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().to_string_lossy().into_owned();
    let load_with = |vars: &[(&str, &str)]| {
        let env = |k: &str| {
            (vars
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string()))
            .or_else(|| (k == "HOME").then(|| home.clone()))
        };
        Config::load(&env, dir.path()).map(|c| format!("{c:?}"))
    };
    let unset = load_with(&[]).unwrap();
    let mut read = 0;
    for s in SETTINGS {
        let Some(default) = s.default_value() else {
            continue;
        };
        match load_with(&[(s.name, default)]) {
            Ok(set) => assert_eq!(set, unset, "{} set to its default", s.name),
            Err(e) => panic!("{} set to its default `{default}`: {e}", s.name),
        }
        read += 1;
    }
    assert!(read >= 30, "only {read} rows have a value as their default");
}

/// Adding a setting is adding a row: it has a category, a default, one line of doc and
/// writes into its part; docs/settings.md's reference is made from the rows.
#[test]
fn every_row_has_a_category_a_default_a_doc_line_and_a_part() {
    let mut names = std::collections::BTreeSet::new();
    for s in SETTINGS {
        assert!(names.insert(s.name), "{} is in the table twice", s.name);
        assert!(
            s.name
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'),
            "{}",
            s.name
        );
        assert!(category_of(s.name).is_some(), "{} has no category", s.name);
        assert!(!s.default.is_empty(), "{} has no default", s.name);
        assert!(
            !(s.derived && s.default == "—"),
            "{}: a derived default says from what",
            s.name
        );
        assert!(
            !s.doc.is_empty() && !s.doc.contains('\n') && !s.doc.contains('|'),
            "{}: the doc is one line of a table",
            s.name
        );
        // Only GEMINI_MCP_CONFIG is read apart (first, by `Config::load`).
        assert_eq!(
            matches!(s.read, settings::Read::First),
            s.name == "GEMINI_MCP_CONFIG",
            "{} writes into no part",
            s.name
        );
    }
    let categories: Vec<Category> = GROUPS.iter().map(|g| g.category).collect();
    for (i, c) in categories.iter().enumerate() {
        assert!(!categories[..i].contains(c), "{c:?} is two groups");
    }
    assert_eq!(
        SETTINGS.len(),
        GROUPS.iter().map(|g| g.rows.len()).sum::<usize>()
    );
}

/// docs/settings.md's reference is the table's: one table per category, each row as the
/// table has it. `GEMINI_MCP_WRITE_SETTINGS_DOC=1` writes it.
#[test]
fn the_settings_reference_is_made_from_the_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/settings.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let heading = "## All settings\n\n";
    let (before, section) = doc
        .split_once(heading)
        .expect("docs/settings.md has the section");
    let made = reference();
    if std::env::var_os("GEMINI_MCP_WRITE_SETTINGS_DOC").is_some() {
        // What follows the reference: its first paragraph that is not a table or a heading.
        let rest = section
            .split("\n\n")
            .skip_while(|p| p.starts_with('|') || p.starts_with("### "))
            .collect::<Vec<_>>()
            .join("\n\n");
        std::fs::write(&path, format!("{before}{heading}{made}{rest}")).unwrap();
        return;
    }
    assert!(
        section.starts_with(&made),
        "docs/settings.md's reference is not the table's; \
         write it with GEMINI_MCP_WRITE_SETTINGS_DOC=1 cargo test --lib settings_reference"
    );
}

#[test]
fn readme_configuration_table_matches_the_settings() {
    let readme = include_str!("../../docs/settings.md");
    for s in SETTINGS {
        let row = format!("| `{}` | {} | {} |", s.name, s.default, s.doc);
        assert!(readme.contains(&row), "README.md lacks the row:\n{row}");
    }
    let section = readme
        .split("## All settings")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .unwrap_or("");
    let rows = section.lines().filter(|l| l.starts_with("| `")).count();
    assert_eq!(
        rows,
        SETTINGS.len(),
        "README.md's configuration table has rows for unknown settings"
    );
}

#[test]
fn toml_file_is_overridden_by_env() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    std::fs::write(
        &file,
        "GEMINI_MODEL = \"flash\"\nMAX_CONVERSATION_TURNS = 7\nDISABLED_TOOLS = [\"debug\"]\n",
    )
    .unwrap();
    let f = file.to_string_lossy().into_owned();
    let c = load(&[("GEMINI_MCP_CONFIG", &f), ("GEMINI_MODEL", "pro")]).unwrap();
    assert_eq!(c.gemini.default_model, "pro");
    assert_eq!(c.threads.max_turns, 7);
    assert_eq!(c.tools.disabled, vec!["debug"]);

    std::fs::write(&file, "GEMINI_MODLE = \"flash\"\n").unwrap();
    let err = load(&[("GEMINI_MCP_CONFIG", &f)]).unwrap_err().to_string();
    assert!(err.contains("unknown setting `GEMINI_MODLE`"), "{err}");
}

#[test]
fn a_misspelled_key_in_the_toml_file_is_named_with_the_nearest_setting() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    let f = file.to_string_lossy().into_owned();
    for (text, nearest) in [
        ("GEMINI_MODLE = \"flash\"\n", Some("GEMINI_MODEL")),
        (
            "gemini_mcp_rate_limit = \"off\"\n",
            Some("GEMINI_MCP_RATE_LIMITS"),
        ),
        ("COLOUR = \"blue\"\n", None),
    ] {
        std::fs::write(&file, text).unwrap();
        let err = load(&[("GEMINI_MCP_CONFIG", &f)]).unwrap_err().to_string();
        let key = text.split(' ').next().unwrap();
        assert!(
            err.contains(&format!("unknown setting `{key}` in {f}")),
            "{err}"
        );
        assert!(!err.contains("not valid TOML"), "{err}");
        match nearest {
            Some(n) => assert!(err.contains(&format!("did you mean `{n}`?")), "{err}"),
            None => assert!(!err.contains("did you mean"), "{err}"),
        }
    }
}

#[test]
fn the_state_directory_on_windows_is_under_local_app_data() {
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    };
    let vars: &[(&str, &str)] = &[
        ("LOCALAPPDATA", "C:\\Users\\Zoë\\AppData\\Local"),
        ("HOME", "/home/zoe"),
        ("XDG_STATE_HOME", "/home/zoe/.state"),
    ];
    let dir = state_dir_of(true, &env(vars)).unwrap();
    assert_eq!(
        dir,
        PathBuf::from("C:\\Users\\Zoë\\AppData\\Local").join("gemini-mcp")
    );
    // Elsewhere the same environment means the XDG state home.
    assert_eq!(
        state_dir_of(false, &env(vars)).unwrap(),
        PathBuf::from("/home/zoe/.state/gemini-mcp")
    );
    // A relative LOCALAPPDATA is not a place: the platform's own answer instead.
    let relative: &[(&str, &str)] = &[("LOCALAPPDATA", "AppData\\Local")];
    let fallback = state_dir_of(true, &env(relative));
    assert!(
        fallback
            .as_deref()
            .is_none_or(|d| !d.starts_with("AppData\\Local")),
        "{fallback:?}"
    );
    let unc: &[(&str, &str)] = &[("LOCALAPPDATA", "\\\\srv\\profiles\\zoe")];
    assert!(
        state_dir_of(true, &env(unc))
            .unwrap()
            .starts_with("\\\\srv\\profiles\\zoe")
    );
}

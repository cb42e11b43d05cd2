//! The collector's specification as tests, each against a fixture tree it builds in a temporary
//! directory (with a second directory standing for "outside the root").

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::*;
use crate::config::Config;

const OUTSIDE_CONTENT: &str = "TOP-SECRET-OUTSIDE-CONTENT";

struct Fixture {
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    root: PathBuf,
    outside: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let r = tempfile::tempdir().unwrap();
        let o = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(r.path()).unwrap();
        let outside = std::fs::canonicalize(o.path()).unwrap();
        std::fs::write(outside.join("secret.txt"), OUTSIDE_CONTENT).unwrap();
        std::fs::create_dir(outside.join("dir")).unwrap();
        std::fs::write(outside.join("dir/inner.txt"), OUTSIDE_CONTENT).unwrap();
        Fixture {
            _dirs: (r, o),
            root,
            outside,
        }
    }

    fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        p
    }

    fn link(&self, target: impl AsRef<Path>, rel: &str) {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        symlink(target, p);
    }

    fn collector(&self) -> Collector {
        Collector::new(&Config::for_tests(&self.root).collector()).unwrap()
    }

    fn collector_on(&self, threads: usize) -> Collector {
        self.collector().with_threads(threads)
    }

    fn collect(&self, paths: &[&str], budget: u64) -> Result<Collected, CollectError> {
        self.collector().collect(&request(paths, budget))
    }
}

fn request(paths: &[&str], budget: u64) -> CollectRequest {
    CollectRequest {
        paths: paths.iter().map(|p| p.to_string()).collect(),
        budget,
        already_sent: HashMap::new(),
        ignore: None,
    }
}

fn sent(c: &Collected) -> Vec<&str> {
    c.files.iter().map(|f| f.display.as_str()).collect()
}

fn reason(c: &Collected, path: &str) -> Option<SkipReason> {
    c.skipped.iter().find(|s| s.path == path).map(|s| s.reason)
}

fn all_text(c: &Collected) -> String {
    c.files.iter().map(|f| f.text.as_str()).collect()
}

const BIG: u64 = 1_000_000;

// ---------------------------------------------------------------------------------------------
// The sandbox

#[test]
fn collector_refuses_paths_outside_the_root() {
    let fx = Fixture::new();
    fx.write("inside.txt", "inside\n");
    fx.link(fx.outside.join("secret.txt"), "link_out");
    fx.link(fx.outside.join("dir"), "dir_link_out");
    fx.link(&fx.outside, "sub/deeper/escape");
    let abs_outside = fx.outside.join("secret.txt").display().to_string();
    let rel_outside = format!(
        "../{}/secret.txt",
        fx.outside.file_name().unwrap().to_string_lossy()
    );
    let dotted = format!("sub/../{rel_outside}");
    for raw in [
        rel_outside.as_str(),
        dotted.as_str(),
        abs_outside.as_str(),
        "/proc/self/environ",
        "/etc/passwd",
        "/etc/definitely-not-here",
        "~",
        "~/.bashrc",
        "~root/.ssh/id_rsa",
        "..",
        "../",
        "link_out",
        "dir_link_out/inner.txt",
        "dir_link_out/not-there.txt",
        "sub/deeper/escape/secret.txt",
        "sub/deeper/escape/dir",
    ] {
        let err = fx
            .collect(&["inside.txt", raw], BIG)
            .expect_err(raw)
            .to_string();
        assert!(
            err.starts_with(&format!("{raw} is outside the project root ")),
            "{raw}: {err}"
        );
        let root = sandbox::shown(&fx.root).display().to_string();
        assert!(err.contains(&root), "{raw}: {err}");
        assert!(!err.contains(OUTSIDE_CONTENT), "{raw}: {err}");
    }
}

#[test]
fn collector_reports_missing_and_invalid_paths() {
    let fx = Fixture::new();
    fx.write("a.txt", "a\n");
    for (raw, expect) in [
        ("missing.txt", "missing.txt does not exist"),
        ("sub/missing/x.rs", "sub/missing/x.rs does not exist"),
        ("", "is not a valid path"),
        ("a\0b", "is not a valid path"),
    ] {
        let err = fx.collect(&[raw], BIG).expect_err(raw).to_string();
        assert!(err.contains(expect), "{raw:?}: {err}");
    }
    // Absolute paths inside the root are fine.
    let abs = fx.root.join("a.txt").display().to_string();
    assert_eq!(sent(&fx.collect(&[&abs], BIG).unwrap()), vec!["a.txt"]);
}

#[test]
fn collector_refusals_map_to_json_rpc_32001_naming_path_and_root() {
    let fx = Fixture::new();
    fx.write(".env", "KEY=value\n");
    for (paths, path) in [
        (vec!["/proc/self/environ"], "/proc/self/environ"),
        (vec![".env"], ".env"),
    ] {
        let e = fx.collect(&paths, BIG).unwrap_err();
        let mapped = crate::server::to_mcp(crate::tools::ToolError::from(e));
        let err = mapped.expect_err("a JSON-RPC error");
        assert_eq!(err.code, crate::server::SANDBOX_ERROR, "{path}");
        assert!(err.message.contains(path), "{}", err.message);
        assert_eq!(
            err.data.as_ref().and_then(|d| d["path"].as_str()),
            Some(path)
        );
        if path.starts_with('/') {
            let root = sandbox::shown(&fx.root).display().to_string();
            assert!(err.message.contains(&root), "{}", err.message);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Walking: symlinks, special files, size, binary, encoding

#[test]
fn collector_walk_reports_symlinks_out_and_ends_loops() {
    let fx = Fixture::new();
    fx.write("src/real.rs", "fn real() {}\n");
    fx.write("other/lib.rs", "fn other() {}\n");
    fx.link(fx.root.join("src/real.rs"), "src/alias.rs");
    fx.link(fx.outside.join("secret.txt"), "src/out_file.txt");
    fx.link(fx.outside.join("dir"), "src/out_dir");
    fx.link(fx.root.join("src/loop_b"), "src/loop_a");
    fx.link(fx.root.join("src/loop_a"), "src/loop_b");
    fx.link(fx.root.join("src"), "src/self");
    fx.link("..", "src/up");
    fx.link(fx.root.join("nowhere"), "src/dangling");
    fx.link(fx.root.join("other"), "src/in_root_dir");

    let c = fx.collect(&["src"], BIG).unwrap();
    assert!(!all_text(&c).contains(OUTSIDE_CONTENT));
    assert_eq!(
        reason(&c, "src/out_file.txt"),
        Some(SkipReason::OutsideRoot)
    );
    assert_eq!(reason(&c, "src/out_dir"), Some(SkipReason::OutsideRoot));
    assert_eq!(reason(&c, "src/loop_a"), Some(SkipReason::Unreadable));
    assert_eq!(reason(&c, "src/dangling"), Some(SkipReason::Unreadable));
    // The aliased file is sent once, under its canonical name; the in-root directory a link
    // leads to is walked; the links back up end without duplicates.
    let files = sent(&c);
    assert!(files.contains(&"src/real.rs"), "{files:?}");
    assert!(files.contains(&"other/lib.rs"), "{files:?}");
    let unique: HashSet<_> = c.files.iter().map(|f| &f.path).collect();
    assert_eq!(unique.len(), c.files.len(), "{files:?}");

    // A link named like a pruned directory (hidden, node_modules) is pruned too.
    fx.write("p/a.rs", "fn a() {}\n");
    fx.write("hidden_target/h.rs", "fn hidden() {}\n");
    fx.link(fx.root.join("hidden_target"), "p/.dotlink");
    fx.link(fx.root.join("hidden_target"), "p/node_modules");
    assert_eq!(sent(&fx.collect(&["p"], BIG).unwrap()), vec!["p/a.rs"]);
}

// FIFOs and Unix sockets; a Windows named pipe lives outside the file tree (`\\.\pipe\`).
#[cfg(unix)]
#[test]
fn collector_never_opens_fifos_or_sockets() {
    let fx = Fixture::new();
    fx.write("d/ok.txt", "ok\n");
    let fifo = fx.root.join("d/pipe");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let _listener = std::os::unix::net::UnixListener::bind(fx.root.join("d/sock")).unwrap();
    fx.link(fx.root.join("d/pipe"), "d/pipe_link");

    // A FIFO opened for reading would block: run with a deadline.
    let root = fx.root.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let c = Collector::new(&Config::for_tests(&root).collector()).unwrap();
        let walked = c.collect(&request(&["d"], BIG));
        let named = c.collect(&request(&["d/pipe", "d/sock", "d/ok.txt"], BIG));
        let _ = tx.send((walked, named));
    });
    let (walked, named) = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the collector blocked on a FIFO");
    let walked = walked.unwrap();
    assert_eq!(sent(&walked), vec!["d/ok.txt"]);
    assert_eq!(reason(&walked, "d/pipe"), Some(SkipReason::NotRegular));
    assert_eq!(reason(&walked, "d/sock"), Some(SkipReason::NotRegular));
    assert_eq!(reason(&walked, "d/pipe_link"), Some(SkipReason::NotRegular));
    let named = named.unwrap();
    assert_eq!(sent(&named), vec!["d/ok.txt"]);
    assert_eq!(reason(&named, "d/pipe"), Some(SkipReason::NotRegular));
    assert_eq!(reason(&named, "d/sock"), Some(SkipReason::NotRegular));
}

#[test]
fn collector_skips_large_and_binary_files_and_reads_bad_utf8_lossily() {
    let fx = Fixture::new();
    let big = fx.write("d/big.txt", "");
    std::fs::File::options()
        .write(true)
        .open(&big)
        .unwrap()
        .set_len(read::MAX_FILE_BYTES + 1)
        .unwrap();
    let mut bin = b"text at first".to_vec();
    bin.push(0);
    bin.extend_from_slice(&[7; 100]);
    fx.write("d/blob.dat", &bin);
    // A NUL past the first 8 KiB does not make a file binary.
    let mut late = "x".repeat(read::BINARY_SNIFF + 10).into_bytes();
    late.push(0);
    fx.write("d/late_nul.txt", &late);
    fx.write("d/latin1.txt", b"caf\xe9 cr\xe8me\n");
    fx.write("d/ok.txt", "fine\n");

    for paths in [
        vec!["d"],
        vec![
            "d/big.txt",
            "d/blob.dat",
            "d/latin1.txt",
            "d/ok.txt",
            "d/late_nul.txt",
        ],
    ] {
        let c = fx.collect(&paths, BIG).unwrap();
        assert_eq!(
            reason(&c, "d/big.txt"),
            Some(SkipReason::TooLarge),
            "{paths:?}"
        );
        assert_eq!(
            reason(&c, "d/blob.dat"),
            Some(SkipReason::Binary),
            "{paths:?}"
        );
        let latin = c
            .files
            .iter()
            .find(|f| f.display == "d/latin1.txt")
            .unwrap();
        assert!(latin.lossy);
        assert!(
            latin.text.contains("caf\u{fffd} cr\u{fffd}me"),
            "{}",
            latin.text
        );
        assert!(
            latin.text.contains("invalid UTF-8 replaced"),
            "{}",
            latin.text
        );
        let ok = c.files.iter().find(|f| f.display == "d/ok.txt").unwrap();
        assert!(!ok.lossy);
        assert!(sent(&c).contains(&"d/late_nul.txt"));
    }
}

// ---------------------------------------------------------------------------------------------
// Secrets

#[test]
fn collector_skips_walked_secret_files_and_refuses_named_ones() {
    let fx = Fixture::new();
    fx.write("app/main.py", "print('hi')\n");
    for name in [
        ".env",
        ".env.local",
        "server.pem",
        "tls.key",
        "id_rsa",
        "credentials.json",
        ".netrc",
        "vault.secret",
    ] {
        fx.write(&format!("app/{name}"), "not to be sent\n");
    }
    fx.link(fx.root.join("app/.env"), "app/innocent.txt");
    let mut config = Config::for_tests(&fx.root);
    config.collector.secret_globs = vec!["*.secret".into()];
    let collector = Collector::new(&config.collector()).unwrap();

    let c = collector.collect(&request(&["app"], BIG)).unwrap();
    assert_eq!(sent(&c), vec!["app/main.py"]);
    for name in [
        ".env",
        ".env.local",
        "server.pem",
        "tls.key",
        "id_rsa",
        "credentials.json",
        ".netrc",
        "vault.secret",
        "innocent.txt",
    ] {
        assert_eq!(
            reason(&c, &format!("app/{name}")),
            Some(SkipReason::Secret),
            "{name}"
        );
    }
    assert!(!all_text(&c).contains("not to be sent"));

    for name in [
        ".env",
        "server.pem",
        "id_rsa",
        "credentials.json",
        "vault.secret",
        "innocent.txt",
    ] {
        let path = format!("app/{name}");
        match collector.collect(&request(&["app/main.py", &path], BIG)) {
            Err(CollectError::SecretRefused { path: p, rule }) => {
                assert_eq!(p, path);
                assert!(!rule.is_empty());
            }
            other => panic!("{path}: {other:?}"),
        }
    }
}

#[test]
fn collector_redacts_secret_values_in_sent_files() {
    let fx = Fixture::new();
    let mut text = String::from("# settings\n");
    for (_, secret) in crate::redact::tests::FAKE {
        text.push_str(&format!("value = \"{secret}\"\n"));
    }
    text.push_str("DB_PASSWORD=s3cr3tP4ssw0rd\nlast_line = True\n");
    fx.write("config/settings.py", &text);
    let c = fx.collect(&["config"], BIG).unwrap();
    let f = &c.files[0];
    assert_eq!(f.redactions.total(), crate::redact::tests::FAKE.len() + 1);
    assert_eq!(c.redactions, f.redactions);
    for (_, secret) in crate::redact::tests::FAKE {
        assert!(!f.text.contains(secret), "leaked {secret}");
    }
    assert!(!f.text.contains("s3cr3tP4ssw0rd"));
    assert!(
        f.text.contains("secret-looking value(s) redacted"),
        "{}",
        f.text
    );
    // Line numbers still match the file on disk after multi-line blocks were replaced.
    let last = render::line_count(&text);
    assert!(
        f.text.contains(&format!("\n{last}│ last_line = True\n")),
        "{}",
        f.text
    );
}

// ---------------------------------------------------------------------------------------------
// Change while reading

#[test]
fn collector_skips_a_file_that_changes_while_read() {
    let fx = Fixture::new();
    let p = fx.write("f.txt", "version one\n");
    let sandbox = Sandbox::new(vec![fx.root.clone()]);
    let sp = sandbox.check(&p).unwrap();
    let appended = read::open(&sp, read::MAX_FILE_BYTES)
        .unwrap()
        .read_text_with(|| {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
            f.write_all(b"more\n").unwrap();
        });
    assert_eq!(appended.unwrap_err(), read::Unread::Changed);
    // Replaced by a symlink after the check: refused, never followed.
    std::fs::remove_file(&p).unwrap();
    symlink(fx.outside.join("secret.txt"), &p);
    assert_eq!(read::read_text(&sp).unwrap_err(), read::Unread::Changed);
    // Vanished after it was listed.
    std::fs::remove_file(&p).unwrap();
    assert_eq!(read::read_text(&sp).unwrap_err(), read::Unread::Unreadable);
    // And unchanged, it reads.
    std::fs::write(&p, "version two\n").unwrap();
    assert_eq!(read::read_text(&sp).unwrap().text, "version two\n");
}

#[test]
fn collector_survives_files_rewritten_during_collection() {
    let fx = Fixture::new();
    let versions: Vec<String> = (0..4)
        .map(|i| format!("v{i}\n").repeat(200 + i * 300))
        .collect();
    for i in 0..20 {
        fx.write(&format!("d/f{i}.txt"), &versions[0]);
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (root, versions, stop) = (fx.root.clone(), versions.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::write(root.join(format!("d/f{}.txt", n % 20)), &versions[n % 4]);
                n += 1;
            }
        })
    };
    let collector = fx.collector();
    for _ in 0..30 {
        let c = collector.collect(&request(&["d"], BIG)).unwrap();
        assert_eq!(c.files.len() + c.skipped.len(), 20);
        for s in &c.skipped {
            assert!(
                matches!(s.reason, SkipReason::Changed | SkipReason::Unreadable),
                "{s:?}"
            );
        }
        for f in &c.files {
            // A whole version, or (between truncation and write) an empty file: never a mix.
            let body: String = f
                .text
                .lines()
                .filter(|l| l.contains('│'))
                .map(|l| format!("{}\n", l.split_once("│ ").map_or("", |x| x.1)))
                .collect();
            assert!(
                body.is_empty() || versions.contains(&body),
                "{}: torn read",
                f.display
            );
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
}

#[test]
fn collector_reports_a_file_that_vanished_before_its_turn() {
    let fx = Fixture::new();
    let p = fx.write("gone.txt", "soon gone\n");
    let sandbox = Sandbox::new(vec![fx.root.clone()]);
    let item = walk::Candidate {
        path: sandbox.check(&p).unwrap(),
        display: "gone.txt".into(),
        class: classify::Class::Explicit,
        depth: 0,
        request: 0,
    };
    std::fs::remove_file(&p).unwrap();
    let none = HashMap::new();
    let prior = fill::Prior {
        already_sent: &HashMap::new(),
        counted: &none,
    };
    let filled = fill::fill(&[item], BIG, prior, None);
    assert!(filled.files.is_empty());
    assert_eq!(filled.skipped[0].reason, SkipReason::Unreadable);
}

// ---------------------------------------------------------------------------------------------
// Ignore rules and patterns

#[test]
fn collector_respects_ignore_files_hidden_and_vcs_folders() {
    let fx = Fixture::new();
    fx.write(".gitignore", "*.generated.rs\nbuild/\n");
    fx.write("src/.ignore", "scratch.rs\n");
    fx.write(".geminiignore", "private/\n");
    fx.write("src/main.rs", "fn main() {}\n");
    fx.write("src/x.generated.rs", "// generated\n");
    fx.write("src/scratch.rs", "// scratch\n");
    fx.write("build/out.rs", "// build output\n");
    fx.write("private/notes.md", "private\n");
    fx.write(".hidden/h.rs", "// hidden dir\n");
    fx.write(".git/config", "[core]\n");
    fx.write("node_modules/pkg/index.js", "module.exports = 1\n");
    fx.write("lib/__pycache__/m.cpython-311.pyc", "cache");
    fx.write("docs/readme.md", "# docs\n");
    let c = fx.collect(&["."], BIG).unwrap();
    let mut files = sent(&c);
    files.sort();
    assert_eq!(
        files,
        vec!["docs/readme.md", "src/main.rs"],
        "{:?}",
        c.skipped
    );
    // Explicitly named, an ignored file is sent.
    let c = fx.collect(&["src/scratch.rs", "build"], BIG).unwrap();
    assert!(sent(&c).contains(&"src/scratch.rs"));
    assert!(
        sent(&c).contains(&"build/out.rs"),
        "an ignored directory named explicitly is walked"
    );
}

#[test]
fn collector_applies_configured_include_and_exclude_patterns() {
    let fx = Fixture::new();
    fx.write("a.rs", "fn a() {}\n");
    fx.write("b.py", "b = 1\n");
    fx.write("gen/c.rs", "fn c() {}\n");
    let mut config = Config::for_tests(&fx.root);
    config.collector.include_globs = vec!["*.rs".into()];
    config.collector.exclude_globs = vec!["gen/**".into()];
    let c = Collector::new(&config.collector()).unwrap();
    let got = c.collect(&request(&["."], BIG)).unwrap();
    assert_eq!(sent(&got), vec!["a.rs"]);
    assert_eq!(reason(&got, "b.py"), Some(SkipReason::Ignored));
    assert_eq!(reason(&got, "gen/c.rs"), Some(SkipReason::Ignored));
    // Named explicitly, patterns do not apply.
    let got = c.collect(&request(&["b.py"], BIG)).unwrap();
    assert_eq!(sent(&got), vec!["b.py"]);
    config.collector.exclude_globs = vec!["a[".into()];
    assert!(
        matches!(Collector::new(&config.collector()), Err(CollectError::Config(m)) if m.contains("GEMINI_MCP_EXCLUDE"))
    );
}

// ---------------------------------------------------------------------------------------------
// Order, priority, budget, de-duplication

fn priority_tree() -> Fixture {
    let fx = Fixture::new();
    fx.write("README.md", "# readme\n");
    fx.write("Cargo.toml", "[package]\nname = \"x\"\n");
    fx.write("Cargo.lock", "# lock\n");
    fx.write("src/lib.rs", "pub mod a;\n");
    fx.write("src/a.rs", "pub fn a() {}\n");
    fx.write("src/deep/nested/z.rs", "pub fn z() {}\n");
    fx.write("zz_top.rs", "fn top() {}\n");
    fx.write("tests/data/sample.csv", "a,b\n1,2\n");
    fx.write("app.log", "started\n");
    fx.write("notes.xyz", "other text\n");
    fx
}

#[test]
fn collector_orders_by_priority_then_nearness() {
    let fx = priority_tree();
    let c = fx.collect(&[".", "src/a.rs"], BIG).unwrap();
    assert_eq!(
        sent(&c),
        vec![
            "src/a.rs",             // named explicitly
            "zz_top.rs",            // source, depth 1
            "src/lib.rs",           // source, depth 2
            "src/deep/nested/z.rs", // source, depth 4
            "Cargo.toml",           // config and build
            "README.md",            // docs
            "notes.xyz",            // other text
            "Cargo.lock",           // lock files, logs, test data
            "app.log",
            "tests/data/sample.csv",
        ]
    );
}

#[test]
fn collector_output_is_deterministic_across_threads_and_runs() {
    let fx = Fixture::new();
    for i in 0..150 {
        let body = format!("fn f{i}() {{ let x = {i}; }}\n").repeat(1 + (i * 7) % 40);
        fx.write(&format!("m{}/f{i}.rs", i % 7), body);
    }
    let run = |threads: usize, budget: u64| {
        let got = fx
            .collector_on(threads)
            .collect(&request(&["."], budget))
            .unwrap();
        let files: Vec<(String, u64)> = got
            .files
            .iter()
            .map(|f| (f.display.clone(), f.tokens))
            .collect();
        (files, got.skipped)
    };
    for budget in [BIG, 20_000, 3_000, 100] {
        let first = run(1, budget);
        for threads in [1, 2, 4, 2, 2] {
            assert_eq!(
                run(threads, budget),
                first,
                "budget {budget}, {threads} threads"
            );
        }
    }
}

/// Once the budget is full the rest is skipped in one go; files sent earlier among them are still
/// read and reported as already sent (unchanged) or over budget (changed), on any thread count.
#[test]
fn files_sent_earlier_after_the_budget_is_full_are_still_recognised() {
    let fx = Fixture::new();
    for i in 0..60 {
        fx.write(
            &format!("f{i:02}.rs"),
            format!("fn f{i}() {{}}\n").repeat(30),
        );
    }
    let everything = fx.collect(&["."], BIG).unwrap();
    // The last ten files were sent earlier in the thread; one of them has changed since.
    let already_sent: HashMap<_, _> = everything.files[50..]
        .iter()
        .map(|f| (f.path.clone(), f.hash.clone()))
        .collect();
    fx.write("f55.rs", "fn changed() {}\n");
    let budget = everything.files[..5].iter().map(|f| f.tokens).sum::<u64>() + 5;
    for threads in [1, 2, 4] {
        let mut req = request(&["."], budget);
        req.already_sent = already_sent.clone();
        let got = fx.collector_on(threads).collect(&req).unwrap();
        assert_eq!(
            sent(&got),
            vec!["f00.rs", "f01.rs", "f02.rs", "f03.rs", "f04.rs"],
            "{threads} threads"
        );
        for i in 5..60 {
            let name = format!("f{i:02}.rs");
            let expected = if i >= 50 && i != 55 {
                SkipReason::AlreadySent
            } else {
                SkipReason::OverBudget
            };
            assert_eq!(
                reason(&got, &name),
                Some(expected),
                "{name}, {threads} threads"
            );
        }
    }
}

/// The fill must send exactly what a plain sequential greedy pass would.
#[test]
fn collector_fill_matches_a_sequential_reference() {
    let fx = Fixture::new();
    for i in 0..120 {
        fx.write(
            &format!("s/f{i:03}.py"),
            format!("x{i} = {i}\n").repeat(1 + (i * 13) % 90),
        );
    }
    for budget in [50_000u64, 9_000, 2_500, 400, 30] {
        let c = fx.collect(&["s"], budget).unwrap();
        // Reference: every file counted in full, in priority order, greedily.
        let mut left = budget;
        let stop = fill::stop_threshold(budget);
        let mut expect = Vec::new();
        for i in 0..120 {
            let display = format!("s/f{i:03}.py");
            let text = std::fs::read_to_string(fx.root.join(&display)).unwrap();
            if left < stop || fill::estimate(text.len() as u64) > left {
                continue;
            }
            let t = tokens::count(&render::block(&display, &text, &[]));
            if t <= left {
                left -= t;
                expect.push(display);
            }
        }
        assert_eq!(sent(&c), expect, "budget {budget}");
        assert!(c.tokens <= budget);
        assert_eq!(c.tokens, c.files.iter().map(|f| f.tokens).sum::<u64>());
        // Nothing dropped silently.
        assert_eq!(c.files.len() + c.skipped.len(), 120);
        assert!(c.skipped.iter().all(|s| s.reason == SkipReason::OverBudget));
    }
}

#[test]
fn collector_fills_the_budget_when_there_is_enough_material() {
    let fx = Fixture::new();
    for i in 0..400 {
        let body: String = (0..(5 + i % 60))
            .map(|l| format!("    let value_{l} = compute({i}, {l}) + offset;\n"))
            .collect();
        fx.write(&format!("src/m{}/f{i}.rs", i % 9), body);
    }
    for budget in [2_000u64, 20_000, 100_000] {
        let c = fx.collect(&["src"], budget).unwrap();
        assert!(c.tokens <= budget);
        assert!(
            c.tokens as f64 >= 0.85 * budget as f64,
            "{} of {budget}",
            c.tokens
        );
    }
}

#[test]
fn collector_sends_a_file_reached_twice_once() {
    let fx = Fixture::new();
    fx.write("src/a.rs", "fn a() {}\n");
    fx.link(fx.root.join("src/a.rs"), "src/b.rs");
    fx.link(fx.root.join("src"), "alias");
    let c = fx
        .collect(
            &[
                "src/a.rs",
                "src",
                "alias",
                "alias/a.rs",
                "./src/../src/a.rs",
            ],
            BIG,
        )
        .unwrap();
    assert_eq!(sent(&c), vec!["src/a.rs"]);
}

#[test]
fn collector_skips_files_already_sent_unchanged() {
    let fx = Fixture::new();
    fx.write("a.rs", "fn a() {}\n");
    fx.write("b.rs", "fn b() {}\n");
    let collector = fx.collector();
    let first = collector.collect(&request(&["a.rs", "b.rs"], BIG)).unwrap();
    let mut req = request(&["a.rs", "b.rs"], BIG);
    req.already_sent = first
        .files
        .iter()
        .map(|f| (f.path.clone(), f.hash.clone()))
        .collect();
    std::fs::write(fx.root.join("b.rs"), "fn b() { changed() }\n").unwrap();
    let again = collector.collect(&req).unwrap();
    assert_eq!(sent(&again), vec!["b.rs"]);
    assert_eq!(reason(&again, "a.rs"), Some(SkipReason::AlreadySent));
    // Unchanged files sent earlier cost nothing, even with no budget left.
    req.budget = 0;
    let none = collector.collect(&req).unwrap();
    assert_eq!(reason(&none, "a.rs"), Some(SkipReason::AlreadySent));
    assert_eq!(reason(&none, "b.rs"), Some(SkipReason::OverBudget));
}

#[test]
fn collector_renders_numbered_blocks_with_counts() {
    let fx = Fixture::new();
    let body: String = (1..=12).map(|i| format!("line {i}\n")).collect();
    fx.write("src/x.py", &body);
    let c = fx.collect(&["src/x.py"], BIG).unwrap();
    let f = &c.files[0];
    assert_eq!(f.path, fx.root.join("src/x.py"));
    assert!(
        f.text
            .starts_with("--- BEGIN FILE: src/x.py ---\n 1│ line 1\n"),
        "{}",
        f.text
    );
    assert!(
        f.text
            .ends_with("12│ line 12\n--- END FILE: src/x.py ---\n"),
        "{}",
        f.text
    );
    assert_eq!(f.tokens, tokens::count(&f.text));
    use sha2::Digest;
    assert_eq!(f.hash, hex::encode(sha2::Sha256::digest(body.as_bytes())));
}

#[test]
fn collector_estimates_and_thresholds_are_sound() {
    // The smallest possible block counts at least MIN_BLOCK_TOKENS.
    assert!(tokens::count(&render::block("a", "", &[])) >= fill::MIN_BLOCK_TOKENS);
    // The size estimate never exceeds the real count on this crate's own sources.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut checked = 0;
    for entry in ignore::Walk::new(&src).flatten() {
        if entry.file_type().is_some_and(|t| t.is_file()) {
            let text = std::fs::read_to_string(entry.path()).unwrap();
            let block = render::block("src/x.rs", &text, &[]);
            assert!(
                fill::estimate(text.len() as u64) <= tokens::count(&block),
                "{}",
                entry.path().display()
            );
            checked += 1;
        }
    }
    assert!(checked > 20);
}

// ---------------------------------------------------------------------------------------------
// Images

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
const JPEG: &[u8] = &[0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10, b'J', b'F', b'I', b'F'];
const GIF: &[u8] = b"GIF89a\x01\0\x01\0";
const WEBP: &[u8] = b"RIFF\x24\0\0\0WEBPVP8 ";

#[test]
fn collector_reads_images_by_their_magic_bytes() {
    let fx = Fixture::new();
    fx.write("img/a.png", PNG);
    fx.write("img/b.jpg", JPEG);
    fx.write("img/c.gif", GIF);
    fx.write("img/d.webp", WEBP);
    fx.write("img/misnamed.txt", PNG);
    fx.write("img/fake.png", "not an image");
    let c = fx.collector();
    let got = c
        .images(&[
            "img/a.png".into(),
            "img/b.jpg".into(),
            "img/c.gif".into(),
            "img/d.webp".into(),
            "img/misnamed.txt".into(),
            "img/a.png".into(),
        ])
        .unwrap();
    let mimes: Vec<&str> = got.iter().map(|i| i.mime.as_str()).collect();
    assert_eq!(
        mimes,
        vec![
            "image/png",
            "image/jpeg",
            "image/gif",
            "image/webp",
            "image/png"
        ]
    );
    assert_eq!(got[0].data.as_slice(), PNG);
    assert_eq!(got[0].display, "img/a.png");

    let err = c.images(&["img/fake.png".into()]).unwrap_err();
    assert!(
        matches!(&err, CollectError::Image { path, .. } if path == "img/fake.png"),
        "{err}"
    );
    assert!(matches!(
        c.images(&["img".into()]),
        Err(CollectError::Image { .. })
    ));
}

#[test]
fn collector_images_follow_the_sandbox_rules() {
    let fx = Fixture::new();
    std::fs::write(fx.outside.join("out.png"), PNG).unwrap();
    fx.link(fx.outside.join("out.png"), "link.png");
    fx.write("id_rsa.png", PNG);
    let big = fx.write("big.png", PNG);
    std::fs::File::options()
        .write(true)
        .open(&big)
        .unwrap()
        .set_len(images::MAX_IMAGE_BYTES + 1)
        .unwrap();
    #[cfg(unix)]
    std::process::Command::new("mkfifo")
        .arg(fx.root.join("pipe.png"))
        .status()
        .unwrap();
    let c = fx.collector();
    let out = fx.outside.join("out.png").display().to_string();
    for p in [out.as_str(), "link.png", "../x.png", "~/x.png"] {
        assert!(
            matches!(
                c.images(&[p.into()]),
                Err(CollectError::Sandbox(SandboxError::Outside { .. }))
            ),
            "{p}"
        );
    }
    assert!(matches!(
        c.images(&["id_rsa.png".into()]),
        Err(CollectError::SecretRefused { .. })
    ));
    let err = c.images(&["big.png".into()]).unwrap_err().to_string();
    assert!(err.contains("inline image limit"), "{err}");
    #[cfg(unix)]
    {
        let err = c.images(&["pipe.png".into()]).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }
}

#[test]
fn collector_read_file_serves_other_readers_safely() {
    let fx = Fixture::new();
    let p = fx.write("a.txt", "hello\n");
    #[cfg(unix)]
    std::process::Command::new("mkfifo")
        .arg(fx.root.join("pipe"))
        .status()
        .unwrap();
    fx.link(fx.root.join("a.txt"), "link");
    let sandbox = Sandbox::new(vec![fx.root.clone()]);
    assert_eq!(
        read_file(&sandbox.check(&p).unwrap(), 100).unwrap(),
        b"hello\n"
    );
    assert_eq!(
        read_file(&sandbox.check(&p).unwrap(), 3),
        Err(Unread::TooLarge)
    );
    // Neither blocks on a FIFO nor follows a symlink, even when handed a checked path.
    #[cfg(unix)]
    assert_eq!(
        read_file(&sandbox.check(&fx.root.join("pipe")).unwrap(), 100),
        Err(Unread::NotRegular)
    );
    assert!(read_file(&sandbox.check(&fx.root.join("link")).unwrap(), 100).is_err());
}

#[test]
fn collector_reuses_counts_of_unchanged_content() {
    let fx = Fixture::new();
    let p = fx.write("a.rs", "fn a() {}\n");
    let c = fx.collector();
    let fresh = c.collect(&request(&["a.rs"], BIG)).unwrap().files.remove(0);
    let known = |hash: &str, tokens| {
        [(p.clone(), (hash.to_string(), tokens))]
            .into_iter()
            .collect()
    };
    let reused = c
        .collect_counted(&request(&["a.rs"], BIG), &known(&fresh.hash, 3))
        .unwrap();
    assert_eq!(reused.files[0].tokens, 3);
    assert_eq!(reused.files[0].text, fresh.text);
    let other = c
        .collect_counted(&request(&["a.rs"], BIG), &known("00", 3))
        .unwrap();
    assert_eq!(other.files[0].tokens, fresh.tokens);
    // A stored count still has to fit the budget.
    let big = c
        .collect_counted(&request(&["a.rs"], 1000), &known(&fresh.hash, 5000))
        .unwrap();
    assert!(big.files.is_empty());
    assert_eq!(reason(&big, "a.rs"), Some(SkipReason::OverBudget));
}

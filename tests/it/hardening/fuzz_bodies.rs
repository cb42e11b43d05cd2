//! The bodies of the fuzz targets, shared by the `fuzz/` crate (cargo-fuzz, nightly: it
//! includes this file with `#[path]`) and by `hardening::fuzz`, which runs them on stable for a
//! bounded number of generated inputs in every `cargo test`.
//!
//! Only `std`, `tempfile` and the library are used here, so that both crates can compile it.
//!
//! - [`path_resolution`]: any string through `Sandbox::resolve` and `Sandbox::check`, then
//!   `sandbox::open`: nothing accepted lies outside the root, nothing opened is outside it (the
//!   opened descriptor's real path is checked), the canary outside is never read, nothing hangs.
//! - [`findings_parser`]: any text through the JSON-mode findings parser, the severity filter
//!   and the Markdown rendering: no panic, and the parsed review keeps its invariants.

#![allow(dead_code)] // The fuzz crate uses one body per target.

use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use gemini_mcp_server::collector::{Sandbox, sandbox};
use gemini_mcp_server::reply::review::{self, Severity};

/// The content of the secret file outside the root: it must never be read or sent.
pub const CANARY: &str = "CANARY-0b1d-outside-the-project-root-never-sent";

/// A hostile tree: a project root, a secret outside it, and symlinks, loops and a FIFO inside.
///
/// ```text
/// base/
///   outside/secret.txt        the canary
///   root-evil/secret.txt      the canary, in a sibling whose name extends the root's
///   root/                     the project root
///     main.rs, sub/a.rs
///     esc -> ../outside       esc_file -> ../outside/secret.txt
///     c1 -> c2 -> c3 -> <base>/outside/secret.txt   (a chain, absolute at the end)
///     in1 -> sub/../in2 -> main.rs                   (a chain that stays inside)
///     loop1 <-> loop2, self -> self, sub/up -> ..    (loops)
///     slash -> /, procroot -> /proc/self/root, stdin -> /dev/stdin   (the last two on Unix)
///     fifo                                           (on Unix, a FIFO: opening it must not block)
///     <255-byte name>.rs
/// ```
pub struct Tree {
    _dir: tempfile::TempDir,
    pub base: PathBuf,
    pub root: PathBuf,
    pub outside: PathBuf,
}

impl Tree {
    pub fn new() -> Tree {
        let dir = tempfile::tempdir().expect("temp dir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical temp dir");
        let root = base.join("root");
        let outside = base.join("outside");
        for d in [&root, &outside, &root.join("sub"), &base.join("root-evil")] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(outside.join("secret.txt"), CANARY).unwrap();
        std::fs::write(base.join("root-evil/secret.txt"), CANARY).unwrap();
        std::fs::write(root.join("main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(root.join("sub/a.rs"), "pub fn a() {}\n").unwrap();
        std::fs::write(root.join(format!("{}.rs", "n".repeat(252))), "// long\n").unwrap();
        let links: &[(&str, PathBuf)] = &[
            ("esc", "../outside".into()),
            ("esc_file", "../outside/secret.txt".into()),
            ("c1", "c2".into()),
            ("c2", "c3".into()),
            ("c3", outside.join("secret.txt")),
            ("in1", "sub/../in2".into()),
            ("in2", "main.rs".into()),
            ("loop1", "loop2".into()),
            ("loop2", "loop1".into()),
            ("self", "self".into()),
            ("sub/up", "..".into()),
            ("slash", "/".into()),
            #[cfg(unix)]
            ("procroot", "/proc/self/root".into()),
            #[cfg(unix)]
            ("stdin", "/dev/stdin".into()),
        ];
        for (name, target) in links {
            symlink(target, &root.join(name))
                .unwrap_or_else(|e| panic!("the link {name} -> {}: {e}", target.display()));
        }
        #[cfg(unix)]
        let fifo = root.join("fifo");
        #[cfg(unix)]
        {
            let made = std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .expect("mkfifo runs");
            assert!(made.success(), "mkfifo {}", fifo.display());
        }
        Tree {
            _dir: dir,
            base,
            root,
            outside,
        }
    }

    pub fn sandbox(&self) -> Sandbox {
        Sandbox::new(vec![self.root.clone()])
    }
}

impl Default for Tree {
    fn default() -> Self {
        Tree::new()
    }
}

/// One tree per process (the fuzzer calls the body millions of times).
pub fn tree() -> &'static Tree {
    static TREE: OnceLock<Tree> = OnceLock::new();
    TREE.get_or_init(Tree::new)
}

/// Fuzz target `path_resolution`: the input, as text, is a user-given path.
pub fn path_resolution(data: &[u8]) {
    let raw = String::from_utf8_lossy(data);
    let t = tree();
    check_path(t, &t.sandbox(), &raw);
}

/// What must hold for any path string. Returns whether `resolve` accepted it.
pub fn check_path(t: &Tree, sandbox: &Sandbox, raw: &str) -> bool {
    let accepted = match sandbox.resolve(raw) {
        Ok(p) => {
            let path = p.as_path();
            assert!(
                inside(path, &t.root),
                "{raw:?} resolved outside the root: {}",
                path.display()
            );
            assert_eq!(
                std::fs::canonicalize(path).ok().as_deref(),
                Some(path),
                "{raw:?} resolved to a path that is not canonical"
            );
            opened_stays_inside(t, &p, raw);
            true
        }
        Err(e) => {
            assert!(!e.to_string().contains(CANARY), "{raw:?}: {e}");
            false
        }
    };
    // `check` trusts its caller to pass a canonical path; whatever it is given, it accepts only
    // lexically-inside absolute paths, and `open` refuses any symlink on the way.
    if let Some(p) = sandbox.check(Path::new(raw)) {
        assert!(
            p.as_path().starts_with(&t.root)
                && !p
                    .as_path()
                    .components()
                    .any(|c| matches!(c, Component::ParentDir | Component::CurDir)),
            "check accepted {raw:?}"
        );
        opened_stays_inside(t, &p, raw);
    }
    accepted
}

/// `p` opened through the sandbox is a file inside the root, and reading it never yields the
/// canary.
fn opened_stays_inside(t: &Tree, p: &gemini_mcp_server::collector::SandboxedPath, raw: &str) {
    let Ok(mut file) = sandbox::open(p) else {
        return;
    };
    #[cfg(unix)]
    let real = {
        use std::os::fd::AsRawFd;
        std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .expect("the descriptor's path")
    };
    #[cfg(windows)]
    let real = gemini_mcp_server::collector::handle::final_path(&file).expect("the handle's path");
    assert!(
        inside(&real, &t.root),
        "{raw:?}: opened {} outside the root",
        real.display()
    );
    // Non-blocking: a FIFO answers at once (nothing to read), never hangs.
    let mut buf = Vec::new();
    let _ = (&mut file).take(1 << 16).read_to_end(&mut buf);
    assert!(
        !String::from_utf8_lossy(&buf).contains(CANARY),
        "{raw:?}: read the canary through {}",
        real.display()
    );
}

/// A symbolic link.
#[cfg(unix)]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

/// A symbolic link (on Windows a directory link when the target, read from the link's
/// directory, is a directory).
#[cfg(windows)]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    match link
        .parent()
        .unwrap_or(Path::new("."))
        .join(target)
        .is_dir()
    {
        true => std::os::windows::fs::symlink_dir(target, link)?,
        false => std::os::windows::fs::symlink_file(target, link)?,
    }
    // Wine 8's CreateSymbolicLinkW is a stub: it reports success and makes nothing.
    link.symlink_metadata().map(|_| ()).map_err(|e| {
        std::io::Error::other(format!(
            "creating it reported success, but there is no link: {e}"
        ))
    })
}

/// `path` is `root` or below it, component-wise (a sibling `root-evil` is not inside).
pub fn inside(path: &Path, root: &Path) -> bool {
    path.starts_with(root)
}

/// Fuzz target `findings_parser`: the input, as text, is Gemini's JSON-mode answer.
pub fn findings_parser(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = review::clarification_in_text(&text);
    let Ok(mut r) = review::parse(&text) else {
        return;
    };
    for pair in r.findings.windows(2) {
        assert!(
            pair[0].severity >= pair[1].severity,
            "findings not sorted by severity: {pair:?}"
        );
    }
    for f in &r.findings {
        assert!(
            !f.title.trim().is_empty(),
            "a finding without a title: {f:?}"
        );
        assert!(
            !f.detail.trim().is_empty(),
            "a finding without detail: {f:?}"
        );
        assert_ne!(f.line, Some(0), "line 0: {f:?}");
    }
    if let Some(c) = &r.clarification {
        assert!(!c.question.trim().is_empty());
    }
    let all = r.findings.len();
    let high = r
        .findings
        .iter()
        .filter(|f| f.severity >= Severity::High)
        .count();
    let dropped = review::filter(&mut r, Severity::High);
    assert_eq!(r.findings.len(), high);
    assert_eq!(dropped, all - high);
    let md = review::render(&r, dropped, Severity::High);
    assert!(!md.is_empty());
    for f in &r.findings {
        assert!(md.contains(&f.title), "{:?} not rendered", f.title);
    }
}

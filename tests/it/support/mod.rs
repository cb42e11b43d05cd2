//! Test support shared by the integration tests.

pub mod anthropic_api;
pub mod fake_gemini;
pub mod gemma_ref;
pub mod http;
pub mod mcp;
pub mod otlp;
pub mod project;
pub mod redis;
pub mod responses_api;
pub mod scripted_model;

/// A symbolic link, made as the platform makes one: on Windows a directory link when the target
/// (a relative one read from the link's directory) is a directory, a file link otherwise.
pub fn symlink(target: impl AsRef<std::path::Path>, link: impl AsRef<std::path::Path>) {
    let (target, link) = (target.as_ref(), link.as_ref());
    #[cfg(unix)]
    let made = std::os::unix::fs::symlink(target, link);
    #[cfg(windows)]
    let made = match link
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .join(target)
        .is_dir()
    {
        true => std::os::windows::fs::symlink_dir(target, link),
        false => std::os::windows::fs::symlink_file(target, link),
    };
    made.unwrap_or_else(|e| panic!("symlink {} -> {}: {e}", link.display(), target.display()));
    // Wine's CreateSymbolicLinkW reports success and makes nothing.
    assert!(
        link.symlink_metadata().is_ok(),
        "no link was made at {}",
        link.display()
    );
}

/// Every file below `dir`.
pub fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

//! The projects the tests' servers work in: temporary directories holding a few files, made one
//! way. The common ones are named here; a test with files of its own passes them to [`with`].

use std::path::Path;

use tempfile::TempDir;

/// `main.rs` with an empty `main`: a project to point a server at, whose content no test reads.
pub const MAIN_RS: (&str, &str) = ("main.rs", "fn main() {}\n");

/// `src/lib.rs` with a bug to find: `add` subtracts.
pub const BUGGY_ADD: (&str, &str) = (
    "src/lib.rs",
    "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
);

/// `src/lib.rs` with one empty function: a file to name, whose content does not matter.
pub const STUB_LIB: (&str, &str) = ("src/lib.rs", "pub fn add() {}\n");

/// A temporary directory holding `files` (path below it, content).
pub fn with(files: &[(&str, &str)]) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (rel, content) in files {
        write(dir.path(), rel, content);
    }
    dir
}

/// Writes `content` to `rel` below `root`, making its directories.
pub fn write(root: &Path, rel: &str, content: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

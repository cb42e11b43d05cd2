//! The physical floors the collector's figures are compared with (`benches/collector.rs`,
//! `examples/first_request.rs`): `cat` of the files sent, and listing every directory of the
//! corpus, which any walk pays.

use std::path::Path;
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error>;

/// How long `cat` takes to read `files` (to /dev/null), as one process.
pub fn cat<P: AsRef<Path>>(files: &[P]) -> Result<Duration, Error> {
    let t = Instant::now();
    let status = std::process::Command::new("cat")
        .args(files.iter().map(AsRef::as_ref))
        .stdout(std::process::Stdio::null())
        .status()?;
    let elapsed = t.elapsed();
    if !status.success() {
        return Err("cat failed".into());
    }
    Ok(elapsed)
}

/// Entries below `root`, listed directory by directory (one thread, the entry types from the
/// listing as the walk takes them, nothing opened).
pub fn list(root: &Path) -> std::io::Result<usize> {
    let mut n = 0;
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            n += 1;
            if entry.file_type()?.is_dir() {
                dirs.push(entry.path());
            }
        }
    }
    Ok(n)
}

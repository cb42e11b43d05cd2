//! The reference Gemini tokenizer for the budget test and the calibration example
//! (`examples/calibrate.rs` includes this file): Gemma-3's SentencePiece model (the tokenizer of
//! gemini-2.x and gemini-3-*-preview) loaded with the pure-Rust `kitoken`. Test code: never part
//! of the library or the shipped binary.
//!
//! The model file (4,689,074 bytes) is not in this repository. It is found at
//! `$GEMMA3_TOKENIZER_MODEL`, else in the cargo registry where the `gemini-tokenizer` crate
//! ships it, and accepted only with the expected SHA-256. When it is in neither, [`load`] asks
//! cargo to download that crate's source once (`cargo info gemini-tokenizer`: a download into
//! the registry, nothing compiled), so `cargo test` on a fresh machine runs the tests that need
//! it.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

/// SHA-256 of `gemma3_cleaned_262144_v2.spiece.model`.
pub const MODEL_SHA256: &str = "1299c11d7cf632ef3b4e11937501358ada021bbdf7c47638d13c0ee982f2e79c";

/// Where the model file is, if it is on this machine.
pub fn model_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GEMMA3_TOKENIZER_MODEL") {
        return Some(PathBuf::from(p));
    }
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| {
            // Cargo's own default: the home directory (`USERPROFILE` on Windows).
            let home = std::env::var_os("HOME").or_else(|| std::env::var_os("USERPROFILE"))?;
            Some(PathBuf::from(home).join(".cargo"))
        })?;
    let mut found: Vec<PathBuf> = std::fs::read_dir(cargo_home.join("registry/src"))
        .ok()?
        .flatten()
        .flat_map(|index| {
            std::fs::read_dir(index.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("gemini-tokenizer-")
        })
        .map(|e| {
            e.path()
                .join("resources/gemma3_cleaned_262144_v2.spiece.model")
        })
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found.pop()
}

/// Downloads the `gemini-tokenizer` crate's source into the cargo registry (`$CARGO` is set
/// when cargo runs the tests or an example).
fn fetch() {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let _ = std::process::Command::new(cargo)
        .args(["info", "--quiet", "gemini-tokenizer@0.2.0"])
        .current_dir(std::env::temp_dir())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// The Gemma-3 tokenizer, or why it is not available.
pub fn load() -> Result<kitoken::Kitoken, String> {
    let path = model_path()
        .or_else(|| {
            fetch();
            model_path()
        })
        .ok_or(
            "Gemma-3 tokenizer model not found: set GEMMA3_TOKENIZER_MODEL or run `cargo info gemini-tokenizer` \
             (it could not be downloaded)",
        )?;
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let sum = hex::encode(Sha256::digest(&bytes));
    if sum != MODEL_SHA256 {
        return Err(format!(
            "{}: SHA-256 {sum}, expected {MODEL_SHA256}",
            path.display()
        ));
    }
    kitoken::Kitoken::from_sentencepiece_slice(&bytes)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Gemma-3 token count of `text`, as Gemini's local tokenizer counts a text part.
pub fn count(tok: &kitoken::Kitoken, text: &str) -> u64 {
    match tok.encode(text, false) {
        Ok(t) => t.len() as u64,
        Err(e) => panic!("kitoken cannot encode: {e}"),
    }
}

//! The `fuzz/` targets on stable: their bodies ([`super::fuzz_bodies`]) run over the seed
//! corpus in `fuzz/seeds/<target>/` and then over inputs generated from a fixed seed (so a
//! failure reproduces) by splicing a dictionary of hostile fragments, mutating seeds and adding
//! random bytes. 20,000 inputs per target by default (CI), 2,000,000 with
//! `GEMINI_MCP_LONG_TESTS=1`; `GEMINI_MCP_FUZZ_SEED` picks another seed. The real fuzzing, with
//! coverage feedback, is `cargo +nightly fuzz run <target>` in `fuzz/`.

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;

use super::fuzz_bodies;
use super::long_tests;

fn iterations() -> usize {
    if long_tests() { 2_000_000 } else { 20_000 }
}

fn seed() -> u64 {
    std::env::var("GEMINI_MCP_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x6a11_f00d)
}

/// The seed corpus of a target, as cargo-fuzz keeps it (one input per file).
fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target);
    let mut inputs: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "no seed corpus in {}", dir.display());
    inputs.into_iter().map(|(_, b)| b).collect()
}

/// Inputs: the seeds, then generated ones.
fn generate(seeds: &[Vec<u8>], dictionary: &[Vec<u8>], n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut out: Vec<Vec<u8>> = seeds.to_vec();
    while out.len() < seeds.len() + n {
        let input = match rng.u8(0..4) {
            // Fragments spliced together.
            0 | 1 => {
                let mut v = Vec::new();
                for _ in 0..rng.usize(1..10) {
                    v.extend_from_slice(&dictionary[rng.usize(0..dictionary.len())]);
                }
                v
            }
            // A seed with a few byte-level mutations.
            2 => {
                let mut v = seeds[rng.usize(0..seeds.len())].clone();
                for _ in 0..rng.usize(1..6) {
                    let at = rng.usize(0..=v.len());
                    match rng.u8(0..4) {
                        0 if !v.is_empty() => {
                            let i = rng.usize(0..v.len());
                            v[i] = rng.u8(..);
                        }
                        1 if at < v.len() => {
                            let end = rng.usize(at..=v.len());
                            v.drain(at..end);
                        }
                        2 => {
                            let frag = &dictionary[rng.usize(0..dictionary.len())];
                            v.splice(at..at, frag.iter().copied());
                        }
                        _ => v.insert(at, rng.u8(..)),
                    }
                }
                v
            }
            // Random bytes.
            _ => (0..rng.usize(0..64)).map(|_| rng.u8(..)).collect(),
        };
        out.push(input);
    }
    out
}

/// Runs `body` on every input; a failure names the input and how to reproduce it.
fn run(target: &str, body: fn(&[u8]), dictionary: &[Vec<u8>]) {
    let seeds = corpus(target);
    let seed = seed();
    let inputs = generate(&seeds, dictionary, iterations(), seed);
    for (i, input) in inputs.iter().enumerate() {
        if let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(|| body(input))) {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!(
                "{target}: input #{i} (GEMINI_MCP_FUZZ_SEED={seed}) failed: {msg}\ninput: {:?}",
                String::from_utf8_lossy(input)
            );
        }
    }
    eprintln!("{target}: {} inputs", inputs.len());
}

fn words(list: &[&str]) -> Vec<Vec<u8>> {
    list.iter().map(|s| s.as_bytes().to_vec()).collect()
}

#[test]
fn hardening_fuzz_path_resolution_on_stable() {
    if crate::support::links_missing() {
        return;
    }
    let t = fuzz_bodies::tree();
    let mut dict = words(&[
        "..",
        ".",
        "/",
        "//",
        "\\",
        "../",
        "..\\",
        "....//",
        "%2e",
        "%2f",
        "%252e",
        "%c0%ae",
        "\u{ff0e}",
        "\u{ff0f}",
        "\u{2025}",
        "\u{2215}",
        "~",
        "~root/",
        "\0",
        "%00",
        "esc",
        "esc/",
        "esc_file",
        "c1",
        "in1",
        "loop1",
        "self",
        "sub/",
        "sub/up/",
        "slash/",
        "procroot/",
        "stdin",
        "fifo",
        "main.rs",
        "secret.txt",
        "outside/",
        "root-evil/",
        "etc/passwd",
        "/proc/self/root",
        "/proc/self/cwd/",
        "/proc/self/fd/0",
        "/dev/stdin",
        "/dev/zero",
        "C:\\",
        "\\\\?\\",
        "\\\\server\\share\\",
        "file://",
        " ",
        "\n",
        "*",
        "?",
        "{a,b}",
    ]);
    for p in [&t.root, &t.outside, &t.base] {
        dict.push(p.to_string_lossy().as_bytes().to_vec());
        dict.push(format!("{}/", p.display()).into_bytes());
    }
    dict.push("a".repeat(300).into_bytes());
    run("path_resolution", fuzz_bodies::path_resolution, &dict);
}

#[test]
fn hardening_fuzz_findings_parser_on_stable() {
    let dict = words(&[
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "```json\n",
        "```",
        "\n",
        "\"summary\":",
        "\"findings\":",
        "\"issues\":",
        "\"severity\":",
        "\"critical\"",
        "\"HIGH\"",
        "\"nit\"",
        "\"file\":",
        "\"line\":",
        "0",
        "-1",
        "4294967296",
        "\"12-14\"",
        "\":7\"",
        "1e400",
        "\"title\":",
        "\"issue\":",
        "\"detail\":",
        "\"description\":",
        "\"fix\":",
        "null",
        "true",
        "\"\"",
        "\" \\n \"",
        "\"verdict\":",
        "\"blocked\"",
        "\"clarification\":",
        "\"question\":",
        "\"files_needed\":",
        "\"status\":",
        "\"requires_clarification\"",
        "\u{1F600}",
        "\\u0000",
        "\\ud800",
        "é",
    ]);
    run("findings_parser", fuzz_bodies::findings_parser, &dict);
}

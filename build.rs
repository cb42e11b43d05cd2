//! Writes the o200k vocabulary in the form `collector::bpe` reads without parsing or copying:
//! `OUT_DIR/o200k.bin` holds the number of tokens (u32, little-endian), then the end offset of
//! each rank's bytes (u32 each, rank order), then every token's bytes in rank order. The
//! vocabulary is tiktoken-rs's, the one the exactness tests compare the counts against.

use std::io::Write;

/// o200k_base's ordinary tokens are the ranks below this (199,999 and 200,018 are special).
const TOKENS: u32 = 199_998;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let bpe = tiktoken_rs::o200k_base().expect("the o200k vocabulary loads");
    let mut ends = Vec::with_capacity(TOKENS as usize);
    let mut arena = Vec::new();
    for rank in 0..TOKENS {
        let bytes = bpe
            .decode_bytes(&[rank])
            .unwrap_or_else(|e| panic!("o200k rank {rank} has no bytes: {e:?}"));
        arena.extend_from_slice(&bytes);
        ends.push(u32::try_from(arena.len()).expect("the vocabulary fits in 4 GiB"));
    }
    let out =
        std::path::Path::new(&std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("o200k.bin");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&out).expect("create o200k.bin"));
    file.write_all(&TOKENS.to_le_bytes()).unwrap();
    for end in ends {
        file.write_all(&end.to_le_bytes()).unwrap();
    }
    file.write_all(&arena).unwrap();
    file.flush().unwrap();
}

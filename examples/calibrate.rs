//! Measures how Gemini's tokenizer (Gemma-3 SentencePiece, via kitoken) counts real files against
//! o200k, raw and as rendered for Gemini (numbered lines). Writes one CSV row per file and prints
//! a summary per extension; BENCHMARKS.md § Token calibration records the result.
//!
//! `cargo run --release --example calibrate -- OUT.csv DIR...`
//!
//! `cargo run --release --example calibrate -- verify BUDGET DIR...` collects each DIR with the
//! real collector under BUDGET and counts what would be sent with Gemini's tokenizer.
//!
//! `cargo run --release --example calibrate -- exact DIR...` checks that the fast o200k counter
//! (`collector::o200k`) equals tiktoken-rs's `encode_ordinary` on every file, raw and rendered,
//! and times both.

#[path = "../tests/it/support/gemma_ref.rs"]
mod gemma_ref;

use std::collections::BTreeMap;
use std::io::Write;

use gemini_mcp_server::collector::{CollectRequest, Collector, o200k, render, tokens};
use gemini_mcp_server::config::Config;

type Error = Box<dyn std::error::Error>;

fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let out = args
        .next()
        .ok_or("usage: calibrate OUT.csv DIR... | verify BUDGET DIR...")?;
    if out == "verify" {
        let budget: u64 = args.next().ok_or("verify BUDGET DIR...")?.parse()?;
        return verify(budget, &args.collect::<Vec<_>>());
    }
    if out == "exact" {
        return exact(&args.collect::<Vec<_>>());
    }
    let dirs: Vec<String> = args.collect();
    let gemma = gemma_ref::load()?;
    let mut csv = std::io::BufWriter::new(std::fs::File::create(&out)?);
    writeln!(
        csv,
        "path,ext,bytes,raw_o200k,raw_gemma,raw_digits,blk_bytes,blk_o200k,blk_gemma,blk_digits,calibrated,lines,nonascii"
    )?;
    // files, blk_o200k, blk_gemma, calibrated, files where gemma > calibrated
    let mut by_ext: BTreeMap<String, [u64; 5]> = BTreeMap::new();
    for dir in &dirs {
        let walk = ignore::WalkBuilder::new(dir)
            .filter_entry(|e| {
                let n = e.file_name().to_string_lossy();
                n != "__pycache__" && n != "site-packages" && n != "target"
            })
            .build();
        for entry in walk.flatten() {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let path = entry.path();
            let Ok(bytes) = std::fs::read(path) else {
                continue;
            };
            if bytes.len() > 10 << 20 || bytes[..bytes.len().min(8192)].contains(&0) {
                continue;
            }
            let Ok(text) = String::from_utf8(bytes) else {
                continue;
            };
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let ext = match name.rsplit_once('.') {
                Some((stem, e)) if !stem.is_empty() => format!(".{e}"),
                _ => name.clone(),
            };
            let display = path
                .strip_prefix(dir)
                .unwrap_or(path)
                .to_string_lossy()
                .into_owned();
            let block = render::block(&display, &text, &[]);
            let digits = |s: &str| s.bytes().filter(u8::is_ascii_digit).count();
            let raw_o = tokens::o200k(&text);
            let raw_g = gemma_ref::count(&gemma, &text);
            let blk_o = tokens::o200k(&block);
            let blk_g = gemma_ref::count(&gemma, &block);
            let cal = tokens::count(&block);
            writeln!(
                csv,
                "{:?},{:?},{},{raw_o},{raw_g},{},{},{blk_o},{blk_g},{},{cal},{},{}",
                path.display().to_string(),
                ext,
                text.len(),
                digits(&text),
                block.len(),
                digits(&block),
                render::line_count(&text),
                text.bytes().filter(|b| !b.is_ascii()).count(),
            )?;
            let e = by_ext.entry(ext).or_default();
            e[0] += 1;
            e[1] += blk_o;
            e[2] += blk_g;
            e[3] += cal;
            e[4] += u64::from(blk_g > cal);
        }
    }
    let mut rows: Vec<_> = by_ext.into_iter().collect();
    rows.sort_by_key(|(_, v)| std::cmp::Reverse(v[2]));
    println!(
        "| ext | files | o200k | Gemini | Gemini ÷ o200k | calibrated ÷ Gemini | files over |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut total = [0u64; 5];
    for (_, v) in &rows {
        for (t, x) in total.iter_mut().zip(v) {
            *t += x;
        }
    }
    for (ext, v) in rows
        .iter()
        .take(25)
        .chain(std::iter::once(&("all".to_string(), total)))
    {
        println!(
            "| {ext} | {} | {} | {} | {:.3} | {:.3} | {} |",
            v[0],
            v[1],
            v[2],
            v[2] as f64 / v[1] as f64,
            v[3] as f64 / v[2] as f64,
            v[4]
        );
    }
    Ok(())
}

/// Collects each directory under `budget` and counts the result with Gemini's tokenizer.
fn verify(budget: u64, dirs: &[String]) -> Result<(), Error> {
    let gemma = gemma_ref::load()?;
    println!(
        "| corpus | budget | files sent | calibrated | Gemini | Gemini ÷ budget | Gemini ÷ calibrated |"
    );
    println!("|---|---|---|---|---|---|---|");
    for dir in dirs {
        let collector = Collector::new(&Config::for_tests(std::path::Path::new(dir)).collector())?;
        let c = collector.collect(&CollectRequest {
            paths: vec![".".into()],
            budget,
            already_sent: Default::default(),
            ignore: None,
        })?;
        // As the prompt carries them: each block followed by a blank line.
        let prompt: String = c.files.iter().map(|f| format!("{}\n", f.text)).collect();
        let g = gemma_ref::count(&gemma, &prompt);
        println!(
            "| {dir} | {budget} | {} | {} | {g} | {:.3} | {:.3} |",
            c.files.len(),
            c.tokens,
            g as f64 / budget as f64,
            g as f64 / c.tokens as f64
        );
    }
    Ok(())
}

/// Compares the fast counter with tiktoken on every text file under `dirs`.
fn exact(dirs: &[String]) -> Result<(), Error> {
    let bpe = tiktoken_rs::o200k_base_singleton();
    let (mut files, mut bytes, mut mismatches) = (0u64, 0u64, 0u64);
    let (mut fast, mut slow) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
    for dir in dirs {
        for entry in ignore::WalkBuilder::new(dir).build().flatten() {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(entry.path()) else {
                continue;
            };
            if text.len() > 10 << 20 || text.as_bytes()[..text.len().min(8192)].contains(&0) {
                continue;
            }
            let block = render::block("f", &text, &[]);
            for t in [&text, &block] {
                let start = std::time::Instant::now();
                let a = o200k::count(t);
                fast += start.elapsed();
                let start = std::time::Instant::now();
                let b = bpe.encode_ordinary(t).len() as u64;
                slow += start.elapsed();
                bytes += t.len() as u64;
                if a != b {
                    mismatches += 1;
                    println!("MISMATCH {} ({} vs {})", entry.path().display(), a, b);
                }
            }
            files += 1;
        }
    }
    let mb = bytes as f64 / 1e6;
    println!(
        "{files} files, {mb:.1} MB (raw + rendered): {mismatches} mismatches; fast {:.1} MB/s, tiktoken {:.1} MB/s",
        mb / fast.as_secs_f64(),
        mb / slow.as_secs_f64()
    );
    Ok(())
}

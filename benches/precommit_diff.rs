//! Benchmark: `git::read_changes` (precommit's diff collection) on a change of 500 files across
//! three nested repositories. Target (BENCHMARKS.md): under 200 ms.
//!
//! `cargo bench --bench precommit_diff` builds the repositories with git2 in a temporary
//! directory, then times whole `read_changes` calls (discovery, three git2 passes per repository,
//! redaction, token counting, budget, rendering) and prints the median and the spread.
//!
//! The change: per repository, 40% of the changed files are staged modifications, 30% unstaged
//! modifications and 30% new untracked files; every file is a ~120-line Rust source, every
//! modification touches 8 lines in two places. Repositories: the outer one (250 changed files),
//! `services/api` (150) and `services/api/libs/core` (100), nested inside each other.

use std::path::Path;
use std::time::{Duration, Instant};

use gemini_mcp_server::collector::Collector;
use gemini_mcp_server::config::Config;
use gemini_mcp_server::git::{DiffRequest, read_changes};
use git2::{Repository, Signature};

const RUNS: usize = 21;

fn source(repo: &str, i: usize, variant: &str) -> String {
    let mut s = format!("//! Module {i} of {repo}.\n\nuse std::collections::HashMap;\n\n");
    for f in 0..12 {
        s.push_str(&format!(
            "/// Function {f}.\npub fn f_{i}_{f}(input: &[u32]) -> u32 {{\n    let mut total = 0;\n    for x in input {{\n        total += x * {f};\n    }}\n    let _m: HashMap<u32, u32> = HashMap::new();\n    total\n}}\n\n"
        ));
        if f == 3 || f == 9 {
            for k in 0..4 {
                s.push_str(&format!("// {variant} note {k} for f_{i}_{f}\n"));
            }
        }
    }
    s
}

fn build(root: &Path, rel: &str, changed: usize) {
    let dir = root.join(rel);
    std::fs::create_dir_all(&dir).unwrap();
    let repo = Repository::init(&dir).unwrap();
    let staged = changed * 4 / 10;
    let unstaged = changed * 3 / 10;
    let tracked = staged + unstaged;
    let mut index = repo.index().unwrap();
    // Tracked files, plus as many unchanged ones, committed.
    for i in 0..tracked * 2 {
        let p = format!("src/m{i:04}.rs");
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join(&p), source(rel, i, "original")).unwrap();
        index.add_path(Path::new(&p)).unwrap();
    }
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = Signature::now("Bench", "bench@example.com").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "base", &tree, &[])
        .unwrap();
    for i in 0..staged {
        let p = format!("src/m{i:04}.rs");
        std::fs::write(dir.join(&p), source(rel, i, "staged")).unwrap();
        index.add_path(Path::new(&p)).unwrap();
    }
    index.write().unwrap();
    for i in staged..tracked {
        std::fs::write(
            dir.join(format!("src/m{i:04}.rs")),
            source(rel, i, "unstaged"),
        )
        .unwrap();
    }
    for i in 0..changed - tracked {
        std::fs::write(dir.join(format!("src/new{i:04}.rs")), source(rel, i, "new")).unwrap();
    }
}

/// CPU time of this thread so far (Linux: the first field of schedstat, in ns): unlike the wall
/// clock, it does not grow when other processes share the cores.
fn cpu_time() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    build(&root, ".", 250);
    build(&root, "services/api", 150);
    build(&root, "services/api/libs/core", 100);
    let collector = Collector::new(&Config::for_tests(&root).collector()).unwrap();

    println!("load average before: {}", load());
    for (label, budget) in [
        (
            "budget 1,000,000 tokens (every diff, then context up to the cap)",
            1_000_000,
        ),
        ("budget 200,000 tokens (the budget cuts the diffs)", 200_000),
    ] {
        let req = DiffRequest {
            path: ".".into(),
            include_staged: true,
            include_unstaged: true,
            include_untracked: true,
            compare_to: None,
            max_depth: 5,
            budget,
            index_file: None,
            ignore: None,
        };
        // Warm-up: the tokenizer's tables, the page cache.
        let d = read_changes(&collector, &req).unwrap();
        assert_eq!(d.changed.len(), 500, "the fixture has 500 changed files");
        assert_eq!(d.repos.len(), 3);
        let mut times = Vec::with_capacity(RUNS);
        let cpu_before = cpu_time();
        for _ in 0..RUNS {
            let t = Instant::now();
            let d = read_changes(&collector, &req).unwrap();
            times.push(t.elapsed());
            std::hint::black_box(d);
        }
        let cpu = cpu_before
            .zip(cpu_time())
            .map(|(a, b)| format!("{:.1} ms", (b - a).as_secs_f64() * 1e3 / RUNS as f64))
            .unwrap_or_else(|| "?".into());
        let min = *times.iter().min().unwrap();
        let max = *times.iter().max().unwrap();
        println!(
            "{label}: median {:.1} ms (min {:.1}, max {:.1}, {RUNS} runs; CPU {cpu} per call); {} changed files in {} repositories, {} tokens, {} context files, {} diffs left out",
            median(times).as_secs_f64() * 1e3,
            min.as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3,
            d.changed.len(),
            d.repos.len(),
            d.tokens,
            d.context_files.len(),
            d.skipped.len()
        );
    }
    println!("load average after: {}", load());
}

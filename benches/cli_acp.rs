//! The CLI backend, warm over ACP against one process per call (BENCHMARKS.md § CLI backend over
//! ACP): the real Gemini CLI (installed by `.ci/install-clients`) against the tests' fake Gemini
//! API, which answers at once, so what is measured is the CLI's own cost per call. The warm calls
//! run first, then the warm process is stopped and the per-call ones run (two CLI processes on
//! one home were seen to delay each other by ~13 s, so they are not interleaved). Reports the
//! first warm call (the process start) apart, the median and p90 time to answer of each path,
//! and the resident memory of the warm process.
//!
//! ```sh
//! .ci/install-clients
//! cargo bench --bench cli_acp -- [CALLS]    # BENCH_TRACE=1 also lists the fake API's requests
//! ```

#[path = "../tests/it/support/fake_gemini/mod.rs"]
mod fake_gemini;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fake_gemini::FakeGemini;
use gemini_mcp_server::config::{BackendChoice, Config};
use gemini_mcp_server::gemini::{
    CallContext, Catalogue, CliTransport, Gemini, GenerateRequest, Message, ThinkingMode,
};

type Error = Box<dyn std::error::Error>;

fn main() -> Result<(), Error> {
    let calls: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    let clients = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/clients/node_modules");
    let cli = clients.join(".bin/gemini");
    if !cli.exists() {
        return Err(format!("{} is missing: run .ci/install-clients", cli.display()).into());
    }
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(run(&cli, &clients.join("node/bin"), calls))
}

async fn run(cli: &Path, node: &Path, calls: usize) -> Result<(), Error> {
    let fake = FakeGemini::start();
    let dir = tempfile::tempdir()?;
    let root = tempfile::tempdir()?;
    let wrapper = wrapper(cli, node, &fake.base_url(), dir.path())?;
    let gemini = |transport| -> Result<Gemini, Error> {
        let mut c = Config::for_tests(root.path());
        c.gemini.backend = BackendChoice::Cli;
        c.gemini.cli_transport = transport;
        c.gemini.gemini_cli = wrapper.clone();
        c.gemini.call_timeout = Duration::from_secs(120);
        c.gemini.acp_idle = Duration::from_secs(600);
        c.gemini.acp_max_processes = 2;
        Ok(Gemini::from_config(&c.gemini())?)
    };
    let warm = gemini(CliTransport::Acp)?;
    let per_call = gemini(CliTransport::Headless)?;
    let req = GenerateRequest {
        model: Catalogue::builtin(
            "flash",
            gemini_mcp_server::gemini::prices::PriceList::default(),
        )
        .resolve("flash")?,
        system_instruction: "You review code. ".repeat(100),
        contents: vec![Message::user(
            "Is a trie overkill for 200 routes? ".repeat(50),
        )],
        thinking: ThinkingMode::Low,
        temperature: None,
        response_schema: None,
        web_search: false,
        cache: None,
        previous: None,
        agent: None,
        functions: None,
    };
    let ctx = CallContext::default();
    let t = Instant::now();
    let first = warm.generate(req.clone(), &ctx).await?;
    let first_ms = ms(t.elapsed());
    assert!(first.text.starts_with("FAKE-REPLY"), "{}", first.text);
    let (mut w, mut p) = (Vec::new(), Vec::new());
    for _ in 0..calls {
        let t = Instant::now();
        let a = warm.generate(req.clone(), &ctx).await?;
        w.push(t.elapsed());
        assert!(a.text.starts_with("FAKE-REPLY"), "{}", a.text);
    }
    // Measured before the per-call block, and the warm process stopped before it: two CLI
    // processes on one home were seen to hold each other up for ~13 s.
    let rss = warm_rss_kib(cli);
    warm.abort();
    tokio::time::sleep(Duration::from_millis(500)).await;
    for _ in 0..calls {
        let t = Instant::now();
        let b = per_call.generate(req.clone(), &ctx).await?;
        p.push(t.elapsed());
        assert!(b.text.starts_with("FAKE-REPLY"), "{}", b.text);
    }
    println!("first warm call (process start + handshake + answer): {first_ms:.0} ms");
    println!("| path | calls | median ms | p90 ms | min | max |");
    println!("|---|---|---|---|---|---|");
    for (name, times) in [("warm ACP process", &w), ("one process per call", &p)] {
        let mut t = times.clone();
        t.sort();
        println!(
            "| {name} | {} | {:.0} | {:.0} | {:.0} | {:.0} |",
            t.len(),
            ms(t[t.len() / 2]),
            ms(t[(t.len() * 9 / 10).min(t.len() - 1)]),
            ms(t[0]),
            ms(t[t.len() - 1])
        );
    }
    let (mut ws, mut ps) = (w.clone(), p.clone());
    ws.sort();
    ps.sort();
    println!(
        "per-call median ÷ warm median: {:.1}×",
        ps[ps.len() / 2].as_secs_f64() / ws[ws.len() / 2].as_secs_f64()
    );
    match rss {
        Some(kib) => println!(
            "warm process resident memory: {:.0} MiB",
            kib as f64 / 1024.0
        ),
        None => println!("warm process resident memory: not found"),
    }
    if std::env::var_os("BENCH_TRACE").is_some() {
        let start = fake.requests().first().map(|r| r.at);
        for r in fake.requests() {
            let at = start.map_or(0.0, |s| ms(r.at.duration_since(s)));
            eprintln!("{at:>9.0} ms {} {}", r.method, r.path);
        }
    }
    warm.abort();
    Ok(())
}

/// The real CLI in a throw-away home, logged in with a dummy key against the fake API.
#[cfg(unix)]
fn wrapper(cli: &Path, node: &Path, base_url: &str, dir: &Path) -> Result<PathBuf, Error> {
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".gemini"))?;
    std::fs::write(
        home.join(".gemini/settings.json"),
        r#"{"security":{"auth":{"selectedType":"gemini-api-key"}},"privacy":{"usageStatisticsEnabled":false},"general":{"disableAutoUpdate":true}}"#,
    )?;
    let path = dir.join("gemini");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nexec env PATH='{node}':\"$PATH\" HOME='{home}' TERM=dumb GEMINI_API_KEY=dummy-key \
             GOOGLE_GEMINI_BASE_URL='{base_url}' GEMINI_CLI_TRUST_WORKSPACE=true '{cli}' \"$@\"\n",
            node = node.display(),
            home = home.display(),
            cli = cli.display(),
        ),
    )?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path)
}

/// The wrapper is a POSIX shell script (on Windows it would be a `gemini.cmd` setting the same
/// variables around npm's `gemini.cmd` shim).
#[cfg(not(unix))]
fn wrapper(_cli: &Path, _node: &Path, _base_url: &str, _dir: &Path) -> Result<PathBuf, Error> {
    Err("this benchmark runs on Unix only: its CLI wrapper is a POSIX shell script".into())
}

/// VmRSS of the running `gemini --acp` (the CLI runs as one Node process: no relaunch).
fn warm_rss_kib(cli: &Path) -> Option<u64> {
    let out = std::process::Command::new("pgrep")
        .args(["-f", "--", "--acp"])
        .output()
        .ok()?;
    let _ = cli;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{}/status", pid.trim())).ok())
        .filter_map(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .max()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

//! The collector's token budget as Gemini itself counts it: the calibrated o200k count the
//! collector fills to must not let Gemini's own tokenizer (Gemma-3) count more than the budget.

use std::collections::HashMap;
use std::path::Path;

use gemini_mcp_server::collector::{CollectRequest, Collector};
use gemini_mcp_server::config::Config;

use crate::support::gemma_ref;

/// Collects real and awkward material under several budgets and counts what would be sent with
/// Gemini's own tokenizer (Gemma-3, via kitoken). Needs the model file (see `gemma_ref`, which
/// downloads it through cargo when missing); offline it is skipped, unless
/// `GEMINI_MCP_REQUIRE_GEMMA=1` (set by `.ci/run`) makes its absence a failure.
#[test]
fn collector_budget_holds_under_gemini_tokenizer() {
    let gemma = match gemma_ref::load() {
        Ok(t) => t,
        Err(e) if std::env::var_os("GEMINI_MCP_REQUIRE_GEMMA").is_none() => {
            eprintln!("SKIPPED collector_budget_holds_under_gemini_tokenizer: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let write = |rel: &str, content: &[u8]| {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    };
    // This crate's sources, and material that is hard on the calibration.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in ignore::Walk::new(&src).flatten() {
        if entry.file_type().is_some_and(|t| t.is_file()) {
            let rel = entry.path().strip_prefix(&src).unwrap();
            write(
                &format!("src/{}", rel.display()),
                &std::fs::read(entry.path()).unwrap(),
            );
        }
    }
    let numbers: String = (0..4000)
        .map(|i| format!("{},{},{}\n", i * 7919, i * 104_729 % 99_991, i))
        .collect();
    write(
        "data/numbers.json",
        format!("[{}]", numbers.replace('\n', ",")).as_bytes(),
    );
    let header: String = (0..3000)
        .map(|i| {
            format!(
                "#define REG_{i:04X} 0x{:08X}u\n",
                i * 2_654_435_761u64 % 4_294_967_296
            )
        })
        .collect();
    write("include/regs.h", header.as_bytes());
    let prose = "Die Katze schläft auf dem Sofa. 猫はソファで寝ています。 Кошка спит на диване. "
        .repeat(300);
    write("docs/intl.md", prose.as_bytes());
    let minified = (0..2000)
        .map(|i| format!("var a{i}=function(b){{return b*{i}+\"x{i}\"}};"))
        .collect::<String>();
    write("web/app.min.js", minified.as_bytes());

    let collector = Collector::new(&Config::for_tests(&root).collector()).unwrap();
    for budget in [5_000u64, 40_000, 150_000] {
        let c = collector
            .collect(&CollectRequest {
                paths: ["src", "data", "include", "docs", "web"]
                    .map(String::from)
                    .to_vec(),
                budget,
                already_sent: HashMap::new(),
                ignore: None,
            })
            .unwrap();
        // What the prompt carries: the blocks, each followed by a blank line.
        let prompt: String = c.files.iter().map(|f| format!("{}\n", f.text)).collect();
        let counted = gemma_ref::count(&gemma, &prompt);
        eprintln!(
            "budget {budget}: {} files, calibrated {}, Gemini {counted}",
            c.files.len(),
            c.tokens
        );
        assert!(
            counted <= budget,
            "Gemini counts {counted} > budget {budget}"
        );
        // Small budgets cannot be filled with whole files this size; larger ones must be.
        if budget >= 40_000 {
            assert!(
                counted as f64 >= 0.85 * budget as f64,
                "Gemini counts {counted}: under 85% of {budget}"
            );
        }
    }
}

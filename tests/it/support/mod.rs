//! Test support shared by the integration tests.

pub mod anthropic_api;
pub mod fake_gemini;
pub mod gemma_ref;
pub mod http;
pub mod mcp;
pub mod project;
pub mod redis;
pub mod responses_api;
pub mod scripted_model;

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

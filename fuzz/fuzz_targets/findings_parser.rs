//! Any text as Gemini's JSON-mode review: the findings parser, the severity filter and the
//! Markdown rendering never panic and keep their invariants. The body is shared with the stable
//! run in `cargo test` (tests/it/hardening/fuzz_bodies.rs).
#![no_main]

#[path = "../../tests/it/hardening/fuzz_bodies.rs"]
mod fuzz_bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    fuzz_bodies::findings_parser(data);
});

//! Any string as a user-given path: through `Sandbox::resolve`/`check` and `sandbox::open`,
//! nothing outside the project root is accepted, opened or read. The body is shared with the
//! stable run in `cargo test` (tests/it/hardening/fuzz_bodies.rs).
#![no_main]

#[path = "../../tests/it/hardening/fuzz_bodies.rs"]
mod fuzz_bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    fuzz_bodies::path_resolution(data);
});

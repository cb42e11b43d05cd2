//! Test support shared by the integration tests.

pub mod fake_gemini;
pub mod mcp;
pub mod redis;

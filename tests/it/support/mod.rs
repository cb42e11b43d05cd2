//! Test support shared by the integration tests.

pub mod fake_gemini;
pub mod http;
pub mod mcp;
pub mod redis;

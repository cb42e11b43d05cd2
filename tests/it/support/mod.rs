//! Test support shared by the integration tests.

pub mod anthropic_api;
pub mod fake_gemini;
pub mod http;
pub mod mcp;
pub mod redis;
pub mod responses_api;
pub mod scripted_model;

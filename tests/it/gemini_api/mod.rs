//! The REST backend against the fake Gemini API: what is sent, how answers and failures are read,
//! retries, timeouts, cancellation, the capacity fallback, and that the key never leaks.
//!
//! These tests use real time with the short retry delays of `Config::for_tests` (10–50 ms): a
//! paused tokio clock auto-advances into the client's timeouts while a real socket is waiting, so
//! the backoff schedule itself is tested with a paused clock in `gemini::api::retry`'s unit tests.
//!
//! One file a subject: `request` (what is sent), `answers` (how answers are read), `failures`
//! (each outcome, its advice, its attempts), `timeouts` (and cancellation), `fallback` (the
//! capacity fallback), `models` (countTokens and the model list), `key` (never leaked),
//! `server` (the fake's other endpoints, and the real binary against it). The client they build
//! is made here.

use gemini_mcp_server::config::{BackendChoice, Config, Secret};
use gemini_mcp_server::gemini::api::ApiClient;
use gemini_mcp_server::gemini::{
    CallContext, Catalogue, Gemini, GeminiError, GenerateRequest, GenerateResponse, Message,
    ThinkingMode,
};

use crate::support::fake_gemini::FakeGemini;

mod answers;
mod failures;
mod fallback;
mod key;
mod models;
mod request;
mod server;
mod timeouts;

const KEY: &str = "AIzaSyFAKE-test-key-0123456789abcdef";

struct Setup {
    fake: FakeGemini,
    config: Config,
    _dir: tempfile::TempDir,
}

fn setup() -> Setup {
    setup_with(|_| {})
}

fn setup_with(adjust: impl FnOnce(&mut Config)) -> Setup {
    let fake = FakeGemini::start();
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::for_tests(dir.path());
    config.gemini.base_url = fake.base_url();
    config.gemini.api_key = Some(Secret::new(KEY));
    config.gemini.backend = BackendChoice::Api;
    adjust(&mut config);
    Setup {
        fake,
        config,
        _dir: dir,
    }
}

impl Setup {
    fn client(&self) -> ApiClient {
        ApiClient::new(&self.config.gemini(), Secret::new(KEY)).unwrap()
    }
    fn gemini(&self) -> Gemini {
        Gemini::from_config(&self.config.gemini()).unwrap()
    }
    async fn generate(&self, req: &GenerateRequest) -> Result<GenerateResponse, GeminiError> {
        self.client().generate(req, &CallContext::default()).await
    }
}

fn request(model: &str) -> GenerateRequest {
    GenerateRequest {
        model: Catalogue::builtin("pro", crate::support::prices())
            .resolve(model)
            .unwrap(),
        system_instruction: "You are a careful reviewer.".into(),
        contents: vec![Message::user("Review this function, please.")],
        thinking: ThinkingMode::Medium,
        temperature: None,
        response_schema: None,
        web_search: false,
        cache: None,
        previous: None,
        agent: None,
        functions: None,
    }
}

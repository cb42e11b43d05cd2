//! A fake Gemini REST API for the tests: a real HTTP server on `127.0.0.1` that speaks the wire
//! Gemini API's wire format (the shapes recorded in `fixtures/gemini/`) and records every request.
//!
//! It runs on its own OS thread with its own tokio runtime, so it serves sync tests, a spawned
//! `gemini-mcp` binary (point `GEMINI_BASE_URL` at [`FakeGemini::base_url`]) and async tests alike;
//! its own delays are real time, whatever the test's clock does. Dropping it stops the server and
//! aborts any answer still in flight.
//!
//! Do not call it from a `#[tokio::test(start_paused = true)]` test through a client with timeouts
//! (our `ApiClient` has three): while a paused runtime waits on a real socket it auto-advances its
//! clock to the next timer, so every call ends at once in `Timeout`. Use real time and the short
//! retry delays of `Config::for_tests`; the retry schedule itself is tested with a paused clock in
//! `gemini::api::retry`.
//!
//! # Using it
//!
//! ```ignore
//! let fake = FakeGemini::start();
//! // env GEMINI_BASE_URL = fake.base_url(), GEMINI_API_KEY = anything (see `require_key`)
//! fake.push(Script::overloaded());                  // first generate call: 503
//! fake.push(Script::text("## Review\nLooks fine.")); // second: this answer, streamed
//! // …run the code under test…
//! let sent = fake.generate_requests();
//! assert_eq!(sent.len(), 2);
//! assert_eq!(sent[1].model.as_deref(), Some("gemini-3.1-pro-preview"));
//! assert_eq!(sent[1].thinking_config()["thinkingLevel"], "MEDIUM");
//! ```
//!
//! # What it answers
//!
//! - `POST /v1beta/models/{model}:streamGenerateContent?alt=sse` and `…:generateContent`: the next
//!   queued [`Script`] ([`FakeGemini::push`]), or when the queue is empty the default answer:
//!   - text mode: `FAKE-REPLY model=<m> turns=<n> last=<t>` where `<m>` is the model in the URL,
//!     `<n>` the number of user messages in `contents` (earlier turns + 1) and `<t>` the first 80
//!     characters of the last user message's text, line breaks turned into spaces;
//!   - JSON mode (`generationConfig.responseJsonSchema` or `responseSchema` present):
//!     `{"summary":"FAKE-REPLY …","findings":[],"verdict":"ready"}`.
//!
//!   Streams are framed like Google's: `data: <json>\r\n\r\n`, no `[DONE]`, `usageMetadata`,
//!   `modelVersion` and `responseId` on every chunk, text split over a few chunks, and a last
//!   chunk with `finishReason: "STOP"` and a `{"text":"","thoughtSignature":…}` part. Usage:
//!   `promptTokenCount` = ⌈request body chars / 4⌉ (plus, with a `cachedContent`, the cache's
//!   count, which `cachedContentTokenCount` repeats), `candidatesTokenCount` = ⌈answer chars / 4⌉
//!   (cumulative), `thoughtsTokenCount` = 42 when the request had a `thinkingConfig` or the script
//!   has thoughts; [`Script::usage`] overrides the final figures.
//!   Like Google, a request with both `thinkingBudget` and `thinkingLevel` gets a 400, and so
//!   does one to a `gemini-2.*` model with `functionDeclarations` and `responseMimeType:
//!   application/json` ("Function calling with a response mime type: 'application/json' is
//!   unsupported"; Gemini 3 takes both), before any script is used.
//!   The tier that served the call ([`Script::served_tier`], else the one asked for, else
//!   `standard`) is said as Google says it: the Gemini API in the `x-gemini-service-tier` answer
//!   header (asked in the body's `serviceTier`), Vertex AI in `usageMetadata.trafficType`
//!   (asked in the `X-Vertex-AI-LLM-Shared-Request-Type` header, on the global location only);
//!   never in a body field Google does not have.
//! - `POST …:countTokens`: `{"totalTokens": ⌈chars / 4⌉}` over every text part of `contents` (or
//!   `generateContentRequest.contents` and its `systemInstruction`, plus the count of the cache
//!   its `cachedContent` names, which `cachedContentTokenCount` repeats).
//! - `GET /v1beta/models?pageSize=&pageToken=`: [`FakeGemini::default_models`] (or
//!   [`FakeGemini::set_models`]), at most [`MODELS_PAGE_CAP`] per page so that clients have to
//!   follow `nextPageToken`; `GET /v1beta/models/{model}`: one of them, or 404.
//! - With [`FakeGemini::require_key`]: no `x-goog-api-key` (nor `?key=`) → 403
//!   `PERMISSION_DENIED`; a different key → 400 `API_KEY_INVALID`, as Google answers.
//!
//! - `cachedContents` (Gemini API and Vertex AI): create, get, list, patch, delete, their rules,
//!   and generate calls that name a cache; see the `caches` module.
//!
//! - `interactions` (the Interactions API): create — plain, streamed, in the background —, get,
//!   cancel, delete, server-side state by `previous_interaction_id`; answered from the generate
//!   queue; see the `interactions` module.
//!
//! Scripts for `countTokens`, the model list and cache creation can be queued too
//! ([`FakeGemini::push_to`]).

#![allow(dead_code)] // Shared by every test file; no test uses every helper.

mod caches;
mod files;
mod framing;
mod interaction_answer;
mod interactions;
mod recorded;
mod script;
mod server;

pub use caches::*;
pub use files::*;
pub use framing::*;
pub use interaction_answer::*;
pub use interactions::*;
pub use recorded::*;
pub use script::*;
pub use server::*;

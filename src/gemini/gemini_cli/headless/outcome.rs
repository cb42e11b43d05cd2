//! What a run of the CLI means: the JSON answer, or the error its output, exit code and stderr
//! describe.

use std::path::Path;
use std::process::ExitStatus;
use std::sync::OnceLock;

use regex::Regex;
use serde::Deserialize;

use crate::gemini::gemini_cli::{LOGIN, login_refused, login_refused_error};
use crate::gemini::vocabulary::{GeminiError, GenerateResponse, Usage};

/// Longest excerpt of CLI output quoted in an error message.
const DETAIL_CAP: usize = 600;

/// One failed attempt the CLI is about to retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RetryNotice {
    pub(super) attempt: u32,
    /// The HTTP status, when the notice names one.
    pub(super) status: Option<u16>,
    /// The API's message, when the notice carries its JSON.
    pub(super) message: Option<String>,
}

/// Parses the CLI's retry notices: `Attempt 2 failed with status 429. Retrying with backoff...
/// _ApiError: {"error":{…}}`, `… failed with 429 error …`, `… failed with 5xx error …`,
/// `Attempt 3 failed: <quota message>. Retrying after 5123ms...`, `Attempt 1 failed. Retrying …`.
pub(super) fn retry_notice(line: &str) -> Option<RetryNotice> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"Attempt (\d+) failed(?: with status (\d{3})| with (429|5xx) error|(: .*Retrying after))?")
            .unwrap_or_else(|_| unreachable!("the pattern is valid"))
    });
    let caps = re.captures(line)?;
    let attempt = caps.get(1)?.as_str().parse().ok()?;
    let status = if let Some(s) = caps.get(2) {
        s.as_str().parse().ok()
    } else if let Some(kind) = caps.get(3) {
        Some(if kind.as_str() == "429" { 429 } else { 500 })
    } else if caps.get(4).is_some() {
        // Quota errors carrying a retry delay.
        Some(429)
    } else {
        None
    };
    let message = line
        .find("{\"error\"")
        .and_then(|i| {
            serde_json::Deserializer::from_str(&line[i..])
                .into_iter::<serde_json::Value>()
                .next()
        })
        .and_then(Result::ok)
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string));
    Some(RetryNotice {
        attempt,
        status,
        message,
    })
}

pub(super) enum Stop {
    Timeout,
    Cancelled,
    Retries(RetryNotice),
}

impl Stop {
    pub(super) fn as_str(&self) -> &'static str {
        match self {
            Stop::Timeout => "timeout",
            Stop::Cancelled => "cancelled",
            Stop::Retries(_) => "attempts exhausted",
        }
    }
}

pub(super) fn retries_error(notice: &RetryNotice) -> GeminiError {
    let message = notice
        .message
        .as_deref()
        .map(scrub)
        .unwrap_or_else(|| "no answer".into());
    match notice.status {
        Some(status) => api_error(
            status,
            None,
            &format!(
                "{} (the Gemini CLI stopped after {} attempts)",
                message.trim_end_matches('.'),
                notice.attempt
            ),
        ),
        None => cli_error(
            None,
            format!(
                "the Gemini CLI could not reach Gemini in {} attempts ({message}). Check the network, and \
                 GOOGLE_GEMINI_BASE_URL if it is set for the CLI",
                notice.attempt
            ),
        ),
    }
}

/// What one run of the CLI produced.
#[derive(Debug, Clone, Default)]
pub struct RawOutput {
    /// The exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    /// The tail of stderr (capped).
    pub stderr: String,
}

pub(super) fn signal_of(status: &ExitStatus) -> Option<i32> {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        status.signal()
    }
    // Windows ends processes with exit codes only.
    #[cfg(windows)]
    {
        let _ = status;
        None
    }
}

/// The `-o json` document (`packages/core/src/output/types.ts`).
#[derive(Debug, Deserialize)]
pub(super) struct JsonOutput {
    pub(super) response: Option<String>,
    pub(super) stats: Option<Stats>,
    pub(super) error: Option<JsonError>,
    #[serde(default)]
    pub(super) warnings: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct JsonError {
    #[serde(default, rename = "type")]
    pub(super) kind: String,
    #[serde(default)]
    pub(super) message: String,
    /// An HTTP status, an exit code, or a string such as `ECONNREFUSED`.
    pub(super) code: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Stats {
    #[serde(default)]
    pub(super) models: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct ModelStats {
    #[serde(default)]
    pub(super) tokens: Tokens,
    #[serde(default)]
    pub(super) roles: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub(super) struct Tokens {
    /// Prompt tokens, cached ones included (`input` excludes them).
    #[serde(default)]
    pub(super) prompt: u64,
    #[serde(default)]
    pub(super) candidates: u64,
    #[serde(default)]
    pub(super) thoughts: u64,
    #[serde(default)]
    pub(super) cached: u64,
}

/// Turns one run's output into the answer or the error (reference §3–5). `workdir` is named in
/// the untrusted-folder error. Google's refusal of an individual account's Login with Google
/// (exit 1, a stack trace naming `UNSUPPORTED_CLIENT` on stderr) is explained, not quoted.
pub fn interpret(raw: &RawOutput, workdir: &Path) -> Result<GenerateResponse, GeminiError> {
    match read_outcome(raw, workdir) {
        Err(_) if login_refused(&raw.stderr) || login_refused(&raw.stdout) => {
            Err(login_refused_error(raw.code))
        }
        outcome => outcome,
    }
}

fn read_outcome(raw: &RawOutput, workdir: &Path) -> Result<GenerateResponse, GeminiError> {
    let doc = last_json_object(&raw.stdout).or_else(|| last_json_object(&raw.stderr));
    if let Some(doc) = doc {
        if let Some(err) = &doc.error {
            return Err(json_error(err, raw, workdir));
        }
        if let Some(text) = doc.response {
            for w in &doc.warnings {
                tracing::warn!(warning = %w, "the Gemini CLI warned");
            }
            if text.trim().is_empty() {
                return Err(if doc.warnings.is_empty() {
                    GeminiError::Empty {
                        finish_reason: "none reported by the Gemini CLI".into(),
                    }
                } else {
                    cli_error(
                        raw.code,
                        format!(
                            "the Gemini CLI stopped without an answer: {}. Retry with a narrower request",
                            scrub(&doc.warnings.join("; "))
                        ),
                    )
                });
            }
            let (model_version, usage) = doc.stats.map(read_stats).unwrap_or_default();
            return Ok(GenerateResponse {
                text,
                model_version,
                usage,
                ..GenerateResponse::default()
            });
        }
    }
    Err(exit_error(raw, workdir))
}

/// The model that answered (the one with the `main` role and the most answer tokens; `stats.models`
/// is keyed by the API's `modelVersion`) and the usage summed over every model the call used.
pub(super) fn read_stats(stats: Stats) -> (Option<String>, Usage) {
    let mut usage = Usage::default();
    let mut best: Option<(bool, u64, String)> = None;
    for (name, value) in stats.models {
        let Ok(m) = serde_json::from_value::<ModelStats>(value) else {
            continue;
        };
        usage.input += m.tokens.prompt;
        usage.output += m.tokens.candidates;
        usage.thinking += m.tokens.thoughts;
        usage.cached += m.tokens.cached;
        let main = m.roles.contains_key("main");
        let rank = (main, m.tokens.candidates);
        if best.as_ref().is_none_or(|(bm, bc, _)| rank > (*bm, *bc)) {
            best = Some((main, m.tokens.candidates, name));
        }
    }
    (best.map(|(_, _, name)| name), usage)
}

/// The last JSON object in `text` that looks like the CLI's output, whatever noise surrounds it.
/// The CLI prints objects starting at a line's first column; anything inside a JSON string has its
/// newlines escaped, so only line starts need to be tried.
pub(super) fn last_json_object(text: &str) -> Option<JsonOutput> {
    let starts = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .filter(|&i| text[i..].starts_with('{'))
        .collect::<Vec<_>>();
    starts.into_iter().rev().find_map(|i| {
        let value = serde_json::Deserializer::from_str(&text[i..])
            .into_iter::<serde_json::Value>()
            .next()?
            .ok()?;
        let obj = value.as_object()?;
        if !(obj.contains_key("response") || obj.contains_key("error")) {
            return None;
        }
        serde_json::from_value(value).ok()
    })
}

pub(super) fn json_error(err: &JsonError, raw: &RawOutput, workdir: &Path) -> GeminiError {
    let message = err.message.trim();
    if err.kind == "INVALID_STREAM" {
        return if message.to_ascii_lowercase().contains("safety") {
            GeminiError::Withheld {
                finish_reason: "SAFETY".into(),
                hint: crate::gemini::api::wire::FinishReason::Safety.hint().into(),
            }
        } else {
            GeminiError::Empty {
                finish_reason: "INVALID_STREAM".into(),
            }
        };
    }
    match &err.code {
        Some(serde_json::Value::Number(n)) => {
            let code = n.as_i64().unwrap_or(1);
            match u16::try_from(code) {
                Ok(status @ 400..=599) => {
                    let (google, inner) = nested_api_error(message);
                    api_error(status, google, &scrub(inner.as_deref().unwrap_or(message)))
                }
                _ => {
                    let code = i32::try_from(code).unwrap_or(1);
                    if code == 1 && raw.stderr.contains("ModelNotFoundError") {
                        return api_error(404, None, &scrub(message));
                    }
                    coded_error(code, &scrub(message), workdir)
                }
            }
        }
        Some(serde_json::Value::String(s)) => cli_error(
            raw.code,
            format!(
                "the Gemini CLI could not reach Gemini ({s}: {}). Check the network, and GOOGLE_GEMINI_BASE_URL if \
                 it is set for the CLI",
                scrub(message)
            ),
        ),
        _ => coded_error(raw.code.unwrap_or(1), &scrub(message), workdir),
    }
}

/// A 400's message is the API's whole error body as a string: take its status and message.
pub(super) fn nested_api_error(message: &str) -> (Option<String>, Option<String>) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(message) else {
        return (None, None);
    };
    let e = &v["error"];
    (
        e["status"].as_str().map(str::to_string),
        e["message"].as_str().map(str::to_string),
    )
}

/// No JSON was printed: the exit code (or signal) and stderr's meaningful lines are all we have.
pub(super) fn exit_error(raw: &RawOutput, workdir: &Path) -> GeminiError {
    let detail = stderr_detail(&raw.stderr);
    match raw.code {
        None => cli_error(
            None,
            format!(
                "the Gemini CLI was killed by signal {}{}. Retry; if it persists, run `gemini -p hello` in a \
                 terminal to see why",
                raw.signal.unwrap_or(0),
                if detail.is_empty() {
                    String::new()
                } else {
                    format!(" ({detail})")
                }
            ),
        ),
        Some(0) => GeminiError::Malformed {
            message: format!(
                "the Gemini CLI exited successfully but printed no JSON answer{}; check that `{}` is the Gemini \
                 CLI and recent enough for `-o json` (`gemini --version`)",
                excerpt_suffix(&stdout_excerpt(&raw.stdout)),
                "gemini"
            ),
        },
        // HTTP statuses mod 256, printed by API errors in json mode (400 → 144, 503 → 247).
        Some(code @ 144..=255) => api_error((code + 256) as u16, None, &detail),
        Some(code) => coded_error(code, &detail, workdir),
    }
}

/// The CLI's own exit codes (`packages/core/src/utils/exitCodes.ts`), each with what to do.
pub(super) fn coded_error(code: i32, detail: &str, workdir: &Path) -> GeminiError {
    let said = if detail.is_empty() {
        String::new()
    } else {
        format!(": {detail}")
    };
    let message = match code {
        41 => format!(
            "the Gemini CLI is not logged in (exit 41{said}). Run `gemini` once in a terminal and sign in ({LOGIN}), \
             then retry; or use this server's API backend instead (GEMINI_API_KEY with GEMINI_BACKEND=api)"
        ),
        42 => format!(
            "the Gemini CLI rejected its input (exit 42{said}). Update the Gemini CLI \
             (`npm install -g @google/gemini-cli@latest`) and retry"
        ),
        44 => format!(
            "the Gemini CLI could not start its sandbox (exit 44{said}). Unset GEMINI_SANDBOX or turn the sandbox \
             off in ~/.gemini/settings.json"
        ),
        52 => format!(
            "the Gemini CLI's configuration is invalid (exit 52{said}). Fix ~/.gemini/settings.json or the \
             project's .gemini/settings.json"
        ),
        53 => format!(
            "the Gemini CLI stopped at its turn limit (exit 53{said}). Ask a narrower question or raise \
             `model.maxSessionTurns` in ~/.gemini/settings.json"
        ),
        54 => format!("a Gemini CLI tool failed (exit 54{said}). Retry"),
        55 => format!(
            "the Gemini CLI does not trust {} (exit 55). Run `gemini` in that directory once and trust the \
             folder, or set GEMINI_CLI_TRUST_WORKSPACE=true in this server's environment (the CLI then also \
             loads that folder's .gemini settings)",
            workdir.display()
        ),
        130 => format!("the Gemini CLI was interrupted (exit 130{said}). Retry"),
        _ => format!(
            "the Gemini CLI failed (exit {code}{said}). Run `gemini -p hello` in a terminal to see the problem, \
             then retry"
        ),
    };
    cli_error(Some(code), message)
}

/// An API error relayed by the CLI, phrased like the API backend's, so 429/503 count as capacity.
pub(super) fn api_error(status: u16, google: Option<String>, message: &str) -> GeminiError {
    let code = google.unwrap_or_else(|| {
        match status {
            400 => "INVALID_ARGUMENT",
            401 => "UNAUTHENTICATED",
            403 => "PERMISSION_DENIED",
            404 => "NOT_FOUND",
            408 | 504 => "DEADLINE_EXCEEDED",
            429 => "RESOURCE_EXHAUSTED",
            500 => "INTERNAL",
            503 => "UNAVAILABLE",
            _ => "UNKNOWN",
        }
        .to_string()
    });
    let hint = match status {
        400 => {
            "The request was refused; check the model name, and the Gemini CLI's login (run `gemini` in a terminal)"
        }
        401 | 403 => {
            "The Gemini CLI's account has no access to this model; sign in again with `gemini`, or pick another model (`listmodels`)"
        }
        404 => {
            "The model is not available to the Gemini CLI's account; pick another one (`listmodels`)"
        }
        429 => {
            "The quota or rate limit of the Gemini CLI's account is exhausted for this model; wait a minute, or pick a faster model such as `flash`"
        }
        500..=599 => "Gemini is unavailable or overloaded; retry in a minute or pick another model",
        _ => "Retry; if it persists, run `gemini -p hello` in a terminal to see the problem",
    };
    let message = message.trim().trim_end_matches('.');
    GeminiError::Api {
        status,
        code,
        message: if message.is_empty() {
            "the Gemini CLI reported no message".into()
        } else {
            message.to_string()
        },
        hint: format!("{hint}."),
    }
}

/// A failure of the Gemini CLI, phrased with what to do.
pub(super) fn cli_error(exit_code: Option<i32>, message: impl Into<String>) -> GeminiError {
    GeminiError::cli(exit_code, message)
}

pub(super) fn spawn_error(program: &Path, e: &std::io::Error) -> GeminiError {
    cli_error(
        None,
        format!(
            "cannot start the Gemini CLI `{}`: {e}. Check that it is installed (`gemini --version`), or set \
             GEMINI_CLI_PATH to the executable",
            program.display()
        ),
    )
}

/// stderr's meaningful lines (known noise and stack frames left out), scrubbed, capped at the end.
pub(super) fn stderr_detail(stderr: &str) -> String {
    const NOISE: &[&str] = &[
        "Warning: ",
        "Ripgrep is not available",
        "[STARTUP]",
        "YOLO mode is enabled",
        "MCP issues detected",
        "Loaded cached credentials",
        "Data collection is disabled",
    ];
    let plain = strip_ansi(stderr);
    let lines = plain
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .filter(|l| !l.starts_with("at ") && !NOISE.iter().any(|n| l.starts_with(n)))
        .collect::<Vec<_>>()
        .join(" ");
    tail_chars(&scrub(&lines), DETAIL_CAP)
}

pub(super) fn stdout_excerpt(stdout: &str) -> String {
    let one_line = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    let scrubbed = scrub(&one_line);
    match scrubbed.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &scrubbed[..i]),
        None => scrubbed,
    }
}

pub(super) fn excerpt_suffix(excerpt: &str) -> String {
    if excerpt.is_empty() {
        " (stdout was empty)".into()
    } else {
        format!(" (stdout began: {excerpt})")
    }
}

pub(super) fn tail_chars(s: &str, cap: usize) -> String {
    let count = s.chars().count();
    if count <= cap {
        return s.to_string();
    }
    let skip = s.char_indices().nth(count - cap).map_or(0, |(i, _)| i);
    format!("…{}", &s[skip..])
}

/// Removes terminal colour sequences (the CLI colours some messages even when piped).
pub(super) fn strip_ansi(text: &str) -> std::borrow::Cow<'_, str> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
            .unwrap_or_else(|_| unreachable!("the pattern is valid"))
    });
    re.replace_all(text, "")
}

/// Masks credentials that CLI output could carry (the rules of [`crate::redact`]).
pub fn scrub(text: &str) -> String {
    crate::redact::scrub(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(code: i32, stdout: &str, stderr: &str) -> RawOutput {
        RawOutput {
            code: Some(code),
            signal: None,
            stdout: stdout.into(),
            stderr: stderr.into(),
        }
    }

    #[test]
    fn retry_notices_are_recognised() {
        let cases = [
            (
                r#"Attempt 2 failed with status 429. Retrying with backoff... _ApiError: {"error":{"code":429,"message":"quota gone","status":"RESOURCE_EXHAUSTED"}}"#,
                Some((2, Some(429), Some("quota gone"))),
            ),
            (
                "Attempt 1 failed with 5xx error. Retrying with backoff...",
                Some((1, Some(500), None)),
            ),
            (
                "Attempt 3 failed with 429 error (no Retry-After header). Retrying with backoff...",
                Some((3, Some(429), None)),
            ),
            (
                "Attempt 4 failed: You have exhausted your capacity. Retrying after 5123ms...",
                Some((4, Some(429), None)),
            ),
            (
                "Attempt 1 failed. Retrying with backoff... TypeError: fetch failed",
                Some((1, None, None)),
            ),
            ("Ripgrep is not available. Falling back to GrepTool.", None),
        ];
        for (line, want) in cases {
            let got = retry_notice(line).map(|n| (n.attempt, n.status, n.message));
            let want = want
                .map(|(a, s, m): (u32, Option<u16>, Option<&str>)| (a, s, m.map(str::to_string)));
            assert_eq!(got, want, "{line}");
        }
    }

    #[test]
    fn json_is_found_among_noise() {
        let out = raw(
            0,
            "Loaded cached credentials.\n{\n  \"session_id\": \"s\",\n  \"response\": \"a {\\n} b\"\n}\ntrailing noise\n",
            "",
        );
        let r = interpret(&out, Path::new("/p")).unwrap();
        assert_eq!(r.text, "a {\n} b");
    }

    #[test]
    fn exit_codes_without_json_map_to_statuses() {
        for (code, status) in [(144, 400), (147, 403), (148, 404), (173, 429), (247, 503)] {
            match interpret(&raw(code, "", "boom"), Path::new("/p")) {
                Err(GeminiError::Api { status: s, .. }) => assert_eq!(s, status, "{code}"),
                other => panic!("{code}: {other:?}"),
            }
        }
    }

    #[test]
    fn scrub_masks_credentials() {
        let s = scrub(
            "key AIzaSyA1234567890abcdefghijklmnopqrstuv and ya29.a0AfH6SMBx and Bearer abcdefghijklmnopqrstu",
        );
        assert!(!s.contains("AIzaSy"), "{s}");
        assert!(!s.contains("ya29.a0"), "{s}");
        assert!(!s.contains("abcdefghijklmnopqrstu"), "{s}");
    }

    #[test]
    fn tail_keeps_the_end() {
        assert_eq!(tail_chars("abcdef", 3), "…def");
        assert_eq!(tail_chars("ab", 3), "ab");
    }
}

//! `gemini-mcp doctor`: checks what a call needs — the configuration, PROJECT_ROOT, the Gemini
//! backend (key or CLI), the models, the thread store — and, unless `--offline`, asks Gemini for
//! one word to prove the key and the model work. Each line says what is wrong and what to do.
//! Exit 0 when nothing is broken, 1 otherwise.

use std::io::Write;
use std::time::{Duration, Instant};

use anstyle::{AnsiColor, Style};

use crate::config::{BackendChoice, Config, ConfigError};
use crate::gemini::{BackendInfo, CallContext, Gemini, GenerateRequest, Message, ThinkingMode};

/// The live check must not hang a terminal for the full call timeout.
const LIVE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the metadata server may take to hand out a token: on Google Cloud it answers in
/// milliseconds; elsewhere there is none, and the auth library's retries would take 14 s.
const METADATA_PROBE: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, clap::Args)]
pub struct DoctorArgs {
    /// Skip the live call to Gemini (checks the configuration only).
    #[arg(long)]
    pub offline: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ok,
    /// Works, but worth knowing.
    Warn,
    Fail,
    Skip,
}

struct Report {
    lines: Vec<(Outcome, &'static str, String)>,
}

impl Report {
    fn add(&mut self, outcome: Outcome, what: &'static str, text: impl Into<String>) {
        self.lines.push((outcome, what, text.into()));
    }

    fn broken(&self) -> bool {
        self.lines.iter().any(|(o, ..)| *o == Outcome::Fail)
    }

    fn print(&self) -> std::io::Result<()> {
        let mut out = crate::term::stdout();
        for (outcome, what, text) in &self.lines {
            let (label, colour) = match outcome {
                Outcome::Ok => ("ok  ", AnsiColor::Green),
                Outcome::Warn => ("warn", AnsiColor::Yellow),
                Outcome::Fail => ("FAIL", AnsiColor::Red),
                Outcome::Skip => ("skip", AnsiColor::BrightBlack),
            };
            let s = Style::new().fg_color(Some(colour.into())).bold();
            out.styled(s, label)?;
            out.line(format_args!(" {what}: {text}"))?;
        }
        out.flush()
    }
}

/// Runs the checks and prints them; returns the exit code.
pub async fn run(config: Result<Config, ConfigError>, args: DoctorArgs) -> u8 {
    let report = check(config, args.offline).await;
    if let Err(e) = report.print() {
        crate::term::say!("gemini-mcp doctor: {e}");
        return super::output::COULD_NOT_RUN;
    }
    u8::from(report.broken())
}

async fn check(config: Result<Config, ConfigError>, offline: bool) -> Report {
    let mut r = Report { lines: Vec::new() };
    let config = match config {
        Ok(c) => {
            r.add(Outcome::Ok, "configuration", "read");
            c
        }
        Err(e) => {
            r.add(
                Outcome::Fail,
                "configuration",
                format!("{e} (fix the setting named; see the README's configuration table)"),
            );
            return r;
        }
    };

    check_roots(&mut r, &config);
    check_rules(&mut r, &config);
    let gemini = match Gemini::from_config(&config.gemini()) {
        Ok(g) => g,
        Err(e) => {
            r.add(Outcome::Fail, "backend", e.to_string());
            return r;
        }
    };
    let backend_ok = check_backend(&mut r, &config, &gemini).await;
    let model_ok = check_models(&mut r, &config, &gemini);
    check_store(&mut r, &config).await;
    check_live(&mut r, &gemini, offline, backend_ok && model_ok).await;
    r
}

/// The review rules a review here would follow (docs/rules.md): a configuration a review would
/// refuse fails here, naming the field.
fn check_rules(r: &mut Report, config: &Config) {
    let collector = match crate::collector::Collector::new(&config.collector) {
        Ok(c) => c,
        Err(e) => {
            r.add(Outcome::Fail, "review rules", e.to_string());
            return;
        }
    };
    match crate::pipeline::review_rules::read(&collector, &config.calls, None) {
        Ok(rules) => match rules.note() {
            Some(note) => r.add(
                if rules.not_applied.is_empty() {
                    Outcome::Ok
                } else {
                    Outcome::Warn
                },
                "review rules",
                note,
            ),
            None => r.add(
                Outcome::Ok,
                "review rules",
                "none (.gemini/styleguide.md, .gemini/config.yaml, GEMINI_MCP_REVIEW_RULES, the user's file)",
            ),
        },
        Err(e) => r.add(
            Outcome::Fail,
            "review rules",
            format!("{e} (every review here is refused until it is fixed)"),
        ),
    }
}

/// Each PROJECT_ROOT is readable, and whether it lies in a git repository.
fn check_roots(r: &mut Report, config: &Config) {
    for root in config.roots() {
        match std::fs::read_dir(root) {
            Ok(_) => {
                let git = match git2::Repository::discover(root) {
                    Ok(repo) => match repo.workdir() {
                        Some(w) => format!("in the git repository {}", w.display()),
                        None => "in a bare git repository".into(),
                    },
                    Err(_) => {
                        "not in a git repository (precommit needs one, or nested ones)".into()
                    }
                };
                r.add(
                    Outcome::Ok,
                    "PROJECT_ROOT",
                    format!("{} is readable; {git}", root.display()),
                );
            }
            Err(e) => r.add(
                Outcome::Fail,
                "PROJECT_ROOT",
                format!(
                    "{} cannot be read ({e}); set PROJECT_ROOT to the project's directory",
                    root.display()
                ),
            ),
        }
    }
}

/// The backend the executor chose, or why none can work.
async fn check_backend(r: &mut Report, config: &Config, gemini: &Gemini) -> bool {
    match gemini.backend_info() {
        BackendInfo::Api { base_url } => {
            let source = if matches!(config.gemini.backend, BackendChoice::Api) {
                "GEMINI_BACKEND=api"
            } else {
                "a key is set"
            };
            r.add(
                Outcome::Ok,
                "backend",
                format!("Gemini REST API at {base_url} ({source})"),
            );
            true
        }
        BackendInfo::Vertex {
            endpoint,
            project,
            location,
            auth,
        } => {
            let credentials = if auth.starts_with("API key") {
                Ok(auth)
            } else {
                credential_source(config, gemini).await
            };
            let at = format!(
                "Vertex AI at {endpoint}, project {}, location {location}",
                project.as_deref().unwrap_or("(express mode)")
            );
            match credentials {
                Ok(credentials) => {
                    r.add(
                        Outcome::Ok,
                        "backend",
                        format!("{at}; credentials: {credentials}"),
                    );
                    true
                }
                Err(why) => {
                    r.add(Outcome::Fail, "backend", format!("{at}; {why}"));
                    false
                }
            }
        }
        BackendInfo::Cli { program } => {
            r.add(
                Outcome::Ok,
                "backend",
                format!(
                    "Gemini CLI at {} (its login: {})",
                    program.display(),
                    crate::gemini::gemini_cli::LOGIN
                ),
            );
            true
        }
        BackendInfo::Unconfigured(why) => {
            r.add(Outcome::Fail, "backend", why);
            false
        }
    }
}

/// Where Application Default Credentials come from, as Google's auth library looks for them:
/// `GOOGLE_APPLICATION_CREDENTIALS` (its `type`, never its secrets), gcloud's
/// application-default file, else the metadata server — which is asked for a token, briefly:
/// `Err` when none answers, or a credential file cannot be read.
async fn credential_source(config: &Config, gemini: &Gemini) -> Result<String, String> {
    // A regular file of at most 1 MiB (a FIFO or a device named here must not hang doctor).
    let kind = |source: &'static str, path: &std::path::Path| -> Result<String, String> {
        let text = crate::setting_file::read_text(source, path).map_err(|e| e.why.to_string())?;
        serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string))
            .ok_or_else(|| "it is not a JSON credentials file with a `type`".to_string())
    };
    let file = match (
        &config.gemini.google_application_credentials,
        &config.gemini.gcloud_adc_file,
    ) {
        (Some(path), _) => Some(("GOOGLE_APPLICATION_CREDENTIALS", path)),
        (None, Some(p)) if p.is_file() => Some(("gcloud application-default login", p)),
        _ => None,
    };
    if let Some((source, path)) = file {
        return match kind(source, path) {
            Ok(kind) => Ok(format!("{source} {} ({kind})", path.display())),
            Err(why) => Err(format!(
                "no credentials: {source} names {}, which is not a readable credentials file \
                 ({why}); fix the path, or run `gcloud auth application-default login`",
                path.display()
            )),
        };
    }
    match tokio::time::timeout(METADATA_PROBE, gemini.refresh_models()).await {
        Ok(Ok(_)) => Ok("the metadata server (a Google Cloud service account)".into()),
        Ok(Err(e)) => Err(format!(
            "no credentials: GOOGLE_APPLICATION_CREDENTIALS is not set, gcloud's \
             application-default login was never run, and the metadata server gave no token. {e}"
        )),
        Err(_) => Err(format!(
            "no credentials: GOOGLE_APPLICATION_CREDENTIALS is not set, gcloud's \
             application-default login was never run, and no metadata server answered within {}s \
             (not on Google Cloud?): set GOOGLE_APPLICATION_CREDENTIALS to a service-account key \
             file or run `gcloud auth application-default login`",
            METADATA_PROBE.as_secs()
        )),
    }
}

/// The default and fallback models resolve in the catalogue.
fn check_models(r: &mut Report, config: &Config, gemini: &Gemini) -> bool {
    let mut model_ok = true;
    match gemini.catalogue().default_model() {
        Ok(m) => r.add(
            Outcome::Ok,
            "model",
            format!(
                "{} → {} ({} input tokens)",
                config.gemini.default_model, m.id, m.input_limit
            ),
        ),
        Err(e) => {
            model_ok = false;
            r.add(Outcome::Fail, "model", format!("GEMINI_MODEL: {e}"));
        }
    }
    match gemini.catalogue().resolve(&config.gemini.fallback_model) {
        Ok(m) => r.add(Outcome::Ok, "fallback model", m.id),
        Err(e) => r.add(
            Outcome::Fail,
            "fallback model",
            format!("GEMINI_FALLBACK_MODEL: {e}"),
        ),
    }

    model_ok
}

/// The thread store opens and answers.
async fn check_store(r: &mut Report, config: &Config) {
    match crate::store::open(&config.threads()).await {
        Ok(store) => {
            let project = config.roots()[0].display().to_string();
            match store.latest(&project, &crate::store::Owner::local()).await {
                Ok(_) => {
                    let detail = match store.kind() {
                        "embedded" => format!("embedded, in {}", config.threads.state_dir.display()),
                        "memory" => "memory (threads last as long as the process: a terminal conversation cannot be continued elsewhere)".into(),
                        other => other.to_string(),
                    };
                    let outcome = if store.kind() == "memory" {
                        Outcome::Warn
                    } else {
                        Outcome::Ok
                    };
                    r.add(outcome, "thread store", detail);
                }
                Err(e) => r.add(Outcome::Fail, "thread store", e.to_string()),
            }
        }
        Err(e) => r.add(
            Outcome::Fail,
            "thread store",
            format!("{e} (check REDIS_URL, GEMINI_MCP_STORE or GEMINI_MCP_STATE_DIR)"),
        ),
    }
}

/// One call to the default model, unless offline or the lines above already failed.
async fn check_live(r: &mut Report, gemini: &Gemini, offline: bool, ready: bool) {
    if offline {
        r.add(Outcome::Skip, "Gemini", "--offline: no call made");
    } else if !ready {
        r.add(
            Outcome::Skip,
            "Gemini",
            "not called: fix the lines above first",
        );
    } else {
        let started = Instant::now();
        match probe(gemini, LIVE_TIMEOUT).await {
            Ok(model) => r.add(
                Outcome::Ok,
                "Gemini",
                format!(
                    "{model} answered in {:.1}s",
                    started.elapsed().as_secs_f64()
                ),
            ),
            Err(e) => r.add(Outcome::Fail, "Gemini", e),
        }
    }
}

/// Asks the default model for one word. `Ok`: the model that answered.
async fn probe(gemini: &Gemini, limit: Duration) -> Result<String, String> {
    let model = gemini
        .catalogue()
        .default_model()
        .map_err(|e| e.to_string())?;
    let request = GenerateRequest {
        model: model.clone(),
        system_instruction: "Answer with the single word OK.".into(),
        contents: vec![Message::user("Are you there?")],
        thinking: ThinkingMode::Minimal,
        temperature: None,
        response_schema: None,
        web_search: false,
        cache: None,
        previous: None,
        agent: None,
        functions: None,
    };
    match tokio::time::timeout(limit, gemini.generate(request, &CallContext::default())).await {
        Ok(Ok(answer)) => Ok(answer.model_version.unwrap_or(model.id)),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!(
            "no answer within {}s: check the network and GEMINI_BASE_URL",
            limit.as_secs()
        )),
    }
}

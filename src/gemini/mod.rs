//! The Gemini executor: one request/response model for the pipeline, answered by the REST API
//! (`api`: the Gemini API or Vertex AI) or the Gemini CLI (`gemini_cli`: headless, one process
//! per call, or a warm agent over ACP), with the model catalogue (`models`) and prices (`prices`).
//!
//! This file is the facade: [`Gemini`] picks the backend from the [`Settings`], adds the capacity
//! fallback, and owns the one pool of Gemini CLI agents ([`Gemini::agents`]). What a call is made
//! of (the request, the answer, the errors) is the `vocabulary`, re-exported here; the backends
//! import it from there, never from this file.
//!
//! The pipeline builds a [`GenerateRequest`] from our own types; each backend turns it into its
//! wire format. Failures are [`GeminiError`]s whose `Display` says what happened and what to do;
//! the key never appears in them.

mod agent_mode;
pub mod api;
pub mod gemini_cli;
mod model_info;
pub mod models;
pub mod prices;
mod settings;
mod vocabulary;

use std::sync::{Arc, OnceLock};

use tracing::Instrument;

use crate::collector::Collector;

pub use agent_mode::AgentMode;
pub use gemini_cli::acp::{AgentRun, Pool as AgentPool, Prompt as AgentPrompt, usable_modes};
pub use gemini_cli::render_prompt;
pub use gemini_cli::{acp, headless};
pub use models::{Catalogue, ModelInfo, ThinkingStyle};
pub use settings::{ApiSurface, BackendChoice, BaseUrl, CliTransport, Settings, VertexSettings};
pub(crate) use vocabulary::cli_error;
pub use vocabulary::{
    BackgroundRun, CacheUse, CallContext, Fallback, FallbackCause, FunctionCall, Functions, GeminiError, GenerateRequest,
    PreviousInteraction, messages_digest, Agent,
    GenerateResponse, Message, Part, Progress, ProgressFn, Role, ServiceTier, Source, ThinkingMode,
    Usage,
};

/// The configured backend.
pub enum Backend {
    Api(Box<api::ApiClient>),
    /// The Gemini CLI as a subprocess, for users logged in to it without an API key.
    Cli(headless::CliBackend),
    /// No backend could be set up; every call fails with this message (the server still starts,
    /// so clients can list the tools and the user can read what to fix).
    Unconfigured(String),
}

/// The backend chosen, as `doctor` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendInfo {
    /// The REST API at this base URL (`…/v1beta`).
    Api { base_url: String },
    /// Vertex AI at this endpoint, for this project (none in express mode) and location.
    Vertex {
        endpoint: String,
        project: Option<String>,
        location: String,
        /// `Application Default Credentials` or `API key (express mode)`.
        auth: String,
    },
    /// The Gemini CLI, found at this path (an executable regular file).
    Cli { program: std::path::PathBuf },
    /// No backend can work; what to set.
    Unconfigured(String),
}

/// The executor the pipeline calls: a backend, the model catalogue and the fallback policy, and
/// the one pool of Gemini CLI agents.
pub struct Gemini {
    backend: Backend,
    /// The CLI backend over ACP (`GEMINI_CLI_TRANSPORT=acp`): its calls go to the agents' pool.
    warm: Option<Warm>,
    /// The warm `gemini --acp` processes, made on first use: the CLI backend's plain model, and
    /// the agent of `investigate`'s `engine: "gemini-cli"`.
    agents: OnceLock<Arc<acp::Pool>>,
    /// The agents' settings, their `program` as configured (`GEMINI_CLI_PATH`), not yet located.
    agent_settings: acp::AcpSettings,
    /// Where the agents run without a collector (the first project root).
    workdir: std::path::PathBuf,
    /// The `PATH` value a bare Gemini CLI name is looked up in.
    path: Option<std::ffi::OsString>,
    /// The `PATHEXT` value: on Windows, the extensions that name is tried with.
    exts: Option<std::ffi::OsString>,
    /// The roots and secrets the agents read through; `None`: they read nothing.
    collector: Option<Arc<Collector>>,
    catalogue: Catalogue,
    fallback_model: String,
    /// Where fallbacks (and the REST client's retries) are counted.
    metrics: Option<Arc<crate::metrics::Metrics>>,
}

/// The CLI backend over ACP, with the per-call CLI as its fallback.
struct Warm {
    /// Set once ACP could not be started: every later call runs the CLI per call.
    unavailable: std::sync::atomic::AtomicBool,
}

impl Warm {
    async fn generate(
        &self,
        cli: &headless::CliBackend,
        pool: &Arc<acp::Pool>,
        req: &GenerateRequest,
        ctx: &CallContext,
    ) -> Result<GenerateResponse, GeminiError> {
        use std::sync::atomic::Ordering;
        let has_images = req
            .contents
            .iter()
            .any(|m| m.parts.iter().any(|p| matches!(p, Part::Image { .. })));
        // The per-call path refuses what the CLI cannot take, saying why.
        if self.unavailable.load(Ordering::Relaxed) || has_images || req.functions.is_some() {
            return cli.generate(req, ctx).await;
        }
        match pool.answer(req, ctx).await {
            Ok(answer) => Ok(answer),
            Err(acp::Failure::Failed(e)) => Err(e),
            Err(acp::Failure::Unavailable(e)) => {
                if !self.unavailable.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "the Gemini CLI over ACP is unavailable ({e}); running it once per call from now on \
                         (GEMINI_CLI_TRANSPORT=headless makes this the default)"
                    );
                }
                cli.generate(req, ctx).await
            }
        }
    }
}

impl Gemini {
    /// Picks the backend from the configuration. When none can work, calls fail saying what to set.
    pub fn from_config(config: &Settings) -> Result<Gemini, GeminiError> {
        Gemini::with_path(
            config,
            config.search_path.as_deref().map(std::ffi::OsStr::new),
        )
    }

    /// [`Gemini::from_config`] with the `PATH` value given, where a bare `GEMINI_CLI_PATH` name
    /// (default `gemini`) is looked up.
    pub fn with_path(
        config: &Settings,
        path: Option<&std::ffi::OsStr>,
    ) -> Result<Gemini, GeminiError> {
        let backend = match (&config.vertex, config.backend) {
            (Some(vertex), BackendChoice::Api | BackendChoice::Auto) => {
                let mut vertex = vertex.clone();
                // Express mode takes the key; with a project, Application Default Credentials.
                vertex.api_key = match vertex.project {
                    None => config.api_key.clone(),
                    Some(_) => None,
                };
                match api::ApiClient::vertex(config, &vertex) {
                    Ok(c) => Some(Backend::Api(Box::new(c))),
                    Err(e) => Some(Backend::Unconfigured(e.to_string())),
                }
            }
            _ => None,
        };
        let backend = match backend {
            Some(b) => b,
            None => Gemini::choose(config, path)?,
        };
        let warm = match (&backend, config.cli_transport) {
            (Backend::Cli(_), CliTransport::Acp) => Some(Warm {
                unavailable: std::sync::atomic::AtomicBool::new(false),
            }),
            _ => None,
        };
        Ok(Gemini {
            backend,
            warm,
            agents: OnceLock::new(),
            agent_settings: acp::AcpSettings {
                program: config.gemini_cli.clone(),
                idle: config.acp_idle,
                max_processes: config.acp_max_processes,
                allowed_modes: config.acp_allowed_modes.clone(),
                timeout: config.call_timeout,
                result_chars: config.explore_result_chars,
                state_dir: config.state_dir.clone(),
                cli_home: config.cli_home.clone(),
            },
            workdir: config.workdir.clone(),
            path: path.map(std::ffi::OsStr::to_os_string),
            exts: config.search_exts.as_ref().map(std::ffi::OsString::from),
            collector: None,
            catalogue: Catalogue::builtin(&config.default_model, config.prices.clone()),
            fallback_model: config.fallback_model.clone(),
            metrics: None,
        })
    }

    /// Lets the Gemini CLI's agents read the project through `collector` (its roots and secret
    /// names also judge their permission requests); without it they read nothing.
    pub fn with_collector(mut self, collector: Arc<Collector>) -> Gemini {
        self.collector = Some(collector);
        self
    }

    /// Counts fallbacks and the REST client's retries in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Gemini {
        if let Backend::Api(client) = &mut self.backend {
            client.set_metrics(metrics.clone());
        }
        self.metrics = Some(metrics);
        self
    }

    /// The pool of warm Gemini CLI agents, made on first use; fails when the Gemini CLI cannot be
    /// found.
    pub fn agents(&self) -> Result<Arc<acp::Pool>, GeminiError> {
        if let Some(pool) = self.agents.get() {
            return Ok(pool.clone());
        }
        let mut settings = self.agent_settings.clone();
        settings.program = match &self.backend {
            Backend::Cli(cli) => cli.program().to_path_buf(),
            _ => gemini_cli::locate(&settings.program, self.path.as_deref(), self.exts.as_deref()).ok_or_else(|| {
                cli_error(format!(
                    "engine \"gemini-cli\" needs the Gemini CLI, and `{}` was not found: install it \
                     (npm install -g @google/gemini-cli) or set GEMINI_CLI_PATH to its executable; or leave \
                     out `engine` to investigate with the API backend",
                    settings.program.display()
                ))
            })?,
        };
        let root = match &self.collector {
            Some(c) => c.sandbox().roots()[0].clone(),
            None => self.workdir.clone(),
        };
        let pool = acp::Pool::new(settings, root, self.collector.clone());
        Ok(self.agents.get_or_init(|| pool).clone())
    }

    /// The pool of Gemini CLI agents, if it was made.
    pub fn started_agents(&self) -> Option<&Arc<acp::Pool>> {
        self.agents.get()
    }

    /// The Gemini API with a key, or the Gemini CLI, as `GEMINI_BACKEND` and the key say.
    fn choose(config: &Settings, path: Option<&std::ffi::OsStr>) -> Result<Backend, GeminiError> {
        Ok(match (config.backend, &config.api_key) {
            (BackendChoice::Api | BackendChoice::Auto, Some(key)) => Backend::Api(Box::new(api::ApiClient::new(config, key.clone())?)),
            (BackendChoice::Api, None) => Backend::Unconfigured(
                "GEMINI_BACKEND=api needs a key: set GEMINI_API_KEY (get one at https://aistudio.google.com/apikey)".into(),
            ),
            (BackendChoice::Auto, None) => match headless::CliBackend::from_config(config, path) {
                Ok(cli) => Backend::Cli(cli),
                Err(_) => Backend::Unconfigured(format!(
                    "no Gemini backend: set GEMINI_API_KEY (https://aistudio.google.com/apikey), or use the Gemini CLI's login \
                     ({}): install it (`npm install -g @google/gemini-cli`), run `gemini` once to sign in, and keep it on PATH \
                     or name it in GEMINI_CLI_PATH (GEMINI_BACKEND=cli selects it explicitly)",
                    gemini_cli::LOGIN
                )),
            },
            (BackendChoice::Cli, _) => match headless::CliBackend::from_config(config, path) {
                Ok(cli) => Backend::Cli(cli),
                Err(message) => Backend::Unconfigured(format!("GEMINI_BACKEND=cli: {message}")),
            },
        })
    }

    pub fn catalogue(&self) -> &Catalogue {
        &self.catalogue
    }

    /// Refreshes the catalogue from the backend's model list (the API's `GET /v1beta/models`,
    /// fetched once and cached by the client); returns how many models were listed. Backends
    /// without a model list leave the built-in table as it is.
    pub async fn refresh_models(&self) -> Result<usize, GeminiError> {
        match &self.backend {
            Backend::Api(c) => {
                let listed = c.models().await?;
                let n = listed.len();
                self.catalogue.refresh(listed);
                Ok(n)
            }
            _ => Ok(0),
        }
    }

    /// The configured backend (for readiness checks).
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// What the backend is, for `doctor`: where it sends calls, or why it cannot.
    pub fn backend_info(&self) -> BackendInfo {
        match &self.backend {
            Backend::Api(api) => match api.vertex_settings() {
                Some(v) => BackendInfo::Vertex {
                    endpoint: v.endpoint(),
                    project: v.project.clone(),
                    location: v.location.clone(),
                    auth: if v.api_key.is_some() {
                        "API key (express mode)".into()
                    } else {
                        "Application Default Credentials".into()
                    },
                },
                None => BackendInfo::Api {
                    base_url: api.base_url().to_string(),
                },
            },
            Backend::Cli(cli) => BackendInfo::Cli {
                program: cli.program().to_path_buf(),
            },
            Backend::Unconfigured(why) => BackendInfo::Unconfigured(why.clone()),
        }
    }

    pub fn backend_name(&self) -> &'static str {
        match &self.backend {
            Backend::Api(a) if a.vertex_settings().is_some() => "vertex",
            Backend::Api(_) => "api",
            Backend::Cli(_) => "cli",
            Backend::Unconfigured(_) => "none",
        }
    }

    /// Kills every Gemini CLI call in flight and stops the agents, synchronously (for a
    /// SIGINT/SIGTERM handler before exiting, or a grace period that ran out; see
    /// [`headless::CliBackend::abort_all`]). Nothing to do for the REST API's calls: they end
    /// with the process.
    pub fn abort(&self) {
        if let Backend::Cli(c) = &self.backend {
            c.abort_all();
        }
        if let Some(pool) = self.agents.get() {
            pool.shutdown();
        }
    }

    /// Whether calls over the Interactions API are stored at Google, so a thread may continue
    /// its chain (`GEMINI_MCP_INTERACTIONS_STORE`).
    pub fn stores_interactions(&self) -> bool {
        matches!(&self.backend, Backend::Api(api) if api.stores_interactions())
    }

    /// Whether the backend keeps explicit context caches (the REST API; not Vertex AI's express
    /// mode, nor the Gemini CLI).
    pub fn keeps_caches(&self) -> bool {
        matches!(&self.backend, Backend::Api(api) if api.keeps_caches())
    }

    /// Whether the backend uploads documents too large to go inline (the Gemini API's Files API).
    pub fn takes_files(&self) -> bool {
        matches!(&self.backend, Backend::Api(api) if api.takes_files())
    }

    /// Makes a cache of `req`'s system instruction and first `covers` messages for `ttl`;
    /// `Ok(None)` when the backend keeps none.
    pub async fn create_cache(
        &self,
        req: &GenerateRequest,
        covers: usize,
        ttl: std::time::Duration,
        display_name: &str,
        ctx: &CallContext,
    ) -> Result<Option<api::cache::Made>, GeminiError> {
        match &self.backend {
            Backend::Api(api) => api.create_cache(req, covers, ttl, display_name, ctx).await,
            _ => Ok(None),
        }
    }

    /// Deletes the stored interaction `id` (the Interactions API; one already gone is no error).
    pub async fn delete_interaction(&self, id: &str) -> Result<(), GeminiError> {
        match &self.backend {
            Backend::Api(api) => api.delete_interaction(id).await,
            _ => Ok(()),
        }
    }

    /// Deletes the cache `name` (one already gone is no error).
    pub async fn delete_cache(&self, name: &str) -> Result<(), GeminiError> {
        match &self.backend {
            Backend::Api(api) => api.delete_cache(name).await,
            _ => Ok(()),
        }
    }

    /// One answer, with retries inside the backend and the fallbacks here: after capacity
    /// errors the configured fallback model answers; after a 404 NOT_FOUND for a model with an
    /// announced replacement, the replacement does (the API, not a date compiled into the
    /// table, says a model is gone). `GEMINI_FALLBACK_MODEL=none` turns both off.
    pub async fn generate(
        &self,
        req: GenerateRequest,
        ctx: &CallContext,
    ) -> Result<GenerateResponse, GeminiError> {
        let first = self.generate_once(&req, ctx).await;
        let e = match first {
            // An agent's run has no other model to fall back to.
            Err(e) if (e.is_capacity() || e.is_not_found()) && req.agent.is_none() => e,
            other => return other,
        };
        let (cause, to) = if e.is_capacity() {
            (FallbackCause::Capacity, self.fallback_model.as_str())
        } else {
            match &req.model.replacement {
                Some(r) => (FallbackCause::ShutDown, r.as_str()),
                None => return Err(e),
            }
        };
        if !self.fallbacks_allowed() {
            return Err(match cause {
                FallbackCause::ShutDown => e.with_hint(format!(
                    "{} is no longer served; its replacement is {to}: name it (fallbacks are off: \
                     GEMINI_FALLBACK_MODEL=none).",
                    req.model.id
                )),
                FallbackCause::Capacity => e,
            });
        }
        let Ok(fallback) = self.catalogue.resolve(to) else {
            return Err(e);
        };
        if fallback.id == req.model.id {
            return Err(e);
        }
        ctx.report(match cause {
            FallbackCause::Capacity => format!(
                "{} is over capacity; asking {} instead",
                req.model.id, fallback.id
            ),
            FallbackCause::ShutDown => format!(
                "{} is no longer served (404); asking its replacement {} instead",
                req.model.id, fallback.id
            ),
        });
        let from = req.model.id.clone();
        if let Some(m) = &self.metrics {
            m.fallback(&from, &fallback.id);
        }
        let mut req = req;
        req.model = fallback;
        // A cache belongs to its model: the fallback is sent the whole request.
        req.cache = None;
        let mut resp = self.generate_once(&req, ctx).await?;
        resp.fallback = Some(Fallback {
            cause,
            from,
            to: req.model.id.clone(),
            reason: e.to_string(),
        });
        Ok(resp)
    }

    /// Whether another model may answer when the one asked for cannot
    /// (`GEMINI_FALLBACK_MODEL` is not `none`).
    fn fallbacks_allowed(&self) -> bool {
        !self.fallback_model.is_empty() && !self.fallback_model.eq_ignore_ascii_case("none")
    }

    /// The service tier calls are asked to run at, as the backend sends it; `None` when none is
    /// sent (the API's default, standard; the Gemini CLI's calls never carry one).
    pub fn tier_sent(&self) -> Option<ServiceTier> {
        match &self.backend {
            Backend::Api(c) => c.tier_sent(),
            Backend::Cli(_) | Backend::Unconfigured(_) => None,
        }
    }

    /// The body `req` would be sent with, when the backend is the API (the Gemini CLI is sent
    /// a prompt of its own, not this request): for a dry run to show.
    pub fn request_body(&self, req: &GenerateRequest) -> Option<Result<Vec<u8>, GeminiError>> {
        match &self.backend {
            Backend::Api(c) => Some(c.body(req)),
            Backend::Cli(_) | Backend::Unconfigured(_) => None,
        }
    }

    async fn generate_once(
        &self,
        req: &GenerateRequest,
        ctx: &CallContext,
    ) -> Result<GenerateResponse, GeminiError> {
        match &self.backend {
            Backend::Api(c) => c.generate(req, ctx).await,
            Backend::Cli(_) if req.agent.is_some() => Err(GeminiError::NotConfigured {
                message: "`research` needs the Gemini API: Deep Research runs on the Interactions API, \
                          which the Gemini CLI does not reach. Set GEMINI_API_KEY (and GEMINI_BACKEND=api \
                          or auto), or turn research off (GEMINI_MCP_DEEP_RESEARCH=0)"
                    .into(),
            }),
            Backend::Cli(c) => {
                // The CLI's own retries are its own: one request as far as we can see.
                let span = crate::traces::gemini_request("cli", &req.model.id, 1);
                let answer = async {
                    match &self.warm {
                        Some(warm) => warm.generate(c, &self.agents()?, req, ctx).await,
                        None => c.generate(req, ctx).await,
                    }
                }
                .instrument(span.clone())
                .await;
                let used = match &answer {
                    Ok(a) => Ok((a.usage.input, a.usage.output)),
                    Err(e) => Err(e.kind()),
                };
                crate::traces::gemini_answered(&span, used);
                answer
            }
            Backend::Unconfigured(message) => Err(GeminiError::NotConfigured {
                message: message.clone(),
            }),
        }
    }
}

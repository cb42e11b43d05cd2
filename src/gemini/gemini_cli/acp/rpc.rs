//! The ACP connection over a process's pipes: session updates routed to the prompt waiting on
//! their session, permission requests answered by the policy, and ACP's errors in our terms.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, FileSystemCapabilities, InitializeRequest, RequestPermissionRequest,
    SessionNotification, SessionUpdate,
};
use agent_client_protocol::{Agent, ByteStreams, Client};
use tokio::sync::{mpsc, oneshot};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use super::{Decision, lock, policy};
use crate::gemini::gemini_cli::{ProcessGroup, login_refused, login_refused_error};
use crate::gemini::vocabulary::{GeminiError, cli_error};

/// Updates routed from the connection to the prompt waiting on a session.
pub(super) enum Event {
    Update(Box<SessionUpdate>),
    Permission(Decision),
}

pub(super) type Routes = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Event>>>>;

pub(super) type Ready = oneshot::Receiver<Result<(ConnectionTo<Agent>, bool), String>>;

/// Serves the ACP connection over the child's pipes until it ends: session updates routed to
/// the prompt waiting on their session, permission requests answered by the policy. Resolves
/// the returned receiver once `initialize` is answered (with the connection and whether the
/// agent can load sessions); `closed` fires when the connection ends.
pub(super) fn connect(
    mut child: tokio::process::Child,
    group: Option<ProcessGroup>,
    routes: Routes,
    policy: Option<Arc<policy::Judge>>,
    closed: tokio::sync::watch::Sender<bool>,
) -> Ready {
    let (ready_tx, ready_rx) = oneshot::channel();
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = child.stdout.take().expect("piped stdout");
    let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
    let notify_routes = routes.clone();
    tokio::spawn(async move {
        let ready_tx = Mutex::new(Some(ready_tx));
        let connection = Client
            .v1()
            .name("gemini-mcp-server")
            .on_receive_notification(
                async move |n: SessionNotification, _cx| {
                    let id = n.session_id.0.to_string();
                    if let Some(tx) = lock(&notify_routes).get(&id) {
                        let _ = tx.send(Event::Update(Box::new(n.update)));
                    }
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_request(
                async move |request: RequestPermissionRequest, responder, _cx| {
                    let (answer, decision) = match &policy {
                        // Paths are resolved on disk: off the runtime.
                        Some(judge) => {
                            let (judge, req) = (judge.clone(), request.clone());
                            tokio::task::spawn_blocking(move || policy::answer(&judge, &req))
                                .await
                                .unwrap_or_else(|_| policy::refuse(&request))
                        }
                        None => policy::refuse(&request),
                    };
                    tracing::info!(tool = %decision.tool, allowed = decision.allowed, reason = %decision.reason, "ACP permission");
                    let id = request.session_id.0.to_string();
                    if let Some(tx) = lock(&routes).get(&id) {
                        let _ = tx.send(Event::Permission(decision));
                    }
                    responder.respond(answer)
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
                let init = InitializeRequest::new(ProtocolVersion::V1).client_capabilities(
                    ClientCapabilities::new()
                        .fs(FileSystemCapabilities::new()
                            .read_text_file(false)
                            .write_text_file(false))
                        .terminal(false),
                );
                let reply = cx.send_request(init).block_task().await;
                let tx = lock(&ready_tx).take();
                match reply {
                    Ok(r) => {
                        if let Some(tx) = tx {
                            let _ = tx.send(Ok((cx.clone(), r.agent_capabilities.load_session)));
                        }
                        // Serve until the process ends.
                        std::future::pending::<()>().await;
                        Ok(())
                    }
                    Err(e) => {
                        if let Some(tx) = tx {
                            let _ = tx.send(Err(e.message.clone()));
                        }
                        Err(e)
                    }
                }
            });
        // The connection serves until the process exits (a crash, a kill); if the connection
        // ends first, the process goes too. Either way it is reaped here.
        tokio::select! {
            result = connection => {
                if let Err(e) = result {
                    tracing::debug!(error = %e.message, "ACP connection ended");
                }
            }
            status = child.wait() => {
                tracing::debug!(?status, "the Gemini CLI (ACP) exited");
            }
        }
        let _ = closed.send(true);
        match group {
            Some(group) => group.kill_and_reap(&mut child).await,
            None => {
                let _ = child.wait().await;
            }
        }
    });
    ready_rx
}

/// An ACP error as ours: 429 a capacity error, Google's refusal of an individual account's login
/// explained (the CLI answers `session/new` with -32000 and Google's words), the rest quoted.
pub(super) fn acp_error(e: &agent_client_protocol::Error) -> GeminiError {
    let code: i32 = e.code.into();
    if login_refused(&e.message) {
        return login_refused_error(None);
    }
    let message = crate::redact::scrub(&e.message);
    match code {
        429 | 503 => GeminiError::Api {
            status: code as u16,
            code: if code == 429 {
                "RESOURCE_EXHAUSTED".into()
            } else {
                "UNAVAILABLE".into()
            },
            message,
            hint:
                "Gemini's quota or capacity is exhausted: wait and retry, or use a smaller model."
                    .into(),
        },
        _ => cli_error(format!(
            "the Gemini CLI agent failed: {message} (ACP error {code})"
        )),
    }
}

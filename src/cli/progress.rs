//! A progress indicator on stderr while Gemini thinks, shown only when stderr is a terminal (a
//! git hook run from a terminal shows it; CI logs and pipes stay clean). The pipeline's progress
//! messages ("reading files", "waiting for Gemini") replace its text; the elapsed time ticks. An
//! investigation's steps are printed as lines of their own, so the terminal keeps them.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::gemini::ProgressFn;
use crate::term;

const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// The running indicator; [`Spinner::stop`] clears its line.
pub struct Spinner {
    running: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
}

/// Starts the indicator when stderr is a terminal; returns the sink for the pipeline's progress.
pub fn start() -> (Option<ProgressFn>, Spinner) {
    if !term::stderr_is_terminal() {
        return (None, Spinner { running: None });
    }
    let message = Arc::new(Mutex::new(String::from("starting")));
    let sink = message.clone();
    let progress: ProgressFn = Arc::new(move |p| {
        if p.step {
            // An investigation's step stays on screen, above the spinner's line. Its text holds
            // what the model chose (a pattern, a path): the sink shows its controls.
            let mut err = term::stderr();
            let _ = err.clear_line();
            let _ = err.line(format_args!("  · {}", p.message));
            let _ = err.flush();
            return;
        }
        *sink.lock().unwrap_or_else(|e| e.into_inner()) = p.message;
    });
    let (stop, mut stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let started = Instant::now();
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let mut frame = 0usize;
        loop {
            tokio::select! {
                _ = &mut stopped => break,
                _ = tick.tick() => {
                    let text = message.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    let mut err = term::stderr();
                    let _ = err.clear_line();
                    let _ = err.text(format_args!(
                        "{} {text} ({}s)",
                        FRAMES[frame % FRAMES.len()],
                        started.elapsed().as_secs()
                    ));
                    let _ = err.flush();
                    frame += 1;
                }
            }
        }
        let mut err = term::stderr();
        let _ = err.clear_line();
        let _ = err.flush();
    });
    (
        Some(progress),
        Spinner {
            running: Some((stop, task)),
        },
    )
}

impl Spinner {
    /// Stops the indicator and clears its line (before anything else is printed).
    pub async fn stop(self) {
        if let Some((stop, task)) = self.running {
            let _ = stop.send(());
            let _ = task.await;
        }
    }
}

//! Shutdown requests for the transports: the command line turns signals (Ctrl-C, SIGTERM) into
//! requests and hands them to the server it runs, which decides what a request means (stop
//! taking calls, then cut the grace short on the next one). The transports never listen for
//! signals themselves, so a test or an embedding program can stop a server without one.

use tokio::sync::watch;

/// Shutdown requests, counted: each call to [`Shutdown::requested`] waits for one more request
/// than it has seen, so a request arriving between two waits is not lost.
#[derive(Clone)]
pub struct Shutdown(watch::Receiver<u32>);

/// The sending side of a [`Shutdown`] made by hand.
pub struct Trigger(watch::Sender<u32>);

impl Trigger {
    /// Asks the server to stop (again).
    pub fn request(&self) {
        self.0.send_modify(|n| *n += 1);
    }
}

impl Shutdown {
    /// Requests made by calling the returned [`Trigger`].
    pub fn manual() -> (Trigger, Shutdown) {
        let (tx, rx) = watch::channel(0);
        (Trigger(tx), Shutdown(rx))
    }

    /// One request per signal received from now on (Ctrl-C, or SIGINT/SIGTERM on Unix, Ctrl-Break
    /// and the console closing on Windows). The listeners are made once, here, so a second signal
    /// close behind the first is counted too.
    /// Must be called inside the runtime.
    pub fn on_signals() -> Shutdown {
        let (trigger, shutdown) = Shutdown::manual();
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            match (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) {
                (Ok(mut int), Ok(mut term)) => {
                    tokio::spawn(async move {
                        loop {
                            tokio::select! {
                                _ = int.recv() => {}
                                _ = term.recv() => {}
                            }
                            trigger.request();
                        }
                    });
                }
                _ => on_fallback(trigger),
            }
        }
        #[cfg(windows)]
        {
            use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close};
            match (ctrl_c(), ctrl_break(), ctrl_close()) {
                (Ok(mut int), Ok(mut brk), Ok(mut close)) => {
                    tokio::spawn(async move {
                        loop {
                            tokio::select! {
                                _ = int.recv() => {}
                                _ = brk.recv() => {}
                                _ = close.recv() => {}
                            }
                            trigger.request();
                        }
                    });
                }
                _ => on_fallback(trigger),
            }
        }
        #[cfg(not(any(unix, windows)))]
        on_fallback(trigger);
        shutdown
    }

    /// Waits for the next request. Never returns when no request can come any more.
    pub async fn requested(&mut self) {
        if self.0.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// One request per signal [`signal_fallback`] sees: where the platform's own listeners could
/// not be made.
fn on_fallback(trigger: Trigger) {
    tokio::spawn(async move {
        loop {
            signal_fallback().await;
            trigger.request();
        }
    });
}

/// Ctrl-C through the portable listener, for platforms (or failures) without Unix signals; on
/// Windows also Ctrl-Break and the console closing (the console's ways of asking a program to end).
async fn signal_fallback() {
    #[cfg(windows)]
    {
        use tokio::signal::windows::{ctrl_break, ctrl_close};
        if let (Ok(mut brk), Ok(mut close)) = (ctrl_break(), ctrl_close()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = brk.recv() => {}
                _ = close.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// The next Ctrl-C, or SIGTERM on Unix, or Ctrl-Break or the console closing on Windows.
pub async fn signal() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(t) => t,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    signal_fallback().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_between_two_waits_is_not_lost() {
        let (trigger, mut shutdown) = Shutdown::manual();
        trigger.request();
        tokio::time::timeout(std::time::Duration::from_secs(1), shutdown.requested())
            .await
            .expect("the first request");
        trigger.request();
        tokio::time::timeout(std::time::Duration::from_secs(1), shutdown.requested())
            .await
            .expect("the second request, made before the wait");
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(50), shutdown.requested()).await;
        assert!(waited.is_err(), "no third request was made");
    }
}

//! SIGTERM and Ctrl-C. The first signal drains: the server stops accepting connections and
//! waits for the running requests (streams included) to finish. A second signal, or the
//! drain outlasting `--shutdown-timeout`, ends the running requests at once.

use std::time::Duration;

use tokio::sync::watch;

/// The number of SIGTERM / SIGINT received so far, shared by the tasks that wait on them.
#[derive(Clone)]
pub struct Signals(watch::Receiver<u32>);

impl Signals {
    /// Starts catching SIGTERM and SIGINT (from now on they no longer kill the process).
    /// Must be called inside the runtime.
    pub fn catch() -> Signals {
        let (tx, rx) = watch::channel(0u32);
        let mut caught = Caught::install();
        tokio::spawn(async move {
            loop {
                caught.next().await;
                tx.send_modify(|n| *n += 1);
            }
        });
        Signals(rx)
    }

    /// Waits for the `n`th signal (returns at once if it came already).
    pub async fn nth(&mut self, n: u32) {
        if self.0.wait_for(|&c| c >= n).await.is_err() {
            // the catching task is gone (the runtime is shutting down): never
            std::future::pending::<()>().await
        }
    }

    /// After the first signal: waits for a second one or for `timeout`, and says which.
    pub async fn force(mut self, timeout: Duration) -> &'static str {
        self.nth(1).await;
        tokio::select! {
            _ = self.nth(2) => "a second signal",
            _ = tokio::time::sleep(timeout) => "the shutdown timeout passed",
        }
    }
}

/// The process's SIGTERM and SIGINT handlers (installed when made; a kind that cannot be
/// installed is never received).
struct Caught {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
}

impl Caught {
    fn install() -> Caught {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Caught {
                term: signal(SignalKind::terminate()).ok(),
                int: signal(SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(not(unix))]
        Caught {}
    }

    /// The next signal.
    async fn next(&mut self) {
        #[cfg(unix)]
        {
            async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
                let got = match s {
                    Some(s) => s.recv().await.is_some(),
                    None => false,
                };
                if !got {
                    std::future::pending::<()>().await
                }
            }
            tokio::select! {
                _ = recv(&mut self.term) => {}
                _ = recv(&mut self.int) => {}
            }
        }
        #[cfg(not(unix))]
        {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await
            }
        }
    }
}

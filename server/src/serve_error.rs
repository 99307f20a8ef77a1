//! Why `superinfer serve` could not start or stopped early. Each variant says what failed;
//! the cause is its [`source`](std::error::Error::source) (print the whole chain with
//! [`superinfer_runtime::chain`]).

use std::io;
use std::path::PathBuf;

use superinfer_runtime::Error as RuntimeError;

// The runtime's error is boxed where it sits beside a path: a `Result<_, ServeError>` stays
// small (clippy's result_large_err).

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot start the async runtime")]
    Runtime(#[source] io::Error),
    #[error("cannot listen on {addr} (choose another --port or --host)")]
    Bind {
        addr: String,
        #[source]
        source: io::Error,
    },
    #[error("the HTTP server failed")]
    Http(#[source] io::Error),
    #[error("cannot start the engine thread")]
    EngineThread(#[source] io::Error),
    #[error("loading {}", path.display())]
    Load {
        path: PathBuf,
        #[source]
        source: Box<RuntimeError>,
    },
    #[error("loading the draft model {}", path.display())]
    LoadDraft {
        path: PathBuf,
        #[source]
        source: Box<RuntimeError>,
    },
    #[error("the draft model {}", path.display())]
    Draft {
        path: PathBuf,
        #[source]
        source: Box<RuntimeError>,
    },
    /// The chat template could not be read or parsed (the message says which and why).
    #[error("{0}")]
    Template(String),
    #[error("cannot start the scheduler")]
    Scheduler(#[source] RuntimeError),
    #[error("the engine failed")]
    Engine(#[source] RuntimeError),
    #[error("the engine thread panicked")]
    EnginePanicked,
    /// `RUST_LOG` does not parse (the message says how it should read).
    #[error("{0}")]
    Logging(String),
}

//! The runtime's errors: core's errors with the context of where they happened, and the
//! file-system errors kept as their sources (see [`chain`] to print one with its causes).

use std::path::{Path, PathBuf};

use crate::load::OpenError;

/// Errors of the runtime. `Display` says what failed; the reason is the [`source`] (print
/// both with [`chain`]).
///
/// [`source`]: std::error::Error::source
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A model file could not be opened or mapped (the `io::Error` is its source).
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The shards of a split model are missing or do not belong together.
    #[error("{0}")]
    Shards(String),
    /// A model file that is not a model this build runs (corrupt, unsupported, or missing
    /// a tensor): the file, and core's error as the source.
    #[error("{}", path.display())]
    Model {
        path: PathBuf,
        #[source]
        source: superinfer_core::Error,
    },
    /// An error of core's (tokenizing, the context, the KV cache, ...).
    #[error(transparent)]
    Core(#[from] superinfer_core::Error),
    /// A file of a Hugging Face model directory that cannot be read as such: the file, and
    /// what is wrong with it (naming the field or tensor).
    #[error("{}: {msg}", path.display())]
    Hf { path: PathBuf, msg: String },
    /// Options that cannot work together, with what to change.
    #[error("{0}")]
    Usage(String),
    /// A [`Service`](crate::Service)'s engine thread could not start or ended abnormally.
    #[error("{0}")]
    EngineThread(String),
}

impl Error {
    pub(crate) fn model(path: &Path, source: superinfer_core::Error) -> Error {
        Error::Model {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// An error and its causes, `what failed: why: the root cause`, as one line.
///
/// ```
/// use superinfer_runtime::{chain, Engine, EngineOptions};
/// let e = Engine::load("/no/such/model.gguf".as_ref(), &EngineOptions::default()).err().unwrap();
/// let line = chain(&e);
/// assert!(line.starts_with("cannot open model '/no/such/model.gguf': "), "{line}");
/// ```
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(c) = cause {
            write!(f, ": {c}")?;
            cause = c.source();
        }
        Ok(())
    }
}

/// [`Chain`] as a `String`: the message a command line prints for an error.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    Chain(e).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_error_is_the_source_not_the_message() {
        let e = Error::from(OpenError::Open {
            path: "m.gguf".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
        assert_eq!(e.to_string(), "cannot open model 'm.gguf'");
        let io = std::error::Error::source(&e)
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .expect("the io::Error is the source");
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
        assert_eq!(chain(&e), format!("cannot open model 'm.gguf': {io}"));
    }

    #[test]
    fn model_error_chains_core_error() {
        let e = Error::model(
            Path::new("m.gguf"),
            superinfer_core::Error::MissingKey("general.architecture".into()),
        );
        assert_eq!(
            chain(&e),
            "m.gguf: model metadata is missing required key 'general.architecture'"
        );
    }
}

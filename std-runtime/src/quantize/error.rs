//! Why a quantization did not happen, each with what to do about it.

use std::path::{Path, PathBuf};

/// The errors of [`super::quantize`]; `Display` is the whole message.
#[derive(Debug, thiserror::Error)]
pub enum QuantizeError {
    /// The input is not a model this build reads (not a GGUF file, corrupt, missing).
    #[error("{0}")]
    Input(String),
    /// A type or option this build does not support (the message lists what is).
    #[error("{0}")]
    Unsupported(String),
    /// The input is already quantized and `--allow-requantize` was not given.
    #[error("{0}")]
    Requantize(String),
    /// The per-tensor type choice failed (a shape llama.cpp has no fallback for, ...).
    #[error("{0}")]
    Plan(String),
    /// Input and output are the same file.
    #[error("input and output are the same file: '{}'", .0.display())]
    SameFile(PathBuf),
    /// Writing the output failed.
    #[error("cannot write '{}': {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl QuantizeError {
    pub(crate) fn input(path: &Path, e: &(dyn std::error::Error + 'static)) -> QuantizeError {
        let msg = crate::chain(e);
        let shown = path.display().to_string();
        QuantizeError::Input(if msg.contains(&shown) {
            msg
        } else {
            format!("{shown}: {msg}")
        })
    }

    pub(crate) fn write(path: &Path, source: std::io::Error) -> QuantizeError {
        QuantizeError::Write {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Refuses an output that is the input (or a link to it): the input is mapped while the
/// output is written.
pub(crate) fn check_distinct(input: &Path, output: &Path) -> Result<(), QuantizeError> {
    let Ok(a) = input.canonicalize() else {
        return Ok(()); // opening the input reports it
    };
    let b = match output.canonicalize() {
        Ok(b) => b,
        Err(_) => {
            let parent = output.parent().filter(|p| !p.as_os_str().is_empty());
            let dir = parent.unwrap_or(Path::new(".")).canonicalize();
            match (dir, output.file_name()) {
                (Ok(d), Some(n)) => d.join(n),
                _ => return Ok(()),
            }
        }
    };
    if a == b {
        return Err(QuantizeError::SameFile(output.to_path_buf()));
    }
    Ok(())
}

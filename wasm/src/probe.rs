//! The header check, run while the download is still streaming: as soon as the bytes
//! received so far hold the whole GGUF header, the file is checked (GGUF at all, a known
//! architecture, tensor types this build computes with, shapes) and the memory the engine
//! will need is computed, so a model that cannot run fails before the rest is downloaded.

use superinfer_core::generate::{ContextOptions, MemoryPlan, Model};
use superinfer_core::gguf::{keys, GgufFile, MAGIC};
use superinfer_core::kernels::Kernels;

use crate::buffer::{gb, too_large};
use crate::errors::Result;

/// What one wasm32 instance can address.
pub const WASM32_LIMIT: u64 = 4 << 30;
/// Room kept for everything that is neither weights nor the context's buffers (tokenizer,
/// chat template, the allocator's slack, the stack).
pub const HEADROOM: u64 = 64 << 20;

/// The header, once it is all there, as JSON for the JavaScript side.
pub fn probe(
    bytes: &[u8],
    loaded: usize,
    kernels: &Kernels,
    opts: &ContextOptions,
) -> Result<Option<serde_json::Value>> {
    let loaded = loaded.min(bytes.len());
    let complete = loaded == bytes.len();
    if loaded >= 4 {
        let magic = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes"));
        if magic != MAGIC {
            return Err(superinfer_core::Error::BadMagic { found: magic }.into());
        }
    }
    // Parsing looks at the header only (tensor data is range-checked against the whole
    // length, never read); the parse is trusted when everything it read was received.
    let file = match GgufFile::parse(bytes) {
        Ok(f) if f.data_offset() <= loaded || complete => f,
        Ok(_) => return Ok(None),
        Err(e @ superinfer_core::Error::UnsupportedVersion(_)) if loaded >= 8 => {
            return Err(e.into())
        }
        Err(e) if complete => return Err(e.into()),
        // The header may simply not be all here yet; but an error the bytes received so far
        // show on their own (a tensor type id no one knows, a duplicate key...) is final.
        Err(_) => {
            return match GgufFile::parse(&bytes[..loaded]) {
                Err(e) if !depends_on_length(&e) => Err(e.into()),
                _ => Ok(None),
            }
        }
    };
    let arch = file
        .get_str(keys::GENERAL_ARCHITECTURE)
        .ok()
        .flatten()
        .unwrap_or("unknown")
        .to_string();
    let name = file
        .get_str(keys::GENERAL_NAME)
        .ok()
        .flatten()
        .map(str::to_string);
    let n_tensors = file.tensors().len();
    let header_bytes = file.data_offset();
    drop(file);
    // the weights as views (their data is not read), the tokenizer and the context's plan
    let model = Model::from_gguf(bytes, kernels.clone())?;
    let plan = MemoryPlan::new(&model, opts)?;
    let needed = bytes.len() as u64 + plan.total() as u64 + HEADROOM;
    if needed > WASM32_LIMIT {
        return Err(too_large(
            needed,
            &format!(
                "that is more than wasm32 can address (file {}, context buffers {} for {} tokens)",
                gb(bytes.len() as u64),
                gb(plan.total() as u64),
                opts.resolve(&model).map(|o| o.n_ctx).unwrap_or(0)
            ),
        ));
    }
    Ok(Some(serde_json::json!({
        "architecture": arch,
        "name": name,
        "tensors": n_tensors,
        "header_bytes": header_bytes,
        "file_size": bytes.len(),
        "context_bytes": plan.total(),
        "n_ctx_train": model.config().n_ctx_train,
    })))
}

/// Errors a longer input could avoid (parsing a prefix of the file fails with these while the
/// header is incomplete).
fn depends_on_length(e: &superinfer_core::Error) -> bool {
    use superinfer_core::Error::*;
    matches!(
        e,
        Truncated { .. } | Absurd { .. } | TensorOutOfBounds { .. }
    )
}

/// The error for a file whose size alone is over the limit (checked before anything is
/// allocated or downloaded).
pub fn check_size(file_size: u64) -> Result<()> {
    if file_size + HEADROOM > WASM32_LIMIT {
        return Err(too_large(
            file_size + HEADROOM,
            "its file alone is more than wasm32 can address",
        ));
    }
    Ok(())
}

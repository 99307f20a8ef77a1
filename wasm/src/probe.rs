//! The header check, run while the download is still streaming: as soon as the bytes
//! received so far hold the whole GGUF header, the file is checked (GGUF at all, a known
//! architecture, tensor types this build computes with, shapes) and the memory the engine
//! will need is computed, so a model that cannot run fails before the rest is downloaded.
//!
//! A model split with `gguf-split` is checked shard by shard: the first shard's header says
//! it is one (the parts become shards, [`ModelBuffer::set_shards`]), must be the first and
//! must count as many shards as parts were given, and its architecture must be known; each
//! later shard's header, once received, must be the next shard of as many. The weights and
//! the memory are checked once every shard's header is in.

use superinfer_core::generate::{ContextOptions, MemoryPlan, Model};
use superinfer_core::gguf::{keys, shard_file_name, GgufFile, SplitInfo, MAGIC};
use superinfer_core::kernels::Kernels;
use superinfer_core::model::Config;

use crate::buffer::{gb, too_large, Layout, ModelBuffer};
use crate::errors::{Failure, Result};

/// What one wasm32 instance can address.
pub const WASM32_LIMIT: u64 = 4 << 30;
/// Room kept for everything that is neither weights nor the context's buffers (tokenizer,
/// chat template, the allocator's slack, the stack).
pub const HEADROOM: u64 = 64 << 20;

/// The header, once it is all there, as JSON for the JavaScript side; `loaded`: the bytes of
/// the parts received so far (the parts stream in order).
pub fn probe(
    buf: &mut ModelBuffer,
    loaded: usize,
    kernels: &Kernels,
    opts: &ContextOptions,
) -> Result<Option<serde_json::Value>> {
    let total = buf.file_size();
    let loaded = loaded.min(total);
    let n = buf.sizes().len();
    if buf.layout() != Layout::Shards {
        // one file (or its byte ranges, or parts whose kind is not known yet)
        let region = &buf.bytes()[..total];
        let Some(file) = parse_received(region, loaded)? else {
            return Ok(None);
        };
        match file.split()? {
            Some(s) if s.is_split() => check_first_shard(&s, n)?,
            _ => return summarize(&file, buf.len(), total, kernels, opts).map(Some),
        }
        buf.set_shards()?;
    }
    // the shards whose headers are in, in order
    let bytes = buf.bytes();
    let mut shards = Vec::with_capacity(n);
    let mut before = 0;
    for (i, (at, len)) in buf.files().into_iter().enumerate() {
        let received = loaded.saturating_sub(before).min(len);
        before += len;
        let region = &bytes[at..at + len];
        let Some(f) = parse_received(region, received).map_err(|e| in_part(i, e))? else {
            break;
        };
        let s = f.split()?;
        if i == 0 {
            // the architecture and its hyperparameters are checked before the rest
            // downloads (the vocabulary's size comes from a tensor another shard may hold)
            match Config::from_gguf(&f) {
                Ok(_) | Err(superinfer_core::Error::MissingTensor(_)) => {}
                Err(e) => return Err(e.into()),
            }
        } else {
            check_later_shard(i, s, n)?;
        }
        shards.push(f);
    }
    if shards.len() < n {
        return Ok(None);
    }
    let joined = GgufFile::from_shards(shards)?;
    summarize(&joined, buf.len(), total, kernels, opts).map(Some)
}

/// `"the model is split into 3 ..."` unless `s` (the first part's split keys) is shard 1 of
/// `n`.
fn check_first_shard(s: &SplitInfo, n: usize) -> Result<()> {
    if s.no != 0 {
        return Err(Failure::new(
            "invalid_argument",
            format!(
                "the first part is shard {} of {} of a split model (gguf-split): pass the shards \
                 in order, the first ({}) first",
                s.no as u32 + 1,
                s.count,
                shard_file_name("…", 0, s.count)
            ),
        ));
    }
    if s.count as usize != n {
        return Err(Failure::new(
            "invalid_argument",
            format!(
                "the model is split into {} shards (gguf-split) and {n} {} given: pass all {} \
                 shards ({} to {}), in order, as an array of URLs or Blobs",
                s.count,
                if n == 1 { "part was" } else { "parts were" },
                s.count,
                shard_file_name("…", 0, s.count),
                shard_file_name("…", s.count - 1, s.count)
            ),
        ));
    }
    Ok(())
}

/// Part `i` of `n` (not the first) must be shard `i` of `n`.
fn check_later_shard(i: usize, s: Option<SplitInfo>, n: usize) -> Result<()> {
    let why = match s {
        None => format!(
            "part {} is a GGUF file but not a shard of a split model (it has no split.count), \
             while the first part is shard 1 of {n}",
            i + 1
        ),
        Some(s) if s.count as usize != n => format!(
            "part {} is a shard of a model split into {}, but the first part is shard 1 of {n}",
            i + 1,
            s.count
        ),
        Some(s) if s.no as usize != i => format!(
            "part {} is shard {} of {n}: pass the shards in order",
            i + 1,
            s.no as u32 + 1
        ),
        Some(_) => return Ok(()),
    };
    Err(Failure::new("invalid_argument", why))
}

/// An error of part `i`'s bytes, saying which part when there are several.
fn in_part(i: usize, e: Failure) -> Failure {
    if i == 0 {
        return e;
    }
    Failure::new(e.code, format!("part {}: {}", i + 1, e.message))
}

/// The file parsed once its header is in the `received` first bytes of `bytes` (the rest is
/// zeros still to come); `None` until then. Errors the received bytes show on their own are
/// final at once.
fn parse_received(bytes: &[u8], received: usize) -> Result<Option<GgufFile<'_>>> {
    let complete = received == bytes.len();
    if received >= 4 {
        let magic = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes"));
        if magic != MAGIC {
            return Err(superinfer_core::Error::BadMagic { found: magic }.into());
        }
    }
    // Parsing looks at the header only (tensor data is range-checked against the whole
    // length, never read); the parse is trusted when everything it read was received.
    match GgufFile::parse(bytes) {
        Ok(f) if f.data_offset() <= received || complete => Ok(Some(f)),
        Ok(_) => Ok(None),
        Err(e @ superinfer_core::Error::UnsupportedVersion(_)) if received >= 8 => Err(e.into()),
        Err(e) if complete => Err(e.into()),
        // The header may simply not be all here yet; but an error the bytes received so far
        // show on their own (a tensor type id no one knows, a duplicate key...) is final.
        Err(_) => match GgufFile::parse(&bytes[..received]) {
            Err(e) if !depends_on_length(&e) => Err(e.into()),
            _ => Ok(None),
        },
    }
}

/// The weights (as views: their data is not read), the tokenizer and the context's memory of
/// a complete header; `memory`: the model buffer's bytes.
fn summarize(
    file: &GgufFile<'_>,
    memory: usize,
    file_size: usize,
    kernels: &Kernels,
    opts: &ContextOptions,
) -> Result<serde_json::Value> {
    let meta = |k| file.get_str(k).ok().flatten().map(str::to_string);
    let model = Model::from_file(file, kernels.clone())?;
    let plan = MemoryPlan::new(&model, opts)?;
    let needed = memory as u64 + plan.total() as u64 + HEADROOM;
    if needed > WASM32_LIMIT {
        return Err(too_large(
            needed,
            &format!(
                "that is more than wasm32 can address (file {}, context buffers {} for {} tokens)",
                gb(file_size as u64),
                gb(plan.total() as u64),
                opts.resolve(&model).map(|o| o.n_ctx).unwrap_or(0)
            ),
        ));
    }
    Ok(serde_json::json!({
        "architecture": meta(keys::GENERAL_ARCHITECTURE).unwrap_or_else(|| "unknown".into()),
        "name": meta(keys::GENERAL_NAME),
        "tensors": file.tensors().len(),
        "header_bytes": file.data_offset(),
        "file_size": file_size,
        "shards": file.n_shards(),
        "context_bytes": plan.total(),
        "n_ctx_train": model.config().n_ctx_train,
    }))
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

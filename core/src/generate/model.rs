//! `Model`: the weights, tokenizer and kernels of one GGUF file, borrowed from its bytes.

use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::kernels::Kernels;
use crate::model::{Config, Weights};
use crate::tokenizer::Tokenizer;

/// A model ready to decode: weights that borrow the file's bytes (`'a`), its tokenizer and
/// the kernels that compute with them.
pub struct Model<'a> {
    weights: Weights<'a>,
    tokenizer: Tokenizer,
    kernels: Kernels,
}

impl<'a> Model<'a> {
    /// Parses `bytes`, a whole GGUF file, with zero copies of the weights: every matrix
    /// stays in the file's row layout (no repacking, so the bytes may sit in flash). The
    /// file must start at an address aligned to its `general.alignment` (32 bytes unless it
    /// says otherwise), as the tensors' offsets are relative to it.
    pub fn from_gguf(bytes: &'a [u8], kernels: Kernels) -> Result<Model<'a>> {
        Self::from_file(&GgufFile::parse(bytes)?, kernels)
    }

    /// As [`Self::from_gguf`], over a parsed file: e.g. the shards of a split model joined
    /// with [`GgufFile::from_shards`] (each shard aligned as `from_gguf` asks of a file).
    pub fn from_file(file: &GgufFile<'a>, kernels: Kernels) -> Result<Model<'a>> {
        let weights = Weights::from_gguf(file, &kernels)?;
        let tokenizer = Tokenizer::from_gguf(file)?;
        Ok(Model {
            weights,
            tokenizer,
            kernels,
        })
    }

    /// A model of parts loaded elsewhere (std-runtime repacks the weights first).
    pub fn from_parts(weights: Weights<'a>, tokenizer: Tokenizer, kernels: Kernels) -> Model<'a> {
        Model {
            weights,
            tokenizer,
            kernels,
        }
    }

    pub fn config(&self) -> &Config {
        &self.weights.config
    }

    pub fn weights(&self) -> &Weights<'a> {
        &self.weights
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    pub fn kernels(&self) -> &Kernels {
        &self.kernels
    }

    /// The context a conversation gets when `n_ctx` tokens are asked for: 0 means
    /// min(4096, the trained context); more than the trained context is an error.
    pub fn context_size(&self, n_ctx: usize) -> Result<usize> {
        let trained = self.config().n_ctx_train;
        let n_ctx = if n_ctx == 0 { trained.min(4096) } else { n_ctx };
        if n_ctx > trained {
            return Err(Error::InvalidArgument(alloc::format!(
                "context size {n_ctx} exceeds the model's trained context of {trained} tokens"
            )));
        }
        Ok(n_ctx)
    }
}

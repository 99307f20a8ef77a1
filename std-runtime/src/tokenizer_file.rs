//! The tokenizer of a GGUF file alone: a model's (its weights are not read) or a vocab-only
//! file's, such as llama.cpp's `models/ggml-vocab-*.gguf`, as `llama-tokenize` loads them.

use std::path::Path;

use superinfer_core::gguf::GgufFile;
use superinfer_core::tokenizer::Tokenizer;

use crate::model_files::ModelFiles;
use crate::Error;

/// Loads the tokenizer of the GGUF file at `path` (the first shard of a split model holds
/// it) from its metadata only.
pub fn load_tokenizer(path: &Path) -> Result<Tokenizer, Error> {
    let files = ModelFiles::open_first(path)?;
    let f = GgufFile::parse(files.bytes(0)).map_err(|e| Error::model(path, e))?;
    Tokenizer::from_gguf(&f).map_err(|e| Error::model(path, e))
}

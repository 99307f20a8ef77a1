//! Hugging Face model directories in (`-m DIR`): `config.json`, `model.safetensors` read in
//! place (zero-copy), the tokenizer from `tokenizer.json` / `vocab.txt`, and
//! sentence-transformers' `modules.json` / `1_Pooling/config.json` /
//! `sentence_bert_config.json`. The directory becomes what a GGUF file would be: a GGUF
//! header with llama.cpp's metadata keys and tensor names ([`HfModel::header`]), whose
//! tensors point into the safetensors file's data section, parsed with core's
//! `GgufFile::parse_detached`; everything after that (config, weights, tokenizer) is the
//! GGUF path. Architectures: `bert` (`config.rs`).

mod config;
pub mod safetensors;
mod tokenizer;

use std::path::{Path, PathBuf};

use superinfer_core::gguf::GgufWriter;

use crate::Error;

/// What a Hugging Face directory becomes: a GGUF header over the weights file's data.
pub struct HfModel {
    /// `model.safetensors`.
    pub weights: PathBuf,
    /// A GGUF header (metadata and tensor directory) whose offsets point into the data
    /// section of `weights`, which starts at byte `data_start`.
    pub header: Vec<u8>,
    pub data_start: usize,
    /// Whether the sentence-transformers pipeline normalises its embeddings (`modules.json`
    /// lists `Normalize`).
    pub normalize: bool,
    /// sentence-transformers' `max_seq_length` (`sentence_bert_config.json`), if given.
    pub max_seq_length: Option<usize>,
}

/// An error about `file` (in the model directory): what is wrong, naming the field.
pub(crate) fn err(file: &Path, msg: impl Into<String>) -> Error {
    Error::Hf {
        path: file.to_path_buf(),
        msg: msg.into(),
    }
}

/// Reads a JSON file of the directory.
pub(crate) fn read_json(path: &Path) -> Result<serde_json::Value, Error> {
    let text = std::fs::read(path).map_err(|e| err(path, format!("cannot read it ({e})")))?;
    serde_json::from_slice(&text).map_err(|e| err(path, format!("not valid JSON ({e})")))
}

impl HfModel {
    /// Reads the directory's configuration and tokenizer and the weights file's header
    /// (`bytes`: the mapped `model.safetensors`, from [`Self::weights_path`]).
    pub fn open(dir: &Path, weights: &[u8]) -> Result<HfModel, Error> {
        let config_path = dir.join("config.json");
        if !config_path.is_file() {
            return Err(err(
                &config_path,
                "missing: a Hugging Face model directory needs config.json",
            ));
        }
        let cfg = read_json(&config_path)?;
        let weights_path = Self::weights_path(dir)?;
        let st = safetensors::parse(weights).map_err(|m| err(&weights_path, m))?;
        let mut w = GgufWriter::new();
        let arch = config::Arch::read(&config_path, &cfg)?;
        arch.metadata(&config_path, &cfg, &mut w)?;
        let (pooling, normalize, max_seq_length) = config::sentence_transformers(dir)?;
        arch.pooling(pooling, &mut w);
        tokenizer::metadata(dir, &mut w)?;
        let offsets = arch.tensors(&weights_path, &st, &mut w)?;
        let header = w
            .detached_header(&offsets)
            .map_err(|e| err(&weights_path, e.to_string()))?;
        Ok(HfModel {
            weights: weights_path,
            header,
            data_start: st.data_start,
            normalize,
            max_seq_length,
        })
    }

    /// The weights file of `dir`: `model.safetensors` (sharded weights are not read yet).
    pub fn weights_path(dir: &Path) -> Result<PathBuf, Error> {
        let config = dir.join("config.json");
        if !config.is_file() {
            return Err(err(
                &config,
                "missing: a Hugging Face model directory needs config.json (and a GGUF model \
                 is a file, not a directory)",
            ));
        }
        let p = dir.join("model.safetensors");
        if p.is_file() {
            return Ok(p);
        }
        let index = dir.join("model.safetensors.index.json");
        if index.is_file() {
            return Err(err(
                &index,
                "weights in several safetensors files are not supported yet (supported: one \
                 model.safetensors)",
            ));
        }
        Err(err(&p, "missing: the directory has no model.safetensors"))
    }
}

/// A whole GGUF file in memory with `f`'s metadata and tensors, every 2-D matrix of the
/// layers (`blk.*`) quantized to `ty` with core's reference quantizer (rows that are not
/// whole blocks of `ty` keep their type): quantizing on load (`embed --type q8_0`).
pub fn requantize(
    f: &superinfer_core::gguf::GgufFile<'_>,
    ty: superinfer_core::quant::GgmlType,
) -> Result<Vec<u8>, superinfer_core::Error> {
    use superinfer_core::gguf::MetaValue;
    use superinfer_core::quant;
    let quantize = quant::quantize_row_ref(ty).ok_or_else(|| {
        superinfer_core::Error::InvalidArgument(format!("cannot quantize to {ty}"))
    })?;
    let mut w = GgufWriter::new();
    for (key, value) in f.metadata() {
        w.meta(*key, MetaValue::from_value(value));
    }
    for t in f.tensors() {
        let data = f.tensor_data(t);
        let fits = t.dims.len() == 2 && t.row_len().is_multiple_of(ty.block_len());
        if !(fits && t.name.starts_with("blk.")) || t.ty == ty {
            w.tensor(t.name, &t.dims, t.ty, data.to_vec())?;
            continue;
        }
        let mut values = vec![0f32; t.n_elements() as usize];
        quant::dequantize_row(t.ty, data, &mut values)?;
        let n = ty.bytes_for(t.n_elements()).unwrap_or(0) as usize;
        let mut out = vec![0u8; n];
        quantize(&values, &mut out);
        w.tensor(t.name, &t.dims, ty, out)?;
    }
    w.finish()
}

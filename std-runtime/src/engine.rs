//! `Engine`: a loaded model (mapped weights, tokenizer, kernels, thread pool) that hands out
//! `Session`s.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use superinfer_core::generate::Model;
use superinfer_core::gguf::{keys, GgufFile};
use superinfer_core::kernels::{self, Isa, Kernels};
use superinfer_core::model::lora::{Lora, LoraAdapter, LoraSet};
use superinfer_core::model::{Config, Weights};
use superinfer_core::parallel::Parallel;
use superinfer_core::tokenizer::Tokenizer;

use crate::hf::HfModel;
use crate::load::WeightArena;
use crate::model_files::ModelFiles;
use crate::pool::ThreadPool;
use crate::session::{Session, SessionOptions};
use crate::{cpu, Error};

#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// Worker threads (0 = all available cores).
    pub threads: usize,
    /// Force an instruction set instead of the best detected one.
    pub isa: Option<Isa>,
    /// Keep weights in ggml's row layout as mapped from the file instead of repacking the
    /// formats the kernels have an interleaved layout for (`SUPERINFER_NO_REPACK=1` too).
    pub no_repack: bool,
}

/// How an engine's model makes embeddings unless told otherwise.
#[derive(Debug, Clone, Copy)]
pub struct EmbeddingDefaults {
    pub normalize: bool,
    /// The longest input in tokens (sentence-transformers' `max_seq_length`).
    pub max_tokens: Option<usize>,
}

pub struct Engine {
    // Field order matters: `model`'s weights borrow from `_arena` and `files` and must be
    // dropped first.
    model: Model<'static>,
    pool: ThreadPool,
    load_time: Duration,
    file_size: usize,
    /// `tokenizer.chat_template`, when the file has one.
    chat_template: Option<String>,
    /// `general.architecture` as written in the file.
    arch_name: String,
    /// A Hugging Face directory's GGUF header, or a requantized whole file (the tensors and
    /// metadata borrow from it; dropped after `model`), and the embedding defaults.
    _hf_header: Vec<u8>,
    embedding: EmbeddingDefaults,
    _arena: Option<WeightArena>,
    /// The mapped file, or the shards of a split model.
    files: ModelFiles,
}

impl Engine {
    /// Maps and validates a GGUF model: one file, or the first shard of a model split with
    /// llama.cpp's `gguf-split`, whose other shards are found beside it by name.
    /// A directory is read as a Hugging Face model (`config.json`, `model.safetensors`,
    /// `tokenizer.json`: [`crate::hf`]), its weights in place.
    pub fn load(path: &Path, opts: &EngineOptions) -> Result<Engine, Error> {
        Self::load_as(path, opts, None)
    }

    /// As [`Self::load`], with every layer matrix quantized to `weight_type` first (in
    /// memory: [`crate::hf::requantize`]; e.g. a Hugging Face directory's F32 weights as
    /// Q8_0).
    pub fn load_as(
        path: &Path,
        opts: &EngineOptions,
        weight_type: Option<superinfer_core::quant::GgmlType>,
    ) -> Result<Engine, Error> {
        let start = Instant::now();
        let is_dir = path.is_dir();
        let weights_path = match is_dir {
            true => HfModel::weights_path(path)?,
            false => path.to_path_buf(),
        };
        let mut files = ModelFiles::open_first(&weights_path)?;
        // SAFETY: the mappings are owned by `self.files`, never handed out mutably, and
        // their address ranges are stable until they are dropped (a mapping does not move
        // when the list holding it grows). `weights` and everything else borrowing from
        // them are dropped before `files` (field order), and no 'static reference escapes:
        // accessors re-borrow from `&self`.
        let bytes = |files: &ModelFiles, i| unsafe {
            std::mem::transmute::<&[u8], &'static [u8]>(files.bytes(i))
        };
        let mut hf_header = Vec::new();
        let mut embedding = EmbeddingDefaults {
            normalize: true,
            max_tokens: None,
        };
        let first = if is_dir {
            let hf = HfModel::open(path, bytes(&files, 0))?;
            embedding = EmbeddingDefaults {
                normalize: hf.normalize,
                max_tokens: hf.max_seq_length,
            };
            hf_header = hf.header;
            // SAFETY: as the mappings above: the header's heap buffer is owned by
            // `self._hf_header`, never changed, and dropped after `model` (field order).
            let header =
                unsafe { std::mem::transmute::<&[u8], &'static [u8]>(hf_header.as_slice()) };
            let data = &bytes(&files, 0)[hf.data_start..];
            GgufFile::parse_detached(header, data).map_err(|e| Error::model(path, e))?
        } else {
            GgufFile::parse(bytes(&files, 0)).map_err(|e| Error::model(path, e))?
        };
        let file = match first.split().map_err(|e| Error::model(path, e))? {
            Some(s) if s.is_split() => {
                files.open_siblings(&s)?;
                let mut shards = vec![first];
                for i in 1..files.len() {
                    let f = GgufFile::parse(bytes(&files, i))
                        .map_err(|e| Error::model(files.path(i), e))?;
                    shards.push(f);
                }
                GgufFile::from_shards(shards).map_err(|e| Error::model(path, e))?
            }
            _ => first,
        };
        let file = match weight_type {
            Some(ty) => {
                let bytes = crate::hf::requantize(&file, ty).map_err(|e| Error::model(path, e))?;
                drop(file);
                hf_header = bytes;
                // SAFETY: as the header above: owned by `self._hf_header`, dropped after
                // `model`, never changed.
                let whole =
                    unsafe { std::mem::transmute::<&[u8], &'static [u8]>(hf_header.as_slice()) };
                GgufFile::parse(whole).map_err(|e| Error::model(path, e))?
            }
            None => file,
        };
        let features = cpu::detect();
        let isa = match opts.isa {
            Some(i) => Some(i),
            None => cpu::isa_from_env().map_err(Error::Usage)?,
        };
        let kernels = kernels::select(&features, isa).map_err(|e| Error::Usage(e.to_string()))?;
        let mut weights = Weights::from_gguf(&file, &kernels).map_err(|e| Error::model(path, e))?;
        let threads = if opts.threads == 0 {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        } else {
            opts.threads
        };
        let pool = ThreadPool::new(threads);
        let no_repack = opts.no_repack
            || std::env::var("SUPERINFER_NO_REPACK").is_ok_and(|v| !v.is_empty() && v != "0");
        let mut arena = None;
        if !no_repack {
            let repacked = match WeightArena::new(weights.interleaved_size(&kernels)) {
                Ok(a) => {
                    let a = arena.insert(a);
                    // SAFETY: the arena is owned by `self._arena`, its mapping never moves and
                    // is written only here; `weights` borrows it and is dropped first (field
                    // order), like the file mapping above.
                    let bytes: &'static mut [u8] = unsafe {
                        std::mem::transmute::<&mut [u8], &'static mut [u8]>(a.bytes_mut())
                    };
                    // each piece's source pages leave our resident set as soon as the piece
                    // is repacked, so the load never holds both copies of the weights
                    weights.interleave_into(&kernels, bytes, &pool, &|src| files.release_range(src))
                }
                // no anonymous mapping (e.g. a zero-sized one): the heap will do
                Err(_) => weights.interleave(&kernels),
            }
            .map_err(|e| Error::model(path, e))?;
            // the file's copy of the repacked bytes is not read again: let the kernel drop
            // those pages from our resident set (they stay in the page cache), including the
            // ones the pieces shared at their edges and what the parse and the binding touched
            if repacked > 0 {
                files.release();
            }
        }
        let tokenizer = Tokenizer::from_gguf(&file).map_err(|e| Error::model(path, e))?;
        let meta = |key| file.get_str(key).ok().flatten().map(str::to_string);
        let chat_template = meta(keys::TOKENIZER_CHAT_TEMPLATE);
        let arch_name = meta(keys::GENERAL_ARCHITECTURE).unwrap_or_default();
        Ok(Engine {
            model: Model::from_parts(weights, tokenizer, kernels),
            pool,
            load_time: start.elapsed(),
            file_size: files.total_size(),
            chat_template,
            arch_name,
            _hf_header: hf_header,
            embedding,
            _arena: arena,
            files,
        })
    }

    /// How embeddings are made by default: normalised or not (a Hugging Face directory
    /// says with sentence-transformers' `modules.json`; llama.cpp normalises), and the
    /// longest input (`max_seq_length`; else the trained context).
    pub fn embedding_defaults(&self) -> EmbeddingDefaults {
        self.embedding
    }

    /// The model as core's generation API takes it.
    pub fn model(&self) -> &Model<'_> {
        &self.model
    }

    pub fn config(&self) -> &Config {
        self.model.config()
    }

    pub fn weights(&self) -> &Weights<'_> {
        self.model.weights()
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        self.model.tokenizer()
    }

    pub fn kernels(&self) -> &Kernels {
        self.model.kernels()
    }

    pub fn isa(&self) -> Isa {
        self.kernels().isa()
    }

    pub fn threads(&self) -> usize {
        self.pool.threads()
    }

    pub fn parallel(&self) -> &dyn Parallel {
        &self.pool
    }

    pub fn load_time(&self) -> Duration {
        self.load_time
    }

    /// The model's bytes on disk (all shards of a split model).
    pub fn file_size(&self) -> usize {
        self.file_size
    }

    /// The model's files: the one given, then the other shards of a split model.
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.files.paths()
    }

    /// The chat template the file carries (`tokenizer.chat_template`), if any.
    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    /// The architecture's name as the file writes it (`general.architecture`).
    pub fn arch_name(&self) -> &str {
        &self.arch_name
    }

    /// The tokens of a prompt text ([`Tokenizer::encode_prompt`]: special tokens parsed, BOS
    /// added unless the text begins with it).
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<u32>, Error> {
        self.tokenizer().encode_prompt(text).map_err(Error::Core)
    }

    /// The context a session or sequence gets for a requested `n_ctx` (0: min(4096, the
    /// trained context)); more than the trained context is a usage error.
    pub(crate) fn context_size(&self, n_ctx: usize) -> Result<usize, Error> {
        let trained = self.config().n_ctx_train;
        let n_ctx = if n_ctx == 0 { trained.min(4096) } else { n_ctx };
        if n_ctx > trained {
            return Err(Error::Usage(format!(
                "context size {n_ctx} exceeds the model's trained context of {trained} tokens"
            )));
        }
        Ok(n_ctx)
    }

    /// Reads a LoRA adapter (llama.cpp's GGUF format) for this model: checked against its
    /// architecture and tensors, copied into memory (the file is not kept open).
    pub fn load_lora(&self, path: &Path) -> Result<Arc<LoraAdapter>, Error> {
        let bytes = std::fs::read(path)
            .map_err(|e| Error::Usage(format!("LoRA adapter {}: {e}", path.display())))?;
        self.lora_from_bytes(&bytes)
            .map_err(|e| Error::model(path, e))
    }

    /// [`Self::load_lora`] from an adapter file's bytes.
    pub fn lora_from_bytes(
        &self,
        bytes: &[u8],
    ) -> Result<Arc<LoraAdapter>, superinfer_core::Error> {
        let f = GgufFile::parse(bytes)?;
        Ok(Arc::new(LoraAdapter::from_gguf(&f, self.weights())?))
    }

    /// The adapter set of `(file, scale)` pairs, read with [`Self::load_lora`] (`None` when
    /// the list is empty: the base model). Their terms are summed in this order.
    pub fn lora_set(
        &self,
        adapters: &[(std::path::PathBuf, f32)],
    ) -> Result<Option<LoraSet>, Error> {
        let mut items = Vec::with_capacity(adapters.len());
        for (path, scale) in adapters {
            items.push(Lora {
                adapter: self.load_lora(path)?,
                scale: *scale,
            });
        }
        Ok(LoraSet::new(items))
    }

    /// A new session with its own KV cache.
    pub fn session(&self, opts: &SessionOptions) -> Result<Session<'_>, Error> {
        Session::new(self, opts)
    }
}

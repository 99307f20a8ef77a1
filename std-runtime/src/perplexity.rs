//! Perplexity over a text, by llama.cpp's `llama-perplexity` method: the tokens (with BOS if
//! the model adds one) are cut into non-overlapping chunks of `n_ctx`; each chunk is
//! evaluated from an empty cache, its first token replaced by BOS when the model adds one,
//! and only the second half is scored (every token there has at least `n_ctx / 2` tokens of
//! context): the negative log-likelihood of each next token, from a log-softmax over the
//! whole vocabulary summed in f64.

use crate::engine::Engine;
use crate::session::SessionOptions;
use crate::Error;
use superinfer_core::ops::attention::KvType;

#[derive(Debug, Clone)]
pub struct PerplexityOptions {
    /// Tokens per chunk (llama-perplexity's `-c`).
    pub n_ctx: usize,
    /// Tokens per evaluation batch (`-b`); must divide `n_ctx`.
    pub n_batch: usize,
    /// Score at most this many chunks (0 = all).
    pub max_chunks: usize,
    /// KV cache types for keys and values (`-ctk` / `-ctv`).
    pub cache_type_k: KvType,
    pub cache_type_v: KvType,
    /// LoRA adapters the text is scored under (`None`: the base model).
    pub lora: Option<superinfer_core::model::lora::LoraSet>,
}

impl Default for PerplexityOptions {
    fn default() -> Self {
        PerplexityOptions {
            n_ctx: 512,
            n_batch: 512,
            max_chunks: 0,
            cache_type_k: KvType::F16,
            cache_type_v: KvType::F16,
            lora: None,
        }
    }
}

impl PerplexityOptions {
    /// The number of chunks a text of `n_tokens` gives, or why it cannot be scored.
    pub fn chunks(&self, n_tokens: usize) -> Result<usize, Error> {
        let n_ctx = self.n_ctx;
        if n_ctx < 2 {
            return Err(Error::Usage(format!(
                "a perplexity context of {n_ctx} tokens is too small"
            )));
        }
        if n_tokens < 2 * n_ctx {
            return Err(Error::Usage(format!(
                "the text has {n_tokens} tokens; perplexity with a context of {n_ctx} needs at \
                 least {}",
                2 * n_ctx
            )));
        }
        let n_batch = self.n_batch.min(n_ctx);
        if n_batch == 0 || !n_ctx.is_multiple_of(n_batch) {
            return Err(Error::Usage(format!(
                "the batch size ({}) must divide the context size ({n_ctx})",
                self.n_batch
            )));
        }
        let n = n_tokens / n_ctx;
        Ok(if self.max_chunks > 0 {
            n.min(self.max_chunks)
        } else {
            n
        })
    }
}

/// Running totals over the scored tokens.
#[derive(Debug, Clone, Copy, Default)]
pub struct Perplexity {
    /// Chunks evaluated.
    pub chunks: usize,
    /// Tokens scored.
    pub count: usize,
    /// Σ nll and Σ nll² over them.
    pub nll: f64,
    pub nll2: f64,
}

impl Perplexity {
    /// `exp(mean nll)`.
    pub fn ppl(&self) -> f64 {
        (self.nll / self.count.max(1) as f64).exp()
    }

    /// The standard error of the perplexity, as llama-perplexity reports it (`None` with
    /// fewer than two scored tokens or no spread).
    pub fn stderr(&self) -> Option<f64> {
        if self.count < 2 {
            return None;
        }
        let n = self.count as f64;
        let mean = self.nll / n;
        let var = self.nll2 / n - mean * mean;
        (var > 0.0).then(|| (var / (n - 1.0)).sqrt() * self.ppl())
    }

    fn add(&mut self, nll: f64) {
        self.count += 1;
        self.nll += nll;
        self.nll2 += nll * nll;
    }
}

/// `-log softmax(logits)[target]`: max in f32, Σ exp in f64 as llama.cpp sums it.
pub fn nll(logits: &[f32], target: u32) -> f64 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &l| m.max(l));
    let sum: f64 = logits.iter().map(|&l| (l - max).exp() as f64).sum();
    -((logits[target as usize] - max) as f64 - sum.ln())
}

/// Scores `tokens` (the whole text, tokenized with the model's BOS when it adds one) and
/// calls `on_chunk` with the running totals after each chunk.
pub fn perplexity(
    engine: &Engine,
    tokens: &[u32],
    opts: &PerplexityOptions,
    mut on_chunk: impl FnMut(&Perplexity),
) -> Result<Perplexity, Error> {
    let n_chunks = opts.chunks(tokens.len())?;
    let (n_ctx, n_batch) = (opts.n_ctx, opts.n_batch.min(opts.n_ctx));
    let tok = engine.tokenizer();
    let bos = tok.bos().filter(|_| tok.add_bos());
    let first = n_ctx / 2;
    let mut session = engine.session(&SessionOptions {
        n_ctx,
        cache_type_k: opts.cache_type_k,
        cache_type_v: opts.cache_type_v,
    })?;
    session.set_lora(opts.lora.clone());
    let mut total = Perplexity::default();
    let mut chunk = vec![0u32; n_ctx];
    for i in 0..n_chunks {
        let text = &tokens[i * n_ctx..(i + 1) * n_ctx];
        chunk.copy_from_slice(text);
        if let Some(b) = bos {
            chunk[0] = b;
        }
        session.reset();
        // logits at position j predict token j + 1; the last position predicts nothing
        session.feed_scored(&chunk, first, n_batch, |j, logits| {
            if let Some(&next) = text.get(j + 1) {
                total.add(nll(logits, next));
            }
        })?;
        total.chunks = i + 1;
        on_chunk(&total);
    }
    Ok(total)
}

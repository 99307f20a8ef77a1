//! `Session`: one conversation over a shared `Engine`: a KV pool of its context's size
//! holding one sequence, and the working memory of its steps.

use std::time::Duration;
use superinfer_core::model::lora::LoraSet;

use superinfer_core::generate::{Context, ContextOptions, Outcome};
use superinfer_core::model::PoolStats;
use superinfer_core::ops::attention::KvType;

use crate::engine::Engine;
use crate::Error;

mod decode;

pub use superinfer_core::generate::StopReason;

/// One generated token as handed to the streaming callback.
pub type TokenEvent<'a> = superinfer_core::generate::Token<'a>;

/// Prompt tokens are evaluated in micro-batches of this many (llama.cpp's default n_ubatch).
pub const UBATCH: usize = superinfer_core::generate::DEFAULT_BATCH;

#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    /// Context size in tokens; 0 = min(4096, the model's trained context).
    pub n_ctx: usize,
    /// How the KV cache stores keys (F16 by default, as llama.cpp).
    pub cache_type_k: KvType,
    /// How the KV cache stores values.
    pub cache_type_v: KvType,
}

impl SessionOptions {
    /// A context of `n_ctx` tokens with the default (F16) cache.
    pub fn with_ctx(n_ctx: usize) -> SessionOptions {
        SessionOptions {
            n_ctx,
            ..SessionOptions::default()
        }
    }
}

#[derive(Debug, Clone)]
pub struct GenerateStats {
    pub prompt_tokens: usize,
    pub prompt_time: Duration,
    pub generated_tokens: usize,
    pub generate_time: Duration,
    pub stop: StopReason,
    /// Speculative decoding: tokens drafted, drafted tokens the target accepted, and the
    /// target's verification steps that checked a draft (all 0 without a drafter).
    pub drafted: usize,
    pub accepted: usize,
    pub verify_steps: usize,
    /// With a constraint: what its masks cost.
    pub mask: Option<superinfer_core::generate::MaskStats>,
}

impl GenerateStats {
    fn new(
        o: &Outcome,
        prompt_tokens: usize,
        prompt_time: Duration,
        generate_time: Duration,
    ) -> Self {
        GenerateStats {
            prompt_tokens,
            prompt_time,
            generated_tokens: o.generated_tokens,
            generate_time,
            stop: o.stop,
            drafted: o.drafted,
            accepted: o.accepted,
            verify_steps: o.verify_steps,
            mask: None,
        }
    }

    /// Share of drafted tokens the target accepted.
    pub fn acceptance(&self) -> f64 {
        self.accepted as f64 / self.drafted.max(1) as f64
    }

    /// Mean number of drafted tokens accepted per verification step.
    pub fn mean_accepted(&self) -> f64 {
        self.accepted as f64 / self.verify_steps.max(1) as f64
    }
}

/// One conversation over an `Engine`: core's [`Context`] (its KV cache, scratch and
/// logits) on the engine's model and thread pool, timed.
pub struct Session<'e> {
    ctx: Context<'e>,
}

impl<'e> Session<'e> {
    pub(crate) fn new(engine: &'e Engine, opts: &SessionOptions) -> Result<Session<'e>, Error> {
        let n_ctx = engine.context_size(opts.n_ctx)?;
        let ctx = Context::new(
            engine.model(),
            engine.parallel(),
            &ContextOptions {
                n_ctx,
                n_batch: UBATCH,
                k_type: opts.cache_type_k,
                v_type: opts.cache_type_v,
            },
        )?;
        Ok(Session { ctx })
    }

    pub fn n_ctx(&self) -> usize {
        self.ctx.n_ctx()
    }

    /// Bytes held by this session's KV cache.
    pub fn kv_cache_bytes(&self) -> usize {
        self.ctx.kv_cache_bytes()
    }

    /// Block counts of this session's KV cache.
    pub fn kv_stats(&self) -> PoolStats {
        self.ctx.kv_stats()
    }

    /// Tokens evaluated so far.
    pub fn tokens(&self) -> &[u32] {
        self.ctx.tokens()
    }

    /// Forgets the conversation (full blocks stay cached: a prompt that starts the same way
    /// takes them back instead of recomputing them).
    pub fn reset(&mut self) {
        self.ctx.reset();
    }

    /// Runs the session under the LoRA adapters of `set` from now on (`None`: the base
    /// model; [`Engine::lora_set`](crate::Engine::lora_set) makes one). A different set
    /// forgets the conversation.
    pub fn set_lora(&mut self, set: Option<LoraSet>) {
        self.ctx.set_lora(set);
    }

    /// Forgets every token after the first `n` (the cache keeps positions `..n`, so the
    /// conversation continues from there: a rollback without recomputing the prefix).
    pub fn truncate(&mut self, n: usize) {
        self.ctx.truncate(n);
    }

    /// Keeps the longest prefix of `tokens` the cache holds, but never all of it (the last
    /// token runs again for its logits); returns how many were kept: feed `tokens[kept..]`.
    pub fn keep_prefix(&mut self, tokens: &[u32]) -> usize {
        self.ctx.keep_prefix(tokens)
    }

    /// Scores only the first `rows` tokens of the vocabulary from the next token on
    /// (`None`: all), the others' logits -∞: a draft model's cheaper output layer.
    pub fn limit_logits(&mut self, rows: Option<usize>) {
        self.ctx.limit_logits(rows);
    }

    /// Logits after the last evaluated token.
    pub fn logits(&self) -> &[f32] {
        self.ctx.logits()
    }

    /// Evaluates `tokens` after the current history, in micro-batches of `UBATCH` tokens as
    /// llama.cpp does; afterwards `logits()` belongs to the last.
    pub fn feed(&mut self, tokens: &[u32]) -> Result<(), Error> {
        Ok(self.ctx.feed(tokens)?)
    }

    /// Teacher forcing: evaluates `tokens` and calls `f(i, logits)` after each one.
    pub fn feed_each(&mut self, tokens: &[u32], f: impl FnMut(usize, &[f32])) -> Result<(), Error> {
        Ok(self.ctx.feed_each(tokens, f)?)
    }

    /// Evaluates `tokens` in batches of at most `n_batch` and calls `f(i, logits)` for the
    /// tokens from index `first` on (perplexity's scored half), computing no other logits.
    pub fn feed_scored(
        &mut self,
        tokens: &[u32],
        first: usize,
        n_batch: usize,
        f: impl FnMut(usize, &[f32]),
    ) -> Result<(), Error> {
        Ok(self
            .ctx
            .feed_scored(tokens, first, n_batch.clamp(1, UBATCH), f)?)
    }
}

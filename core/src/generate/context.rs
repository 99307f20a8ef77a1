//! `Context`: one conversation over a [`Model`]: a KV pool of its context's size holding one
//! sequence, the working memory of its steps and the logits of its last token, all
//! allocated when it is made.

use alloc::vec::Vec;

use super::Model;
use crate::error::{Error, Result};
use crate::model::lora::LoraSet;
use crate::model::{forward, KvPool, Logits, PoolOptions, PoolStats, Scratch, SeqId, Step};
use crate::ops::attention::KvType;
use crate::parallel::Parallel;

/// Prompt tokens one forward step takes by default (llama.cpp's n_ubatch).
pub const DEFAULT_BATCH: usize = 512;

/// How a [`Context`] is sized.
#[derive(Debug, Clone, Copy, Default)]
pub struct ContextOptions {
    /// Tokens the conversation holds; 0 = min(4096, the model's trained context).
    pub n_ctx: usize,
    /// Tokens one forward step evaluates at most (0 = [`DEFAULT_BATCH`], never more than
    /// `n_ctx`): longer prompts run in several steps. The scratch memory grows with it; 1
    /// suits a microcontroller.
    pub n_batch: usize,
    /// How the KV cache stores keys (F16 by default, as llama.cpp).
    pub k_type: KvType,
    /// How the KV cache stores values.
    pub v_type: KvType,
}

impl ContextOptions {
    /// The options with `n_ctx` and `n_batch` resolved for `model`.
    pub fn resolve(&self, model: &Model<'_>) -> Result<ContextOptions> {
        let n_ctx = model.context_size(self.n_ctx)?;
        let n_batch = match self.n_batch {
            0 => DEFAULT_BATCH,
            n => n,
        }
        .min(n_ctx);
        Ok(ContextOptions {
            n_ctx,
            n_batch,
            ..*self
        })
    }

    pub(super) fn pool(&self) -> PoolOptions {
        PoolOptions {
            n_ctx: self.n_ctx,
            n_positions: self.n_ctx,
            k_type: self.k_type,
            v_type: self.v_type,
        }
    }
}

/// One conversation: the tokens evaluated so far in its KV cache, and the logits after the
/// last of them.
pub struct Context<'m> {
    pub(super) model: &'m Model<'m>,
    pub(super) par: &'m dyn Parallel,
    pool: KvPool,
    seq: SeqId,
    scratch: Scratch,
    step: Step,
    /// Logits after the last evaluated token.
    pub(super) logits: Vec<f32>,
    /// The decode loop's buffers, kept across calls: the generation's history (every
    /// position and one token more), a speculative step's tokens and a row of its logits.
    pub(super) history: Vec<u32>,
    pub(super) batch: Vec<u32>,
    pub(super) row: Vec<f32>,
    /// The LoRA adapters every step of the conversation runs under.
    lora: Option<LoraSet>,
}

impl<'m> Context<'m> {
    /// A context for `model` whose steps run on `par`, with its KV cache, scratch and
    /// logits allocated now ([`super::MemoryPlan`] tells their size beforehand).
    pub fn new(
        model: &'m Model<'m>,
        par: &'m dyn Parallel,
        opts: &ContextOptions,
    ) -> Result<Context<'m>> {
        let c = model.config();
        if c.arch.is_encoder() {
            return Err(crate::Error::UnsupportedModel(alloc::format!(
                "{} is an encoder (sentence embeddings): it does not generate text (embed \
                 with it: `superinfer embed`, core::embed)",
                c.arch.name()
            )));
        }
        let opts = opts.resolve(model)?;
        let mut pool = KvPool::new(model.weights(), &opts.pool())?;
        let seq = pool.add_seq();
        let mut scratch = Scratch::new(opts.n_batch);
        scratch.reserve(model.weights(), par.threads());
        let mut history = Vec::new();
        // every position, and the one token sampled past the last
        history.reserve_exact(opts.n_ctx + 1);
        Ok(Context {
            model,
            par,
            pool,
            seq,
            scratch,
            step: Step::with_capacity(opts.n_batch),
            logits: alloc::vec![0.0; c.n_vocab],
            history,
            batch: Vec::new(),
            row: Vec::new(),
            lora: None,
        })
    }

    pub fn model(&self) -> &'m Model<'m> {
        self.model
    }

    pub fn parallel(&self) -> &'m dyn Parallel {
        self.par
    }

    pub fn n_ctx(&self) -> usize {
        self.pool.n_ctx()
    }

    /// Tokens one forward step evaluates at most.
    pub fn n_batch(&self) -> usize {
        self.scratch.capacity()
    }

    /// Bytes held by the KV cache.
    pub fn kv_cache_bytes(&self) -> usize {
        self.pool.bytes()
    }

    /// Bytes held by the forward pass's working memory (what [`super::MemoryPlan`]'s
    /// `scratch` predicts; it does not grow as the context decodes).
    pub fn scratch_bytes(&self) -> usize {
        self.scratch.bytes()
    }

    /// Block counts of the KV cache.
    pub fn kv_stats(&self) -> PoolStats {
        self.pool.stats()
    }

    /// Tokens evaluated so far.
    pub fn tokens(&self) -> &[u32] {
        self.pool.seq_tokens(self.seq).unwrap_or(&[])
    }

    /// Logits after the last evaluated token.
    pub fn logits(&self) -> &[f32] {
        &self.logits
    }

    /// Runs the conversation under the LoRA adapters of `set` from now on (`None`: the base
    /// model). A different set than before forgets the conversation (its cache was computed
    /// under the old one); cached prefixes are only shared between steps of the same set.
    pub fn set_lora(&mut self, set: Option<LoraSet>) {
        let key = set.as_ref().map_or(0, LoraSet::key);
        let same = match (&self.lora, &set) {
            (Some(a), Some(b)) => a.same(b),
            (None, None) => true,
            _ => false,
        };
        if !same {
            self.reset();
            // the sequence is empty now
            let _ = self.pool.set_prefix_key(self.seq, key);
        }
        self.lora = set;
    }

    /// The LoRA adapters of the conversation.
    pub fn lora(&self) -> Option<&LoraSet> {
        self.lora.as_ref()
    }

    /// Forgets the conversation (full blocks stay cached: a prompt that starts the same way
    /// takes them back instead of recomputing them).
    pub fn reset(&mut self) {
        self.truncate(0);
    }

    /// Scores only the first `rows` tokens of the vocabulary (`None`: all), the other logits
    /// -∞: a cheaper output layer for a draft model (see `Scratch::limit_logits`).
    pub fn limit_logits(&mut self, rows: Option<usize>) {
        self.scratch.limit_logits(rows);
    }

    /// Forgets every token after the first `n` (the cache keeps positions `..n`, so the
    /// conversation continues from there: a rollback without recomputing the prefix).
    pub fn truncate(&mut self, n: usize) {
        // the context's own sequence always exists
        let _ = self.pool.truncate(self.seq, n);
    }

    fn check_room(&self, n: usize) -> Result<()> {
        let needed = self.tokens().len() + n;
        if needed > self.n_ctx() {
            return Err(Error::ContextOverflow {
                needed,
                capacity: self.n_ctx(),
            });
        }
        Ok(())
    }

    /// Evaluates `tokens` after the current history, in steps of at most
    /// [`Self::n_batch`] tokens; afterwards [`Self::logits`] belongs to the last.
    pub fn feed(&mut self, tokens: &[u32]) -> Result<()> {
        let n_batch = self.n_batch();
        self.feed_inner(tokens, None, n_batch, |_, _| {})
    }

    /// Teacher forcing: evaluates `tokens` and calls `f(i, logits)` after each one.
    pub fn feed_each(&mut self, tokens: &[u32], f: impl FnMut(usize, &[f32])) -> Result<()> {
        let n_batch = self.n_batch();
        self.feed_inner(tokens, Some(0), n_batch, f)
    }

    /// Evaluates `tokens` in steps of at most `n_batch` and calls `f(i, logits)` for the
    /// tokens from index `first` on (perplexity's scored half), computing no other logits.
    pub fn feed_scored(
        &mut self,
        tokens: &[u32],
        first: usize,
        n_batch: usize,
        f: impl FnMut(usize, &[f32]),
    ) -> Result<()> {
        self.feed_inner(tokens, Some(first), n_batch.max(1), f)
    }

    /// `from`: call `f` for the tokens from this index on (`None`: only the last token's
    /// logits, kept for [`Self::logits`]).
    fn feed_inner(
        &mut self,
        tokens: &[u32],
        from: Option<usize>,
        n_batch: usize,
        mut f: impl FnMut(usize, &[f32]),
    ) -> Result<()> {
        self.check_room(tokens.len())?;
        let mut done = 0;
        if from.is_none() && self.tokens().is_empty() {
            // a prompt that starts like an earlier one takes its cached blocks
            done = self.pool.reuse_prefix(self.seq, tokens)?;
        }
        let n_batch = n_batch.min(self.scratch.capacity());
        while done < tokens.len() {
            let chunk = &tokens[done..(done + n_batch).min(tokens.len())];
            let which = match from {
                Some(first) => Logits::From(first.saturating_sub(done)),
                None if done + chunk.len() == tokens.len() => Logits::Last,
                None => Logits::None,
            };
            let pos0 = self.tokens().len();
            self.step.clear();
            let slot = self.lora.as_ref().map(|set| self.step.add_lora_set(set));
            self.step.add_with(self.seq, pos0, chunk, which, slot);
            let last = chunk.len() - 1;
            let keep = &mut self.logits;
            let m = self.model;
            forward(
                m.weights(),
                &mut self.pool,
                &mut self.scratch,
                m.kernels(),
                self.par,
                &self.step,
                |i, logits| {
                    if i == last {
                        keep.copy_from_slice(logits);
                    }
                    f(done + i, logits)
                },
            )?;
            done += chunk.len();
        }
        Ok(())
    }
}

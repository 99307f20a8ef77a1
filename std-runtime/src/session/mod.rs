//! `Session`: one conversation over a shared `Engine`: a KV pool of its context's size
//! holding one sequence, and the working memory of its steps.

use std::time::Duration;

use superinfer_core::model::{
    forward, KvPool, Logits, PoolOptions, PoolStats, Scratch, SeqId, Step,
};
use superinfer_core::ops::attention::KvType;

use crate::engine::Engine;
use crate::Error;

mod decode;

/// Prompt tokens are evaluated in micro-batches of this many (llama.cpp's default n_ubatch).
pub const UBATCH: usize = 512;

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

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model produced an end-of-generation token.
    EndOfGeneration,
    /// `max_tokens` were generated.
    Length,
    /// The context is full.
    ContextFull,
    /// The callback asked to stop (or the request was cancelled).
    Cancelled,
    /// The output reached one of the request's stop strings.
    StopSequence,
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
}

impl GenerateStats {
    /// Share of drafted tokens the target accepted.
    pub fn acceptance(&self) -> f64 {
        self.accepted as f64 / self.drafted.max(1) as f64
    }

    /// Mean number of drafted tokens accepted per verification step.
    pub fn mean_accepted(&self) -> f64 {
        self.accepted as f64 / self.verify_steps.max(1) as f64
    }
}

/// One generated token as handed to the streaming callback.
pub struct TokenEvent<'a> {
    pub id: u32,
    /// The text this token completes (possibly empty while a UTF-8 character is split
    /// across tokens).
    pub text: &'a str,
}

pub struct Session<'e> {
    engine: &'e Engine,
    pool: KvPool,
    seq: SeqId,
    scratch: Scratch,
    step: Step,
    /// Logits after the last evaluated token.
    logits: Vec<f32>,
}

impl<'e> Session<'e> {
    pub(crate) fn new(engine: &'e Engine, opts: &SessionOptions) -> Result<Session<'e>, Error> {
        let c = engine.config();
        let n_ctx = engine.context_size(opts.n_ctx)?;
        let mut pool = KvPool::new(
            engine.weights(),
            &PoolOptions {
                n_ctx,
                n_positions: n_ctx,
                k_type: opts.cache_type_k,
                v_type: opts.cache_type_v,
            },
        )
        .map_err(Error::Core)?;
        let seq = pool.add_seq();
        Ok(Session {
            engine,
            pool,
            seq,
            scratch: Scratch::new(UBATCH.min(n_ctx)),
            step: Step::new(),
            logits: vec![0.0; c.n_vocab],
        })
    }

    pub fn n_ctx(&self) -> usize {
        self.pool.n_ctx()
    }

    /// Bytes held by this session's KV cache.
    pub fn kv_cache_bytes(&self) -> usize {
        self.pool.bytes()
    }

    /// Block counts of this session's KV cache.
    pub fn kv_stats(&self) -> PoolStats {
        self.pool.stats()
    }

    /// Tokens evaluated so far.
    pub fn tokens(&self) -> &[u32] {
        self.pool.seq_tokens(self.seq).unwrap_or(&[])
    }

    /// Forgets the conversation (full blocks stay cached: a prompt that starts the same way
    /// takes them back instead of recomputing them).
    pub fn reset(&mut self) {
        self.truncate(0);
    }

    /// Forgets every token after the first `n` (the cache keeps positions `..n`, so the
    /// conversation continues from there: a rollback without recomputing the prefix).
    pub fn truncate(&mut self, n: usize) {
        // the session's own sequence always exists
        let _ = self.pool.truncate(self.seq, n);
    }

    /// Logits after the last evaluated token.
    pub fn logits(&self) -> &[f32] {
        &self.logits
    }

    fn check_room(&self, n: usize) -> Result<(), Error> {
        let needed = self.tokens().len() + n;
        if needed > self.n_ctx() {
            return Err(Error::Core(superinfer_core::Error::ContextOverflow {
                needed,
                capacity: self.n_ctx(),
            }));
        }
        Ok(())
    }

    /// Evaluates `tokens` after the current history, in micro-batches of [`UBATCH`] tokens as
    /// llama.cpp does; afterwards `logits()` belongs to the last.
    pub fn feed(&mut self, tokens: &[u32]) -> Result<(), Error> {
        self.feed_inner(tokens, None, UBATCH, |_, _| {})
    }

    /// Teacher forcing: evaluates `tokens` and calls `f(i, logits)` after each one.
    pub fn feed_each(&mut self, tokens: &[u32], f: impl FnMut(usize, &[f32])) -> Result<(), Error> {
        self.feed_inner(tokens, Some(0), UBATCH, f)
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
        self.feed_inner(tokens, Some(first), n_batch.clamp(1, UBATCH), f)
    }

    /// `from`: call `f` for the tokens from this index on (`None`: only the last token's
    /// logits, kept for [`Self::logits`]).
    fn feed_inner(
        &mut self,
        tokens: &[u32],
        from: Option<usize>,
        n_batch: usize,
        mut f: impl FnMut(usize, &[f32]),
    ) -> Result<(), Error> {
        self.check_room(tokens.len())?;
        let e = self.engine;
        let mut done = 0;
        if from.is_none() && self.tokens().is_empty() {
            // a prompt that starts like an earlier one takes its cached blocks
            done = self
                .pool
                .reuse_prefix(self.seq, tokens)
                .map_err(Error::Core)?;
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
            self.step.add(self.seq, pos0, chunk, which);
            let last = chunk.len() - 1;
            let keep = &mut self.logits;
            forward(
                e.weights(),
                &mut self.pool,
                &mut self.scratch,
                e.kernels(),
                e.parallel(),
                &self.step,
                |i, logits| {
                    if i == last {
                        keep.copy_from_slice(logits);
                    }
                    f(done + i, logits)
                },
            )
            .map_err(Error::Core)?;
            done += chunk.len();
        }
        Ok(())
    }
}

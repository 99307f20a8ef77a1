//! Sentence embeddings with an encoder model (BERT): many token sequences in shared steps of
//! the one forward pass, each sequence its own (no padding), pooled (`Config::pooling`) and
//! optionally L2-normalised.
//!
//! The sequences are taken longest first and packed into steps of at most `n_batch` tokens
//! and [`MAX_SEQS`] sequences; every token of a step runs through the batch kernels together,
//! and attention runs each sequence against its own keys only. A sequence's result does not
//! depend on what shares its step (the kernels are batch invariant), so the order of the
//! texts and the batch size never change an embedding.

use alloc::vec;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::generate::Model;
use crate::model::{forward, KvPool, Logits, PoolOptions, Pooling, Scratch, SeqId, Step};
use crate::ops::attention::{KvType, BLOCK};
use crate::parallel::Parallel;

/// Sequences one step holds at most (each takes whole KV blocks).
pub const MAX_SEQS: usize = 64;

/// What an [`Embedder`] computes.
#[derive(Debug, Clone, Copy)]
pub struct EmbedOptions {
    /// Tokens one step holds at most (and so the longest sequence): at most the model's
    /// trained context.
    pub n_batch: usize,
    /// Divide each embedding by its Euclidean norm.
    pub normalize: bool,
}

/// The working memory of embedding: a KV pool for one step's sequences and a pass's scratch.
pub struct Embedder<'m, 'a> {
    model: &'m Model<'a>,
    pool: KvPool,
    scratch: Scratch,
    step: Step,
    opts: EmbedOptions,
}

impl<'m, 'a> Embedder<'m, 'a> {
    /// An embedder for `model`, which must be an encoder (`bert`).
    pub fn new(model: &'m Model<'a>, opts: EmbedOptions) -> Result<Embedder<'m, 'a>> {
        let c = model.config();
        if !c.arch.is_encoder() {
            return Err(Error::UnsupportedModel(alloc::format!(
                "embeddings need an encoder model (supported: bert); this one is {}",
                c.arch.name()
            )));
        }
        let n_batch = opts.n_batch.clamp(1, c.n_ctx_train);
        let pool = KvPool::new(
            model.weights(),
            &PoolOptions {
                n_ctx: n_batch,
                // every sequence's last block may be partly empty
                n_positions: n_batch + MAX_SEQS * BLOCK,
                k_type: KvType::F32,
                v_type: KvType::F32,
            },
        )?;
        Ok(Embedder {
            model,
            pool,
            scratch: Scratch::new(n_batch),
            step: Step::with_capacity(n_batch),
            opts: EmbedOptions { n_batch, ..opts },
        })
    }

    /// Tokens one sequence may have at most.
    pub fn max_tokens(&self) -> usize {
        self.opts.n_batch
    }

    /// The embedding of every sequence of `seqs`, in their order (`n_embd` values each;
    /// with [`Pooling::None`], every token's state one after the other). An empty sequence
    /// or one longer than [`Self::max_tokens`] is an error.
    pub fn embed(&mut self, par: &dyn Parallel, seqs: &[&[u32]]) -> Result<Vec<Vec<f32>>> {
        let max = self.max_tokens();
        if let Some((i, s)) = seqs
            .iter()
            .enumerate()
            .find(|(_, s)| s.is_empty() || s.len() > max)
        {
            return Err(Error::InvalidArgument(alloc::format!(
                "input {i} has {} tokens; an embedding takes 1 to {max}",
                s.len()
            )));
        }
        let mut order: Vec<usize> = (0..seqs.len()).collect();
        order.sort_by_key(|&i| core::cmp::Reverse(seqs[i].len()));
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); seqs.len()];
        let mut at = 0;
        while at < order.len() {
            // the longest remaining first, then as many as fit
            let (mut tokens, mut end) = (0, at);
            while end < order.len() && end - at < MAX_SEQS && tokens + seqs[order[end]].len() <= max
            {
                tokens += seqs[order[end]].len();
                end += 1;
            }
            self.run_step(par, seqs, &order[at..end], &mut out)?;
            at = end;
        }
        Ok(out)
    }

    /// One step of the sequences `batch` (indices into `seqs`), their results into `out`.
    fn run_step(
        &mut self,
        par: &dyn Parallel,
        seqs: &[&[u32]],
        batch: &[usize],
        out: &mut [Vec<f32>],
    ) -> Result<()> {
        let c = self.model.config();
        let d = c.n_embd;
        let pooling = c.pooling;
        self.step.clear();
        let mut ids: Vec<SeqId> = Vec::with_capacity(batch.len());
        // entry -> (input, token index)
        let mut owner = Vec::new();
        for &i in batch {
            let id = self.pool.add_seq();
            ids.push(id);
            let toks = seqs[i];
            let wants = match pooling {
                Pooling::Cls => Logits::From(0),
                Pooling::Last => Logits::Last,
                Pooling::Mean | Pooling::None => Logits::From(0),
            };
            self.step.add(id, 0, toks, wants);
            owner.extend((0..toks.len()).map(|t| (i, t)));
            out[i] = match pooling {
                Pooling::None => vec![0.0; d * toks.len()],
                _ => vec![0.0; d],
            };
        }
        let w = self.model.weights();
        let k = self.model.kernels();
        let result = forward(
            w,
            &mut self.pool,
            &mut self.scratch,
            k,
            par,
            &self.step,
            |e, row| {
                let (i, t) = owner[e];
                let o = &mut out[i];
                match pooling {
                    Pooling::Mean => o.iter_mut().zip(row.iter()).for_each(|(o, x)| *o += x),
                    Pooling::Cls if t == 0 => o.copy_from_slice(&row[..d]),
                    Pooling::Cls => {}
                    Pooling::Last => o.copy_from_slice(&row[..d]),
                    Pooling::None => o[t * d..(t + 1) * d].copy_from_slice(&row[..d]),
                }
            },
        );
        for id in ids {
            self.pool.remove_seq(id)?;
        }
        result?;
        for &i in batch {
            let o = &mut out[i];
            if pooling == Pooling::Mean {
                let n = seqs[i].len() as f32;
                o.iter_mut().for_each(|v| *v /= n);
            }
            if self.opts.normalize {
                for row in o.chunks_exact_mut(d) {
                    l2_normalize(row);
                }
            }
        }
        Ok(())
    }
}

/// Divides `v` by its Euclidean norm (summed in f64); a zero vector stays zero.
pub fn l2_normalize(v: &mut [f32]) {
    let norm = libm::sqrt(v.iter().map(|&x| x as f64 * x as f64).sum::<f64>());
    if norm > 0.0 {
        let inv = (1.0 / norm) as f32;
        v.iter_mut().for_each(|x| *x *= inv);
    }
}

/// `tokens` cut to at most `max` tokens keeping the last one (BERT's `[SEP]`), as
/// Hugging Face's tokenizers truncate a single sequence with special tokens.
pub fn truncate_keeping_last(tokens: &mut Vec<u32>, max: usize) {
    if tokens.len() > max && max > 0 {
        let last = tokens[tokens.len() - 1];
        tokens.truncate(max - 1);
        tokens.push(last);
    }
}

//! The decode loop of a [`Context`], plain or speculative, over a [`Generation`] (which
//! holds the per-token rules). Each step the model evaluates the token sampled last (not
//! yet in its cache) together with the step's draft (tokens a constraint forces, or the
//! drafter's guesses) in one batched step; drafted tokens it accepts stay in the cache, the
//! rest are rolled back. Without a draft a step is one token: plain decoding.
//!
//! Greedy output is bit-identical with and without speculation: a sequence's logits do not
//! depend on what else shares its step (batch invariance, `model/forward.rs`), and a greedy
//! sampler accepts exactly the drafted tokens that are its argmax. With sampling, the
//! acceptance rule ([`crate::speculative::verify`]) keeps the model's distribution.
//!
//! Plain decoding allocates nothing per token: the generation's history, text and
//! detokenizer are sized when it is made.

use core::ops::ControlFlow;

use alloc::boxed::Box;

use super::{Constraint, Context, Draft, Drafter, GenerateParams, Generation, MaskStats};
use crate::error::{Error, Result};
use crate::sampler::Sampler;

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model produced an end-of-generation token (or a constraint allowed none).
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

/// One generated token as handed to the callback.
pub struct Token<'t> {
    /// The token id; [`Token::FLUSH`] for the last call, which hands over the text held
    /// back until the end (a split character, the start of a stop string that did not
    /// come).
    pub id: u32,
    /// The text this token completes (possibly empty while a UTF-8 character is split
    /// across tokens, or while the text may begin a stop string).
    pub text: &'t str,
}

impl Token<'_> {
    /// The id of the closing call that flushes the held text (no token).
    pub const FLUSH: u32 = u32::MAX;
}

/// What one generation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Prompt tokens evaluated ([`Context::decode`] leaves 0: it starts after the prompt).
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    pub stop: StopReason,
    /// Speculative decoding: tokens drafted, drafted tokens accepted, and verification steps
    /// that checked a draft (all 0 without a drafter).
    pub drafted: usize,
    pub accepted: usize,
    pub verify_steps: usize,
}

/// A drafter type for [`Context::decode`] calls without one.
pub enum NoDrafter {}

impl Drafter for NoDrafter {
    type Error = Error;
    fn draft(&mut self, _: &[u32], _: usize, _: &mut Draft) -> Result<()> {
        match *self {}
    }
}

/// How many tokens `a` and `b` start with in common.
pub fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl Context<'_> {
    /// Evaluates `prompt`, then samples up to `max_tokens` tokens, handing each to
    /// `on_token` (which may stop generation by returning `ControlFlow::Break`).
    pub fn generate(
        &mut self,
        prompt: &[u32],
        max_tokens: usize,
        sampler: &mut Sampler,
        on_token: impl FnMut(Token<'_>) -> ControlFlow<()>,
    ) -> Result<Outcome> {
        self.prefill(prompt)?;
        let params = GenerateParams::from(max_tokens);
        let mut out = self.decode(&params, sampler, None::<&mut NoDrafter>, on_token)?;
        out.prompt_tokens = prompt.len();
        Ok(out)
    }

    /// Evaluates the prompt of a generation: `prompt` after whatever the context holds
    /// (empty is fine when it holds something: the decode continues from its last token).
    pub fn prefill(&mut self, prompt: &[u32]) -> Result<()> {
        if prompt.is_empty() && self.tokens().is_empty() {
            return Err(Error::InvalidArgument(
                "the prompt is empty (no tokens to start from)".into(),
            ));
        }
        self.feed(prompt)
    }

    /// Keeps the longest prefix of `tokens` the cache already holds, but never all of it
    /// (generation starts from the last token's logits, so that token always runs again);
    /// returns how many tokens were kept. The caller then feeds `tokens[kept..]`.
    pub fn keep_prefix(&mut self, tokens: &[u32]) -> usize {
        let keep = common_prefix(self.tokens(), tokens).min(tokens.len().saturating_sub(1));
        self.truncate(keep);
        keep
    }

    /// Generates after what the context holds (its logits are the last token's: call
    /// [`Self::prefill`] first) by the rules of `params`, with speculative decoding when
    /// `drafter` is given (already prefilled with the prompt). The stream of tokens handed
    /// to `on_token` is the same as without a drafter for a greedy sampler, and has the same
    /// distribution for any other. `sampler` goes on from where it is and is left where the
    /// generation leaves it.
    pub fn decode<D: Drafter + ?Sized>(
        &mut self,
        params: &GenerateParams,
        sampler: &mut Sampler,
        drafter: Option<&mut D>,
        on_token: impl FnMut(Token<'_>) -> ControlFlow<()>,
    ) -> Result<Outcome, D::Error> {
        self.decode_constrained(params, sampler, drafter, None, on_token)
            .map(|(out, _)| out)
    }

    /// [`Self::decode`] under `constraint` (a grammar: it masks each position and its
    /// forced tokens are verified as a draft); also returns what its masks cost.
    pub fn decode_constrained<D: Drafter + ?Sized>(
        &mut self,
        params: &GenerateParams,
        sampler: &mut Sampler,
        drafter: Option<&mut D>,
        constraint: Option<Box<dyn Constraint>>,
        on_token: impl FnMut(Token<'_>) -> ControlFlow<()>,
    ) -> Result<(Outcome, Option<MaskStats>), D::Error> {
        let mut history = core::mem::take(&mut self.history);
        history.clear();
        history.extend_from_slice(self.tokens());
        let mut gen = Generation::new(
            history,
            core::mem::replace(sampler, Sampler::greedy()),
            params,
            self.n_ctx(),
            self.model.tokenizer(),
        );
        if let Some(c) = constraint {
            gen = gen.with_constraint(c);
        }
        let result = self.run(&mut gen, drafter, on_token);
        let mut out = gen.outcome();
        out.prompt_tokens = 0;
        let mask = gen.constraint_stats();
        let (back, history) = gen.into_parts();
        *sampler = back;
        self.history = history;
        out.stop = result?;
        Ok((out, mask))
    }

    /// Runs `gen` to its end on this context (see [`Self::step`]); returns why it ended.
    pub fn run<D: Drafter + ?Sized>(
        &mut self,
        gen: &mut Generation,
        mut drafter: Option<&mut D>,
        mut on_token: impl FnMut(Token<'_>) -> ControlFlow<()>,
    ) -> Result<StopReason, D::Error> {
        loop {
            if let Some(stop) = self.step(gen, drafter.as_deref_mut(), &mut on_token)? {
                return Ok(stop);
            }
        }
    }

    /// One step of `gen`, whose history is this context's tokens (then the first step
    /// samples from the context's logits) or those and the token sampled last: evaluates
    /// that token with the step's draft and hands each emitted token to `on_token` (a
    /// `Break` ends the generation as cancelled). Once the generation ends, a last call
    /// with [`Token::FLUSH`] hands over the text it held back, and the reason is returned.
    pub fn step<D: Drafter + ?Sized>(
        &mut self,
        gen: &mut Generation,
        drafter: Option<&mut D>,
        on_token: &mut impl FnMut(Token<'_>) -> ControlFlow<()>,
    ) -> Result<Option<StopReason>, D::Error> {
        let tok = self.model.tokenizer();
        let mut deliver = |gen: &mut Generation, logits: &mut [f32]| {
            if let Some(t) = gen.on_logits(logits, tok) {
                let t = Token {
                    id: t.id,
                    text: t.text,
                };
                if on_token(t).is_break() {
                    gen.cancel();
                }
            }
        };
        let base = self.tokens().len();
        if gen.stop().is_none() {
            if gen.history().len() == base {
                // the first token, from the logits of the prompt's last
                deliver(gen, &mut self.logits);
            } else {
                let pending = gen.history()[base];
                let draft = gen.prepare_draft(usize::MAX, |history, room, out| match drafter {
                    Some(d) => d.draft(history, room, out),
                    None => Ok(()),
                })?;
                if draft.is_empty() {
                    self.feed(&[pending])?;
                    gen.begin_verify(0);
                    deliver(gen, &mut self.logits);
                    gen.end_verify();
                } else {
                    let mut batch = core::mem::take(&mut self.batch);
                    let mut row = core::mem::take(&mut self.row);
                    batch.clear();
                    batch.push(pending);
                    batch.extend_from_slice(draft);
                    gen.begin_verify(batch.len() - 1);
                    let fed = self.feed_each(&batch, |_, logits| {
                        row.clear();
                        row.extend_from_slice(logits);
                        deliver(gen, &mut row);
                    });
                    self.batch = batch;
                    self.row = row;
                    fed?;
                    // the cache keeps the pending token and the accepted drafted ones
                    let kept = gen.end_verify();
                    self.truncate(base + kept);
                }
            }
        }
        let Some(stop) = gen.stop() else {
            return Ok(None);
        };
        let rest = gen.take_rest();
        if !rest.is_empty() {
            let _ = on_token(Token {
                id: Token::FLUSH,
                text: rest,
            });
        }
        Ok(Some(stop))
    }
}

//! The decode loop, plain or speculative. Each round the model evaluates the token sampled
//! last (not yet in its cache) together with the drafter's guesses in one batched step;
//! drafted tokens it accepts stay in the cache, the rest are rolled back. Without a drafter
//! (or when it has nothing to propose) a round is one token: plain decoding.
//!
//! Greedy output is bit-identical with and without speculation: a sequence's logits do not
//! depend on what else shares its step (batch invariance, `model/forward.rs`), and a greedy
//! sampler accepts exactly the drafted tokens that are its argmax. With sampling, the
//! acceptance rule ([`crate::speculative::verify`]) keeps the model's distribution.
//!
//! Plain decoding allocates nothing per token: the history, the text and the detokenizer's
//! pending bytes live in the [`Context`], sized when it was made.

use alloc::vec::Vec;
use core::ops::ControlFlow;

use super::{Context, Draft, Drafter};
use crate::error::{Error, Result};
use crate::sampler::Sampler;
use crate::speculative::Verdict;

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
    /// The output reached one of the request's stop strings (set by callers that stop on a
    /// string; the loop itself reports `Cancelled` when the callback breaks).
    StopSequence,
}

/// One generated token as handed to the callback.
pub struct Token<'t> {
    /// The token id; [`Token::FLUSH`] for the last call, which hands over what was left of
    /// an incomplete character.
    pub id: u32,
    /// The text this token completes (possibly empty while a UTF-8 character is split
    /// across tokens).
    pub text: &'t str,
}

impl Token<'_> {
    /// The id of the closing call that flushes the detokenizer (no token).
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
        let mut out = self.decode(max_tokens, sampler, None::<&mut NoDrafter>, on_token)?;
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

    /// Samples up to `max_tokens` tokens after what the context holds (its logits are the
    /// last token's: call [`Self::prefill`] first), with speculative decoding when
    /// `drafter` is given (already prefilled with the prompt). The stream of tokens handed
    /// to `on_token` is the same as without a drafter for a greedy sampler, and has the same
    /// distribution for any other.
    pub fn decode<D: Drafter + ?Sized>(
        &mut self,
        max_tokens: usize,
        sampler: &mut Sampler,
        mut drafter: Option<&mut D>,
        mut on_token: impl FnMut(Token<'_>) -> ControlFlow<()>,
    ) -> Result<Outcome, D::Error> {
        let n_ctx = self.n_ctx();
        let mut stats = Outcome {
            prompt_tokens: 0,
            generated_tokens: 0,
            stop: StopReason::Length,
            drafted: 0,
            accepted: 0,
            verify_steps: 0,
        };
        // the text so far: evaluated tokens, then the one sampled last (`pending`)
        let mut history = core::mem::take(&mut self.history);
        history.clear();
        history.extend_from_slice(self.tokens());
        let mut text = core::mem::take(&mut self.text);
        let mut decoder = core::mem::replace(
            &mut self.decoder,
            crate::tokenizer::StreamDecoder::with_capacity(false, 0),
        );
        decoder.reset();
        let tok = self.model.tokenizer();
        // hands out one sampled token; Some(reason) when generation ends with it
        let mut emit = |id: u32, history: &mut Vec<u32>, stats: &mut Outcome| {
            stats.generated_tokens += 1;
            if tok.is_eog(id) {
                return Some(StopReason::EndOfGeneration);
            }
            history.push(id);
            text.clear();
            decoder.push_into(tok, id, &mut text);
            if on_token(Token { id, text: &text }).is_break() {
                return Some(StopReason::Cancelled);
            }
            if history.len() > n_ctx {
                // the token has no position left
                return Some(StopReason::ContextFull);
            }
            (stats.generated_tokens >= max_tokens).then_some(StopReason::Length)
        };
        let result = (|| -> Result<StopReason, D::Error> {
            if max_tokens == 0 {
                return Ok(StopReason::Length);
            }
            let first = sampler.sample(&mut self.logits, &history);
            if let Some(stop) = emit(first, &mut history, &mut stats) {
                return Ok(stop);
            }
            let mut draft = Draft::default();
            let mut batch = Vec::new();
            let mut row = Vec::new();
            let mut out = Vec::new();
            // the history a verification row sees: the text, then the drafts accepted so far
            let mut seen = Vec::new();
            loop {
                // `history` ends with the pending token, at position `base`
                let base = history.len() - 1;
                draft.clear();
                if let Some(d) = drafter.as_deref_mut() {
                    // a draft of k tokens needs positions base+1..=base+k, and at most
                    // one token more than the draft's can be emitted
                    let limit = (n_ctx - base - 1).min(max_tokens - stats.generated_tokens - 1);
                    if limit > 0 {
                        d.draft(&history, limit, &mut draft)?;
                        draft.truncate(limit);
                    }
                }
                if draft.is_empty() {
                    // plain decoding: the pending token, then one more
                    self.feed(&history[base..])?;
                    let id = sampler.sample(&mut self.logits, &history);
                    match emit(id, &mut history, &mut stats) {
                        Some(stop) => return Ok(stop),
                        None => continue,
                    }
                }
                out.clear();
                {
                    batch.clear();
                    batch.push(history[base]);
                    batch.extend_from_slice(&draft.tokens);
                    stats.drafted += draft.len();
                    stats.verify_steps += 1;
                    let mut decided = false;
                    seen.clear();
                    seen.extend_from_slice(&history);
                    self.feed_each(&batch, |i, logits| {
                        if decided {
                            return;
                        }
                        row.clear();
                        row.extend_from_slice(logits);
                        if i == draft.len() {
                            // every drafted token stood: one more from the last position
                            out.push(sampler.sample(&mut row, &seen));
                            decided = true;
                            return;
                        }
                        let x = draft.tokens[i];
                        match sampler.verify(&mut row, &seen, x, draft.dist(i)) {
                            Verdict::Accept => {
                                out.push(x);
                                seen.push(x);
                            }
                            Verdict::Reject(r) => {
                                out.push(r);
                                decided = true;
                            }
                        }
                    })?;
                    stats.accepted += out.len() - 1;
                }
                // the cache keeps the pending token and the accepted drafted ones
                let accepted = out.len() - 1;
                for (j, &id) in out.iter().enumerate() {
                    if let Some(stop) = emit(id, &mut history, &mut stats) {
                        // as without a draft, the token that ends generation is not kept
                        self.truncate(base + 1 + j.min(accepted));
                        return Ok(stop);
                    }
                }
                self.truncate(base + 1 + accepted);
            }
        })();
        text.clear();
        decoder.flush_into(&mut text);
        if result.is_ok() && !text.is_empty() {
            let _ = on_token(Token {
                id: Token::FLUSH,
                text: &text,
            });
        }
        self.history = history;
        self.text = text;
        self.decoder = decoder;
        stats.stop = result?;
        Ok(stats)
    }
}

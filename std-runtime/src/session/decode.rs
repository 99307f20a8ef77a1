//! The decode loop: plain or speculative. Each round the target evaluates the token sampled
//! last (not yet in its cache) together with the drafter's guesses in one batched step;
//! drafted tokens it accepts stay in the cache, the rest are rolled back. Without a drafter
//! (or when it has nothing to propose) a round is one token: plain decoding.
//!
//! Greedy output is bit-identical with and without speculation: a sequence's logits do not
//! depend on what else shares its step (batch invariance, `model/forward.rs`), and a greedy
//! target accepts exactly the drafted tokens that are its argmax. With sampling, the
//! acceptance rule (`core::speculative::verify`) keeps the target's distribution.

use std::ops::ControlFlow;
use std::time::Instant;

use superinfer_core::sampler::Sampler;
use superinfer_core::speculative::Verdict;
use superinfer_core::tokenizer::StreamDecoder;

use super::{GenerateStats, Session, StopReason, TokenEvent};
use crate::speculative::{Draft, Drafter};
use crate::Error;

impl Session<'_> {
    /// Evaluates `prompt`, then samples up to `max_tokens` tokens, streaming each to
    /// `on_token` (which may stop generation by returning `ControlFlow::Break`).
    pub fn generate(
        &mut self,
        prompt: &[u32],
        max_tokens: usize,
        sampler: &mut Sampler,
        on_token: impl FnMut(TokenEvent<'_>) -> ControlFlow<()>,
    ) -> Result<GenerateStats, Error> {
        self.generate_with(prompt, max_tokens, sampler, None, on_token)
    }

    /// [`Self::generate`] with speculative decoding when `drafter` is given: the drafter
    /// proposes tokens, the target verifies them in one step per round. The stream of tokens
    /// handed to `on_token` is the same as without it for a greedy sampler, and has the
    /// same distribution for any other.
    pub fn generate_with<'d>(
        &mut self,
        prompt: &[u32],
        max_tokens: usize,
        sampler: &mut Sampler,
        mut drafter: Option<&mut (dyn Drafter + 'd)>,
        mut on_token: impl FnMut(TokenEvent<'_>) -> ControlFlow<()>,
    ) -> Result<GenerateStats, Error> {
        if prompt.is_empty() && self.tokens().is_empty() {
            return Err(Error::Usage(
                "the prompt is empty (no tokens to start from)".into(),
            ));
        }
        let t0 = Instant::now();
        self.feed(prompt)?;
        if let Some(d) = drafter.as_deref_mut() {
            d.prefill(self.tokens())?;
        }
        let prompt_time = t0.elapsed();

        let engine = self.engine;
        let tok = engine.tokenizer();
        let n_ctx = self.n_ctx();
        let mut decoder = StreamDecoder::new(false);
        let mut stats = GenerateStats {
            prompt_tokens: prompt.len(),
            prompt_time,
            generated_tokens: 0,
            generate_time: Default::default(),
            stop: StopReason::Length,
            drafted: 0,
            accepted: 0,
            verify_steps: 0,
        };
        let t1 = Instant::now();
        // the text so far: evaluated tokens, then the one sampled last (`pending`)
        let mut history = self.tokens().to_vec();
        // hands out one sampled token; Some(reason) when generation ends with it
        let mut emit = |id: u32, history: &mut Vec<u32>, stats: &mut GenerateStats| {
            stats.generated_tokens += 1;
            if tok.is_eog(id) {
                return Some(StopReason::EndOfGeneration);
            }
            history.push(id);
            let text = decoder.push(tok, id).unwrap_or_default();
            if on_token(TokenEvent { id, text: &text }).is_break() {
                return Some(StopReason::Cancelled);
            }
            if history.len() > n_ctx {
                // the token has no position left
                return Some(StopReason::ContextFull);
            }
            (stats.generated_tokens >= max_tokens).then_some(StopReason::Length)
        };
        let stop = 'decode: {
            if max_tokens == 0 {
                break 'decode StopReason::Length;
            }
            let first = sampler.sample(&mut self.logits, &history);
            if let Some(stop) = emit(first, &mut history, &mut stats) {
                break 'decode stop;
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
                batch.clear();
                batch.push(history[base]);
                batch.extend_from_slice(&draft.tokens);
                out.clear();
                if draft.is_empty() {
                    self.feed(&batch)?;
                    out.push(sampler.sample(&mut self.logits, &history));
                } else {
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
                        break 'decode stop;
                    }
                }
                self.truncate(base + 1 + accepted);
            }
        };
        let rest = decoder.flush();
        if !rest.is_empty() {
            let _ = on_token(TokenEvent {
                id: u32::MAX,
                text: &rest,
            });
        }
        stats.generate_time = t1.elapsed();
        stats.stop = stop;
        Ok(stats)
    }
}

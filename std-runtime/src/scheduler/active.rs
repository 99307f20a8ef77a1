//! A request in a slot: its sequence, what of it is in the cache, its sampler, its drafter
//! when it decodes speculatively, and the stop rules and text stream applied to each token it
//! samples.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use superinfer_core::generate::Draft;
use superinfer_core::model::SeqId;
use superinfer_core::sampler::Sampler;
use superinfer_core::speculative::Verdict;
use superinfer_core::tokenizer::{StreamDecoder, Tokenizer};

use super::request::{
    Completion, Event, EventSink, RequestError, RequestId, Submission, TokenLogprob, TEXT_ONLY,
};
use crate::session::StopReason;
use crate::speculative::{DraftModel, DynDrafter, LookupDrafter};

/// Who drafts for a request: prompt lookup, or a draft model of its own (taken from the
/// scheduler's idle ones at admission, given back when the request ends).
pub(super) enum SpecDrafter<'e> {
    Lookup(Box<LookupDrafter>),
    Model(Box<DraftModel<'e>>),
}

impl<'e> SpecDrafter<'e> {
    fn get(&mut self) -> &mut DynDrafter<'e> {
        match self {
            SpecDrafter::Lookup(d) => &mut **d,
            SpecDrafter::Model(d) => &mut **d,
        }
    }
}

/// A request's speculative decoding: its drafter, and the draft its current step verifies.
struct Speculation<'e> {
    drafter: SpecDrafter<'e>,
    draft: Draft,
    /// Rows of the current step's span seen so far (row `i < draft.len()` checks drafted
    /// token `i`; the last one samples past a draft accepted whole).
    row: usize,
    /// The current step verifies a draft (set by `begin_verify`, cleared by `end_verify`).
    verifying: bool,
    /// The step's verdict is in (a refusal or the last row): later rows are ignored.
    decided: bool,
    /// Drafted tokens accepted this step.
    accepted: usize,
    drafted_total: usize,
    accepted_total: usize,
}

pub(super) struct Active<'e> {
    pub id: RequestId,
    pub seq: SeqId,
    events: Box<dyn EventSink>,
    cancel: Arc<AtomicBool>,
    pub prompt_len: usize,
    /// Prompt tokens taken from the prefix cache.
    pub cached: usize,
    /// Prompt and generated tokens.
    pub history: Vec<u32>,
    /// Tokens of `history` whose keys and values are in the cache.
    pub fed: usize,
    max_tokens: usize,
    generated: usize,
    sampler: Sampler,
    decoder: StreamDecoder,
    stop: Vec<String>,
    /// Text held back while it could be the start of a stop string.
    held: String,
    ignore_eos: bool,
    /// Top log-probabilities to report per token, when asked for.
    logprobs: Option<usize>,
    /// The position's logits before sampling (log-probabilities only).
    raw_logits: Vec<f32>,
    queue_time: Duration,
    admitted: Instant,
    first_token: Option<Instant>,
    /// Set when the request has ended (its blocks are freed after the step).
    pub ended: bool,
    spec: Option<Speculation<'e>>,
}

impl<'e> Active<'e> {
    /// `drafter`: a draft model for the request when it asked for one (else its prompt
    /// lookup, if any, is set up here).
    pub fn new(
        sub: Submission,
        seq: SeqId,
        cached: usize,
        sampler: Sampler,
        drafter: Option<DraftModel<'e>>,
    ) -> Active<'e> {
        let now = Instant::now();
        let r = sub.request;
        Active {
            id: sub.id,
            seq,
            events: sub.events,
            cancel: sub.cancel,
            prompt_len: r.prompt.len(),
            cached,
            fed: cached,
            history: r.prompt,
            max_tokens: r.max_tokens,
            generated: 0,
            sampler,
            decoder: StreamDecoder::new(false),
            stop: r.stop.into_iter().filter(|s| !s.is_empty()).collect(),
            held: String::new(),
            ignore_eos: r.ignore_eos,
            logprobs: r.logprobs,
            raw_logits: Vec::new(),
            queue_time: now.duration_since(sub.submitted),
            admitted: now,
            first_token: None,
            ended: false,
            spec: drafter
                .map(|d| SpecDrafter::Model(Box::new(d)))
                .or_else(|| {
                    r.lookup.map(|l| {
                        SpecDrafter::Lookup(Box::new(
                            LookupDrafter::new(l.ngram, l.draft_max).fixed(),
                        ))
                    })
                })
                .map(|drafter| Speculation {
                    drafter,
                    draft: Draft::default(),
                    row: 0,
                    verifying: false,
                    decided: false,
                    accepted: 0,
                    drafted_total: 0,
                    accepted_total: 0,
                }),
        }
    }

    /// Drafts up to `limit` tokens to verify with the pending token in the next step (none
    /// without a drafter, or when lookup finds nothing); returns the draft.
    pub fn draft(&mut self, limit: usize, n_ctx: usize) -> &[u32] {
        let Some(s) = self.spec.as_mut() else {
            return &[];
        };
        s.draft.clear();
        // positions for the drafted tokens, and one token more than the draft can be emitted
        let limit = limit
            .min(n_ctx.saturating_sub(self.history.len()))
            .min(self.max_tokens.saturating_sub(self.generated + 1));
        // a draft model that fails (its own context full) leaves the request to decode
        // plainly
        let drafted = limit > 0
            && s.drafter
                .get()
                .draft(&self.history, limit, &mut s.draft)
                .is_ok();
        if drafted {
            s.draft.truncate(limit);
        } else {
            s.draft.clear();
        }
        &s.draft.tokens
    }

    /// After a prompt chunk went into the cache: the drafter sees it too (a draft model
    /// evaluates it, so its cache keeps up chunk by chunk instead of taking the whole prompt
    /// at the first draft).
    pub fn follow_prompt(&mut self) {
        if let Some(s) = self.spec.as_mut() {
            // an error here only means the draft catches up (or gives up) when it drafts
            let _ = s.drafter.get().prefill(&self.history[..self.fed]);
        }
    }

    /// The request's draft model, when it has one (given back to the scheduler when the
    /// request ends).
    pub fn take_draft_model(&mut self) -> Option<DraftModel<'e>> {
        match self.spec.take()?.drafter {
            SpecDrafter::Model(d) => Some(*d),
            SpecDrafter::Lookup(_) => None,
        }
    }

    /// The next step verifies the first `n` drafted tokens (`n` may be less than
    /// [`Self::draft`] gave when the pool had no room for all of them).
    pub fn begin_verify(&mut self, n: usize) {
        if let Some(s) = self.spec.as_mut() {
            s.draft.truncate(n);
            s.row = 0;
            s.accepted = 0;
            s.verifying = true;
            s.decided = false;
            s.drafted_total += n;
        }
    }

    /// After the step: how many of the step's tokens stay in the cache (the pending one and
    /// the accepted drafted ones; 1 for a plain decode token).
    pub fn end_verify(&mut self) -> usize {
        match self.spec.as_mut() {
            Some(s) if s.verifying => {
                s.verifying = false;
                s.accepted_total += s.accepted;
                1 + s.accepted
            }
            _ => 1,
        }
    }

    /// The request's cancel switch (shared with its `Handle`).
    pub fn cancel_flag(&self) -> &AtomicBool {
        &self.cancel
    }

    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// Prompt tokens not yet in the cache.
    pub fn prompt_left(&self) -> usize {
        self.prompt_len.saturating_sub(self.fed)
    }

    /// The sampled token that goes into the next step, once the prompt is done.
    pub fn decode_token(&self) -> Option<u32> {
        (!self.ended && self.prompt_left() == 0 && self.fed < self.history.len())
            .then(|| self.history[self.fed])
    }

    /// Samples the next token from `logits` and applies the stop rules; `n_ctx` is the
    /// sequence's context.
    pub fn on_logits(&mut self, logits: &mut [f32], tok: &Tokenizer, n_ctx: usize) {
        if self.ended {
            return;
        }
        if self.max_tokens == 0 {
            // the prompt only (its keys and values stay cached for later requests)
            return self.finish(StopReason::Length);
        }
        // a row of a speculative step checks its drafted token (or, the last, samples)
        let drafted = match self.spec.as_mut() {
            Some(s) if s.verifying => {
                if s.decided {
                    return;
                }
                let row = s.row;
                s.row += 1;
                let x = s.draft.tokens.get(row).copied();
                s.decided = x.is_none();
                x.map(|x| (x, row))
            }
            _ => None,
        };
        // the model's distribution, before the sampler's penalties and temperature (which
        // may change `logits` in place: the raw ones are kept in a buffer reused per token)
        let dist = self.logprobs.map(|n| {
            self.raw_logits.clear();
            self.raw_logits.extend_from_slice(logits);
            log_softmax_top(logits, n)
        });
        let id = match drafted {
            Some((x, row)) => {
                // the distribution a draft model drew `x` from (None: chosen deterministically)
                let q = self.spec.as_ref().and_then(|s| s.draft.dist(row));
                match self.sampler.verify(logits, &self.history, x, q) {
                    Verdict::Accept => {
                        if let Some(s) = self.spec.as_mut() {
                            s.accepted += 1;
                        }
                        x
                    }
                    Verdict::Reject(r) => {
                        if let Some(s) = self.spec.as_mut() {
                            s.decided = true;
                        }
                        r
                    }
                }
            }
            None => self.sampler.sample(logits, &self.history),
        };
        let logprob = dist.map(|(lse, top)| {
            Box::new(TokenLogprob {
                logprob: self.raw_logits[id as usize] - lse,
                top,
            })
        });
        self.generated += 1;
        self.first_token.get_or_insert_with(Instant::now);
        if !self.ignore_eos && tok.is_eog(id) {
            return self.finish(StopReason::EndOfGeneration);
        }
        self.history.push(id);
        let piece = self.decoder.push(tok, id).unwrap_or_default();
        let (text, stopped) = self.release_text(&piece);
        if !self.events.send(Event::Token { id, text, logprob }) {
            // nobody listens any more
            self.cancel.store(true, Ordering::Relaxed);
        }
        if stopped {
            self.finish(StopReason::StopSequence)
        } else if self.generated >= self.max_tokens {
            self.finish(StopReason::Length)
        } else if self.history.len() > n_ctx {
            // the sampled token has no position left
            self.finish(StopReason::ContextFull)
        }
    }

    /// Appends `piece` to the held text and returns what can be released, and whether a stop
    /// string was found (the text is cut before it).
    fn release_text(&mut self, piece: &str) -> (String, bool) {
        if self.stop.is_empty() {
            return (piece.to_string(), false);
        }
        self.held.push_str(piece);
        if let Some(at) = self.stop.iter().filter_map(|s| self.held.find(s)).min() {
            let out = self.held[..at].to_string();
            self.held.clear();
            return (out, true);
        }
        // keep the longest tail that begins some stop string
        let keep = self
            .held
            .char_indices()
            .map(|(i, _)| i)
            .find(|&i| self.stop.iter().any(|s| s.starts_with(&self.held[i..])))
            .unwrap_or(self.held.len());
        let out = self.held[..keep].to_string();
        self.held.drain(..keep);
        (out, false)
    }

    /// Ends the request with `stop`: the rest of its text, then `Done`.
    pub fn finish(&mut self, stop: StopReason) {
        if self.ended {
            return;
        }
        self.ended = true;
        let mut rest = std::mem::take(&mut self.held);
        if stop != StopReason::StopSequence {
            rest.push_str(&self.decoder.flush());
        }
        if !rest.is_empty() {
            self.events.send(Event::Token {
                id: TEXT_ONLY,
                text: rest,
                logprob: None,
            });
        }
        let now = Instant::now();
        let first = self.first_token.unwrap_or(now);
        self.events.send(Event::Done(Completion {
            stop,
            prompt_tokens: self.prompt_len,
            cached_tokens: self.cached,
            generated_tokens: self.generated,
            prompt_time: first.duration_since(self.admitted),
            generate_time: now.duration_since(first),
            queue_time: self.queue_time,
            drafted_tokens: self.spec.as_ref().map_or(0, |s| s.drafted_total),
            // with the step under way: a request may end in the middle of its span
            accepted_tokens: self.spec.as_ref().map_or(0, |s| {
                s.accepted_total + if s.verifying { s.accepted } else { 0 }
            }),
        }));
    }

    /// Ends the request with an error.
    pub fn fail(&mut self, e: RequestError) {
        if !self.ended {
            self.ended = true;
            self.events.send(Event::Error(e));
        }
    }
}

/// The log-softmax normaliser of `logits` (log Σ exp) and its `n` most likely tokens with
/// their log-probabilities, most likely first (ties: the lower id first). One pass for the
/// maximum, one for the sum and the top list (at most [`super::MAX_TOP_LOGPROBS`] entries, kept
/// sorted by insertion).
fn log_softmax_top(logits: &[f32], n: usize) -> (f32, Vec<(u32, f32)>) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f64;
    let mut top: Vec<(u32, f32)> = Vec::with_capacity(n + 1);
    for (i, &l) in logits.iter().enumerate() {
        sum += ((l - max) as f64).exp();
        if n > 0 && (top.len() < n || l > top[top.len() - 1].1) {
            let at = top.partition_point(|&(_, t)| t >= l);
            top.insert(at, (i as u32, l));
            top.truncate(n);
        }
    }
    let lse = max + sum.ln() as f32;
    for t in &mut top {
        t.1 -= lse;
    }
    (lse, top)
}

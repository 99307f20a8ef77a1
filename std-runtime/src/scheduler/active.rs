//! A request in a slot: its sequence, what of it is in the cache, its generation (core's
//! per-token rules: sampling, masks, stop rules, text stream, verification of drafts), its
//! drafter when it decodes speculatively, and the events and timing of its stream.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use superinfer_core::generate::{GenerateParams, Generation};
use superinfer_core::model::lora::LoraSet;
use superinfer_core::model::SeqId;
use superinfer_core::sampler::Sampler;
use superinfer_core::tokenizer::Tokenizer;

use super::request::{
    Completion, Event, EventSink, RequestError, RequestId, Submission, TEXT_ONLY,
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

pub(super) struct Active<'e> {
    pub id: RequestId,
    pub seq: SeqId,
    events: Box<dyn EventSink>,
    cancel: Arc<AtomicBool>,
    /// Prompt tokens taken from the prefix cache.
    pub cached: usize,
    /// Tokens of the history whose keys and values are in the cache.
    pub fed: usize,
    gen: Generation,
    queue_time: Duration,
    admitted: Instant,
    first_token: Option<Instant>,
    /// Set when the request has ended (its blocks are freed after the step).
    pub ended: bool,
    drafter: Option<SpecDrafter<'e>>,
    /// Logits rows set aside while the constraint's mask was not ready (flat, `n_vocab`
    /// each), sampled in order once it is ([`Self::replay`]).
    deferred: Vec<f32>,
    deferred_rows: usize,
    /// The step's decode span whose rows were set aside: its length, for
    /// [`Self::end_verify`] once they are sampled.
    pub deferred_span: Option<usize>,
    /// The request's LoRA adapters (`None`: the base model).
    pub lora: Option<LoraSet>,
}

impl<'e> Active<'e> {
    /// `drafter`: a draft model for the request when it asked for one (else its prompt
    /// lookup, if any, is set up here). `n_ctx`: the sequence's context.
    pub fn new(
        sub: Submission,
        seq: SeqId,
        cached: usize,
        sampler: Sampler,
        drafter: Option<DraftModel<'e>>,
        tok: &Tokenizer,
        n_ctx: usize,
    ) -> Active<'e> {
        let now = Instant::now();
        let r = sub.request;
        let lora = r.lora;
        let params = GenerateParams {
            max_tokens: r.max_tokens,
            ignore_eos: r.ignore_eos,
            stop: r.stop,
            logprobs: r.logprobs,
        };
        let mut gen = Generation::new(r.prompt, sampler, &params, n_ctx, tok);
        if let Some(f) = &r.constraint {
            gen = gen.with_constraint(f.make());
        }
        Active {
            id: sub.id,
            seq,
            events: sub.events,
            cancel: sub.cancel,
            cached,
            fed: cached,
            gen,
            queue_time: now.duration_since(sub.submitted),
            admitted: now,
            first_token: None,
            ended: false,
            drafter: drafter
                .map(|d| SpecDrafter::Model(Box::new(d)))
                .or_else(|| {
                    r.lookup.map(|l| {
                        SpecDrafter::Lookup(Box::new(
                            LookupDrafter::new(l.ngram, l.draft_max).fixed(),
                        ))
                    })
                }),
            deferred: Vec::new(),
            deferred_rows: 0,
            deferred_span: None,
            lora,
        }
    }

    /// Rows set aside wait for the constraint's mask.
    pub fn has_deferred(&self) -> bool {
        self.deferred_rows > 0
    }

    /// Whether the constraint's next mask is computed (true without a constraint).
    pub fn mask_ready(&self) -> bool {
        self.gen.constraint_ready()
    }

    /// Samples the rows set aside, in order (waiting for the constraint's masks).
    pub fn replay(&mut self, tok: &Tokenizer) {
        let mut rows = std::mem::take(&mut self.deferred);
        let n = std::mem::take(&mut self.deferred_rows);
        if let Some(width) = rows.len().checked_div(n) {
            for row in rows.chunks_mut(width) {
                self.sample(row, tok);
            }
        }
        rows.clear();
        self.deferred = rows;
    }

    /// The prompt and the tokens generated so far.
    pub fn history(&self) -> &[u32] {
        self.gen.history()
    }

    pub fn prompt_len(&self) -> usize {
        self.gen.prompt_len()
    }

    /// The next step's draft of at most `limit` tokens, verified with the pending token:
    /// tokens a constraint forces, else the drafter's (none without one, or when lookup
    /// finds nothing).
    pub fn draft(&mut self, limit: usize) -> &[u32] {
        let drafter = self.drafter.as_mut();
        // a draft model that fails (its own context full) leaves the request to decode
        // plainly
        let _ = self
            .gen
            .prepare_draft(limit, |history, room, out| match drafter {
                Some(d) => d.get().draft(history, room, out),
                None => Ok(()),
            });
        self.gen.draft().tokens.as_slice()
    }

    /// After a prompt chunk went into the cache: the drafter sees it too (a draft model
    /// evaluates it, so its cache keeps up chunk by chunk instead of taking the whole prompt
    /// at the first draft).
    pub fn follow_prompt(&mut self) {
        if let Some(d) = self.drafter.as_mut() {
            // an error here only means the draft catches up (or gives up) when it drafts
            let _ = d.get().prefill(&self.gen.history()[..self.fed]);
        }
    }

    /// The request's draft model, when it has one (given back to the scheduler when the
    /// request ends).
    pub fn take_draft_model(&mut self) -> Option<DraftModel<'e>> {
        match self.drafter.take()? {
            SpecDrafter::Model(d) => Some(*d),
            SpecDrafter::Lookup(_) => None,
        }
    }

    /// The next step verifies the first `n` drafted tokens (`n` may be less than
    /// [`Self::draft`] gave when the pool had no room for all of them).
    pub fn begin_verify(&mut self, n: usize) {
        self.gen.begin_verify(n);
    }

    /// After the step: how many of the step's tokens stay in the cache (the pending one and
    /// the accepted drafted ones; 1 for a plain decode token).
    pub fn end_verify(&mut self) -> usize {
        self.gen.end_verify()
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
        self.gen.prompt_len().saturating_sub(self.fed)
    }

    /// The sampled token that goes into the next step, once the prompt is done.
    pub fn decode_token(&self) -> Option<u32> {
        let history = self.gen.history();
        (!self.ended
            && self.deferred_rows == 0
            && self.prompt_left() == 0
            && self.fed < history.len())
        .then(|| history[self.fed])
    }

    /// Samples the next token from `logits` (or checks a drafted one) by the generation's
    /// rules and streams it; ends the request when the generation ends. When the
    /// constraint's mask is not computed yet (or rows wait already), the row is set aside
    /// instead, so that the step's other sequences go on ([`Self::replay`]).
    pub fn on_logits(&mut self, logits: &mut [f32], tok: &Tokenizer) {
        if self.ended {
            return;
        }
        if self.deferred_rows > 0 || !self.gen.constraint_ready() {
            self.deferred.extend_from_slice(logits);
            self.deferred_rows += 1;
            return;
        }
        self.sample(logits, tok);
    }

    fn sample(&mut self, logits: &mut [f32], tok: &Tokenizer) {
        if self.ended {
            return;
        }
        if let Some(t) = self.gen.on_logits(logits, tok) {
            self.first_token.get_or_insert_with(Instant::now);
            let event = Event::Token {
                id: t.id,
                text: t.text.to_string(),
                logprob: t.logprob.map(Box::new),
            };
            if !self.events.send(event) {
                // nobody listens any more
                self.cancel.store(true, Ordering::Relaxed);
            }
        }
        if let Some(stop) = self.gen.stop() {
            self.finish(stop);
        }
    }

    /// Ends the request with `stop` (unless its generation ended first, for its own
    /// reason): the rest of its text, then `Done`.
    pub fn finish(&mut self, stop: StopReason) {
        if self.ended {
            return;
        }
        self.ended = true;
        if stop == StopReason::Cancelled {
            self.gen.cancel();
        }
        let stop = self.gen.stop().unwrap_or(stop);
        let rest = self.gen.take_rest();
        if !rest.is_empty() {
            self.events.send(Event::Token {
                id: TEXT_ONLY,
                text: rest.to_string(),
                logprob: None,
            });
        }
        let now = Instant::now();
        let first = self.first_token.unwrap_or(now);
        let (drafted, accepted, _) = self.gen.speculation();
        self.events.send(Event::Done(Completion {
            stop,
            prompt_tokens: self.gen.prompt_len(),
            cached_tokens: self.cached,
            generated_tokens: self.gen.generated(),
            prompt_time: first.duration_since(self.admitted),
            generate_time: now.duration_since(first),
            queue_time: self.queue_time,
            drafted_tokens: drafted,
            // with the step under way: a request may end in the middle of its span
            accepted_tokens: accepted,
            mask: self.gen.constraint_stats(),
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

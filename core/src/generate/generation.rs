//! `Generation`: the per-token rules of one sequence's output, the one place every frontend
//! takes them from (the decode loop of [`super::Context`] for `run`/`chat`/`bench` and the
//! firmware, std-runtime's scheduler for the server and `bench -np`, the browser package).
//!
//! A frontend evaluates tokens however it batches them and hands each position's logits to
//! [`Generation::on_logits`]; the generation samples (or verifies a drafted token), applies
//! the logit masks (`ignore_eos`, a [`Constraint`]), keeps the history the penalties see,
//! counts against `max_tokens` and the context, detokenizes as a stream, holds back text
//! that may begin a stop string, and reports log-probabilities. What it emits is the same
//! whichever frontend drives it.
//!
//! Speculative steps: [`Generation::prepare_draft`] fills the step's draft (tokens a
//! [`Constraint`] forces, else the frontend's drafter), the frontend evaluates the pending
//! token and the draft together, [`Generation::begin_verify`] before the rows come in and
//! [`Generation::end_verify`] after them tells how many of the step's tokens stay cached.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;

use super::constraint::{Constraint, MaskStats};
use super::logprobs::{log_softmax_top, TokenLogprob};
use super::stop::StopStrings;
use super::{Draft, Outcome, StopReason};
use crate::sampler::Sampler;
use crate::speculative::Verdict;
use crate::tokenizer::{StreamDecoder, Tokenizer};

/// What a generation may produce and when it ends, besides sampling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerateParams {
    /// Tokens to generate at most (`usize::MAX`: until the context is full; 0: none, the
    /// prompt is only evaluated).
    pub max_tokens: usize,
    /// Never end at an end-of-generation token: their logits are -∞ before sampling (as
    /// llama-server's `ignore_eos`), so the model writes on until another rule ends it.
    pub ignore_eos: bool,
    /// Texts that end generation when the output contains them (left out of the output).
    pub stop: Vec<String>,
    /// Report each generated token's log-probability and this many most likely
    /// alternatives (`None`: no log-probabilities).
    pub logprobs: Option<usize>,
}

impl Default for GenerateParams {
    fn default() -> Self {
        GenerateParams {
            max_tokens: usize::MAX,
            ignore_eos: false,
            stop: Vec::new(),
            logprobs: None,
        }
    }
}

impl From<usize> for GenerateParams {
    /// At most `max_tokens` tokens, no other rule.
    fn from(max_tokens: usize) -> Self {
        GenerateParams {
            max_tokens,
            ..GenerateParams::default()
        }
    }
}

/// A token the generation emitted, with the text it releases.
#[derive(Debug)]
pub struct Emitted<'g> {
    pub id: u32,
    /// The text this token completes, less what is held back while it could begin a stop
    /// string or a split UTF-8 character (possibly empty).
    pub text: &'g str,
    /// When log-probabilities were asked for.
    pub logprob: Option<TokenLogprob>,
}

/// The state of the step being verified.
#[derive(Debug, Default)]
struct Verification {
    /// Rows of the step's span seen so far (row `i < draft.len()` checks drafted token `i`;
    /// the last one samples past a draft accepted whole).
    row: usize,
    /// The current step verifies a draft (set by `begin_verify`, cleared by `end_verify`).
    active: bool,
    /// The step's verdict is in (a refusal, the last row, or the end): later rows are
    /// ignored.
    decided: bool,
    /// Drafted tokens accepted this step that stay in the cache.
    accepted: usize,
    /// The last token emitted was such a drafted token.
    last_accepted: bool,
}

/// One sequence's generation (see the module documentation).
pub struct Generation {
    sampler: Sampler,
    max_tokens: usize,
    ignore_eos: bool,
    logprobs: Option<usize>,
    n_ctx: usize,
    /// The tokens so far: the prompt (after whatever the context held before), then the
    /// generated ones.
    history: Vec<u32>,
    prompt_len: usize,
    generated: usize,
    decoder: StreamDecoder,
    stops: StopStrings,
    /// The text of the token being emitted, before the stop strings see it.
    piece: String,
    /// The text released with the token being emitted (or the rest at the end).
    text: String,
    /// A position's logits before any mask (log-probabilities only).
    raw: Vec<f32>,
    constraint: Option<Box<dyn Constraint>>,
    draft: Draft,
    verify: Verification,
    drafted: usize,
    accepted: usize,
    verify_steps: usize,
    end: Option<StopReason>,
}

impl Generation {
    /// A generation after `history` (the tokens evaluated or about to be: the prompt last;
    /// its capacity is grown to the context's), sampling with `sampler` in a context of
    /// `n_ctx` positions.
    pub fn new(
        mut history: Vec<u32>,
        sampler: Sampler,
        params: &GenerateParams,
        n_ctx: usize,
        tok: &Tokenizer,
    ) -> Generation {
        // every position, and the one token sampled past the last
        history.reserve((n_ctx + 1).saturating_sub(history.len()));
        // a token's text is its piece, plus what a split character left pending
        let piece = tok.max_piece_len() + 4;
        Generation {
            sampler,
            max_tokens: params.max_tokens,
            ignore_eos: params.ignore_eos,
            logprobs: params.logprobs,
            n_ctx,
            prompt_len: history.len(),
            history,
            generated: 0,
            decoder: StreamDecoder::with_capacity(false, piece),
            stops: StopStrings::new(&params.stop),
            piece: String::with_capacity(piece),
            text: String::with_capacity(piece),
            raw: Vec::new(),
            constraint: None,
            draft: Draft::default(),
            verify: Verification::default(),
            drafted: 0,
            accepted: 0,
            verify_steps: 0,
            end: None,
        }
    }

    /// Constrains the output: `c` masks each position's logits and may force tokens.
    pub fn with_constraint(mut self, c: Box<dyn Constraint>) -> Generation {
        self.constraint = Some(c);
        self
    }

    /// Whether the constraint's next mask is computed ([`Constraint::ready`]; true
    /// without a constraint): a frontend that batches sequences sets a row aside rather
    /// than wait for it.
    pub fn constraint_ready(&self) -> bool {
        self.constraint.as_ref().is_none_or(|c| c.ready())
    }

    /// What the constraint's masks cost so far ([`Constraint::stats`]).
    pub fn constraint_stats(&self) -> Option<MaskStats> {
        self.constraint.as_ref().and_then(|c| c.stats())
    }

    /// The prompt and the tokens generated so far.
    pub fn history(&self) -> &[u32] {
        &self.history
    }

    /// Tokens of [`Self::history`] that came before generation (the prompt).
    pub fn prompt_len(&self) -> usize {
        self.prompt_len
    }

    /// Tokens sampled so far (an end-of-generation token counts, as llama.cpp's `n_decoded`):
    /// what `max_tokens` and the decode rates count.
    pub fn generated(&self) -> usize {
        self.generated
    }

    /// Tokens of the answer so far (an end-of-generation token is not one): what an API's
    /// `completion_tokens` reports, one per token streamed.
    pub fn emitted(&self) -> usize {
        self.history.len() - self.prompt_len
    }

    /// Why the generation ended, once it has.
    pub fn stop(&self) -> Option<StopReason> {
        self.end
    }

    pub fn sampler(&self) -> &Sampler {
        &self.sampler
    }

    /// Gives the sampler back (its random numbers go on where the generation left them)
    /// and the history's buffer.
    pub fn into_parts(self) -> (Sampler, Vec<u32>) {
        (self.sampler, self.history)
    }

    /// Tokens drafted, drafted tokens accepted (with the step under way) and verification
    /// steps that checked a draft.
    pub fn speculation(&self) -> (usize, usize, usize) {
        let now = if self.verify.active {
            self.verify.accepted
        } else {
            0
        };
        (self.drafted, self.accepted + now, self.verify_steps)
    }

    /// What the generation did so far (`prompt_tokens`: the prompt's length).
    pub fn outcome(&self) -> Outcome {
        let (drafted, accepted, verify_steps) = self.speculation();
        Outcome {
            prompt_tokens: self.prompt_len,
            generated_tokens: self.generated,
            stop: self.end.unwrap_or(StopReason::Length),
            drafted,
            accepted,
            verify_steps,
        }
    }

    /// The draft [`Self::prepare_draft`] made (the tokens the step verifies once
    /// [`Self::begin_verify`] is called).
    pub fn draft(&self) -> &Draft {
        &self.draft
    }

    /// Drafted tokens the next step may verify: positions left in the context for them, and
    /// one token more than the draft can be emitted before `max_tokens`.
    pub fn draft_room(&self) -> usize {
        if self.end.is_some() {
            return 0;
        }
        self.n_ctx
            .saturating_sub(self.history.len())
            .min(self.max_tokens.saturating_sub(self.generated + 1))
    }

    /// The next step's draft, of at most `limit` tokens (and [`Self::draft_room`]): the
    /// tokens the constraint forces, else what `drafter(history, room, draft)` proposes. A
    /// drafter's error leaves the draft empty (the step decodes plainly) and is returned.
    pub fn prepare_draft<E>(
        &mut self,
        limit: usize,
        drafter: impl FnOnce(&[u32], usize, &mut Draft) -> Result<(), E>,
    ) -> Result<&[u32], E> {
        self.draft.clear();
        let room = self.draft_room().min(limit);
        if room == 0 {
            return Ok(&[]);
        }
        if let Some(c) = self.constraint.as_mut() {
            c.forced(&mut self.draft.tokens);
        }
        if self.draft.is_empty() {
            if let Err(e) = drafter(&self.history, room, &mut self.draft) {
                self.draft.clear();
                return Err(e);
            }
        }
        self.draft.truncate(room);
        Ok(&self.draft.tokens)
    }

    /// The next step verifies the first `n` tokens of the draft (fewer than
    /// [`Self::prepare_draft`] gave when the frontend had no room for all): its rows are
    /// the pending token's (checking drafted token 0), then each drafted token's.
    pub fn begin_verify(&mut self, n: usize) {
        self.draft.truncate(n);
        self.verify = Verification {
            active: true,
            ..Verification::default()
        };
        self.drafted += n;
        self.verify_steps += usize::from(n > 0);
    }

    /// After the step's rows: how many of its tokens stay in the cache (the pending one and
    /// the drafted ones accepted before the generation ended; 1 for a plain step).
    pub fn end_verify(&mut self) -> usize {
        let kept = 1 + self.verify.accepted;
        if self.verify.active {
            self.accepted += self.verify.accepted;
        }
        self.verify = Verification::default();
        kept
    }

    /// Samples the token at the position whose `logits` these are (modified in place by
    /// the masks and the sampler's penalties), or checks the drafted token there in a
    /// verification step, and applies the stop rules. `None` when no token is emitted: the
    /// generation ended (an end-of-generation token, or before this row), or the row comes
    /// after the step's verdict.
    pub fn on_logits(&mut self, logits: &mut [f32], tok: &Tokenizer) -> Option<Emitted<'_>> {
        if self.end.is_some() {
            return None;
        }
        if self.generated >= self.max_tokens {
            // `max_tokens` 0: the prompt only
            self.end = Some(StopReason::Length);
            return None;
        }
        // a row of a speculative step checks its drafted token (or, the last, samples)
        let drafted = if self.verify.active {
            let v = &mut self.verify;
            if v.decided {
                return None;
            }
            let row = v.row;
            v.row += 1;
            let x = self.draft.tokens.get(row).copied();
            v.decided = x.is_none();
            x.map(|x| (x, row))
        } else {
            None
        };
        // the model's distribution, before any mask or sampling transform
        let dist = self.logprobs.map(|n| {
            self.raw.clear();
            self.raw.extend_from_slice(logits);
            log_softmax_top(logits, n)
        });
        if self.ignore_eos {
            for &t in tok.eog_tokens() {
                if let Some(l) = logits.get_mut(t as usize) {
                    *l = f32::NEG_INFINITY;
                }
            }
        }
        if let Some(c) = self.constraint.as_mut() {
            if !c.mask(logits) {
                return self.ended(StopReason::EndOfGeneration);
            }
        }
        let mut accepted = false;
        let id = match drafted {
            Some((x, row)) => {
                // the distribution a draft model drew `x` from (None: chosen deterministically)
                match self
                    .sampler
                    .verify(logits, &self.history, x, self.draft.dist(row))
                {
                    Verdict::Accept => {
                        accepted = true;
                        x
                    }
                    Verdict::Reject(r) => {
                        self.verify.decided = true;
                        r
                    }
                }
            }
            None => self.sampler.sample(logits, &self.history),
        };
        let logprob = dist.map(|(lse, top)| TokenLogprob {
            logprob: self.raw[id as usize] - lse,
            top,
        });
        self.generated += 1;
        if !self.ignore_eos && tok.is_eog(id) {
            return self.ended(StopReason::EndOfGeneration);
        }
        if let Some(c) = self.constraint.as_mut() {
            c.commit(id);
        }
        self.history.push(id);
        self.piece.clear();
        self.decoder.push_into(tok, id, &mut self.piece);
        self.text.clear();
        let end = if self.stops.push(&self.piece, &mut self.text) {
            Some(StopReason::StopSequence)
        } else if self.generated >= self.max_tokens {
            Some(StopReason::Length)
        } else if self.history.len() > self.n_ctx {
            // the token has no position left
            Some(StopReason::ContextFull)
        } else {
            None
        };
        // as without a draft, the token that ends the generation is not kept in the cache
        self.verify.last_accepted = accepted && end.is_none();
        self.verify.accepted += usize::from(self.verify.last_accepted);
        if end.is_some() {
            self.end = end;
            self.verify.decided = true;
        }
        Some(Emitted {
            id,
            text: &self.text,
            logprob,
        })
    }

    fn ended(&mut self, why: StopReason) -> Option<Emitted<'_>> {
        self.end = Some(why);
        self.verify.decided = true;
        None
    }

    /// Ends the generation from outside (a cancellation, a callback that stops): the token
    /// emitted last in a verification step is then not kept in the cache either. No effect
    /// once it has ended.
    pub fn cancel(&mut self) {
        if self.end.is_some() {
            return;
        }
        if self.verify.last_accepted {
            self.verify.accepted -= 1;
            self.verify.last_accepted = false;
        }
        self.end = Some(StopReason::Cancelled);
        self.verify.decided = true;
    }

    /// The text still held once the generation has ended: what waited on a possible stop
    /// string, then a split character's bytes (as U+FFFD). Empty after a stop string, and
    /// on a second call.
    pub fn take_rest(&mut self) -> &str {
        self.text.clear();
        if self.end != Some(StopReason::StopSequence) {
            self.stops.flush_into(&mut self.text);
            self.decoder.flush_into(&mut self.text);
        }
        &self.text
    }
}

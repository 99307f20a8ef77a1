//! A draft model: a smaller model of the target's family, decoding ahead in its own session.

use std::time::Instant;

use superinfer_core::generate::common_prefix;
use superinfer_core::sampler::{Sampler, SamplerConfig};

use super::costs::DraftCosts;
use super::{Draft, Drafter};
use crate::engine::Engine;
use crate::session::{Session, SessionOptions};
use crate::Error;

/// Vocabularies may differ in size by this many tokens (padding, added tokens at the end);
/// llama.cpp's `SPEC_VOCAB_MAX_SIZE_DIFFERENCE`.
const MAX_VOCAB_DIFFERENCE: usize = 128;

/// Checks that `draft` can draft for `target`: the same tokens under the same ids (a
/// difference in size of at most 128 tokens at the end), the same BOS and EOS. Drafted ids
/// the target does not have are never proposed.
pub fn check_vocab(target: &Engine, draft: &Engine) -> Result<(), Error> {
    let (t, d) = (target.tokenizer(), draft.tokenizer());
    let (nt, nd) = (t.vocab_size(), d.vocab_size());
    let hint = "the draft model must use the target's tokenizer (a smaller model of the same \
                family, e.g. Qwen2.5-Coder-0.5B for Qwen2.5-Coder-1.5B)";
    if nt.abs_diff(nd) > MAX_VOCAB_DIFFERENCE {
        return Err(Error::Usage(format!(
            "the draft model's vocabulary has {nd} tokens and the target's {nt}: {hint}"
        )));
    }
    if t.bos() != d.bos() || t.eos() != d.eos() {
        return Err(Error::Usage(format!(
            "the draft model's BOS/EOS tokens ({:?}/{:?}) differ from the target's \
             ({:?}/{:?}): {hint}",
            d.bos(),
            d.eos(),
            t.bos(),
            t.eos()
        )));
    }
    if let Some(id) =
        (0..nt.min(nd) as u32).find(|&i| t.token_to_piece(i, true) != d.token_to_piece(i, true))
    {
        return Err(Error::Usage(format!(
            "token {id} is {:?} in the draft model and {:?} in the target: {hint}",
            d.token_text(id),
            t.token_text(id)
        )));
    }
    Ok(())
}

/// A token under `p_min` but above this fraction of it is drafted as the draft's last.
/// Qwen2.5-Coder-1.5B with its 0.5B as draft (`bench --model-draft`, the complete-* prompts
/// of `benches/spec.py`, Zen 4, 2 threads, one run each): never (llama.cpp's rule) 46.0 /
/// 46.5 / 45.3 t/s, with this floor 48.2 / 52.2 / 47.1, with any token 48.6 / 52.4 / 45.4.
pub const LAST_TOKEN_FLOOR: f32 = 0.5;

/// How a draft model drafts (llama.cpp's `--draft-max`, `--draft-min`, `--draft-p-min`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DraftOptions {
    /// At most this many tokens per round.
    pub max: usize,
    /// At least this many, whatever their probability (unless the limit is lower).
    pub min: usize,
    /// Stop drafting when the draft's most likely token has a lower probability. That token
    /// still ends the draft when its probability is at least `LAST_TOKEN_FLOOR` × `p_min`
    /// (llama.cpp drops it): the draft has computed it already, and the target checks one
    /// more row of a batch for little more than the cost of the batch.
    pub p_min: f32,
    /// Score only the first this many tokens of the draft's vocabulary (`--draft-vocab`;
    /// `None`: all). A BPE vocabulary lists its frequent merges first, so the draft keeps
    /// proposing most of what it would, through a fraction of its output layer, the largest
    /// matrix of a small model; a token past the prefix is never drafted (the target then
    /// decodes it). The target's output is the same either way.
    pub vocab: Option<usize>,
    /// Stop a draft where, by the costs measured so far on this machine (a draft pass, the
    /// target's verification step by its rows: `costs::DraftCosts`), one more token no longer
    /// pays for itself: the draft's probability that all its tokens stand against the price
    /// of a pass and a row in a single step's time. Off where the time between two drafts is
    /// not this sequence's own (the server's batched steps).
    pub adaptive: bool,
}

impl Default for DraftOptions {
    fn default() -> Self {
        DraftOptions {
            max: 16,
            min: 0,
            p_min: 0.75,
            vocab: None,
            adaptive: true,
        }
    }
}

/// A draft model's session and sampler. Its cache follows the target's text: each round it
/// keeps the longest common prefix and evaluates what is new (usually one or two tokens).
pub struct DraftModel<'d> {
    session: Session<'d>,
    sampler: Sampler,
    opts: DraftOptions,
    /// The target's vocabulary size: ids at or above it are never proposed.
    n_vocab_target: usize,
    row: Vec<f32>,
    seen: Vec<u32>,
    costs: DraftCosts,
}

impl<'d> DraftModel<'d> {
    /// A draft model for `target` (vocabularies checked, see [`check_vocab`]) with a context
    /// of `n_ctx` tokens (capped at its trained context), drawing with the target's sampler
    /// settings (`sampling`; a greedy target gets a greedy draft).
    pub fn new(
        target: &Engine,
        draft: &'d Engine,
        n_ctx: usize,
        sampling: &SamplerConfig,
        opts: DraftOptions,
    ) -> Result<DraftModel<'d>, Error> {
        check_vocab(target, draft)?;
        let n_ctx = n_ctx.min(draft.config().n_ctx_train);
        let mut session = draft.session(&SessionOptions::with_ctx(n_ctx))?;
        session.limit_logits(opts.vocab);
        Ok(DraftModel {
            session,
            sampler: draft_sampler(sampling)?,
            opts,
            n_vocab_target: target.tokenizer().vocab_size(),
            row: Vec::new(),
            seen: Vec::new(),
            costs: DraftCosts::default(),
        })
    }

    pub fn options(&self) -> &DraftOptions {
        &self.opts
    }

    /// Drafts for another generation from now on: with `sampling`'s settings (its own
    /// random numbers) and `opts`. The cache stays: a new text sharing its start with the
    /// last one (the same system prompt, the next turn of a chat) reuses it.
    pub fn reconfigure(
        &mut self,
        sampling: &SamplerConfig,
        opts: DraftOptions,
    ) -> Result<(), Error> {
        self.sampler = draft_sampler(sampling)?;
        self.opts = opts;
        self.session.limit_logits(opts.vocab);
        Ok(())
    }

    /// Tokens at the start of `tokens` the draft's cache holds already.
    pub fn shared_prefix(&self, tokens: &[u32]) -> usize {
        common_prefix(self.session.tokens(), tokens)
    }

    /// Brings the draft's cache to `tokens` (its logits are then those after the last one).
    fn sync(&mut self, tokens: &[u32]) -> Result<(), Error> {
        // the last token runs again when nothing is new: its logits are needed
        let keep = self.session.keep_prefix(tokens);
        self.session.feed(&tokens[keep..])
    }
}

/// The draft's sampler for a target sampling with `sampling`: the same settings, its own
/// random numbers (not a copy of the target's).
fn draft_sampler(sampling: &SamplerConfig) -> Result<Sampler, Error> {
    Sampler::new(SamplerConfig {
        seed: sampling.seed ^ 0x5eed_d4a7_0000_0001,
        ..sampling.clone()
    })
    .map_err(Error::Core)
}

/// Probability of the most likely token under raw `logits` (terms below e^-20 of the
/// maximum are left out of the sum: they do not move a threshold).
fn top_probability(logits: &[f32]) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let floor = max - 20.0;
    let sum: f32 = logits
        .iter()
        .filter(|&&l| l > floor)
        .map(|&l| (l - max).exp())
        .sum();
    1.0 / sum
}

impl Drafter for DraftModel<'_> {
    type Error = Error;

    fn prefill(&mut self, tokens: &[u32]) -> Result<(), Error> {
        // a new generation: the time since the last draft is not a verification step's
        self.costs.forget_hand_over();
        if tokens.len() < self.session.n_ctx() {
            self.sync(tokens)?;
        }
        Ok(())
    }

    fn draft(&mut self, history: &[u32], limit: usize, out: &mut Draft) -> Result<(), Error> {
        // the target's step since the last draft: it added the accepted tokens and one more
        self.costs.take_back(history.len());
        let from = out.len();
        self.draft_tokens(history, limit, out)?;
        self.costs.hand_over(out.len() - from + 1, history.len());
        Ok(())
    }
}

impl DraftModel<'_> {
    fn draft_tokens(
        &mut self,
        history: &[u32],
        limit: usize,
        out: &mut Draft,
    ) -> Result<(), Error> {
        // the draft's own context bounds it too (it may be smaller than the target's)
        let room = self.session.n_ctx().saturating_sub(history.len());
        let max = self.opts.max.min(limit).min(room);
        if max == 0 || history.is_empty() {
            return Ok(());
        }
        self.sync(history)?;
        self.seen.clear();
        self.seen.extend_from_slice(history);
        let greedy = self.sampler.is_greedy();
        // the draft's estimate that every token drafted so far stands
        let mut p_all = 1.0f32;
        for k in 0..max {
            self.row.clear();
            self.row.extend_from_slice(self.session.logits());
            let q = self.sampler.distribution(&mut self.row, &self.seen);
            let (top, q) = if greedy {
                (top_probability(self.session.logits()), None)
            } else {
                (q.first().map_or(0.0, |c| c.p), Some(q.to_vec()))
            };
            // the first token under p-min ends the draft, as its last token: its logits are
            // computed already, and one more row in the verification step costs far less
            // than the chance it stands is worth (see `DraftOptions::p_min`)
            let last = k >= self.opts.min && top < self.opts.p_min;
            if last && top < self.opts.p_min * LAST_TOKEN_FLOOR {
                break;
            }
            let priced = self.opts.adaptive && k >= self.opts.min;
            if priced && !self.costs.last_pays(k, p_all * top) {
                break;
            }
            let id = self.sampler.draw();
            if id as usize >= self.n_vocab_target {
                break;
            }
            match q {
                None => out.push(id),
                Some(q) => out.push_drawn(id, q),
            }
            p_all *= top;
            // the next token, if as likely as this one, pays for another pass?
            if last || (priced && !self.costs.continue_pays(k + 1, p_all * top)) {
                break;
            }
            self.seen.push(id);
            if k + 1 < max {
                let t = Instant::now();
                self.session.feed(&[id])?;
                self.costs.record_pass(t.elapsed());
            }
        }
        Ok(())
    }
}

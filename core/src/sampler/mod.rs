//! Token samplers, in llama.cpp's default chain order: penalties → top-k → top-p → min-p →
//! temperature → draw. Greedy (temperature <= 0) is the argmax after the penalties.

mod filters;
mod penalties;
pub(crate) mod rng;

#[cfg(test)]
mod tests;

use alloc::string::ToString;
use alloc::vec::Vec;

use crate::error::{Error, Result};
pub use rng::Rng;

/// The most alternatives a request may ask log-probabilities of (OpenAI's limit).
pub const MAX_TOP_LOGPROBS: usize = 20;

#[derive(Clone, Debug, PartialEq)]
pub struct SamplerConfig {
    /// <= 0: greedy.
    pub temperature: f32,
    /// 0 = disabled.
    pub top_k: usize,
    /// 1.0 = disabled.
    pub top_p: f32,
    /// 0.0 = disabled.
    pub min_p: f32,
    /// 1.0 = disabled.
    pub repeat_penalty: f32,
    pub frequency_penalty: f32,
    pub presence_penalty: f32,
    /// How many of the most recent tokens the penalties look at (0 = none).
    pub repeat_last_n: usize,
    pub seed: u64,
}

impl Default for SamplerConfig {
    /// llama.cpp's common defaults.
    fn default() -> Self {
        SamplerConfig {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            repeat_last_n: 64,
            seed: 0,
        }
    }
}

impl SamplerConfig {
    /// Argmax of the raw logits.
    pub fn greedy() -> Self {
        SamplerConfig {
            temperature: 0.0,
            ..Default::default()
        }
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::InvalidArgument(m.to_string()));
        if !self.temperature.is_finite() {
            return bad("temperature must be a finite number");
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad("top_p must be in (0, 1]");
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return bad("min_p must be in [0, 1]");
        }
        if !(self.repeat_penalty.is_finite() && self.repeat_penalty > 0.0) {
            return bad("repeat_penalty must be a positive number");
        }
        if !self.frequency_penalty.is_finite() || !self.presence_penalty.is_finite() {
            return bad("frequency/presence penalties must be finite numbers");
        }
        Ok(())
    }

    fn penalties_active(&self) -> bool {
        self.repeat_last_n > 0
            && (self.repeat_penalty != 1.0
                || self.frequency_penalty != 0.0
                || self.presence_penalty != 0.0)
    }
}

/// A candidate token: id and logit (later probability).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    pub id: u32,
    pub logit: f32,
    pub p: f32,
}

pub struct Sampler {
    cfg: SamplerConfig,
    rng: Rng,
    /// Reused across calls: no allocation per token once grown.
    cands: Vec<Candidate>,
    counts: Vec<(u32, u32)>,
}

impl Sampler {
    /// Argmax of the raw logits (ties take the lowest id).
    pub fn greedy() -> Self {
        let cfg = SamplerConfig::greedy();
        Sampler {
            rng: Rng::new(cfg.seed),
            cfg,
            cands: Vec::new(),
            counts: Vec::new(),
        }
    }

    pub fn new(cfg: SamplerConfig) -> Result<Self> {
        cfg.validate()?;
        let rng = Rng::new(cfg.seed);
        Ok(Sampler {
            cfg,
            rng,
            cands: Vec::new(),
            counts: Vec::new(),
        })
    }

    pub fn config(&self) -> &SamplerConfig {
        &self.cfg
    }

    /// Restarts the random sequence from the configured seed.
    pub fn reset(&mut self) {
        self.rng = Rng::new(self.cfg.seed);
    }

    /// Picks the next token from the full vocabulary's `logits` (modified in place by the
    /// penalties), given the `history` of tokens so far.
    pub fn sample(&mut self, logits: &mut [f32], history: &[u32]) -> u32 {
        self.distribution(logits, history);
        self.draw()
    }

    /// Whether every draw is the argmax (temperature <= 0 or top-k 1): the distribution is
    /// then one token with probability 1 and no random number is used.
    pub fn is_greedy(&self) -> bool {
        self.cfg.temperature <= 0.0 || self.cfg.top_k == 1
    }

    /// The distribution the next token is drawn from, after the whole chain (penalties,
    /// top-k, top-p, min-p, temperature): candidates sorted by probability, summing to 1. A
    /// greedy sampler's is the argmax alone. `logits` is modified in place by the penalties.
    /// Speculative sampling compares these of the target and of the draft.
    pub fn distribution(&mut self, logits: &mut [f32], history: &[u32]) -> &[Candidate] {
        self.cands.clear();
        if self.is_greedy() && !self.cfg.penalties_active() {
            // the argmax skips NaNs itself: no pass rewriting them (a 262k vocabulary's
            // logits are a megabyte per sequence and step)
            self.cands.push(Candidate {
                id: filters::argmax(logits),
                logit: 0.0,
                p: 1.0,
            });
            return &self.cands;
        }
        for l in logits.iter_mut() {
            if l.is_nan() {
                *l = f32::NEG_INFINITY;
            }
        }
        if self.cfg.penalties_active() {
            let start = history.len().saturating_sub(self.cfg.repeat_last_n);
            penalties::apply(&self.cfg, logits, &history[start..], &mut self.counts);
        }
        if self.is_greedy() {
            self.cands.push(Candidate {
                id: filters::argmax(logits),
                logit: 0.0,
                p: 1.0,
            });
            return &self.cands;
        }
        filters::candidates(&self.cfg, logits, &mut self.cands);
        filters::top_p(&mut self.cands, self.cfg.top_p);
        filters::min_p(&mut self.cands, self.cfg.min_p);
        filters::softmax(&mut self.cands, self.cfg.temperature);
        &self.cands
    }

    /// Draws a token from the last [`Self::distribution`] (a greedy one without using the
    /// random numbers).
    pub fn draw(&mut self) -> u32 {
        if self.is_greedy() {
            return self.cands.first().map_or(0, |c| c.id);
        }
        draw(&self.cands, &mut self.rng)
    }

    /// The target's side of speculative sampling: this sampler's distribution for `logits`
    /// (see [`Self::distribution`]), then [`crate::speculative::verify`] of drafted token
    /// `x`, which the draft drew from `q` (`None`: chosen deterministically).
    pub fn verify(
        &mut self,
        logits: &mut [f32],
        history: &[u32],
        x: u32,
        q: Option<&[Candidate]>,
    ) -> crate::speculative::Verdict {
        self.distribution(logits, history);
        crate::speculative::verify(&self.cands, q, x, &mut self.rng)
    }

    /// The random numbers this sampler draws with (speculative acceptance uses them too, so
    /// a seed fixes the whole output).
    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }
}

/// Draws from candidates whose probabilities sum to 1 (rounding: the last one takes the rest).
pub fn draw(cands: &[Candidate], rng: &mut Rng) -> u32 {
    let r = rng.next_f64();
    let mut acc = 0.0f64;
    for c in cands {
        acc += c.p as f64;
        if r < acc {
            return c.id;
        }
    }
    cands.last().map(|c| c.id).unwrap_or(0)
}

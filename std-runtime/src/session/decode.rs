//! Generation in a session: core's decode loop ([`Context::decode`]), plain or speculative,
//! timed (prompt and generation apart).

use std::ops::ControlFlow;
use std::time::Instant;

use superinfer_core::generate::{Constraint, Context, GenerateParams};
use superinfer_core::sampler::Sampler;

use super::{GenerateStats, Session, TokenEvent};
use crate::speculative::DynDrafter;
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
        self.generate_with(
            prompt,
            &GenerateParams::from(max_tokens),
            sampler,
            None,
            on_token,
        )
    }

    /// [`Self::generate`] by the rules of `params` (`max_tokens`, stop strings,
    /// `ignore_eos`), with speculative decoding when `drafter` is given: the drafter
    /// proposes tokens, the target verifies them in one step per round. The stream of tokens
    /// handed to `on_token` is the same as without it for a greedy sampler, and has the
    /// same distribution for any other.
    pub fn generate_with<'d>(
        &mut self,
        prompt: &[u32],
        params: &GenerateParams,
        sampler: &mut Sampler,
        drafter: Option<&mut DynDrafter<'d>>,
        on_token: impl FnMut(TokenEvent<'_>) -> ControlFlow<()>,
    ) -> Result<GenerateStats, Error> {
        self.generate_constrained(prompt, params, sampler, drafter, None, on_token)
    }

    /// [`Self::generate_with`] under `constraint` (a grammar, a JSON schema: see the
    /// `superinfer-structured` crate): each token is masked by it, and the tokens it forces
    /// are verified together in one step. [`GenerateStats::mask`] tells what its masks cost.
    pub fn generate_constrained<'d>(
        &mut self,
        prompt: &[u32],
        params: &GenerateParams,
        sampler: &mut Sampler,
        mut drafter: Option<&mut DynDrafter<'d>>,
        constraint: Option<Box<dyn Constraint>>,
        on_token: impl FnMut(TokenEvent<'_>) -> ControlFlow<()>,
    ) -> Result<GenerateStats, Error> {
        if prompt.is_empty() && self.tokens().is_empty() {
            return Err(Error::Usage(
                "the prompt is empty (no tokens to start from)".into(),
            ));
        }
        let ctx: &mut Context<'_> = &mut self.ctx;
        let t0 = Instant::now();
        ctx.prefill(prompt)?;
        if let Some(d) = drafter.as_deref_mut() {
            d.prefill(ctx.tokens())?;
        }
        let prompt_time = t0.elapsed();
        let t1 = Instant::now();
        let (out, mask) = ctx.decode_constrained(params, sampler, drafter, constraint, on_token)?;
        let mut stats = GenerateStats::new(&out, prompt.len(), prompt_time, t1.elapsed());
        stats.mask = mask;
        Ok(stats)
    }
}

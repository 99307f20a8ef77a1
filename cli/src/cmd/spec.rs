//! The speculative decoding flags of `run`, `chat` and `bench`: checking them, loading the
//! draft model and building the drafter.

use std::time::Duration;

use superinfer_runtime::core::sampler::SamplerConfig;
use superinfer_runtime::speculative::{DraftModel, DraftOptions, DynDrafter, LookupDrafter};
use superinfer_runtime::{Engine, GenerateStats};

use crate::args::{ModelArgs, SpecArgs};

impl SpecArgs {
    /// Whether the flags ask for speculation (and allow it: `--draft-max 0` turns it off).
    pub fn enabled(&self) -> bool {
        (self.model_draft.is_some() || self.lookup_ngram > 0) && self.draft_max > 0
    }

    /// Checks the flags together, before anything is loaded.
    pub fn check(&self) -> Result<(), String> {
        if self.model_draft.is_some() && self.lookup_ngram > 0 {
            return Err(
                "--model-draft and --lookup-ngram are two ways to draft: choose one".into(),
            );
        }
        if !(0.0..=1.0).contains(&self.draft_p_min) {
            return Err(format!(
                "--draft-p-min {} is not a probability (use a value in [0, 1])",
                self.draft_p_min
            ));
        }
        if self.draft_max > 0 && self.draft_min > self.draft_max {
            return Err(format!(
                "--draft-min {} is above --draft-max {}",
                self.draft_min, self.draft_max
            ));
        }
        if self.draft_max == 0 && (self.model_draft.is_some() || self.lookup_ngram > 0) {
            eprintln!("note: --draft-max 0: speculative decoding is off, decoding plainly");
        }
        Ok(())
    }

    /// Loads the draft model (on the target's threads and instruction set), if one is asked
    /// for and speculation is on.
    pub fn load_draft(&self, target: &ModelArgs) -> Result<Option<Engine>, String> {
        self.check()?;
        match &self.model_draft {
            Some(path) if self.enabled() => {
                let m = ModelArgs {
                    model: path.clone(),
                    ..target.clone()
                };
                super::load_engine(&m)
                    .map(Some)
                    .map_err(|e| format!("draft model: {e}"))
            }
            _ => Ok(None),
        }
    }

    /// The drafter the flags ask for: over `draft` (from [`Self::load_draft`]) with a
    /// context of `n_ctx`, or prompt lookup; `None` without speculation.
    pub fn drafter<'d>(
        &self,
        target: &Engine,
        draft: Option<&'d Engine>,
        n_ctx: usize,
        sampling: &SamplerConfig,
    ) -> Result<Option<Box<DynDrafter<'d>>>, String> {
        if !self.enabled() {
            return Ok(None);
        }
        if let Some(draft) = draft {
            let opts = DraftOptions {
                max: self.draft_max,
                min: self.draft_min,
                p_min: self.draft_p_min,
                vocab: (self.draft_vocab > 0).then_some(self.draft_vocab),
                adaptive: !self.draft_fixed,
            };
            let d = DraftModel::new(target, draft, n_ctx, sampling, opts)
                .map_err(|e| format!("draft model: {e}"))?;
            return Ok(Some(Box::new(d)));
        }
        Ok(Some(Box::new(LookupDrafter::new(
            self.lookup_ngram,
            self.draft_max,
        ))))
    }
}

/// "drafted N, accepted M (x%), y per verification" for a statistics line.
pub fn describe(stats: &GenerateStats) -> String {
    format!(
        "draft: {} drafted, {} accepted ({:.1}%), {:.2} accepted per verification step",
        stats.drafted,
        stats.accepted,
        100.0 * stats.acceptance(),
        stats.mean_accepted()
    )
}

/// Tokens per second of `n` tokens in `t` (0 for no time).
pub fn rate(n: usize, t: Duration) -> f64 {
    if t.as_secs_f64() > 0.0 {
        n as f64 / t.as_secs_f64()
    } else {
        0.0
    }
}

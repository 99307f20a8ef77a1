//! `--lora FILE` / `--lora-scaled FILE SCALE` (llama.cpp's spelling, repeatable): the LoRA
//! adapters `run`, `chat`, `perplexity` and `bench` run under. Several adapters on one
//! sequence add up; in `bench -np`, a comma-separated `--lora A,B,C,D` spreads the
//! sequences over the adapters (sequence `i` takes adapter `i % n`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{ArgAction, Args};
use superinfer_runtime::core::model::lora::{Lora, LoraAdapter, LoraSet};
use superinfer_runtime::Engine;

/// The adapters every sequence takes (with their scales), and those spread over sequences.
type Parsed = (Vec<(PathBuf, f32)>, Vec<PathBuf>);

#[derive(Args, Clone, Default, Debug)]
pub struct LoraArgs {
    /// A LoRA adapter (llama.cpp's GGUF LoRA format) at scale 1; repeatable (the adapters'
    /// terms add up). In `bench -np`, FILE,FILE,... spreads the sequences over the adapters.
    #[arg(long = "lora", value_name = "FILE", action = ArgAction::Append)]
    pub lora: Vec<String>,
    /// A LoRA adapter at SCALE (its terms times SCALE · alpha / rank); repeatable.
    #[arg(
        long = "lora-scaled",
        num_args = 2,
        value_names = ["FILE", "SCALE"],
        action = ArgAction::Append
    )]
    pub lora_scaled: Vec<String>,
}

impl LoraArgs {
    /// Whether any adapter was asked for.
    pub fn any(&self) -> bool {
        !self.lora.is_empty() || !self.lora_scaled.is_empty()
    }

    /// Every adapter at its scale: the ones every sequence takes, and the ones a
    /// comma-separated list spreads over sequences (empty when there is none).
    fn parse(&self) -> Result<Parsed, String> {
        let (mut common, mut spread) = (Vec::new(), Vec::new());
        for v in &self.lora {
            let parts: Vec<&str> = v.split(',').filter(|p| !p.is_empty()).collect();
            match parts[..] {
                [] => return Err("--lora needs a file".into()),
                [one] => common.push((PathBuf::from(one), 1.0)),
                _ if !spread.is_empty() => {
                    return Err("--lora: only one comma-separated list of adapters".into())
                }
                _ => spread.extend(parts.iter().map(PathBuf::from)),
            }
        }
        for pair in self.lora_scaled.chunks(2) {
            let [file, scale] = pair else {
                return Err("--lora-scaled needs FILE SCALE".into());
            };
            let scale: f32 = scale
                .parse()
                .map_err(|_| format!("--lora-scaled {file} {scale}: SCALE is not a number"))?;
            common.push((PathBuf::from(file), scale));
        }
        Ok((common, spread))
    }

    /// The adapter sets of `n` sequences: sequence `i` takes every adapter given alone and
    /// the `i % len`-th of a comma-separated list. Each file is read once. An empty list
    /// when no adapter was asked for.
    pub fn sets(&self, engine: &Engine, n: usize) -> Result<Vec<Option<LoraSet>>, String> {
        if !self.any() {
            return Ok(Vec::new());
        }
        let (common, spread) = self.parse()?;
        let mut loaded: HashMap<PathBuf, Arc<LoraAdapter>> = HashMap::new();
        let mut load = |p: &PathBuf| -> Result<Arc<LoraAdapter>, String> {
            if let Some(a) = loaded.get(p) {
                return Ok(a.clone());
            }
            let a = engine
                .load_lora(p)
                .map_err(|e| superinfer_runtime::chain(&e))?;
            loaded.insert(p.clone(), a.clone());
            Ok(a)
        };
        let mut base = Vec::new();
        for (p, scale) in &common {
            base.push(Lora {
                adapter: load(p)?,
                scale: *scale,
            });
        }
        let mut one_each = Vec::new();
        for p in &spread {
            one_each.push(load(p)?);
        }
        let set = |i: usize| {
            let mut items = base.clone();
            if !one_each.is_empty() {
                items.push(Lora {
                    adapter: one_each[i % one_each.len()].clone(),
                    scale: 1.0,
                });
            }
            LoraSet::new(items)
        };
        // one set per distinct adapter list, shared by the sequences that take it
        let distinct: Vec<Option<LoraSet>> = (0..one_each.len().max(1)).map(set).collect();
        Ok((0..n)
            .map(|i| distinct[i % distinct.len()].clone())
            .collect())
    }

    /// The one adapter set of a single sequence (`None`: the base model).
    pub fn set(&self, engine: &Engine) -> Result<Option<LoraSet>, String> {
        Ok(self.sets(engine, 1)?.into_iter().next().flatten())
    }
}

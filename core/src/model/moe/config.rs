//! The mixture-of-experts hyperparameters: how many experts, how many each token uses, how
//! the router's scores become the experts' weights — read from the GGUF metadata with the
//! keys and per-architecture rules of llama.cpp (`llama-model.cpp`, `src/models/*.cpp`).

use alloc::string::ToString;
use alloc::vec::Vec;

use super::super::arch::Arch;
use crate::error::{Error, Result};
use crate::gguf::{keys, GgufFile, Value};

/// llama.cpp's `LLAMA_MAX_EXPERTS`: a count above it is refused as it refuses it.
pub const MAX_EXPERTS: usize = 512;

/// How the router's logits become the chosen experts' weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gating {
    /// Softmax over all experts; the top-k probabilities are the weights (Mixtral, Qwen-MoE).
    Softmax,
    /// Top-k of the raw logits; the weights are the softmax of those k logits (gpt-oss).
    SoftmaxSelected,
}

#[derive(Debug, Clone)]
pub struct MoeConfig {
    pub n_expert: usize,
    /// Experts each token uses, per layer (`expert_used_count`, a number or one per layer).
    pub n_used: Vec<usize>,
    pub gating: Gating,
    /// Divide the chosen weights by their sum (Mixtral, Qwen3-MoE: `norm_topk_prob`).
    pub norm_weights: bool,
    /// Shared expert behind a sigmoid gate (Qwen2-MoE).
    pub shared_expert: bool,
}

impl MoeConfig {
    /// The file's MoE configuration: `None` for a dense model. An MoE architecture with no
    /// experts, a token using none or more than there are, is a clear error.
    pub fn from_gguf(f: &GgufFile<'_>, arch: Arch, n_layer: usize) -> Result<Option<MoeConfig>> {
        let key = |k: &str| keys::arch_key(arch.name(), k);
        let n_expert = f.get_u64(&key(keys::EXPERT_COUNT))?.unwrap_or(0);
        if n_expert == 0 {
            if arch.always_moe() {
                return Err(Error::UnsupportedModel(alloc::format!(
                    "{} is a mixture-of-experts architecture but '{}' is 0 or missing",
                    arch.name(),
                    key(keys::EXPERT_COUNT)
                )));
            }
            return Ok(None);
        }
        if !(arch.always_moe() || arch == Arch::Llama) {
            return Err(Error::UnsupportedModel(alloc::format!(
                "experts ('{}' = {n_expert}) in a {} model: llama.cpp runs no such model either",
                key(keys::EXPERT_COUNT),
                arch.name()
            )));
        }
        if n_expert > MAX_EXPERTS as u64 {
            return Err(Error::UnsupportedModel(alloc::format!(
                "'{}' = {n_expert}: more than {MAX_EXPERTS} experts",
                key(keys::EXPERT_COUNT)
            )));
        }
        let n_expert = n_expert as usize;
        let used_key = key(keys::EXPERT_USED_COUNT);
        let n_used =
            per_layer(f, &used_key, n_layer)?.ok_or(Error::MissingKey(used_key.clone()))?;
        let most = n_expert.min(super::route::MAX_USED);
        if let Some(&bad) = n_used.iter().find(|&&k| k == 0 || k > most) {
            return Err(Error::UnsupportedModel(alloc::format!(
                "'{used_key}' = {bad}: each token must use between 1 and {most} of the {n_expert} experts"
            )));
        }
        let (gating, norm_weights) = match arch {
            Arch::GptOss => (Gating::SoftmaxSelected, false),
            Arch::Qwen2Moe => (Gating::Softmax, false),
            _ => (Gating::Softmax, true),
        };
        Ok(Some(MoeConfig {
            n_expert,
            n_used,
            gating,
            norm_weights,
            shared_expert: arch == Arch::Qwen2Moe,
        }))
    }

    /// The most experts any layer's tokens use.
    pub fn max_used(&self) -> usize {
        self.n_used.iter().copied().max().unwrap_or(0)
    }
}

/// A count given once or per layer (llama.cpp's `get_key_or_arr`).
pub(crate) fn per_layer(f: &GgufFile<'_>, key: &str, n_layer: usize) -> Result<Option<Vec<usize>>> {
    let wrong = || Error::WrongType {
        key: key.to_string(),
        expected: "unsigned integer or array of them",
    };
    match f.get(key) {
        None => Ok(None),
        Some(Value::Array(a)) => {
            if a.len() != n_layer {
                return Err(Error::UnsupportedModel(alloc::format!(
                    "'{key}' has {} entries for {n_layer} layers",
                    a.len()
                )));
            }
            a.iter()
                .map(|v| v.as_u64().map(|x| x as usize).ok_or_else(wrong))
                .collect::<Result<Vec<_>>>()
                .map(Some)
        }
        Some(v) => {
            let n = v.as_u64().ok_or_else(wrong)? as usize;
            Ok(Some(alloc::vec![n; n_layer]))
        }
    }
}

//! RoPE scaling as llama.cpp reads it from GGUF metadata and sets it up for a context
//! (`llama_model_base::load_hparams`, the per-architecture `load_arch_hparams`,
//! `llama_context`'s constructor): the linear frequency scale of the full-attention and the
//! sliding-window layers, and YaRN's parameters (`ops::rope::Yarn`).
//!
//! Keys read: `{arch}.rope.scaling.type` (`none`, `linear`, `yarn`; llama.cpp's default is
//! `linear`), `rope.scaling.factor` (or the older `rope.scale_linear`),
//! `rope.scaling.original_context_length` (default: the training context) and
//! `rope.scaling.attn_factor` (default 1). Like llama.cpp for every architecture this
//! engine runs, the `rope.scaling.yarn_*` keys (ext_factor, attn_factor, beta_fast,
//! beta_slow, log_multiplier) are not read: llama.cpp reads them only for grok, mistral3 and
//! deepseek, and uses ext_factor 1, beta_fast 32, beta_slow 1 and its own attention factor
//! otherwise (gpt-oss's files carry betas 32 and 1, the same).

use super::weights::Weights;
use crate::error::{Error, Result};
use crate::gguf::{keys, GgufFile};
use crate::ops::rope::{RopeFreqs, Yarn};

const ROPE_SCALE_LINEAR: &str = "rope.scale_linear";
const ROPE_SCALING_ATTN_FACTOR: &str = "rope.scaling.attn_factor";
const ROPE_SCALING_ORIG_CTX_LEN: &str = "rope.scaling.original_context_length";

/// A model's RoPE scaling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct RopeScaling {
    /// The full-attention layers' frequency scale: 1/factor (linear or YaRN), else 1.
    pub freq_scale: f32,
    /// The sliding-window layers' (llama.cpp's `rope_freq_scale_train_swa`): 1, except
    /// where the architecture scales them too (gpt-oss).
    pub freq_scale_swa: f32,
    /// The same for every layer (llama.cpp's context parameters).
    pub yarn: Yarn,
    /// `rope.scaling.original_context_length`, else the training context (llama.cpp's
    /// `n_ctx_orig_yarn`).
    pub n_ctx_orig: usize,
}

/// Reads the scaling of architecture `arch` (its name, the key prefix) whose training
/// context is `n_ctx_train`.
pub(super) fn read(f: &GgufFile<'_>, arch: &str, n_ctx_train: usize) -> Result<RopeScaling> {
    let key = |k: &str| keys::arch_key(arch, k);
    let factor = match f.get_f32(&key(keys::ROPE_SCALING_FACTOR))? {
        Some(v) => Some(v),
        None => f.get_f32(&key(ROPE_SCALE_LINEAR))?,
    }
    .unwrap_or(0.0);
    if !factor.is_finite() || factor < 0.0 {
        return Err(Error::UnsupportedModel(alloc::format!(
            "{} is {factor}: a RoPE scaling factor must be a positive number (or 0 for none)",
            key(keys::ROPE_SCALING_FACTOR)
        )));
    }
    // llama.cpp: rope_freq_scale_train = factor == 0 ? 1 : 1/factor
    let scale_train = if factor == 0.0 { 1.0 } else { 1.0 / factor };
    let attn_factor = f.get_f32(&key(ROPE_SCALING_ATTN_FACTOR))?.unwrap_or(1.0);
    let kind = f
        .get_str(&key(keys::ROPE_SCALING_TYPE))?
        .unwrap_or("linear");
    let n_ctx_orig = match f.get_u64(&key(ROPE_SCALING_ORIG_CTX_LEN))? {
        Some(n) if n > 0 => n as usize,
        _ => n_ctx_train,
    };
    let (freq_scale, yarn) = match kind {
        "none" => (1.0, Yarn::NONE),
        // LongRoPE's factor tables are tensors (`Weights`); otherwise it scales as linear
        "linear" | "longrope" => (scale_train, Yarn::NONE),
        "yarn" => (scale_train, Yarn::new(scale_train, n_ctx_orig, 1.0)),
        other => {
            return Err(Error::UnsupportedModel(alloc::format!(
                "rope scaling type '{other}' (supported: none, linear, yarn, longrope)"
            )));
        }
    };
    // llama.cpp multiplies the YaRN attention factor by `rope.scaling.attn_factor` whatever
    // the scaling type (1 when the key is absent)
    let yarn = Yarn {
        attn_factor: yarn.attn_factor * attn_factor,
        ..yarn
    };
    // gpt-oss (llama.cpp's openai-moe) and Gemma 2 give their sliding-window layers the full
    // layers' scale; the others leave them unscaled
    let freq_scale_swa = if matches!(arch, "gpt-oss" | "gemma2") {
        scale_train
    } else {
        1.0
    };
    Ok(RopeScaling {
        freq_scale,
        freq_scale_swa,
        yarn,
        n_ctx_orig,
    })
}

/// Layer `il`'s RoPE frequencies in a context of `n_ctx` positions per sequence: its base
/// and scale (`Config::layer_rope`), the model's frequency factors and YaRN. The factors are
/// `rope_freqs`, else LongRoPE's long table when `n_ctx` exceeds the original context and
/// its short one otherwise (llama.cpp's `get_rope_factors`, with `n_ctx_seq`).
pub(crate) fn layer_freqs<'w>(w: &'w Weights<'_>, il: usize, n_ctx: usize) -> RopeFreqs<'w> {
    let c = &w.config;
    let (base, freq_scale) = c.layer_rope(il);
    let long = n_ctx > c.n_ctx_orig;
    let freq_factors = w.rope_freqs.as_deref().or(if long {
        w.rope_long.as_deref()
    } else {
        w.rope_short.as_deref()
    });
    RopeFreqs {
        n_rot: c.n_rot,
        base,
        freq_scale,
        freq_factors,
        yarn: c.yarn,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::{GgufWriter, MetaValue};
    use alloc::vec::Vec;

    fn file(arch: &str, meta: &[(&str, MetaValue)]) -> Vec<u8> {
        let mut w = GgufWriter::new();
        w.meta("general.architecture", MetaValue::String(arch.into()));
        for (k, v) in meta {
            w.meta(alloc::format!("{arch}.{k}"), v.clone());
        }
        w.finish().unwrap()
    }

    fn read_meta(arch: &str, meta: &[(&str, MetaValue)]) -> Result<RopeScaling> {
        let bytes = file(arch, meta);
        let f = GgufFile::parse(&bytes).unwrap();
        read(&f, arch, 8192)
    }

    #[test]
    fn gpt_oss_yarn() {
        let s = |t: &str| MetaValue::String(t.into());
        let r = read_meta(
            "gpt-oss",
            &[
                ("rope.scaling.type", s("yarn")),
                ("rope.scaling.factor", MetaValue::F32(32.0)),
                ("rope.scaling.original_context_length", MetaValue::U32(4096)),
                // llama.cpp does not read these for gpt-oss: a different value changes nothing
                ("rope.scaling.yarn_beta_fast", MetaValue::F32(16.0)),
            ],
        )
        .unwrap();
        assert_eq!(r.freq_scale, 1.0 / 32.0);
        assert_eq!(r.freq_scale_swa, 1.0 / 32.0);
        assert_eq!(
            (r.yarn.ext_factor, r.yarn.beta_fast, r.yarn.beta_slow),
            (1.0, 32.0, 1.0)
        );
        assert_eq!(r.yarn.n_ctx_orig, 4096);
        // mscale(32) / (1 + 0.1 ln 32): 1 up to rounding
        assert!((r.yarn.attn_factor - 1.0).abs() < 1e-6);

        // the same scaling elsewhere: unscaled sliding-window layers; the training context
        // when the original one is not given; rope.scaling.attn_factor multiplies
        let r = read_meta(
            "gemma3",
            &[
                ("rope.scaling.type", s("yarn")),
                ("rope.scaling.factor", MetaValue::F32(8.0)),
                ("rope.scaling.attn_factor", MetaValue::F32(0.5)),
            ],
        )
        .unwrap();
        assert_eq!((r.freq_scale, r.freq_scale_swa), (0.125, 1.0));
        assert_eq!(r.yarn.n_ctx_orig, 8192);
        assert!((r.yarn.attn_factor - 0.5).abs() < 1e-6);
    }

    #[test]
    fn linear_none_and_errors() {
        let s = |t: &str| MetaValue::String(t.into());
        // no type: llama.cpp's default is linear
        let r = read_meta("llama", &[("rope.scaling.factor", MetaValue::F32(4.0))]).unwrap();
        assert_eq!((r.freq_scale, r.yarn), (0.25, Yarn::NONE));
        let r = read_meta("llama", &[("rope.scale_linear", MetaValue::F32(2.0))]).unwrap();
        assert_eq!(r.freq_scale, 0.5);
        let r = read_meta(
            "qwen2",
            &[
                ("rope.scaling.type", s("none")),
                ("rope.scaling.factor", MetaValue::F32(4.0)),
            ],
        )
        .unwrap();
        assert_eq!((r.freq_scale, r.yarn), (1.0, Yarn::NONE));
        assert_eq!(read_meta("qwen2", &[]).unwrap().freq_scale, 1.0);
        let e = read_meta("qwen2", &[("rope.scaling.type", s("dynamic"))]).unwrap_err();
        assert!(alloc::format!("{e}").contains("dynamic"), "{e}");
        // LongRoPE (Phi-3): linear with its factor tables; the original context is read
        let r = read_meta(
            "phi3",
            &[
                ("rope.scaling.type", s("longrope")),
                ("rope.scaling.original_context_length", MetaValue::U32(4096)),
                ("rope.scaling.attn_factor", MetaValue::F32(1.19)),
            ],
        )
        .unwrap();
        assert_eq!((r.freq_scale, r.n_ctx_orig), (1.0, 4096));
        assert_eq!((r.yarn.ext_factor, r.yarn.attn_factor), (0.0, 1.19));
        assert_eq!(read_meta("phi3", &[]).unwrap().n_ctx_orig, 8192);
        let e = read_meta(
            "qwen2",
            &[("rope.scaling.factor", MetaValue::F32(f32::NAN))],
        );
        assert!(e.is_err());
    }
}

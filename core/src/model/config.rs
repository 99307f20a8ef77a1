//! Hyperparameters read from GGUF metadata (and tensor shapes where the metadata is silent).

use alloc::string::ToString;
use alloc::vec::Vec;

use super::arch::{Activation, Arch};
use super::encoder::Pooling;
use super::moe::MoeConfig;
use crate::error::{Error, Result};
use crate::gguf::{keys, GgufFile};
use crate::ops::attention::AttnShape;
use crate::ops::rope::{RopeStyle, Yarn};

#[derive(Debug, Clone)]
pub struct Config {
    pub arch: Arch,
    pub n_vocab: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    /// Largest feed-forward width over the layers (per-layer widths come from the tensors).
    pub n_ff: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
    pub n_ctx_train: usize,
    pub rms_eps: f32,
    pub rope_style: RopeStyle,
    /// Rotated dims per head.
    pub n_rot: usize,
    pub rope_base: f32,
    pub rope_base_swa: f32,
    /// 1/factor for linear RoPE scaling, else 1.
    pub rope_freq_scale: f32,
    /// The sliding-window layers' (1 but for gpt-oss).
    pub rope_freq_scale_swa: f32,
    /// YaRN's parameters, the same for every layer (`Yarn::NONE` without YaRN).
    pub yarn: Yarn,
    /// The context the RoPE scaling was made for (`rope.scaling.original_context_length`,
    /// else the training context): LongRoPE takes its long factors for contexts beyond it.
    pub n_ctx_orig: usize,
    pub activation: Activation,
    /// Multiplier of the token embeddings (1, sqrt(n_embd) for Gemma, Granite's
    /// `embedding_scale`).
    pub embed_scale: f32,
    /// Multiplier of each attention and FFN output before it is added to the residual
    /// stream (Granite's `residual_scale`; else 1).
    pub residual_scale: f32,
    /// Multiplier of the logits (Granite: 1 / `logit_scale`; else 1).
    pub logit_scale: f32,
    /// Multiplier of q·k.
    pub attn_scale: f32,
    pub attn_softcap: Option<f32>,
    pub final_softcap: Option<f32>,
    /// Window of the sliding-window layers (0 = none).
    pub sliding_window: usize,
    /// Per layer: does it use the sliding window?
    pub swa_layers: Vec<bool>,
    /// Mixture-of-experts feed-forward (every layer), or `None` for a dense model.
    pub moe: Option<MoeConfig>,
    /// Whether a token attends only to the positions before it (decoders); encoders attend
    /// to their whole sequence (`{arch}.attention.causal`, false for BERT).
    pub causal: bool,
    /// How an encoder's token states become one embedding (`{arch}.pooling_type`).
    pub pooling: Pooling,
}

impl Config {
    /// Reads the configuration; `n_vocab` comes from the embedding tensor.
    pub fn from_gguf(f: &GgufFile<'_>) -> Result<Config> {
        let arch_name = f.require_str(keys::GENERAL_ARCHITECTURE)?;
        let arch = Arch::from_name(arch_name)?;
        let key = |k: &str| keys::arch_key(arch_name, k);
        let req = |k: &str| -> Result<usize> {
            let v = f.require_u64(&key(k))?;
            usize::try_from(v)
                .ok()
                .filter(|&v| v > 0 && v < 1 << 24)
                .ok_or(Error::Absurd {
                    what: "hyperparameter",
                    value: v,
                })
        };
        let opt =
            |k: &str| -> Result<Option<usize>> { Ok(f.get_u64(&key(k))?.map(|v| v as usize)) };
        let optf = |k: &str| -> Result<Option<f32>> { f.get_f32(&key(k)) };

        let n_embd = req(keys::EMBEDDING_LENGTH)?;
        let n_layer = req(keys::BLOCK_COUNT)?;
        let n_head = req(keys::HEAD_COUNT)?;
        let n_head_kv = match opt(keys::HEAD_COUNT_KV)? {
            Some(0) | None => n_head,
            Some(v) => v,
        };
        if n_head % n_head_kv != 0 {
            return Err(Error::UnsupportedModel(alloc::format!(
                "{n_head} query heads cannot be grouped over {n_head_kv} KV heads"
            )));
        }
        let head_dim_k = opt(keys::KEY_LENGTH)?.unwrap_or(n_embd / n_head);
        let head_dim_v = opt(keys::VALUE_LENGTH)?.unwrap_or(n_embd / n_head);
        let n_ctx_train = opt(keys::CONTEXT_LENGTH)?.unwrap_or(2048);
        // encoders' LayerNorms read `attention.layer_norm_epsilon`
        let rms_eps = match optf(keys::RMS_EPS)? {
            Some(e) => e,
            None => optf(keys::LAYERNORM_EPS)?.unwrap_or(1e-5),
        };
        let n_rot = opt(keys::ROPE_DIMENSION_COUNT)?.unwrap_or(head_dim_k);
        if n_rot > head_dim_k || n_rot % 2 != 0 {
            return Err(Error::UnsupportedModel(alloc::format!(
                "rope dimension {n_rot} with head size {head_dim_k}"
            )));
        }
        let rope_base = optf(keys::ROPE_FREQ_BASE)?.unwrap_or(10_000.0);
        let rope_base_swa = optf("rope.freq_base_swa")?
            .or(arch.default_rope_base_swa())
            .unwrap_or(rope_base);
        let scaling = super::rope_scaling::read(f, arch_name, n_ctx_train)?;
        // Only architectures whose llama.cpp graph uses sliding-window attention honour the
        // window (llama.cpp ignores it for llama/mistral/qwen2).
        let sliding_window = match arch.default_swa_period() {
            Some(_) => opt(keys::SLIDING_WINDOW)?.unwrap_or(arch.default_sliding_window()),
            None => 0,
        };
        let swa_layers = if sliding_window == 0 {
            alloc::vec![false; n_layer]
        } else {
            swa_pattern(
                f,
                &key(keys::SLIDING_WINDOW_PATTERN),
                n_layer,
                arch.default_swa_period().unwrap_or(0),
            )?
        };
        let softcap = |k: &str| -> Result<Option<f32>> { Ok(optf(k)?.filter(|&c| c > 0.0)) };
        let scales = Scales::read(arch, &optf, n_embd, n_head, n_layer, head_dim_k)?;
        if arch == Arch::Granite && f.get_bool(&key("rope.scaling.finetuned"))? == Some(false) {
            return Err(Error::UnsupportedModel(alloc::format!(
                "{} is false: Granite without RoPE is not supported (supported: Granite with \
                 RoPE, the default)",
                key("rope.scaling.finetuned")
            )));
        }
        if arch == Arch::Olmo2 && sliding_window > 0 && scaling.yarn != Yarn::NONE {
            // OLMo 3 leaves its sliding-window layers unscaled; the YaRN here is per model
            return Err(Error::UnsupportedModel(
                "OLMo 3 with YaRN scaling and a sliding window is not supported (supported: \
                 either one alone)"
                    .to_string(),
            ));
        }

        let n_vocab = f
            .tensor("token_embd.weight")
            .ok_or_else(|| Error::MissingTensor("token_embd.weight".to_string()))?
            .dims
            .get(1)
            .copied()
            .unwrap_or(0) as usize;

        Ok(Config {
            arch,
            n_vocab,
            n_embd,
            n_layer,
            n_ff: opt(keys::FEED_FORWARD_LENGTH)?.unwrap_or(0),
            n_head,
            n_head_kv,
            head_dim_k,
            head_dim_v,
            n_ctx_train,
            rms_eps,
            rope_style: arch.rope_style(),
            n_rot,
            rope_base,
            rope_base_swa,
            rope_freq_scale: scaling.freq_scale,
            rope_freq_scale_swa: scaling.freq_scale_swa,
            yarn: scaling.yarn,
            n_ctx_orig: scaling.n_ctx_orig,
            activation: arch.activation(),
            embed_scale: scales.embed,
            residual_scale: scales.residual,
            logit_scale: scales.logit,
            attn_scale: scales.attn,
            attn_softcap: softcap(keys::ATTN_LOGIT_SOFTCAP)?,
            final_softcap: softcap(keys::FINAL_LOGIT_SOFTCAP)?,
            sliding_window,
            swa_layers,
            moe: MoeConfig::from_gguf(f, arch, n_layer)?,
            causal: f
                .get_bool(&key(keys::ATTENTION_CAUSAL))?
                .unwrap_or(!arch.is_encoder()),
            pooling: match opt(keys::POOLING_TYPE)? {
                Some(v) => Pooling::from_id(v as u64)?,
                None if arch.is_encoder() => Pooling::Mean,
                None => Pooling::None,
            },
        })
    }

    /// RoPE base and frequency scale of layer `il`: sliding-window layers have their own.
    pub fn layer_rope(&self, il: usize) -> (f32, f32) {
        if self.swa_layers[il] {
            (self.rope_base_swa, self.rope_freq_scale_swa)
        } else {
            (self.rope_base, self.rope_freq_scale)
        }
    }

    /// Rows of feed-forward hidden activations a pass of `n` tokens needs: `n`, or for a
    /// mixture at least one per expert a token uses (a decode step runs them together).
    pub fn ffn_rows(&self, n: usize) -> usize {
        n.max(self.moe.as_ref().map_or(0, |m| m.max_used()))
    }

    /// Number of parameters stored per KV-cache position in one layer (K and V).
    pub fn kv_row(&self) -> (usize, usize) {
        (
            self.n_head_kv * self.head_dim_k,
            self.n_head_kv * self.head_dim_v,
        )
    }

    /// The attention shape of every layer.
    pub fn attn_shape(&self) -> AttnShape {
        AttnShape {
            n_head: self.n_head,
            n_head_kv: self.n_head_kv,
            head_dim_k: self.head_dim_k,
            head_dim_v: self.head_dim_v,
        }
    }
}

/// The multipliers of embeddings, residual additions, logits and q·k.
struct Scales {
    embed: f32,
    residual: f32,
    logit: f32,
    attn: f32,
}

impl Scales {
    /// llama.cpp's: Gemma scales the embeddings by sqrt(n_embd) and Gemma 2 27B (46 layers)
    /// q by 1/sqrt(n_embd / n_head); Granite reads `embedding_scale`, `residual_scale`,
    /// `attention.scale` (each optional, 0 meaning unset) and `logit_scale` (required);
    /// elsewhere q·k is scaled by 1/sqrt(head size).
    fn read(
        arch: Arch,
        optf: &dyn Fn(&str) -> Result<Option<f32>>,
        n_embd: usize,
        n_head: usize,
        n_layer: usize,
        head_dim: usize,
    ) -> Result<Scales> {
        let set = |k: &str| -> Result<Option<f32>> { Ok(optf(k)?.filter(|&v| v != 0.0)) };
        let mut s = Scales {
            embed: 1.0,
            residual: 1.0,
            logit: 1.0,
            attn: 1.0 / libm::sqrtf(head_dim as f32),
        };
        if arch.scales_embeddings() {
            s.embed = libm::sqrtf(n_embd as f32);
        }
        if arch == Arch::Gemma2 && n_layer == 46 {
            s.attn = 1.0 / libm::sqrtf((n_embd / n_head) as f32);
        }
        if arch == Arch::Granite {
            s.embed = set("embedding_scale")?.unwrap_or(1.0);
            s.residual = set("residual_scale")?.unwrap_or(1.0);
            s.attn = set("attention.scale")?.unwrap_or(s.attn);
            let logit = optf("logit_scale")?
                .ok_or_else(|| Error::MissingKey(keys::arch_key("granite", "logit_scale")))?;
            if !(logit.is_finite() && logit != 0.0) {
                return Err(Error::UnsupportedModel(alloc::format!(
                    "granite.logit_scale is {logit}: it must be a finite number other than 0"
                )));
            }
            s.logit = 1.0 / logit;
        }
        Ok(s)
    }
}

/// Which layers use the sliding window: `attention.sliding_window_pattern` as one flag per
/// layer, or as a period n (every n-th layer is global), else the architecture's period.
fn swa_pattern(
    f: &GgufFile<'_>,
    key: &str,
    n_layer: usize,
    default_period: usize,
) -> Result<Vec<bool>> {
    let period = match f.get(key) {
        Some(crate::gguf::Value::Array(a)) => {
            if a.len() != n_layer {
                return Err(Error::UnsupportedModel(alloc::format!(
                    "{key} has {} entries for {n_layer} layers",
                    a.len()
                )));
            }
            return Ok(a
                .iter()
                .map(|v| v.as_bool().unwrap_or(v.as_u64().unwrap_or(0) != 0))
                .collect());
        }
        Some(v) => v.as_u64().ok_or_else(|| Error::WrongType {
            key: key.to_string(),
            expected: "integer or array",
        })? as usize,
        None => default_period,
    };
    Ok((0..n_layer)
        .map(|il| period == 0 || il % period < period - 1)
        .collect())
}

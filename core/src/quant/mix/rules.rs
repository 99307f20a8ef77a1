//! llama.cpp's per-tensor type choice (src/llama-quant.cpp: `tensor_allows_quantization`,
//! `llama_tensor_get_type`, `llama_tensor_get_type_impl`, `tensor_type_fallback`,
//! `tensor_requires_imatrix`), rule for rule, including the counters it keeps across
//! tensors (the `i_attention_wv` / `i_ffn_*` layer indices).

use alloc::format;
use alloc::string::String;

use super::{ggml_name, FileType, MixParams, ModelInfo, TensorDesc};
use crate::error::{Error, Result};
use crate::quant::GgmlType;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    TokenEmbd,
    AttentionQ,
    AttentionV,
    AttentionK,
    AttentionQkv,
    AttentionKvB,
    AttentionOutput,
    FfnUp,
    FfnGate,
    FfnDown,
    Output,
    Other,
}

fn is_token_embd(name: &str) -> bool {
    name == "token_embd.weight" || name == "per_layer_token_embd.weight"
}

pub fn category(name: &str) -> Category {
    use Category::*;
    let has = |s: &str| name.contains(s);
    if name == "output.weight" {
        Output
    } else if is_token_embd(name) {
        TokenEmbd
    } else if has("attn_qkv.weight") {
        AttentionQkv
    } else if has("attn_kv_b.weight") {
        AttentionKvB
    } else if has("attn_v.weight") {
        AttentionV
    } else if has("attn_k.weight") {
        AttentionK
    } else if has("attn_q.weight") {
        AttentionQ
    } else if has("attn_output.weight") {
        AttentionOutput
    } else if has("ffn_up") {
        FfnUp
    } else if has("ffn_gate") {
        FfnGate
    } else if has("ffn_down") {
        FfnDown
    } else {
        Other
    }
}

fn is_attn_v(c: Category) -> bool {
    matches!(
        c,
        Category::AttentionV | Category::AttentionQkv | Category::AttentionKvB
    )
}

/// Whether llama.cpp quantizes this tensor at all (else it is copied as it is).
pub fn allows_quantization(p: &MixParams, arch: &str, t: &TensorDesc) -> bool {
    if p.only_copy || t.n_dims < 2 {
        return false;
    }
    let name = t.name.as_str();
    let has = |s: &str| name.contains(s);
    let mut q = name.ends_with("weight");
    q &= !has("_norm.weight");
    q &= p.quantize_output_tensor || name != "output.weight";
    q &= !has("ffn_gate_inp.weight") && !has("ffn_gate_tid2eid.weight");
    q &= !has("altup") && !has("laurel") && !has("per_layer_model_proj");
    q &= name != "position_embd.weight" && name != "token_types.weight";
    q &= !has("ssm_conv1d") && !has("shortconv.conv.weight");
    q &= !has("indexer.k_proj.weight") && !has("indexer.q_proj.weight");
    if arch == "glm5-next" {
        for s in [
            "hc_",
            "indexer.attn_q_b",
            "indexer.attn_k",
            "indexer.proj",
            "indexer_compressor_gate",
            "indexer_compressor_ape",
            "ssm_f_a.weight",
            "ssm_f_b.weight",
            "ssm_g_a.weight",
            "ssm_g_b.weight",
            "ssm_beta.weight",
            "attn_kv_a_mqa.weight",
            "attn_k_b.weight",
            "attn_v_b.weight",
        ] {
            q &= !has(s);
        }
    }
    for s in [
        "time_mix_first.weight",
        "time_mix_w0.weight",
        "time_mix_w1.weight",
        "time_mix_w2.weight",
        "time_mix_v0.weight",
        "time_mix_v1.weight",
        "time_mix_v2.weight",
        "time_mix_a0.weight",
        "time_mix_a1.weight",
        "time_mix_a2.weight",
        "time_mix_g1.weight",
        "time_mix_g2.weight",
        "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight",
        "time_mix_lerp_fused.weight",
        "attn_rel_b.weight",
        ".position_embd",
        "sam.pos_embd",
        "sam.neck.",
        "sam.net_",
        ".rel_pos",
        ".patch_embd",
        ".patch_merger",
        "a.rvq.codebook",
        "mm.a.code_embd",
    ] {
        q &= !has(s);
    }
    q
}

/// Whether the (very low-bit) target needs an importance matrix.
pub fn requires_imatrix(name: &str, ty: GgmlType, ftype: FileType) -> bool {
    use GgmlType::*;
    if is_token_embd(name) || name == "output.weight" {
        return false;
    }
    match ty {
        IQ3_XXS | IQ2_XXS | IQ2_XS | IQ2_S | IQ1_M | IQ1_S => true,
        Q2_K => ftype == FileType::MOSTLY_Q2_K_S,
        _ => false,
    }
}

/// The running state of one pass over a model's tensors.
pub struct Planner<'a> {
    pub params: &'a MixParams,
    pub model: &'a ModelInfo,
    pub n_attention_wv: i32,
    pub i_attention_wv: i32,
    pub n_layer: i32,
    pub i_ffn_down: i32,
    pub i_ffn_gate: i32,
    pub i_ffn_up: i32,
    pub has_tied_embeddings: bool,
    pub n_fallback: usize,
}

/// `ncols` not a multiple of `ty`'s block: the type llama.cpp falls back to, with its warning.
fn fallback(t: &TensorDesc, ty: GgmlType) -> Result<(GgmlType, Option<String>)> {
    use GgmlType::*;
    let ncols = t.ne[0];
    let qk = ty.block_len() as u64;
    if ncols.is_multiple_of(qk) {
        return Ok((ty, None));
    }
    let mut warn = format!(
        "warning: {:<36} - ncols {ncols:>6} not divisible by {qk:>3} (required for type {:>7}) ",
        t.name,
        ggml_name(ty)
    );
    let mut r = match ty {
        IQ1_S | IQ1_M | IQ2_XXS | IQ2_XS | IQ2_S | IQ3_XXS | IQ3_S | IQ4_XS => IQ4_NL,
        Q2_K | Q3_K | TQ1_0 | TQ2_0 => Q4_0,
        Q4_K => Q5_0,
        Q5_K => Q5_1,
        Q6_K => Q8_0,
        _ if qk <= 32 => ty,
        _ => {
            return Err(Error::InvalidArgument(format!(
                "no tensor type fallback is defined for type {ty}"
            )))
        }
    };
    if !ncols.is_multiple_of(r.block_len() as u64) {
        warn.push_str("(WARNING: must use F16 due to unusual shape) ");
        r = F16;
    }
    warn.push_str(&format!("-> falling back to {:>7}", ggml_name(r)));
    Ok((r, Some(warn)))
}

impl Planner<'_> {
    /// The tensor's layer from its `blk.N.` name (the layer counters of dense models are
    /// their running index instead).
    fn layer_info(&self, i: i32, name: &str) -> Result<(i32, i32)> {
        let n = self.n_layer;
        if self.model.n_expert.max(1) > 1 {
            let l = super::block_index(name).ok_or_else(|| {
                Error::InvalidArgument(format!("Failed to determine layer for tensor {name}"))
            })?;
            if l < 0 || l >= n {
                return Err(Error::InvalidArgument(format!(
                    "Bad layer {l} for tensor {name}. Must be in [0, {n})"
                )));
            }
            return Ok((l, n));
        }
        Ok((i, n))
    }

    /// `llama_tensor_get_type`: the type this tensor is written in, and a fallback warning.
    pub fn tensor_type(
        &mut self,
        t: &TensorDesc,
        default: GgmlType,
    ) -> Result<(GgmlType, Option<String>)> {
        let p = self.params;
        if !allows_quantization(p, &self.model.arch, t) {
            return Ok((t.ty, None));
        }
        let cat = category(&t.name);
        if let (Some(ty), Category::TokenEmbd) = (p.token_embedding_type, cat) {
            return Ok((ty, None));
        }
        if let (Some(ty), Category::Output) = (p.output_tensor_type, cat) {
            return Ok((ty, None));
        }
        let mut ty = default;
        if is_quantized(default) {
            if !p.pure {
                ty = self.type_impl(ty, t, cat)?;
            }
            let (r, warn) = fallback(t, ty)?;
            if warn.is_some() {
                self.n_fallback += 1;
            }
            return Ok((r, warn));
        }
        Ok((ty, None))
    }

    fn type_impl(&mut self, mut new: GgmlType, t: &TensorDesc, cat: Category) -> Result<GgmlType> {
        use Category as C;
        use FileType::*;
        use GgmlType as T;
        let ft = self.params.ftype;
        let m = self.model;
        let arch = m.arch.as_str();
        let falcon = arch == "falcon";
        let n_gqa = m.n_gqa();
        let use_more_bits = |i: i32, n: i32| i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
        let name = t.name.as_str();
        if arch == "glm5-next"
            && (name.contains("attn_q_a")
                || name.contains("attn_q_b")
                || name.contains("nextn.eh_proj"))
            && !matches!(new, T::F32 | T::BF16 | T::F16)
        {
            return Ok(T::Q8_0);
        }
        let iq_low = matches!(
            ft,
            MOSTLY_IQ2_XXS
                | MOSTLY_IQ2_XS
                | MOSTLY_IQ1_S
                | MOSTLY_IQ2_S
                | MOSTLY_IQ2_M
                | MOSTLY_IQ1_M
        );
        if cat == C::Output || (self.has_tied_embeddings && cat == C::TokenEmbd) {
            if let Some(ty) = self.params.output_tensor_type {
                new = ty;
            } else if ft == MOSTLY_MXFP4_MOE
                || falcon
                || !t.ne[0].is_multiple_of(new.block_len() as u64)
            {
                new = T::Q8_0;
            } else if iq_low || ft == MOSTLY_IQ3_XXS {
                new = T::Q5_K;
            } else if new != T::Q8_0 {
                new = T::Q6_K;
            }
        } else if ft == MOSTLY_MXFP4_MOE {
            let bailing_expert =
                arch == "bailingmoe3" && matches!(cat, C::FfnUp | C::FfnGate | C::FfnDown);
            new = if t.ne[2] > 1 && (arch != "bailingmoe3" || bailing_expert) {
                T::MXFP4
            } else {
                T::Q8_0
            };
        } else if cat == C::TokenEmbd {
            if let Some(ty) = self.params.token_embedding_type {
                new = ty;
            } else if matches!(
                ft,
                MOSTLY_IQ2_XXS | MOSTLY_IQ2_XS | MOSTLY_IQ1_S | MOSTLY_IQ1_M
            ) {
                new = T::Q2_K;
            } else if matches!(ft, MOSTLY_IQ2_S | MOSTLY_IQ2_M | MOSTLY_IQ3_XXS) {
                new = T::IQ3_S;
            } else if matches!(ft, MOSTLY_TQ1_0 | MOSTLY_TQ2_0 | MOSTLY_Q2_0) {
                new = T::Q4_K;
            }
        } else if iq_low {
            let s_or_m = matches!(ft, MOSTLY_IQ2_S | MOSTLY_IQ2_M);
            if is_attn_v(cat) {
                new = if n_gqa >= 4 || m.n_expert >= 4 {
                    T::Q4_K
                } else if s_or_m {
                    T::IQ3_S
                } else {
                    T::Q2_K
                };
                self.i_attention_wv += 1;
            } else if m.n_expert == 8 && cat == C::AttentionK {
                new = T::Q4_K;
            } else if cat == C::FfnDown {
                if self.i_ffn_down < self.n_layer / 8 {
                    new = if s_or_m { T::IQ3_S } else { T::Q2_K };
                }
                self.i_ffn_down += 1;
            } else if cat == C::AttentionOutput {
                if m.n_expert == 8 {
                    new = T::Q5_K;
                } else if matches!(ft, MOSTLY_IQ1_S | MOSTLY_IQ1_M) {
                    new = T::IQ2_XXS;
                } else if s_or_m {
                    new = T::IQ3_S;
                }
            }
        } else if is_attn_v(cat) {
            let i = self.i_attention_wv;
            if ft == MOSTLY_Q2_K {
                new = if n_gqa >= 4 { T::Q4_K } else { T::Q3_K };
            } else if ft == MOSTLY_Q2_K_S && n_gqa >= 4 {
                new = T::Q4_K;
            } else if ft == MOSTLY_IQ3_XXS {
                new = if n_gqa >= 4 {
                    T::Q4_K
                } else if !self.params.has_imatrix {
                    T::IQ3_S
                } else {
                    T::IQ3_XXS
                };
            } else if (matches!(ft, MOSTLY_IQ3_XS | MOSTLY_IQ3_S) && n_gqa >= 4)
                || ft == MOSTLY_IQ3_M
            {
                new = T::Q4_K;
            } else if ft == MOSTLY_Q3_K_M {
                new = if i < 2 { T::Q5_K } else { T::Q4_K };
            } else if ft == MOSTLY_Q3_K_L
                || (matches!(ft, MOSTLY_IQ4_NL | MOSTLY_IQ4_XS) && n_gqa >= 4)
            {
                new = T::Q5_K;
            } else if matches!(ft, MOSTLY_Q4_K_M | MOSTLY_Q5_K_M)
                && use_more_bits(i, self.n_attention_wv)
            {
                new = T::Q6_K;
            } else if ft == MOSTLY_Q4_K_S && i < 4 {
                new = T::Q5_K;
            }
            if m.is_70b && matches!(new, T::Q3_K | T::Q4_K) {
                new = T::Q5_K;
            }
            if m.n_expert == 8 {
                new = T::Q8_0;
            }
            self.i_attention_wv += 1;
        } else if cat == C::AttentionK {
            if m.n_expert == 8 {
                new = T::Q8_0;
            } else if ft == MOSTLY_IQ3_XS {
                new = T::IQ3_XXS;
            } else if ft == MOSTLY_IQ3_XXS {
                new = T::IQ2_S;
            }
        } else if cat == C::AttentionQ {
            if ft == MOSTLY_IQ3_XS {
                new = T::IQ3_XXS;
            } else if ft == MOSTLY_IQ3_XXS {
                new = T::IQ2_S;
            }
        } else if cat == C::FfnDown {
            let (i, n) = self.layer_info(self.i_ffn_down, name)?;
            let has_im = self.params.has_imatrix;
            if ft == MOSTLY_Q2_K {
                new = T::Q3_K;
            } else if ft == MOSTLY_Q2_K_S {
                if i < n / 8 {
                    new = T::Q4_K;
                }
            } else if ft == MOSTLY_IQ3_XXS && !has_im {
                new = if i < n / 8 { T::Q4_K } else { T::Q3_K };
            } else if ft == MOSTLY_Q3_K_M {
                new = if i < n / 16 {
                    T::Q5_K
                } else if !falcon || use_more_bits(i, n) {
                    T::Q4_K
                } else {
                    T::Q3_K
                };
            } else if ft == MOSTLY_IQ3_M && (i < n / 8 || (m.n_expert == 8 && use_more_bits(i, n)))
            {
                new = T::Q4_K;
            } else if ft == MOSTLY_Q3_K_L {
                new = if falcon { T::Q4_K } else { T::Q5_K };
            } else if ft == MOSTLY_Q4_K_M {
                if falcon {
                    new = if i < n / 16 {
                        T::Q6_K
                    } else if use_more_bits(i, n) {
                        T::Q5_K
                    } else {
                        T::Q4_K
                    };
                } else if use_more_bits(i, n) {
                    new = T::Q6_K;
                }
            } else if i < n / 8 && matches!(ft, MOSTLY_IQ4_NL | MOSTLY_IQ4_XS) && !has_im {
                new = T::Q5_K;
            } else if ft == MOSTLY_Q5_K_M && use_more_bits(i, n) {
                new = T::Q6_K;
            } else if ft == MOSTLY_Q4_K_S && !falcon && i < n / 8 {
                new = T::Q5_K;
            } else if matches!(ft, MOSTLY_Q4_0 | MOSTLY_Q5_0) && has_im && i < n / 8 {
                new = if ft == MOSTLY_Q4_0 { T::Q4_1 } else { T::Q5_1 };
            }
            self.i_ffn_down += 1;
        } else if cat == C::AttentionOutput {
            if !falcon {
                if m.n_expert == 8 {
                    if matches!(
                        ft,
                        MOSTLY_Q2_K
                            | MOSTLY_IQ3_XS
                            | MOSTLY_IQ3_XXS
                            | MOSTLY_Q3_K_S
                            | MOSTLY_Q3_K_M
                            | MOSTLY_IQ4_NL
                            | MOSTLY_Q4_K_S
                            | MOSTLY_Q4_K_M
                            | MOSTLY_IQ3_S
                            | MOSTLY_IQ3_M
                            | MOSTLY_IQ4_XS
                    ) {
                        new = T::Q5_K;
                    }
                } else {
                    match ft {
                        MOSTLY_Q2_K => new = T::Q3_K,
                        MOSTLY_IQ3_XXS => new = T::IQ3_S,
                        MOSTLY_Q3_K_M => new = T::Q4_K,
                        MOSTLY_Q3_K_L => new = T::Q5_K,
                        MOSTLY_IQ3_M => new = T::Q4_K,
                        _ => {}
                    }
                }
            } else if ft == MOSTLY_Q3_K_L {
                new = T::Q4_K;
            }
        } else if cat == C::AttentionQkv {
            match ft {
                MOSTLY_Q3_K_M | MOSTLY_Q3_K_L | MOSTLY_IQ3_M => new = T::Q4_K,
                MOSTLY_Q4_K_M => new = T::Q5_K,
                MOSTLY_Q5_K_M => new = T::Q6_K,
                _ => {}
            }
        } else if cat == C::FfnGate || cat == C::FfnUp {
            let counter = if cat == C::FfnGate {
                self.i_ffn_gate
            } else {
                self.i_ffn_up
            };
            let (i, n) = self.layer_info(counter, name)?;
            if ft == MOSTLY_IQ3_XS && i >= n / 8 && i < 7 * n / 8 {
                new = T::IQ3_XXS;
            }
            if cat == C::FfnGate {
                self.i_ffn_gate += 1;
            } else {
                self.i_ffn_up += 1;
            }
        }
        Ok(new)
    }
}

/// ggml_is_quantized: every block type, i.e. not F32 / F16 / BF16 / the integer types.
pub fn is_quantized(ty: GgmlType) -> bool {
    use GgmlType::*;
    !matches!(ty, F32 | F16 | BF16 | I8 | I16 | I32 | I64 | F64)
}

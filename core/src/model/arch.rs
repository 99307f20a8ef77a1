//! Architectures the llama-family forward pass runs, and what each one switches on.

use crate::error::{Error, Result};
use crate::ops::rope::RopeStyle;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Mistral,
    Qwen2,
    Qwen3,
    Gemma3,
    /// Qwen1.5/2-MoE: softmax router, top-k unnormalised, a shared expert behind a sigmoid gate.
    Qwen2Moe,
    /// Qwen3-MoE: softmax router, top-k renormalised, QK-norm.
    Qwen3Moe,
    /// OpenAI's gpt-oss: router with bias, softmax over the chosen experts' logits, expert
    /// biases, clamped SwiGLU, attention sinks, sliding window on alternate layers.
    GptOss,
    /// Phi-3 / 3.5 / 4-mini: fused QKV (`attn_qkv`), gate and up fused in one `ffn_up` of
    /// twice the width (gate first), LongRoPE's factor tables (`rope_factors_long/short`);
    /// its sliding window is ignored (as llama.cpp does).
    Phi3,
    /// Gemma 2: Gemma 3 without QK-norm, with attention and final logit soft-capping, the
    /// sliding window on alternate layers and the output tied to the embeddings.
    Gemma2,
    /// IBM Granite (3.x dense): embedding, residual, attention and logit scales.
    Granite,
    /// OLMo 2 (and OLMo 3's sliding window): no pre-norms, post-attention / post-FFN norms,
    /// QK-norm over the whole q / k projection.
    Olmo2,
    /// EXAONE 3 / 3.5: the llama graph with NeoX RoPE.
    Exaone,
    /// InternLM2: the llama graph (its converter splits the fused wqkv).
    InternLm2,
    /// XVERSE: the llama graph.
    Xverse,
    /// BERT encoders (sentence embeddings): absolute position and token-type embeddings with
    /// a LayerNorm, bidirectional attention without RoPE, biases on every projection,
    /// LayerNorms after each residual add (post-norm), an ungated GELU (erf) feed-forward;
    /// the output is each token's hidden state, pooled by the caller.
    Bert,
}

/// The architectures `from_name` knows, for error messages.
pub const SUPPORTED: &str = "llama (incl. Mixtral-style experts), mistral, qwen2, qwen2moe, qwen3, qwen3moe, gemma2, gemma3, gpt-oss, phi3, granite, olmo2, exaone, internlm2, xverse, bert";

/// Feed-forward gate activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// SwiGLU: silu(gate) * up
    Silu,
    /// GeGLU: gelu_tanh(gate) * up
    Gelu,
    /// gpt-oss's clamped SwiGLU (`ggml_swiglu_oai`, alpha 1.702, limit 7)
    SwigluOai,
    /// Ungated GELU in its erf form (BERT: Hugging Face's `"gelu"`): `down(gelu(up h))`.
    GeluErf,
}

impl Arch {
    pub fn from_name(name: &str) -> Result<Arch> {
        Ok(match name {
            "llama" => Arch::Llama,
            "mistral" => Arch::Mistral,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            "gemma3" => Arch::Gemma3,
            "qwen2moe" => Arch::Qwen2Moe,
            "qwen3moe" => Arch::Qwen3Moe,
            "gpt-oss" => Arch::GptOss,
            "phi3" => Arch::Phi3,
            "gemma2" => Arch::Gemma2,
            "granite" => Arch::Granite,
            "olmo2" => Arch::Olmo2,
            "exaone" => Arch::Exaone,
            "internlm2" => Arch::InternLm2,
            "xverse" => Arch::Xverse,
            "bert" => Arch::Bert,
            other => return Err(Error::UnknownArchitecture(other.into())),
        })
    }

    /// The name used as the GGUF metadata key prefix.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Mistral => "mistral",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Gemma3 => "gemma3",
            Arch::Qwen2Moe => "qwen2moe",
            Arch::Qwen3Moe => "qwen3moe",
            Arch::GptOss => "gpt-oss",
            Arch::Phi3 => "phi3",
            Arch::Gemma2 => "gemma2",
            Arch::Granite => "granite",
            Arch::Olmo2 => "olmo2",
            Arch::Exaone => "exaone",
            Arch::InternLm2 => "internlm2",
            Arch::Xverse => "xverse",
            Arch::Bert => "bert",
        }
    }

    pub fn rope_style(self) -> RopeStyle {
        match self {
            Arch::Llama
            | Arch::Mistral
            | Arch::Granite
            | Arch::InternLm2
            | Arch::Xverse
            | Arch::Bert => RopeStyle::Normal,
            Arch::Qwen2
            | Arch::Qwen3
            | Arch::Gemma3
            | Arch::Qwen2Moe
            | Arch::Qwen3Moe
            | Arch::GptOss
            | Arch::Phi3
            | Arch::Gemma2
            | Arch::Olmo2
            | Arch::Exaone => RopeStyle::Neox,
        }
    }

    pub fn activation(self) -> Activation {
        match self {
            Arch::Gemma2 | Arch::Gemma3 => Activation::Gelu,
            Arch::GptOss => Activation::SwigluOai,
            Arch::Bert => Activation::GeluErf,
            _ => Activation::Silu,
        }
    }

    /// Gemma multiplies the token embeddings by sqrt(n_embd).
    pub fn scales_embeddings(self) -> bool {
        matches!(self, Arch::Gemma2 | Arch::Gemma3)
    }

    /// Sliding-window layer pattern when the file gives none: `Some(n)` means every n-th
    /// layer is global and the others use the window (Gemma 3: 5 local, 1 global).
    pub fn default_swa_period(self) -> Option<usize> {
        match self {
            Arch::Gemma3 => Some(6),
            // llama.cpp: `load_swa_pattern(ml, 2)`, even layers windowed
            Arch::GptOss | Arch::Gemma2 => Some(2),
            // OLMo 3 (an olmo2 file with a window): 3 local, 1 global
            Arch::Olmo2 => Some(4),
            _ => None,
        }
    }

    /// Window of the sliding-window layers when the file gives none (0: no window).
    pub fn default_sliding_window(self) -> usize {
        match self {
            Arch::Gemma2 => 4096,
            _ => 0,
        }
    }

    /// RoPE base of the sliding-window layers when the file gives none.
    pub fn default_rope_base_swa(self) -> Option<f32> {
        match self {
            Arch::Gemma3 => Some(10_000.0),
            _ => None,
        }
    }
}

impl Arch {
    /// Whether the architecture's feed-forward blocks are mixtures of experts: always for the
    /// MoE architectures; for llama when the file gives an expert count (Mixtral).
    pub fn always_moe(self) -> bool {
        matches!(self, Arch::Qwen2Moe | Arch::Qwen3Moe | Arch::GptOss)
    }

    /// Whether attention and FFN have input norms (`attn_norm`, `ffn_norm`; OLMo 2 has
    /// only the norms after them).
    pub fn has_pre_norms(self) -> bool {
        !matches!(self, Arch::Olmo2 | Arch::Bert)
    }

    /// Whether the model is an encoder (BERT): bidirectional attention, absolute positions,
    /// post-norm LayerNorms, hidden states out instead of logits.
    pub fn is_encoder(self) -> bool {
        matches!(self, Arch::Bert)
    }

    /// Whether QK-norm normalises the whole q / k projection of a token (OLMo 2) rather
    /// than each head.
    pub fn whole_qk_norm(self) -> bool {
        matches!(self, Arch::Olmo2)
    }

    /// Whether gate and up are one `ffn_up` tensor of twice the width, gate first (Phi-3).
    pub fn fused_gate_up(self) -> bool {
        matches!(self, Arch::Phi3)
    }

    /// Whether the output matrix is always the embedding table (Gemma 2: llama.cpp reads no
    /// `output.weight`).
    pub fn always_tied(self) -> bool {
        matches!(self, Arch::Gemma2)
    }

    /// The pre-FFN norm's tensor name (gpt-oss calls it `post_attention_norm`).
    pub fn ffn_norm_tensor(self) -> &'static str {
        match self {
            Arch::GptOss => "post_attention_norm.weight",
            _ => "ffn_norm.weight",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every architecture is found by its name, and the refusal's list names it.
    #[test]
    fn names_round_trip_and_are_listed() {
        use Arch::*;
        let all = [
            Llama, Mistral, Qwen2, Qwen3, Gemma3, Qwen2Moe, Qwen3Moe, GptOss, Phi3, Gemma2,
            Granite, Olmo2, Exaone, InternLm2, Xverse, Bert,
        ];
        let listed: alloc::vec::Vec<&str> = SUPPORTED
            .split(", ")
            .map(|a| a.split(' ').next().unwrap_or(a))
            .collect();
        assert_eq!(listed.len(), all.len(), "{SUPPORTED}");
        for a in all {
            assert_eq!(Arch::from_name(a.name()).unwrap(), a);
            assert!(
                listed.contains(&a.name()),
                "{} is not in {SUPPORTED}",
                a.name()
            );
        }
        let e = Arch::from_name("starcoder2").unwrap_err();
        let msg = alloc::format!("{e}");
        assert!(
            msg.contains("starcoder2") && msg.contains(SUPPORTED),
            "{msg}"
        );
    }
}

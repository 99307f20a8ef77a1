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
}

/// The architectures `from_name` knows, for error messages.
pub const SUPPORTED: &str = "llama (incl. Mixtral-style experts), mistral, qwen2, qwen2moe, qwen3, qwen3moe, gemma3, gpt-oss";

/// Feed-forward gate activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// SwiGLU: silu(gate) * up
    Silu,
    /// GeGLU: gelu_tanh(gate) * up
    Gelu,
    /// gpt-oss's clamped SwiGLU (`ggml_swiglu_oai`, alpha 1.702, limit 7)
    SwigluOai,
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
        }
    }

    pub fn rope_style(self) -> RopeStyle {
        match self {
            Arch::Llama | Arch::Mistral => RopeStyle::Normal,
            Arch::Qwen2
            | Arch::Qwen3
            | Arch::Gemma3
            | Arch::Qwen2Moe
            | Arch::Qwen3Moe
            | Arch::GptOss => RopeStyle::Neox,
        }
    }

    pub fn activation(self) -> Activation {
        match self {
            Arch::Gemma3 => Activation::Gelu,
            Arch::GptOss => Activation::SwigluOai,
            _ => Activation::Silu,
        }
    }

    /// Gemma multiplies the token embeddings by sqrt(n_embd).
    pub fn scales_embeddings(self) -> bool {
        matches!(self, Arch::Gemma3)
    }

    /// Sliding-window layer pattern when the file gives none: `Some(n)` means every n-th
    /// layer is global and the others use the window (Gemma 3: 5 local, 1 global).
    pub fn default_swa_period(self) -> Option<usize> {
        match self {
            Arch::Gemma3 => Some(6),
            // llama.cpp: `load_swa_pattern(ml, 2)`, even layers windowed
            Arch::GptOss => Some(2),
            _ => None,
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

    /// The pre-FFN norm's tensor name (gpt-oss calls it `post_attention_norm`).
    pub fn ffn_norm_tensor(self) -> &'static str {
        match self {
            Arch::GptOss => "post_attention_norm.weight",
            _ => "ffn_norm.weight",
        }
    }
}

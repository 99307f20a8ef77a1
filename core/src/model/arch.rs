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
}

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
        }
    }

    pub fn rope_style(self) -> RopeStyle {
        match self {
            Arch::Llama | Arch::Mistral => RopeStyle::Normal,
            Arch::Qwen2 | Arch::Qwen3 | Arch::Gemma3 => RopeStyle::Neox,
        }
    }

    pub fn activation(self) -> Activation {
        match self {
            Arch::Gemma3 => Activation::Gelu,
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

//! What is wrong with an adapter file, each naming the key or tensor.

use alloc::string::String;
use core::fmt;

use crate::quant::GgmlType;

/// Why an adapter was refused ([`crate::Error::Lora`]).
#[derive(Debug, Clone, PartialEq)]
pub enum LoraError {
    /// `general.type` is not `adapter`.
    NotAnAdapter { general_type: String },
    /// `adapter.type` is not `lora`.
    NotLora { adapter_type: String },
    /// The adapter was made for another architecture than the model's.
    Architecture { adapter: String, model: String },
    /// A tensor whose suffix is neither `.lora_a` nor `.lora_b` (nor a norm, skipped).
    UnexpectedTensor { tensor: String },
    /// The base tensor an A/B pair names does not exist in the model.
    NoBaseTensor { tensor: String },
    /// The base tensor exists but adapters on it are not supported yet.
    Unsupported { tensor: String, why: &'static str },
    /// Only one of the pair is in the file.
    MissingHalf {
        tensor: String,
        missing: &'static str,
    },
    /// A or B does not fit the base tensor (`[n_in, r]` and `[r, n_out]` in ggml order).
    Shape {
        tensor: String,
        expected: String,
        found: String,
    },
    /// A rank of 0.
    ZeroRank { tensor: String },
    /// A's rank (`ne[1]`) differs from B's (`ne[0]`).
    RankMismatch { tensor: String, a: usize, b: usize },
    /// A tensor type the adapter loader cannot read.
    Type { tensor: String, ty: GgmlType },
    /// The file holds no A/B pair.
    Empty,
}

impl LoraError {
    /// A stable code for the kind of problem (logs, the server's error objects).
    pub fn code(&self) -> &'static str {
        use LoraError::*;
        match self {
            NotAnAdapter { .. } => "lora_not_adapter",
            NotLora { .. } => "lora_not_lora",
            Architecture { .. } => "lora_architecture",
            UnexpectedTensor { .. } => "lora_unexpected_tensor",
            NoBaseTensor { .. } => "lora_no_base_tensor",
            Unsupported { .. } => "lora_unsupported",
            MissingHalf { .. } => "lora_missing_half",
            Shape { .. } => "lora_shape",
            ZeroRank { .. } => "lora_zero_rank",
            RankMismatch { .. } => "lora_rank_mismatch",
            Type { .. } => "lora_type",
            Empty => "lora_empty",
        }
    }
}

impl fmt::Display for LoraError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use LoraError::*;
        write!(f, "LoRA adapter [{}]: ", self.code())?;
        match self {
            NotAnAdapter { general_type } => write!(
                f,
                "general.type is '{general_type}', expected 'adapter' (is this a model, not an adapter?)"
            ),
            NotLora { adapter_type } => {
                write!(f, "adapter.type is '{adapter_type}', expected 'lora'")
            }
            Architecture { adapter, model } => write!(
                f,
                "made for architecture '{adapter}', the model is '{model}' (wrong base model?)"
            ),
            UnexpectedTensor { tensor } => write!(
                f,
                "tensor '{tensor}' has an unexpected suffix (expected .lora_a or .lora_b)"
            ),
            NoBaseTensor { tensor } => write!(
                f,
                "tensor '{tensor}' does not exist in the base model (wrong base model?)"
            ),
            Unsupported { tensor, why } => {
                write!(f, "tensor '{tensor}': adapters on it are not supported yet ({why})")
            }
            MissingHalf { tensor, missing } => {
                write!(f, "tensor '{tensor}' has no {missing} (the pair is incomplete)")
            }
            Shape { tensor, expected, found } => write!(
                f,
                "tensor '{tensor}' has shape {found}, expected {expected} (wrong base model?)"
            ),
            ZeroRank { tensor } => write!(f, "tensor '{tensor}' has rank 0"),
            RankMismatch { tensor, a, b } => write!(
                f,
                "tensor '{tensor}': lora_a has rank {a}, lora_b rank {b} (they must be equal)"
            ),
            Type { tensor, ty } => write!(f, "tensor '{tensor}' has type {ty}, which cannot be read"),
            Empty => write!(f, "the file holds no .lora_a/.lora_b pair"),
        }
    }
}

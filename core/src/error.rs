//! The one error type of the core. Frontends add context (file names, flags) around it.

use alloc::string::String;
use core::fmt;

pub type Result<T, E = Error> = core::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The input ended before `what` could be read (at byte `offset`).
    Truncated {
        what: &'static str,
        offset: u64,
    },
    /// Not a GGUF file.
    BadMagic {
        found: u32,
    },
    UnsupportedVersion(u32),
    /// A metadata value type id that GGUF does not define.
    InvalidValueType {
        offset: u64,
        ty: u32,
    },
    /// A tensor type id we do not know (or do not support).
    UnknownTensorType {
        tensor: String,
        ty: u32,
    },
    /// A count or size that cannot be right for a file of this size (or overflows).
    Absurd {
        what: &'static str,
        value: u64,
    },
    /// A string that is not UTF-8 where UTF-8 is required.
    InvalidUtf8 {
        what: &'static str,
        offset: u64,
    },
    /// A tensor whose data does not lie inside the file, or is misaligned.
    TensorOutOfBounds {
        tensor: String,
        offset: u64,
        size: u64,
        file_size: u64,
    },
    InvalidAlignment(u64),
    DuplicateKey(String),
    DuplicateTensor(String),
    /// The shards of a model split with llama.cpp's `gguf-split` are incomplete, out of
    /// order or inconsistent (the message says which and what to do).
    Split(String),
    MissingKey(String),
    WrongType {
        key: String,
        expected: &'static str,
    },
    UnknownArchitecture(String),
    MissingTensor(String),
    ShapeMismatch {
        tensor: String,
        expected: String,
        found: String,
    },
    UnsupportedModel(String),
    Tokenizer(String),
    /// More tokens than the context holds.
    ContextOverflow {
        needed: usize,
        capacity: usize,
    },
    /// The paged KV cache has too few blocks left for a sequence's next positions.
    KvPoolFull {
        /// Blocks of [`BLOCK`](crate::ops::attention::BLOCK) positions needed.
        needed: usize,
        available: usize,
    },
    InvalidArgument(String),
    /// A LoRA adapter that cannot be used with this model (the problem names the tensor).
    Lora(alloc::boxed::Box<crate::model::lora::LoraError>),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Error::*;
        match self {
            Truncated { what, offset } => {
                write!(f, "truncated GGUF: ran out of data reading {what} at byte {offset}")
            }
            BadMagic { found } => write!(
                f,
                "not a GGUF file (magic {:?}, expected \"GGUF\")",
                core::str::from_utf8(&found.to_le_bytes()).unwrap_or("<binary>")
            ),
            UnsupportedVersion(v) => write!(f, "unsupported GGUF version {v} (supported: 2, 3)"),
            InvalidValueType { offset, ty } => {
                write!(f, "corrupt GGUF: invalid metadata value type {ty} at byte {offset}")
            }
            UnknownTensorType { tensor, ty } => {
                write!(f, "tensor '{tensor}' has unknown or unsupported type id {ty}")
            }
            Absurd { what, value } => {
                write!(f, "corrupt GGUF: {what} = {value} is impossible for this file")
            }
            InvalidUtf8 { what, offset } => {
                write!(f, "corrupt GGUF: {what} at byte {offset} is not valid UTF-8")
            }
            TensorOutOfBounds { tensor, offset, size, file_size } => write!(
                f,
                "corrupt GGUF: tensor '{tensor}' data [{offset}, {offset}+{size}) lies outside the file ({file_size} bytes) or is misaligned"
            ),
            InvalidAlignment(a) => write!(f, "corrupt GGUF: general.alignment = {a} is not a power of two"),
            DuplicateKey(k) => write!(f, "corrupt GGUF: metadata key '{k}' appears twice"),
            DuplicateTensor(t) => write!(f, "corrupt GGUF: tensor '{t}' appears twice"),
            Split(m) => write!(f, "split model (gguf-split): {m}"),
            MissingKey(k) => write!(f, "model metadata is missing required key '{k}'"),
            WrongType { key, expected } => {
                write!(f, "model metadata key '{key}' has the wrong type (expected {expected})")
            }
            UnknownArchitecture(a) => write!(
                f,
                "unknown model architecture '{a}' (supported: {})",
                crate::model::SUPPORTED_ARCHS
            ),
            MissingTensor(t) => write!(f, "model is missing tensor '{t}'"),
            ShapeMismatch { tensor, expected, found } => {
                write!(f, "tensor '{tensor}' has shape {found}, expected {expected}")
            }
            UnsupportedModel(m) => write!(f, "unsupported model: {m}"),
            Tokenizer(m) => write!(f, "tokenizer: {m}"),
            ContextOverflow { needed, capacity } => write!(
                f,
                "{needed} tokens do not fit in the context of {capacity} tokens (raise -c or shorten the prompt)"
            ),
            KvPoolFull { needed, available } => write!(
                f,
                "the KV cache is full: {needed} more blocks of {} positions needed, {available} \
                 available (raise --kv-size or -c, or lower -np)",
                crate::ops::attention::BLOCK
            ),
            InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Lora(e) => write!(f, "{e}"),
        }
    }
}

impl core::error::Error for Error {}

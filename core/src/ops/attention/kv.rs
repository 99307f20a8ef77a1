//! KV cache element types (llama.cpp's `--cache-type-k/-v`) and where a head's rows sit in
//! a layer's cache.

use core::fmt;
use core::str::FromStr;

use half::f16;

use crate::error::{Error, Result};
use crate::quant::legacy::{BlockQ8_0, QK};

/// Positions per block of a paged cache (`model::KvPool`): one block of the flash kernel's
/// keys, so a key block never straddles two cache blocks.
pub const BLOCK: usize = 16;

/// How the cache stores keys or values (llama.cpp's `--cache-type-k` / `--cache-type-v`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvType {
    F32,
    /// llama.cpp's default.
    #[default]
    F16,
    /// 32-value blocks with one f16 scale (8.5 bits per value): half the F16 cache's size.
    Q8_0,
}

impl KvType {
    pub const ALL: [KvType; 3] = [KvType::F32, KvType::F16, KvType::Q8_0];

    /// llama.cpp's name (`f32`, `f16`, `q8_0`).
    pub fn name(self) -> &'static str {
        match self {
            KvType::F32 => "f32",
            KvType::F16 => "f16",
            KvType::Q8_0 => "q8_0",
        }
    }

    /// Values per block: a head's row must be a whole number of them.
    pub fn block(self) -> usize {
        match self {
            KvType::Q8_0 => QK,
            _ => 1,
        }
    }

    /// Bytes of `n` values (`n` a multiple of [`block`](Self::block)).
    pub fn bytes(self, n: usize) -> usize {
        match self {
            KvType::F32 => 4 * n,
            KvType::F16 => 2 * n,
            KvType::Q8_0 => n / QK * core::mem::size_of::<BlockQ8_0>(),
        }
    }
}

impl fmt::Display for KvType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for KvType {
    type Err = Error;

    fn from_str(s: &str) -> Result<KvType> {
        KvType::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                Error::InvalidArgument(alloc::format!(
                    "unknown KV cache type '{s}' (expected f32, f16 or q8_0)"
                ))
            })
    }
}

/// One layer's cached keys or values: `rows` of `row` values (all KV heads of a position).
#[derive(Clone, Copy)]
pub enum KvView<'a> {
    F32(&'a [f32]),
    F16(&'a [f16]),
    Q8_0(&'a [BlockQ8_0]),
}

impl KvView<'_> {
    pub fn kv_type(&self) -> KvType {
        match self {
            KvView::F32(_) => KvType::F32,
            KvView::F16(_) => KvType::F16,
            KvView::Q8_0(_) => KvType::Q8_0,
        }
    }
}

/// Where one head's slice of cached rows sits: value offset `t·row + at` of position `t`,
/// `dim` long.
#[derive(Clone, Copy)]
pub struct HeadRows {
    pub row: usize,
    pub at: usize,
    pub dim: usize,
}

impl HeadRows {
    pub(crate) fn start(&self, t: usize) -> usize {
        t * self.row + self.at
    }
}

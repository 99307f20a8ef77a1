//! IQ4_XS (ggml type 23): super-blocks of 256 values, an f16 scale `d`, a 6-bit scale `ls`
//! per block of 32 (low 4 bits in `scales_l`, two per byte; high 2 bits in `scales_h`, eight
//! per u16) and 128 bytes of codes into [`super::KVALUES`], a block's 32 codes laid out as IQ4_NL's;
//! a value is `d · (ls - 32) · KVALUES[code]`.
//!
//! Dot products pair a row with Q8_K activations (ggml's `vec_dot_type`). As for the
//! k-quants (`kquants::dot_q8_k`), a super-block reduces to one exact integer,
//! `Σ (ls - 32) · Σ KVALUES[code] · q8`, rounded once (`sum += d · d8 · isum`): every ISA's
//! kernel gives the same bits. (ggml's generic kernel rounds once per block of 32, its AVX2
//! kernel once per super-block in eight lanes; the integers are the same.)

use bytemuck::{Pod, Zeroable};

use super::{isum32, quantize_impl, unpack32};
use crate::quant::kquants::{q8_k, QK_K};
use crate::quant::legacy::{blocks, blocks_mut, h, to_h};

/// One IQ4_XS super-block (ggml's `block_iq4_xs`).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockIq4Xs {
    pub d: [u8; 2],
    /// The high 2 bits of block `i`'s scale at bits `2i..2i+2` (little-endian u16).
    pub scales_h: [u8; 2],
    /// The low 4 bits of block `i`'s scale in byte `i / 2`, low nibble for even `i`.
    pub scales_l: [u8; QK_K / 64],
    pub qs: [u8; QK_K / 2],
}

const _: () = assert!(core::mem::size_of::<BlockIq4Xs>() == 136);

impl BlockIq4Xs {
    /// The eight block scales `ls - 32`, in -32..=31.
    #[inline]
    pub fn scales(&self) -> [i32; 8] {
        let sh = u16::from_le_bytes(self.scales_h);
        core::array::from_fn(|ib| {
            let lo = (self.scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0F;
            let hi = ((sh >> (2 * ib)) & 3) as u8;
            (lo | (hi << 4)) as i32 - 32
        })
    }

    /// Block `ib`'s 16 code bytes.
    #[inline]
    pub fn block_qs(&self, ib: usize) -> &[u8; 16] {
        self.qs[16 * ib..16 * ib + 16].try_into().unwrap()
    }
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in blocks::<BlockIq4Xs>(src)
        .iter()
        .zip(dst.chunks_exact_mut(QK_K))
    {
        let d = h(b.d);
        for ((ib, ls), y) in b
            .scales()
            .into_iter()
            .enumerate()
            .zip(y.chunks_exact_mut(32))
        {
            // `dl = d * (ls - 32)`, then `dl * value`, as ggml's `dequantize_row_iq4_xs`
            let dl = d * ls as f32;
            for (y, q) in y.iter_mut().zip(unpack32(b.block_qs(ib))) {
                *y = dl * q as f32;
            }
        }
    }
}

/// ggml's `quantize_iq4_xs` without an importance matrix (what `llama-quantize` writes).
pub fn quantize(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(QK_K).zip(blocks_mut::<BlockIq4Xs>(dst)) {
        let q = quantize_impl(x);
        b.d = to_h(q.d);
        let mut sh = 0u16;
        b.scales_l = [0; 4];
        for (ib, &l) in q.scales.iter().enumerate() {
            b.scales_l[ib / 2] |= (l & 0x0F) << (4 * (ib % 2));
            sh |= ((l >> 4) as u16) << (2 * ib);
        }
        b.scales_h = sh.to_le_bytes();
        b.qs = q.qs;
    }
}

/// A super-block's exact integer dot product `Σ (ls - 32) · Σ KVALUES[code] · q8`.
#[inline]
pub fn isum(x: &BlockIq4Xs, q8: &[i8; QK_K]) -> i32 {
    x.scales()
        .iter()
        .enumerate()
        .map(|(ib, &ls)| ls * isum32(x.block_qs(ib), &q8[32 * ib..32 * ib + 32]))
        .sum()
}

/// IQ4_XS · Q8_K: per super-block the exact integer sum, then `sum += d · d8 · isum` (the
/// k-quants' rounding, see the module's documentation).
pub fn vec_dot_iq4_xs_q8_k(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockIq4Xs>(w).iter().zip(q8_k::blocks(a)) {
        sum += h(x.d) * y.d() * isum(x, &y.qs) as f32;
    }
    sum
}

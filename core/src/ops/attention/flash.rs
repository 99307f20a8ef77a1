//! Flash attention for prompt batches: a tile of query rows (every query head sharing one KV
//! head, for a run of consecutive tokens) walks the cache [`KEYS`] positions at a time with
//! an online softmax, so there is no score matrix beyond `rows × KEYS`, each key and value
//! row is converted to f32 once per tile instead of once per query head and token, and the
//! dot products run as a small register-tiled matrix product (four query rows × sixteen
//! keys per step) instead of one query at a time.
//!
//! Every cache type works: F16 and F32 rows are converted, Q8_0 rows dequantized (a quantized
//! cache's Hadamard rotation is already in q, k and v). Per key block and query row:
//! `s = scale · q·k` (softcapped where the model asks), masked to the row's window;
//! `m' = max(m, max s)`, `p = e^(s - m')`, `l = l·e^(m - m') + Σp`, `o = o·e^(m - m') + Σ p·v`;
//! at the end `o / l`.
//!
//! The body is plain Rust with no reassociation (fixed order), compiled once per ISA with
//! that ISA's target features (see `kernels::x86`) and generic over how eight lanes
//! multiply-add ([`Mad8`]): the AVX2 instance fuses them as ggml's flash-attention GEMM does
//! (`vfmadd`, scores summed over the head dimension and values over the keys in the same
//! order as llama.cpp's tiled kernel), the portable one multiplies and adds. Qwen2.5's large
//! keys make its perplexity sensitive even to that rounding (fused: 0.18% from
//! llama-perplexity on the fixture text; unfused: 0.38%). Apart from it and the exponential
//! (the table's `exp_sub`, within a few ulp of `libm::expf`) every instance computes the same.

use alloc::vec;
use alloc::vec::Vec;
use core::array::from_fn;
use core::ops::Range;

use super::kv::{HeadRows, KvView};
use super::AttnShape;
use crate::kernels::F16Ops;
use crate::quant::legacy::{dequantize_q8_0, QK};

/// Key positions per block.
pub const KEYS: usize = 16;

/// Query rows the scores micro-kernel runs together (four rows × [`KEYS`] keys of sums).
const ROWS: usize = 4;

/// Query rows a tile aims for: with 64-wide heads, 32 rows of q, output and scores plus one
/// key and one value block (8 KiB together) stay in L1.
const TILE_ROWS: usize = 32;

/// Tokens per tile for `group` query heads per KV head.
pub fn tile_tokens(group: usize) -> usize {
    (TILE_ROWS / group.max(1)).max(1)
}

/// One tile of a prompt's attention: the query heads of KV head `k_head` / `v_head` for
/// [`Self::n_rows`] (token, head) rows, whose queries and windows sit in the scratch.
pub struct Tile<'a> {
    pub keys: KvView<'a>,
    pub k_head: HeadRows,
    pub values: KvView<'a>,
    pub v_head: HeadRows,
    pub scale: f32,
    pub softcap: Option<f32>,
    pub n_rows: usize,
}

/// A flash kernel for one ISA: reads [`FlashScratch::query`] rows and windows, writes
/// [`FlashScratch::output`] rows.
pub type FlashFn = fn(ops: &F16Ops, tile: &Tile<'_>, s: &mut FlashScratch);

/// Per-worker buffers of the flash kernel, sized once per session.
pub struct FlashScratch {
    dk: usize,
    dv: usize,
    /// `dv` rounded up to whole slabs: the stride of `out`.
    dv_pad: usize,
    q: Vec<f32>,
    windows: Vec<Range<usize>>,
    out: Vec<f32>,
    /// One key block, transposed: `kt[d·KEYS + j]` is element `d` of key `j`.
    kt: Vec<f32>,
    /// One value block in slabs of eight lanes: `vb[(c·KEYS + j)·8 + l]` is element
    /// `8c + l` of value `j` (zero past `dv`).
    vb: Vec<f32>,
    scores: Vec<f32>,
    max: Vec<f32>,
    sum: Vec<f32>,
    row: Vec<f32>,
}

impl FlashScratch {
    pub fn new(shape: AttnShape) -> FlashScratch {
        let (dk, dv) = (shape.head_dim_k, shape.head_dim_v);
        let group = (shape.n_head / shape.n_head_kv.max(1)).max(1);
        let rows = (tile_tokens(group) * group).next_multiple_of(ROWS);
        let dv_pad = dv.next_multiple_of(LANES);
        FlashScratch {
            dk,
            dv,
            dv_pad,
            q: vec![0.0; rows * dk],
            windows: vec![0..0; rows],
            out: vec![0.0; rows * dv_pad],
            kt: vec![0.0; dk * KEYS],
            vb: vec![0.0; KEYS * dv_pad],
            scores: vec![0.0; rows * KEYS],
            max: vec![0.0; rows],
            sum: vec![0.0; rows],
            row: vec![0.0; dk.max(dv_pad)],
        }
    }

    /// Rows a tile can hold.
    pub fn capacity(&self) -> usize {
        self.windows.len()
    }

    /// Query row `r` (head size `dk`) and the key positions it attends to.
    pub fn query(&mut self, r: usize) -> (&mut [f32], &mut Range<usize>) {
        (
            &mut self.q[r * self.dk..(r + 1) * self.dk],
            &mut self.windows[r],
        )
    }

    /// Output row `r` (head size `dv`) after the kernel ran.
    pub fn output(&self, r: usize) -> &[f32] {
        &self.out[r * self.dv_pad..][..self.dv]
    }
}

/// Row `t` of a head's cached keys or values as f32.
#[inline(always)]
fn load_row(ops: &F16Ops, view: KvView<'_>, head: HeadRows, t: usize, dst: &mut [f32]) {
    let at = head.start(t);
    match view {
        KvView::F32(v) => dst.copy_from_slice(&v[at..at + head.dim]),
        KvView::F16(v) => (ops.to_f32)(&v[at..at + head.dim], dst),
        KvView::Q8_0(v) => {
            dequantize_q8_0(bytemuck::cast_slice(&v[at / QK..(at + head.dim) / QK]), dst)
        }
    }
}

/// Lanes of the fixed-size arrays the micro-kernels are written in (one 256-bit vector).
pub const LANES: usize = 8;

/// `a[l] += x · b[l]` on eight lanes: how an instance of the kernel multiply-adds.
pub trait Mad8 {
    fn mad8(a: &mut [f32; LANES], x: f32, b: &[f32; LANES]);
}

/// Separate multiply and add (the portable instance).
pub struct MulAdd;

impl Mad8 for MulAdd {
    #[inline(always)]
    fn mad8(a: &mut [f32; LANES], x: f32, b: &[f32; LANES]) {
        for (a, &b) in a.iter_mut().zip(b) {
            *a += x * b;
        }
    }
}

/// `out[i·KEYS + j] = Σ_d q_i[d] · kt[d·KEYS + j]` for [`ROWS`] query rows, `d` in order.
#[inline(always)]
fn scores_block<M: Mad8>(q: &[f32], dk: usize, kt: &[f32], out: &mut [f32]) {
    let q: [&[f32]; ROWS] = from_fn(|i| &q[i * dk..(i + 1) * dk]);
    let mut lo = [[0.0f32; LANES]; ROWS];
    let mut hi = [[0.0f32; LANES]; ROWS];
    for (d, k) in kt.chunks_exact(KEYS).take(dk).enumerate() {
        let (k0, k1) = k.split_at(LANES);
        let (k0, k1): (&[f32; LANES], &[f32; LANES]) =
            (k0.try_into().unwrap(), k1.try_into().unwrap());
        for i in 0..ROWS {
            let x = q[i][d];
            M::mad8(&mut lo[i], x, k0);
            M::mad8(&mut hi[i], x, k1);
        }
    }
    for (i, o) in out.chunks_exact_mut(KEYS).take(ROWS).enumerate() {
        o[..LANES].copy_from_slice(&lo[i]);
        o[LANES..].copy_from_slice(&hi[i]);
    }
}

/// `o[i] += Σ_j p[j] · v_j[i]`, `j` in order, over the value block's slabs (`vb`: slab
/// `c` holds lanes `8c..8c + 8` of every key's value).
#[inline(always)]
fn add_values<M: Mad8>(o: &mut [f32], p: &[f32], vb: &[f32]) {
    for (oc, slab) in o.chunks_exact_mut(LANES).zip(vb.chunks_exact(KEYS * LANES)) {
        let oc: &mut [f32; LANES] = oc.try_into().unwrap();
        let mut a = *oc;
        for (&p, v) in p.iter().zip(slab.chunks_exact(LANES)) {
            M::mad8(&mut a, p, v.try_into().unwrap());
        }
        *oc = a;
    }
}

/// The kernel body; `kernels` instantiates it per ISA.
#[inline(always)]
pub fn tile_body<M: Mad8>(ops: &F16Ops, t: &Tile<'_>, s: &mut FlashScratch) {
    let (dk, dv, dvp, n) = (s.dk, s.dv, s.dv_pad, t.n_rows.min(s.capacity()));
    if n == 0 {
        return;
    }
    let padded = n.next_multiple_of(ROWS);
    s.q[n * dk..padded * dk].fill(0.0);
    let windows = &s.windows[..n];
    let lo = windows.iter().map(|w| w.start).min().unwrap_or(0);
    let hi = windows.iter().map(|w| w.end).max().unwrap_or(0);
    s.max[..n].fill(f32::NEG_INFINITY);
    s.sum[..n].fill(0.0);
    s.out[..n * dvp].fill(0.0);
    for kb in (lo..hi).step_by(KEYS) {
        let nk = KEYS.min(hi - kb);
        for j in 0..KEYS {
            if j < nk {
                load_row(ops, t.keys, t.k_head, kb + j, &mut s.row[..dk]);
            } else {
                s.row[..dk].fill(0.0);
            }
            for (c, &x) in s.kt.chunks_exact_mut(KEYS).zip(&s.row[..dk]) {
                c[j] = x;
            }
            let v = &mut s.row[..dvp];
            v.fill(0.0);
            if j < nk {
                load_row(ops, t.values, t.v_head, kb + j, &mut v[..dv]);
            }
            for (slab, x) in
                s.vb.chunks_exact_mut(KEYS * LANES)
                    .zip(v.chunks_exact(LANES))
            {
                slab[j * LANES..(j + 1) * LANES].copy_from_slice(x);
            }
        }
        for r0 in (0..padded).step_by(ROWS) {
            scores_block::<M>(
                &s.q[r0 * dk..(r0 + ROWS) * dk],
                dk,
                &s.kt[..dk * KEYS],
                &mut s.scores[r0 * KEYS..(r0 + ROWS) * KEYS],
            );
        }
        for (r, w) in windows.iter().enumerate() {
            // the keys of this block in the row's window
            let (j0, j1) = (w.start.max(kb) - kb, w.end.min(kb + nk).saturating_sub(kb));
            if j0 >= j1 {
                continue;
            }
            let p = &mut s.scores[r * KEYS..(r + 1) * KEYS];
            p[..j0].fill(f32::NEG_INFINITY);
            p[j1..].fill(f32::NEG_INFINITY);
            let mut block_max = f32::NEG_INFINITY;
            for x in &mut p[j0..j1] {
                let y = *x * t.scale;
                *x = match t.softcap {
                    Some(c) => c * libm::tanhf(y / c),
                    None => y,
                };
                block_max = block_max.max(*x);
            }
            let m = s.max[r];
            let m_new = m.max(block_max);
            let rescale = if m == f32::NEG_INFINITY {
                0.0
            } else {
                libm::expf(m - m_new)
            };
            (ops.exp_sub)(p, m_new);
            let o = &mut s.out[r * dvp..(r + 1) * dvp];
            if rescale != 1.0 {
                o.iter_mut().for_each(|x| *x *= rescale);
            }
            s.sum[r] = s.sum[r] * rescale + p.iter().sum::<f32>();
            s.max[r] = m_new;
            add_values::<M>(o, p, &s.vb);
        }
    }
    for (o, &l) in s.out.chunks_exact_mut(dvp).zip(&s.sum[..n]) {
        let inv = if l > 0.0 { 1.0 / l } else { 0.0 };
        o.iter_mut().for_each(|x| *x *= inv);
    }
}

/// The portable instance of [`tile_body`].
pub fn tile(ops: &F16Ops, t: &Tile<'_>, s: &mut FlashScratch) {
    tile_body::<MulAdd>(ops, t, s)
}

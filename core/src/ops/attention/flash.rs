//! Flash attention for prompt batches and decode steps: a tile of query rows (the query
//! heads sharing one KV head, for a run of consecutive tokens) walks the cache [`KEYS`] positions at a time with
//! an online softmax, so there is no score matrix beyond `rows × KEYS`, and each key and
//! value row is converted to f32 once per tile instead of once per query head and token.
//!
//! The tile is laid out with **query rows across the vector lanes**: the queries are
//! transposed once per tile (`qt[d]`: element `d` of [`Simd::LANES`] rows), so a key's score
//! against those rows is a chain of multiply-adds of `qt[d]` by the key's element `d`
//! (broadcast), the softmax of a block is vertical (per-row maxima, exponentials and sums
//! are lane-wise, no horizontal reductions) and the output accumulates transposed
//! (`ot[i] += p_j · v_j[i]`, the value element broadcast). Keys and values are read as
//! plain rows: nothing but the queries and the output is ever transposed.
//!
//! Every cache type works: F16 and F32 rows are converted, Q8_0 rows dequantized (a quantized
//! cache's Hadamard rotation is already in q, k and v). Per key block and query row:
//! `s = scale · q·k` (softcapped where the model asks), masked to the row's window;
//! `m' = max(m, max s)`, `p = e^(s - m')`, `l = l·e^(m - m') + Σp`, `o = o·e^(m - m') + Σ p·v`;
//! at the end `o / l`, after a head's attention sink (gpt-oss), if any, joined `l` as one
//! more score with a zero value (the one place every instance finishes a row).
//!
//! The body is plain Rust generic over [`Simd`] (the lanes, how they multiply-add and the
//! exponential) and compiled once per ISA with that ISA's target features (see
//! `kernels::x86`): per row, scores are summed over the head dimension and values over the
//! keys in order, fused as ggml's flash-attention GEMM does (Qwen2.5's large keys make its
//! perplexity sensitive even to that rounding: fused 0.18% from llama-perplexity on the
//! fixture text, unfused 0.38%). Lane width does not change a row's arithmetic, and the
//! portable instance fuses too (`libm::fmaf`) and takes the SIMD exponential's operations
//! lane by lane ([`exp_poly`]), so every instance gives the same bits: the scalar table
//! computes what AVX2 and AVX-512 compute.

use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

use super::kv::{HeadRows, KvView, BLOCK};
use super::AttnShape;
use crate::kernels::F16Ops;
use crate::ops::exp::exp_poly;
use crate::quant::legacy::{dequantize_q8_0, QK};

/// Key positions per block.
pub const KEYS: usize = 16;

/// Keys whose scores (or values) one pass keeps in registers: eight independent chains of
/// multiply-adds, few enough for 16 vector registers.
const PASS: usize = 8;
const _: () = assert!(KEYS.is_multiple_of(PASS), "a block is whole passes");
const _: () = assert!(KEYS == BLOCK, "a key block is one block of a paged cache");

/// Query rows a tile aims for: with 64-wide heads, the transposed queries and output of 64
/// rows (16 KiB each) and one block of keys and values (8 KiB) stay in L1 or close to it.
const TILE_ROWS: usize = 64;

/// The widest lane count of any instance (the scratch is laid out for it).
const MAX_LANES: usize = 16;

/// Tokens per tile for `group` query heads per KV head.
pub fn tile_tokens(group: usize) -> usize {
    (TILE_ROWS / group.max(1)).max(1)
}

/// One tile of attention: the query heads of KV head `k_head` / `v_head` for
/// [`Self::n_rows`] (token, head) rows, whose queries and windows sit in the scratch.
pub struct Tile<'a> {
    pub keys: KvView<'a>,
    pub k_head: HeadRows,
    pub values: KvView<'a>,
    pub v_head: HeadRows,
    pub scale: f32,
    pub softcap: Option<f32>,
    pub n_rows: usize,
    /// Attention sinks (gpt-oss): one logit per query head of the tile, in the softmax's
    /// denominator only, as if a key with that score (not scaled, not softcapped, never
    /// masked) and a zero value were in every row's window. The rows are (token, head)
    /// pairs with the heads cycling fastest: row `r` takes `sinks[r % sinks.len()]`.
    pub sinks: Option<&'a [f32]>,
    /// Where the positions are stored in a paged cache: the physical block of each block of
    /// [`BLOCK`] positions (`None`: position `t` is row `t`).
    pub blocks: Option<&'a [u32]>,
}

/// A flash kernel for one ISA: reads [`FlashScratch::query`] rows and windows, writes
/// [`FlashScratch::output`] rows.
pub type FlashFn = fn(ops: &F16Ops, tile: &Tile<'_>, s: &mut FlashScratch);

/// Per-worker buffers of the flash kernel, sized once per session.
pub struct FlashScratch {
    dk: usize,
    dv: usize,
    /// Query rows, row after row (written by the caller).
    q: Vec<f32>,
    windows: Vec<Range<usize>>,
    /// Output rows, row after row (read by the caller).
    out: Vec<f32>,
    /// The queries transposed: `qt[(v·dk + d)·L + l]` is element `d` of row `v·L + l`.
    qt: Vec<f32>,
    /// The output transposed alike (`dv` elements per row).
    ot: Vec<f32>,
    /// Per row: running maximum, running sum, window start and end (as f32: exact below
    /// 2^24 positions).
    max: Vec<f32>,
    sum: Vec<f32>,
    start: Vec<f32>,
    end: Vec<f32>,
    /// One block of keys and of values, as f32 rows.
    kb: Vec<f32>,
    vb: Vec<f32>,
    /// The block's scores, then probabilities: `p[(u·KEYS + j)·L + l]` for key `j`, row `l`
    /// of the `u`-th lane vector of a pass (two at most).
    p: Vec<f32>,
}

impl FlashScratch {
    pub fn new(shape: AttnShape) -> FlashScratch {
        let (dk, dv) = (shape.head_dim_k, shape.head_dim_v);
        let group = (shape.n_head / shape.n_head_kv.max(1)).max(1);
        let rows = tile_tokens(group) * group;
        let padded = rows.next_multiple_of(MAX_LANES);
        FlashScratch {
            dk,
            dv,
            q: vec![0.0; rows * dk],
            windows: vec![0..0; rows],
            out: vec![0.0; rows * dv],
            qt: vec![0.0; padded * dk],
            ot: vec![0.0; padded * dv],
            max: vec![0.0; padded],
            sum: vec![0.0; padded],
            start: vec![0.0; padded],
            end: vec![0.0; padded],
            kb: vec![0.0; KEYS * dk],
            vb: vec![0.0; KEYS * dv],
            p: vec![0.0; 2 * KEYS * MAX_LANES],
        }
    }

    /// Bytes [`Self::new`] allocates for `shape`.
    pub fn bytes_for(shape: AttnShape) -> usize {
        let (dk, dv) = (shape.head_dim_k, shape.head_dim_v);
        let group = (shape.n_head / shape.n_head_kv.max(1)).max(1);
        let rows = tile_tokens(group) * group;
        let padded = rows.next_multiple_of(MAX_LANES);
        let floats =
            rows * (dk + dv) + padded * (dk + dv + 4) + KEYS * (dk + dv) + 2 * KEYS * MAX_LANES;
        floats * size_of::<f32>() + rows * size_of::<Range<usize>>()
    }

    /// Bytes held now.
    pub fn bytes(&self) -> usize {
        let floats = [
            &self.q,
            &self.out,
            &self.qt,
            &self.ot,
            &self.max,
            &self.sum,
            &self.start,
            &self.end,
            &self.kb,
            &self.vb,
            &self.p,
        ]
        .iter()
        .map(|v| v.capacity())
        .sum::<usize>();
        floats * size_of::<f32>() + self.windows.capacity() * size_of::<Range<usize>>()
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
        &self.out[r * self.dv..][..self.dv]
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

/// The vector operations the kernel body is written in; each ISA's instance implements them
/// on its registers (all `#[inline(always)]`, inlined into the instance's `target_feature`
/// function).
pub trait Simd {
    /// Lanes per vector (at most 16).
    const LANES: usize;
    /// Whether the passes run two vectors of query rows at once (each key or value element
    /// broadcast once for both): for instances with registers for twice the sums.
    const PAIRS: bool = false;
    type V: Copy;
    fn splat(x: f32) -> Self::V;
    /// The first `LANES` values of `s`.
    fn load(s: &[f32]) -> Self::V;
    fn store(v: Self::V, s: &mut [f32]);
    fn add(a: Self::V, b: Self::V) -> Self::V;
    fn mul(a: Self::V, b: Self::V) -> Self::V;
    fn max(a: Self::V, b: Self::V) -> Self::V;
    fn sub(a: Self::V, b: Self::V) -> Self::V;
    /// `a + x · b` (fused where the instance fuses).
    fn mad(a: Self::V, x: f32, b: Self::V) -> Self::V;
    /// `s` where `start <= pos < end`, -∞ elsewhere.
    fn mask(s: Self::V, pos: f32, start: Self::V, end: Self::V) -> Self::V;
    /// `a - b`, but 0 where `a == b` (so -∞ - -∞ gives 0, not NaN).
    fn diff(a: Self::V, b: Self::V) -> Self::V;
    /// `e^x`, 0 where `x < -87.3` (below the normal range) or NaN.
    fn exp(x: Self::V) -> Self::V;
}

/// The portable instance: eight lanes, fused multiply-adds (`libm::fmaf`; hardware on
/// targets whose libm has it) and [`exp_poly`], so it agrees with the SIMD instances bit for
/// bit.
pub struct Portable;

impl Simd for Portable {
    const LANES: usize = 8;
    type V = [f32; 8];
    #[inline(always)]
    fn splat(x: f32) -> [f32; 8] {
        [x; 8]
    }
    #[inline(always)]
    fn load(s: &[f32]) -> [f32; 8] {
        s[..8].try_into().expect("eight values")
    }
    #[inline(always)]
    fn store(v: [f32; 8], s: &mut [f32]) {
        s[..8].copy_from_slice(&v);
    }
    #[inline(always)]
    fn add(a: [f32; 8], b: [f32; 8]) -> [f32; 8] {
        core::array::from_fn(|l| a[l] + b[l])
    }
    #[inline(always)]
    fn mul(a: [f32; 8], b: [f32; 8]) -> [f32; 8] {
        core::array::from_fn(|l| a[l] * b[l])
    }
    #[inline(always)]
    fn max(a: [f32; 8], b: [f32; 8]) -> [f32; 8] {
        core::array::from_fn(|l| a[l].max(b[l]))
    }
    #[inline(always)]
    fn sub(a: [f32; 8], b: [f32; 8]) -> [f32; 8] {
        core::array::from_fn(|l| a[l] - b[l])
    }
    #[inline(always)]
    fn mad(a: [f32; 8], x: f32, b: [f32; 8]) -> [f32; 8] {
        core::array::from_fn(|l| libm::fmaf(x, b[l], a[l]))
    }
    #[inline(always)]
    fn mask(s: [f32; 8], pos: f32, start: [f32; 8], end: [f32; 8]) -> [f32; 8] {
        core::array::from_fn(|l| {
            if start[l] <= pos && pos < end[l] {
                s[l]
            } else {
                f32::NEG_INFINITY
            }
        })
    }
    #[inline(always)]
    fn diff(a: [f32; 8], b: [f32; 8]) -> [f32; 8] {
        core::array::from_fn(|l| if a[l] == b[l] { 0.0 } else { a[l] - b[l] })
    }
    #[inline(always)]
    fn exp(x: [f32; 8]) -> [f32; 8] {
        core::array::from_fn(|l| if x[l] >= -87.3 { exp_poly(x[l]) } else { 0.0 })
    }
}

/// Row `r`'s value in a transposed buffer of `len` elements per row.
#[inline(always)]
fn lane_at<S: Simd>(len: usize, r: usize, i: usize) -> usize {
    ((r / S::LANES) * len + i) * S::LANES + r % S::LANES
}

/// One pass of scores: `sc[j] = Σ_d keys[j·dk + d] · qt[d]` for the [`PASS`] keys (rows of
/// `dk`) against a vector of transposed query rows, d in order, the keys' chains
/// independent.
#[inline(always)]
fn scores_pass<S: Simd>(qt: &[f32], keys: &[f32], dk: usize, sc: &mut [f32]) {
    let l = S::LANES;
    assert!(qt.len() >= dk * l && keys.len() >= PASS * dk && sc.len() >= PASS * l);
    let mut acc = [S::splat(0.0); PASS];
    for (d, q) in qt.chunks_exact(l).take(dk).enumerate() {
        let q = S::load(q);
        for (j, acc) in acc.iter_mut().enumerate() {
            // SAFETY: j·dk + d < PASS·dk <= keys.len() (asserted above).
            let k = unsafe { *keys.get_unchecked(j * dk + d) };
            *acc = S::mad(*acc, k, q);
        }
    }
    for (j, acc) in acc.iter().enumerate() {
        S::store(*acc, &mut sc[j * l..]);
    }
}

/// One pass of values: `ot[i] = ot[i] (· rescale, on the first pass) + Σ_j p_j · values[j·dv
/// + i]` for the [`PASS`] keys, j in order.
#[inline(always)]
fn values_pass<S: Simd, const RESCALE: bool>(
    ot: &mut [f32],
    values: &[f32],
    dv: usize,
    p: &[S::V; PASS],
    rescale: S::V,
) {
    let l = S::LANES;
    assert!(ot.len() >= dv * l && values.len() >= PASS * dv);
    for (i, o) in ot.chunks_exact_mut(l).take(dv).enumerate() {
        let mut a = S::load(o);
        if RESCALE {
            a = S::mul(a, rescale);
        }
        for (j, p) in p.iter().enumerate() {
            // SAFETY: j·dv + i < PASS·dv <= values.len() (asserted above).
            let v = unsafe { *values.get_unchecked(j * dv + i) };
            a = S::mad(a, v, *p);
        }
        S::store(a, o);
    }
}

/// [`scores_pass`] for two vectors of query rows: each key element is read once for both,
/// and each row's sums are the single pass's, bit for bit.
#[inline(always)]
fn scores_pass2<S: Simd>(qt: [&[f32]; 2], keys: &[f32], dk: usize, sc: [&mut [f32]; 2]) {
    let l = S::LANES;
    assert!(qt.iter().all(|q| q.len() >= dk * l) && keys.len() >= PASS * dk);
    assert!(sc.iter().all(|s| s.len() >= PASS * l));
    let mut acc = [[S::splat(0.0); PASS]; 2];
    for (d, (q0, q1)) in qt[0]
        .chunks_exact(l)
        .zip(qt[1].chunks_exact(l))
        .take(dk)
        .enumerate()
    {
        let (q0, q1) = (S::load(q0), S::load(q1));
        let [acc0, acc1] = &mut acc;
        for (j, (a0, a1)) in acc0.iter_mut().zip(acc1.iter_mut()).enumerate() {
            // SAFETY: j·dk + d < PASS·dk <= keys.len() (asserted above).
            let k = unsafe { *keys.get_unchecked(j * dk + d) };
            *a0 = S::mad(*a0, k, q0);
            *a1 = S::mad(*a1, k, q1);
        }
    }
    for (acc, sc) in acc.iter().zip(sc) {
        for (j, acc) in acc.iter().enumerate() {
            S::store(*acc, &mut sc[j * l..]);
        }
    }
}

/// [`values_pass`] for two vectors of rows (`ot` holds both, one after the other): each
/// value element is read once for both, each row's sums are the single pass's.
#[inline(always)]
fn values_pass2<S: Simd, const RESCALE: bool>(
    ot: &mut [f32],
    values: &[f32],
    dv: usize,
    p: &[[S::V; PASS]; 2],
    rescale: [S::V; 2],
) {
    let l = S::LANES;
    assert!(ot.len() >= 2 * dv * l && values.len() >= PASS * dv);
    let (o0, o1) = ot.split_at_mut(dv * l);
    for (i, (o0, o1)) in o0
        .chunks_exact_mut(l)
        .zip(o1.chunks_exact_mut(l))
        .take(dv)
        .enumerate()
    {
        let (mut a0, mut a1) = (S::load(o0), S::load(o1));
        if RESCALE {
            a0 = S::mul(a0, rescale[0]);
            a1 = S::mul(a1, rescale[1]);
        }
        for (j, (&p0, &p1)) in p[0].iter().zip(&p[1]).enumerate() {
            // SAFETY: j·dv + i < PASS·dv <= values.len() (asserted above).
            let v = unsafe { *values.get_unchecked(j * dv + i) };
            a0 = S::mad(a0, v, p0);
            a1 = S::mad(a1, v, p1);
        }
        S::store(a0, o0);
        S::store(a1, o1);
    }
}

/// Output vectors whose chains [`values_rows`] runs side by side.
const ROW_VECS: usize = 8;

/// The values of a block for a tile of fewer rows than lanes (a decode step's query heads of
/// one KV head), row by row with the output elements across the lanes: `out[r·dv + i] =
/// out[r·dv + i] · rescale[r] + Σ_j p[j·l + r] · values[j·dv + i]`, j in order over `keys`
/// keys. Per element the same operations as [`values_pass`] on transposed rows (one
/// multiplication by the rescale, then one fused multiply-add per key, the keys in order),
/// so the same bits; the multiply-adds are `rows × dv / l` per key instead of `dv`.
#[inline(always)]
fn values_rows<S: Simd>(
    out: &mut [f32],
    values: &[f32],
    dv: usize,
    p: &[f32],
    rescale: &[f32],
    keys: usize,
) {
    let l = S::LANES;
    let rows = rescale.len();
    assert!(out.len() >= rows * dv && values.len() >= keys * dv && p.len() >= keys * l);
    assert!(rows <= l);
    for (r, o) in out.chunks_exact_mut(dv).take(rows).enumerate() {
        let rs = S::splat(rescale[r]);
        let mut c = 0;
        while c + ROW_VECS * l <= dv {
            values_chunk::<S, ROW_VECS>(&mut o[c..], values, c, dv, p, r, rs, keys);
            c += ROW_VECS * l;
        }
        while c + l <= dv {
            values_chunk::<S, 1>(&mut o[c..], values, c, dv, p, r, rs, keys);
            c += l;
        }
        for i in c..dv {
            let mut a = o[i] * rescale[r];
            for j in 0..keys {
                a = libm::fmaf(p[j * l + r], values[j * dv + i], a);
            }
            o[i] = a;
        }
    }
}

/// `V` vectors of output row `r` at element `c` of [`values_rows`] (`o` starts there): scaled
/// by `rs`, then one multiply-add chain per vector over the keys in order, side by side.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn values_chunk<S: Simd, const V: usize>(
    o: &mut [f32],
    values: &[f32],
    c: usize,
    dv: usize,
    p: &[f32],
    r: usize,
    rs: S::V,
    keys: usize,
) {
    let l = S::LANES;
    // (loops, not `array::from_fn`: its closure would not be inlined into the ISA's
    // target-feature instance)
    let mut a = [rs; V];
    for (u, a) in a.iter_mut().enumerate() {
        *a = S::mul(S::load(&o[u * l..]), rs);
    }
    for j in 0..keys {
        // SAFETY: j·l + r < keys·l <= p.len() (asserted by `values_rows`).
        let pj = unsafe { *p.get_unchecked(j * l + r) };
        let v = &values[j * dv + c..j * dv + c + V * l];
        for (u, a) in a.iter_mut().enumerate() {
            *a = S::mad(*a, pj, S::load(&v[u * l..]));
        }
    }
    for (u, a) in a.iter().enumerate() {
        S::store(*a, &mut o[u * l..]);
    }
}

/// The kernel body for the common head sizes as compile-time constants (64, 128, 256: the
/// passes' key and value offsets become immediates), any other through [`tile_body`] with
/// the sizes at run time; `kernels` instantiates it per ISA. The arithmetic is the same.
#[inline(always)]
pub fn tile_sized<S: Simd>(ops: &F16Ops, t: &Tile<'_>, s: &mut FlashScratch) {
    match (s.dk, s.dv) {
        (64, 64) => tile_body::<S, 64, 64>(ops, t, s),
        (128, 128) => tile_body::<S, 128, 128>(ops, t, s),
        (256, 256) => tile_body::<S, 256, 256>(ops, t, s),
        _ => tile_body::<S, 0, 0>(ops, t, s),
    }
}

/// The kernel body; `DK` / `DV` are the key and value head sizes when known at compile
/// time, 0 when taken from the scratch.
#[inline(always)]
pub fn tile_body<S: Simd, const DK: usize, const DV: usize>(
    ops: &F16Ops,
    t: &Tile<'_>,
    s: &mut FlashScratch,
) {
    let l = S::LANES;
    let dk = if DK > 0 { DK } else { s.dk };
    let dv = if DV > 0 { DV } else { s.dv };
    assert!(
        dk == s.dk && dv == s.dv,
        "the scratch is for this head size"
    );
    let n = t.n_rows.min(s.capacity());
    if n == 0 {
        return;
    }
    let vecs = n.div_ceil(l);
    let padded = vecs * l;
    // transpose the queries; rows past n attend to nothing
    for r in 0..padded {
        let (w, q) = if r < n {
            (s.windows[r].clone(), &s.q[r * dk..(r + 1) * dk])
        } else {
            (0..0, &s.q[..0])
        };
        for d in 0..dk {
            s.qt[lane_at::<S>(dk, r, d)] = q.get(d).copied().unwrap_or(0.0);
        }
        (s.start[r], s.end[r]) = (w.start as f32, w.end as f32);
    }
    s.max[..padded].fill(f32::NEG_INFINITY);
    s.sum[..padded].fill(0.0);
    // a tile of fewer rows than lanes accumulates its output row by row in `out`
    let row_major = n < l;
    if row_major {
        s.out[..n * dv].fill(0.0);
    } else {
        s.ot[..padded * dv].fill(0.0);
    }
    let windows = &s.windows[..n];
    // key blocks start at multiples of KEYS whatever the tile holds, so a row's result does
    // not depend on the other rows of its tile (a block outside a row's window is an exact
    // no-op for it: p = 0, rescale 1)
    let lo = windows.iter().map(|w| w.start).min().unwrap_or(0) / KEYS * KEYS;
    let hi = windows.iter().map(|w| w.end).max().unwrap_or(0);
    for kb in (lo..hi).step_by(KEYS) {
        let nk = KEYS.min(hi - kb);
        // the block's first stored row (a key block is one block of a paged cache)
        let row0 = match t.blocks {
            Some(b) => b[kb / BLOCK] as usize * BLOCK,
            None => kb,
        };
        for j in 0..nk {
            load_row(
                ops,
                t.keys,
                t.k_head,
                row0 + j,
                &mut s.kb[j * dk..(j + 1) * dk],
            );
            load_row(
                ops,
                t.values,
                t.v_head,
                row0 + j,
                &mut s.vb[j * dv..(j + 1) * dv],
            );
        }
        // a short last block: its passes run whole over zero keys and values (their scores
        // are never read, their probabilities are 0: exact no-ops)
        let passes = nk.div_ceil(PASS);
        s.kb[nk * dk..passes * PASS * dk].fill(0.0);
        s.vb[nk * dv..passes * PASS * dv].fill(0.0);
        let mut v = 0;
        while v < vecs {
            // one vector of rows, or two where the instance pairs them
            let w = if S::PAIRS && v + 1 < vecs { 2 } else { 1 };
            let rows = v * l..(v + w) * l;
            v += w;
            let v = rows.start / l;
            // rows of these vectors whose windows meet the block (a block outside a row's
            // window is an exact no-op for it)
            let meets = windows[rows.start.min(n)..rows.end.min(n)]
                .iter()
                .any(|win| win.start < kb + nk && win.end > kb);
            if !meets {
                continue;
            }
            // scores, PASS keys at a time: sc[j] = Σ_d k_j[d] · qt[d], d in order
            let (p0, p1) = s.p.split_at_mut(KEYS * l);
            for pass in 0..passes {
                let keys = &s.kb[pass * PASS * dk..(pass + 1) * PASS * dk];
                let at = pass * PASS * l..(pass + 1) * PASS * l;
                let qt = |u: usize| &s.qt[(v + u) * dk * l..(v + u + 1) * dk * l];
                if w == 2 {
                    let sc = [&mut p0[at.clone()], &mut p1[at]];
                    scores_pass2::<S>([qt(0), qt(1)], keys, dk, sc);
                } else {
                    scores_pass::<S>(qt(0), keys, dk, &mut p0[at]);
                }
            }
            let mut rescales = [S::splat(1.0); 2];
            for (u, rescale) in rescales.iter_mut().enumerate().take(w) {
                let vu = v + u;
                let p = &mut s.p[u * KEYS * l..(u + 1) * KEYS * l];
                // online softmax over the block, lane-wise
                let (start, end) = (S::load(&s.start[vu * l..]), S::load(&s.end[vu * l..]));
                let scale = S::splat(t.scale);
                let mut block_max = S::splat(f32::NEG_INFINITY);
                for j in 0..nk {
                    let mut x = S::mul(S::load(&p[j * l..]), scale);
                    if let Some(c) = t.softcap {
                        let mut a = [0.0f32; MAX_LANES];
                        S::store(x, &mut a);
                        a[..l].iter_mut().for_each(|y| *y = c * libm::tanhf(*y / c));
                        x = S::load(&a);
                    }
                    let x = S::mask(x, (kb + j) as f32, start, end);
                    S::store(x, &mut p[j * l..]);
                    block_max = S::max(block_max, x);
                }
                let m_old = S::load(&s.max[vu * l..]);
                let m_new = S::max(m_old, block_max);
                // e^(m - m') once per block and row, libm's (1 where the maximum did not move)
                let mut a = [0.0f32; MAX_LANES];
                S::store(S::diff(m_old, m_new), &mut a);
                a[..l]
                    .iter_mut()
                    .for_each(|x| *x = if *x == 0.0 { 1.0 } else { libm::expf(*x) });
                *rescale = S::load(&a);
                let mut sum = S::splat(0.0);
                for j in 0..nk {
                    // a masked key: -∞ - m' is -∞ (or NaN when m' is -∞ too): 0 either way
                    let e = S::exp(S::sub(S::load(&p[j * l..]), m_new));
                    S::store(e, &mut p[j * l..]);
                    sum = S::add(sum, e);
                }
                p[nk * l..passes * PASS * l].fill(0.0);
                let l_old = S::load(&s.sum[vu * l..]);
                S::store(S::add(S::mul(l_old, *rescale), sum), &mut s.sum[vu * l..]);
                S::store(m_new, &mut s.max[vu * l..]);
            }
            if row_major {
                let mut rs = [0.0f32; MAX_LANES];
                S::store(rescales[0], &mut rs);
                let keys = passes * PASS;
                values_rows::<S>(&mut s.out, &s.vb, dv, &s.p[..keys * l], &rs[..n], keys);
                continue;
            }
            // ot[i] = ot[i] · rescale + Σ_j p_j · v_j[i], j in order, PASS keys at a time
            let ot = &mut s.ot[v * dv * l..(v + w) * dv * l];
            for pass in 0..passes {
                let mut p = [[S::splat(0.0); PASS]; 2];
                for (u, p) in p.iter_mut().enumerate().take(w) {
                    for (j, p) in p.iter_mut().enumerate() {
                        *p = S::load(&s.p[(u * KEYS + pass * PASS + j) * l..]);
                    }
                }
                let values = &s.vb[pass * PASS * dv..(pass + 1) * PASS * dv];
                match (w, pass) {
                    (2, 0) => values_pass2::<S, true>(ot, values, dv, &p, rescales),
                    (2, _) => values_pass2::<S, false>(ot, values, dv, &p, rescales),
                    (_, 0) => values_pass::<S, true>(ot, values, dv, &p[0], rescales[0]),
                    _ => values_pass::<S, false>(ot, values, dv, &p[0], rescales[0]),
                }
            }
        }
    }
    let sinks = t.sinks.filter(|s| !s.is_empty());
    for r in 0..n {
        let mut sum = s.sum[r];
        // the sink as ggml's flash attention takes it after the last key: a new maximum
        // rescales the output and the sum, else it adds e^(sink - m) to the sum
        let mut rescale = 1.0;
        if let Some(sinks) = sinks {
            let (sink, m) = (sinks[r % sinks.len()], s.max[r]);
            if sink > m {
                rescale = libm::expf(m - sink);
                sum = sum * rescale + 1.0;
            } else {
                sum += libm::expf(sink - m);
            }
        }
        let inv = if sum > 0.0 { 1.0 / sum } else { 0.0 };
        let out = &mut s.out[r * dv..(r + 1) * dv];
        if row_major {
            out.iter_mut().for_each(|o| *o = *o * rescale * inv);
        } else {
            for (i, o) in out.iter_mut().enumerate() {
                *o = s.ot[lane_at::<S>(dv, r, i)] * rescale * inv;
            }
        }
    }
}

/// The portable instance of [`tile_body`].
pub fn tile(ops: &F16Ops, t: &Tile<'_>, s: &mut FlashScratch) {
    tile_sized::<Portable>(ops, t, s)
}

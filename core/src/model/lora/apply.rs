//! The low-rank terms of a step's rows: for each adapter set of the step, the rows that carry
//! it, one shrink `u = A x` (`d_in → r`) and one expand `y += scale · B u` (`r → d_out`) per
//! adapter of the set, at that adapter's own rank (no padding to a largest rank). Each row's
//! `u` and each output element are one dot product of fixed order, so a row's result does
//! not depend on the other rows of its group or of the step.

use alloc::vec::Vec;

use super::{LoraSet, Proj};
use crate::parallel::{for_each_range, DisjointSlice, Parallel};

/// Multiply-adds a worker takes at least per chunk (below it the work costs less than
/// waking the workers).
const CHUNK_WORK: usize = 1 << 14;

/// Slot of an entry without adapters.
pub const NO_SLOT: u16 = u16::MAX;

/// The adapter sets of a step and the slot of each row of the pass.
#[derive(Clone, Copy)]
pub struct StepLora<'a> {
    pub sets: &'a [LoraSet],
    /// One per row of the pass: an index into `sets`, or [`NO_SLOT`].
    pub slots: &'a [u16],
}

impl StepLora<'_> {
    /// Whether any row of the pass carries an adapter that changes layer `il`'s `p`.
    pub fn touches(&self, il: usize, p: Proj) -> bool {
        self.slots.iter().any(|&s| {
            self.sets.get(s as usize).is_some_and(|set| {
                set.items()
                    .iter()
                    .any(|l| l.adapter.weight(il, p).is_some())
            })
        })
    }
}

/// The rows of a group and their `A x`, kept across calls.
#[derive(Default)]
pub struct LoraScratch {
    rows: Vec<usize>,
    u: Vec<f32>,
}

/// One adapter's term over the rows of one set: its pair, scale, the rows
/// (`LoraScratch::rows[rows]`) and where their `A x` starts in `LoraScratch::u`.
struct Job<'w> {
    w: &'w super::LoraWeight,
    scale: f32,
    rows: core::ops::Range<usize>,
    u: usize,
}

impl Job<'_> {
    fn u_len(&self) -> usize {
        self.rows.len() * self.w.rank
    }
}

/// `out[t] += Σ scale · B (A x[t])` over the adapters of row `t`'s set, for layer `il`'s
/// projection `p` and the first `n` rows of `x` (rows of the pair's `n_in`) and `out` (rows
/// of its `n_out`). Every set's shrinks run in one dispatch, then every expand in one more
/// (the output columns over the workers; a row's terms added in its set's order).
#[allow(clippy::too_many_arguments)]
pub fn add_lora(
    par: &dyn Parallel,
    lora: &StepLora<'_>,
    buf: &mut LoraScratch,
    il: usize,
    p: Proj,
    x: &[f32],
    n: usize,
    out: &mut [f32],
) {
    buf.rows.clear();
    let mut jobs: Vec<Job<'_>> = Vec::new();
    let mut u_len = 0;
    for (g, set) in lora.sets.iter().enumerate() {
        if !set
            .items()
            .iter()
            .any(|l| l.adapter.weight(il, p).is_some())
        {
            continue;
        }
        let first = buf.rows.len();
        buf.rows
            .extend((0..n).filter(|&t| lora.slots.get(t) == Some(&(g as u16))));
        let rows = first..buf.rows.len();
        if rows.is_empty() {
            continue;
        }
        for l in set.items() {
            if let Some(w) = l.adapter.weight(il, p) {
                let job = Job {
                    w,
                    scale: w.scale(l.adapter.alpha(), l.scale),
                    rows: rows.clone(),
                    u: u_len,
                };
                u_len += job.u_len();
                jobs.push(job);
            }
        }
    }
    let Some(j0) = jobs.first() else {
        return;
    };
    let (n_in, n_out) = (j0.w.n_in, j0.w.n_out);
    if buf.u.len() < u_len {
        buf.u.resize(u_len, 0.0);
    }
    // shrink: u[job.u + i·r + k] = A[k] · x[rows[i]]
    let rows = &buf.rows;
    let us = DisjointSlice::new(&mut buf.u[..u_len]);
    let jobs = &jobs[..];
    for_each_range(
        par,
        u_len,
        (CHUNK_WORK / n_in.max(1)).max(1),
        &|start, end| {
            // SAFETY: entries start..end of u belong to this chunk only.
            let u = unsafe { us.piece(start, end - start) };
            let mut j = jobs.partition_point(|j| j.u + j.u_len() <= start);
            for (o, q) in u.iter_mut().zip(start..end) {
                while q >= jobs[j].u + jobs[j].u_len() {
                    j += 1;
                }
                let job = &jobs[j];
                let r = job.w.rank;
                let (i, k) = ((q - job.u) / r, (q - job.u) % r);
                let t = rows[job.rows.start + i];
                *o = dot(
                    &job.w.a[k * n_in..(k + 1) * n_in],
                    &x[t * n_in..(t + 1) * n_in],
                );
            }
        },
    );
    // expand: out[t][j] += scale · B[j] · u, the columns over the workers
    let u = &buf.u[..u_len];
    let outs = DisjointSlice::new(&mut out[..n * n_out]);
    for_each_range(
        par,
        n_out,
        (CHUNK_WORK / u_len.max(1)).max(16),
        &|start, end| {
            let base = outs.as_mut_ptr();
            for col in start..end {
                for job in jobs {
                    let r = job.w.rank;
                    let brow = &job.w.b[col * r..(col + 1) * r];
                    for (i, &t) in rows[job.rows.clone()].iter().enumerate() {
                        let ui = &u[job.u + i * r..job.u + (i + 1) * r];
                        let add = job.scale * dot(brow, ui);
                        // SAFETY: column `col` of every row belongs to this chunk only, and
                        // t * n_out + col < n * n_out (t < n, col < n_out).
                        unsafe { *base.add(t * n_out + col) += add };
                    }
                }
            }
        },
    );
}

/// `a · b` in one fixed order: eight running sums over the whole blocks, added pairwise,
/// then the tail.
#[inline]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let split = a.len() / 8 * 8;
    let mut acc = [0.0f32; 8];
    for (x, y) in a[..split].chunks_exact(8).zip(b[..split].chunks_exact(8)) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (x, y) in a[split..].iter().zip(&b[split..]) {
        s += x * y;
    }
    s
}

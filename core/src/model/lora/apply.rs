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
const CHUNK_WORK: usize = 1 << 16;

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

/// `out[t] += Σ scale · B (A x[t])` over the adapters of row `t`'s set, for layer `il`'s
/// projection `p` and the first `n` rows of `x` (rows of the pair's `n_in`) and `out` (rows
/// of its `n_out`).
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
    for (g, set) in lora.sets.iter().enumerate() {
        let changes = set
            .items()
            .iter()
            .any(|l| l.adapter.weight(il, p).is_some());
        if !changes {
            continue;
        }
        buf.rows.clear();
        buf.rows
            .extend((0..n).filter(|&t| lora.slots.get(t) == Some(&(g as u16))));
        if buf.rows.is_empty() {
            continue;
        }
        for l in set.items() {
            let Some(w) = l.adapter.weight(il, p) else {
                continue;
            };
            let scale = w.scale(l.adapter.alpha(), l.scale);
            let (r, m) = (w.rank, buf.rows.len());
            if buf.u.len() < m * r {
                buf.u.resize(m * r, 0.0);
            }
            // shrink: u[i][k] = A[k] · x[rows[i]]
            let rows = &buf.rows;
            let us = DisjointSlice::new(&mut buf.u[..m * r]);
            let min = (CHUNK_WORK / w.n_in.max(1)).max(1);
            for_each_range(par, m * r, min, &|start, end| {
                // SAFETY: items start..end of u belong to this chunk only.
                let u = unsafe { us.piece(start, end - start) };
                for (o, item) in u.iter_mut().zip(start..end) {
                    let (i, k) = (item / r, item % r);
                    let xr = &x[rows[i] * w.n_in..(rows[i] + 1) * w.n_in];
                    *o = dot(&w.a[k * w.n_in..(k + 1) * w.n_in], xr);
                }
            });
            // expand: out[rows[i]][j] += scale · B[j] · u[i], the columns over the workers
            let u = &buf.u[..m * r];
            let n_out = w.n_out;
            let outs = DisjointSlice::new(&mut out[..n * n_out]);
            let min = (CHUNK_WORK / (m * r)).max(16);
            for_each_range(par, n_out, min, &|start, end| {
                let base = outs.as_mut_ptr();
                for j in start..end {
                    let brow = &w.b[j * r..(j + 1) * r];
                    for (i, &t) in rows.iter().enumerate() {
                        let add = scale * dot(brow, &u[i * r..(i + 1) * r]);
                        // SAFETY: column j of every row belongs to this chunk only, and
                        // t * n_out + j < n * n_out (t < n, j < n_out).
                        unsafe { *base.add(t * n_out + j) += add };
                    }
                }
            });
        }
    }
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

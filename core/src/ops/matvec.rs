//! Matrix × vector products (one token): each output row one `vec_dot` call, or each group
//! of eight rows of an interleaved matrix one `gemv_x8` call, rows split across the workers
//! in contiguous chunks; several products sharing an input, or independent ones (a
//! mixture's experts), in one parallel dispatch.

use super::matmul::{ActBuf, Plan, QAct, QMatrix};
use crate::error::{Error, Result};
use crate::kernels::Kernels;
use crate::parallel::{for_each_range, DisjointSlice, Parallel};

/// `out[r] = W[r] · x` for every row, where `xq` is `x` quantized to `w.act_type()`.
pub fn matvec(
    k: &Kernels,
    par: &dyn Parallel,
    w: &QMatrix<'_>,
    xq: QAct<'_>,
    out: &mut [f32],
) -> Result<()> {
    let plan = Plan::new(k, w, xq, out.len())?;
    let unit = plan.unit;
    let dst = DisjointSlice::new(out);
    for_each_range(
        par,
        plan.units(),
        plan.chunk(par.threads()),
        &|start, end| {
            // SAFETY: for_each_range hands out disjoint [start, end) ranges.
            let o = unsafe { dst.piece(start * unit, (end - start) * unit) };
            plan.run(xq, start, end, o);
        },
    );
    Ok(())
}

/// Quantizes `x` for `w` and computes `out = W x` (convenience for one-off products).
pub fn matvec_f32(
    k: &Kernels,
    par: &dyn Parallel,
    w: &QMatrix<'_>,
    x: &[f32],
    act: &mut ActBuf,
    out: &mut [f32],
) -> Result<()> {
    let xq = act.quantize(k, w.act_type(), x)?;
    matvec(k, par, w, xq, out)
}

/// `outs[i] = ws[i] · x` for matrices sharing one input (q/k/v, gate/up): `x` is quantized
/// once and all products run in one parallel dispatch. Matrices whose activation formats
/// differ fall back to one product each.
pub fn matvec_many<const N: usize>(
    k: &Kernels,
    par: &dyn Parallel,
    ws: [&QMatrix<'_>; N],
    x: &[f32],
    act: &mut ActBuf,
    outs: [&mut [f32]; N],
) -> Result<()> {
    let Some(first) = ws.first() else {
        return Ok(());
    };
    let act_type = first.act_type();
    if ws.iter().any(|w| w.act_type() != act_type) {
        for (w, out) in ws.into_iter().zip(outs) {
            matvec_f32(k, par, w, x, act, out)?;
        }
        return Ok(());
    }
    let xq = act.quantize(k, act_type, x)?;
    let jobs = ws.map(|w| (w, xq));
    matvec_all(k, par, &jobs, outs)
}

/// The most products [`matvec_all`] runs in one dispatch.
pub const MAX_JOBS: usize = 128;

/// Independent matrix × vector products in one parallel dispatch: `outs[i] = W_i · x_i` for
/// jobs `(W_i, x_i)`, each `x_i` already quantized to its matrix's `act_type()` (the
/// experts of a mixture: every chosen expert's gate and up over one token, then their
/// downs over their own inputs). Each output is what [`matvec`] gives it.
pub fn matvec_all<'o>(
    k: &Kernels,
    par: &dyn Parallel,
    jobs: &[(&QMatrix<'_>, QAct<'_>)],
    outs: impl IntoIterator<Item = &'o mut [f32]>,
) -> Result<()> {
    if jobs.len() > MAX_JOBS {
        return Err(Error::InvalidArgument(alloc::format!(
            "{} products in one dispatch (at most {MAX_JOBS})",
            jobs.len()
        )));
    }
    let mut plans: [Option<Plan<'_, '_>>; MAX_JOBS] = [const { None }; MAX_JOBS];
    let mut dsts: [Option<DisjointSlice<'_, f32>>; MAX_JOBS] = [const { None }; MAX_JOBS];
    let mut n_out = 0;
    for (i, out) in outs.into_iter().enumerate().take(jobs.len()) {
        let (w, xq) = jobs[i];
        plans[i] = Some(Plan::new(k, w, xq, out.len())?);
        dsts[i] = Some(DisjointSlice::new(out));
        n_out += 1;
    }
    if n_out != jobs.len() {
        return Err(Error::InvalidArgument(alloc::format!(
            "{} products with {n_out} outputs",
            jobs.len()
        )));
    }
    let (plans, dsts) = (&plans[..n_out], &dsts[..n_out]);
    let threads = par.threads();
    let mut chunks = [0usize; MAX_JOBS];
    // work item `c` belongs to the product whose range of item numbers holds it
    let mut first_item = [0usize; MAX_JOBS];
    let mut total = 0;
    for (i, p) in plans.iter().enumerate() {
        let p = p.as_ref().expect("every plan was built above");
        chunks[i] = p.chunk(threads);
        first_item[i] = total;
        total += p.units().div_ceil(chunks[i]);
    }
    let first_item = &first_item[..n_out];
    par.for_each(total, &|c| {
        let i = first_item.iter().rposition(|&f| f <= c).unwrap_or(0);
        let (Some(p), Some(dst)) = (&plans[i], &dsts[i]) else {
            return;
        };
        let start = (c - first_item[i]) * chunks[i];
        let end = (start + chunks[i]).min(p.units());
        // SAFETY: items of one product cover disjoint unit ranges of its own output.
        let o = unsafe { dst.piece(start * p.unit, (end - start) * p.unit) };
        p.run(jobs[i].1, start, end, o);
    });
    Ok(())
}

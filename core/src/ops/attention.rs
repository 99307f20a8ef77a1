//! Attention of one query position over the KV cache, all heads, with grouped-query heads
//! reading their shared K/V rows in place (no copies per head).

use half::f16;

use crate::kernels::F16Ops;

/// Shapes of one attention layer.
#[derive(Debug, Clone, Copy)]
pub struct AttnShape {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
}

impl AttnShape {
    pub fn k_row(&self) -> usize {
        self.n_head_kv * self.head_dim_k
    }
    pub fn v_row(&self) -> usize {
        self.n_head_kv * self.head_dim_v
    }
}

/// Which of ggml's two CPU flash-attention kernels (F16 cache) to follow. llama.cpp uses the
/// tiled kernel for batches of at least 64 query tokens and the one-row kernel otherwise
/// (single-token decode included); they round differently, and following the same one keeps
/// our results within rounding noise of llama.cpp's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttnKernel {
    /// q, scores and the V sum in f32; exponentials summed in f64; normalised at the end.
    Tiled,
    /// q rounded to f16, scores in f32, online softmax with the V sum kept in f16.
    OneRow,
}

impl AttnKernel {
    /// The kernel llama.cpp would use for a batch of `n_tokens` queries.
    pub fn for_batch(n_tokens: usize) -> AttnKernel {
        if n_tokens >= 64 {
            AttnKernel::Tiled
        } else {
            AttnKernel::OneRow
        }
    }
}

/// `out[h] = softmax(scale * q[h]·K[t] for t in window) · V` for every head `h`, without a
/// score matrix over heads. `scores` must hold at least `t_end - t_start` values and `acc`
/// at least `head_dim_v`.
#[allow(clippy::too_many_arguments)]
pub fn attend(
    ops: &F16Ops,
    out: &mut [f32],
    q: &mut [f32],
    k_cache: &[f16],
    v_cache: &[f16],
    shape: AttnShape,
    window: core::ops::Range<usize>,
    scale: f32,
    softcap: Option<f32>,
    kernel: AttnKernel,
    scores: &mut [f32],
    acc: &mut [f16],
) {
    let AttnShape {
        n_head,
        n_head_kv,
        head_dim_k: dk,
        head_dim_v: dv,
    } = shape;
    let group = (n_head / n_head_kv.max(1)).max(1);
    let (k_row, v_row) = (shape.k_row(), shape.v_row());
    if kernel == AttnKernel::OneRow {
        q.iter_mut().for_each(|x| *x = f16::from_f32(*x).to_f32());
    }
    let v_of = |t: usize, kvh: usize| &v_cache[t * v_row + kvh * dv..t * v_row + (kvh + 1) * dv];
    let scores = &mut scores[..window.len()];
    for h in 0..n_head {
        let kvh = h / group;
        let qh = &q[h * dk..(h + 1) * dk];
        let oh = &mut out[h * dv..(h + 1) * dv];
        // all of the head's scores first (the same values the online loop would compute)
        (ops.dots_f32_f16)(
            qh,
            &k_cache[window.start * k_row + kvh * dk..],
            k_row,
            scores,
        );
        for s in scores.iter_mut() {
            *s *= scale;
            if let Some(c) = softcap {
                *s = c * libm::tanhf(*s / c);
            }
        }
        match kernel {
            AttnKernel::Tiled => {
                let max = scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
                (ops.exp_sub)(scores, max);
                let mut sum = 0.0f64;
                oh.fill(0.0);
                for (&p, t) in scores.iter().zip(window.clone()) {
                    sum += p as f64;
                    (ops.mad_f32_f16)(oh, v_of(t, kvh), p);
                }
                let inv = if sum == 0.0 { 0.0 } else { (1.0 / sum) as f32 };
                oh.iter_mut().for_each(|o| *o *= inv);
            }
            AttnKernel::OneRow => {
                let acc = &mut acc[..dv];
                acc.fill(f16::ZERO);
                let (mut m, mut sum) = (f32::NEG_INFINITY, 0.0f32);
                for (&s, t) in scores.iter().zip(window.clone()) {
                    let (mut ms, mut vs) = (1.0f32, 1.0f32);
                    if s > m {
                        ms = libm::expf(m - s);
                        m = s;
                        (ops.scale_f16)(acc, ms);
                    } else {
                        vs = libm::expf(s - m);
                    }
                    (ops.mad_f16)(acc, v_of(t, kvh), vs);
                    sum = sum * ms + vs;
                }
                let inv = if sum == 0.0 { 0.0 } else { 1.0 / sum };
                oh.iter_mut()
                    .zip(acc.iter())
                    .for_each(|(o, a)| *o = a.to_f32() * inv);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    fn rand(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    /// Both kernels against plain f64 softmax attention, with grouped heads and a window.
    #[test]
    fn kernels_match_naive_attention() {
        let shape = AttnShape {
            n_head: 4,
            n_head_kv: 2,
            head_dim_k: 16,
            head_dim_v: 8,
        };
        let n_pos = 40;
        let k: Vec<f16> = rand(n_pos * shape.k_row(), 1)
            .iter()
            .map(|&x| f16::from_f32(x * 3.0))
            .collect();
        let v: Vec<f16> = rand(n_pos * shape.v_row(), 2)
            .iter()
            .map(|&x| f16::from_f32(x))
            .collect();
        let q0 = rand(shape.n_head * shape.head_dim_k, 3);
        let window = 7..n_pos;
        let scale = 0.25;
        for (kernel, tol) in [(AttnKernel::Tiled, 1e-3), (AttnKernel::OneRow, 5e-3)] {
            let mut q = q0.clone();
            let mut out = vec![0.0; shape.n_head * shape.head_dim_v];
            let (mut scores, mut acc) = (vec![0.0; n_pos], vec![f16::ZERO; 8]);
            attend(
                &crate::kernels::generic::f16::OPS,
                &mut out,
                &mut q,
                &k,
                &v,
                shape,
                window.clone(),
                scale,
                None,
                kernel,
                &mut scores,
                &mut acc,
            );
            for h in 0..shape.n_head {
                let kvh = h / 2;
                let s: Vec<f64> = window
                    .clone()
                    .map(|t| {
                        (0..16)
                            .map(|i| q0[h * 16 + i] as f64 * k[t * 32 + kvh * 16 + i].to_f64())
                            .sum::<f64>()
                            * scale as f64
                    })
                    .collect();
                let m = s.iter().cloned().fold(f64::MIN, f64::max);
                let z: f64 = s.iter().map(|x| libm::exp(x - m)).sum();
                for d in 0..8 {
                    let want: f64 = window
                        .clone()
                        .zip(&s)
                        .map(|(t, x)| libm::exp(x - m) / z * v[t * 16 + kvh * 8 + d].to_f64())
                        .sum();
                    let got = out[h * 8 + d] as f64;
                    assert!(
                        (got - want).abs() < tol,
                        "{kernel:?} head {h} dim {d}: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn kernel_choice_follows_llama_cpp() {
        assert_eq!(AttnKernel::for_batch(1), AttnKernel::OneRow);
        assert_eq!(AttnKernel::for_batch(63), AttnKernel::OneRow);
        assert_eq!(AttnKernel::for_batch(64), AttnKernel::Tiled);
    }
}

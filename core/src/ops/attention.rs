//! Attention of one query position over the KV cache, all heads, with grouped-query heads
//! reading their shared K/V rows in place (no copies per head).

use half::f16;

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

/// `out[h] = softmax(scale * q[h]·K[t] for t in window) · V` for every head `h`.
///
/// The arithmetic follows ggml's CPU flash-attention kernel for an F16 cache over one tile
/// of keys, so results agree with llama.cpp: `q` is rounded to f16 (in place), the scores
/// are f32, the exponentials are summed in f64, V is accumulated unnormalised in f32 and
/// divided by the sum at the end. `scores` must hold at least `t_end - t_start` values.
#[allow(clippy::too_many_arguments)]
pub fn attend(
    out: &mut [f32],
    q: &mut [f32],
    k_cache: &[f16],
    v_cache: &[f16],
    shape: AttnShape,
    t_start: usize,
    t_end: usize,
    scale: f32,
    softcap: Option<f32>,
    scores: &mut [f32],
) {
    let AttnShape {
        n_head,
        n_head_kv,
        head_dim_k: dk,
        head_dim_v: dv,
    } = shape;
    let group = (n_head / n_head_kv.max(1)).max(1);
    let (k_row, v_row) = (shape.k_row(), shape.v_row());
    q.iter_mut().for_each(|x| *x = f16::from_f32(*x).to_f32());
    let scores = &mut scores[..t_end - t_start];
    for h in 0..n_head {
        let kvh = h / group;
        let qh = &q[h * dk..(h + 1) * dk];
        let mut max = f32::NEG_INFINITY;
        for (i, s) in scores.iter_mut().enumerate() {
            let t = t_start + i;
            let kh = &k_cache[t * k_row + kvh * dk..t * k_row + (kvh + 1) * dk];
            let mut dot = 0.0f32;
            for (a, b) in qh.iter().zip(kh) {
                dot += a * b.to_f32();
            }
            let mut v = dot * scale;
            if let Some(c) = softcap {
                v = c * libm::tanhf(v / c);
            }
            *s = v;
            max = max.max(v);
        }
        let mut sum = 0.0f64;
        for s in scores.iter_mut() {
            *s = libm::expf(*s - max);
            sum += *s as f64;
        }
        let oh = &mut out[h * dv..(h + 1) * dv];
        oh.fill(0.0);
        for (i, &p) in scores.iter().enumerate() {
            let t = t_start + i;
            let vh = &v_cache[t * v_row + kvh * dv..t * v_row + (kvh + 1) * dv];
            for (o, v) in oh.iter_mut().zip(vh) {
                *o += p * v.to_f32();
            }
        }
        let inv = if sum == 0.0 { 0.0 } else { (1.0 / sum) as f32 };
        oh.iter_mut().for_each(|o| *o *= inv);
    }
}

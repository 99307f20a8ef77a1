//! RMS normalisation (ggml_rms_norm followed by the weight multiply).

/// `out = x / sqrt(mean(x²) + eps) * w`. The sum of squares is accumulated in f64 as ggml does.
pub fn rmsnorm(out: &mut [f32], x: &[f32], w: &[f32], eps: f32) {
    let scale = rms_scale(x, eps);
    for ((o, &xi), &wi) in out.iter_mut().zip(x).zip(w) {
        *o = xi * scale * wi;
    }
}

/// In-place variant.
pub fn rmsnorm_inplace(x: &mut [f32], w: &[f32], eps: f32) {
    let scale = rms_scale(x, eps);
    for (xi, &wi) in x.iter_mut().zip(w) {
        *xi = *xi * scale * wi;
    }
}

/// `1 / sqrt(mean(x²) + eps)`: each square in f32 and the sum in f64, as ggml does
/// (`sum += (ggml_float)(x * x)`), over eight running sums so the loop vectorizes instead
/// of waiting on one chain of f64 additions (in f64, the order of a few thousand f32
/// squares does not reach the rounding of the f32 mean).
fn rms_scale(x: &[f32], eps: f32) -> f32 {
    const LANES: usize = 8;
    let mut acc = [0f64; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += (v * v) as f64;
        }
    }
    for (a, &v) in acc.iter_mut().zip(chunks.remainder()) {
        *a += (v * v) as f64;
    }
    let sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    let mean = (sum / x.len().max(1) as f64) as f32;
    1.0 / libm::sqrtf(mean + eps)
}

/// LayerNorm in place (`ggml_norm` followed by the weight multiply and bias add):
/// `x = (x - mean) / sqrt(var + eps) * w + b`, the mean and the variance summed in f64 as
/// ggml does.
pub fn layernorm_inplace(x: &mut [f32], w: &[f32], b: &[f32], eps: f32) {
    let n = x.len().max(1) as f64;
    let mean = (x.iter().map(|&v| v as f64).sum::<f64>() / n) as f32;
    let mut var = 0f64;
    for v in x.iter_mut() {
        *v -= mean;
        var += (*v * *v) as f64;
    }
    let scale = 1.0 / libm::sqrtf((var / n) as f32 + eps);
    for ((v, &wi), &bi) in x.iter_mut().zip(w).zip(b) {
        *v = *v * scale * wi + bi;
    }
}

#[cfg(test)]
mod tests {
    /// Against the definition in f64: zero mean, unit variance, then `w` and `b`.
    #[test]
    fn layernorm_matches_definition() {
        let x: alloc::vec::Vec<f32> = (0..37)
            .map(|i| (i as f32 * 0.37).sin() * 3.0 + 1.5)
            .collect();
        let w: alloc::vec::Vec<f32> = (0..37).map(|i| 0.5 + i as f32 * 0.01).collect();
        let b: alloc::vec::Vec<f32> = (0..37).map(|i| i as f32 * -0.02).collect();
        let mut got = x.clone();
        super::layernorm_inplace(&mut got, &w, &b, 1e-12);
        let mean = x.iter().map(|&v| v as f64).sum::<f64>() / 37.0;
        let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / 37.0;
        for i in 0..37 {
            let want = (x[i] as f64 - mean) / var.sqrt() * w[i] as f64 + b[i] as f64;
            assert!(
                (got[i] as f64 - want).abs() < 1e-5,
                "{i}: {} vs {want}",
                got[i]
            );
        }
    }
}

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

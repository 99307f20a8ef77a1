//! Rotary position embeddings, in ggml's two layouts.

/// How the rotated pairs are laid out in a head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs (`x[2i]`, `x[2i+1]`) — llama, mistral.
    Normal,
    /// Split halves (`x[i]`, `x[i + d/2]`) — qwen2, gemma3, qwen3 (GPT-NeoX).
    Neox,
}

/// Precomputed cos/sin for one position: `n_rot/2` pairs.
pub struct RopeTable<'a> {
    pub cos: &'a [f32],
    pub sin: &'a [f32],
}

/// Fills `cos`/`sin` (each `n_rot/2` long) for position `pos`, the way ggml does:
/// theta starts at `pos * freq_scale` and is multiplied by `base^(-2/n_rot)` per pair,
/// optionally divided by per-pair frequency factors (llama 3.1 `rope_freqs`).
pub fn rope_cache(
    pos: usize,
    n_rot: usize,
    base: f32,
    freq_scale: f32,
    freq_factors: Option<&[f32]>,
    cos: &mut [f32],
    sin: &mut [f32],
) {
    let theta_scale = libm::powf(base, -2.0 / n_rot as f32);
    let mut theta = pos as f32;
    for i in 0..n_rot / 2 {
        let ff = freq_factors.and_then(|f| f.get(i).copied()).unwrap_or(1.0);
        let t = freq_scale * (theta / ff);
        cos[i] = libm::cosf(t);
        sin[i] = libm::sinf(t);
        theta *= theta_scale;
    }
}

/// Rotates the first `2 * table.cos.len()` dims of every head in `x` (`n_heads` heads of
/// `head_dim`).
pub fn apply(x: &mut [f32], head_dim: usize, style: RopeStyle, table: &RopeTable<'_>) {
    let half = table.cos.len();
    for head in x.chunks_exact_mut(head_dim) {
        for i in 0..half {
            let (a, b) = match style {
                RopeStyle::Normal => (2 * i, 2 * i + 1),
                RopeStyle::Neox => (i, i + half),
            };
            let (x0, x1) = (head[a], head[b]);
            let (c, s) = (table.cos[i], table.sin[i]);
            head[a] = x0 * c - x1 * s;
            head[b] = x0 * s + x1 * c;
        }
    }
}

/// The average of [`rope_cache`]'s tables over positions `0..n_pos`. RoPE is linear in the
/// table, so rotating a vector with it gives the mean of that vector's rotations over those
/// positions: pairs that turn slowly keep their value, fast ones average out to zero. Each
/// pair's `(1/n) Σ e^{i p θ}` is summed in closed form (f64).
pub fn mean_table(
    n_pos: usize,
    n_rot: usize,
    base: f32,
    freq_scale: f32,
    freq_factors: Option<&[f32]>,
    cos: &mut [f32],
    sin: &mut [f32],
) {
    let n = n_pos.max(1) as f64;
    let theta_scale = libm::pow(base as f64, -2.0 / n_rot as f64);
    let mut theta = 1.0f64;
    for i in 0..n_rot / 2 {
        let ff = freq_factors.and_then(|f| f.get(i).copied()).unwrap_or(1.0) as f64;
        let t = freq_scale as f64 * theta / ff;
        // Σ_{p<n} e^{ipt} = e^{i(n-1)t/2} · sin(nt/2) / sin(t/2)
        let half = libm::sin(t / 2.0);
        let amp = if half.abs() < 1e-12 {
            1.0
        } else {
            libm::sin(n * t / 2.0) / (n * half)
        };
        let phase = (n - 1.0) * t / 2.0;
        cos[i] = (amp * libm::cos(phase)) as f32;
        sin[i] = (amp * libm::sin(phase)) as f32;
        theta *= theta_scale;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the average of the per-position tables, summed directly.
    #[test]
    fn mean_table_is_the_average_rotation() {
        let (n_rot, n_pos) = (64, 300);
        let factors: alloc::vec::Vec<f32> = (0..n_rot / 2).map(|i| 1.0 + i as f32 / 8.0).collect();
        for (base, scale, ff) in [(1e4, 1.0, None), (1e6, 0.5, Some(&factors[..]))] {
            let (mut c, mut s) = ([0.0f32; 32], [0.0f32; 32]);
            mean_table(n_pos, n_rot, base, scale, ff, &mut c, &mut s);
            let (mut sc, mut ss) = ([0.0f64; 32], [0.0f64; 32]);
            let (mut pc, mut ps) = ([0.0f32; 32], [0.0f32; 32]);
            for p in 0..n_pos {
                rope_cache(p, n_rot, base, scale, ff, &mut pc, &mut ps);
                for i in 0..n_rot / 2 {
                    sc[i] += pc[i] as f64 / n_pos as f64;
                    ss[i] += ps[i] as f64 / n_pos as f64;
                }
            }
            for i in 0..n_rot / 2 {
                assert!(
                    (c[i] as f64 - sc[i]).abs() < 1e-4,
                    "cos {i}: {} vs {}",
                    c[i],
                    sc[i]
                );
                assert!(
                    (s[i] as f64 - ss[i]).abs() < 1e-4,
                    "sin {i}: {} vs {}",
                    s[i],
                    ss[i]
                );
            }
            // the fastest pair averages out, the slowest barely moves
            assert!(c[0].abs() < 0.05 && s[0].abs() < 0.05);
            assert!(c[n_rot / 2 - 1] > 0.9);
        }
    }
}

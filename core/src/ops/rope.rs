//! Rotary position embeddings, in ggml's two layouts.

/// How the rotated pairs are laid out in a head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs (x[2i], x[2i+1]) — llama, mistral.
    Normal,
    /// Split halves (x[i], x[i + d/2]) — qwen2, gemma3, qwen3 (GPT-NeoX).
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

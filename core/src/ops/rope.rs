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

/// YaRN's parameters as ggml's `ggml_rope_ext` takes them (llama.cpp's context parameters
/// `yarn_ext_factor`, `yarn_attn_factor`, `yarn_beta_fast`, `yarn_beta_slow`,
/// `n_ctx_orig_yarn`). [`Yarn::NONE`] leaves RoPE as it is: no extrapolation mix and a
/// magnitude of 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Yarn {
    /// Weight of the extrapolated angle in the ramp between the correction dims (0: none).
    pub ext_factor: f32,
    /// Multiplies every cos and sin (times `1 + 0.1 ln(1/freq_scale)` when `ext_factor` is
    /// not 0).
    pub attn_factor: f32,
    pub beta_fast: f32,
    pub beta_slow: f32,
    /// The context the model was trained for before the scaling.
    pub n_ctx_orig: usize,
}

impl Yarn {
    /// Plain RoPE (llama.cpp's values when the scaling type is not `yarn`).
    pub const NONE: Yarn = Yarn {
        ext_factor: 0.0,
        attn_factor: 1.0,
        beta_fast: 32.0,
        beta_slow: 1.0,
        n_ctx_orig: 0,
    };

    /// YaRN for a scaling of `freq_scale` (1 / `rope.scaling.factor`) as llama.cpp's
    /// context sets it up: `ext_factor` 1, the betas 32 and 1, and an `attn_factor` of
    /// `mscale(factor) / (1 + 0.1 ln factor) · rope_attn_factor`, whose division cancels
    /// the `1 + 0.1 ln(1/freq_scale)` that [`rope_cache`] multiplies in again (so cos and
    /// sin end up scaled by about `1 + 0.1 ln factor`). The float operations are
    /// llama.cpp's, in its order, unfused (libllama is built for baseline x86-64).
    pub fn new(freq_scale: f32, n_ctx_orig: usize, rope_attn_factor: f32) -> Yarn {
        let factor = 1.0 / freq_scale;
        let mscale = if factor <= 1.0 {
            1.0
        } else {
            0.1 * 1.0 * libm::logf(factor) + 1.0
        };
        let attn_factor = mscale * (1.0 / (1.0 + 0.1 * libm::logf(factor)));
        Yarn {
            ext_factor: 1.0,
            attn_factor: attn_factor * rope_attn_factor,
            beta_fast: 32.0,
            beta_slow: 1.0,
            n_ctx_orig,
        }
    }
}

/// How one layer's RoPE angles are made: `n_rot` rotated dims, the frequency `base`, the
/// linear `freq_scale`, the model's per-pair frequency divisors (llama 3.1 `rope_freqs`)
/// and YaRN.
#[derive(Debug, Clone, Copy)]
pub struct RopeFreqs<'a> {
    pub n_rot: usize,
    pub base: f32,
    pub freq_scale: f32,
    pub freq_factors: Option<&'a [f32]>,
    pub yarn: Yarn,
}

impl RopeFreqs<'_> {
    /// ggml's `ggml_rope_yarn_corr_dims`: pairs below the first keep their unscaled angle
    /// (extrapolate), pairs past the second take the scaled one (interpolate), a linear
    /// ramp mixes the two between.
    fn corr_dims(&self) -> [f32; 2] {
        let n_dims = self.n_rot as f32;
        let corr_dim = |beta: f32| {
            n_dims * libm::logf(self.yarn.n_ctx_orig as f32 / (beta * 2.0 * core::f32::consts::PI))
                / (2.0 * libm::logf(self.base))
        };
        let start = libm::floorf(corr_dim(self.yarn.beta_fast));
        let end = libm::ceilf(corr_dim(self.yarn.beta_slow));
        // ggml's MAX(0, start) and MIN(n_dims - 1, end)
        let lo = if 0.0 > start { 0.0 } else { start };
        let hi = if n_dims - 1.0 < end {
            n_dims - 1.0
        } else {
            end
        };
        [lo, hi]
    }

    /// The magnitude every cos and sin is multiplied by.
    fn mscale(&self) -> f32 {
        let mut mscale = self.yarn.attn_factor;
        if self.yarn.ext_factor != 0.0 {
            // `1 + 0.1 ln(1/freq_scale)`, fused as GCC compiles ggml-cpu (see `angle`)
            mscale *= libm::fmaf(0.1, libm::logf(1.0 / self.freq_scale), 1.0);
        }
        mscale
    }

    /// The angle of pair `i` given its unscaled angle `theta` (position times the pair's
    /// frequency): ggml's `rope_yarn` without the cos and sin. The mix is one fused
    /// multiply-add, `fma(interp, 1 - mix, extrap · mix)`, as GCC contracts ggml-cpu's
    /// `theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix` on x86-64 with FMA (the
    /// pinned build's `ggml_rope_ext` gives these bits for every pair and position tested;
    /// the unfused sum differs in the last bit now and then).
    #[inline]
    fn angle(&self, theta: f32, i: usize, corr: [f32; 2]) -> f32 {
        let ff = self
            .freq_factors
            .and_then(|f| f.get(i).copied())
            .unwrap_or(1.0);
        let theta_extrap = theta / ff;
        let theta_interp = self.freq_scale * theta_extrap;
        if self.yarn.ext_factor == 0.0 {
            return theta_interp;
        }
        let ramp_mix = yarn_ramp(corr, i) * self.yarn.ext_factor;
        libm::fmaf(theta_interp, 1.0 - ramp_mix, theta_extrap * ramp_mix)
    }
}

/// ggml's `rope_yarn_ramp` for pair `i` (element `i0 = 2i`): 1 below the correction range,
/// 0 above it, linear between.
fn yarn_ramp(corr: [f32; 2], i: usize) -> f32 {
    let (low, high) = (corr[0], corr[1]);
    let d = high - low;
    let y = (i as f32 - low) / if 0.001 > d { 0.001 } else { d };
    // 1 - MIN(1, MAX(0, y))
    let clamped = if 0.0 > y { 0.0 } else { y };
    1.0 - if 1.0 < clamped { 1.0 } else { clamped }
}

/// Fills `cos`/`sin` (each `n_rot/2` long) for position `pos`, the way ggml does
/// (`ggml_rope_cache_init`, `rope_yarn`): theta starts at `pos` and is multiplied by
/// `base^(-2/n_rot)` per pair, divided by the pair's frequency factor, scaled by
/// `freq_scale` (with YaRN: mixed with the unscaled angle along the ramp), and cos and sin
/// are multiplied by the magnitude (1 without YaRN).
pub fn rope_cache(pos: usize, r: &RopeFreqs<'_>, cos: &mut [f32], sin: &mut [f32]) {
    let theta_scale = libm::powf(r.base, -2.0 / r.n_rot as f32);
    let corr = if r.yarn.ext_factor != 0.0 {
        r.corr_dims()
    } else {
        [0.0; 2]
    };
    let mscale = r.mscale();
    let mut theta = pos as f32;
    for i in 0..r.n_rot / 2 {
        let t = r.angle(theta, i, corr);
        cos[i] = libm::cosf(t) * mscale;
        sin[i] = libm::sinf(t) * mscale;
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
/// pair's `(1/n) Σ e^{i p θ}` is summed in closed form (f64; a pair's angle is linear in the
/// position, YaRN's too).
pub fn mean_table(n_pos: usize, r: &RopeFreqs<'_>, cos: &mut [f32], sin: &mut [f32]) {
    let n = n_pos.max(1) as f64;
    let theta_scale = libm::pow(r.base as f64, -2.0 / r.n_rot as f64);
    let corr = r.corr_dims();
    let mscale = r.mscale() as f64;
    let mut theta = 1.0f64;
    for i in 0..r.n_rot / 2 {
        let ff = r
            .freq_factors
            .and_then(|f| f.get(i).copied())
            .unwrap_or(1.0) as f64;
        let extrap = theta / ff;
        let interp = r.freq_scale as f64 * extrap;
        let t = if r.yarn.ext_factor == 0.0 {
            interp
        } else {
            let mix = (yarn_ramp(corr, i) * r.yarn.ext_factor) as f64;
            interp * (1.0 - mix) + extrap * mix
        };
        // Σ_{p<n} e^{ipt} = e^{i(n-1)t/2} · sin(nt/2) / sin(t/2)
        let half = libm::sin(t / 2.0);
        let amp = if half.abs() < 1e-12 {
            1.0
        } else {
            libm::sin(n * t / 2.0) / (n * half)
        };
        let phase = (n - 1.0) * t / 2.0;
        cos[i] = (mscale * amp * libm::cos(phase)) as f32;
        sin[i] = (mscale * amp * libm::sin(phase)) as f32;
        theta *= theta_scale;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    fn plain(n_rot: usize, base: f32, freq_scale: f32, ff: Option<&[f32]>) -> RopeFreqs<'_> {
        RopeFreqs {
            n_rot,
            base,
            freq_scale,
            freq_factors: ff,
            yarn: Yarn::NONE,
        }
    }

    /// gpt-oss-20b's RoPE: 64 dims, base 150000, YaRN factor 32 over 4096 positions.
    fn gpt_oss() -> RopeFreqs<'static> {
        RopeFreqs {
            n_rot: 64,
            base: 150_000.0,
            freq_scale: 1.0 / 32.0,
            freq_factors: None,
            yarn: Yarn::new(1.0 / 32.0, 4096, 1.0),
        }
    }

    /// ggml's formulas (`ggml_rope_yarn_corr_dims`, `rope_yarn_ramp`, `rope_yarn`) and
    /// llama.cpp's attention factor, transcribed naively in f64.
    fn naive_f64(pos: usize, r: &RopeFreqs<'_>) -> (Vec<f64>, Vec<f64>) {
        let (n_dims, base) = (r.n_rot as f64, r.base as f64);
        let fs = r.freq_scale as f64;
        let y = r.yarn;
        let corr_dim = |beta: f64| {
            n_dims * (y.n_ctx_orig as f64 / (beta * 2.0 * core::f64::consts::PI)).ln()
                / (2.0 * base.ln())
        };
        let lo = corr_dim(y.beta_fast as f64).floor().max(0.0);
        let hi = corr_dim(y.beta_slow as f64).ceil().min(n_dims - 1.0);
        let mut mscale = y.attn_factor as f64;
        if y.ext_factor != 0.0 {
            mscale *= 1.0 + 0.1 * (1.0 / fs).ln();
        }
        let (mut c, mut s) = (vec![], vec![]);
        for i in 0..r.n_rot / 2 {
            let ff = r.freq_factors.map_or(1.0, |f| f[i] as f64);
            let extrap = pos as f64 * base.powf(-2.0 * i as f64 / n_dims) / ff;
            let interp = fs * extrap;
            let mut theta = interp;
            if y.ext_factor != 0.0 {
                let ramp = 1.0 - ((i as f64 - lo) / (hi - lo).max(0.001)).clamp(0.0, 1.0);
                let mix = ramp * y.ext_factor as f64;
                theta = interp * (1.0 - mix) + extrap * mix;
            }
            c.push(theta.cos() * mscale);
            s.push(theta.sin() * mscale);
        }
        (c, s)
    }

    /// Every pair at several positions against the f64 transcription (the f32 angle's
    /// rounding grows with the position, as it does in ggml).
    #[test]
    fn yarn_tables_match_ggml_formulas() {
        let factors: Vec<f32> = (0..32).map(|i| 1.0 + i as f32 / 16.0).collect();
        let with_factors = RopeFreqs {
            freq_factors: Some(&factors),
            yarn: Yarn::new(0.25, 2048, 0.9),
            base: 10_000.0,
            freq_scale: 0.25,
            n_rot: 64,
        };
        for r in [gpt_oss(), with_factors, plain(64, 1e6, 0.5, None)] {
            for pos in [0usize, 1, 2, 17, 130, 4095, 20_000] {
                let (mut c, mut s) = ([0.0f32; 32], [0.0f32; 32]);
                rope_cache(pos, &r, &mut c, &mut s);
                let (wc, ws) = naive_f64(pos, &r);
                let tol = 2e-6 * (1.0 + pos as f64);
                for i in 0..32 {
                    assert!(
                        (c[i] as f64 - wc[i]).abs() < tol && (s[i] as f64 - ws[i]).abs() < tol,
                        "pos {pos} pair {i}: ({}, {}) vs ({}, {})",
                        c[i],
                        s[i],
                        wc[i],
                        ws[i]
                    );
                }
            }
        }
    }

    /// Correction dims, ramp, angles and magnitude worked out by hand. 8 dims, base 10^4,
    /// factor 4, 64 original positions: corr_dim(32) = 8 ln(64 / 64π) / (2 ln 10^4) = -0.497
    /// (floor -1, clamped to 0), corr_dim(1) = 8 ln(64 / 2π) / (2 ln 10^4) = 1.008 (ceil 2),
    /// so the ramp is 1, 0.5, 0, 0 over the four pairs; the unscaled angles are p·10^-i,
    /// pair 0 keeps its own, pair 1 mixes half of it with a quarter of it (0.625), pairs 2
    /// and 3 take a quarter; cos and sin are scaled by 1 + 0.1 ln 4 = 1.1386294.
    #[test]
    fn yarn_by_hand() {
        let r = RopeFreqs {
            n_rot: 8,
            base: 10_000.0,
            freq_scale: 0.25,
            freq_factors: None,
            yarn: Yarn::new(0.25, 64, 1.0),
        };
        assert_eq!(r.corr_dims(), [0.0, 2.0]);
        let g = gpt_oss();
        // gpt-oss: 64 ln(4096 / 64π) / (2 ln 150000) = 8.09, 64 ln(4096 / 2π) / (…) = 17.39
        assert_eq!(g.corr_dims(), [8.0, 18.0]);
        assert!((g.mscale() - 1.346_573_6).abs() < 1e-6, "{}", g.mscale());
        let mscale = 1.138_629_4f64;
        for p in [1usize, 3, 10, 50] {
            let p64 = p as f64;
            let angles = [p64, 0.0625 * p64, 0.0025 * p64, 0.000_25 * p64];
            let (mut c, mut s) = ([0.0f32; 4], [0.0f32; 4]);
            rope_cache(p, &r, &mut c, &mut s);
            for i in 0..4 {
                let (wc, ws) = (angles[i].cos() * mscale, angles[i].sin() * mscale);
                assert!(
                    (c[i] as f64 - wc).abs() < 1e-5 && (s[i] as f64 - ws).abs() < 1e-5,
                    "pos {p} pair {i}: ({}, {}) vs ({wc}, {ws})",
                    c[i],
                    s[i]
                );
            }
            // both layouts rotate their pairs by those angles and scale them by mscale
            let x: Vec<f32> = (0..8).map(|j| 0.3 + j as f32 * 0.1).collect();
            for style in [RopeStyle::Normal, RopeStyle::Neox] {
                let mut y = x.clone();
                apply(&mut y, 8, style, &RopeTable { cos: &c, sin: &s });
                for (i, angle) in angles.iter().enumerate() {
                    let (a, b) = match style {
                        RopeStyle::Normal => (2 * i, 2 * i + 1),
                        RopeStyle::Neox => (i, i + 4),
                    };
                    let (x0, x1) = (x[a] as f64, x[b] as f64);
                    let (co, si) = (angle.cos() * mscale, angle.sin() * mscale);
                    let (w0, w1) = (x0 * co - x1 * si, x0 * si + x1 * co);
                    assert!(
                        (y[a] as f64 - w0).abs() < 1e-5,
                        "{style:?} pos {p} pair {i}"
                    );
                    assert!(
                        (y[b] as f64 - w1).abs() < 1e-5,
                        "{style:?} pos {p} pair {i}"
                    );
                }
            }
        }
    }

    /// Bits the pinned llama.cpp build's `ggml_rope_ext` gives (run on vectors of ones, so
    /// its output is its cos and sin table) at pairs inside the ramp, where an unfused mix
    /// of the angles would round differently: gpt-oss's parameters, and base 10^4 with
    /// factor 4 over 2048 positions. (Elsewhere the tables agree with it but where `libm`'s
    /// `cosf` / `sinf` round differently from glibc's: 6 of 1,536 values, by 1–2 ulp.)
    #[test]
    fn yarn_matches_pinned_ggml_bits() {
        let other = RopeFreqs {
            n_rot: 64,
            base: 10_000.0,
            freq_scale: 0.25,
            freq_factors: None,
            yarn: Yarn::new(0.25, 2048, 1.0),
        };
        // (parameters, position, pair, cos or sin, bits)
        let want = [
            (gpt_oss(), 4095, 15, 0, 0x3e9af91e),
            (gpt_oss(), 4095, 15, 1, 0xbfa7f35d),
            (gpt_oss(), 4095, 17, 0, 0x3f4d222c),
            (gpt_oss(), 20000, 16, 0, 0x3f493dc0),
            (gpt_oss(), 20000, 16, 1, 0xbf8bf153),
            (gpt_oss(), 20000, 17, 0, 0xbe52bd1d),
            (gpt_oss(), 20000, 17, 1, 0xbfaa5628),
            (other, 17, 12, 1, 0x3eea4404),
            (other, 4095, 11, 0, 0xbe2910be),
            (other, 4095, 11, 1, 0xbf90344a),
            (other, 131071, 14, 0, 0xbf8a7696),
            (other, 131071, 14, 1, 0xbeb5f69c),
        ];
        for (r, pos, pair, which, bits) in want {
            let (mut c, mut s) = ([0.0f32; 32], [0.0f32; 32]);
            rope_cache(pos, &r, &mut c, &mut s);
            let got = [c[pair], s[pair]][which];
            assert_eq!(got.to_bits(), bits, "pos {pos} pair {pair}: {got}");
        }
    }

    /// Without YaRN the tables are what they were: `cos(freq_scale · θ / ff)`, bit for bit.
    #[test]
    fn plain_rope_is_unchanged() {
        let factors: Vec<f32> = (0..16).map(|i| 1.0 + i as f32 / 3.0).collect();
        for (scale, ff) in [(1.0f32, None), (0.25, Some(&factors[..]))] {
            let r = plain(32, 5e5, scale, ff);
            for pos in [0usize, 5, 999] {
                let (mut c, mut s) = ([0.0f32; 16], [0.0f32; 16]);
                rope_cache(pos, &r, &mut c, &mut s);
                let ts = libm::powf(5e5, -2.0 / 32.0);
                let mut theta = pos as f32;
                for i in 0..16 {
                    let f = ff.map_or(1.0, |f| f[i]);
                    let t = scale * (theta / f);
                    assert_eq!(c[i].to_bits(), libm::cosf(t).to_bits());
                    assert_eq!(s[i].to_bits(), libm::sinf(t).to_bits());
                    theta *= ts;
                }
            }
        }
    }

    /// Against the average of the per-position tables, summed directly.
    #[test]
    fn mean_table_is_the_average_rotation() {
        let (n_rot, n_pos) = (64, 300);
        let factors: Vec<f32> = (0..n_rot / 2).map(|i| 1.0 + i as f32 / 8.0).collect();
        let yarn = RopeFreqs {
            yarn: Yarn::new(0.125, 256, 1.0),
            ..plain(n_rot, 1e4, 0.125, None)
        };
        let cases = [
            plain(n_rot, 1e4, 1.0, None),
            plain(n_rot, 1e6, 0.5, Some(&factors[..])),
            yarn,
        ];
        for (ci, r) in cases.iter().enumerate() {
            let (mut c, mut s) = ([0.0f32; 32], [0.0f32; 32]);
            mean_table(n_pos, r, &mut c, &mut s);
            let (mut sc, mut ss) = ([0.0f64; 32], [0.0f64; 32]);
            let (mut pc, mut ps) = ([0.0f32; 32], [0.0f32; 32]);
            for p in 0..n_pos {
                rope_cache(p, r, &mut pc, &mut ps);
                for i in 0..n_rot / 2 {
                    sc[i] += pc[i] as f64 / n_pos as f64;
                    ss[i] += ps[i] as f64 / n_pos as f64;
                }
            }
            for i in 0..n_rot / 2 {
                assert!(
                    (c[i] as f64 - sc[i]).abs() < 1e-4,
                    "case {ci} cos {i}: {} vs {}",
                    c[i],
                    sc[i]
                );
                assert!(
                    (s[i] as f64 - ss[i]).abs() < 1e-4,
                    "case {ci} sin {i}: {} vs {}",
                    s[i],
                    ss[i]
                );
            }
            // the fastest pair averages out, the slowest barely moves (YaRN's by its
            // magnitude)
            let m = r.mscale();
            assert!(c[0].abs() < 0.05 * m && s[0].abs() < 0.05 * m);
            assert!(c[n_rot / 2 - 1] > 0.9 * m);
        }
    }
}

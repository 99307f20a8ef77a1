//! Gated feed-forward activations.

use half::f16;

/// SiLU-gated: `gate = silu(gate) * up`.
pub fn swiglu(gate: &mut [f32], up: &[f32]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = *g / (1.0 + libm::expf(-*g)) * u;
    }
}

/// gpt-oss's clamped SwiGLU (`ggml_swiglu_oai` with llama.cpp's alpha 1.702 and limit 7):
/// see [`swiglu_oai_with`].
pub fn swiglu_oai(gate: &mut [f32], up: &[f32]) {
    swiglu_oai_with(gate, up, SWIGLU_OAI_ALPHA, SWIGLU_OAI_LIMIT);
}

/// llama.cpp's gpt-oss constants (`LLM_FFN_SWIGLU_OAI_MOE` in `build_moe_ffn`).
pub const SWIGLU_OAI_ALPHA: f32 = 1.702;
pub const SWIGLU_OAI_LIMIT: f32 = 7.0;

/// `gate = x / (1 + e^(alpha · -x)) · (y + 1)` with `x = min(gate, limit)` and `y =
/// clamp(up, -limit, limit)`, in ggml-cpu's order of operations
/// (`ggml_compute_forward_swiglu_oai_f32`; `std::min` and `std::clamp`, so a NaN input
/// stays NaN) with glibc's `expf` ([`super::expf`]): the pinned build's bits.
pub fn swiglu_oai_with(gate: &mut [f32], up: &[f32], alpha: f32, limit: f32) {
    for (g, &u) in gate.iter_mut().zip(up) {
        // std::min(g, limit): limit < g ? limit : g
        let x = if limit < *g { limit } else { *g };
        // std::clamp(u, -limit, limit): u < -limit ? -limit : (limit < u ? limit : u)
        let y = if u < -limit {
            -limit
        } else if limit < u {
            limit
        } else {
            u
        };
        let glu = x / (1.0 + super::expf::expf(alpha * -x));
        *g = glu * (y + 1.0);
    }
}

/// GELU (tanh approximation) gated: `gate = gelu(gate) * up`.
///
/// ggml evaluates GELU through a table indexed by the f16 value of the input (GGML_GELU_FP16),
/// so the input and result are rounded to f16; we do the same to agree with llama.cpp.
pub fn geglu(gate: &mut [f32], up: &[f32]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = gelu_f16_table(*g) * u;
    }
}

/// GELU in its erf form, in place: `x · (1 + erf(x / √2)) / 2` (PyTorch's and Hugging
/// Face's `"gelu"`, which BERT encoders were trained with).
pub fn gelu_erf(x: &mut [f32]) {
    const FRAC_1_SQRT_2: f32 = core::f32::consts::FRAC_1_SQRT_2;
    for v in x {
        *v = 0.5 * *v * (1.0 + libm::erff(*v * FRAC_1_SQRT_2));
    }
}

pub fn gelu(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    const COEF_A: f32 = 0.044715;
    0.5 * x * (1.0 + libm::tanhf(SQRT_2_OVER_PI * x * (1.0 + COEF_A * x * x)))
}

/// `gelu` of every f16 value, rounded to f16: ggml's GGML_GELU_FP16 table, built once
/// (65,536 entries, 128 KiB) the first time a GELU model runs. One more zero entry follows
/// the last, so that a SIMD gather may read four bytes at any entry.
pub(crate) fn gelu_table() -> &'static [u16] {
    static TABLE: spin::Once<alloc::vec::Vec<u16>> = spin::Once::new();
    TABLE.call_once(|| {
        (0..=u16::MAX)
            .map(|h| f16::from_f32(gelu(f16::from_bits(h).to_f32())).to_bits())
            .chain([0])
            .collect()
    })
}

/// Inputs at or below this give 0, at or above [`GELU_IDENTITY`] themselves (ggml's bounds).
pub(crate) const GELU_ZERO: f32 = -10.0;
pub(crate) const GELU_IDENTITY: f32 = 10.0;

fn gelu_f16_table(x: f32) -> f32 {
    if x <= GELU_ZERO {
        0.0
    } else if x >= GELU_IDENTITY {
        x
    } else {
        f16::from_bits(gelu_table()[f16::from_f32(x).to_bits() as usize]).to_f32()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against ggml's formula in f64 (the clamps are exact, the rest rounds once in f32),
    /// and its limits worked out: a gate above 7 acts as 7, an up outside ±7 as ±7.
    #[test]
    fn swiglu_oai_is_ggml_formula() {
        let gates = [
            -30.0f32, -7.5, -2.0, -0.3, 0.0, 1e-4, 0.9, 3.3, 6.99, 7.0, 7.01, 50.0,
        ];
        let ups = [
            -100.0f32, -7.2, -7.0, -1.0, -0.5, 0.0, 0.25, 2.0, 6.5, 7.0, 9.0, 1e6,
        ];
        for &g in &gates {
            for &u in &ups {
                let mut got = [g];
                swiglu_oai(&mut got, &[u]);
                let x = (g as f64).min(7.0);
                let y = (u as f64).clamp(-7.0, 7.0);
                let want = x / (1.0 + (-(1.702f32 as f64) * x).exp()) * (y + 1.0);
                assert!(
                    (got[0] as f64 - want).abs() <= 1e-6 * want.abs() + 1e-30,
                    "swiglu_oai({g}, {u}) = {} vs {want}",
                    got[0]
                );
            }
        }
        // the clamps: above the limit the gate saturates, the up term is cut at ±limit
        let (mut a, mut b) = ([7.0f32, -7.0, 0.5], [50.0f32, -1e9, 0.5]);
        swiglu_oai(&mut a, &[1.0, 1.0, 7.0]);
        swiglu_oai(&mut b, &[1.0, 1.0, 70.0]);
        assert_eq!(a[0].to_bits(), b[0].to_bits());
        assert_eq!(a[2].to_bits(), b[2].to_bits());
        // x·σ(1.702·x)·(y+1) at x = 1, y = 0, by hand: 1 / (1 + e^-1.702) = 1 / 1.182319
        let mut one = [1.0f32];
        swiglu_oai(&mut one, &[0.0]);
        assert!((one[0] - 0.845_796).abs() < 1e-6, "{}", one[0]);
        // bits the pinned llama.cpp build's `ggml_swiglu_oai` gives (glibc's expf; libm's
        // would differ in the last bit at the first two)
        for (g, u, bits) in [
            (-14.0f32 + 0.00731, 9.0f32 - 0.00457, 0xb1ae9cc5u32),
            (-14.0 + 9.0 * 0.00731, 9.0 - 9.0 * 0.00457, 0xb1c0148e),
        ] {
            let mut y = [g];
            swiglu_oai(&mut y, &[u]);
            assert_eq!(y[0].to_bits(), bits, "swiglu_oai({g}, {u})");
        }
        // up = -1 zeroes the output whatever the gate; a NaN stays NaN (std::min/clamp)
        let mut z = [5.0f32, f32::NAN, 1.0];
        swiglu_oai(&mut z, &[-1.0, 1.0, f32::NAN]);
        assert_eq!(z[0], 0.0);
        assert!(z[1].is_nan() && z[2].is_nan());
    }

    #[test]
    fn gelu_table_is_gelu_of_the_f16_input_rounded_to_f16() {
        for x in [
            -9.99f32, -3.3, -0.7, -1e-3, 0.0, 1e-5, 0.4, 1.0, 2.5, 7.77, 9.99,
        ] {
            let h = f16::from_f32(x).to_f32();
            let want = f16::from_f32(gelu(h)).to_f32();
            assert_eq!(gelu_f16_table(x).to_bits(), want.to_bits(), "x = {x}");
        }
        assert_eq!(gelu_f16_table(-12.0), 0.0);
        assert_eq!(gelu_f16_table(12.5), 12.5);
        assert!(gelu_f16_table(f32::NAN).is_nan());
    }
}

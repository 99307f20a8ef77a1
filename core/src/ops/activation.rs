//! Gated feed-forward activations.

use half::f16;

/// SiLU-gated: `gate = silu(gate) * up`.
pub fn swiglu(gate: &mut [f32], up: &[f32]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = *g / (1.0 + libm::expf(-*g)) * u;
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

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

fn gelu_f16_table(x: f32) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        let h = f16::from_f32(x).to_f32();
        f16::from_f32(gelu(h)).to_f32()
    }
}

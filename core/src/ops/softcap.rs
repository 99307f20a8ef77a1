//! Logit soft-capping (Gemma 2's final logits): `cap · tanh(x / cap)`, which keeps every
//! value inside `(-cap, cap)` and leaves small ones almost unchanged.

/// `x = cap · tanh(x · (1 / cap))` for every value, in llama.cpp's order of operations
/// (`ggml_scale` by `1 / cap`, `ggml_tanh`, `ggml_scale` by `cap`).
pub fn softcap(x: &mut [f32], cap: f32) {
    let inv = 1.0 / cap;
    x.iter_mut().for_each(|v| *v = libm::tanhf(*v * inv) * cap);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_odd_and_nearly_identity_near_zero() {
        let cap = 30.0f32;
        let mut x = [-1e6f32, -90.0, -3.0, -1e-3, 0.0, 1e-3, 3.0, 90.0, 1e6];
        let orig = x;
        softcap(&mut x, cap);
        for (i, (&y, &o)) in x.iter().zip(&orig).enumerate() {
            assert!(y.abs() <= cap, "{o} -> {y}");
            // odd
            assert_eq!(y, -x[orig.len() - 1 - i]);
            // tanh(t) = t - t^3/3 + ...: within (x / cap)^2 / 3 of x, relatively
            let t = (o / cap) as f64;
            if t.abs() < 0.2 {
                assert!((y as f64 - o as f64).abs() <= o.abs() as f64 * t * t / 3.0 * 1.01 + 1e-9);
            }
        }
        // 90 = 3 caps: 30 tanh(3) = 29.8511
        assert!((x[7] - 29.851_1).abs() < 1e-3, "{}", x[7]);
        assert_eq!(x[8], cap);
    }
}

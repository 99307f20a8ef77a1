//! The router: from one token's router logits to the experts it uses and their weights, as
//! llama.cpp's `build_moe_ffn` computes them (softmax or softmax-of-the-chosen, top-k,
//! optional renormalisation).

use super::config::Gating;

/// Chooses `ids.len()` experts for one token from `logits` (one per expert, the router's
/// bias already added) and writes their weights; `probs` is scratch of `logits.len()`.
/// The experts come in descending order of their score (ties: the lower index first), the
/// order in which their outputs are summed.
pub fn route(
    gating: Gating,
    norm_weights: bool,
    logits: &[f32],
    probs: &mut [f32],
    ids: &mut [u32],
    weights: &mut [f32],
) {
    let k = ids.len();
    debug_assert!(k <= logits.len() && weights.len() == k && probs.len() == logits.len());
    let scores: &[f32] = match gating {
        Gating::Softmax => {
            softmax(logits, probs);
            probs
        }
        Gating::SoftmaxSelected => logits,
    };
    top_k(scores, ids);
    for (w, &e) in weights.iter_mut().zip(ids.iter()) {
        *w = scores[e as usize];
    }
    if gating == Gating::SoftmaxSelected {
        let mut chosen = [0f32; MAX_USED];
        let chosen = &mut chosen[..k];
        chosen.copy_from_slice(weights);
        softmax(chosen, weights);
    }
    if norm_weights {
        // ggml: the sum in double, clamped to f16's smallest normal, then a float division
        let sum: f64 = weights.iter().map(|&w| w as f64).sum();
        let sum = (sum as f32).max(6.103_515_6e-5);
        weights.iter_mut().for_each(|w| *w /= sum);
    }
}

/// The most experts one token may use (llama.cpp has no model above 32).
pub const MAX_USED: usize = 64;

/// ggml's `soft_max`: `exp(x - max)`, summed in double, scaled by the sum's inverse.
fn softmax(x: &[f32], out: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f64;
    for (o, &v) in out.iter_mut().zip(x) {
        *o = libm::expf(v - max);
        sum += *o as f64;
    }
    let inv = (1.0 / sum) as f32;
    out.iter_mut().for_each(|o| *o *= inv);
}

/// The indices of the `ids.len()` largest scores, largest first (ties: lower index first;
/// NaN never wins over a number).
fn top_k(scores: &[f32], ids: &mut [u32]) {
    let key = |s: f32| if s.is_nan() { f32::NEG_INFINITY } else { s };
    let mut taken = [0u64; super::config::MAX_EXPERTS / 64];
    for slot in ids.iter_mut() {
        let mut best: Option<usize> = None;
        for (e, &s) in scores.iter().enumerate() {
            if taken[e / 64] >> (e % 64) & 1 == 1 {
                continue;
            }
            if best.is_none_or(|b| key(s) > key(scores[b])) {
                best = Some(e);
            }
        }
        let e = best.unwrap_or(0);
        taken[e / 64] |= 1 << (e % 64);
        *slot = e as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_router_renormalises_the_top_k() {
        let logits = [0.5f32, 2.0, -1.0, 1.0];
        let mut probs = [0f32; 4];
        let (mut ids, mut w) = ([0u32; 2], [0f32; 2]);
        route(Gating::Softmax, true, &logits, &mut probs, &mut ids, &mut w);
        assert_eq!(ids, [1, 3]);
        let (a, b) = (2.0f64.exp(), 1.0f64.exp());
        assert!((w[0] as f64 - a / (a + b)).abs() < 1e-6);
        assert!((w[0] + w[1] - 1.0).abs() < 1e-6);
        // unnormalised: the probabilities over all four experts
        route(
            Gating::Softmax,
            false,
            &logits,
            &mut probs,
            &mut ids,
            &mut w,
        );
        let total: f64 = logits.iter().map(|&l| (l as f64).exp()).sum();
        assert!((w[1] as f64 - b / total).abs() < 1e-6);
    }

    #[test]
    fn softmax_of_the_selected_logits() {
        let logits = [3.0f32, -2.0, 0.0, 3.5, 1.0];
        let (mut probs, mut ids, mut w) = ([0f32; 5], [0u32; 3], [0f32; 3]);
        route(
            Gating::SoftmaxSelected,
            false,
            &logits,
            &mut probs,
            &mut ids,
            &mut w,
        );
        assert_eq!(ids, [3, 0, 4]);
        let z: f64 = [3.5f64, 3.0, 1.0].iter().map(|l| l.exp()).sum();
        for (w, l) in w.iter().zip([3.5f64, 3.0, 1.0]) {
            assert!((*w as f64 - l.exp() / z).abs() < 1e-6);
        }
    }

    #[test]
    fn ties_and_nan_choose_deterministically() {
        let logits = [1.0f32, f32::NAN, 1.0, 1.0];
        let (mut probs, mut ids, mut w) = ([0f32; 4], [0u32; 3], [0f32; 3]);
        route(
            Gating::SoftmaxSelected,
            false,
            &logits,
            &mut probs,
            &mut ids,
            &mut w,
        );
        assert_eq!(ids, [0, 2, 3]);
        assert!(w.iter().all(|w| (w - 1.0 / 3.0).abs() < 1e-6));
    }
}

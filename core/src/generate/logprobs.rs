//! Log-probabilities of generated tokens (OpenAI's `logprobs` / `top_logprobs`): the model's
//! distribution at a position, before any sampling transform.

use alloc::vec::Vec;

/// The most alternatives a request may ask log-probabilities of (OpenAI's limit).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// A generated token's log-probability under the model (before any sampling transform),
/// and the most likely tokens at its position.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprob {
    pub logprob: f32,
    /// Most likely first (as many as the request asked for).
    pub top: Vec<(u32, f32)>,
}

/// The log-softmax normaliser of `logits` (log Σ exp) and its `n` most likely tokens with
/// their log-probabilities, most likely first (ties: the lower id first). One pass for the
/// maximum, one for the sum and the top list (at most `n` entries, kept sorted by
/// insertion).
pub fn log_softmax_top(logits: &[f32], n: usize) -> (f32, Vec<(u32, f32)>) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f64;
    let mut top: Vec<(u32, f32)> = Vec::with_capacity(n + 1);
    for (i, &l) in logits.iter().enumerate() {
        sum += libm::exp((l - max) as f64);
        if n > 0 && (top.len() < n || l > top[top.len() - 1].1) {
            let at = top.partition_point(|&(_, t)| t >= l);
            top.insert(at, (i as u32, l));
            top.truncate(n);
        }
    }
    let lse = max + libm::log(sum) as f32;
    for t in &mut top {
        t.1 -= lse;
    }
    (lse, top)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_tokens_and_normaliser() {
        let logits = [0.0f32, 2.0, 1.0, 2.0];
        let (lse, top) = log_softmax_top(&logits, 3);
        let want = libm::log(1.0 + libm::exp(2.0) * 2.0 + libm::exp(1.0)) as f32;
        assert!((lse - want).abs() < 1e-6);
        // ties: the lower id first
        assert_eq!(
            top.iter().map(|t| t.0).collect::<Vec<_>>(),
            alloc::vec![1, 3, 2]
        );
        let p: f64 = logits.iter().map(|&l| libm::exp((l - lse) as f64)).sum();
        assert!((p - 1.0).abs() < 1e-6);
    }
}

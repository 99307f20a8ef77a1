//! Repetition, frequency and presence penalties (llama.cpp `llama_sampler_penalties`).

use alloc::vec::Vec;

use super::SamplerConfig;

/// Penalises every token seen in `window`: a positive logit is divided by the repeat
/// penalty, a negative one multiplied; then `count * frequency + presence` is subtracted.
pub fn apply(
    cfg: &SamplerConfig,
    logits: &mut [f32],
    window: &[u32],
    counts: &mut Vec<(u32, u32)>,
) {
    counts.clear();
    counts.extend(window.iter().map(|&t| (t, 1)));
    counts.sort_unstable_by_key(|c| c.0);
    counts.dedup_by(|next, first| {
        if next.0 == first.0 {
            first.1 += 1;
            true
        } else {
            false
        }
    });
    for &(tok, n) in counts.iter() {
        let Some(l) = logits.get_mut(tok as usize) else {
            continue;
        };
        if *l > 0.0 {
            *l /= cfg.repeat_penalty;
        } else {
            *l *= cfg.repeat_penalty;
        }
        *l -= n as f32 * cfg.frequency_penalty + cfg.presence_penalty;
    }
}

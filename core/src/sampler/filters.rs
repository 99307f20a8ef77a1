//! Candidate filters: top-k, top-p (nucleus), min-p, and the temperature softmax.

use alloc::vec::Vec;

use super::{Candidate, SamplerConfig};

/// Index of the largest logit (the lowest id among equals).
pub fn argmax(logits: &[f32]) -> u32 {
    // Two passes the compiler vectorizes: the maximum (lane-wise over chunks, then across
    // the lanes), then the first index holding it. One pass with a running index compares
    // serially (a 262k vocabulary took ~100 µs of a decode step). NaNs never win: `f32::max`
    // skips them and no NaN equals the maximum (all NaN or -inf: 0).
    const LANES: usize = 16;
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let mut chunks = logits.chunks_exact(LANES);
    for c in &mut chunks {
        for (m, &l) in lanes.iter_mut().zip(c) {
            *m = m.max(l);
        }
    }
    let max = chunks.remainder().iter().fold(
        lanes.iter().copied().fold(f32::NEG_INFINITY, f32::max),
        |m, &l| m.max(l),
    );
    logits.iter().position(|&l| l == max).unwrap_or(0) as u32
}

fn by_logit_desc(a: &Candidate, b: &Candidate) -> core::cmp::Ordering {
    b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id))
}

/// Fills `out` with the candidates that survive top-k, sorted by logit (descending). When
/// top-k is off, candidates that min-p would certainly drop are skipped up front (min-p in
/// logit space: p/p_max >= min_p  <=>  logit >= max + ln(min_p)), so a 262k vocabulary is
/// not sorted whole.
pub fn candidates(cfg: &SamplerConfig, logits: &[f32], out: &mut Vec<Candidate>) {
    out.clear();
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let floor = if cfg.min_p > 0.0 && cfg.top_k == 0 {
        // min-p applies to the probabilities after top-k/top-p renormalisation, which keep
        // the same ratio to the maximum, so this bound is exact.
        max + libm::logf(cfg.min_p)
    } else {
        f32::NEG_INFINITY
    };
    out.extend(
        logits
            .iter()
            .enumerate()
            .filter(|(_, &l)| l >= floor && l > f32::NEG_INFINITY)
            .map(|(i, &l)| Candidate {
                id: i as u32,
                logit: l,
                p: 0.0,
            }),
    );
    if out.is_empty() {
        out.push(Candidate {
            id: argmax(logits),
            logit: 0.0,
            p: 0.0,
        });
    }
    let k = if cfg.top_k == 0 {
        out.len()
    } else {
        cfg.top_k.min(out.len())
    };
    if k < out.len() {
        out.select_nth_unstable_by(k - 1, by_logit_desc);
        out.truncate(k);
    }
    out.sort_unstable_by(by_logit_desc);
}

/// Softmax of the logits (temperature 1) into `p`; the candidates are sorted.
fn probs(c: &mut [Candidate]) {
    let max = c.first().map(|c| c.logit).unwrap_or(0.0);
    let mut sum = 0.0f64;
    for x in c.iter_mut() {
        x.p = libm::expf(x.logit - max);
        sum += x.p as f64;
    }
    for x in c.iter_mut() {
        x.p = (x.p as f64 / sum) as f32;
    }
}

/// Keeps the smallest prefix whose probability mass reaches `p` (at least one).
pub fn top_p(c: &mut Vec<Candidate>, p: f32) {
    if p >= 1.0 || c.len() <= 1 {
        return;
    }
    probs(c);
    let mut acc = 0.0f32;
    let mut keep = c.len();
    for (i, x) in c.iter().enumerate() {
        acc += x.p;
        if acc >= p {
            keep = i + 1;
            break;
        }
    }
    c.truncate(keep.max(1));
}

/// Keeps candidates whose probability is at least `min_p` times the largest (at least one).
pub fn min_p(c: &mut Vec<Candidate>, min_p: f32) {
    if min_p <= 0.0 || c.len() <= 1 {
        return;
    }
    let floor = c[0].logit + libm::logf(min_p);
    let keep = c.iter().take_while(|x| x.logit >= floor).count();
    c.truncate(keep.max(1));
}

/// Final distribution at temperature `t`.
pub fn softmax(c: &mut [Candidate], t: f32) {
    for x in c.iter_mut() {
        x.logit /= t;
    }
    probs(c);
}

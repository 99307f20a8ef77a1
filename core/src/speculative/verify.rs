//! The acceptance rule of speculative decoding.

use crate::sampler::{draw, Candidate, Rng};

/// What the target makes of one drafted token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The drafted token stands.
    Accept,
    /// The drafted token is refused; this token is emitted in its place and the rest of the
    /// draft is dropped.
    Reject(u32),
}

fn prob(d: &[Candidate], id: u32) -> f32 {
    d.iter().find(|c| c.id == id).map_or(0.0, |c| c.p)
}

/// Checks drafted token `x` against the target's distribution `p` (from
/// `Sampler::distribution`: sorted candidates summing to 1; a greedy target's is its argmax
/// alone). `q` is the distribution the draft drew `x` from; `None` when the draft was chosen
/// deterministically (a greedy draft model, prompt lookup), i.e. `q` is 1 at `x`.
///
/// `x` is kept with probability `min(1, p(x) / q(x))`; otherwise the replacement is drawn
/// from `max(0, p - q)` renormalized. Emitted tokens are then distributed exactly as draws
/// from `p`. A greedy `p` decides without random numbers: accept when `x` is the argmax,
/// else emit the argmax, so greedy output is the same with and without a draft.
pub fn verify(p: &[Candidate], q: Option<&[Candidate]>, x: u32, rng: &mut Rng) -> Verdict {
    let Some(top) = p.first() else {
        return Verdict::Accept;
    };
    if p.len() == 1 {
        return if top.id == x {
            Verdict::Accept
        } else {
            Verdict::Reject(top.id)
        };
    }
    let px = prob(p, x);
    let qx = q.map_or(1.0, |q| prob(q, x));
    if px >= qx || (qx > 0.0 && rng.next_f64() < (px / qx) as f64) {
        return Verdict::Accept;
    }
    // the residual distribution max(0, p - q) over p's support (q is 0 elsewhere, and where
    // p is 0 the residual is too)
    let q_of = |id: u32| match q {
        Some(q) => prob(q, id),
        None => f32::from(id == x),
    };
    let total: f64 = p.iter().map(|c| (c.p - q_of(c.id)).max(0.0) as f64).sum();
    if total <= 0.0 {
        // p == q up to rounding: rejection happens only through rounding; draw from p
        return Verdict::Reject(draw(p, rng));
    }
    let r = rng.next_f64() * total;
    let mut acc = 0.0f64;
    let mut last = top.id;
    for c in p {
        let w = (c.p - q_of(c.id)).max(0.0) as f64;
        if w > 0.0 {
            acc += w;
            last = c.id;
            if r < acc {
                return Verdict::Reject(c.id);
            }
        }
    }
    Verdict::Reject(last)
}

//! What drafting costs on this machine, measured as a draft model drafts: the time of one
//! draft pass and of the target's verification step by the number of rows it checks. From
//! them, the probability a drafted token must have of standing for drafting it to pay.
//!
//! A drafted token saves one target step (`V(1)`) if it stands, and costs one more draft
//! pass (`D`) plus one more verification row (`V(n + 1) - V(n)`) either way. Where a
//! verification step is memory-bound (many cores, a wide machine) a row costs almost
//! nothing and long drafts pay; where it is compute-bound (two cores checking six rows took
//! 1.6 single steps on Zen 4 with Qwen2.5-Coder-1.5B) each row costs a quarter of a step,
//! and a draft should stop sooner. The draft's own probability that every token so far
//! stands (the product of its top probabilities) is set against that price.

use std::time::{Duration, Instant};

/// Rows of a verification step the costs are kept for (drafts longer than this share the
/// last one's slope).
const MAX_ROWS: usize = 33;

/// Weight of a new measurement in the running averages.
const ALPHA: f64 = 0.2;

/// Running averages of the costs, in seconds.
#[derive(Debug, Clone)]
pub struct DraftCosts {
    /// One draft pass (one token through the draft model).
    pass: Option<f64>,
    /// `verify[n]`: the target's step checking `n` rows (the pending token and `n - 1`
    /// drafted), with what the decode loop does around it.
    verify: [Option<f64>; MAX_ROWS + 1],
    /// The last draft handed to the target: the time until the drafter is called again is
    /// its verification step's.
    handed: Option<Handover>,
}

/// When a draft was handed over, the rows of its verification step (the pending token and
/// the drafted ones) and the history's length then.
#[derive(Debug, Clone, Copy)]
struct Handover {
    at: Instant,
    rows: usize,
    len: usize,
}

impl Default for DraftCosts {
    fn default() -> Self {
        DraftCosts {
            pass: None,
            verify: [None; MAX_ROWS + 1],
            handed: None,
        }
    }
}

fn average(slot: &mut Option<f64>, x: f64) {
    *slot = Some(match *slot {
        None => x,
        Some(a) => a + ALPHA * (x - a),
    });
}

impl DraftCosts {
    pub fn record_pass(&mut self, t: Duration) {
        average(&mut self.pass, t.as_secs_f64());
    }

    /// A draft goes to the target now: its verification step checks `rows` rows, after a
    /// history of `len` tokens.
    pub fn hand_over(&mut self, rows: usize, len: usize) {
        self.handed = Some(Handover {
            at: Instant::now(),
            rows,
            len,
        });
    }

    /// The drafter is called again with a history of `len` tokens: when it grew as one
    /// verification step of the last draft grows it (the accepted tokens and one more), the
    /// time since the hand-over was that step's.
    pub fn take_back(&mut self, len: usize) {
        if let Some(h) = self.handed.take() {
            if (1..=h.rows).contains(&len.saturating_sub(h.len)) {
                self.record_verify(h.rows, h.at.elapsed());
            }
        }
    }

    /// A new generation starts: the time since the last hand-over (a chat turn's wait, a
    /// prompt's evaluation) is not a verification step's.
    pub fn forget_hand_over(&mut self) {
        self.handed = None;
    }

    /// A verification step of `rows` rows took `t`.
    pub fn record_verify(&mut self, rows: usize, t: Duration) {
        if (1..=MAX_ROWS).contains(&rows) {
            average(&mut self.verify[rows], t.as_secs_f64());
        }
    }

    /// The cost of a verification step of `rows` rows, once a single step and a longer one
    /// were measured (else `None`): see [`Self::verify`].
    pub fn step(&self, rows: usize) -> Option<f64> {
        let longer = self.verify[2..].iter().any(Option::is_some);
        if self.verify[1].is_none() || !longer {
            return None;
        }
        self.verify(rows)
    }

    /// The cost of a step of `rows` rows: measured, or between the nearest measured sizes
    /// (past the largest, on the slope of the two largest; below the smallest, the
    /// smallest's: a step costs at least a single one).
    fn verify(&self, rows: usize) -> Option<f64> {
        let rows = rows.clamp(1, MAX_ROWS);
        if let Some(v) = self.verify[rows] {
            return Some(v);
        }
        let below = (1..rows).rev().find_map(|n| self.verify[n].map(|v| (n, v)));
        let above = (rows + 1..=MAX_ROWS).find_map(|n| self.verify[n].map(|v| (n, v)));
        match (below, above) {
            (Some((n0, v0)), Some((n1, v1))) => {
                Some(v0 + (v1 - v0) * (rows - n0) as f64 / (n1 - n0) as f64)
            }
            (None, Some((_, v1))) => Some(v1),
            (Some((n0, v0)), None) => {
                let slope = (1..n0)
                    .rev()
                    .find_map(|n| self.verify[n].map(|v| (v0 - v) / (n0 - n) as f64))
                    .unwrap_or(0.0);
                Some(v0 + slope.max(0.0) * (rows - n0) as f64)
            }
            (None, None) => None,
        }
    }

    /// The smallest probability of standing at which a token pays as row `rows + 1` of a
    /// verification step of the draft so far (`rows` rows: the pending token and `rows - 1`
    /// drafted): (`extra` + the added row's cost) / a single step, where `extra` is 0 for a
    /// token whose logits are computed already and one draft pass for one that needs
    /// another. `None` until the costs are measured.
    fn breakeven(&self, rows: usize, pass: bool) -> Option<f64> {
        let single = self.verify(1)?;
        let row = (self.verify(rows + 1)? - self.verify(rows)?).max(0.0);
        let extra = if pass { self.pass? } else { 0.0 };
        (single > 0.0).then(|| (extra + row) / single)
    }

    /// Whether a draft of `drafted` tokens, all standing with probability `p_all` as the
    /// draft estimates it, should go on: one more pass for one more token pays.
    pub fn continue_pays(&self, drafted: usize, p_all: f32) -> bool {
        self.breakeven(drafted + 1, true)
            .is_none_or(|p| f64::from(p_all) >= p)
    }

    /// Whether a token whose logits are computed, standing with the rest with probability
    /// `p_all`, pays as the draft's last (one more verification row) after `drafted` tokens.
    pub fn last_pays(&self, drafted: usize, p_all: f32) -> bool {
        self.breakeven(drafted + 1, false)
            .is_none_or(|p| f64::from(p_all) >= p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: f64) -> Duration {
        Duration::from_secs_f64(x / 1000.0)
    }

    #[test]
    fn unmeasured_costs_never_stop_a_draft() {
        let c = DraftCosts::default();
        assert!(c.continue_pays(5, 0.01) && c.last_pays(5, 0.01));
    }

    #[test]
    fn compute_bound_verification_stops_long_drafts() {
        let mut c = DraftCosts::default();
        c.record_pass(ms(10.0));
        // one row 25 ms, four 30, eight 55: a row costs 1.25 ms up to four, 6.25 past
        c.record_verify(1, ms(25.0));
        c.record_verify(5, ms(30.0));
        c.record_verify(9, ms(55.0));
        // two drafted (three rows): the fourth row 1.25 ms + a pass 10 ms = 0.45 of a step
        assert!(c.continue_pays(2, 0.5) && !c.continue_pays(2, 0.4));
        // six drafted (seven rows): 6.25 + 10 = 0.65 of a step
        assert!(c.continue_pays(6, 0.7) && !c.continue_pays(6, 0.6));
        // a computed token as the last: the row only
        assert!(c.last_pays(6, 0.3) && !c.last_pays(6, 0.2));
        // past the largest measured size, on its slope
        let far = c.verify(13).unwrap();
        assert!((far - 0.080).abs() < 1e-9, "{far}");
    }

    #[test]
    fn memory_bound_verification_drafts_long() {
        let mut c = DraftCosts::default();
        c.record_pass(ms(3.0));
        for rows in 1..=17 {
            c.record_verify(rows, ms(25.0));
        }
        assert!(c.continue_pays(15, 0.15));
    }

    #[test]
    fn averages_follow_new_measurements() {
        let mut c = DraftCosts::default();
        c.record_verify(1, ms(20.0));
        for _ in 0..50 {
            c.record_verify(1, ms(30.0));
        }
        assert!((c.verify(1).unwrap() - 0.030).abs() < 1e-6);
        // sizes out of range are left out
        c.record_verify(0, ms(1.0));
        c.record_verify(MAX_ROWS + 1, ms(1.0));
        assert_eq!(c.verify(1), Some(c.verify[1].unwrap()));
    }
}

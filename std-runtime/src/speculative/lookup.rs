//! Prompt lookup as the decode loop's drafter, its draft length priced by what drafting
//! wins and what verifying costs on this machine.
//!
//! A lookup draft is free to make and only costs its rows in the verification step, but a
//! copy goes wrong somewhere (a renamed identifier, the end of the copied part), and a row
//! past the first few costs a good part of a step where verification is compute-bound
//! (Qwen2.5-Coder-1.5B at two threads on Zen 4: a step of 8 rows 1.5 single steps, of 16 rows
//! 2.6). So the draft is cut to the length that gives the most tokens per unit of time: with
//! `P(k)` the chance that its first `k` tokens all stand and `V(n)` a verification step of
//! `n` rows, the length `n` maximizing `(1 + Σ_{k ≤ n} P(k)) / V(n + 1)`.
//!
//! `V` is measured as the drafter goes ([`DraftCosts`]: the time between two calls is the
//! step's). `P` is learned from the drafts' fates: how often a drafted token stood, given
//! that the ones before it did, by how long the match behind it was (its *reach*: the
//! suffix that matched, the tokens before it that match too, and the drafted ones before
//! it). A long reach means the text is copying and goes on doing so; a short one that it
//! merely met a common phrase.
//!
//! Until a single and a longer step have been timed (and with [`LookupDrafter::fixed`], in
//! the server, whose steps are shared by every request) the length follows a schedule: 3
//! tokens, doubled plus one after each wholly accepted draft (7, 15, ...), back to 3 after a
//! rejection.

use superinfer_core::speculative::Lookup;

use super::costs::DraftCosts;
use super::{Draft, Drafter};
use crate::Error;

/// The schedule's first draft: 3 tokens make a 4-token verification step, which costs
/// about as much as a single one (the batch kernels' tile sizes are 4 and 8).
const LOOKUP_START: usize = 3;

/// Upper ends of the reach classes a drafted token's chance of standing is kept for (the
/// last class is everything longer).
const REACH_CLASSES: [usize; 4] = [8, 16, 32, 64];

/// Weight of the past in the running counts of a reach class, per drafted token.
const DECAY: f64 = 0.97;

/// How often the drafted tokens of one reach class stood (given the ones before them did):
/// running counts, from an even prior of one hit in two tries.
#[derive(Debug, Clone, Copy, Default)]
struct Rate {
    hits: f64,
    tries: f64,
}

impl Rate {
    fn p(&self) -> f64 {
        (self.hits + 1.0) / (self.tries + 2.0)
    }

    fn add(&mut self, hit: bool) {
        self.hits = self.hits * DECAY + f64::from(u8::from(hit));
        self.tries = self.tries * DECAY + 1.0;
    }
}

fn class(reach: usize) -> usize {
    REACH_CLASSES
        .iter()
        .position(|&end| reach < end)
        .unwrap_or(REACH_CLASSES.len())
}

/// Prompt lookup drafting ([`Lookup`]), at most `draft_max` tokens per step, the length
/// priced (see the module docs).
#[derive(Debug, Clone)]
pub struct LookupDrafter {
    pub lookup: Lookup,
    pub draft_max: usize,
    /// Whether the length is priced (else the schedule alone).
    priced: bool,
    /// The schedule's next length.
    next: usize,
    /// The last draft, the history length it was made at and its match's reach.
    last: Vec<u32>,
    last_at: usize,
    last_reach: usize,
    rates: [Rate; REACH_CLASSES.len() + 1],
    costs: DraftCosts,
}

impl LookupDrafter {
    /// Matches of up to `ngram` tokens, drafts of up to `draft_max`, the length priced.
    pub fn new(ngram: usize, draft_max: usize) -> LookupDrafter {
        LookupDrafter {
            lookup: Lookup::new(ngram),
            draft_max,
            priced: true,
            next: LOOKUP_START,
            last: Vec::new(),
            last_at: 0,
            last_reach: 0,
            rates: [Rate::default(); REACH_CLASSES.len() + 1],
            costs: DraftCosts::default(),
        }
    }

    /// The length by the schedule alone (no timing): for steps shared with other requests.
    pub fn fixed(mut self) -> LookupDrafter {
        self.priced = false;
        self
    }

    /// Learns from the last draft, now that `history` shows how much of it stood.
    fn learn(&mut self, history: &[u32]) {
        if self.last.is_empty() || history.len() <= self.last_at {
            return;
        }
        let after = &history[self.last_at..];
        let accepted = self
            .last
            .iter()
            .zip(after)
            .take_while(|(a, b)| a == b)
            .count();
        self.next = if accepted == self.last.len() && after.len() > accepted {
            (self.next * 2 + 1).min(self.draft_max.max(1))
        } else {
            LOOKUP_START
        };
        // the tokens the target got to judge: the accepted ones and the first rejected
        let judged = self.last.len().min(accepted + 1).min(after.len());
        for k in 0..judged {
            self.rates[class(self.last_reach + k)].add(k < accepted);
        }
    }

    /// The priced length for a draft of `found` tokens behind a match of `reach`: `None`
    /// until the step costs are measured.
    fn priced_len(&self, reach: usize, found: usize) -> Option<usize> {
        let mut best = (1.0 / self.costs.step(1)?, 0);
        let (mut p_all, mut expected) = (1.0, 1.0);
        for k in 1..=found {
            p_all *= self.rates[class(reach + k - 1)].p();
            expected += p_all;
            let per_time = expected / self.costs.step(k + 1)?;
            if per_time > best.0 {
                best = (per_time, k);
            }
        }
        Some(best.1)
    }
}

impl Drafter for LookupDrafter {
    type Error = Error;

    fn prefill(&mut self, _tokens: &[u32]) -> Result<(), Error> {
        self.costs.forget_hand_over();
        self.last.clear();
        Ok(())
    }

    fn draft(&mut self, history: &[u32], limit: usize, out: &mut Draft) -> Result<(), Error> {
        if self.priced {
            self.costs.take_back(history.len());
        }
        self.learn(history);
        let from = out.len();
        let max = self.draft_max.min(limit);
        let reach = self.lookup.draft(history, max, &mut out.tokens);
        let found = out.len() - from;
        let n = match self.priced {
            true => self.priced_len(reach, found).unwrap_or(self.next),
            false => self.next,
        };
        out.truncate(from + n.min(found));
        self.last.clear();
        self.last.extend_from_slice(&out.tokens[from..]);
        self.last_at = history.len();
        self.last_reach = reach;
        if self.priced {
            self.costs.hand_over(out.len() - from + 1, history.len());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ms(x: f64) -> Duration {
        Duration::from_secs_f64(x / 1000.0)
    }

    /// A drafter whose steps cost 30 ms for one row, 32 for four, 40 for eight, 62 for 17.
    fn measured() -> LookupDrafter {
        let mut d = LookupDrafter::new(3, 16);
        for (rows, t) in [(1, 30.0), (4, 32.0), (8, 40.0), (17, 62.0)] {
            d.costs.record_verify(rows, ms(t));
        }
        d
    }

    #[test]
    fn unmeasured_costs_follow_the_schedule() {
        let d = LookupDrafter::new(3, 16);
        assert_eq!(d.priced_len(40, 16), None);
        let mut out = Draft::default();
        let mut d = d;
        // "1 2 3 4 5 6 7 8 9 1 2 3" matches its start: the schedule's 3 tokens
        let history: Vec<u32> = (1..=9).chain(1..=3).collect();
        d.draft(&history, 100, &mut out).unwrap();
        assert_eq!(out.tokens, [4, 5, 6]);
    }

    #[test]
    fn sure_copies_draft_long_and_unsure_ones_short() {
        let mut d = measured();
        for _ in 0..200 {
            d.rates[class(100)].add(true);
        }
        assert_eq!(d.priced_len(100, 16), Some(16), "a copy that always stands");
        for r in &mut d.rates[..class(100)] {
            for i in 0..200 {
                r.add(i % 2 == 0);
            }
        }
        let short = d.priced_len(3, 16).unwrap();
        assert!((1..=4).contains(&short), "a coin flip per token: {short}");
        // no match, no draft
        assert_eq!(d.priced_len(0, 0), Some(0));
    }

    #[test]
    fn hopeless_tokens_are_not_drafted() {
        let mut d = measured();
        // a step of two rows costs more than a single one: a token that never stands
        d.costs.record_verify(2, ms(31.0));
        for r in &mut d.rates {
            for _ in 0..200 {
                r.add(false);
            }
        }
        assert_eq!(d.priced_len(20, 16), Some(0));
    }

    #[test]
    fn the_fates_of_drafts_are_learned_by_reach() {
        let mut d = measured();
        d.last = vec![7, 8, 9, 10];
        d.last_at = 5;
        d.last_reach = 6;
        // two stood, the third did not (the target said 42)
        d.learn(&[1, 2, 3, 4, 5, 7, 8, 42]);
        let [a, b, ..] = d.rates;
        // reaches 6 and 7 (class 0): one hit each; reach 8 (class 1): a miss; the fourth
        // token was never judged
        assert_eq!((a.hits, a.tries), (1.0 + DECAY, 1.0 + DECAY));
        assert_eq!((b.hits, b.tries), (0.0, 1.0));
        assert_eq!(d.rates[2].tries, 0.0);
        assert_eq!(d.next, LOOKUP_START);
    }
}

use alloc::vec::Vec;

use super::*;
use crate::sampler::{draw, Candidate, Rng};

fn dist(ps: &[f32]) -> Vec<Candidate> {
    let mut c: Vec<Candidate> = ps
        .iter()
        .enumerate()
        .filter(|(_, &p)| p > 0.0)
        .map(|(i, &p)| Candidate {
            id: i as u32,
            logit: 0.0,
            p,
        })
        .collect();
    c.sort_by(|a, b| b.p.total_cmp(&a.p));
    c
}

#[test]
fn lookup_copies_what_followed_the_longest_recent_match() {
    let l = Lookup::new(3);
    let mut out = Vec::new();
    // "1 2 3 4 5 ... 9 1 2 3" drafts "4 5 6"
    let h = [1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3];
    assert_eq!(l.draft(&h, 3, &mut out), 3);
    assert_eq!(out, [4, 5, 6]);
    // the most recent occurrence wins
    out.clear();
    l.draft(&[7, 8, 1, 7, 8, 2, 9, 7, 8], 2, &mut out);
    assert_eq!(out, [2, 9]);
    // a longer match beats a more recent shorter one
    out.clear();
    // (and reports how far back it reaches: 5 7 8 before 1 and at the end)
    assert_eq!(l.draft(&[5, 7, 8, 1, 3, 7, 8, 2, 5, 7, 8], 1, &mut out), 3);
    assert_eq!(out, [1]);
    // no earlier occurrence of even 2 tokens: nothing
    out.clear();
    l.draft(&[1, 2, 3, 4, 2, 5], 4, &mut out);
    assert!(out.is_empty());
    // a continuation running into the suffix repeats the cycle
    out.clear();
    l.draft(&[4, 1, 2, 1, 2], 5, &mut out);
    assert_eq!(out, [1, 2, 1, 2, 1]);
    // nothing asked, nothing drafted; short histories are fine
    out.clear();
    l.draft(&h, 0, &mut out);
    l.draft(&[], 4, &mut out);
    l.draft(&[3], 4, &mut out);
    assert!(out.is_empty());
}

#[test]
fn greedy_verdicts_follow_the_argmax() {
    let mut rng = Rng::new(1);
    let p = dist(&[0.0, 0.0, 1.0]);
    assert_eq!(verify(&p, None, 2, &mut rng), Verdict::Accept);
    assert_eq!(verify(&p, None, 1, &mut rng), Verdict::Reject(2));
    let q = dist(&[0.5, 0.5]);
    assert_eq!(verify(&p, Some(&q), 0, &mut rng), Verdict::Reject(2));
}

/// Pearson's chi-square of observed counts against expected probabilities.
fn chi_square(counts: &[u64], p: &[f32]) -> f64 {
    let n: u64 = counts.iter().sum();
    counts
        .iter()
        .zip(p)
        .filter(|(_, &p)| p > 0.0)
        .map(|(&c, &p)| {
            let e = n as f64 * p as f64;
            (c as f64 - e) * (c as f64 - e) / e
        })
        .sum()
}

/// Emitted tokens (the draft's if accepted, else the replacement) are distributed as `p`,
/// whatever the draft's distribution: with 200,000 draws, chi-square over 6 tokens (5
/// degrees of freedom) stays under 20.5, the 0.1% critical value; a rule that ignores the
/// residual or the ratio lands in the thousands.
#[test]
fn speculative_sampling_emits_the_targets_distribution() {
    let p_raw = [0.05f32, 0.4, 0.1, 0.25, 0.0, 0.2];
    let p = dist(&p_raw);
    let cases: [&[f32]; 4] = [
        &[0.3, 0.1, 0.3, 0.1, 0.1, 0.1],
        &[0.0, 0.9, 0.0, 0.0, 0.1, 0.0],
        &[0.05, 0.4, 0.1, 0.25, 0.0, 0.2],
        &[0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
    ];
    let mut rng = Rng::new(42);
    for q_raw in cases {
        let q = dist(q_raw);
        let mut counts = [0u64; 6];
        let mut accepted = 0u64;
        for _ in 0..200_000 {
            let x = draw(&q, &mut rng);
            let t = match verify(&p, Some(&q), x, &mut rng) {
                Verdict::Accept => {
                    accepted += 1;
                    x
                }
                Verdict::Reject(r) => r,
            };
            counts[t as usize] += 1;
        }
        let chi = chi_square(&counts, &p_raw);
        assert!(
            chi < 20.5,
            "q = {q_raw:?}: counts {counts:?}, chi-square {chi}"
        );
        assert_eq!(counts[4], 0, "a token the target excludes was emitted");
        // acceptance is sum(min(p, q)) in expectation
        let want: f32 = p_raw.iter().zip(q_raw).map(|(a, b)| a.min(*b)).sum();
        let got = accepted as f32 / 200_000.0;
        assert!((got - want).abs() < 0.01, "acceptance {got} vs {want}");
    }
    // a deterministic draft (prompt lookup): x fixed, q one-hot at x
    for x in 0..6u32 {
        let mut counts = [0u64; 6];
        for _ in 0..100_000 {
            let t = match verify(&p, None, x, &mut rng) {
                Verdict::Accept => x,
                Verdict::Reject(r) => r,
            };
            counts[t as usize] += 1;
        }
        let chi = chi_square(&counts, &p_raw);
        assert!(chi < 20.5, "x = {x}: counts {counts:?}, chi-square {chi}");
    }
}

use alloc::vec;
use alloc::vec::Vec;

use super::*;

fn cfg(t: f32, k: usize, p: f32, m: f32) -> SamplerConfig {
    SamplerConfig {
        temperature: t,
        top_k: k,
        top_p: p,
        min_p: m,
        seed: 42,
        ..Default::default()
    }
}

#[test]
fn greedy_is_argmax_and_ties_take_the_lowest_id() {
    let mut s = Sampler::new(SamplerConfig::greedy()).unwrap();
    assert_eq!(s.sample(&mut [0.1, 3.0, -1.0, 2.9], &[]), 1);
    assert_eq!(s.sample(&mut [1.0, 5.0, 5.0], &[]), 1);
    assert_eq!(s.sample(&mut [f32::NAN, 0.5, f32::NAN], &[]), 1);
}

#[test]
fn argmax_takes_the_first_maximum_at_any_length_and_position() {
    let naive = |l: &[f32]| {
        let mut best = 0;
        for (i, &x) in l.iter().enumerate() {
            if x > l[best] {
                best = i;
            }
        }
        best as u32
    };
    for n in [1, 2, 15, 16, 17, 33, 1000, 262_147] {
        let mut l: Vec<f32> = (0..n).map(|i| ((i * 7919) % 997) as f32 / 100.0).collect();
        assert_eq!(filters::argmax(&l), naive(&l), "n {n}");
        // a tie of the maximum in two places, in other lanes and chunks: the lower id wins
        for (a, b) in [(0, n - 1), (n / 3, n / 2), (n - 1, n - 1)] {
            l[a] = 20.0;
            l[b] = 20.0;
            assert_eq!(filters::argmax(&l), a.min(b) as u32, "n {n} tie {a} {b}");
            l[a] = 0.0;
            l[b] = 0.0;
        }
    }
    assert_eq!(filters::argmax(&[f32::NEG_INFINITY; 40]), 0);
    assert_eq!(filters::argmax(&[f32::NAN; 40]), 0);
    let mut l = [f32::NAN; 40];
    l[37] = -3.0;
    assert_eq!(filters::argmax(&l), 37);
    assert_eq!(filters::argmax(&[-1.0, -0.5, -0.5]), 1);
}

#[test]
fn top_k_1_is_greedy_at_any_temperature() {
    let mut s = Sampler::new(cfg(5.0, 1, 1.0, 0.0)).unwrap();
    for _ in 0..100 {
        assert_eq!(s.sample(&mut [0.0, 0.1, 0.2, 0.15], &[]), 2);
    }
}

#[test]
fn same_seed_same_picks_other_seed_differs() {
    let logits: Vec<f32> = (0..1000)
        .map(|i| ((i * 7919) % 1000) as f32 / 300.0)
        .collect();
    let run = |seed| {
        let mut s = Sampler::new(SamplerConfig {
            seed,
            ..cfg(1.0, 0, 1.0, 0.0)
        })
        .unwrap();
        (0..200)
            .map(|_| s.sample(&mut logits.clone(), &[]))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
    let mut s = Sampler::new(SamplerConfig {
        seed: 7,
        ..cfg(1.0, 0, 1.0, 0.0)
    })
    .unwrap();
    let first: Vec<u32> = (0..50)
        .map(|_| s.sample(&mut logits.clone(), &[]))
        .collect();
    s.reset();
    let again: Vec<u32> = (0..50)
        .map(|_| s.sample(&mut logits.clone(), &[]))
        .collect();
    assert_eq!(first, again);
}

#[test]
fn top_p_keeps_the_smallest_sufficient_prefix() {
    // probabilities 0.5, 0.25, 0.125, 0.125
    let l = |p: f32| libm::logf(p);
    let logits = [l(0.125), l(0.5), l(0.125), l(0.25)];
    let mut c = Vec::new();
    filters::candidates(&cfg(1.0, 0, 0.7, 0.0), &logits, &mut c);
    filters::top_p(&mut c, 0.7);
    assert_eq!(c.iter().map(|x| x.id).collect::<Vec<_>>(), [1, 3]);
    filters::candidates(&cfg(1.0, 0, 0.5, 0.0), &logits, &mut c);
    filters::top_p(&mut c, 0.5);
    assert_eq!(c.iter().map(|x| x.id).collect::<Vec<_>>(), [1]);
}

#[test]
fn min_p_drops_unlikely_tokens() {
    let l = |p: f32| libm::logf(p);
    let logits = [l(0.5), l(0.3), l(0.1), l(0.04), l(0.06)];
    let mut c = Vec::new();
    filters::candidates(&cfg(1.0, 0, 1.0, 0.15), &logits, &mut c);
    filters::min_p(&mut c, 0.15);
    // threshold 0.075: keeps 0.5, 0.3, 0.1
    assert_eq!(c.iter().map(|x| x.id).collect::<Vec<_>>(), [0, 1, 2]);
    // and sampling never returns a dropped token
    let mut s = Sampler::new(cfg(1.0, 0, 1.0, 0.15)).unwrap();
    for _ in 0..2000 {
        assert!(s.sample(&mut logits.clone(), &[]) <= 2);
    }
}

#[test]
fn penalties_change_exactly_the_seen_logits() {
    let c = SamplerConfig {
        repeat_penalty: 2.0,
        frequency_penalty: 0.5,
        presence_penalty: 0.25,
        repeat_last_n: 3,
        ..SamplerConfig::greedy()
    };
    let mut logits = vec![4.0, -4.0, 1.0, 3.0];
    let mut counts = Vec::new();
    // window is the last 3 tokens: [1, 0, 0]; token 3 (seen earlier) is outside it
    let history = [3u32, 1, 0, 0];
    penalties::apply(&c, &mut logits, &history[1..], &mut counts);
    assert_eq!(
        logits,
        vec![
            4.0 / 2.0 - (2.0 * 0.5 + 0.25),
            -4.0 * 2.0 - (0.5 + 0.25),
            1.0,
            3.0
        ]
    );
    // through the sampler: the penalty makes token 3 the argmax
    let mut s = Sampler::new(c).unwrap();
    assert_eq!(s.sample(&mut [4.0, -4.0, 1.0, 3.0], &history), 3);
}

#[test]
fn draws_follow_the_softmax() {
    let logits = [0.0f32, 1.0, 2.0, -1.0];
    let z: f64 = logits.iter().map(|&l| (l as f64).exp()).sum();
    let mut s = Sampler::new(cfg(1.0, 0, 1.0, 0.0)).unwrap();
    let n = 20_000;
    let mut hist = [0usize; 4];
    for _ in 0..n {
        hist[s.sample(&mut logits.clone(), &[]) as usize] += 1;
    }
    let mut chi2 = 0.0;
    for (i, &h) in hist.iter().enumerate() {
        let e = n as f64 * (logits[i] as f64).exp() / z;
        chi2 += (h as f64 - e).powi(2) / e;
    }
    // 3 degrees of freedom: p = 0.001 at 16.27
    assert!(chi2 < 16.27, "chi2 {chi2} for {hist:?}");
    // temperature 0.5 sharpens: token 2 gets more than at temperature 1
    let mut s = Sampler::new(cfg(0.5, 0, 1.0, 0.0)).unwrap();
    let hot = (0..n)
        .filter(|_| s.sample(&mut logits.clone(), &[]) == 2)
        .count();
    assert!(hot as f64 > 1.1 * hist[2] as f64);
}

#[test]
fn validate_rejects_bad_configs() {
    for bad in [
        SamplerConfig {
            top_p: 0.0,
            ..Default::default()
        },
        SamplerConfig {
            top_p: 1.5,
            ..Default::default()
        },
        SamplerConfig {
            min_p: -0.1,
            ..Default::default()
        },
        SamplerConfig {
            repeat_penalty: 0.0,
            ..Default::default()
        },
        SamplerConfig {
            temperature: f32::NAN,
            ..Default::default()
        },
        SamplerConfig {
            frequency_penalty: f32::INFINITY,
            ..Default::default()
        },
    ] {
        assert!(Sampler::new(bad.clone()).is_err(), "{bad:?}");
    }
    assert!(Sampler::new(SamplerConfig::default()).is_ok());
}

//! A 2048-token prompt on Qwen2.5-0.5B with each KV cache type, judged as the llama.cpp
//! fixture tests judge us: teacher-forced over the whole prompt, the share of decisive
//! positions (F32 top-2 log-probs at least 0.05 apart) where the F16 and Q8_0 caches predict
//! the F32 cache's next token, and the mean KL from the F32 cache's distribution. The second
//! half (positions past 1024) is reported on its own as well.
//!
//! Measured here: the F16 cache agrees with the F32 cache at 98.3% of decisive positions
//! (mean KL 0.0031), the Q8_0 cache at 98.2% (mean KL 0.0039; 95.8% and 0.019 before the
//! cache took Qwen2.5-0.5B's huge key bias out of its rows, `core/src/model/kv_centre.rs`).
//! That is this metric's floor, not the caches' error: scaling the F32 cache's keys by
//! 1 + 2e-7 (one f32 ulp) gives 98.55% and mean KL 0.0030, because a tiny change flips
//! activation quantization roundings downstream. llama.cpp sits at the same floor: against
//! its own F32 cache (`llama-perplexity --kl-divergence`, -c 2048, the second halves of two
//! chunks of this text) its F16 cache keeps the top token at 97.7% of positions (mean KLD
//! 0.0029), its Q8_0 cache at 93.4% (0.0172). The 99% the long-context issue asks for is
//! above that floor; the bounds below guard the measured levels.
//!
//! The floor is the int8 activations' (llama.cpp's arithmetic, which we keep): with the same
//! weights dequantized to F32 ([`f32_copy`], as `llama-quantize --allow-requantize MODEL OUT
//! F32` makes it), where every product takes its activations in f32, the F16 cache agrees at
//! 100% of decisive positions (1988/1988, mean KL 0.00001) and the Q8_0 cache at 99.75%
//! (0.0006): [`f32_weights_2k_prompt_agrees_with_f32_cache`] (a 2.5 GB copy, written once
//! into the model cache; 1.5 minutes on two Zen 5 cores, about ten on two Zen 3 cores, so it
//! runs on demand, `-- --ignored`, not in CI).
use superinfer_runtime::core::ops::attention::KvType;
use superinfer_runtime::{Engine, EngineOptions, SessionOptions};
use superinfer_tests::*;

const N: usize = 2048;
const HALF: usize = N / 2;

/// Per cache type: least top-1 agreement at decisive positions, largest mean KL (nats).
const BOUNDS: [(KvType, f64, f64); 2] = [(KvType::F16, 0.978, 0.005), (KvType::Q8_0, 0.975, 0.006)];

/// Reference top-2 log-probs closer than this are a near-tie (as in llamacpp_fixtures.rs).
const TIE: f64 = 0.05;

/// Teacher-forces `tokens` with a cache of type `ty`, handing each position's logits to `f`.
fn teacher_forced(e: &Engine, tokens: &[u32], ty: KvType, mut f: impl FnMut(usize, &[f32])) {
    let mut s = e
        .session(&SessionOptions {
            n_ctx: N,
            cache_type_k: ty,
            cache_type_v: ty,
        })
        .unwrap();
    let mut i = 0;
    s.feed_scored(tokens, 0, 512, |_, l| {
        f(i, l);
        i += 1;
    })
    .unwrap();
    assert_eq!(i, tokens.len());
}

/// The F32 cache's distribution at one position: its top-1 and its log-probabilities (in
/// f32: the 2048 positions of the 151k vocabulary take 1.2 GB so, 2.5 GB in f64).
struct Reference {
    top: u32,
    margin: f64,
    logp: Vec<f32>,
}

/// Top-1 minus top-2 log-prob.
fn margin(lp: &[f64]) -> f64 {
    let (mut a, mut b) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
    for &x in lp {
        if x > a {
            (a, b) = (x, a);
        } else if x > b {
            b = x;
        }
    }
    a - b
}

#[test]
fn qwen05b_2k_prompt_with_each_cache_type_agrees_with_f32() {
    compare_caches(&require_model(QWEN_05B), BOUNDS);
}

/// The same comparison on Qwen2.5-0.5B with F32 weights (see the module docs): without int8
/// activations the caches' own error is what is left, and it meets the long-context issue's
/// 99%. Opt-in (about ten minutes on two cores, most of CI's budget for one measurement that
/// only changes with the attention code):
/// `cargo test -p superinfer-tests --test long_context -- --ignored`.
#[test]
#[ignore = "10 minutes on 2 cores: F32 weights over 2k tokens; run with --ignored"]
fn f32_weights_2k_prompt_agrees_with_f32_cache() {
    compare_caches(
        &f32_copy(QWEN_05B),
        [(KvType::F16, 0.995, 0.0005), (KvType::Q8_0, 0.99, 0.002)],
    );
}

/// Teacher-forces the first [`N`] tokens of the GPL-3 text through `model` with the F32
/// cache and with each cache type of `bounds`, prints the agreement and asserts each type's
/// least top-1 agreement at decisive positions and largest mean KL.
fn compare_caches(model: &std::path::Path, bounds: [(KvType, f64, f64); 2]) {
    let e = Engine::load(
        model,
        &EngineOptions {
            threads: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let text = std::fs::read_to_string(fixtures_dir().join("texts/gpl-3.txt")).unwrap();
    let tokens = e.tokenizer().encode(&text, true, false).unwrap();
    assert!(
        tokens.len() >= N,
        "the GPL-3 text has {} tokens",
        tokens.len()
    );
    let tokens = &tokens[..N];
    let mut reference = Vec::with_capacity(N);
    teacher_forced(&e, tokens, KvType::F32, |_, l| {
        let lp = log_softmax(l);
        reference.push(Reference {
            top: argmax(l),
            margin: margin(&lp),
            logp: lp.iter().map(|&x| x as f32).collect(),
        });
    });
    let mut results = Vec::new();
    for (ty, _, _) in bounds {
        // per position: whether the top-1 is the F32 cache's, and KL(F32 || ty)
        let (mut same, mut kl) = (vec![false; N], vec![0.0f64; N]);
        teacher_forced(&e, tokens, ty, |i, l| {
            let b = &reference[i];
            let top = argmax(l);
            same[i] = top == b.top;
            let lp = log_softmax(l);
            kl[i] = b
                .logp
                .iter()
                .zip(&lp)
                .map(|(&p, q)| (p as f64).exp() * (p as f64 - q))
                .sum();
            if !same[i] && b.margin >= TIE {
                eprintln!(
                    "  {ty}: position {i}: F32 top-1 {} (margin {:.3}) became {top} ({:.3} below it)",
                    b.top,
                    b.margin,
                    b.logp[b.top as usize] - b.logp[top as usize]
                );
            }
        });
        let same_all = same.iter().filter(|&&x| x).count();
        let decisive: Vec<usize> = (0..N).filter(|&i| reference[i].margin >= TIE).collect();
        let agree = decisive.iter().filter(|&&i| same[i]).count();
        let late: Vec<usize> = decisive.iter().copied().filter(|&i| i >= HALF).collect();
        let late_agree = late.iter().filter(|&&i| same[i]).count();
        let mean_kl = kl.iter().sum::<f64>() / kl.len() as f64;
        let rate = agree as f64 / decisive.len() as f64;
        eprintln!(
            "{ty} cache vs F32 over {N} positions: top-1 {agree}/{} decisive ({:.2}%), {same_all}/{} \
             all, positions {HALF}..: {late_agree}/{} decisive; mean KL {mean_kl:.5}, max {:.4}",
            decisive.len(),
            100.0 * rate,
            reference.len(),
            late.len(),
            kl.iter().cloned().fold(0.0, f64::max)
        );
        results.push((ty, decisive.len(), rate, mean_kl));
    }
    for ((ty, decisive, rate, mean_kl), (_, min_rate, max_kl)) in results.into_iter().zip(bounds) {
        assert!(decisive > N / 4, "too few decisive positions");
        assert!(rate >= min_rate, "{ty}: top-1 agreement {rate}");
        assert!(mean_kl < max_kl, "{ty}: mean KL {mean_kl}");
    }
}

//! The scheduler on a tiny synthetic model: many requests give what each gives alone, bad
//! input and exhaustion end one request with a typed error while the others go on,
//! cancellation frees blocks, prefixes are held once. Every test ends with no block held.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::OnceLock;

use superinfer_runtime::core::model::{forward, KvPool, Logits, PoolOptions, Scratch, SeqId, Step};
use superinfer_runtime::core::ops::attention::KvType;
use superinfer_runtime::core::sampler::{Sampler, SamplerConfig};
use superinfer_runtime::scheduler::{Event, Request, RequestError};
use superinfer_runtime::{
    Engine, EngineOptions, Scheduler, SchedulerOptions, SessionOptions, StopReason,
};
use superinfer_tests::synth::{self, Spec};

/// Written once per test process: the tests run in parallel and map it.
fn model() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| synth::write_temp(&Spec::llama(), "scheduler-llama"))
        .clone()
}

fn engine() -> Engine {
    Engine::load(
        &model(),
        &EngineOptions {
            threads: 2,
            ..Default::default()
        },
    )
    .unwrap()
}

fn prompt(seed: u32, n: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| (i * 37 + seed * 11 + 5) % 260)
        .collect()
}

fn options(n_parallel: usize, n_batch: usize) -> SchedulerOptions {
    SchedulerOptions {
        n_parallel,
        n_batch,
        n_ctx: 128,
        ..Default::default()
    }
}

/// Greedy tokens of `prompt` in a session of its own.
fn alone(e: &Engine, prompt: &[u32], max: usize) -> Vec<u32> {
    let mut s = e.session(&SessionOptions::with_ctx(128)).unwrap();
    let mut sampler = Sampler::new(SamplerConfig::greedy()).unwrap();
    let mut out = Vec::new();
    s.generate(prompt, max, &mut sampler, |ev| {
        if ev.id != u32::MAX {
            out.push(ev.id);
        }
        ControlFlow::Continue(())
    })
    .unwrap();
    out
}

#[test]
fn many_requests_give_what_each_gives_alone() {
    let e = engine();
    // 3 slots, 6 requests: some wait; a budget of 8 tokens cuts every prompt into chunks
    // that share steps with the others' decode tokens
    let mut sched = Scheduler::new(&e, &options(3, 8)).unwrap();
    let prompts: Vec<Vec<u32>> = (0..6).map(|i| prompt(i, 5 + 9 * i as usize)).collect();
    let handles: Vec<_> = prompts
        .iter()
        .map(|p| sched.submit(Request::greedy(p.clone(), 12)).unwrap())
        .collect();
    let mut max_running = 0;
    while !sched.is_idle() {
        let st = sched.step().unwrap();
        assert!(st.prompt_tokens + st.decode_tokens <= 8, "the budget holds");
        max_running = max_running.max(st.running);
    }
    assert_eq!(max_running, 3, "three slots");
    for (p, h) in prompts.iter().zip(handles) {
        let (ids, _, done) = h.wait().unwrap();
        assert_eq!(ids, alone(&e, p, 12), "prompt of {} tokens", p.len());
        assert!(matches!(
            done.stop,
            StopReason::Length | StopReason::EndOfGeneration
        ));
        assert_eq!(done.prompt_tokens, p.len());
    }
    assert_eq!(sched.pool_stats().held, 0, "no block leaks");
}

#[test]
fn bad_requests_are_refused_and_the_others_go_on() {
    let e = engine();
    let mut sched = Scheduler::new(
        &e,
        &SchedulerOptions {
            max_queue: 2,
            ..options(1, 64)
        },
    )
    .unwrap();
    let err = |r: Request| sched.submit(r).err().expect("refused");
    assert_eq!(err(Request::greedy(vec![], 4)), RequestError::EmptyPrompt);
    assert!(matches!(
        err(Request::greedy(prompt(1, 128), 4)),
        RequestError::PromptTooLong { tokens: 128, .. }
    ));
    assert!(matches!(
        err(Request::greedy(vec![1, 99_999], 4)),
        RequestError::InvalidToken { id: 99_999, .. }
    ));
    let mut bad = Request::greedy(prompt(1, 4), 4);
    bad.sampling.top_p = 7.0;
    assert_eq!(err(bad).code(), "invalid_sampling");
    let a = sched.submit(Request::greedy(prompt(2, 10), 6)).unwrap();
    let b = sched.submit(Request::greedy(prompt(3, 10), 6)).unwrap();
    assert!(matches!(
        err(Request::greedy(prompt(4, 10), 6)),
        RequestError::QueueFull { capacity: 2 }
    ));
    sched.run_until_idle().unwrap();
    assert_eq!(a.wait().unwrap().0, alone(&e, &prompt(2, 10), 6));
    assert_eq!(b.wait().unwrap().0, alone(&e, &prompt(3, 10), 6));
    // the queue has room again
    let c = sched.submit(Request::greedy(prompt(4, 10), 6)).unwrap();
    sched.run_until_idle().unwrap();
    assert!(c.wait().is_ok());
    // max_tokens 0: the prompt runs, nothing is generated
    let d = sched.submit(Request::greedy(prompt(5, 10), 0)).unwrap();
    sched.run_until_idle().unwrap();
    let (ids, text, done) = d.wait().unwrap();
    assert!(ids.is_empty() && text.is_empty());
    assert_eq!((done.generated_tokens, done.stop), (0, StopReason::Length));
    assert_eq!(sched.pool_stats().held, 0);
}

#[test]
fn cancelled_requests_stop_and_free_their_blocks() {
    let e = engine();
    let mut sched = Scheduler::new(&e, &options(2, 64)).unwrap();
    let long = |seed| {
        let mut r = Request::greedy(prompt(seed, 30), 80);
        r.ignore_eos = true;
        r
    };
    let a = sched.submit(long(1)).unwrap();
    let b = sched.submit(long(2)).unwrap();
    let waiting = sched.submit(long(3)).unwrap();
    let dropped = sched.submit(long(4)).unwrap();
    for _ in 0..5 {
        sched.step().unwrap();
    }
    a.cancel();
    waiting.cancel();
    drop(dropped);
    let before = sched.pool_stats().held;
    sched.step().unwrap();
    assert!(sched.pool_stats().held < before, "a's blocks are freed");
    sched.run_until_idle().unwrap();
    let (ids, _, done) = a.wait().unwrap();
    assert_eq!(done.stop, StopReason::Cancelled);
    assert!(!ids.is_empty() && ids.len() < 80, "stopped early");
    assert_eq!(waiting.wait().unwrap_err(), RequestError::Cancelled);
    let (ids, _, done) = b.wait().unwrap();
    assert_eq!((ids.len(), done.stop), (80, StopReason::Length));
    assert_eq!(sched.pool_stats().held, 0);
}

#[test]
fn an_exhausted_pool_ends_one_request_and_the_other_finishes() {
    let e = engine();
    // 128 positions for two sequences that each want 128
    let mut sched = Scheduler::new(
        &e,
        &SchedulerOptions {
            kv_size: 128,
            ..options(2, 64)
        },
    )
    .unwrap();
    let long = |seed| {
        let mut r = Request::greedy(prompt(seed, 40), 200);
        r.ignore_eos = true;
        r
    };
    let (a, b) = (
        sched.submit(long(1)).unwrap(),
        sched.submit(long(2)).unwrap(),
    );
    sched.run_until_idle().unwrap();
    let results = [a.wait(), b.wait()];
    let failed: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(failed.len(), 1, "{results:?}");
    assert_eq!(failed[0].code(), "kv_cache_full");
    let (_, _, done) = results.iter().find_map(|r| r.as_ref().ok()).unwrap();
    assert_eq!(done.stop, StopReason::ContextFull);
    assert_eq!(sched.pool_stats().held, 0);
}

#[test]
fn stop_strings_end_the_output_before_them() {
    let e = engine();
    let mut sched = Scheduler::new(&e, &options(1, 64)).unwrap();
    let p = prompt(5, 12);
    let mut r = Request::greedy(p.clone(), 40);
    r.ignore_eos = true;
    let full = {
        let h = sched.submit(r.clone()).unwrap();
        sched.run_until_idle().unwrap();
        h.wait().unwrap().1
    };
    // a stop string from the middle of the text: the output ends right before it
    let chars: Vec<char> = full.chars().collect();
    assert!(chars.len() > 8, "{full:?}");
    let stop: String = chars[chars.len() / 2..chars.len() / 2 + 3].iter().collect();
    r.stop = vec![stop.clone()];
    let h = sched.submit(r).unwrap();
    sched.run_until_idle().unwrap();
    let (_, text, done) = h.wait().unwrap();
    assert_eq!(done.stop, StopReason::StopSequence);
    assert_eq!(text, full[..full.find(&stop).unwrap()]);
    assert_eq!(sched.pool_stats().held, 0);
}

#[test]
fn shared_prefixes_are_held_once() {
    let e = engine();
    let mut sched = Scheduler::new(&e, &options(8, 512)).unwrap();
    let prefix = prompt(9, 64); // four blocks
    let with_suffix = |i: u32| {
        let mut p = prefix.clone();
        p.extend(prompt(100 + i, 5));
        let mut r = Request::greedy(p, 4);
        r.ignore_eos = true;
        r
    };
    // eight at once: the first computes the prefix, the others wait for its blocks
    let handles: Vec<_> = (0..8)
        .map(|i| sched.submit(with_suffix(i)).unwrap())
        .collect();
    let mut peak = 0;
    while !sched.is_idle() {
        sched.step().unwrap();
        peak = peak.max(sched.pool_stats().held);
    }
    let cached: Vec<usize> = handles
        .into_iter()
        .map(|h| h.wait().unwrap().2.cached_tokens)
        .collect();
    assert_eq!(cached, [0, 64, 64, 64, 64, 64, 64, 64]);
    // 4 shared blocks + one block each for 69..73 positions
    assert_eq!(peak, 4 + 8, "the prefix is held once");
    // a later request takes the cached prefix too
    let h = sched.submit(with_suffix(20)).unwrap();
    sched.run_until_idle().unwrap();
    assert_eq!(h.wait().unwrap().2.cached_tokens, 64);
    assert_eq!(sched.pool_stats().held, 0);
    assert!(sched.pool_stats().cached >= 4);
    // and every sequence's tokens are what it gives alone
    let p = with_suffix(3).prompt;
    let h = sched.submit(Request::greedy(p.clone(), 4)).unwrap();
    sched.run_until_idle().unwrap();
    assert_eq!(h.wait().unwrap().0, alone(&e, &p, 4));
}

#[test]
fn events_stream_tokens_then_done() {
    let e = engine();
    let mut sched = Scheduler::new(&e, &options(1, 64)).unwrap();
    let mut r = Request::greedy(prompt(7, 8), 5);
    r.ignore_eos = true;
    let h = sched.submit(r).unwrap();
    sched.run_until_idle().unwrap();
    let events: Vec<Event> = h.events.try_iter().collect();
    let tokens = events
        .iter()
        .filter(|e| matches!(e, Event::Token { id, .. } if *id != u32::MAX))
        .count();
    assert_eq!(tokens, 5);
    assert!(matches!(events.last(), Some(Event::Done(d)) if d.generated_tokens == 5));
}

/// The last logits of `tokens` appended to `seq`.
fn feed(e: &Engine, pool: &mut KvPool, seq: SeqId, tokens: &[u32]) -> Vec<f32> {
    let mut step = Step::new();
    step.add(seq, pool.seq_len(seq).unwrap(), tokens, Logits::Last);
    let mut out = Vec::new();
    let mut scratch = Scratch::new(64);
    forward(
        e.weights(),
        pool,
        &mut scratch,
        e.kernels(),
        e.parallel(),
        &step,
        |_, l| out = l.to_vec(),
    )
    .unwrap();
    out
}

const POOL: PoolOptions = PoolOptions {
    n_ctx: 128,
    n_positions: 256,
    k_type: KvType::F16,
    v_type: KvType::F16,
};

/// The last logits of `tokens` in a pool of their own.
fn alone_logits(e: &Engine, tokens: &[u32]) -> Vec<f32> {
    let mut pool = KvPool::new(e.weights(), &POOL).unwrap();
    let s = pool.add_seq();
    feed(e, &mut pool, s, tokens)
}

/// Forking a sequence shares its full blocks and copies its partial last one; both go on
/// as if each had run alone, and a rollback into a shared block copies it first.
#[test]
fn forked_and_rolled_back_sequences_give_what_they_give_alone() {
    let e = engine();
    let mut pool = KvPool::new(e.weights(), &POOL).unwrap();
    let base = prompt(3, 40); // two full blocks and 8 positions
    let (a_tail, b_tail) = (prompt(4, 9), prompt(5, 7));
    let cat = |x: &[u32], y: &[u32]| [x, y].concat();
    let a = pool.add_seq();
    feed(&e, &mut pool, a, &base);
    let held = pool.stats().held;
    let b = pool.fork(a).unwrap();
    assert_eq!(
        pool.stats().held,
        held + 1,
        "only the partial block is copied"
    );
    let got_a = feed(&e, &mut pool, a, &a_tail);
    let got_b = feed(&e, &mut pool, b, &b_tail);
    assert!(
        got_a == alone_logits(&e, &cat(&base, &a_tail)),
        "the original as alone"
    );
    assert!(
        got_b == alone_logits(&e, &cat(&base, &b_tail)),
        "the fork as alone"
    );
    // a rollback into the shared second block: it is copied before it is written
    pool.truncate(b, 20).unwrap();
    let got = feed(&e, &mut pool, b, &b_tail);
    assert!(
        got == alone_logits(&e, &cat(&base[..20], &b_tail)),
        "rolled back"
    );
    // the original's blocks were not touched: its next token is what it is alone
    let got = feed(&e, &mut pool, a, &[7]);
    let want = alone_logits(&e, &cat(&cat(&base, &a_tail), &[7]));
    assert!(got == want, "the original's blocks are intact");
    pool.remove_seq(a).unwrap();
    pool.remove_seq(b).unwrap();
    assert_eq!(pool.stats().held, 0);
}

/// Log-probabilities: the greedy token is the most likely one, alternatives come most likely
/// first, they are a distribution's (≤ 0, summing to at most 1), and they match a log-softmax
/// of the session's logits for the same prefix.
#[test]
fn logprobs_are_the_models_distribution() {
    let e = engine();
    let mut sched = Scheduler::new(&e, &options(2, 64)).unwrap();
    let p = prompt(3, 20);
    let mut r = Request::greedy(p.clone(), 4);
    r.logprobs = Some(5);
    let h = sched.submit(r).unwrap();
    let mut plain = Request::greedy(p.clone(), 4);
    plain.logprobs = None;
    let h_plain = sched.submit(plain).unwrap();
    sched.run_until_idle().unwrap();

    let mut ids = Vec::new();
    let mut lps = Vec::new();
    for ev in h.events.iter() {
        match ev {
            Event::Token {
                id,
                logprob: Some(lp),
                ..
            } => {
                ids.push(id);
                lps.push(*lp);
            }
            Event::Token { id, .. } => assert_eq!(id, u32::MAX, "a token without logprobs"),
            Event::Done(_) => break,
            Event::Error(e) => panic!("{e}"),
        }
    }
    assert_eq!(ids.len(), 4);
    for (id, lp) in ids.iter().zip(&lps) {
        assert_eq!(lp.top.len(), 5);
        assert_eq!(lp.top[0].0, *id, "greedy picks the most likely token");
        assert_eq!(lp.top[0].1, lp.logprob);
        assert!(lp.top.windows(2).all(|w| w[0].1 >= w[1].1), "{:?}", lp.top);
        assert!(lp.logprob <= 0.0);
        let mass: f32 = lp.top.iter().map(|t| t.1.exp()).sum();
        assert!(mass <= 1.0 + 1e-5, "{mass}");
    }
    // the first token's log-probability against the session's logits after the prompt
    let mut s = e.session(&SessionOptions::with_ctx(128)).unwrap();
    s.feed(&p).unwrap();
    let logits = s.logits();
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let lse = max
        + logits
            .iter()
            .map(|&l| ((l - max) as f64).exp())
            .sum::<f64>()
            .ln() as f32;
    let want = logits[ids[0] as usize] - lse;
    assert!(
        (lps[0].logprob - want).abs() < 1e-4,
        "{} vs {want}",
        lps[0].logprob
    );
    // asking for them changes nothing else
    let (plain_ids, _, _) = h_plain.wait().unwrap();
    assert_eq!(plain_ids, ids);

    let mut too_many = Request::greedy(p, 1);
    too_many.logprobs = Some(21);
    assert!(matches!(
        sched.submit(too_many),
        Err(RequestError::InvalidLogprobs(21))
    ));
    assert_eq!(sched.pool_stats().held, 0);
}

/// `prefill_chunk`: while a request decodes, a step takes at most that many prompt tokens;
/// with nobody decoding, a prompt gets the whole `n_batch`. Answers do not change.
#[test]
fn prefill_chunk_bounds_prompt_tokens_while_others_decode() {
    let e = engine();
    let short = prompt(1, 5);
    let long = prompt(2, 100);
    let want = alone(&e, &long, 6);
    let mut sched = Scheduler::new(
        &e,
        &SchedulerOptions {
            prefill_chunk: 8,
            ..options(2, 64)
        },
    )
    .unwrap();
    let a = sched.submit(Request::greedy(short, 40)).unwrap();
    let first = sched.step().unwrap();
    assert_eq!((first.prompt_tokens, first.decode_tokens), (5, 0));
    let b = sched.submit(Request::greedy(long, 6)).unwrap();
    let mut steps = Vec::new();
    while !sched.is_idle() {
        steps.push(sched.step().unwrap());
    }
    for s in &steps {
        if s.decode_tokens > 0 {
            assert!(s.prompt_tokens <= 8, "{s:?}");
        }
    }
    assert!(steps
        .iter()
        .any(|s| s.prompt_tokens == 8 && s.decode_tokens > 0));
    assert_eq!(b.wait().unwrap().0, want);
    a.wait().unwrap();
    assert_eq!(sched.pool_stats().held, 0);
}

#[test]
fn prompt_lookup_requests_give_what_each_gives_alone() {
    use superinfer_runtime::scheduler::Lookup;
    let e = engine();
    // a budget of 10 tokens for 3 slots: drafts are cut to what the other decode tokens leave
    let mut sched = Scheduler::new(&e, &options(3, 10)).unwrap();
    // prompts that repeat themselves, so that lookup has something to draft
    let prompts: Vec<Vec<u32>> = (0..5)
        .map(|i| {
            let p = prompt(i, 6 + i as usize);
            p.iter().chain(&p).chain(&p[..3]).copied().collect()
        })
        .collect();
    let handles: Vec<_> = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut r = Request::greedy(p.clone(), 24);
            // every other request plain: the two kinds share steps
            r.lookup = (i % 2 == 0).then_some(Lookup {
                ngram: 3,
                draft_max: 8,
            });
            sched.submit(r).unwrap()
        })
        .collect();
    while !sched.is_idle() {
        let st = sched.step().unwrap();
        assert!(
            st.prompt_tokens + st.decode_tokens <= 10,
            "the budget holds"
        );
    }
    let (mut drafted, mut accepted) = (0, 0);
    for (i, (p, h)) in prompts.iter().zip(handles).enumerate() {
        let (ids, _, done) = h.wait().unwrap();
        assert_eq!(ids, alone(&e, p, 24), "request {i}");
        assert!(done.accepted_tokens <= done.drafted_tokens);
        if i % 2 == 1 {
            assert_eq!(done.drafted_tokens, 0, "request {i} did not ask for lookup");
        }
        drafted += done.drafted_tokens;
        accepted += done.accepted_tokens;
    }
    eprintln!("prompt lookup: {drafted} tokens drafted, {accepted} accepted");
    assert!(accepted > 0, "no drafted token was ever accepted");
    assert!(
        drafted > 0,
        "lookup found nothing to draft in repeated prompts"
    );
    assert_eq!(sched.pool_stats().held, 0, "no block leaks");
}

#[test]
fn bad_lookup_settings_are_refused() {
    use superinfer_runtime::scheduler::Lookup;
    let e = engine();
    let sched = Scheduler::new(&e, &options(1, 8)).unwrap();
    for (ngram, draft_max) in [(0, 8), (3, 0), (100, 8), (3, 100_000)] {
        let mut r = Request::greedy(prompt(1, 8), 4);
        r.lookup = Some(Lookup { ngram, draft_max });
        assert!(
            matches!(sched.submit(r), Err(RequestError::InvalidSampling(_))),
            "ngram {ngram}, draft {draft_max}"
        );
    }
}

/// The scheduler's model with its weights in another format: a draft that is mostly right.
fn draft_engine() -> Engine {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    let p = PATH.get_or_init(|| {
        synth::write_temp(
            &Spec {
                weight_type: superinfer_runtime::core::quant::GgmlType::Q4_0,
                ..Spec::llama()
            },
            "scheduler-llama-draft-q4",
        )
    });
    Engine::load(
        p,
        &EngineOptions {
            threads: 2,
            ..Default::default()
        },
    )
    .unwrap()
}

#[test]
fn draft_model_requests_give_what_each_gives_alone() {
    use superinfer_runtime::scheduler::Lookup;
    use superinfer_runtime::speculative::DraftOptions;
    let e = engine();
    let d = draft_engine();
    let opts = DraftOptions {
        max: 6,
        min: 0,
        p_min: 0.0,
        vocab: None,
        adaptive: false,
    };
    // 3 slots, 7 requests (the slots' draft models are reused by later requests), a budget
    // of 12: draft-model, lookup and plain requests share steps
    let mut sched = Scheduler::new(&e, &options(3, 12))
        .unwrap()
        .with_draft(&d, opts)
        .unwrap();
    let prompts: Vec<Vec<u32>> = (0..7).map(|i| prompt(i, 4 + 7 * i as usize)).collect();
    let handles: Vec<_> = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut r = Request::greedy(p.clone(), 20);
            match i % 3 {
                0 | 1 => r.draft_model = Some(3 + i),
                _ => {
                    r.lookup = Some(Lookup {
                        ngram: 2,
                        draft_max: 4,
                    })
                }
            }
            // one draft-model request samples: its draft is drawn, and verified by the
            // speculative sampling rule (the output is checked by the chi-square test of
            // tests/speculative.rs; here it must only run and end)
            if i == 4 {
                r.ignore_eos = true;
                r.sampling = SamplerConfig {
                    temperature: 0.8,
                    seed: 3,
                    ..SamplerConfig::default()
                };
            }
            sched.submit(r).unwrap()
        })
        .collect();
    while !sched.is_idle() {
        let st = sched.step().unwrap();
        assert!(
            st.prompt_tokens + st.decode_tokens <= 12,
            "the budget holds"
        );
    }
    let (mut drafted, mut accepted) = (0, 0);
    for (i, (p, h)) in prompts.iter().zip(handles).enumerate() {
        let (ids, _, done) = h.wait().unwrap();
        if i != 4 {
            assert_eq!(ids, alone(&e, p, 20), "request {i}");
        } else {
            assert_eq!(ids.len(), 20, "the sampled request ran to its length");
        }
        assert!(done.accepted_tokens <= done.drafted_tokens);
        if i % 3 != 2 {
            drafted += done.drafted_tokens;
            accepted += done.accepted_tokens;
        }
    }
    eprintln!("draft model: {drafted} tokens drafted, {accepted} accepted");
    assert!(drafted > 0, "the draft model drafted nothing");
    assert!(accepted > 0, "no drafted token was ever accepted");
    assert_eq!(sched.pool_stats().held, 0, "no block leaks");
}

#[test]
fn draft_model_requests_are_refused_without_one_or_with_bad_lengths() {
    let e = engine();
    let sched = Scheduler::new(&e, &options(1, 8)).unwrap();
    let mut r = Request::greedy(prompt(1, 8), 4);
    r.draft_model = Some(4);
    assert!(matches!(
        sched.submit(r.clone()),
        Err(RequestError::InvalidSampling(m)) if m.contains("--model-draft")
    ));
    // (a draft of another vocabulary: `with_draft` runs the check of `DraftModel::new`,
    // which tests/speculative.rs refuses with Gemma-3 drafting for Qwen2.5)
    // with a draft model, lengths outside 1..=64 are refused
    let d = draft_engine();
    let sched = Scheduler::new(&e, &options(1, 8))
        .unwrap()
        .with_draft(&d, Default::default())
        .unwrap();
    for n in [0, 65] {
        r.draft_model = Some(n);
        assert!(
            matches!(
                sched.submit(r.clone()),
                Err(RequestError::InvalidSampling(_))
            ),
            "draft of {n}"
        );
    }
}

#[test]
fn a_draft_model_that_is_the_model_itself_has_every_token_accepted() {
    use superinfer_runtime::speculative::DraftOptions;
    let (e, same) = (engine(), engine());
    let opts = DraftOptions {
        max: 5,
        min: 0,
        p_min: 0.0,
        vocab: None,
        adaptive: false,
    };
    let mut sched = Scheduler::new(&e, &options(2, 16))
        .unwrap()
        .with_draft(&same, opts)
        .unwrap();
    let handles: Vec<_> = (0..3)
        .map(|i| {
            let mut r = Request::greedy(prompt(i, 6 + 5 * i as usize), 17);
            r.ignore_eos = true;
            r.draft_model = Some(5);
            sched.submit(r).unwrap()
        })
        .collect();
    sched.run_until_idle().unwrap();
    for h in handles {
        let (ids, _, done) = h.wait().unwrap();
        assert_eq!(ids.len(), 17);
        // the draft's logits are the model's bit for bit (one token at a time against the
        // verification step's batch): every drafted token is right, the last step's too
        assert!(done.drafted_tokens > 0);
        assert_eq!(done.accepted_tokens, done.drafted_tokens, "{done:?}");
    }
    assert_eq!(sched.pool_stats().held, 0);
}

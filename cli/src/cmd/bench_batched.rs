//! `superinfer bench -np N`: N sequences advancing together through the scheduler, measured
//! as llama-batched-bench measures it (`-npl N -npp P -ntg G`): each sequence gets a prompt of
//! `-p` random tokens, all prompts run in one step (in passes of 512 tokens), then every
//! sequence decodes `-n` tokens, one token of each in every step. Prompt t/s is N·P over the
//! prompt step's time (llama.cpp's S_PP); decode t/s is the aggregate N·G over the decode
//! steps' time (S_TG), so per-sequence speed is that over N. Greedy sampling of each token
//! is part of the step, as in a server.

use superinfer_runtime::core::model::lora::LoraSet;
use superinfer_runtime::core::sampler::Rng;
use superinfer_runtime::scheduler::{Request, StepStats};
use superinfer_runtime::{Engine, Scheduler, SchedulerOptions};

use superinfer_runtime::mem::{peak_rss_bytes, reset_peak_rss};

use super::bench::{random_tokens, Test};
use crate::args::BenchArgs;

/// Runs the `np`-sequence test: one warm-up, then `-r` repetitions. Returns a prompt test and
/// (when `-n` > 0) a decode test.
pub(super) fn run(
    engine: &Engine,
    a: &BenchArgs,
    threads: usize,
    np: usize,
    load_peak_rss: Option<u64>,
    rng: &mut Rng,
) -> Result<Vec<Test>, String> {
    let (p, n) = (a.n_prompt, a.n_gen);
    if np == 0 {
        return Err("-np: sequence counts must be at least 1".into());
    }
    if p == 0 {
        return Err("-np needs a prompt for each sequence (-p > 0)".into());
    }
    let n_ctx = p + n + 1;
    let c = engine.config();
    if n_ctx > c.n_ctx_train {
        return Err(format!(
            "a sequence of {n_ctx} tokens exceeds the model's trained context of {}",
            c.n_ctx_train
        ));
    }
    let opts = SchedulerOptions {
        n_parallel: np,
        // every prompt in one step, as llama-batched-bench decodes them
        n_batch: (np * p).max(512),
        prefill_chunk: 0,
        n_ctx,
        kv_size: np * n_ctx.next_multiple_of(16),
        cache_type_k: a.cache.k,
        cache_type_v: a.cache.v,
        max_queue: np,
    };
    let mut sched = Scheduler::new(engine, &opts).map_err(|e| e.to_string())?;
    let lora = a.lora.sets(engine, np)?;
    once(&mut sched, &lora, np, p, n.min(1), c.n_vocab, rng)?;
    reset_peak_rss();
    let (mut pp, mut tg) = (Vec::new(), Vec::new());
    for _ in 0..a.repetitions {
        let (p_ns, g_ns) = once(&mut sched, &lora, np, p, n, c.n_vocab, rng)?;
        pp.push(p_ns);
        tg.push(g_ns);
    }
    let test = |n_prompt, n_gen, samples_ns| Test {
        n_prompt,
        n_gen,
        n_depth: 0,
        n_parallel: np,
        threads,
        samples_ns,
        peak_rss: peak_rss_bytes(),
        load_peak_rss,
        kv_bytes: sched.kv_cache_bytes(),
    };
    let mut tests = vec![test(p, 0, pp)];
    if n > 0 {
        tests.push(test(0, n, tg));
    }
    Ok(tests)
}

/// One repetition: `np` requests of `p` random prompt tokens and `n` decode steps each,
/// request `i` under `lora[i]` (none when `lora` is empty). Returns the prompt steps' and
/// the decode steps' wall time in ns.
fn once(
    sched: &mut Scheduler<'_>,
    lora: &[Option<LoraSet>],
    np: usize,
    p: usize,
    n: usize,
    n_vocab: usize,
    rng: &mut Rng,
) -> Result<(u64, u64), String> {
    let handles = (0..np)
        .map(|i| {
            let mut r = Request::greedy(random_tokens(rng, n_vocab, p), n + 1);
            r.ignore_eos = true;
            r.lora = lora.get(i).cloned().flatten();
            sched.submit(r).map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let (mut pp, mut tg, mut decoded) = (0u64, 0u64, 0);
    while !sched.is_idle() {
        let st: StepStats = sched.step().map_err(|e| e.to_string())?;
        let ns = st.time.as_nanos() as u64;
        if st.prompt_tokens > 0 {
            pp += ns;
        } else {
            tg += ns;
            decoded += st.decode_tokens;
        }
    }
    for h in handles {
        let (ids, _, _) = h.wait().map_err(|e| e.to_string())?;
        if ids.len() != n + 1 {
            return Err(format!(
                "a sequence generated {} tokens, not {}",
                ids.len(),
                n + 1
            ));
        }
    }
    if decoded != np * n {
        return Err(format!(
            "{decoded} decode tokens ran outside the prompt step, not {}",
            np * n
        ));
    }
    Ok((pp, tg))
}

//! The prefix cache on a real model (Qwen2.5-0.5B): a request that shares a 1,024-token
//! prefix with an earlier one takes its blocks from the cache and spends a small part of the
//! earlier one's prompt time, and eight requests sharing the prefix hold its blocks once.

use superinfer_runtime::scheduler::Request;
use superinfer_runtime::{Engine, EngineOptions, Scheduler, SchedulerOptions};
use superinfer_tests::*;

const PREFIX: usize = 1024;

#[test]
fn a_shared_1024_token_prefix_is_computed_once() {
    let e = Engine::load(
        &require_model(QWEN_05B),
        &EngineOptions {
            threads: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let text = std::fs::read_to_string(fixtures_dir().join("texts/gpl-3.txt")).unwrap();
    let all = e.tokenizer().encode(&text, true, false).unwrap();
    let prefix = &all[..PREFIX];
    // each request: the prefix, then 16 tokens of its own (from further in the text)
    let request = |i: usize, max: usize| {
        let mut p = prefix.to_vec();
        p.extend_from_slice(&all[2000 + 16 * i..2016 + 16 * i]);
        Request::greedy(p, max)
    };
    let mut sched = Scheduler::new(
        &e,
        &SchedulerOptions {
            n_parallel: 8,
            n_ctx: 1100,
            ..Default::default()
        },
    )
    .unwrap();
    let run = |sched: &mut Scheduler<'_>, r: Request| {
        let h = sched.submit(r).unwrap();
        sched.run_until_idle().unwrap();
        h.wait().unwrap().2
    };
    let first = run(&mut sched, request(0, 1));
    let second = run(&mut sched, request(1, 1));
    assert_eq!(first.cached_tokens, 0);
    assert_eq!(
        second.cached_tokens, PREFIX,
        "the whole prefix comes from the cache"
    );
    let share = second.prompt_time.as_secs_f64() / first.prompt_time.as_secs_f64();
    eprintln!(
        "prompt of {} tokens: {:.1} ms; sharing its first {PREFIX}: {:.1} ms ({:.1}%)",
        PREFIX + 16,
        first.prompt_time.as_secs_f64() * 1e3,
        second.prompt_time.as_secs_f64() * 1e3,
        100.0 * share
    );
    assert!(
        share <= 0.10,
        "{:.1}% of the first prompt's time",
        100.0 * share
    );

    // eight at once: the prefix's 64 blocks are held once, each request adds its own two
    let handles: Vec<_> = (2..10)
        .map(|i| sched.submit(request(i, 3)).unwrap())
        .collect();
    let mut peak = 0;
    while !sched.is_idle() {
        sched.step().unwrap();
        peak = peak.max(sched.pool_stats().held);
    }
    for h in handles {
        assert_eq!(h.wait().unwrap().2.cached_tokens, PREFIX);
    }
    let own = (PREFIX + 16 + 3).div_ceil(16) - PREFIX / 16;
    eprintln!(
        "8 requests sharing the prefix: peak {peak} blocks held (unshared: {})",
        8 * (PREFIX / 16 + own)
    );
    assert_eq!(peak, PREFIX / 16 + 8 * own);
    assert_eq!(sched.pool_stats().held, 0, "no block leaks");
}

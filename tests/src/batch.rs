//! Batch invariance: run many sequences through the batched forward pass together (prompt
//! chunks of some mixed with decode tokens of others in one step) and compare each with the
//! same sequence alone (tests/tests/batch_invariance.rs on the dense models,
//! moe_fixtures.rs on the mixtures of experts).

use superinfer_runtime::core::model::lora::LoraSet;
use superinfer_runtime::core::model::{forward, KvPool, Logits, PoolOptions, Scratch, SeqId, Step};
use superinfer_runtime::core::ops::attention::KvType;
use superinfer_runtime::Engine;

use crate::argmax;

/// Tokens each sequence decodes greedily after its prompt.
pub const GEN: usize = 6;

pub struct Plan {
    pub prompt: Vec<u32>,
    /// Round of the shared loop in which the sequence starts.
    pub start: usize,
    /// Prompt chunk sizes, cycled.
    pub chunks: Vec<usize>,
}

/// Runs `plans` together, one step per round: each started sequence adds its next prompt
/// chunk or its next decode token. Returns, per sequence, the logits of its prompt's last
/// token and of each decode step, and its greedy tokens.
pub fn run(e: &Engine, plans: &[Plan], cap: usize, kv: KvType) -> Vec<(Vec<Vec<f32>>, Vec<u32>)> {
    run_lora(e, plans, &[], cap, kv)
}

/// [`run`] with sequence `i` under the LoRA adapters `lora[i]` (none past its end).
pub fn run_lora(
    e: &Engine,
    plans: &[Plan],
    lora: &[Option<LoraSet>],
    cap: usize,
    kv: KvType,
) -> Vec<(Vec<Vec<f32>>, Vec<u32>)> {
    let mut pool = KvPool::new(
        e.weights(),
        &PoolOptions {
            n_ctx: 1024,
            n_positions: 8 * 1024,
            k_type: kv,
            v_type: kv,
        },
    )
    .unwrap();
    let mut scratch = Scratch::new(cap);
    let seqs: Vec<SeqId> = plans.iter().map(|_| pool.add_seq()).collect();
    let mut out: Vec<(Vec<Vec<f32>>, Vec<u32>)> = vec![(Vec::new(), Vec::new()); plans.len()];
    let mut fed = vec![0usize; plans.len()];
    let mut chunk_no = vec![0usize; plans.len()];
    let mut step = Step::new();
    let mut owner = Vec::new();
    for round in 0.. {
        step.clear();
        owner.clear();
        for (i, p) in plans.iter().enumerate() {
            if round < p.start || out[i].1.len() == GEN {
                continue;
            }
            let (n_prompt, pos) = (p.prompt.len(), fed[i]);
            if pos < n_prompt {
                let n = p.chunks[chunk_no[i] % p.chunks.len()].min(n_prompt - pos);
                chunk_no[i] += 1;
                let which = if pos + n == n_prompt {
                    Logits::Last
                } else {
                    Logits::None
                };
                let slot = lora
                    .get(i)
                    .and_then(Option::as_ref)
                    .map(|l| step.add_lora_set(l));
                step.add_with(seqs[i], pos, &p.prompt[pos..pos + n], which, slot);
                owner.extend(std::iter::repeat_n(i, n));
                fed[i] += n;
            } else {
                let last = *out[i].1.last().expect("the prompt gave a token");
                let slot = lora
                    .get(i)
                    .and_then(Option::as_ref)
                    .map(|l| step.add_lora_set(l));
                step.add_with(seqs[i], pos, &[last], Logits::Last, slot);
                owner.push(i);
                fed[i] += 1;
            }
        }
        if step.is_empty() {
            if plans.iter().all(|p| round >= p.start) {
                break;
            }
            continue;
        }
        forward(
            e.weights(),
            &mut pool,
            &mut scratch,
            e.kernels(),
            e.parallel(),
            &step,
            |i, logits| {
                let o = &mut out[owner[i]];
                o.0.push(logits.to_vec());
                o.1.push(argmax(logits));
            },
        )
        .unwrap();
    }
    for s in seqs {
        pool.remove_seq(s).unwrap();
    }
    assert_eq!(pool.stats().held, 0, "every block is given back");
    out
}

pub fn bits(v: &[Vec<f32>]) -> Vec<Vec<u32>> {
    v.iter()
        .map(|r| r.iter().map(|x| x.to_bits()).collect())
        .collect()
}

/// Each of `prompts` (up to 8) decoded greedily for `GEN` tokens gives bit-identical logits
/// and tokens alone, among the others (started one round apart, so prompts share steps with
/// decode tokens), and with the prompts cut into chunks of various sizes in passes of at most
/// 48 tokens.
pub fn check_invariance(e: &Engine, prompts: &[Vec<u32>], kv: KvType, label: &str) {
    // alone, each prompt in one step
    let alone: Vec<_> = prompts
        .iter()
        .map(|p| {
            let plan = Plan {
                prompt: p.clone(),
                start: 0,
                chunks: vec![512],
            };
            run(e, &[plan], 512, kv).remove(0)
        })
        .collect();
    // every prompt with its start round and chunk sizes
    let plans = |plan: &dyn Fn(usize) -> (usize, Vec<usize>)| -> Vec<Plan> {
        let plan_of = |(i, p): (usize, &Vec<u32>)| {
            let (start, chunks) = plan(i);
            Plan {
                prompt: p.clone(),
                start,
                chunks,
            }
        };
        prompts.iter().enumerate().map(plan_of).collect()
    };
    // together, started one round apart: prompts of some share steps with decode tokens of
    // others
    let together = run(e, &plans(&|i| (i, vec![512])), 512, kv);
    // together, prompts cut into chunks of various sizes, passes of at most 48 tokens
    let chunked = run(e, &plans(&|i| (i % 3, vec![1 + i * 5, 16, 7 + i])), 48, kv);
    for (i, a) in alone.iter().enumerate() {
        assert_eq!(a.1.len(), GEN);
        let among = format!("among {} others", prompts.len() - 1);
        for (how, other) in [(&*among, &together[i]), ("chunked", &chunked[i])] {
            assert_eq!(a.1, other.1, "{label}: sequence {i} tokens {how}");
            assert!(
                bits(&a.0) == bits(&other.0),
                "{label}: sequence {i} ({} prompt tokens) logits differ {how}",
                prompts[i].len()
            );
        }
    }
    eprintln!(
        "{label} ({kv} cache): {} sequences, {GEN} logit rows each, bit-identical alone, among \
         others and chunked",
        alone.len()
    );
}

//! Core's generation API (`superinfer_core::generate`) as firmware and the browser use it:
//! a model borrowed from the file's bytes (no repacking), a context whose memory is known
//! before it is made and allocated once, and a decode loop that allocates nothing per token.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ops::ControlFlow;

use superinfer_runtime::core::generate::{Context, ContextOptions, MemoryPlan, Model};
use superinfer_runtime::core::kernels::{self, Kernels};
use superinfer_runtime::core::ops::attention::KvType;
use superinfer_runtime::core::parallel::Sequential;
use superinfer_runtime::core::quant::GgmlType;
use superinfer_runtime::core::sampler::{Sampler, SamplerConfig};
use superinfer_runtime::{cpu, Engine, EngineOptions, SessionOptions};
use superinfer_tests::synth::{self, Spec};

/// Counts this thread's allocations (tests run on threads of their own).
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counter is a const-initialized thread-local
// Cell, which neither allocates nor re-enters the allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: as above.
        unsafe { System.realloc(p, l, n) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

/// The file's bytes at a 32-byte aligned address, as firmware places them in flash.
fn aligned(bytes: &[u8]) -> Vec<[u64; 4]> {
    let mut v = vec![[0u64; 4]; bytes.len().div_ceil(32)];
    let dst: &mut [u8] = bytemuck_bytes(&mut v);
    dst[..bytes.len()].copy_from_slice(bytes);
    v
}

fn bytemuck_bytes(v: &mut [[u64; 4]]) -> &mut [u8] {
    // SAFETY: u64 arrays have no padding and any byte pattern is a valid u64.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), v.len() * 32) }
}

fn as_bytes(v: &[[u64; 4]], len: usize) -> &[u8] {
    // SAFETY: as above, read-only.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), len) }
}

fn specs() -> Vec<(&'static str, Spec)> {
    vec![
        ("llama-q8_0", Spec::llama()),
        (
            "llama-q4_0",
            Spec {
                weight_type: GgmlType::Q4_0,
                ..Spec::llama()
            },
        ),
        ("qwen2", Spec::qwen2()),
        ("gemma3", Spec::gemma3()),
    ]
}

#[test]
fn the_memory_plan_is_what_a_context_allocates_and_it_never_grows() {
    for (tag, spec) in specs() {
        let path = synth::write_temp(&spec, &format!("generate-plan-{tag}"));
        let file = std::fs::read(&path).unwrap();
        let buf = aligned(&file);
        let bytes = as_bytes(&buf, file.len());
        for kernels in [
            Kernels::scalar(),
            kernels::select(&cpu::detect(), None).unwrap(),
        ] {
            let model = Model::from_gguf(bytes, kernels).unwrap();
            for (n_batch, k_type) in [(1, KvType::F16), (7, KvType::F32), (64, KvType::Q8_0)] {
                let opts = ContextOptions {
                    n_ctx: 96,
                    n_batch,
                    k_type,
                    v_type: k_type,
                };
                let plan = MemoryPlan::new(&model, &opts).unwrap();
                let mut ctx = Context::new(&model, &Sequential, &opts).unwrap();
                let what = format!("{tag}, batch {n_batch}, {k_type:?} cache");
                assert_eq!(ctx.kv_cache_bytes(), plan.kv_cache, "{what}: KV cache");
                assert_eq!(ctx.scratch_bytes(), plan.scratch, "{what}: scratch");
                assert!(plan.total() > plan.kv_cache + plan.scratch, "{what}");
                let prompt: Vec<u32> = (0..40u32).map(|i| (i * 29 + 3) % 262).collect();
                let mut sampler = Sampler::greedy();
                let out = ctx
                    .generate(&prompt, 30, &mut sampler, |_| ControlFlow::Continue(()))
                    .unwrap();
                assert!(out.generated_tokens > 0, "{what}");
                // a perplexity-style pass wants every row's logits
                ctx.reset();
                ctx.feed_each(&prompt, |_, _| {}).unwrap();
                assert_eq!(ctx.scratch_bytes(), plan.scratch, "{what}: scratch grew");
            }
        }
    }
}

#[test]
fn decoding_allocates_nothing_per_token() {
    for (tag, spec) in specs() {
        let path = synth::write_temp(&spec, &format!("generate-alloc-{tag}"));
        let file = std::fs::read(&path).unwrap();
        let buf = aligned(&file);
        let model = Model::from_gguf(as_bytes(&buf, file.len()), Kernels::scalar()).unwrap();
        let opts = ContextOptions {
            n_ctx: 128,
            n_batch: 1,
            ..Default::default()
        };
        let mut ctx = Context::new(&model, &Sequential, &opts).unwrap();
        for (name, cfg) in [
            ("greedy", SamplerConfig::greedy()),
            (
                "sampled",
                SamplerConfig {
                    temperature: 0.8,
                    top_k: 40,
                    top_p: 0.95,
                    seed: 7,
                    ..SamplerConfig::default()
                },
            ),
        ] {
            let mut sampler = Sampler::new(cfg).unwrap();
            // a first generation grows whatever grows on first use (the sampler's buffers)
            ctx.reset();
            ctx.generate(&[1, 2, 3], 4, &mut sampler, |_| ControlFlow::Continue(()))
                .unwrap();
            ctx.reset();
            // room for every token's count, so that pushing allocates nothing
            let mut at = Vec::with_capacity(128);
            let out = ctx
                .generate(&[5, 6, 7, 8], 60, &mut sampler, |t| {
                    at.push(allocations());
                    let _ = t.text;
                    ControlFlow::Continue(())
                })
                .unwrap();
            assert!(out.generated_tokens >= 10, "{tag} {name}: {out:?}");
            let between: Vec<usize> = at.windows(2).map(|w| w[1] - w[0]).collect();
            assert!(
                between.iter().all(|&n| n == 0),
                "{tag} {name}: allocations between tokens: {between:?}"
            );
        }
    }
}

#[test]
fn a_borrowed_model_decodes_as_the_engine_does() {
    let spec = Spec::gemma3();
    let path = synth::write_temp(&spec, "generate-engine");
    let file = std::fs::read(&path).unwrap();
    let buf = aligned(&file);
    let model = Model::from_gguf(as_bytes(&buf, file.len()), Kernels::scalar()).unwrap();
    let opts = ContextOptions {
        n_ctx: 64,
        n_batch: 1,
        ..Default::default()
    };
    let mut ctx = Context::new(&model, &Sequential, &opts).unwrap();
    let prompt = [2u32, 40, 41, 42, 43];
    let mut ours = Vec::new();
    ctx.generate(&prompt, 24, &mut Sampler::greedy(), |t| {
        ours.push(t.id);
        ControlFlow::Continue(())
    })
    .unwrap();
    let e = Engine::load(
        &path,
        &EngineOptions {
            threads: 1,
            isa: Some(kernels::Isa::Scalar),
            no_repack: true,
        },
    )
    .unwrap();
    let mut s = e.session(&SessionOptions::with_ctx(64)).unwrap();
    let mut theirs = Vec::new();
    s.generate(&prompt, 24, &mut Sampler::greedy(), |t| {
        theirs.push(t.id);
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(ours, theirs);
    assert!(!ours.is_empty());
}

#[test]
fn bad_input_is_an_error() {
    let path = synth::write_temp(&Spec::llama(), "generate-bad");
    let mut file = std::fs::read(&path).unwrap();
    let buf = aligned(&file);
    let model = Model::from_gguf(as_bytes(&buf, file.len()), Kernels::scalar()).unwrap();
    // a context past the trained one, an empty prompt, a prompt past the context
    let too_long = ContextOptions {
        n_ctx: 100_000,
        ..Default::default()
    };
    assert!(MemoryPlan::new(&model, &too_long).is_err());
    assert!(Context::new(&model, &Sequential, &too_long).is_err());
    let opts = ContextOptions {
        n_ctx: 16,
        n_batch: 4,
        ..Default::default()
    };
    let mut ctx = Context::new(&model, &Sequential, &opts).unwrap();
    let mut g = Sampler::greedy();
    let go = |_: superinfer_runtime::core::generate::Token<'_>| ControlFlow::Continue(());
    assert!(ctx.generate(&[], 4, &mut g, go).is_err());
    assert!(ctx.generate(&[1; 17], 4, &mut g, go).is_err());
    assert!(ctx.generate(&[300_000], 4, &mut g, go).is_err());
    // the context is still usable, and stops when it is full
    ctx.reset();
    let out = ctx.generate(&[1; 10], 100, &mut g, go).unwrap();
    assert!(out.generated_tokens <= 7, "{out:?}");
    // bytes that are not a model
    file[0] ^= 0xFF;
    let buf = aligned(&file);
    assert!(Model::from_gguf(as_bytes(&buf, file.len()), Kernels::scalar()).is_err());
    let truncated = aligned(&file[..file.len() / 2]);
    assert!(Model::from_gguf(as_bytes(&truncated, file.len() / 2), Kernels::scalar()).is_err());
}

//! The firmware's one job: parse the model (in place), check the memory plan against the
//! heap, generate greedily through `superinfer_core::generate` with the scalar kernels and
//! one token per step, stream the text over semihosting, then print the figures
//! `scripts/test-edge.sh` reads (lines starting with `edge: `).

use alloc::string::String;
use alloc::vec::Vec;
use core::ops::ControlFlow;

use semihosting::{eprintln, print, println};
use superinfer_core::generate::{Context, ContextOptions, MemoryPlan, Model, Token};
use superinfer_core::kernels::Kernels;
use superinfer_core::parallel::Sequential;
use superinfer_core::sampler::{Sampler, SamplerConfig};

use crate::args::{self, Args};
use crate::heap::CountingHeap;

/// What a target gives the run.
pub struct Platform {
    /// The target, as printed ("cortex-m4f mps2-an386").
    pub name: &'static str,
    pub heap: &'static CountingHeap,
    /// Instructions executed so far (read from a counter QEMU advances under `-icount`).
    pub instructions: fn() -> u64,
    /// Where that count comes from, as printed.
    pub counter: &'static str,
    /// The model compiled into the firmware.
    pub embedded: &'static [u8],
    /// Memory a loader may fill with a model before reset (`--model-at`): start, length.
    pub load_region: Option<(usize, usize)>,
}

/// Exit codes.
pub const EXIT_OK: i32 = 0;
pub const EXIT_ERROR: i32 = 1;
pub const EXIT_USAGE: i32 = 2;

/// Runs the firmware and returns its exit code (errors are printed, never panicked).
pub fn main(p: &Platform) -> i32 {
    let args = match args::from_semihosting() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("edge: error: {e}");
            return EXIT_USAGE;
        }
    };
    match generate(p, &args) {
        Ok(()) => EXIT_OK,
        Err(e) => {
            eprintln!("edge: error: {e}");
            EXIT_ERROR
        }
    }
}

fn model_bytes(p: &Platform, a: &Args) -> Result<(&'static [u8], &'static str), String> {
    let Some((at, len)) = a.model_at else {
        return Ok((p.embedded, "embedded"));
    };
    let Some((start, size)) = p.load_region else {
        return Err("this target has no memory for a loaded model (--model-at)".into());
    };
    if at < start || at.checked_add(len).is_none_or(|end| end > start + size) {
        return Err(alloc::format!(
            "--model-at {at:#x} --model-len {len} is outside the load region \
             {start:#x}..{:#x}",
            start + size
        ));
    }
    // SAFETY: the range lies in the region the target reserves for a loader (nothing else
    // uses it, see `load_region`), which filled it before the firmware started and never
    // writes it again; the bytes live as long as the program.
    let bytes = unsafe { core::slice::from_raw_parts(at as *const u8, len) };
    Ok((bytes, "loaded"))
}

fn generate(p: &Platform, a: &Args) -> Result<(), String> {
    let (bytes, origin) = model_bytes(p, a)?;
    println!(
        "edge: {}: model {} bytes at {:#x} ({origin})",
        p.name,
        bytes.len(),
        bytes.as_ptr() as usize
    );
    let model = Model::from_gguf(bytes, Kernels::scalar())
        .map_err(|e| alloc::format!("cannot load the {origin} model: {e}"))?;
    let c = model.config();
    println!(
        "edge: {:?}: {} layers, n_embd {}, vocabulary {} tokens, trained context {}",
        c.arch, c.n_layer, c.n_embd, c.n_vocab, c.n_ctx_train
    );
    let model_tables = p.heap.stats().in_use;

    let opts = ContextOptions {
        n_ctx: a.n_ctx,
        n_batch: 1,
        ..Default::default()
    };
    let plan = MemoryPlan::new(&model, &opts).map_err(|e| alloc::format!("{e}"))?;
    let heap = p.heap.stats();
    println!(
        "edge: plan: n_ctx {} n_batch {}: kv cache {} + scratch {} + logits {} + tokens {} + bookkeeping {} = {} bytes; model tables {} bytes; heap {} bytes",
        plan.n_ctx,
        plan.n_batch,
        plan.kv_cache,
        plan.scratch,
        plan.logits,
        plan.tokens,
        plan.bookkeeping,
        plan.total(),
        model_tables,
        heap.size
    );
    let free = heap.size.saturating_sub(heap.in_use);
    if plan.total() > free {
        return Err(alloc::format!(
            "a context of {} tokens needs {} bytes, the heap has {free} free: lower -c",
            plan.n_ctx,
            plan.total()
        ));
    }
    let mut ctx = Context::new(&model, &Sequential, &opts).map_err(|e| alloc::format!("{e}"))?;
    let prompt = model
        .tokenizer()
        .encode(&a.prompt, true, false)
        .map_err(|e| alloc::format!("cannot tokenize the prompt: {e}"))?;
    let mut sampler = Sampler::new(SamplerConfig::greedy()).map_err(|e| alloc::format!("{e}"))?;
    let mut generated: Vec<u32> = Vec::with_capacity(a.n_predict);

    let start = (p.instructions)();
    let mut first: Option<(u64, usize)> = None;
    let mut last = start;
    let out = ctx
        .generate(&prompt, a.n_predict, &mut sampler, |t| {
            if t.id != Token::FLUSH {
                last = (p.instructions)();
                if first.is_none() {
                    first = Some((last, p.heap.stats().allocations));
                }
                generated.push(t.id);
            }
            print!("{}", t.text);
            ControlFlow::Continue(())
        })
        .map_err(|e| alloc::format!("generation failed: {e}"))?;
    let allocations_end = p.heap.stats().allocations;
    println!();

    let ids = |v: &[u32]| {
        let mut s = String::new();
        for (i, id) in v.iter().enumerate() {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(&alloc::format!("{id}"));
        }
        s
    };
    println!("edge: prompt_ids {}", ids(&prompt));
    println!("edge: generated_ids {}", ids(&generated));
    println!("edge: stop {:?}", out.stop);

    let heap = p.heap.stats();
    let budget = plan.kv_cache + plan.scratch;
    println!(
        "edge: heap high-water {} bytes asked ({} held by the allocator) = kv cache + scratch {} + {} bytes",
        heap.high_water,
        heap.held_high_water,
        budget,
        heap.high_water as isize - budget as isize
    );
    if let Some((t_first, allocs_first)) = first {
        let later = generated.len() - 1;
        let after = allocations_end - allocs_first;
        println!(
            "edge: allocations: {allocs_first} until the first generated token, {after} in the {later} tokens after it"
        );
        println!(
            "edge: instructions: {} per prompt token ({} prompt tokens and the first sample), {} per generated token ({}), {} in all",
            (t_first - start) / prompt.len() as u64,
            prompt.len(),
            if later > 0 { (last - t_first) / later as u64 } else { 0 },
            p.counter,
            last - start
        );
    }
    Ok(())
}

//! Many prompts at once through the scheduler: each gets its own stream of tokens, all of them
//! advance together in shared steps.
//!
//! ```sh
//! cargo run --release -p superinfer-runtime --example batch -- MODEL.gguf "The capital of France is" "def fib(n):"
//! ```

use superinfer_runtime::scheduler::{Event, Request};
use superinfer_runtime::{Engine, EngineOptions, Scheduler, SchedulerOptions};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let model = args
        .next()
        .ok_or("usage: batch MODEL.gguf PROMPT [PROMPT ...]")?;
    let prompts: Vec<String> = args.collect();
    let engine =
        Engine::load(model.as_ref(), &EngineOptions::default()).map_err(|e| e.to_string())?;
    let opts = SchedulerOptions {
        n_parallel: prompts.len().max(1),
        n_ctx: 1024,
        ..Default::default()
    };
    let mut sched = Scheduler::new(&engine, &opts).map_err(|e| e.to_string())?;
    let mut handles = Vec::new();
    for p in &prompts {
        let ids = engine
            .tokenizer()
            .encode(p, true, true)
            .map_err(|e| e.to_string())?;
        let h = sched
            .submit(Request::greedy(ids, 32))
            .map_err(|e| format!("{p:?}: {e} ({})", e.code()))?;
        handles.push(h);
    }
    // the caller drives the steps; a server runs `sched.run(&stop)` on a thread of its own
    sched.run_until_idle().map_err(|e| e.to_string())?;
    for (p, h) in prompts.iter().zip(handles) {
        let mut text = String::new();
        for ev in h.events.try_iter() {
            match ev {
                Event::Token { text: t, .. } => text.push_str(&t),
                Event::Done(d) => println!(
                    "{p:?} -> {text:?}\n  ({} tokens, {:?}, {} prompt tokens from the cache)",
                    d.generated_tokens, d.stop, d.cached_tokens
                ),
                Event::Error(e) => println!("{p:?} failed: {e}"),
            }
        }
    }
    Ok(())
}

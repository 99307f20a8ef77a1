//! `superinfer perplexity`: llama-perplexity's output — running PPL per chunk, then the final
//! estimate with its standard error.

use std::io::Write;
use std::time::Instant;

use superinfer_runtime::{perplexity, PerplexityOptions};

use crate::args::PerplexityArgs;

pub fn run(a: &PerplexityArgs) -> Result<(), String> {
    let text = std::fs::read(&a.file).map_err(|e| format!("{}: {e}", a.file.display()))?;
    let text = String::from_utf8(text)
        .map_err(|_| format!("{}: the text is not valid UTF-8", a.file.display()))?;
    let engine = super::load_engine(&a.model)?;
    let t = Instant::now();
    let tokens = engine
        .tokenizer()
        .encode(&text, true, false)
        .map_err(|e| e.to_string())?;
    let opts = PerplexityOptions {
        n_ctx: a.ctx_size,
        n_batch: a.batch_size,
        max_chunks: a.chunks,
        cache_type_k: a.cache.k,
        cache_type_v: a.cache.v,
        lora: a.lora.set(&engine)?,
    };
    let n_chunks = opts.chunks(tokens.len()).map_err(|e| e.to_string())?;
    eprintln!(
        "perplexity: {} tokens, {n_chunks} chunks of {}, batch {}",
        tokens.len(),
        a.ctx_size,
        a.batch_size.min(a.ctx_size)
    );
    let mut out = std::io::stdout().lock();
    let total = perplexity(&engine, &tokens, &opts, |p| {
        // as llama-perplexity: "[chunk]running-ppl," on one line
        let _ = write!(out, "[{}]{:.4},", p.chunks, p.ppl());
        let _ = out.flush();
    })
    .map_err(|e| e.to_string())?;
    let secs = t.elapsed().as_secs_f64();
    let line = match total.stderr() {
        Some(se) => format!("Final estimate: PPL = {:.4} +/- {se:.5}", total.ppl()),
        None => format!("Final estimate: PPL = {:.4}", total.ppl()),
    };
    let _ = writeln!(out, "\n{line}");
    eprintln!(
        "{} tokens scored in {secs:.1} s ({:.1} tokens/s evaluated)",
        total.count,
        (total.chunks * a.ctx_size) as f64 / secs
    );
    Ok(())
}

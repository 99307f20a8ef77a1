//! `superinfer bench`: prompt-processing (pp) and token-generation (tg) throughput, measured
//! the way llama-bench measures it, so the two tools' numbers can be put side by side.
//!
//! For every thread count and depth: a pp test evaluates `-p` random tokens; a tg test decodes
//! `-n` tokens one at a time (logits computed each step, no sampling). Both start from a
//! context already holding `-d` random tokens (0: empty), filled once per test and not timed;
//! each repetition rolls the session back to that depth. Each test runs once as a warm-up,
//! then `-r` times; t/s is tokens / wall time per repetition, reported as mean ± sample
//! standard deviation.

use std::fmt::Write as _;
use std::time::Instant;

use serde_json::json;
use superinfer_runtime::core::sampler::Rng;
use superinfer_runtime::mem::{peak_rss_bytes, reset_peak_rss};
use superinfer_runtime::{Engine, EngineOptions, Session};

use crate::args::BenchArgs;
use crate::cmd::{parse_isa, write_stdout};

pub(super) struct Test {
    pub n_prompt: usize,
    pub n_gen: usize,
    pub n_depth: usize,
    /// Sequences run together (their tokens all count: t/s is the aggregate).
    pub n_parallel: usize,
    pub threads: usize,
    pub samples_ns: Vec<u64>,
    pub peak_rss: Option<u64>,
    pub load_peak_rss: Option<u64>,
    pub kv_bytes: usize,
}

impl Test {
    fn tokens(&self) -> usize {
        (self.n_prompt + self.n_gen) * self.n_parallel
    }

    pub(super) fn samples_ts(&self) -> Vec<f64> {
        self.samples_ns
            .iter()
            .map(|&ns| self.tokens() as f64 * 1e9 / ns.max(1) as f64)
            .collect()
    }

    pub(super) fn name(&self) -> String {
        let test = match (self.n_prompt, self.n_gen) {
            (p, 0) => format!("pp{p}"),
            (0, g) => format!("tg{g}"),
            (p, g) => format!("pp{p}+tg{g}"),
        };
        let test = match self.n_depth {
            0 => test,
            d => format!("{test} @ d{d}"),
        };
        match self.n_parallel {
            1 => test,
            n => format!("{test} x{n}"),
        }
    }
}

pub(super) fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = if v.len() > 1 {
        v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (mean, var.sqrt())
}

pub(super) fn random_tokens(rng: &mut Rng, n_vocab: usize, n: usize) -> Vec<u32> {
    (0..n)
        .map(|_| (rng.next_u64() % n_vocab as u64) as u32)
        .collect()
}

/// One repetition from a session holding `depth` tokens: wall time in ns.
fn run_once(
    s: &mut Session<'_>,
    depth: usize,
    [p, g]: [usize; 2],
    n_vocab: usize,
    rng: &mut Rng,
) -> Result<u64, String> {
    s.truncate(depth);
    let prompt = random_tokens(rng, n_vocab, p);
    let gen = random_tokens(rng, n_vocab, g);
    let t = Instant::now();
    if p > 0 {
        s.feed(&prompt).map_err(|e| e.to_string())?;
    }
    for &tok in &gen {
        s.feed(&[tok]).map_err(|e| e.to_string())?;
    }
    Ok(t.elapsed().as_nanos() as u64)
}

pub fn run(a: &BenchArgs) -> Result<(), String> {
    if a.spec.model_draft.is_some() || a.spec.lookup_ngram > 0 {
        if a.lora.any() {
            return Err("--lora is not supported with speculative decoding in bench".into());
        }
        return super::bench_spec::run(a);
    }
    if a.repetitions == 0 {
        return Err("-r/--repetitions must be at least 1".into());
    }
    let isa = parse_isa(a.isa.as_deref())?;
    let threads = if a.threads.is_empty() {
        vec![std::thread::available_parallelism().map_or(1, |n| n.get())]
    } else {
        a.threads.clone()
    };
    if threads.contains(&0) {
        return Err("-t: thread counts must be at least 1".into());
    }
    let model_name = a
        .model
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut rng = Rng::new(1234);
    let mut tests = Vec::new();
    let mut header = None;
    if !a.n_parallel.is_empty() && a.n_depth.iter().any(|&d| d > 0) {
        return Err("-d is not supported with -np (each sequence starts empty)".into());
    }
    for &t in &threads {
        reset_peak_rss();
        let engine = Engine::load(
            &a.model,
            &EngineOptions {
                threads: t,
                isa,
                no_repack: a.no_repack,
            },
        )
        .map_err(|e| superinfer_runtime::chain(&e))?;
        let load_peak_rss = peak_rss_bytes();
        let kinds: Vec<(usize, usize)> = [(a.n_prompt, 0), (0, a.n_gen)]
            .into_iter()
            .filter(|&(p, g)| p + g > 0)
            .collect();
        let single = if a.n_parallel.is_empty() {
            a.n_depth.as_slice()
        } else {
            &[]
        };
        for &np in &a.n_parallel {
            let batched = super::bench_batched::run(&engine, a, t, np, load_peak_rss, &mut rng)?;
            if !(a.json || a.output.as_deref() == Some("json")) {
                for test in &batched {
                    let (m, sd) = mean_sd(&test.samples_ts());
                    let per_seq = m / np as f64;
                    eprintln!(
                        "{:>12} t={} {:>10.2} ± {:.2} t/s ({per_seq:.2} t/s per sequence)",
                        test.name(),
                        t,
                        m,
                        sd
                    );
                }
            }
            tests.extend(batched);
        }
        for (d, (p, g)) in single
            .iter()
            .flat_map(|&d| kinds.iter().map(move |&k| (d, k)))
        {
            let n_ctx = (d + p + g).max(1);
            if n_ctx > engine.config().n_ctx_train {
                return Err(format!(
                    "test of {} tokens exceeds the model's trained context of {}",
                    n_ctx,
                    engine.config().n_ctx_train
                ));
            }
            let mut s = engine
                .session(&a.cache.session(n_ctx))
                .map_err(|e| e.to_string())?;
            s.set_lora(a.lora.set(&engine)?);
            let n_vocab = engine.config().n_vocab;
            let depth = random_tokens(&mut rng, n_vocab, d);
            s.feed(&depth).map_err(|e| e.to_string())?;
            // warm-up (page in the weights, grow the scratch buffers)
            run_once(&mut s, d, [p, g.min(1)], n_vocab, &mut rng)?;
            reset_peak_rss();
            let mut samples_ns = Vec::with_capacity(a.repetitions);
            for _ in 0..a.repetitions {
                samples_ns.push(run_once(&mut s, d, [p, g], n_vocab, &mut rng)?);
            }
            let test = Test {
                n_prompt: p,
                n_gen: g,
                n_depth: d,
                n_parallel: 1,
                threads: t,
                samples_ns,
                peak_rss: peak_rss_bytes(),
                load_peak_rss,
                kv_bytes: s.kv_cache_bytes(),
            };
            if !(a.json || a.output.as_deref() == Some("json")) {
                let (m, sd) = mean_sd(&test.samples_ts());
                eprintln!("{:>8} t={} {:>10.2} ± {:.2} t/s", test.name(), t, m, sd);
            }
            tests.push(test);
        }
        header.get_or_insert_with(|| {
            (
                engine.isa().name(),
                engine.file_size(),
                engine.weights().bytes_per_token(),
                engine.config().arch.name(),
            )
        });
    }
    let Some((isa_name, file_size, bytes_per_token, arch)) = header else {
        return Ok(());
    };

    let mut o = String::new();
    if a.json || a.output.as_deref() == Some("json") {
        let arr: Vec<_> = tests
            .iter()
            .map(|t| {
                let ts = t.samples_ts();
                let (avg_ts, stddev_ts) = mean_sd(&ts);
                let ns: Vec<f64> = t.samples_ns.iter().map(|&x| x as f64).collect();
                let (avg_ns, stddev_ns) = mean_sd(&ns);
                json!({
                    "model_filename": a.model.display().to_string(),
                    "model_type": arch,
                    "model_size": file_size,
                    "n_prompt": t.n_prompt,
                    "n_gen": t.n_gen,
                    "n_depth": t.n_depth,
                    "n_parallel": t.n_parallel,
                    "per_seq_ts": avg_ts / t.n_parallel as f64,
                    "type_k": a.cache.k.name(),
                    "type_v": a.cache.v.name(),
                    "n_threads": t.threads,
                    "avg_ns": avg_ns as u64,
                    "stddev_ns": stddev_ns as u64,
                    "avg_ts": avg_ts,
                    "stddev_ts": stddev_ts,
                    "samples_ns": t.samples_ns,
                    "samples_ts": ts,
                    "isa": isa_name,
                    "bytes_per_token": bytes_per_token,
                    "peak_rss_bytes": t.peak_rss,
                    "load_peak_rss_bytes": t.load_peak_rss,
                    "kv_cache_bytes": t.kv_bytes,
                })
            })
            .collect();
        let _ = writeln!(
            o,
            "{}",
            serde_json::to_string_pretty(&arr).map_err(|e| e.to_string())?
        );
    } else {
        let _ = writeln!(
            o,
            "| model | size | bytes/token | isa | threads | test | t/s |"
        );
        let _ = writeln!(o, "| --- | ---: | ---: | --- | ---: | ---: | ---: |");
        for t in &tests {
            let (m, sd) = mean_sd(&t.samples_ts());
            let _ = writeln!(
                o,
                "| {} | {:.2} MiB | {:.2} MiB | {} | {} | {} | {:.2} ± {:.2} |",
                model_name,
                file_size as f64 / (1u64 << 20) as f64,
                bytes_per_token as f64 / (1u64 << 20) as f64,
                isa_name,
                t.threads,
                t.name(),
                m,
                sd
            );
        }
    }
    write_stdout(&o)
}

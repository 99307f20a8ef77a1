//! `superinfer bench --model-draft FILE | --lookup-ngram N -f PROMPT`: speculative decoding
//! against plain decoding on one real prompt. Both decode `-n` tokens greedily from the same
//! prompt (so they produce the same tokens, checked), alternated repetition by repetition
//! after one warm-up each; the prompt's evaluation is not timed (it comes from the prefix
//! cache after the first run). Reports t/s of each, the speedup, the acceptance rate (drafted
//! tokens accepted) and the mean accepted per verification step.

use std::fmt::Write as _;
use std::ops::ControlFlow;

use serde_json::json;
use superinfer_runtime::core::sampler::{Sampler, SamplerConfig};
use superinfer_runtime::{Engine, EngineOptions, GenerateStats, Session};

use super::bench::mean_sd;
use super::spec::rate;
use super::{parse_isa, write_stdout};
use crate::args::{BenchArgs, ModelArgs};

struct Run {
    ts: f64,
    tokens: Vec<u32>,
    stats: GenerateStats,
}

fn decode(
    s: &mut Session<'_>,
    prompt: &[u32],
    n: usize,
    drafter: Option<&mut superinfer_runtime::speculative::DynDrafter<'_>>,
) -> Result<Run, String> {
    s.reset();
    let mut sampler = Sampler::new(SamplerConfig::greedy()).map_err(|e| e.to_string())?;
    let mut tokens = Vec::with_capacity(n);
    let stats = s
        .generate_with(prompt, &n.into(), &mut sampler, drafter, |ev| {
            tokens.push(ev.id);
            ControlFlow::Continue(())
        })
        .map_err(|e| e.to_string())?;
    Ok(Run {
        ts: rate(stats.generated_tokens, stats.generate_time),
        tokens,
        stats,
    })
}

pub fn run(a: &BenchArgs) -> Result<(), String> {
    a.spec.check()?;
    if !a.spec.enabled() {
        return Err("--draft-max 0 leaves nothing to compare: drop it".into());
    }
    let Some(file) = &a.prompt_file else {
        return Err(
            "a speculative benchmark decodes a real prompt: give one with -f FILE \
                    (benches/spec.py has code-completion, code-editing and summary prompts)"
                .into(),
        );
    };
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("reading the prompt file {}: {e}", file.display()))?;
    if a.n_gen == 0 {
        return Err("-n must be at least 1 for a speculative benchmark".into());
    }
    let isa = parse_isa(a.isa.as_deref())?;
    let threads = if a.threads.is_empty() {
        vec![std::thread::available_parallelism().map_or(1, |n| n.get())]
    } else {
        a.threads.clone()
    };
    let kind = if a.spec.model_draft.is_some() {
        "draft"
    } else {
        "lookup"
    };
    let json_out = a.json || a.output.as_deref() == Some("json");
    let mut rows = Vec::new();
    for &t in &threads {
        let opts = EngineOptions {
            threads: t,
            isa,
            no_repack: a.no_repack,
        };
        let engine = Engine::load(&a.model, &opts).map_err(|e| superinfer_runtime::chain(&e))?;
        let target_args = ModelArgs {
            model: a.model.clone(),
            hub: a.hub.clone(),
            threads: t,
            isa: a.isa.clone(),
            no_repack: a.no_repack,
        };
        let draft_engine = a.spec.load_draft(&target_args)?;
        let prompt = engine.encode_prompt(&text).map_err(|e| e.to_string())?;
        let n_ctx = prompt.len() + a.n_gen + 1;
        if n_ctx > engine.config().n_ctx_train {
            return Err(format!(
                "prompt ({} tokens) and -n {} exceed the model's trained context of {}",
                prompt.len(),
                a.n_gen,
                engine.config().n_ctx_train
            ));
        }
        let mut s = engine
            .session(&a.cache.session(n_ctx))
            .map_err(|e| e.to_string())?;
        let mut drafter = a.spec.drafter(
            &engine,
            draft_engine.as_ref(),
            n_ctx,
            &SamplerConfig::greedy(),
        )?;
        // warm-up: pages in both models, fills the prefix cache with the prompt
        let plain0 = decode(&mut s, &prompt, a.n_gen, None)?;
        let spec0 = decode(&mut s, &prompt, a.n_gen, drafter.as_deref_mut())?;
        if plain0.tokens != spec0.tokens {
            return Err("speculative decoding changed the greedy output: this is a bug".into());
        }
        let (mut plain, mut spec) = (Vec::new(), Vec::new());
        for _ in 0..a.repetitions {
            plain.push(decode(&mut s, &prompt, a.n_gen, None)?);
            spec.push(decode(&mut s, &prompt, a.n_gen, drafter.as_deref_mut())?);
        }
        rows.push((t, prompt.len(), plain, spec));
    }

    let model = |p: &std::path::Path| {
        p.file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let draft_name = a
        .spec
        .model_draft
        .as_deref()
        .map(model)
        .unwrap_or_else(|| format!("lookup n={}", a.spec.lookup_ngram));
    let mut o = String::new();
    if json_out {
        let mut arr = Vec::new();
        for (t, n_prompt, plain, spec) in &rows {
            for (mode, runs) in [("none", plain), (kind, spec)] {
                let ts: Vec<f64> = runs.iter().map(|r| r.ts).collect();
                let (avg, sd) = mean_sd(&ts);
                let drafted: usize = runs.iter().map(|r| r.stats.drafted).sum();
                let accepted: usize = runs.iter().map(|r| r.stats.accepted).sum();
                let steps: usize = runs.iter().map(|r| r.stats.verify_steps).sum();
                arr.push(json!({
                    "model_filename": a.model.display().to_string(),
                    "speculative": mode,
                    "draft": if mode == "none" { serde_json::Value::Null } else { json!(draft_name) },
                    "draft_max": a.spec.draft_max,
                    "n_threads": t,
                    "n_prompt": n_prompt,
                    "n_gen": runs[0].stats.generated_tokens,
                    "avg_ts": avg,
                    "stddev_ts": sd,
                    "samples_ts": ts,
                    "n_drafted": drafted,
                    "n_accepted": accepted,
                    "acceptance_rate": accepted as f64 / drafted.max(1) as f64,
                    "mean_accepted": accepted as f64 / steps.max(1) as f64,
                }));
            }
        }
        let _ = writeln!(
            o,
            "{}",
            serde_json::to_string_pretty(&arr).map_err(|e| e.to_string())?
        );
    } else {
        let _ = writeln!(
            o,
            "| model | speculative | threads | test | plain t/s | speculative t/s | speedup | acceptance | accepted/step |"
        );
        let _ = writeln!(
            o,
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        );
        for (t, n_prompt, plain, spec) in &rows {
            let med = |runs: &[Run]| {
                let mut v: Vec<f64> = runs.iter().map(|r| r.ts).collect();
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            let (p, s) = (med(plain), med(spec));
            let st = &spec[0].stats;
            let _ = writeln!(
                o,
                "| {} | {} | {} | pp{}+tg{} | {:.2} | {:.2} | {:.2}x | {:.1}% | {:.2} |",
                model(&a.model),
                draft_name,
                t,
                n_prompt,
                st.generated_tokens,
                p,
                s,
                s / p,
                100.0 * st.acceptance(),
                st.mean_accepted()
            );
        }
    }
    write_stdout(&o)
}

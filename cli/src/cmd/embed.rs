//! `superinfer embed`: sentence embeddings of texts given with `-p` or in a file (one per
//! line), printed as JSON lines `{"index":i,"embedding":[...]}` in the order given.

use std::fmt::Write as _;
use std::time::Instant;

use superinfer_runtime::core::quant::GgmlType;
use superinfer_runtime::{Engine, EngineOptions};

use crate::args::EmbedArgs;

pub fn run(a: &EmbedArgs) -> Result<(), String> {
    let mut texts: Vec<String> = a.prompt.clone();
    if let Some(f) = &a.file {
        let body = std::fs::read_to_string(f)
            .map_err(|e| format!("cannot read '{}': {e}", f.display()))?;
        texts.extend(body.lines().filter(|l| !l.is_empty()).map(str::to_string));
    }
    if texts.is_empty() {
        return Err("no text to embed: give -p TEXT or -f FILE".into());
    }
    let engine = match &a.weight_type {
        None => super::load_engine(&a.model)?,
        Some(name) => {
            let ty = GgmlType::from_name(&name.to_uppercase())
                .ok_or_else(|| format!("--type '{name}' is not a weight type (e.g. q8_0)"))?;
            let opts = EngineOptions {
                threads: a.model.threads,
                isa: super::parse_isa(a.model.isa.as_deref())?,
                no_repack: a.model.no_repack,
            };
            Engine::load_as(&a.model.model, &opts, Some(ty))
                .map_err(|e| superinfer_runtime::chain(&e))?
        }
    };
    let normalize = match (a.normalize, a.no_normalize) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    };
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let t = Instant::now();
    let embeddings = engine
        .embed(&refs, normalize)
        .map_err(|e| superinfer_runtime::chain(&e))?;
    let secs = t.elapsed().as_secs_f64();
    let mut out = String::new();
    for (i, e) in embeddings.iter().enumerate() {
        let _ = write!(out, "{{\"index\":{i},\"embedding\":[");
        for (j, v) in e.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            // the shortest text that reads back as the same f32
            let _ = write!(out, "{v:?}");
        }
        out.push_str("]}\n");
    }
    super::write_stdout(&out)?;
    eprintln!(
        "embedded {} texts in {:.3} s ({:.1} texts/s, {} threads)",
        texts.len(),
        secs,
        texts.len() as f64 / secs.max(1e-9),
        engine.threads()
    );
    Ok(())
}

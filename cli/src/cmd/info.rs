use std::collections::BTreeMap;

use superinfer_runtime::core::gguf::{keys, GgufFile, Value};
use superinfer_runtime::core::model::Config;
use superinfer_runtime::MappedFile;

use crate::args::InfoArgs;

pub fn run(a: &InfoArgs) -> Result<(), String> {
    let map = MappedFile::open(&a.model)?;
    let f = GgufFile::parse(map.bytes()).map_err(|e| format!("{}: {e}", a.model.display()))?;
    let arch = f
        .get_str(keys::GENERAL_ARCHITECTURE)
        .ok()
        .flatten()
        .unwrap_or("(none)");
    println!("file:          {}", a.model.display());
    println!(
        "size:          {} bytes ({:.1} MiB)",
        map.bytes().len(),
        map.bytes().len() as f64 / (1 << 20) as f64
    );
    println!("gguf version:  {}", f.version());
    if let Ok(Some(name)) = f.get_str(keys::GENERAL_NAME) {
        println!("name:          {name}");
    }
    println!("architecture:  {arch}");
    match Config::from_gguf(&f) {
        Ok(c) => {
            println!("n_vocab:       {}", c.n_vocab);
            println!("n_ctx_train:   {}", c.n_ctx_train);
            println!("n_embd:        {}", c.n_embd);
            println!("n_layer:       {}", c.n_layer);
            println!("n_ff:          {}", c.n_ff);
            println!("n_head:        {} (kv: {})", c.n_head, c.n_head_kv);
            println!("head_dim:      k {} / v {}", c.head_dim_k, c.head_dim_v);
            println!(
                "rope:          {:?}, base {}, dims {}",
                c.rope_style, c.rope_base, c.n_rot
            );
            if c.sliding_window > 0 {
                let n_swa = c.swa_layers.iter().filter(|&&s| s).count();
                println!(
                    "sliding window: {} ({} of {} layers, rope base {})",
                    c.sliding_window, n_swa, c.n_layer, c.rope_base_swa
                );
            }
            println!("rms_eps:       {:e}", c.rms_eps);
            println!("activation:    {:?}", c.activation);
        }
        Err(e) => println!("config:        not runnable: {e}"),
    }
    let mut hist: BTreeMap<&str, (usize, u64, u64)> = BTreeMap::new();
    let mut params = 0u64;
    for t in f.tensors() {
        let e = hist.entry(t.ty.name()).or_default();
        e.0 += 1;
        e.1 += t.n_elements();
        e.2 += t.size;
        params += t.n_elements();
    }
    println!("parameters:    {params} ({:.2} B)", params as f64 / 1e9);
    println!("tensors:       {}", f.tensors().len());
    for (ty, (n, elems, bytes)) in &hist {
        println!(
            "  {ty:<8} {n:>5} tensors {elems:>12} params {:>10.1} MiB",
            *bytes as f64 / (1 << 20) as f64
        );
    }
    println!("metadata:      {} keys", f.metadata().len());
    for (k, v) in f.metadata() {
        println!("  {k} = {}", short(v));
    }
    Ok(())
}

fn short(v: &Value<'_>) -> String {
    match v {
        Value::String(s) => {
            let s = String::from_utf8_lossy(s);
            let one: String = s.chars().take(60).collect::<String>().replace('\n', "\\n");
            if s.chars().count() > 60 {
                format!("{one:?}…")
            } else {
                format!("{one:?}")
            }
        }
        Value::Array(a) => format!("[{} x {}]", a.len(), a.elem_type().name()),
        other => format!("{other:?}")
            .split('(')
            .nth(1)
            .map(|s| s.trim_end_matches(')').to_string())
            .unwrap_or_default(),
    }
}

use std::collections::BTreeMap;
use std::fmt::Write as _;

use superinfer_runtime::core::gguf::{keys, tensors_per_shard, Value};
use superinfer_runtime::core::model::Config;
use superinfer_runtime::ModelFiles;

use crate::args::InfoArgs;

pub fn run(a: &InfoArgs) -> Result<(), String> {
    let mut o = String::new();
    // a split model: the first shard's metadata, every shard's tensors
    let files = ModelFiles::open(&a.model).map_err(|e| superinfer_runtime::chain(&e))?;
    let f = files.parse().map_err(|e| superinfer_runtime::chain(&e))?;
    let size = files.total_size();
    let arch = f
        .get_str(keys::GENERAL_ARCHITECTURE)
        .ok()
        .flatten()
        .unwrap_or("(none)");
    let _ = writeln!(o, "file:          {}", a.model.display());
    let _ = writeln!(
        o,
        "size:          {size} bytes ({:.1} MiB)",
        size as f64 / (1 << 20) as f64
    );
    if files.len() > 1 {
        let _ = writeln!(o, "shards:        {} (gguf-split)", files.len());
        for (i, n) in tensors_per_shard(&f).into_iter().enumerate() {
            let _ = writeln!(
                o,
                "  {}  {} bytes, {n} tensors",
                files.path(i).display(),
                files.bytes(i).len()
            );
        }
    }
    let _ = writeln!(o, "gguf version:  {}", f.version());
    if let Ok(Some(name)) = f.get_str(keys::GENERAL_NAME) {
        let _ = writeln!(o, "name:          {name}");
    }
    let _ = writeln!(o, "architecture:  {arch}");
    match Config::from_gguf(&f) {
        Ok(c) => {
            let _ = writeln!(o, "n_vocab:       {}", c.n_vocab);
            let _ = writeln!(o, "n_ctx_train:   {}", c.n_ctx_train);
            let _ = writeln!(o, "n_embd:        {}", c.n_embd);
            let _ = writeln!(o, "n_layer:       {}", c.n_layer);
            let _ = writeln!(o, "n_ff:          {}", c.n_ff);
            let _ = writeln!(o, "n_head:        {} (kv: {})", c.n_head, c.n_head_kv);
            let _ = writeln!(o, "head_dim:      k {} / v {}", c.head_dim_k, c.head_dim_v);
            let _ = writeln!(
                o,
                "rope:          {:?}, base {}, dims {}",
                c.rope_style, c.rope_base, c.n_rot
            );
            if c.sliding_window > 0 {
                let n_swa = c.swa_layers.iter().filter(|&&s| s).count();
                let _ = writeln!(
                    o,
                    "sliding window: {} ({} of {} layers, rope base {})",
                    c.sliding_window, n_swa, c.n_layer, c.rope_base_swa
                );
            }
            if let Some(m) = &c.moe {
                let used = m.n_used.iter().copied().max().unwrap_or(0);
                let _ = writeln!(
                    o,
                    "experts:       {} per layer, {} used per token ({:?} router{}{})",
                    m.n_expert,
                    used,
                    m.gating,
                    if m.norm_weights { ", renormalised" } else { "" },
                    if m.shared_expert {
                        ", shared expert"
                    } else {
                        ""
                    }
                );
            }
            let _ = writeln!(o, "rms_eps:       {:e}", c.rms_eps);
            let _ = writeln!(o, "activation:    {:?}", c.activation);
        }
        Err(e) => {
            let _ = writeln!(o, "config:        not runnable: {e}");
        }
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
    let _ = writeln!(o, "parameters:    {params} ({:.2} B)", params as f64 / 1e9);
    let _ = writeln!(o, "tensors:       {}", f.tensors().len());
    for (ty, (n, elems, bytes)) in &hist {
        let _ = writeln!(
            o,
            "  {ty:<8} {n:>5} tensors {elems:>12} params {:>10.1} MiB",
            *bytes as f64 / (1 << 20) as f64
        );
    }
    let _ = writeln!(o, "metadata:      {} keys", f.metadata().len());
    for (k, v) in f.metadata() {
        let _ = writeln!(o, "  {k} = {}", short(v));
    }
    super::write_stdout(&o)
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

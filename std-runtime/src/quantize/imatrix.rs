//! Importance matrices as llama.cpp's quantize loads them (common/imatrix-loader.cpp and
//! tools/quantize/quantize.cpp's `load_imatrix`): the GGUF format of `llama-imatrix`
//! (`NAME.in_sum2` and `NAME.counts` F32 tensors, `imatrix.datasets` /
//! `imatrix.chunk_count` / `imatrix.chunk_size`), or the legacy `.dat` file. Each entry is
//! one weight per column (per expert for stacked experts): the sums divided by the counts.

use std::collections::HashMap;
use std::path::Path;

use superinfer_core::gguf::GgufFile;
use superinfer_core::quant::GgmlType;

use super::QuantizeError;

/// A loaded importance matrix.
#[derive(Debug, Default)]
pub struct Imatrix {
    pub entries: HashMap<String, Vec<f32>>,
    pub datasets: Vec<String>,
    /// The chunks it was computed on (llama-quantize's `m_last_call`).
    pub chunk_count: i64,
}

fn bad(path: &Path, what: &str) -> QuantizeError {
    QuantizeError::Input(format!("imatrix {}: {what}", path.display()))
}

/// Reads the file at `path` (GGUF, else the legacy format).
pub fn load(path: &Path) -> Result<Imatrix, QuantizeError> {
    let bytes = std::fs::read(path).map_err(|e| {
        QuantizeError::Input(format!("cannot read imatrix {}: {e}", path.display()))
    })?;
    let m = match GgufFile::parse(&bytes) {
        Ok(f) => load_gguf(path, &f)?,
        Err(_) if !bytes.starts_with(b"GGUF") => load_legacy(path, &bytes)?,
        Err(e) => return Err(bad(path, &e.to_string())),
    };
    for (name, v) in &m.entries {
        if let Some(x) = v.iter().find(|x| !x.is_finite()) {
            return Err(bad(path, &format!("non-finite value {x} for {name}")));
        }
    }
    Ok(m)
}

fn load_gguf(path: &Path, f: &GgufFile<'_>) -> Result<Imatrix, QuantizeError> {
    if f.tensors().is_empty() {
        return Err(bad(path, "no data"));
    }
    let mut m = Imatrix::default();
    let has = |k: &str| f.get(k).is_some();
    if !(has("imatrix.datasets") && has("imatrix.chunk_count") && has("imatrix.chunk_size")) {
        return Err(bad(
            path,
            "missing imatrix metadata (imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size)",
        ));
    }
    if let Ok(Some(a)) = f.get_array("imatrix.datasets") {
        m.datasets = a
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect();
    }
    m.chunk_count = f.get_u64("imatrix.chunk_count").ok().flatten().unwrap_or(0) as i64;
    let mut pairs: HashMap<&str, (Option<usize>, Option<usize>)> = HashMap::new();
    for (i, t) in f.tensors().iter().enumerate() {
        if let Some(n) = t.name.strip_suffix(".in_sum2") {
            pairs.entry(n).or_default().0 = Some(i);
        } else if let Some(n) = t.name.strip_suffix(".counts") {
            pairs.entry(n).or_default().1 = Some(i);
        }
    }
    for (name, (sums, counts)) in pairs {
        let (Some(s), Some(c)) = (sums, counts) else {
            return Err(bad(path, &format!("mismatched sums and counts for {name}")));
        };
        let (s, c) = (&f.tensors()[s], &f.tensors()[c]);
        if s.ty != GgmlType::F32 || c.ty != GgmlType::F32 {
            return Err(bad(
                path,
                &format!("sums and counts for {name} must be F32"),
            ));
        }
        let floats = |b: &[u8]| -> Vec<f32> {
            b.chunks_exact(4)
                .map(|x| f32::from_le_bytes([x[0], x[1], x[2], x[3]]))
                .collect()
        };
        let sums = floats(f.tensor_data(s));
        let counts: Vec<i64> = floats(f.tensor_data(c))
            .iter()
            .map(|&x| x.round() as i64)
            .collect();
        if counts.is_empty() || sums.len() % counts.len() != 0 {
            return Err(bad(
                path,
                &format!(
                    "{} sums do not split into {} counts for {name}",
                    sums.len(),
                    counts.len()
                ),
            ));
        }
        let ne0 = sums.len() / counts.len();
        let mut e = vec![0f32; sums.len()];
        for (j, &count) in counts.iter().enumerate() {
            let count = count as f32;
            for i in 0..ne0 {
                e[j * ne0 + i] = if count > 0.0 {
                    sums[j * ne0 + i] / count
                } else {
                    1.0
                };
            }
        }
        m.entries.insert(name.to_string(), e);
    }
    Ok(m)
}

fn load_legacy(path: &Path, b: &[u8]) -> Result<Imatrix, QuantizeError> {
    let mut p = 0usize;
    let i32_at = |p: &mut usize| -> Option<i32> {
        let v = b.get(*p..*p + 4)?;
        *p += 4;
        Some(i32::from_le_bytes([v[0], v[1], v[2], v[3]]))
    };
    let truncated = || bad(path, "not a GGUF file, and truncated as a legacy imatrix");
    let n_entries = i32_at(&mut p).ok_or_else(truncated)?;
    if n_entries < 1 {
        return Err(bad(path, "no data"));
    }
    let mut m = Imatrix::default();
    for _ in 0..n_entries {
        let len = i32_at(&mut p).ok_or_else(truncated)?;
        let name = b
            .get(p..p + usize::try_from(len).map_err(|_| truncated())?)
            .ok_or_else(truncated)?;
        p += name.len();
        let name =
            String::from_utf8_lossy(name.split(|&c| c == 0).next().unwrap_or(&[])).into_owned();
        let ncall = i32_at(&mut p).ok_or_else(truncated)?;
        let nval = i32_at(&mut p).ok_or_else(truncated)?;
        if nval < 1 {
            return Err(bad(path, "an entry with no values"));
        }
        let data = b.get(p..p + 4 * nval as usize).ok_or_else(truncated)?;
        p += data.len();
        let sums = data
            .chunks_exact(4)
            .map(|x| f32::from_le_bytes([x[0], x[1], x[2], x[3]]));
        let e = if ncall > 0 {
            sums.map(|s| s / ncall as i64 as f32).collect()
        } else {
            sums.collect()
        };
        m.entries.insert(name, e);
    }
    if p < b.len() {
        if let Some(n) = i32_at(&mut p) {
            m.chunk_count = n as i64;
            if let Some(len) = i32_at(&mut p).filter(|&l| l > 0) {
                if let Some(d) = b.get(p..p + len as usize) {
                    m.datasets.push(
                        String::from_utf8_lossy(d.split(|&c| c == 0).next().unwrap_or(&[]))
                            .into_owned(),
                    );
                }
            }
        }
    }
    Ok(m)
}

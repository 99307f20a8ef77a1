//! `superinfer gguf-split`: llama.cpp's `llama-gguf-split --split` without llama.cpp. The
//! shards are what llama-gguf-split writes (the first with the model's metadata, every one
//! with `split.no`, `split.count` and `split.tensors.count`, tensors in the original order,
//! aligned as in the original), so superinfer, llama.cpp and wllama load them. Each shard's
//! header is built in memory; the tensors stream from the mapped input to the file, and the
//! input's pages are released as they are copied.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use superinfer_runtime::core::gguf::{
    plan_split, shard_file_name, shard_header, GgufFile, ShardHeader, SplitBy,
};
use superinfer_runtime::ModelFiles;

use crate::args::GgufSplitArgs;

/// llama-gguf-split's default `--split-max-tensors`.
const DEFAULT_MAX_TENSORS: usize = 128;

pub fn run(a: &GgufSplitArgs) -> Result<(), String> {
    let by = match (&a.split_max_size, a.split_max_tensors) {
        (Some(s), _) => SplitBy::Bytes(parse_size(s)?),
        (None, Some(0)) => return Err("--split-max-tensors must be at least 1".into()),
        (None, Some(n)) => SplitBy::Tensors(n),
        (None, None) => SplitBy::Tensors(DEFAULT_MAX_TENSORS),
    };
    let files = ModelFiles::open(&a.input).map_err(|e| superinfer_runtime::chain(&e))?;
    let f = files.parse().map_err(|e| superinfer_runtime::chain(&e))?;
    let input = a.input.display();
    let mut plan = plan_split(&f, by).map_err(|e| format!("{input}: {e}"))?;
    if a.no_tensor_first_split {
        plan.insert(0, 0..0);
    }
    let n = u16::try_from(plan.len()).map_err(|_| format!("{input}: too many shards"))?;
    let outputs: Vec<PathBuf> = (0..n).map(|i| shard_path(&a.out_prefix, i, n)).collect();
    // never write over a file being read
    let inputs: Vec<PathBuf> = files
        .paths()
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    if let Some(o) = outputs
        .iter()
        .find(|o| o.canonicalize().is_ok_and(|c| inputs.contains(&c)))
    {
        return Err(format!(
            "{} is an input file; choose another output prefix",
            o.display()
        ));
    }
    let mut out = String::new();
    for (i, path) in outputs.iter().enumerate() {
        let h = shard_header(&f, &plan, i).map_err(|e| format!("{input}: {e}"))?;
        let line = format!(
            "{} ({} tensors, {:.1} MiB)",
            path.display(),
            h.tensors.len(),
            h.size as f64 / (1 << 20) as f64
        );
        if a.dry_run {
            out += &format!("would write {line}\n");
            continue;
        }
        write_shard(path, &f, &h, &files)?;
        // one line per file as it is done (a large model takes a while)
        super::write_stdout(&format!("wrote {line}\n"))?;
    }
    if a.dry_run {
        super::write_stdout(&out)?;
    }
    Ok(())
}

/// `PREFIX-00001-of-00003.gguf` next to the prefix (which need not be valid UTF-8).
fn shard_path(prefix: &Path, no: u16, count: u16) -> PathBuf {
    let mut p = prefix.as_os_str().to_owned();
    p.push(shard_file_name("", no, count));
    PathBuf::from(p)
}

/// `256M` = 256,000,000 bytes (decimal units, as llama-gguf-split), `4G`, `100K`, `12345`.
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c.to_ascii_uppercase()),
        _ => (t, 'B'),
    };
    let scale: u64 = match unit {
        'B' => 1,
        'K' => 1_000,
        'M' => 1_000_000,
        'G' => 1_000_000_000,
        _ => 0,
    };
    match digits.parse::<u64>().ok().zip(Some(scale)) {
        Some((n, k)) if n > 0 && k > 0 => n
            .checked_mul(k)
            .ok_or_else(|| format!("--split-max-size {s} is too large")),
        _ => Err(format!(
            "--split-max-size '{s}' is not a positive size such as 256M, 2G, 500K or 100000"
        )),
    }
}

/// Writes one shard to `PATH.part`, then renames it, so a failed or interrupted run leaves
/// no shard that looks complete.
fn write_shard(
    path: &Path,
    f: &GgufFile<'_>,
    h: &ShardHeader,
    files: &ModelFiles,
) -> Result<(), String> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".part");
    let tmp = PathBuf::from(tmp);
    let result = (|| -> std::io::Result<()> {
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
        w.write_all(&h.bytes)?;
        let mut at = h.bytes.len() as u64;
        for &(t, start) in &h.tensors {
            zeros(&mut w, start.saturating_sub(at))?;
            let data = f.tensor_data(&f.tensors()[t]);
            w.write_all(data)?;
            // copied: its pages need not stay in our resident set
            files.release_range(data);
            at = start + data.len() as u64;
        }
        zeros(&mut w, h.size.saturating_sub(at))?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("writing {}: {e}", path.display())
    })
}

fn zeros(w: &mut impl Write, mut n: u64) -> std::io::Result<()> {
    const Z: [u8; 4096] = [0; 4096];
    while n > 0 {
        let k = n.min(Z.len() as u64) as usize;
        w.write_all(&Z[..k])?;
        n -= k as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_as_llama_gguf_split() {
        assert_eq!(parse_size("256M"), Ok(256_000_000));
        assert_eq!(parse_size("2G"), Ok(2_000_000_000));
        assert_eq!(parse_size("500k"), Ok(500_000));
        assert_eq!(parse_size("12345"), Ok(12345));
        for bad in [
            "",
            "0",
            "0M",
            "M",
            "12X",
            "-5M",
            "1.5G",
            "99999999999999999999G",
        ] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn shard_paths() {
        assert_eq!(
            shard_path(Path::new("/tmp/out/m"), 1, 3),
            Path::new("/tmp/out/m-00002-of-00003.gguf")
        );
    }
}

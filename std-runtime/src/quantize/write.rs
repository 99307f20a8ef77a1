//! Writing the output: the header, then each tensor copied or converted (rows split across
//! threads in chunks of about 16K elements, as llama.cpp's chunks), padded to 32 bytes, into
//! a temporary file beside the output that is renamed into place at the end.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use superinfer_core::gguf::DEFAULT_ALIGNMENT;
use superinfer_core::quant::{self, mix, weights, GgmlType};

use super::{Job, QuantizeError};

/// llama.cpp's `min_chunk_size`: a chunk of rows holds at least this many elements.
const MIN_CHUNK: usize = 32 * 512;
/// Rows converted at once (f32 + output bytes in memory), in elements.
const SLAB: usize = 1 << 24;

/// A temporary file that is removed unless [`Temp::keep`] renamed it.
struct Temp {
    path: PathBuf,
    kept: bool,
}

impl Drop for Temp {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Writes the file; returns (input bytes, output bytes, elements) of the tensors.
pub(super) fn write_file(
    output: &Path,
    header: &[u8],
    jobs: &[Job<'_>],
    threads: usize,
    log: &mut dyn FnMut(&str),
) -> Result<(u64, u64, u64), QuantizeError> {
    let name = output
        .file_name()
        .ok_or_else(|| QuantizeError::write(output, std::io::Error::other("not a file name")))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp{}", std::process::id()));
    let mut temp = Temp {
        path: output.with_file_name(tmp_name),
        kept: false,
    };
    let err = |e| QuantizeError::write(output, e);
    let file = File::create(&temp.path).map_err(err)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    out.write_all(header).map_err(err)?;
    let (mut size_in, mut size_out, mut n_elements) = (0u64, 0u64, 0u64);
    let n = jobs.len();
    for (i, j) in jobs.iter().enumerate() {
        let d = &j.desc;
        let src_ty = d.ty;
        let shape: Vec<String> = d.ne.iter().map(|x| format!("{x:6}")).collect();
        let mut line = format!(
            "[{:4}/{:4}] {:<36} - [{}], type = {:>6}, ",
            i + 1,
            n,
            d.name,
            shape.join(", "),
            mix::ggml_name(src_ty)
        );
        let mib = |b: usize| b as f64 / 1024.0 / 1024.0;
        let written = if j.plan.target == src_ty {
            out.write_all(j.data).map_err(err)?;
            line += &format!("size = {:8.3} MiB", mib(j.data.len()));
            j.data.len()
        } else {
            let bytes = convert(j, threads, &mut |b| out.write_all(b)).map_err(err)?;
            line += &format!(
                "converting to {} .. size = {:8.2} MiB -> {:8.2} MiB",
                mix::ggml_name(j.plan.target),
                mib(j.data.len()),
                mib(bytes)
            );
            bytes
        };
        let pad = (written as u64).next_multiple_of(DEFAULT_ALIGNMENT) - written as u64;
        out.write_all(&vec![0u8; pad as usize]).map_err(err)?;
        size_in += j.data.len() as u64;
        size_out += written as u64;
        n_elements += d.ne.iter().product::<u64>();
        log(&line);
    }
    let file = out.into_inner().map_err(|e| err(e.into_error()))?;
    file.sync_all().map_err(err)?;
    drop(file);
    std::fs::rename(&temp.path, output).map_err(err)?;
    temp.kept = true;
    Ok((size_in, size_out, n_elements))
}

/// Converts one tensor, handing its bytes to `sink` slab by slab; returns how many.
fn convert(
    j: &Job<'_>,
    threads: usize,
    sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<usize> {
    let (src_ty, dst_ty) = (j.desc.ty, j.plan.target);
    let cols = j.desc.ne[0] as usize;
    let rows = j.data.len() / row_bytes(src_ty, cols);
    let (src_row, dst_row) = (row_bytes(src_ty, cols), row_bytes(dst_ty, cols));
    let chunk_rows = MIN_CHUNK.div_ceil(cols).max(1);
    let slab_rows = (SLAB / cols).max(chunk_rows);
    let mut dst = Vec::new();
    let mut total = 0;
    for first in (0..rows).step_by(slab_rows) {
        let nrows = slab_rows.min(rows - first);
        let src = &j.data[first * src_row..(first + nrows) * src_row];
        dst.clear();
        dst.resize(nrows * dst_row, 0);
        let work: Vec<(&[u8], &mut [u8])> = src
            .chunks(chunk_rows * src_row)
            .zip(dst.chunks_mut(chunk_rows * dst_row))
            .collect();
        let queue = Mutex::new(work.into_iter().enumerate());
        let rows_per_expert = j.desc.ne[1] as usize;
        let worker = || {
            let mut f32s = Vec::new();
            loop {
                let next = queue.lock().map(|mut q| q.next()).unwrap_or(None);
                let Some((k, (s, d))) = next else { break };
                f32s.resize(s.len() / src_row * cols, 0.0f32);
                // both types were checked to be readable / writable (and the importance
                // weights to fit) when planning
                quant::dequantize_row(src_ty, s, &mut f32s).expect("readable type");
                let Some(im) = j.imatrix else {
                    weights::quantize(dst_ty, &f32s, d).expect("writable type");
                    continue;
                };
                let row0 = first + k * chunk_rows;
                for (r, (x, y)) in f32s
                    .chunks_exact(cols)
                    .zip(d.chunks_exact_mut(dst_row))
                    .enumerate()
                {
                    let e = (row0 + r) / rows_per_expert.max(1);
                    let qw = &im[e * cols..(e + 1) * cols];
                    weights::quantize_rows(dst_ty, x, y, cols, Some(qw)).expect("importance type");
                }
            }
        };
        std::thread::scope(|scope| {
            for _ in 1..threads {
                scope.spawn(worker);
            }
            worker();
        });
        sink(&dst)?;
        total += dst.len();
    }
    Ok(total)
}

fn row_bytes(ty: GgmlType, cols: usize) -> usize {
    (cols / ty.block_len()) * ty.block_bytes()
}

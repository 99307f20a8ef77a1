//! Qwen2.5-0.5B with its matrices requantized to IQ4_XS and IQ4_NL by our quantizers (which
//! write ggml's bytes: `quant::tests::iq4_quantize_matches_ggml`), for the IQ formats'
//! perplexity check against llama.cpp on a real model (tests/tests/iq4_models.rs).
//!
//! The mix is `llama-quantize`'s IQ4_XS choice for the matrices it quantizes to 4 bits: every
//! matrix whose rows are whole super-blocks of 256 becomes IQ4_XS (the FFN down projections,
//! 4864 columns), every other one IQ4_NL (896 columns, the token embeddings included). The
//! output matrix, norms and biases stay as the dense file has them. Each matrix is
//! dequantized to f32 (exact) and quantized from there, as `llama-quantize --allow-requantize`
//! does.

use std::path::PathBuf;
use std::sync::Mutex;

use superinfer_runtime::core::gguf::{GgufFile, GgufWriter, MetaValue};
use superinfer_runtime::core::quant::{self, GgmlType};

/// The type a tensor of the dense file gets.
fn target(name: &str, dims: &[u64]) -> Option<GgmlType> {
    if dims.len() != 2 || !name.ends_with(".weight") || name == "output.weight" {
        return None;
    }
    match dims[0] {
        c if c % 256 == 0 => Some(GgmlType::IQ4_XS),
        c if c % 32 == 0 => Some(GgmlType::IQ4_NL),
        _ => None,
    }
}

/// `src` (rows of `cols` values of type `from`) as `to`, rows spread over the CPU's threads.
fn requantize(from: GgmlType, to: GgmlType, cols: usize, src: &[u8]) -> Vec<u8> {
    let (rb_in, rb_out) = (
        from.bytes_for(cols as u64).unwrap() as usize,
        to.bytes_for(cols as u64).unwrap() as usize,
    );
    let rows = src.len() / rb_in;
    let mut out = vec![0u8; rows * rb_out];
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let per = rows.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (src, dst) in src.chunks(per * rb_in).zip(out.chunks_mut(per * rb_out)) {
            s.spawn(move || {
                let mut row = vec![0f32; cols];
                for (x, y) in src.chunks_exact(rb_in).zip(dst.chunks_exact_mut(rb_out)) {
                    quant::dequantize_row(from, x, &mut row).unwrap();
                    quant::quantize_row(to, &row, y).unwrap();
                }
            });
        }
    });
    out
}

/// The requantized file's bytes, from the dense file's.
pub fn requantize_file(dense: &[u8]) -> Result<Vec<u8>, String> {
    let err = |e: superinfer_runtime::core::Error| e.to_string();
    let f = GgufFile::parse(dense).map_err(err)?;
    let mut w = GgufWriter::new();
    for (key, value) in f.metadata() {
        w.meta(*key, MetaValue::from_value(value));
    }
    // llama.cpp's LLAMA_FTYPE_MOSTLY_IQ4_XS
    w.meta("general.file_type", MetaValue::U32(30));
    for t in f.tensors() {
        let data = f.tensor_data(t);
        match target(t.name, &t.dims) {
            Some(to) => {
                let out = requantize(t.ty, to, t.dims[0] as usize, data);
                w.tensor(t.name, &t.dims, to, out).map_err(err)?;
            }
            None => {
                w.tensor(t.name, &t.dims, t.ty, data.to_vec())
                    .map_err(err)?;
            }
        }
    }
    w.finish().map_err(err)
}

/// The requantized Qwen2.5-0.5B in `models_dir()/derived/`, made once from the dense model
/// (`scripts/fetch-models.sh qwen2.5-0.5b`) and reused.
pub fn iq4_qwen05b() -> PathBuf {
    static MAKING: Mutex<()> = Mutex::new(());
    let _making = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let dst = crate::models_dir()
        .join("derived")
        .join("qwen2.5-0.5b-iq4_xs-iq4_nl.gguf");
    if !dst.is_file() {
        let dense = std::fs::read(crate::require_model(crate::QWEN_05B)).unwrap();
        let out = requantize_file(&dense).unwrap_or_else(|e| panic!("requantizing: {e}"));
        crate::upcycle::write_atomic(&dst, &out);
    }
    dst
}

//! `superinfer quantize IN OUT TYPE`: llama.cpp's `llama-quantize` (same per-tensor types,
//! same bytes where ggml's quantizer is deterministic). One line per tensor on stderr as
//! llama-quantize prints it, then the sizes and the time.

use superinfer_runtime::quantize::{self, QuantizeOptions};

use crate::args::QuantizeArgs;

pub fn run(a: &QuantizeArgs) -> Result<(), String> {
    let (ftype, name) = quantize::parse_ftype(&a.ftype).map_err(|e| e.to_string())?;
    let tensor_type = |s: &Option<String>| {
        s.as_deref()
            .map(quantize::parse_tensor_type)
            .transpose()
            .map_err(|e| e.to_string())
    };
    let threads = match a.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let opts = QuantizeOptions {
        threads,
        allow_requantize: a.allow_requantize,
        pure: a.pure,
        leave_output_tensor: a.leave_output_tensor,
        output_tensor_type: tensor_type(&a.output_tensor_type)?,
        token_embedding_type: tensor_type(&a.token_embedding_type)?,
        imatrix: a.imatrix.clone(),
        ..QuantizeOptions::new(ftype, name)
    };
    // the first line once the input is read and the types are chosen (a bad input or type
    // ends in the error line alone)
    let mut header = Some(format!(
        "quantizing '{}' to '{}' as {name} using {threads} threads",
        a.input.display(),
        a.output.display()
    ));
    let mut log = |line: &str| {
        if let Some(h) = header.take() {
            eprintln!("{h}");
        }
        eprintln!("{line}");
    };
    let report = quantize::quantize(&a.input, &a.output, &opts, &mut log)
        .map_err(|e| superinfer_runtime::chain(&e))?;
    eprintln!("{}", report.summary());
    Ok(())
}

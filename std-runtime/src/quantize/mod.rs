//! `llama-quantize` without llama.cpp: reads a GGUF model, picks each tensor's type with
//! llama.cpp's rules ([`superinfer_core::quant::mix`]), converts the tensors with ggml's own
//! weight quantizers ([`superinfer_core::quant::weights`]) on several threads, and writes a
//! file byte-identical to the one `llama-quantize` writes: the input's metadata in its order
//! with `general.quantization_version` and `general.file_type` moved to the end, the tensors
//! in llama.cpp's loader order (`blk.N` by layer, by name), 32-byte alignment. The file
//! goes to a temporary name beside the output and is renamed into place when complete.

mod error;
pub mod imatrix;
mod write;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use superinfer_core::gguf::{GgufFile, GgufWriter, MetaValue};
use superinfer_core::quant::mix::{self, FileType, MixParams, ModelInfo, Planned, TensorDesc};
use superinfer_core::quant::{weights, GgmlType};

pub use error::QuantizeError;

use crate::ModelFiles;

/// ggml's `GGML_QNT_VERSION`, written as `general.quantization_version`.
pub const QNT_VERSION: u32 = 2;

/// What to write (`llama-quantize`'s flags).
#[derive(Debug, Clone)]
pub struct QuantizeOptions {
    pub ftype: FileType,
    /// The name the type was given by (`Q4_K_M`, `COPY`, ...), for messages.
    pub ftype_name: String,
    /// Worker threads (at least 1).
    pub threads: usize,
    pub allow_requantize: bool,
    pub pure: bool,
    /// `--leave-output-tensor`: `output.weight` stays as it is.
    pub leave_output_tensor: bool,
    pub output_tensor_type: Option<GgmlType>,
    pub token_embedding_type: Option<GgmlType>,
    /// `--imatrix`: an importance matrix file (llama-imatrix's GGUF or legacy format); the
    /// types without an importance path here are refused with it.
    pub imatrix: Option<PathBuf>,
}

impl QuantizeOptions {
    pub fn new(ftype: FileType, ftype_name: &str) -> Self {
        QuantizeOptions {
            ftype,
            ftype_name: ftype_name.into(),
            threads: 1,
            allow_requantize: false,
            pure: false,
            leave_output_tensor: false,
            output_tensor_type: None,
            token_embedding_type: None,
            imatrix: None,
        }
    }
}

/// Sizes and time of a finished run.
#[derive(Debug, Clone)]
pub struct QuantizeReport {
    pub n_tensors: usize,
    pub n_elements: u64,
    pub size_in: u64,
    pub size_out: u64,
    pub n_fallback: usize,
    pub elapsed: Duration,
}

impl QuantizeReport {
    /// llama-quantize's closing lines (`model size = … MiB (… BPW)`, `quant size`).
    pub fn summary(&self) -> String {
        let mib = |b: u64| b as f64 / 1024.0 / 1024.0;
        let bpw = |b: u64| b as f64 * 8.0 / self.n_elements.max(1) as f64;
        let mut s = format!(
            "model size  = {:8.2} MiB ({:.2} BPW)\nquant size  = {:8.2} MiB ({:.2} BPW)\n",
            mib(self.size_in),
            bpw(self.size_in),
            mib(self.size_out),
            bpw(self.size_out)
        );
        if self.n_fallback > 0 {
            s += &format!(
                "WARNING: {} of {} tensor(s) required fallback quantization\n",
                self.n_fallback, self.n_tensors
            );
        }
        s += &format!(
            "quantize time = {:8.2} ms",
            self.elapsed.as_secs_f64() * 1000.0
        );
        s
    }
}

/// Every type `superinfer quantize` accepts, as `llama-quantize` names them.
pub fn supported_ftype_names() -> Vec<&'static str> {
    mix::NAMES
        .iter()
        .filter(|(_, ft)| ftype_supported(*ft))
        .map(|(n, _)| *n)
        .collect()
}

/// Whether every type the mix of `ft` may choose has a quantizer here.
fn ftype_supported(ft: FileType) -> bool {
    use FileType::*;
    !matches!(
        ft,
        MOSTLY_IQ2_XXS
            | MOSTLY_IQ2_XS
            | MOSTLY_IQ2_S
            | MOSTLY_IQ2_M
            | MOSTLY_IQ1_S
            | MOSTLY_IQ1_M
            | MOSTLY_IQ3_XXS
            | MOSTLY_IQ3_XS
            | MOSTLY_IQ3_S
            | MOSTLY_IQ3_M
            | MOSTLY_TQ1_0
            | MOSTLY_TQ2_0
            | MOSTLY_NVFP4
            | MOSTLY_Q1_0
            | MOSTLY_Q2_0
            | MOSTLY_Q2_K_S
    )
}

/// Parses a `llama-quantize` type name, refusing the ones this build cannot write.
pub fn parse_ftype(name: &str) -> Result<(FileType, &'static str), QuantizeError> {
    let list = || supported_ftype_names().join(", ");
    match FileType::parse(name) {
        Some((ft, n)) if ftype_supported(ft) => Ok((ft, n)),
        Some((_, n)) => Err(QuantizeError::Unsupported(format!(
            "type {n} is not supported yet (its mix needs quantizers this build lacks); supported: {}",
            list()
        ))),
        None => Err(QuantizeError::Unsupported(format!(
            "unknown type '{name}'; supported: {}",
            list()
        ))),
    }
}

/// The tensor type a flag (`--output-tensor-type q8_0`) names, if this build writes it.
pub fn parse_tensor_type(name: &str) -> Result<GgmlType, QuantizeError> {
    match GgmlType::from_name(name) {
        Some(t) if weights::SUPPORTED.contains(&t) => Ok(t),
        _ => Err(QuantizeError::Unsupported(format!(
            "unknown or unsupported tensor type '{name}'; supported: {}",
            weights::SUPPORTED
                .iter()
                .map(|t| mix::ggml_name(*t))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// One tensor as it will be written.
pub(crate) struct Job<'a> {
    pub desc: TensorDesc,
    pub data: &'a [u8],
    pub plan: Planned,
    /// The importance weights (`ne[0]` per expert) when the tensor is converted with them.
    pub imatrix: Option<&'a [f32]>,
}

/// Quantizes `input` into `output` as `llama-quantize` does, calling `log` with each line
/// llama-quantize would print (warnings, one line per tensor).
pub fn quantize(
    input: &Path,
    output: &Path,
    opts: &QuantizeOptions,
    log: &mut dyn FnMut(&str),
) -> Result<QuantizeReport, QuantizeError> {
    let t0 = Instant::now();
    error::check_distinct(input, output)?;
    let im = match &opts.imatrix {
        Some(p) => Some((p, imatrix::load(p)?)).filter(|(_, m)| !m.entries.is_empty()),
        None => None,
    };
    let files = ModelFiles::open(input).map_err(|e| QuantizeError::input(input, &e))?;
    let f = files.parse().map_err(|e| QuantizeError::input(input, &e))?;
    let model = ModelInfo::from_gguf(&f).map_err(|e| QuantizeError::input(input, &e))?;
    let params = MixParams {
        ftype: opts.ftype,
        output_tensor_type: opts.output_tensor_type,
        token_embedding_type: opts.token_embedding_type,
        pure: opts.pure,
        quantize_output_tensor: !opts.leave_output_tensor,
        only_copy: opts.ftype_name == "COPY",
        has_imatrix: im.is_some(),
    };
    let entries = im.as_ref().map(|(_, m)| &m.entries);
    let jobs = plan(&f, &model, &params, opts, entries)?;
    for j in &jobs {
        if let Some(w) = &j.plan.fallback_warning {
            log(w);
        }
    }
    let overrides = match &im {
        Some((p, m)) => imatrix_keys(p, m),
        None => Vec::new(),
    };
    let header = header(&f, &jobs, opts.ftype, overrides)?;
    let (size_in, size_out, n_elements) =
        write::write_file(output, &header, &jobs, opts.threads.max(1), log)?;
    Ok(QuantizeReport {
        n_tensors: jobs.len(),
        n_elements,
        size_in,
        size_out,
        n_fallback: jobs
            .iter()
            .filter(|j| j.plan.fallback_warning.is_some())
            .count(),
        elapsed: t0.elapsed(),
    })
}

/// The tensors in write order with their types, after every check that can fail before
/// anything is written.
fn plan<'a>(
    f: &GgufFile<'a>,
    model: &ModelInfo,
    params: &MixParams,
    opts: &QuantizeOptions,
    imatrix: Option<&'a std::collections::HashMap<String, Vec<f32>>>,
) -> Result<Vec<Job<'a>>, QuantizeError> {
    let names: Vec<&str> = f.tensors().iter().map(|t| t.name).collect();
    let order = mix::tensor_order(&names);
    let descs: Vec<TensorDesc> = order
        .iter()
        .map(|&i| {
            let t = &f.tensors()[i];
            TensorDesc::new(t.name, &t.dims, t.ty)
        })
        .collect();
    let plans = mix::plan(params, model, &descs).map_err(|e| QuantizeError::Plan(e.to_string()))?;
    let mut jobs = Vec::with_capacity(descs.len());
    for ((desc, plan), &i) in descs.into_iter().zip(plans).zip(&order) {
        let t = &f.tensors()[i];
        if plan.target != t.ty {
            if plan.requires_imatrix {
                return Err(QuantizeError::Unsupported(format!(
                    "this quantization requires an importance matrix (tensor {}, type {})",
                    t.name,
                    mix::ggml_name(plan.target)
                )));
            }
            if mix::is_quantized(t.ty) && !opts.allow_requantize {
                return Err(QuantizeError::Requantize(format!(
                    "requantizing from type {} is disabled (tensor {} would become {}); \
                     pass --allow-requantize to quantize an already-quantized model \
                     (quality is better from an F32/F16/BF16 model)",
                    mix::ggml_name(t.ty),
                    t.name,
                    mix::ggml_name(plan.target)
                )));
            }
            if !weights::SUPPORTED.contains(&plan.target) {
                return Err(QuantizeError::Unsupported(format!(
                    "tensor {} would be {}, which this build cannot write yet",
                    t.name,
                    mix::ggml_name(plan.target)
                )));
            }
            if !t.ty.is_supported() {
                return Err(QuantizeError::Unsupported(format!(
                    "tensor {} is {}, which this build cannot read",
                    t.name,
                    mix::ggml_name(t.ty)
                )));
            }
        }
        let im = match imatrix.and_then(|m| m.get(t.name)) {
            Some(v) if plan.target != t.ty => {
                if v.len() as u64 == desc.ne[0] * desc.ne[2] {
                    Some(v.as_slice())
                } else if mix::category(t.name) == mix::Category::TokenEmbd {
                    None
                } else {
                    return Err(QuantizeError::Input(format!(
                        "imatrix size {} is different from tensor size {} for {}",
                        v.len(),
                        desc.ne[0] * desc.ne[2],
                        t.name
                    )));
                }
            }
            _ => None,
        };
        if im.is_some() && !weights::supports_imatrix(plan.target) {
            return Err(QuantizeError::Unsupported(format!(
                "--imatrix is not supported yet for {} (tensor {} would be {}, which has no \
                 importance-matrix quantizer here: types with one are q4_0, q4_1, q5_0, q5_1, \
                 q8_0, q4_K, q5_K, q6_K); quantize without --imatrix",
                opts.ftype_name,
                t.name,
                mix::ggml_name(plan.target)
            )));
        }
        jobs.push(Job {
            desc,
            data: f.tensor_data(t),
            plan,
            imatrix: im,
        });
    }
    Ok(jobs)
}

/// The header llama.cpp's `gguf_write` writes for the output: the input's key-value pairs
/// in order (split keys dropped), `general.quantization_version` and `general.file_type`
/// removed and appended, then the tensor directory with the new types.
fn header(
    f: &GgufFile<'_>,
    jobs: &[Job<'_>],
    ftype: FileType,
    overrides: Vec<(&'static str, MetaValue)>,
) -> Result<Vec<u8>, QuantizeError> {
    const MOVED: [&str; 2] = ["general.quantization_version", "general.file_type"];
    const DROPPED: [&str; 3] = ["split.no", "split.count", "split.tensors.count"];
    let overridden = |k: &str| overrides.iter().any(|(o, _)| *o == k);
    let mut w = GgufWriter::new();
    for (k, v) in f.metadata() {
        if !MOVED.contains(k) && !DROPPED.contains(k) && !overridden(k) {
            w.meta(*k, MetaValue::from_value(v));
        }
    }
    w.meta(MOVED[0], MetaValue::U32(QNT_VERSION));
    w.meta(MOVED[1], MetaValue::U32(ftype.id()));
    for (k, v) in overrides {
        w.meta(k, v);
    }
    for j in jobs {
        let d = &j.desc;
        w.declare(d.name.as_str(), &d.ne[..d.n_dims], j.plan.target)
            .map_err(|e| QuantizeError::Plan(e.to_string()))?;
    }
    Ok(w.header().0)
}

/// The keys llama-quantize adds for an importance matrix (its KV overrides, in order).
fn imatrix_keys(path: &Path, m: &imatrix::Imatrix) -> Vec<(&'static str, MetaValue)> {
    // strncpy into a 128-byte field: at most 127 bytes
    let cut = |s: &str| {
        let b = s.as_bytes();
        String::from_utf8_lossy(&b[..b.len().min(127)]).into_owned()
    };
    let mut v = vec![(
        "quantize.imatrix.file",
        MetaValue::String(cut(&path.to_string_lossy())),
    )];
    if let Some(d) = m.datasets.first() {
        v.push(("quantize.imatrix.dataset", MetaValue::String(cut(d))));
    }
    v.push((
        "quantize.imatrix.entries_count",
        MetaValue::U32(m.entries.len() as u32),
    ));
    if m.chunk_count > 0 {
        v.push((
            "quantize.imatrix.chunks_count",
            MetaValue::U32(m.chunk_count.unsigned_abs() as u32),
        ));
    }
    v
}

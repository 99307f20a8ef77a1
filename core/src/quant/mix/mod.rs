//! llama.cpp's quantization mixes: which type each tensor of a model gets for a file type
//! (`Q4_K_M` puts some tensors in Q6_K, falls back to Q5_0 where a row is not a whole
//! number of 256-element blocks, ...), and the order `llama-quantize` writes tensors in.
//! Pure functions of the file's metadata and tensor directory; the driver that reads and
//! writes files is std-runtime's `quantize`.

mod ftype;
mod rules;

#[cfg(test)]
mod tests;

use alloc::string::String;
use alloc::vec::Vec;

pub use ftype::{FileType, NAMES};
pub use rules::{allows_quantization, category, is_quantized, requires_imatrix, Category};

use crate::error::Result;
use crate::gguf::GgufFile;
use crate::quant::GgmlType;

/// What the user asked for (`llama_model_quantize_params`' fields that pick types).
#[derive(Debug, Clone)]
pub struct MixParams {
    pub ftype: FileType,
    pub output_tensor_type: Option<GgmlType>,
    pub token_embedding_type: Option<GgmlType>,
    /// `--pure`: every quantizable tensor in the default type (still with fallbacks).
    pub pure: bool,
    /// False with `--leave-output-tensor`.
    pub quantize_output_tensor: bool,
    /// `COPY`: no tensor is converted.
    pub only_copy: bool,
    pub has_imatrix: bool,
}

impl MixParams {
    pub fn new(ftype: FileType) -> Self {
        MixParams {
            ftype,
            output_tensor_type: None,
            token_embedding_type: None,
            pure: false,
            quantize_output_tensor: true,
            only_copy: false,
            has_imatrix: false,
        }
    }
}

/// The hyper-parameters the rules look at.
#[derive(Debug, Clone, Default)]
pub struct ModelInfo {
    pub arch: String,
    pub n_layer: u32,
    pub n_head: u32,
    pub n_head_kv: u32,
    pub n_expert: u32,
    /// llama.cpp's `LLM_TYPE_70B` (its attn_v rule gives those more bits).
    pub is_70b: bool,
}

impl ModelInfo {
    /// Reads `general.architecture` and `{arch}.block_count` / `attention.head_count(_kv)`
    /// / `expert_count` (a per-layer array counts by its first element, as `n_gqa(0)`).
    pub fn from_gguf(f: &GgufFile<'_>) -> Result<ModelInfo> {
        let arch = f.require_str("general.architecture")?;
        let first = |key: &str| -> Result<Option<u64>> {
            let k = alloc::format!("{arch}.{key}");
            match f.get(&k) {
                Some(v) => match v.as_array() {
                    Some(a) => Ok(a.get(0).and_then(|e| e.as_u64())),
                    None => f.get_u64(&k),
                },
                None => Ok(None),
            }
        };
        let n_layer = first("block_count")?.unwrap_or(0) as u32;
        let n_head = first("attention.head_count")?.unwrap_or(0) as u32;
        let n_head_kv = first("attention.head_count_kv")?.map_or(n_head, |v| v as u32);
        let n_expert = first("expert_count")?.unwrap_or(0) as u32;
        let is_70b = match arch {
            "llama" => n_layer == 80 && n_head != n_head_kv,
            "deci" | "olmo" | "qwen2" => n_layer == 80,
            "jais2" => n_layer == 68,
            _ => false,
        };
        Ok(ModelInfo {
            arch: arch.into(),
            n_layer,
            n_head,
            n_head_kv,
            n_expert,
            is_70b,
        })
    }

    pub fn n_gqa(&self) -> u32 {
        self.n_head.checked_div(self.n_head_kv).unwrap_or(0)
    }
}

/// One tensor of the input file.
#[derive(Debug, Clone)]
pub struct TensorDesc {
    pub name: String,
    /// ggml's `ne` (trailing dimensions 1).
    pub ne: [u64; 4],
    /// ggml_n_dims: dimensions up to the last that is not 1 (at least 1).
    pub n_dims: usize,
    pub ty: GgmlType,
}

impl TensorDesc {
    pub fn new(name: &str, dims: &[u64], ty: GgmlType) -> TensorDesc {
        let mut ne = [1u64; 4];
        for (n, &d) in ne.iter_mut().zip(dims) {
            *n = d;
        }
        let n_dims = (1..=4).rev().find(|&i| ne[i - 1] != 1).unwrap_or(1);
        TensorDesc {
            name: name.into(),
            ne,
            n_dims,
            ty,
        }
    }
}

/// What one tensor becomes.
#[derive(Debug, Clone)]
pub struct Planned {
    pub target: GgmlType,
    pub allows_quantization: bool,
    pub requires_imatrix: bool,
    /// llama.cpp's warning when the row length forced another type.
    pub fallback_warning: Option<String>,
}

/// The layer `N` of a `blk.N.` name, as C's `sscanf(name, "blk.%d.", &l)` assigns it.
pub fn block_index(name: &str) -> Option<i32> {
    let rest = name.strip_prefix("blk.")?.trim_start();
    let (neg, digits) = match rest.as_bytes().first()? {
        b'-' => (true, &rest[1..]),
        b'+' => (false, &rest[1..]),
        _ => (false, rest),
    };
    let end = digits
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    let v: i64 = digits[..end].parse().ok()?;
    Some(if neg { -v } else { v } as i32)
}

/// The order llama.cpp's model loader lists tensors in (its `weights_map`): tensors with
/// no `blk.N.` first, then by layer, by name (bytewise) within one layer.
pub fn tensor_order(names: &[&str]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..names.len()).collect();
    idx.sort_by(|&a, &b| {
        let la = block_index(names[a]).unwrap_or(-1);
        let lb = block_index(names[b]).unwrap_or(-1);
        la.cmp(&lb)
            .then_with(|| names[a].as_bytes().cmp(names[b].as_bytes()))
    });
    idx
}

/// ggml's type name (`q4_K`, `iq4_xs`, `f16`), as llama-quantize prints it.
pub fn ggml_name(ty: GgmlType) -> String {
    let lower = ty.name().to_ascii_lowercase();
    match lower.strip_suffix("_k") {
        Some(stem) => alloc::format!("{stem}_K"),
        None => lower,
    }
}

/// Every tensor's type for `params`, tensors in the order they will be written
/// (`llama_model_quantize_impl`'s preliminary pass).
pub fn plan(params: &MixParams, model: &ModelInfo, tensors: &[TensorDesc]) -> Result<Vec<Planned>> {
    let default = params.ftype.default_type().ok_or_else(|| {
        crate::Error::InvalidArgument(alloc::format!(
            "invalid output file type {}",
            params.ftype.id()
        ))
    })?;
    let mut p = rules::Planner {
        params,
        model,
        n_attention_wv: 0,
        i_attention_wv: 0,
        n_layer: model.n_layer as i32,
        i_ffn_down: 0,
        i_ffn_gate: 0,
        i_ffn_up: 0,
        has_tied_embeddings: true,
        n_fallback: 0,
    };
    for t in tensors {
        let c = category(&t.name);
        if matches!(
            c,
            Category::AttentionV | Category::AttentionQkv | Category::AttentionKvB
        ) {
            p.n_attention_wv += 1;
        }
        if c == Category::Output {
            p.has_tied_embeddings = false;
        }
    }
    let mut out = Vec::with_capacity(tensors.len());
    for t in tensors {
        let allows = allows_quantization(params, &model.arch, t);
        let (target, warn) = if allows {
            p.tensor_type(t, default)?
        } else {
            (t.ty, None)
        };
        out.push(Planned {
            target,
            allows_quantization: allows,
            requires_imatrix: requires_imatrix(&t.name, target, params.ftype),
            fallback_warning: warn,
        });
    }
    Ok(out)
}

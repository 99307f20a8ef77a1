//! Reading an adapter GGUF and checking it against the base model, as llama.cpp's
//! `llama_adapter_lora_init_impl` does (`general.type`, `general.architecture`,
//! `adapter.type`, every pair complete, its base tensor present, `A: [n_in, r]` and
//! `B: [r, n_out]`), plus a rank above 0; anything wrong is a [`LoraError`] naming the key
//! or tensor.

use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::error::LoraError;
use crate::error::{Error, Result};
use crate::gguf::{dims_string, keys, GgufFile, TensorInfo};
use crate::model::{Arch, Ffn, Weights};
use crate::ops::QMatrix;
use crate::quant;

/// The projections an adapter may change, in a layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proj {
    Q,
    K,
    V,
    O,
    Gate,
    Up,
    Down,
}

impl Proj {
    pub const ALL: [Proj; 7] = [
        Proj::Q,
        Proj::K,
        Proj::V,
        Proj::O,
        Proj::Gate,
        Proj::Up,
        Proj::Down,
    ];

    /// The base tensor's name inside a layer (`blk.N.<this>.weight`).
    pub fn tensor(self) -> &'static str {
        match self {
            Proj::Q => "attn_q",
            Proj::K => "attn_k",
            Proj::V => "attn_v",
            Proj::O => "attn_output",
            Proj::Gate => "ffn_gate",
            Proj::Up => "ffn_up",
            Proj::Down => "ffn_down",
        }
    }

    fn from_tensor(name: &str) -> Option<Proj> {
        Proj::ALL.into_iter().find(|p| p.tensor() == name)
    }
}

/// One projection's pair: `A` as `rank` rows of `n_in`, `B` as `n_out` rows of `rank`.
#[derive(Debug, Clone)]
pub struct LoraWeight {
    pub rank: usize,
    pub n_in: usize,
    pub n_out: usize,
    pub a: Vec<f32>,
    pub b: Vec<f32>,
}

impl LoraWeight {
    /// llama.cpp's `get_scale`: `user · alpha / rank`, or `user` when `alpha` is 0.
    pub fn scale(&self, alpha: f32, user: f32) -> f32 {
        if alpha != 0.0 {
            user * alpha / self.rank as f32
        } else {
            user
        }
    }
}

/// A LoRA adapter checked against one base model, its pairs in owned `f32` buffers.
pub struct LoraAdapter {
    arch: String,
    alpha: f32,
    key: u64,
    /// Per layer, per [`Proj`] (in [`Proj::ALL`]'s order).
    layers: Vec<[Option<LoraWeight>; 7]>,
    pairs: usize,
}

impl core::fmt::Debug for LoraAdapter {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LoraAdapter")
            .field("arch", &self.arch)
            .field("alpha", &self.alpha)
            .field("pairs", &self.pairs)
            .finish()
    }
}

fn lora(e: LoraError) -> Error {
    Error::Lora(alloc::boxed::Box::new(e))
}

impl LoraAdapter {
    /// Reads an adapter file for the model `w`. Norm tensors (`*_norm.weight`) are skipped
    /// as llama.cpp skips them.
    pub fn from_gguf(f: &GgufFile<'_>, w: &Weights<'_>) -> Result<LoraAdapter> {
        let text =
            |key: &str| -> Result<String> { Ok(f.get_str(key)?.unwrap_or_default().to_string()) };
        let general_type = text("general.type")?;
        if general_type != "adapter" {
            return Err(lora(LoraError::NotAnAdapter { general_type }));
        }
        let arch = text(keys::GENERAL_ARCHITECTURE)?;
        let model = w.config.arch.name();
        if arch != model {
            return Err(lora(LoraError::Architecture {
                adapter: arch,
                model: model.to_string(),
            }));
        }
        let adapter_type = text("adapter.type")?;
        if adapter_type != "lora" {
            return Err(lora(LoraError::NotLora { adapter_type }));
        }
        let alpha = f.get_f32("adapter.lora.alpha")?.unwrap_or(0.0);

        // pairs by base name, in the file's order
        let mut pairs: BTreeMap<&str, [Option<&TensorInfo<'_>>; 2]> = BTreeMap::new();
        for t in f.tensors() {
            let (base, half) = if let Some(b) = t.name.strip_suffix(".lora_a") {
                (b, 0)
            } else if let Some(b) = t.name.strip_suffix(".lora_b") {
                (b, 1)
            } else if t.name.ends_with("_norm.weight") {
                continue;
            } else {
                return Err(lora(LoraError::UnexpectedTensor {
                    tensor: t.name.to_string(),
                }));
            };
            pairs.entry(base).or_default()[half] = Some(t);
        }
        if pairs.is_empty() {
            return Err(lora(LoraError::Empty));
        }
        let n_layer = w.layers.len();
        let mut layers: Vec<[Option<LoraWeight>; 7]> =
            (0..n_layer).map(|_| Default::default()).collect();
        let mut key = 0x243f_6a88_85a3_08d3u64 ^ alpha.to_bits() as u64;
        for (&name, &[a, b]) in &pairs {
            let (a, b) = match (a, b) {
                (Some(a), Some(b)) => (a, b),
                (None, _) => return Err(missing(name, "lora_a")),
                (_, None) => return Err(missing(name, "lora_b")),
            };
            let (il, proj) = locate(w, name)?;
            let base = base_matrix(w, il, proj).expect("located");
            let weight = read_pair(f, name, base, a, b)?;
            for v in weight.a.iter().chain(&weight.b) {
                key = (key ^ u64::from(v.to_bits())).wrapping_mul(0x0000_0100_0000_01b3);
            }
            key = super::mix(key ^ (il * 7 + proj as usize) as u64);
            layers[il][proj as usize] = Some(weight);
        }
        Ok(LoraAdapter {
            arch,
            alpha,
            key,
            layers,
            pairs: pairs.len(),
        })
    }

    /// The pair of layer `il`'s projection `p`, if the adapter changes it.
    pub fn weight(&self, il: usize, p: Proj) -> Option<&LoraWeight> {
        self.layers.get(il)?[p as usize].as_ref()
    }

    /// `general.architecture` of the adapter (the model's).
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// `adapter.lora.alpha` (0 when absent: the scale is then the user's alone).
    pub fn alpha(&self) -> f32 {
        self.alpha
    }

    /// A hash of the adapter's contents (equal adapters, equal keys).
    pub fn key(&self) -> u64 {
        self.key
    }

    /// Number of A/B pairs.
    pub fn pairs(&self) -> usize {
        self.pairs
    }

    /// The largest rank of its pairs.
    pub fn max_rank(&self) -> usize {
        self.weights().map(|w| w.rank).max().unwrap_or(0)
    }

    /// Bytes its A and B buffers hold.
    pub fn bytes(&self) -> usize {
        self.weights()
            .map(|w| (w.a.len() + w.b.len()) * size_of::<f32>())
            .sum()
    }

    fn weights(&self) -> impl Iterator<Item = &LoraWeight> {
        self.layers.iter().flatten().flatten()
    }
}

fn missing(name: &str, half: &'static str) -> Error {
    lora(LoraError::MissingHalf {
        tensor: name.to_string(),
        missing: half,
    })
}

/// The layer and projection a base tensor name stands for, or why it cannot have an
/// adapter here.
fn locate(w: &Weights<'_>, name: &str) -> Result<(usize, Proj)> {
    let unsupported = |why| {
        lora(LoraError::Unsupported {
            tensor: name.to_string(),
            why,
        })
    };
    let no_base = || {
        lora(LoraError::NoBaseTensor {
            tensor: name.to_string(),
        })
    };
    if name == "token_embd.weight" || name == "output.weight" {
        return Err(unsupported(
            "only the layers' attention and FFN projections take adapters",
        ));
    }
    let Some(rest) = name.strip_prefix("blk.") else {
        return Err(no_base());
    };
    let Some((il, kind)) = rest.split_once('.') else {
        return Err(no_base());
    };
    let il: usize = il.parse().map_err(|_| no_base())?;
    let Some(kind) = kind.strip_suffix(".weight") else {
        return Err(no_base());
    };
    if il >= w.layers.len() {
        return Err(no_base());
    }
    if kind == "attn_qkv" {
        return Err(unsupported("fused QKV tensors"));
    }
    if kind.ends_with("_exps") || kind.ends_with("_shexp") || kind == "ffn_gate_inp" {
        return Err(unsupported("mixture-of-experts tensors"));
    }
    let proj = Proj::from_tensor(kind).ok_or_else(no_base)?;
    let fused_attn = w.config.arch == Arch::Phi3;
    match proj {
        Proj::Q | Proj::K | Proj::V if fused_attn => Err(no_base()),
        Proj::Gate | Proj::Up if w.config.arch.fused_gate_up() => {
            Err(unsupported("fused gate/up tensors"))
        }
        Proj::Gate | Proj::Up | Proj::Down if !matches!(w.layers[il].ffn, Ffn::Dense(_)) => {
            Err(no_base())
        }
        _ => Ok((il, proj)),
    }
}

/// Layer `il`'s matrix for `p` (a dense FFN's for the FFN projections).
pub(crate) fn base_matrix<'w, 'a>(
    w: &'w Weights<'a>,
    il: usize,
    p: Proj,
) -> Option<&'w QMatrix<'a>> {
    let l = w.layers.get(il)?;
    let ffn = match &l.ffn {
        Ffn::Dense(d) => Some(d),
        // experts and encoders' ungated FFNs take no adapters (yet)
        Ffn::Moe(_) | Ffn::Seq(_) => None,
    };
    Some(match p {
        Proj::Q => &l.wq,
        Proj::K => &l.wk,
        Proj::V => &l.wv,
        Proj::O => &l.wo,
        Proj::Gate => &ffn?.gate,
        Proj::Up => &ffn?.up,
        Proj::Down => &ffn?.down,
    })
}

/// Checks a pair against its base matrix (`cols` inputs, `rows` outputs) and reads it.
fn read_pair(
    f: &GgufFile<'_>,
    name: &str,
    base: &QMatrix<'_>,
    a: &TensorInfo<'_>,
    b: &TensorInfo<'_>,
) -> Result<LoraWeight> {
    let (n_in, n_out) = (base.cols as u64, base.rows as u64);
    let shape = |t: &TensorInfo<'_>, expected: String| {
        lora(LoraError::Shape {
            tensor: t.name.to_string(),
            expected,
            found: dims_string(&t.dims),
        })
    };
    let (ra, rb) = match (&a.dims[..], &b.dims[..]) {
        ([ai, ra], [rb, bo]) => {
            if *ai != n_in {
                return Err(shape(a, alloc::format!("[{n_in}, r]")));
            }
            if *bo != n_out {
                return Err(shape(b, alloc::format!("[r, {n_out}]")));
            }
            (*ra as usize, *rb as usize)
        }
        ([_, _], _) => return Err(shape(b, alloc::format!("[r, {n_out}]"))),
        _ => return Err(shape(a, alloc::format!("[{n_in}, r]"))),
    };
    if ra == 0 || rb == 0 {
        return Err(lora(LoraError::ZeroRank {
            tensor: name.to_string(),
        }));
    }
    if ra != rb {
        return Err(lora(LoraError::RankMismatch {
            tensor: name.to_string(),
            a: ra,
            b: rb,
        }));
    }
    Ok(LoraWeight {
        rank: ra,
        n_in: n_in as usize,
        n_out: n_out as usize,
        a: read_f32(f, a)?,
        b: read_f32(f, b)?,
    })
}

/// A tensor's values as `f32`, row by row through the dequantizers.
fn read_f32(f: &GgufFile<'_>, t: &TensorInfo<'_>) -> Result<Vec<f32>> {
    let bad_type = || {
        lora(LoraError::Type {
            tensor: t.name.to_string(),
            ty: t.ty,
        })
    };
    let (cols, rows) = (t.row_len(), t.n_rows());
    let row_bytes = t.ty.bytes_for(cols as u64).ok_or_else(bad_type)? as usize;
    let data = f.tensor_data(t);
    if data.len() < row_bytes * rows {
        return Err(Error::TensorOutOfBounds {
            tensor: t.name.to_string(),
            offset: t.offset,
            size: t.size,
            file_size: f.bytes().len() as u64,
        });
    }
    let mut out = alloc::vec![0.0f32; cols * rows];
    for (src, dst) in data.chunks_exact(row_bytes).zip(out.chunks_exact_mut(cols)) {
        quant::dequantize_row(t.ty, src, dst).map_err(|_| bad_type())?;
    }
    Ok(out)
}

//! `config.json` to llama.cpp's GGUF metadata, Hugging Face tensor names to llama.cpp's
//! (its `convert_hf_to_gguf.py` and `gguf-py`'s tensor map), and sentence-transformers'
//! pooling and normalisation.

use std::path::Path;

use serde_json::Value;
use superinfer_core::gguf::{GgufWriter, MetaValue};
use superinfer_core::model::Pooling;
use superinfer_core::quant::GgmlType;

use super::safetensors::{Dtype, SafeTensors};
use super::{err, read_json};
use crate::Error;

/// The architectures read from a Hugging Face directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    Bert,
}

const SUPPORTED: &str = "bert (BertModel)";

impl Arch {
    /// `model_type` (or else `architectures[0]`) of `config.json`.
    pub fn read(path: &Path, cfg: &Value) -> Result<Arch, Error> {
        let (field, name) = match cfg.get("model_type").and_then(Value::as_str) {
            Some(t) => ("model_type", t),
            None => match cfg
                .get("architectures")
                .and_then(|a| a.get(0))
                .and_then(Value::as_str)
            {
                Some(a) => ("architectures", a),
                None => {
                    return Err(err(
                        path,
                        "field 'model_type' is missing (and no 'architectures'): the \
                         architecture is unknown",
                    ))
                }
            },
        };
        match name {
            "bert" | "BertModel" | "BertForMaskedLM" => Ok(Arch::Bert),
            other => Err(err(
                path,
                format!(
                    "field '{field}' is '{other}', an architecture superinfer does not read \
                     from a Hugging Face directory (supported: {SUPPORTED})"
                ),
            )),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Arch::Bert => "bert",
        }
    }

    /// The hyperparameters as llama.cpp's converter writes them.
    pub fn metadata(self, path: &Path, cfg: &Value, w: &mut GgufWriter) -> Result<(), Error> {
        let a = self.name();
        let num = |f: &str| -> Result<u64, Error> {
            cfg.get(f)
                .and_then(Value::as_u64)
                .filter(|&v| v > 0 && v < 1 << 24)
                .ok_or_else(|| {
                    err(
                        path,
                        format!("field '{f}' is missing or not a positive integer"),
                    )
                })
        };
        let opt_num = |f: &str, default: u64| -> Result<u64, Error> {
            match cfg.get(f) {
                None | Some(Value::Null) => Ok(default),
                Some(_) => num(f),
            }
        };
        let act = cfg
            .get("hidden_act")
            .and_then(Value::as_str)
            .unwrap_or("gelu");
        if act != "gelu" {
            return Err(err(
                path,
                format!("field 'hidden_act' is '{act}' (supported: gelu)"),
            ));
        }
        if let Some(p) = cfg.get("position_embedding_type").and_then(Value::as_str) {
            if p != "absolute" {
                return Err(err(
                    path,
                    format!("field 'position_embedding_type' is '{p}' (supported: absolute)"),
                ));
            }
        }
        let eps = match cfg.get("layer_norm_eps") {
            None => 1e-12,
            Some(v) => v
                .as_f64()
                .filter(|e| e.is_finite() && *e >= 0.0)
                .ok_or_else(|| err(path, "field 'layer_norm_eps' is not a number"))?,
        };
        let (hidden, heads) = (num("hidden_size")?, num("num_attention_heads")?);
        if hidden % heads != 0 {
            return Err(err(
                path,
                format!(
                    "field 'hidden_size' {hidden} is not a multiple of 'num_attention_heads' \
                     {heads}"
                ),
            ));
        }
        let name = cfg
            .get("_name_or_path")
            .and_then(Value::as_str)
            .unwrap_or(a)
            .to_string();
        w.meta("general.architecture", MetaValue::String(a.into()));
        w.meta("general.name", MetaValue::String(name));
        let k = |s: &str| format!("{a}.{s}");
        let u32v = |v: u64| MetaValue::U32(v as u32);
        w.meta(k("context_length"), u32v(num("max_position_embeddings")?));
        w.meta(k("embedding_length"), u32v(hidden));
        w.meta(k("feed_forward_length"), u32v(num("intermediate_size")?));
        w.meta(k("block_count"), u32v(num("num_hidden_layers")?));
        w.meta(k("attention.head_count"), u32v(heads));
        w.meta(
            k("attention.layer_norm_epsilon"),
            MetaValue::F32(eps as f32),
        );
        w.meta(k("attention.causal"), MetaValue::Bool(false));
        w.meta(k("token_type_count"), u32v(opt_num("type_vocab_size", 2)?));
        Ok(())
    }

    pub fn pooling(self, p: Pooling, w: &mut GgufWriter) {
        w.meta(
            format!("{}.pooling_type", self.name()),
            MetaValue::U32(p.id()),
        );
    }

    /// Declares every tensor the model uses under llama.cpp's name, in `w`, and returns
    /// each one's offset into the data section. Tensors the encoder does not use
    /// (`position_ids`, the pooler, masked-LM heads) are left out.
    pub fn tensors(
        self,
        path: &Path,
        st: &SafeTensors,
        w: &mut GgufWriter,
    ) -> Result<Vec<u64>, Error> {
        let mut offsets = Vec::new();
        for t in &st.tensors {
            let Some(name) = bert_name(&t.name) else {
                continue;
            };
            let ty = match t.dtype {
                Dtype::F32 => GgmlType::F32,
                Dtype::F16 => GgmlType::F16,
                Dtype::Bf16 => GgmlType::BF16,
                other => {
                    return Err(err(
                        path,
                        format!(
                            "tensor '{}': field 'dtype' is {other:?}, which superinfer does not \
                             read (supported: F32, F16, BF16)",
                            t.name
                        ),
                    ))
                }
            };
            // ggml lists dimensions contiguous first: the reverse of the row-major shape
            let dims: Vec<u64> = t.shape.iter().rev().copied().collect();
            w.declare(name, &dims, ty)
                .map_err(|e| err(path, format!("tensor '{}': {e}", t.name)))?;
            offsets.push(t.begin);
        }
        Ok(offsets)
    }
}

/// llama.cpp's name of a BERT tensor (`None`: not used).
fn bert_name(hf: &str) -> Option<String> {
    let n = hf.strip_prefix("bert.").unwrap_or(hf);
    // TensorFlow-era LayerNorm names
    let n = match (n.strip_suffix(".gamma"), n.strip_suffix(".beta")) {
        (Some(b), _) => format!("{b}.weight"),
        (_, Some(b)) => format!("{b}.bias"),
        _ => n.to_string(),
    };
    let (stem, kind) = n.rsplit_once('.')?;
    if kind != "weight" && kind != "bias" {
        return None;
    }
    let fixed = match stem {
        "embeddings.word_embeddings" => Some("token_embd"),
        "embeddings.position_embeddings" => Some("position_embd"),
        "embeddings.token_type_embeddings" => Some("token_types"),
        "embeddings.LayerNorm" => Some("token_embd_norm"),
        _ => None,
    };
    if let Some(f) = fixed {
        return Some(format!("{f}.{kind}"));
    }
    let rest = stem.strip_prefix("encoder.layer.")?;
    let (il, part) = rest.split_once('.')?;
    let il: usize = il.parse().ok()?;
    let g = match part {
        "attention.self.query" => "attn_q",
        "attention.self.key" => "attn_k",
        "attention.self.value" => "attn_v",
        "attention.output.dense" => "attn_output",
        "attention.output.LayerNorm" => "attn_output_norm",
        "intermediate.dense" => "ffn_up",
        "output.dense" => "ffn_down",
        "output.LayerNorm" => "layer_output_norm",
        _ => return None,
    };
    Some(format!("blk.{il}.{g}.{kind}"))
}

/// sentence-transformers' pipeline: the pooling (`modules.json`'s Pooling module's
/// `config.json`; mean without one), whether it normalises (a `Normalize` module) and its
/// `max_seq_length` (`sentence_bert_config.json`).
pub fn sentence_transformers(dir: &Path) -> Result<(Pooling, bool, Option<usize>), Error> {
    let modules_path = dir.join("modules.json");
    let (mut pooling, mut normalize) = (Pooling::Mean, false);
    if modules_path.is_file() {
        let modules = read_json(&modules_path)?;
        let list = modules
            .as_array()
            .ok_or_else(|| err(&modules_path, "not a list of modules"))?;
        for m in list {
            let ty = m.get("type").and_then(Value::as_str).unwrap_or("");
            if ty.ends_with(".Normalize") {
                normalize = true;
            }
            if ty.ends_with(".Pooling") {
                let sub = m.get("path").and_then(Value::as_str).unwrap_or("");
                let p = dir.join(sub).join("config.json");
                pooling = read_pooling(&p)?;
            }
        }
    }
    let sbert = dir.join("sentence_bert_config.json");
    let max_seq = if sbert.is_file() {
        read_json(&sbert)?
            .get("max_seq_length")
            .and_then(Value::as_u64)
            .map(|v| v as usize)
    } else {
        None
    };
    Ok((pooling, normalize, max_seq))
}

fn read_pooling(path: &Path) -> Result<Pooling, Error> {
    let cfg = read_json(path)?;
    let on = |f: &str| cfg.get(f).and_then(Value::as_bool).unwrap_or(false);
    for f in [
        "pooling_mode_max_tokens",
        "pooling_mode_mean_sqrt_len_tokens",
        "pooling_mode_weightedmean_tokens",
    ] {
        if on(f) {
            return Err(err(
                path,
                format!("field '{f}' is true (supported: mean, cls or last-token pooling)"),
            ));
        }
    }
    Ok(if on("pooling_mode_cls_token") {
        Pooling::Cls
    } else if on("pooling_mode_lasttoken") {
        Pooling::Last
    } else {
        Pooling::Mean
    })
}

#[cfg(test)]
mod tests {
    use super::bert_name;

    #[test]
    fn bert_names_are_llama_cpps() {
        for (hf, gguf) in [
            ("embeddings.word_embeddings.weight", "token_embd.weight"),
            ("bert.embeddings.LayerNorm.gamma", "token_embd_norm.weight"),
            ("embeddings.LayerNorm.bias", "token_embd_norm.bias"),
            (
                "encoder.layer.3.attention.self.key.bias",
                "blk.3.attn_k.bias",
            ),
            (
                "encoder.layer.0.attention.output.LayerNorm.weight",
                "blk.0.attn_output_norm.weight",
            ),
            (
                "encoder.layer.5.output.dense.weight",
                "blk.5.ffn_down.weight",
            ),
            (
                "encoder.layer.5.output.LayerNorm.bias",
                "blk.5.layer_output_norm.bias",
            ),
            (
                "encoder.layer.1.intermediate.dense.weight",
                "blk.1.ffn_up.weight",
            ),
        ] {
            assert_eq!(bert_name(hf).as_deref(), Some(gguf), "{hf}");
        }
        for skipped in [
            "embeddings.position_ids",
            "pooler.dense.weight",
            "cls.predictions.bias",
        ] {
            assert_eq!(bert_name(skipped), None, "{skipped}");
        }
    }
}

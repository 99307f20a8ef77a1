//! A WordPiece tokenizer from `tokenizer.json` (else `vocab.txt` and
//! `tokenizer_config.json`) as llama.cpp's converter writes it into GGUF
//! (`tokenizer.ggml.model = bert`): every token but the special ones takes the phantom
//! space (`▁word` starts a word, `##piece` becomes `piece`), which core's WPM tokenizer reads.

use std::path::Path;

use serde_json::Value;
use superinfer_core::gguf::{GgufWriter, MetaValue};

use super::{err, read_json};
use crate::Error;

/// llama.cpp's token types: normal and control.
const NORMAL: i32 = 1;
const CONTROL: i32 = 3;

/// Writes the tokenizer's metadata into `w`.
pub fn metadata(dir: &Path, w: &mut GgufWriter) -> Result<(), Error> {
    let json_path = dir.join("tokenizer.json");
    let config_path = dir.join("tokenizer_config.json");
    let config = match config_path.is_file() {
        true => Some(read_json(&config_path)?),
        false => None,
    };
    let (tokens, special, lowercase, strip_accents) = if json_path.is_file() {
        from_tokenizer_json(&json_path)?
    } else {
        let vocab_path = dir.join("vocab.txt");
        if !vocab_path.is_file() {
            return Err(err(
                &json_path,
                "missing, and so is vocab.txt: the directory has no tokenizer",
            ));
        }
        let text = std::fs::read_to_string(&vocab_path)
            .map_err(|e| err(&vocab_path, format!("cannot read it ({e})")))?;
        let tokens: Vec<String> = text.lines().map(str::to_string).collect();
        let lower = config
            .as_ref()
            .and_then(|c| c.get("do_lower_case"))
            .and_then(Value::as_bool)
            .unwrap_or(true);
        let strip = config
            .as_ref()
            .and_then(|c| c.get("strip_accents"))
            .and_then(Value::as_bool)
            .unwrap_or(lower);
        let special = tokens
            .iter()
            .map(|t| matches!(t.as_str(), "[PAD]" | "[UNK]" | "[CLS]" | "[SEP]" | "[MASK]"))
            .collect();
        (tokens, special, lower, strip)
    };
    let find = |field: &str, default: &str| -> Option<u32> {
        let text = config
            .as_ref()
            .and_then(|c| c.get(field))
            .and_then(|v| {
                v.as_str()
                    .or_else(|| v.get("content").and_then(Value::as_str))
            })
            .unwrap_or(default);
        tokens.iter().position(|t| t == text).map(|i| i as u32)
    };
    let ids = [
        ("bos", find("cls_token", "[CLS]")),
        ("seperator", find("sep_token", "[SEP]")),
        ("unknown", find("unk_token", "[UNK]")),
        ("padding", find("pad_token", "[PAD]")),
        ("cls", find("cls_token", "[CLS]")),
        ("mask", find("mask_token", "[MASK]")),
    ];
    let types: Vec<i32> = special
        .iter()
        .map(|&s| if s { CONTROL } else { NORMAL })
        .collect();
    let phantom: Vec<String> = tokens
        .iter()
        .zip(&special)
        .map(|(t, &s)| match (s, t.strip_prefix("##")) {
            (true, _) => t.clone(),
            (false, Some(piece)) => piece.to_string(),
            (false, None) => format!("\u{2581}{t}"),
        })
        .collect();
    w.meta("tokenizer.ggml.model", MetaValue::String("bert".into()));
    w.meta("tokenizer.ggml.tokens", MetaValue::strings(phantom));
    w.meta("tokenizer.ggml.token_type", MetaValue::i32s(types));
    for (name, id) in ids {
        if let Some(id) = id {
            w.meta(
                format!("tokenizer.ggml.{name}_token_id"),
                MetaValue::U32(id),
            );
        }
    }
    w.meta("tokenizer.ggml.add_bos_token", MetaValue::Bool(true));
    w.meta("tokenizer.ggml.add_eos_token", MetaValue::Bool(false));
    w.meta(
        "tokenizer.ggml.normalizer.lowercase",
        MetaValue::Bool(lowercase),
    );
    w.meta(
        "tokenizer.ggml.normalizer.strip_accents",
        MetaValue::Bool(strip_accents),
    );
    // ids as the `tokenizers` package gives them (Hangul, spacing marks)
    w.meta(
        superinfer_core::gguf::keys::TOKENIZER_HF_BERT_NORMALIZER,
        MetaValue::Bool(true),
    );
    Ok(())
}

/// The vocabulary by id, which tokens are special, lowercasing and accent stripping.
fn from_tokenizer_json(path: &Path) -> Result<(Vec<String>, Vec<bool>, bool, bool), Error> {
    let t = read_json(path)?;
    let model = t
        .get("model")
        .ok_or_else(|| err(path, "field 'model' is missing"))?;
    let ty = model.get("type").and_then(Value::as_str).unwrap_or("");
    if ty != "WordPiece" {
        return Err(err(
            path,
            format!("field 'model.type' is '{ty}' (supported here: WordPiece, for bert)"),
        ));
    }
    let vocab = model
        .get("vocab")
        .and_then(Value::as_object)
        .ok_or_else(|| err(path, "field 'model.vocab' is missing or not an object"))?;
    let mut tokens: Vec<Option<String>> = vec![None; vocab.len()];
    for (tok, id) in vocab {
        let id = id
            .as_u64()
            .map(|i| i as usize)
            .filter(|&i| i < vocab.len())
            .ok_or_else(|| {
                err(
                    path,
                    format!(
                        "field 'model.vocab': token '{tok}' has id {id}, outside 0..{}",
                        vocab.len()
                    ),
                )
            })?;
        if tokens[id].replace(tok.clone()).is_some() {
            return Err(err(
                path,
                format!("field 'model.vocab': id {id} is given twice"),
            ));
        }
    }
    let tokens: Vec<String> = tokens
        .into_iter()
        .enumerate()
        .map(|(i, t)| t.unwrap_or_else(|| format!("[PAD{i}]")))
        .collect();
    let mut special = vec![false; tokens.len()];
    if let Some(added) = t.get("added_tokens").and_then(Value::as_array) {
        for a in added {
            let id = a.get("id").and_then(Value::as_u64).map(|i| i as usize);
            let is_special = a.get("special").and_then(Value::as_bool).unwrap_or(false);
            if let Some(s) = id.and_then(|i| special.get_mut(i)) {
                *s = is_special;
            }
        }
    }
    let (lowercase, strip) = match t.get("normalizer") {
        None | Some(Value::Null) => (false, None),
        Some(n) => {
            let nty = n.get("type").and_then(Value::as_str).unwrap_or("");
            if nty != "BertNormalizer" {
                return Err(err(
                    path,
                    format!("field 'normalizer.type' is '{nty}' (supported: BertNormalizer)"),
                ));
            }
            (
                n.get("lowercase").and_then(Value::as_bool).unwrap_or(true),
                n.get("strip_accents").and_then(Value::as_bool),
            )
        }
    };
    Ok((tokens, special, lowercase, strip.unwrap_or(lowercase)))
}

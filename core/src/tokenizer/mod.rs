//! Tokenizers built from GGUF metadata, token-for-token as llama.cpp: SentencePiece-style
//! (`tokenizer.ggml.model = "llama"`), BPE (`"gpt2"`, byte-level, with the pre-tokenizer named
//! by `tokenizer.ggml.pre`; `"gemma4"`, SentencePiece-style BPE over raw UTF-8), BERT's
//! WordPiece (`"bert"`), special-token partitioning, BOS/EOS flags and a streaming detokenizer.
//! Only the metadata is read: a vocab-only GGUF file is enough.

mod bpe;
mod kimi;
mod merge;
mod pre;
mod pre_table;
mod pretokenize;
mod regex;
mod spacing_marks;
mod special;
mod spm;
mod stream;
mod ugm;
mod unicode;
mod unicode_data;
mod unicode_tables;
mod vocab;
mod wpm;

#[cfg(test)]
mod tests;

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::gguf::{keys, GgufFile, Value};
pub use pre::{flags as pre_flags, names as pre_names, PreTokenizer};
pub use pretokenize::Pattern;
pub use special::Fragment;
pub use stream::StreamDecoder;
pub use vocab::{TokenType, Vocab};

/// U+2581, SentencePiece's visible space.
const SPM_SPACE: &str = "\u{2581}";

/// Token texts that end generation (llama.cpp adds these to the EOG set and marks them
/// as control tokens).
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "<|end_of_text|>",
    "<end_of_utterance>",
];

#[derive(Clone)]
enum Model {
    Spm {
        add_space_prefix: bool,
        byte_tokens: alloc::boxed::Box<[Option<u32>; 256]>,
    },
    Bpe {
        merges: bpe::Merges,
        pre: PreTokenizer,
        ignore_merges: bool,
        /// `<0xXX>` byte tokens, for BPE over raw UTF-8 (gemma4)
        byte_tokens: alloc::boxed::Box<[Option<u32>; 256]>,
    },
    Wpm(wpm::Wpm),
    Ugm(ugm::Ugm),
}

/// The `tokenizer.ggml.model` values this crate runs.
pub const SUPPORTED_MODELS: &[&str] = &["llama", "gpt2", "gemma4", "bert", "t5"];

#[derive(Clone)]
pub struct Tokenizer {
    vocab: Vocab,
    model: Model,
    specials: Vec<u32>,
    bos: Option<u32>,
    eos: Option<u32>,
    /// BERT's separator, appended after the text when special tokens are added
    sep: Option<u32>,
    add_bos: bool,
    add_eos: bool,
    /// Sorted end-of-generation ids.
    eog: Vec<u32>,
    /// Decoded bytes of every token (`piece_spans` into `pieces`).
    pieces: Vec<u8>,
    piece_spans: Vec<(u32, u32)>,
}

impl Tokenizer {
    pub fn from_gguf(f: &GgufFile<'_>) -> Result<Tokenizer> {
        let model_name = f.require_str(keys::TOKENIZER_MODEL)?;
        let mut vocab = Vocab::from_gguf(f)?;
        let n = vocab.len() as u64;
        let id = |key: &str| -> Result<Option<u32>> {
            Ok(f.get_u64(key)?.filter(|&v| v < n).map(|v| v as u32))
        };
        let byte_tokens = |vocab: &Vocab| {
            alloc::boxed::Box::new(core::array::from_fn(|b| {
                vocab
                    .find_str(&alloc::format!("<0x{b:02X}>"))
                    .or_else(|| vocab.find(&[b as u8]))
            }))
        };
        let (model, default_add_bos, default_ids) = match model_name {
            "llama" => {
                let add_space_prefix = f
                    .get_bool(keys::TOKENIZER_ADD_SPACE_PREFIX)?
                    .unwrap_or(true);
                (
                    Model::Spm {
                        add_space_prefix,
                        byte_tokens: byte_tokens(&vocab),
                    },
                    true,
                    (Some(1), Some(2)),
                )
            }
            "gpt2" | "gemma4" => {
                let pre_name = if model_name == "gemma4" {
                    "gemma4"
                } else {
                    f.get_str(keys::TOKENIZER_PRE)?.unwrap_or("default")
                };
                let pre = PreTokenizer::from_pre(pre_name).map_err(Error::Tokenizer)?;
                let merges_arr = f.require_array(keys::TOKENIZER_MERGES)?;
                let merges = bpe::Merges::new(
                    &vocab,
                    merges_arr.iter().map(|v| match v {
                        Value::String(s) => s,
                        _ => &[][..],
                    }),
                )?;
                // llama.cpp: gpt2's default BOS/EOS is 11; gemma4 has none; some names drop BOS
                let defaults = if model_name == "gemma4" {
                    (None, None)
                } else {
                    (
                        Some(11).filter(|&i| (i as u64) < n),
                        Some(11).filter(|&i| (i as u64) < n),
                    )
                };
                (
                    Model::Bpe {
                        merges,
                        ignore_merges: pre.has(pre_flags::IGNORE_MERGES),
                        // llama.cpp looks up `<0xXX>` only here (no raw-byte fallback)
                        byte_tokens: alloc::boxed::Box::new(core::array::from_fn(|b| {
                            vocab.find_str(&alloc::format!("<0x{b:02X}>"))
                        })),
                        pre,
                    },
                    // gemma4's BOS is always added (llama.cpp overrides the file's flag)
                    model_name == "gemma4",
                    defaults,
                )
            }
            "bert" => {
                let lowercase = f
                    .get_bool(keys::TOKENIZER_NORMALIZER_LOWERCASE)?
                    .unwrap_or(true);
                let strip_accents = f
                    .get_bool(keys::TOKENIZER_NORMALIZER_STRIP_ACCENTS)?
                    .unwrap_or(lowercase);
                let unk = match id(keys::TOKENIZER_UNK_ID)? {
                    Some(u) => Some(u),
                    None => Some(100).filter(|&i| (i as u64) < n),
                };
                (
                    Model::Wpm(
                        wpm::Wpm::new(&vocab, unk, lowercase, strip_accents).hf(f
                            .get_bool(keys::TOKENIZER_HF_BERT_NORMALIZER)?
                            .unwrap_or(false)),
                    ),
                    true,
                    (Some(101).filter(|&i| (i as u64) < n), None),
                )
            }
            "t5" => {
                let charsmap: Vec<u8> = match f.get_array(keys::TOKENIZER_PRECOMPILED_CHARSMAP)? {
                    Some(a) => a.iter().map(|v| v.as_i64().unwrap_or(0) as u8).collect(),
                    None => Vec::new(),
                };
                let unk = match id(keys::TOKENIZER_UNK_ID)? {
                    Some(u) => Some(u),
                    None => Some(2).filter(|&i| (i as u64) < n),
                };
                let add_space_prefix = f
                    .get_bool(keys::TOKENIZER_ADD_SPACE_PREFIX)?
                    .unwrap_or(false);
                let remove_extra = f
                    .get_bool(keys::TOKENIZER_REMOVE_EXTRA_WHITESPACES)?
                    .unwrap_or(false);
                (
                    Model::Ugm(ugm::Ugm::new(
                        &vocab,
                        &charsmap,
                        unk,
                        add_space_prefix,
                        remove_extra,
                    )?),
                    false,
                    (None, Some(1).filter(|&i| (i as u64) < n)),
                )
            }
            other => {
                return Err(Error::Tokenizer(alloc::format!(
                    "unsupported tokenizer model '{other}' (tokenizer.ggml.model); supported: {}",
                    SUPPORTED_MODELS.join(", ")
                )))
            }
        };
        let bos = if f.get(keys::TOKENIZER_BOS_ID).is_some() {
            id(keys::TOKENIZER_BOS_ID)?
        } else {
            default_ids.0
        };
        let bos = match &model {
            Model::Bpe { pre, .. } if pre.has(pre_flags::NO_BOS) => None,
            _ => bos,
        };
        let sep = id(keys::TOKENIZER_SEP_ID)?.or(match &model {
            Model::Wpm(_) => Some(102).filter(|&i| (i as u64) < n),
            _ => None,
        });
        let default_add_bos = match &model {
            Model::Bpe { pre, .. } => default_add_bos || pre.has(pre_flags::ADD_BOS),
            _ => default_add_bos,
        };
        let eos = if f.get(keys::TOKENIZER_EOS_ID).is_some() {
            id(keys::TOKENIZER_EOS_ID)?
        } else {
            default_ids.1
        };

        let mut eog: Vec<u32> = [
            eos,
            id(keys::TOKENIZER_EOT_ID)?,
            id(keys::TOKENIZER_EOM_ID)?,
        ]
        .into_iter()
        .flatten()
        .collect();
        for t in EOG_TEXTS {
            if let Some(i) = vocab.find_str(t) {
                eog.push(i);
                vocab.types[i as usize] = TokenType::Control;
            }
        }
        eog.sort_unstable();
        eog.dedup();
        harmony_tokens(&mut vocab, &mut eog);

        let add_bos = f
            .get_bool(keys::TOKENIZER_ADD_BOS)?
            .unwrap_or(default_add_bos)
            || model_name == "gemma4";
        let mut tok = Tokenizer {
            specials: special::special_tokens(&vocab),
            bos,
            eos,
            sep,
            add_bos,
            add_eos: f
                .get_bool(keys::TOKENIZER_ADD_EOS)?
                .unwrap_or(matches!(model, Model::Ugm(_))),
            eog,
            vocab,
            model,
            pieces: Vec::new(),
            piece_spans: Vec::new(),
        };
        tok.build_pieces();
        Ok(tok)
    }

    fn build_pieces(&mut self) {
        let map = bpe::ByteMap::new();
        let mut pieces = Vec::new();
        let mut spans = Vec::with_capacity(self.vocab.len());
        for id in 0..self.vocab.len() as u32 {
            let start = pieces.len();
            let text = self.vocab.text(id);
            match (self.vocab.token_type(id), &self.model) {
                (TokenType::Control | TokenType::Unknown | TokenType::UserDefined, _) => {
                    pieces.extend_from_slice(text)
                }
                (
                    TokenType::Normal | TokenType::Undefined,
                    Model::Spm { .. } | Model::Wpm(_) | Model::Ugm(_),
                ) => {
                    let s = String::from_utf8_lossy(text).replace(SPM_SPACE, " ");
                    pieces.extend_from_slice(s.as_bytes());
                }
                (TokenType::Normal | TokenType::Undefined, Model::Bpe { pre, .. })
                    if !pre.byte_encode() =>
                {
                    let s = String::from_utf8_lossy(text).replace(SPM_SPACE, " ");
                    pieces.extend_from_slice(s.as_bytes());
                }
                (TokenType::Byte, Model::Spm { .. } | Model::Wpm(_) | Model::Ugm(_)) => {
                    pieces.extend(parse_byte_token(text))
                }
                (TokenType::Byte, Model::Bpe { pre, .. }) if !pre.byte_encode() => {
                    pieces.extend(parse_byte_token(text))
                }
                (TokenType::Normal | TokenType::Undefined | TokenType::Byte, Model::Bpe { .. }) => {
                    match core::str::from_utf8(text) {
                        Ok(s) => pieces.extend(s.chars().filter_map(|c| map.decode_char(c))),
                        Err(_) => pieces.extend_from_slice(text),
                    }
                }
                (TokenType::Unused, _) => {}
            }
            spans.push((start as u32, (pieces.len() - start) as u32));
        }
        self.pieces = pieces;
        self.piece_spans = spans;
    }

    /// `llama_tokenize(text, add_special, parse_special)`.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        if add_special && self.add_bos {
            out.push(self.bos.ok_or_else(|| {
                Error::Tokenizer("the model asks for BOS but has no BOS token".into())
            })?);
        }
        let frags = special::partition(&self.vocab, &self.specials, text, parse_special);
        match &self.model {
            Model::Spm {
                add_space_prefix,
                byte_tokens,
            } => {
                let mut prev_special = true;
                let mut buf = String::new();
                for f in frags {
                    match f {
                        Fragment::Token(id) => {
                            out.push(id);
                            prev_special = true;
                        }
                        Fragment::Text(a, b) => {
                            buf.clear();
                            if *add_space_prefix && prev_special {
                                buf.push(' ');
                            }
                            buf.push_str(&text[a..b]);
                            let escaped = buf.replace(' ', SPM_SPACE);
                            spm::tokenize(&self.vocab, byte_tokens, escaped.as_bytes(), &mut out);
                            prev_special = false;
                        }
                    }
                }
            }
            Model::Bpe {
                merges,
                pre,
                ignore_merges,
                byte_tokens,
            } => {
                let map = bpe::ByteMap::new();
                let mut word = String::new();
                let gemma4 = pre.name() == "gemma4" || pre.name() == "granite-embed-multi-311m";
                for f in frags {
                    match f {
                        Fragment::Token(id) => out.push(id),
                        Fragment::Text(a, b) => {
                            let escaped;
                            let part = if pre.has(pre_flags::ESCAPE_WHITESPACE) {
                                escaped = text[a..b].replace(' ', SPM_SPACE);
                                escaped.as_str()
                            } else {
                                &text[a..b]
                            };
                            for (s, e) in pre.split(part) {
                                let w = &part[s..e];
                                // llama.cpp's fix for gemma 4: a run of newlines that is a token
                                if gemma4 && w.bytes().all(|b| b == b'\n') {
                                    if let Some(id) = self.vocab.find_str(w) {
                                        out.push(id);
                                        continue;
                                    }
                                }
                                let bytes = if pre.byte_encode() {
                                    word.clear();
                                    map.encode(w.as_bytes(), &mut word);
                                    None
                                } else {
                                    Some(&**byte_tokens)
                                };
                                let w = if pre.byte_encode() { word.as_str() } else { w };
                                bpe::tokenize_word(
                                    &self.vocab,
                                    merges,
                                    w,
                                    *ignore_merges,
                                    bytes,
                                    &mut out,
                                );
                            }
                        }
                    }
                }
            }
            Model::Ugm(ugm) => {
                for f in frags {
                    match f {
                        Fragment::Token(id) => out.push(id),
                        Fragment::Text(a, b) => ugm.tokenize(&self.vocab, &text[a..b], &mut out),
                    }
                }
            }
            Model::Wpm(wpm) => {
                for f in frags {
                    match f {
                        Fragment::Token(id) => out.push(id),
                        Fragment::Text(a, b) => wpm.tokenize(&self.vocab, &text[a..b], &mut out),
                    }
                }
                if add_special {
                    out.extend(self.sep);
                }
            }
        }
        if add_special && self.add_eos {
            out.extend(self.eos);
        }
        Ok(out)
    }

    /// The tokens of a prompt text as every frontend encodes it: special tokens written in
    /// the text are parsed, and BOS is added when the model wants one and the text does not
    /// already begin with it (a rendered chat template often does).
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<u32>> {
        let starts_with_bos = self.bos.is_some_and(|b| {
            let bos = self.vocab.text(b);
            !bos.is_empty() && text.as_bytes().starts_with(bos)
        });
        self.encode(text, !starts_with_bos, true)
    }

    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    /// Bytes of the longest piece a token decodes to (control tokens' text included).
    pub fn max_piece_len(&self) -> usize {
        self.piece_spans
            .iter()
            .map(|&(_, len)| len as usize)
            .max()
            .unwrap_or(0)
    }

    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    /// Does this token end generation?
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    /// The tokens that end generation, in ascending order.
    pub fn eog_tokens(&self) -> &[u32] {
        &self.eog
    }

    pub fn is_control(&self, id: u32) -> bool {
        self.vocab.token_type(id) == TokenType::Control
    }

    /// The bytes a token stands for (`llama_token_to_piece`); control tokens are empty
    /// unless `special`.
    pub fn token_to_piece(&self, id: u32, special: bool) -> &[u8] {
        if !special
            && matches!(
                self.vocab.token_type(id),
                TokenType::Control | TokenType::Unknown
            )
        {
            return &[];
        }
        match self.piece_spans.get(id as usize) {
            Some(&(o, l)) => &self.pieces[o as usize..(o + l) as usize],
            None => &[],
        }
    }

    /// Raw vocabulary text of a token (lossy UTF-8).
    pub fn token_text(&self, id: u32) -> String {
        self.vocab.text_lossy(id)
    }

    /// Concatenated pieces as (lossy) UTF-8.
    pub fn decode(&self, ids: &[u32], special: bool) -> String {
        let mut bytes = Vec::new();
        for &id in ids {
            bytes.extend_from_slice(self.token_to_piece(id, special));
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// gpt-oss's Harmony tokens, as llama.cpp's `llama_vocab::impl::load` treats them: its
/// structure markers are user-defined (rendered in the output, so the server can split the
/// channels), and `<|end|>`, which ends a message but not the answer, is no end of generation
/// where `<|return|>` and `<|call|>` are.
fn harmony_tokens(vocab: &mut Vocab, eog: &mut Vec<u32>) {
    for t in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
        if let Some(i) = vocab.find_str(t) {
            vocab.types[i as usize] = TokenType::UserDefined;
        }
    }
    let in_eog = |vocab: &Vocab, t: &str| vocab.find_str(t).filter(|i| eog.contains(i));
    if let (Some(_), Some(_), Some(end)) = (
        in_eog(vocab, "<|return|>"),
        in_eog(vocab, "<|call|>"),
        in_eog(vocab, "<|end|>"),
    ) {
        eog.retain(|&i| i != end);
        vocab.types[end as usize] = TokenType::UserDefined;
    }
}

/// Byte ranges of `text`'s pre-tokenized words under a hand-written `pattern` (what byte-level
/// BPE merges independently); `PreTokenizer::split` runs any llama.cpp pre-tokenizer.
pub fn pretokenize(text: &str, pattern: Pattern) -> Vec<(usize, usize)> {
    pretokenize::split(text, pattern)
}

/// `<0xAB>` → 0xAB
fn parse_byte_token(text: &[u8]) -> Option<u8> {
    let s = core::str::from_utf8(text).ok()?;
    let hex = s.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

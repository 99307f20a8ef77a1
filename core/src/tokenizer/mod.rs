//! Tokenizers built from GGUF metadata, token-for-token as llama.cpp: SentencePiece-style
//! (`tokenizer.ggml.model = "llama"`) and byte-level BPE (`"gpt2"`, with the pre-tokenizer
//! named by `tokenizer.ggml.pre`), special-token partitioning, BOS/EOS flags and a streaming
//! detokenizer.

mod bpe;
mod merge;
mod pretokenize;
mod special;
mod spm;
mod stream;
mod unicode;
mod unicode_tables;
mod vocab;

#[cfg(test)]
mod tests;

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::gguf::{keys, GgufFile, Value};
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

enum Model {
    Spm {
        add_space_prefix: bool,
        byte_tokens: alloc::boxed::Box<[Option<u32>; 256]>,
    },
    Bpe {
        merges: bpe::Merges,
        pattern: Pattern,
        ignore_merges: bool,
    },
}

pub struct Tokenizer {
    vocab: Vocab,
    model: Model,
    specials: Vec<u32>,
    bos: Option<u32>,
    eos: Option<u32>,
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
        let (model, default_add_bos, default_ids) = match model_name {
            "llama" => {
                let add_space_prefix = f
                    .get_bool(keys::TOKENIZER_ADD_SPACE_PREFIX)?
                    .unwrap_or(true);
                let byte_tokens = alloc::boxed::Box::new(core::array::from_fn(|b| {
                    vocab
                        .find_str(&alloc::format!("<0x{b:02X}>"))
                        .or_else(|| vocab.find(&[b as u8]))
                }));
                (
                    Model::Spm {
                        add_space_prefix,
                        byte_tokens,
                    },
                    true,
                    (Some(1), Some(2)),
                )
            }
            "gpt2" => {
                let pre = f.get_str(keys::TOKENIZER_PRE)?.unwrap_or("default");
                let pattern = Pattern::from_pre(pre).ok_or_else(|| {
                    Error::Tokenizer(alloc::format!("unknown pre-tokenizer '{pre}'"))
                })?;
                let merges_arr = f.require_array(keys::TOKENIZER_MERGES)?;
                let merges = bpe::Merges::new(
                    &vocab,
                    merges_arr.iter().map(|v| match v {
                        Value::String(s) => s,
                        _ => &[][..],
                    }),
                )?;
                (
                    Model::Bpe {
                        merges,
                        pattern,
                        ignore_merges: pattern == Pattern::Llama3,
                    },
                    false,
                    (None, None),
                )
            }
            other => {
                return Err(Error::Tokenizer(alloc::format!(
                    "unsupported tokenizer model '{other}'"
                )))
            }
        };
        let bos = if f.get(keys::TOKENIZER_BOS_ID).is_some() {
            id(keys::TOKENIZER_BOS_ID)?
        } else {
            default_ids.0
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

        let mut tok = Tokenizer {
            specials: special::special_tokens(&vocab),
            bos,
            eos,
            add_bos: f
                .get_bool(keys::TOKENIZER_ADD_BOS)?
                .unwrap_or(default_add_bos),
            add_eos: f.get_bool(keys::TOKENIZER_ADD_EOS)?.unwrap_or(false),
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
                (TokenType::Normal | TokenType::Undefined, Model::Spm { .. }) => {
                    let s = String::from_utf8_lossy(text).replace(SPM_SPACE, " ");
                    pieces.extend_from_slice(s.as_bytes());
                }
                (TokenType::Byte, Model::Spm { .. }) => pieces.extend(parse_byte_token(text)),
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
                pattern,
                ignore_merges,
            } => {
                let map = bpe::ByteMap::new();
                let mut word = String::new();
                for f in frags {
                    match f {
                        Fragment::Token(id) => out.push(id),
                        Fragment::Text(a, b) => {
                            let part = &text[a..b];
                            for (s, e) in pretokenize::split(part, *pattern) {
                                word.clear();
                                map.encode(&part.as_bytes()[s..e], &mut word);
                                bpe::tokenize_word(
                                    &self.vocab,
                                    merges,
                                    &word,
                                    *ignore_merges,
                                    &mut out,
                                );
                            }
                        }
                    }
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

/// Byte ranges of `text`'s pre-tokenized words under `pattern` (what byte-level BPE merges
/// independently).
pub fn pretokenize(text: &str, pattern: Pattern) -> Vec<(usize, usize)> {
    pretokenize::split(text, pattern)
}

/// `<0xAB>` → 0xAB
fn parse_byte_token(text: &[u8]) -> Option<u8> {
    let s = core::str::from_utf8(text).ok()?;
    let hex = s.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

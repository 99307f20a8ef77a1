//! The vocabulary: token texts in one arena, their types and scores, and an open-addressing
//! hash index for text → id lookups (no hash map in `alloc`).

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::gguf::{keys, GgufFile};

/// llama.cpp token types (tokenizer.ggml.token_type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum TokenType {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
}

impl TokenType {
    fn from_i64(v: i64) -> TokenType {
        match v {
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Undefined,
        }
    }
}

#[derive(Clone)]
pub struct Vocab {
    arena: Vec<u8>,
    spans: Vec<(u32, u32)>,
    pub types: Vec<TokenType>,
    pub scores: Vec<f32>,
    /// Hash index: `id + 1` per slot (0: empty), a power of two of at least twice as many
    /// slots as tokens, linear probing; for duplicate texts only the highest id is kept (as
    /// llama.cpp's map, where later entries overwrite earlier ones).
    index: Vec<u32>,
}

/// FNV-1a over the bytes, then a multiply to spread the low bits the mask keeps.
fn hash(text: &[u8]) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in text {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize
}

impl Vocab {
    pub fn from_gguf(f: &GgufFile<'_>) -> Result<Vocab> {
        let tokens = f.require_array(keys::TOKENIZER_TOKENS)?;
        let n = tokens.len();
        if n == 0 || n > u32::MAX as usize / 2 {
            return Err(Error::Tokenizer(alloc::format!("vocabulary of {n} tokens")));
        }
        let mut arena = Vec::new();
        let mut spans = Vec::with_capacity(n);
        for t in tokens.iter() {
            let crate::gguf::Value::String(s) = t else {
                return Err(Error::WrongType {
                    key: keys::TOKENIZER_TOKENS.into(),
                    expected: "array of strings",
                });
            };
            spans.push((arena.len() as u32, s.len() as u32));
            arena.extend_from_slice(s);
        }
        let types = match f.get_array(keys::TOKENIZER_TOKEN_TYPE)? {
            Some(a) if a.len() == n => a
                .iter()
                .map(|v| TokenType::from_i64(v.as_i64().unwrap_or(1)))
                .collect(),
            Some(a) => return Err(length_err(keys::TOKENIZER_TOKEN_TYPE, a.len(), n)),
            None => alloc::vec![TokenType::Normal; n],
        };
        let scores = match f.get_array(keys::TOKENIZER_SCORES)? {
            Some(a) if a.len() == n => a.iter().map(|v| v.as_f64().unwrap_or(0.0) as f32).collect(),
            Some(a) => return Err(length_err(keys::TOKENIZER_SCORES, a.len(), n)),
            None => alloc::vec![0.0; n],
        };
        Ok(Self::build(arena, spans, types, scores))
    }

    fn build(
        arena: Vec<u8>,
        spans: Vec<(u32, u32)>,
        types: Vec<TokenType>,
        scores: Vec<f32>,
    ) -> Vocab {
        let mut v = Vocab {
            arena,
            spans,
            types,
            scores,
            index: Vec::new(),
        };
        let slots = (v.spans.len() * 2).next_power_of_two().max(16);
        let mut index = alloc::vec![0u32; slots];
        for id in 0..v.spans.len() as u32 {
            let text = v.text(id);
            let mut i = hash(text) & (slots - 1);
            loop {
                match index[i] {
                    0 => {
                        index[i] = id + 1;
                        break;
                    }
                    // a later duplicate replaces the earlier id
                    e if v.text(e - 1) == text => {
                        index[i] = id + 1;
                        break;
                    }
                    _ => i = (i + 1) & (slots - 1),
                }
            }
        }
        v.index = index;
        v
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Raw text of a token (empty for an out-of-range id).
    pub fn text(&self, id: u32) -> &[u8] {
        match self.spans.get(id as usize) {
            Some(&(o, l)) => &self.arena[o as usize..(o + l) as usize],
            None => &[],
        }
    }

    pub fn token_type(&self, id: u32) -> TokenType {
        self.types
            .get(id as usize)
            .copied()
            .unwrap_or(TokenType::Undefined)
    }

    pub fn score(&self, id: u32) -> f32 {
        self.scores.get(id as usize).copied().unwrap_or(0.0)
    }

    /// The id of the token whose text is exactly `text`.
    pub fn find(&self, text: &[u8]) -> Option<u32> {
        let mask = self.index.len() - 1;
        let mut i = hash(text) & mask;
        loop {
            match self.index[i] {
                0 => return None,
                e if self.text(e - 1) == text => return Some(e - 1),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Every id with one of the given texts.
    pub fn find_str(&self, text: &str) -> Option<u32> {
        self.find(text.as_bytes())
    }

    pub fn text_lossy(&self, id: u32) -> String {
        String::from_utf8_lossy(self.text(id)).into_owned()
    }
}

fn length_err(key: &str, got: usize, want: usize) -> Error {
    Error::Tokenizer(alloc::format!("{key} has {got} entries for {want} tokens"))
}

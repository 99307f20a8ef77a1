//! Byte-level BPE as llama.cpp's `llm_tokenizer_bpe`: each pre-tokenized word is spelled
//! with GPT-2's byte→character mapping, split into characters, and the adjacent pair with
//! the lowest merge rank is merged until no ranked pair remains.

use alloc::string::String;
use alloc::vec::Vec;
use core::cmp::Reverse;

use super::merge::merge_pairs;
use super::vocab::Vocab;
use crate::error::{Error, Result};

/// GPT-2's reversible byte ↔ printable-character mapping.
pub struct ByteMap {
    to_char: [char; 256],
}

impl ByteMap {
    pub fn new() -> ByteMap {
        let printable = |b: u32| {
            (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b)
        };
        let mut to_char = ['\0'; 256];
        let mut n = 0;
        for b in 0..256u32 {
            to_char[b as usize] = if printable(b) {
                char::from_u32(b).unwrap_or('\0')
            } else {
                n += 1;
                char::from_u32(255 + n).unwrap_or('\0')
            };
        }
        ByteMap { to_char }
    }

    pub fn encode(&self, bytes: &[u8], out: &mut String) {
        out.extend(bytes.iter().map(|&b| self.to_char[b as usize]));
    }

    /// The byte a mapped character stands for.
    pub fn decode_char(&self, c: char) -> Option<u8> {
        let c = c as u32;
        let printable =
            (0x21..=0x7E).contains(&c) || (0xA1..=0xAC).contains(&c) || (0xAE..=0xFF).contains(&c);
        if printable {
            return Some(c as u8);
        }
        (0..256)
            .find(|&b| self.to_char[b] as u32 == c)
            .map(|b| b as u8)
    }
}

impl Default for ByteMap {
    fn default() -> Self {
        Self::new()
    }
}

/// Merge ranks keyed by the (left, right) token ids, sorted for binary search.
#[derive(Clone)]
pub struct Merges {
    ranks: Vec<((u32, u32), u32)>,
}

impl Merges {
    /// Parses `"left right"` merge strings; merges whose halves are not tokens can never
    /// apply and are skipped.
    pub fn new<'a>(vocab: &Vocab, merges: impl Iterator<Item = &'a [u8]>) -> Result<Merges> {
        let mut ranks = Vec::new();
        for (rank, m) in merges.enumerate() {
            // split at the first space after the first byte (a half may itself be a space)
            let Some(pos) = m.iter().skip(1).position(|&b| b == b' ').map(|p| p + 1) else {
                return Err(Error::Tokenizer(alloc::format!(
                    "merge {rank} has no separating space"
                )));
            };
            if let (Some(l), Some(r)) = (vocab.find(&m[..pos]), vocab.find(&m[pos + 1..])) {
                ranks.push(((l, r), rank as u32));
            }
        }
        ranks.sort_unstable();
        ranks.dedup_by_key(|e| e.0);
        Ok(Merges { ranks })
    }

    fn rank(&self, l: u32, r: u32) -> Option<u32> {
        self.ranks
            .binary_search_by(|e| e.0.cmp(&(l, r)))
            .ok()
            .map(|i| self.ranks[i].1)
    }
}

/// Tokenizes one word (byte-mapped, or raw UTF-8 with `byte_tokens` for the `<0xXX>` tokens
/// of its bytes that have no token) and appends its ids.
pub fn tokenize_word(
    vocab: &Vocab,
    merges: &Merges,
    word: &str,
    ignore_merges: bool,
    byte_tokens: Option<&[Option<u32>; 256]>,
    out: &mut Vec<u32>,
) {
    let w = word.as_bytes();
    if ignore_merges {
        if let Some(id) = vocab.find(w) {
            out.push(id);
            return;
        }
    }
    // lower rank merges first
    let priority =
        |l: &[u8], r: &[u8], _: &[u8]| Some(Reverse(merges.rank(vocab.find(l)?, vocab.find(r)?)?));
    merge_pairs(w, priority, |piece| match vocab.find(piece) {
        Some(id) => out.push(id),
        // no token for the piece: its single bytes, where they are tokens
        None => match byte_tokens {
            Some(t) => out.extend(piece.iter().filter_map(|&b| t[b as usize])),
            None => out.extend(piece.iter().filter_map(|&b| vocab.find(&[b]))),
        },
    });
}

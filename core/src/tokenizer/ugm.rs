//! T5-style unigram tokenization as llama.cpp's `llm_tokenizer_ugm`: the text is normalised
//! (user-defined tokens kept as they are, every other prefix through SentencePiece's precompiled
//! charsmap — a XOR-compressed double array of replacement strings —, spaces escaped as U+2581,
//! optionally merged and prefixed), then the highest-scoring segmentation into normal,
//! user-defined and unused tokens is found by Viterbi over the bytes, code points no token
//! covers scoring as `[UNK]` with a penalty (consecutive unknowns become one).

use alloc::vec::Vec;

use super::merge::utf8_len;
use super::vocab::{TokenType, Vocab};
use crate::error::{Error, Result};

#[derive(Clone)]
pub struct Ugm {
    /// The precompiled charsmap's XCDA entries.
    xcda: Vec<u32>,
    /// Its NUL-terminated replacement strings.
    replacements: Vec<u8>,
    unk: Option<u32>,
    unknown_score: f64,
    max_len: usize,
    add_space_prefix: bool,
    remove_extra_whitespaces: bool,
}

const SPACE: &[u8] = "\u{2581}".as_bytes();

impl Ugm {
    pub fn new(
        vocab: &Vocab,
        charsmap: &[u8],
        unk: Option<u32>,
        add_space_prefix: bool,
        remove_extra_whitespaces: bool,
    ) -> Result<Ugm> {
        let (mut xcda, mut replacements) = (Vec::new(), Vec::new());
        if !charsmap.is_empty() {
            let bad =
                || Error::Tokenizer("tokenizer.ggml.precompiled_charsmap is truncated".into());
            let head: [u8; 4] = charsmap
                .get(..4)
                .ok_or_else(bad)?
                .try_into()
                .map_err(|_| bad())?;
            let size = u32::from_le_bytes(head) as usize;
            if size + 4 >= charsmap.len() {
                return Err(bad());
            }
            xcda = charsmap[4..4 + size]
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            replacements = charsmap[4 + size..].to_vec();
        }
        let min_score = (0..vocab.len() as u32)
            .filter(|&i| vocab.token_type(i) == TokenType::Normal)
            .map(|i| vocab.score(i))
            .fold(f32::MAX, f32::min);
        let max_len = (0..vocab.len() as u32)
            .map(|i| vocab.text(i).len())
            .max()
            .unwrap_or(0);
        Ok(Ugm {
            xcda,
            replacements,
            unk,
            unknown_score: min_score as f64 - 10.0,
            max_len,
            add_space_prefix,
            remove_extra_whitespaces,
        })
    }

    fn node(&self, i: usize) -> u32 {
        self.xcda.get(i).copied().unwrap_or(0)
    }
    fn base(&self, i: usize) -> usize {
        let n = self.node(i);
        ((n >> 10) << ((n & (1 << 9)) >> 6)) as usize
    }

    /// A token the trie of `kinds` holds with exactly this text.
    fn token(vocab: &Vocab, text: &[u8], kinds: &[TokenType]) -> Option<u32> {
        vocab
            .find(text)
            .filter(|&id| kinds.contains(&vocab.token_type(id)))
    }

    /// `normalize_prefix`: (replacement, input bytes consumed).
    fn normalize_prefix<'a>(&'a self, vocab: &Vocab, input: &'a [u8]) -> (&'a [u8], usize) {
        let user = (1..=input.len().min(self.max_len))
            .rev()
            .find(|&l| Self::token(vocab, &input[..l], &[TokenType::UserDefined]).is_some());
        if let Some(l) = user {
            return (&input[..l], l);
        }
        let (mut longest, mut offset) = (0, 0);
        if !self.xcda.is_empty() {
            let mut node = self.base(0);
            for (k, &c) in input.iter().enumerate() {
                if c == 0 {
                    break;
                }
                node ^= c as usize;
                if self.node(node) & ((1 << 31) | 0xFF) != c as u32 {
                    break;
                }
                let leaf = (self.node(node) >> 8) & 1 == 1;
                node ^= self.base(node);
                if leaf {
                    longest = k + 1;
                    offset = (self.node(node) & ((1 << 31) - 1)) as usize;
                }
            }
        }
        if longest > 0 {
            if let Some(rest) = self.replacements.get(offset..) {
                let len = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
                return (&rest[..len], longest);
            }
        }
        let n = utf8_len(input[0]).min(input.len());
        match core::str::from_utf8(&input[..n]) {
            Ok(_) => (&input[..n], n),
            Err(_) => ("\u{FFFD}".as_bytes(), 1),
        }
    }

    fn normalize(&self, vocab: &Vocab, input: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(input.len() * 3);
        let (mut prepended, mut in_word) = (false, false);
        let mut at = 0;
        while at < input.len() {
            let (repl, used) = self.normalize_prefix(vocab, &input[at..]);
            for &c in repl {
                if c != b' ' {
                    if !in_word {
                        in_word = true;
                        if (self.add_space_prefix && !prepended) || self.remove_extra_whitespaces {
                            out.extend_from_slice(SPACE);
                            prepended = true;
                        }
                    }
                    out.push(c);
                } else {
                    in_word = false;
                    if !self.remove_extra_whitespaces {
                        out.extend_from_slice(SPACE);
                    }
                }
            }
            at += used.max(1);
        }
        out
    }

    pub fn tokenize(&self, vocab: &Vocab, text: &str, out: &mut Vec<u32>) {
        let s = self.normalize(vocab, text.as_bytes());
        let n = s.len();
        if n == 0 {
            return;
        }
        // (token, start, score) of the best segmentation ending at each byte
        let mut best: Vec<(Option<u32>, usize, f64)> = alloc::vec![(self.unk, 0, f64::MIN); n + 1];
        best[0].2 = 0.0;
        let kinds = [TokenType::Normal, TokenType::UserDefined, TokenType::Unused];
        let mut at = 0;
        while at < n {
            let units = utf8_len(s[at]).min(n - at);
            let base = best[at].2;
            let mut single = false;
            for end in at + 1..=n.min(at + self.max_len) {
                let Some(id) = Self::token(vocab, &s[at..end], &kinds) else {
                    continue;
                };
                if end - at == units {
                    single = true;
                }
                let score = if vocab.token_type(id) == TokenType::UserDefined {
                    0.0
                } else {
                    vocab.score(id) as f64
                };
                if base + score > best[end].2 {
                    best[end] = (Some(id), at, base + score);
                }
            }
            if !single && base + self.unknown_score > best[at + units].2 {
                best[at + units] = (self.unk, at, base + self.unknown_score);
            }
            at += units;
        }
        let start = out.len();
        let mut prev_unknown = false;
        let mut k = n;
        loop {
            let (id, from, _) = best[k];
            let unknown = id == self.unk;
            if !(prev_unknown && unknown) {
                out.extend(id);
            }
            if from == 0 {
                break;
            }
            prev_unknown = unknown;
            k = from;
        }
        out[start..].reverse();
    }
}

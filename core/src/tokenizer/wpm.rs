//! BERT's WordPiece as llama.cpp's `llm_tokenizer_wpm`: the text is normalised (NFD's first
//! code point and accents dropped when stripping accents, lowercased, control characters
//! dropped), split at whitespace and around punctuation, ASCII symbols and CJK ideographs; each
//! word, with U+2581 before it (GGUF's BERT vocabularies mark word starts so, not `##`
//! continuations), is covered by the longest tokens from its start; a word that cannot be
//! covered is `[UNK]`.
//!
//! In Hugging Face mode (`Wpm::hf`, a model loaded from a Hugging Face directory, whose ids
//! must be the `tokenizers` package's) accents are stripped as its BertNormalizer does: a
//! Hangul syllable decomposes into its jamo (NFD), and only nonspacing marks (Mn) are
//! dropped, spacing and enclosing ones kept (llama.cpp keeps a syllable whole and drops
//! every mark).

use alloc::string::String;
use alloc::vec::Vec;

use super::unicode::{self, is_whitespace};
use super::vocab::Vocab;

#[derive(Clone)]
pub struct Wpm {
    unk: Option<u32>,
    /// Bytes of the longest token text.
    max_len: usize,
    lowercase: bool,
    strip_accents: bool,
    /// Hugging Face's BertNormalizer exactly (module docs).
    hf: bool,
}

/// The jamo of a precomposed Hangul syllable (Unicode's algorithmic NFD), else `None`.
fn hangul_jamo(c: char) -> Option<([char; 3], usize)> {
    const S_BASE: u32 = 0xAC00;
    let s = (c as u32).checked_sub(S_BASE).filter(|&s| s < 11_172)?;
    let l = char::from_u32(0x1100 + s / 588)?;
    let v = char::from_u32(0x1161 + (s % 588) / 28)?;
    match s % 28 {
        0 => Some(([l, v, v], 2)),
        t => Some(([l, v, char::from_u32(0x11A7 + t)?], 3)),
    }
}

/// `llm_tokenizer_wpm_session::is_chinese_char` (with its 0x2B920 lower bound, as HF's Rust).
fn is_chinese(c: u32) -> bool {
    matches!(c,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B920..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

impl Wpm {
    pub fn new(vocab: &Vocab, unk: Option<u32>, lowercase: bool, strip_accents: bool) -> Wpm {
        let max_len = (0..vocab.len() as u32)
            .map(|i| vocab.text(i).len())
            .max()
            .unwrap_or(0);
        Wpm {
            unk,
            max_len,
            lowercase,
            strip_accents,
            hf: false,
        }
    }

    /// Normalises as Hugging Face's BertNormalizer (module docs).
    pub fn hf(mut self, on: bool) -> Wpm {
        self.hf = on;
        self
    }

    /// `preprocess`: the normalised words.
    fn words(&self, text: &str) -> Vec<String> {
        let mut words = alloc::vec![String::new()];
        for c in text.chars() {
            if self.hf && self.strip_accents {
                if let Some((jamo, n)) = hangul_jamo(c) {
                    for &j in &jamo[..n] {
                        self.push_char(j, &mut words);
                    }
                    continue;
                }
            }
            let c = if self.strip_accents {
                unicode::nfd_first(c)
            } else {
                c
            };
            self.push_char(c, &mut words);
        }
        if words.last().is_some_and(String::is_empty) {
            words.pop();
        }
        words
    }

    /// One normalised code point into the words.
    fn push_char(&self, c: char, words: &mut Vec<String>) {
        {
            if is_whitespace(c) {
                if !words.last().is_some_and(String::is_empty) {
                    words.push(String::new());
                }
                return;
            }
            let cat = unicode::category(c);
            if c == '\0' || c == '\u{FFFD}' || cat == unicode::CAT_CONTROL {
                return;
            }
            if self.strip_accents
                && cat == unicode::CAT_MARK
                && !(self.hf && super::spacing_marks::is_spacing_or_enclosing_mark(c))
            {
                return;
            }
            let ch = if self.lowercase {
                unicode::to_lower(c)
            } else {
                c
            };
            let cp = c as u32;
            let alone = cat == unicode::CAT_PUNCTUATION
                || (cp < 0x7F && cat == unicode::CAT_SYMBOL)
                || is_chinese(cp);
            if alone {
                if !words.last().is_some_and(String::is_empty) {
                    words.push(String::new());
                }
                if let Some(w) = words.last_mut() {
                    w.push(ch);
                }
                words.push(String::new());
            } else if let Some(w) = words.last_mut() {
                w.push(ch);
            }
        }
    }

    pub fn tokenize(&self, vocab: &Vocab, text: &str, out: &mut Vec<u32>) {
        let mut word1 = String::new();
        for word in self.words(text) {
            if word.is_empty() {
                continue;
            }
            word1.clear();
            word1.push('\u{2581}');
            word1.push_str(&word);
            let w = word1.as_bytes();
            let n = w.len();
            let before = out.len();
            let mut i = 0;
            while i < n {
                let longest = (i + 1..=n.min(i + self.max_len + 1))
                    .rev()
                    .find_map(|j| vocab.find(&w[i..j]).map(|id| (id, j)));
                match longest {
                    Some((id, j)) => {
                        out.push(id);
                        i = j;
                    }
                    None => {
                        out.truncate(before);
                        break;
                    }
                }
            }
            if out.len() == before {
                out.extend(self.unk);
            }
        }
    }
}

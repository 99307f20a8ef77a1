//! BERT's WordPiece as llama.cpp's `llm_tokenizer_wpm`: the text is normalised (NFD's first
//! code point and accents dropped when stripping accents, lowercased, control characters
//! dropped), split at whitespace and around punctuation, ASCII symbols and CJK ideographs; each
//! word, with U+2581 before it (GGUF's BERT vocabularies mark word starts so, not `##`
//! continuations), is covered by the longest tokens from its start; a word that cannot be
//! covered is `[UNK]`.

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
        }
    }

    /// `preprocess`: the normalised words.
    fn words(&self, text: &str) -> Vec<String> {
        let mut words = alloc::vec![String::new()];
        for c in text.chars() {
            let c = if self.strip_accents {
                unicode::nfd_first(c)
            } else {
                c
            };
            if is_whitespace(c) {
                if !words.last().is_some_and(String::is_empty) {
                    words.push(String::new());
                }
                continue;
            }
            let cat = unicode::category(c);
            if c == '\0' || c == '\u{FFFD}' || cat == unicode::CAT_CONTROL {
                continue;
            }
            if self.strip_accents && cat == unicode::CAT_MARK {
                continue;
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
        if words.last().is_some_and(String::is_empty) {
            words.pop();
        }
        words
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

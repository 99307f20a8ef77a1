//! SentencePiece-style tokenization as llama.cpp's `llm_tokenizer_spm`: merge the adjacent
//! pair whose concatenation is the vocabulary token with the highest score, then emit tokens,
//! falling back to `<0xXX>` byte tokens for text with no token.

use alloc::vec::Vec;
use core::cmp::Ordering;

use super::merge::merge_pairs;
use super::vocab::Vocab;

/// A score with a total order (vocabulary scores are finite; NaN sorts lowest).
#[derive(PartialEq)]
struct Score(f32);
impl Eq for Score {}
impl PartialOrd for Score {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Score {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// Tokenizes `text` (already whitespace-escaped with U+2581) and appends the ids to `out`.
pub fn tokenize(vocab: &Vocab, byte_tokens: &[Option<u32>; 256], text: &[u8], out: &mut Vec<u32>) {
    let priority =
        |_: &[u8], _: &[u8], both: &[u8]| vocab.find(both).map(|id| Score(vocab.score(id)));
    merge_pairs(text, priority, |piece| match vocab.find(piece) {
        Some(id) => out.push(id),
        None => out.extend(piece.iter().filter_map(|&b| byte_tokens[b as usize])),
    });
}

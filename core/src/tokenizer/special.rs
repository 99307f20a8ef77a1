//! Splitting raw text around special tokens before the model tokenizer runs (llama.cpp's
//! `tokenizer_st_partition`): control, unknown and user-defined tokens, longest first.
//! Control and unknown tokens are matched only when special parsing is asked for;
//! user-defined tokens always are.

use alloc::vec::Vec;

use super::vocab::{TokenType, Vocab};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fragment {
    /// A byte range of the input.
    Text(usize, usize),
    Token(u32),
}

/// Special token ids, longest text first (ties in id order).
pub fn special_tokens(vocab: &Vocab) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..vocab.len() as u32)
        .filter(|&id| {
            matches!(
                vocab.token_type(id),
                TokenType::Control | TokenType::UserDefined | TokenType::Unknown
            ) && !vocab.text(id).is_empty()
        })
        .collect();
    ids.sort_by(|&a, &b| {
        vocab
            .text(b)
            .len()
            .cmp(&vocab.text(a).len())
            .then(a.cmp(&b))
    });
    ids
}

/// Partitions `text` into raw ranges and special tokens.
pub fn partition(
    vocab: &Vocab,
    specials: &[u32],
    text: &str,
    parse_special: bool,
) -> Vec<Fragment> {
    let bytes = text.as_bytes();
    let mut frags = alloc::vec![Fragment::Text(0, bytes.len())];
    if bytes.is_empty() {
        return Vec::new();
    }
    for &id in specials {
        let ty = vocab.token_type(id);
        if !parse_special && matches!(ty, TokenType::Control | TokenType::Unknown) {
            continue;
        }
        let needle = vocab.text(id);
        if !frags
            .iter()
            .any(|f| matches!(f, Fragment::Text(a, b) if b - a >= needle.len()))
        {
            continue;
        }
        let mut next = Vec::with_capacity(frags.len());
        for f in frags {
            let Fragment::Text(mut a, b) = f else {
                next.push(f);
                continue;
            };
            while let Some(pos) = find(&bytes[a..b], needle) {
                if pos > 0 {
                    next.push(Fragment::Text(a, a + pos));
                }
                next.push(Fragment::Token(id));
                a += pos + needle.len();
            }
            if a < b {
                next.push(Fragment::Text(a, b));
            }
        }
        frags = next;
    }
    frags
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.len() > hay.len() {
        return None;
    }
    let first = needle[0];
    (0..=hay.len() - needle.len()).find(|&i| hay[i] == first && &hay[i..i + needle.len()] == needle)
}

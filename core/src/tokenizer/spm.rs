//! SentencePiece-style tokenization as llama.cpp's `llm_tokenizer_spm`: start from UTF-8
//! characters, repeatedly merge the adjacent pair whose concatenation is the vocabulary
//! token with the highest score (ties: leftmost), then emit tokens, falling back to
//! `<0xXX>` byte tokens for text with no token.

use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::Ordering;

use super::vocab::Vocab;

struct Symbol {
    start: usize,
    len: usize,
    prev: isize,
    next: isize,
}

struct Bigram {
    left: usize,
    right: usize,
    score: f32,
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Bigram {
    /// Max-heap order: higher score first, then the leftmost.
    fn cmp(&self, o: &Self) -> Ordering {
        self.score.total_cmp(&o.score).then(o.left.cmp(&self.left))
    }
}

/// Tokenizes `text` (already whitespace-escaped with U+2581) and appends the ids to `out`.
pub fn tokenize(vocab: &Vocab, byte_tokens: &[Option<u32>; 256], text: &[u8], out: &mut Vec<u32>) {
    if text.is_empty() {
        return;
    }
    let mut syms: Vec<Symbol> = Vec::new();
    let mut off = 0;
    while off < text.len() {
        let len = utf8_len(text[off]).min(text.len() - off);
        let i = syms.len() as isize;
        syms.push(Symbol {
            start: off,
            len,
            prev: i - 1,
            next: if off + len == text.len() { -1 } else { i + 1 },
        });
        off += len;
    }
    let mut heap = BinaryHeap::new();
    let try_add = |syms: &[Symbol], heap: &mut BinaryHeap<Bigram>, left: isize, right: isize| {
        if left < 0 || right < 0 {
            return;
        }
        let (l, r) = (&syms[left as usize], &syms[right as usize]);
        let piece = &text[l.start..l.start + l.len + r.len];
        if let Some(id) = vocab.find(piece) {
            heap.push(Bigram {
                left: left as usize,
                right: right as usize,
                score: vocab.score(id),
                size: piece.len(),
            });
        }
    };
    for i in 1..syms.len() {
        try_add(&syms, &mut heap, i as isize - 1, i as isize);
    }
    while let Some(b) = heap.pop() {
        let (l, r) = (&syms[b.left], &syms[b.right]);
        if l.len == 0 || r.len == 0 || l.len + r.len != b.size {
            continue;
        }
        let rnext = r.next;
        syms[b.left].len += syms[b.right].len;
        syms[b.right].len = 0;
        syms[b.left].next = rnext;
        if rnext >= 0 {
            syms[rnext as usize].prev = b.left as isize;
        }
        let prev = syms[b.left].prev;
        try_add(&syms, &mut heap, prev, b.left as isize);
        try_add(&syms, &mut heap, b.left as isize, rnext);
    }
    let mut i = 0isize;
    while i >= 0 {
        let s = &syms[i as usize];
        let piece = &text[s.start..s.start + s.len];
        match vocab.find(piece) {
            Some(id) => out.push(id),
            None => out.extend(piece.iter().filter_map(|&b| byte_tokens[b as usize])),
        }
        i = s.next;
    }
}

pub fn utf8_len(first: u8) -> usize {
    match first >> 4 {
        0xF => 4,
        0xE => 3,
        0xC | 0xD => 2,
        _ => 1,
    }
}

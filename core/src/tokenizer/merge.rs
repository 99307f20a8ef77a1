//! The pair-merging loop shared by SentencePiece and BPE (llama.cpp's `llm_tokenizer_spm`
//! and `llm_tokenizer_bpe` sessions): split a piece of text into UTF-8 characters, then keep
//! merging the adjacent pair with the best priority (ties: the leftmost) until no adjacent
//! pair has one.

use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::{Ordering, Reverse};

struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

struct Candidate<P> {
    priority: P,
    left: usize,
    right: usize,
    /// The two lengths when the pair was ranked: a candidate whose sides changed since is stale.
    lens: (usize, usize),
}

impl<P: Ord> Candidate<P> {
    fn key(&self) -> (&P, Reverse<usize>) {
        (&self.priority, Reverse(self.left))
    }
}
impl<P: Ord> PartialEq for Candidate<P> {
    fn eq(&self, o: &Self) -> bool {
        self.key() == o.key()
    }
}
impl<P: Ord> Eq for Candidate<P> {}
impl<P: Ord> PartialOrd for Candidate<P> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<P: Ord> Ord for Candidate<P> {
    fn cmp(&self, o: &Self) -> Ordering {
        self.key().cmp(&o.key())
    }
}

/// Merges `text` as described above; `priority(left, right, both)` ranks a pair (higher
/// merges first) or refuses it (`both` is the two pieces joined). Calls `emit` with every
/// final piece, in order.
pub fn merge_pairs<P: Ord>(
    text: &[u8],
    priority: impl Fn(&[u8], &[u8], &[u8]) -> Option<P>,
    mut emit: impl FnMut(&[u8]),
) {
    let mut syms: Vec<Symbol> = Vec::new();
    let mut off = 0;
    while off < text.len() {
        let len = utf8_len(text[off]).min(text.len() - off);
        let i = syms.len();
        syms.push(Symbol {
            start: off,
            len,
            prev: i.checked_sub(1),
            next: (off + len < text.len()).then_some(i + 1),
        });
        off += len;
    }
    let piece = |s: &Symbol| &text[s.start..s.start + s.len];
    let mut heap = BinaryHeap::new();
    let consider = |syms: &[Symbol],
                    heap: &mut BinaryHeap<Candidate<P>>,
                    left: Option<usize>,
                    right: Option<usize>| {
        let (Some(left), Some(right)) = (left, right) else {
            return;
        };
        let (l, r) = (&syms[left], &syms[right]);
        let both = &text[l.start..l.start + l.len + r.len];
        if let Some(priority) = priority(piece(l), piece(r), both) {
            heap.push(Candidate {
                priority,
                left,
                right,
                lens: (l.len, r.len),
            });
        }
    };
    for i in 1..syms.len() {
        consider(&syms, &mut heap, Some(i - 1), Some(i));
    }
    while let Some(c) = heap.pop() {
        let (l, r) = (&syms[c.left], &syms[c.right]);
        if l.len == 0 || r.len == 0 || (l.len, r.len) != c.lens || l.next != Some(c.right) {
            continue;
        }
        let next = r.next;
        syms[c.left].len += syms[c.right].len;
        syms[c.right].len = 0;
        syms[c.left].next = next;
        if let Some(n) = next {
            syms[n].prev = Some(c.left);
        }
        let prev = syms[c.left].prev;
        consider(&syms, &mut heap, prev, Some(c.left));
        consider(&syms, &mut heap, Some(c.left), next);
    }
    let mut i = if syms.is_empty() { None } else { Some(0) };
    while let Some(k) = i {
        emit(piece(&syms[k]));
        i = syms[k].next;
    }
}

/// Length of the UTF-8 sequence a lead byte starts (llama.cpp's `unicode_len_utf8`).
pub fn utf8_len(first: u8) -> usize {
    match first >> 4 {
        0xF => 4,
        0xE => 3,
        0xC | 0xD => 2,
        _ => 1,
    }
}

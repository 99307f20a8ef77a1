//! Prompt lookup: drafting by copying. The last `n` tokens of the text (prompt and output so
//! far) are searched for earlier in it, longest `n` first; what followed the most recent
//! earlier occurrence is the draft. Free to compute, and strong wherever an answer copies
//! from its prompt (code edits, summaries, retrieval-augmented answers) or repeats itself.

use alloc::vec::Vec;

/// Prompt-lookup drafting parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lookup {
    /// The longest n-gram matched (tried first).
    pub ngram_max: usize,
    /// The shortest n-gram matched; shorter suffixes do not draft.
    pub ngram_min: usize,
}

impl Lookup {
    /// Matches of `ngram_max` tokens down to `min(2, ngram_max)`: a single repeated token is
    /// too weak a hint to be worth a wider verification step.
    pub fn new(ngram_max: usize) -> Lookup {
        Lookup {
            ngram_max,
            ngram_min: ngram_max.clamp(1, 2),
        }
    }

    /// Appends to `out` up to `max` tokens to follow `history`: the tokens after the most
    /// recent earlier occurrence of its longest matching suffix (`ngram_max` down to
    /// `ngram_min` tokens). Nothing when no suffix occurs earlier. Returns how far the
    /// match reaches back (at most 256 tokens, 0 without a match): a long one means the
    /// text is copying, a short one that it merely met a common phrase.
    pub fn draft(&self, history: &[u32], max: usize, out: &mut Vec<u32>) -> usize {
        let len = history.len();
        if max == 0 || self.ngram_max == 0 {
            return 0;
        }
        for n in (self.ngram_min.max(1)..=self.ngram_max.min(len.saturating_sub(1))).rev() {
            let suffix = &history[len - n..];
            // the latest start before the suffix itself whose n tokens match it
            let found = (0..len - n).rev().find(|&j| history[j..j + n] == *suffix);
            if let Some(j) = found {
                let from = j + n;
                // the continuation may run into the suffix: it then repeats the cycle
                out.extend((0..max).map(|i| history[from + i % (len - from)]));
                let back = (1..=j.min(256 - n))
                    .take_while(|&b| history[j - b] == history[len - n - b])
                    .count();
                return n + back;
            }
        }
        0
    }
}

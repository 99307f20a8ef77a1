//! A step: what one forward pass runs. A list of entries (token, sequence, position, whether
//! its logits are wanted): prompt chunks of some sequences and decode tokens of others,
//! mixed. Consecutive entries of one sequence at consecutive positions form a span, which
//! attends as a run; a sequence's first position in a step must be the next one it lacks.

use alloc::vec::Vec;

use super::kv_pool::SeqId;

/// One token of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub token: u32,
    pub seq: SeqId,
    pub pos: usize,
    /// Whether the forward pass hands this token's logits back.
    pub logits: bool,
}

/// Which tokens of a span want logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logits {
    /// None (an early chunk of a long prompt).
    None,
    /// Only the last token (a prompt's end, a decode token).
    Last,
    /// The tokens from this index of the span on: 0 for teacher forcing, the second half of
    /// a chunk for perplexity.
    From(usize),
}

impl Logits {
    /// Whether token `t` of a span of `n` wants logits.
    pub fn wants(self, t: usize, n: usize) -> bool {
        match self {
            Logits::None => false,
            Logits::Last => t + 1 == n,
            Logits::From(first) => t >= first,
        }
    }
}

/// Consecutive entries of one sequence at consecutive positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub seq: SeqId,
    /// Index of its first entry in the step.
    pub first: usize,
    pub n: usize,
    pub pos0: usize,
}

/// The entries of one forward pass, kept as tokens, logits flags and spans.
#[derive(Debug, Clone, Default)]
pub struct Step {
    tokens: Vec<u32>,
    wants: Vec<bool>,
    spans: Vec<Span>,
}

impl Step {
    pub fn new() -> Step {
        Step::default()
    }

    /// An empty step with room for `n` entries.
    pub fn with_capacity(n: usize) -> Step {
        Step {
            tokens: Vec::with_capacity(n),
            wants: Vec::with_capacity(n),
            spans: Vec::with_capacity(1),
        }
    }

    /// Empties the step, keeping its buffers.
    pub fn clear(&mut self) {
        self.tokens.clear();
        self.wants.clear();
        self.spans.clear();
    }

    /// Appends one entry; it joins the last span when it continues it.
    pub fn push(&mut self, e: Entry) {
        let i = self.tokens.len();
        self.tokens.push(e.token);
        self.wants.push(e.logits);
        match self.spans.last_mut() {
            Some(s) if s.seq == e.seq && s.pos0 + s.n == e.pos && s.first + s.n == i => s.n += 1,
            _ => self.spans.push(Span {
                seq: e.seq,
                first: i,
                n: 1,
                pos0: e.pos,
            }),
        }
    }

    /// Appends `tokens` of `seq` at positions `pos0..`, `logits` saying which want logits.
    pub fn add(&mut self, seq: SeqId, pos0: usize, tokens: &[u32], logits: Logits) {
        for (t, &token) in tokens.iter().enumerate() {
            self.push(Entry {
                token,
                seq,
                pos: pos0 + t,
                logits: logits.wants(t, tokens.len()),
            });
        }
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Whether entry `i` wants logits.
    pub fn wants(&self, i: usize) -> bool {
        self.wants[i]
    }

    pub fn spans(&self) -> &[Span] {
        &self.spans
    }

    /// Entry `i`.
    pub fn entry(&self, i: usize) -> Entry {
        let s = self.spans[self.spans.partition_point(|s| s.first + s.n <= i)];
        Entry {
            token: self.tokens[i],
            seq: s.seq,
            pos: s.pos0 + (i - s.first),
            logits: self.wants[i],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_form_spans() {
        let (a, b) = (SeqId::new_for_test(0), SeqId::new_for_test(1));
        let mut s = Step::new();
        s.add(a, 5, &[1, 2, 3], Logits::Last);
        s.push(Entry {
            token: 9,
            seq: b,
            pos: 0,
            logits: true,
        });
        s.push(Entry {
            token: 10,
            seq: b,
            pos: 1,
            logits: false,
        });
        // a gap in positions starts a new span
        s.push(Entry {
            token: 11,
            seq: b,
            pos: 7,
            logits: false,
        });
        let spans: Vec<_> = s.spans().iter().map(|s| (s.first, s.n, s.pos0)).collect();
        assert_eq!(spans, [(0, 3, 5), (3, 2, 0), (5, 1, 7)]);
        assert_eq!(
            (0..s.len()).filter(|&i| s.wants(i)).collect::<Vec<_>>(),
            [2, 3]
        );
        assert_eq!(s.entry(4).pos, 1);
        assert_eq!(s.entry(4).seq, b);
        assert_eq!(s.entry(1).pos, 6);
    }
}

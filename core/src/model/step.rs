//! A step: what one forward pass runs. A list of entries (token, sequence, position, whether
//! its logits are wanted): prompt chunks of some sequences and decode tokens of others,
//! mixed. Consecutive entries of one sequence at consecutive positions form a span, which
//! attends as a run; a sequence's first position in a step must be the next one it lacks.

use alloc::vec::Vec;

use super::kv_pool::SeqId;
use super::lora::{LoraSet, NO_SLOT};

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
    /// Each entry's adapter set: an index into `lora`, or [`NO_SLOT`].
    slots: Vec<u16>,
    /// The LoRA adapter sets of the step's entries.
    lora: Vec<LoraSet>,
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
            slots: Vec::with_capacity(n),
            lora: Vec::new(),
        }
    }

    /// Empties the step, keeping its buffers.
    pub fn clear(&mut self) {
        self.tokens.clear();
        self.wants.clear();
        self.spans.clear();
        self.slots.clear();
        self.lora.clear();
    }

    /// Adds an adapter set to the step (once: the same set again gives the same slot) and
    /// returns its slot for [`Self::push_with`] / [`Self::add_with`].
    pub fn add_lora_set(&mut self, set: &LoraSet) -> u16 {
        match self.lora.iter().position(|s| s.same(set)) {
            Some(i) => i as u16,
            None => {
                self.lora.push(set.clone());
                (self.lora.len() - 1) as u16
            }
        }
    }

    /// The step's adapter sets.
    pub fn lora_sets(&self) -> &[LoraSet] {
        &self.lora
    }

    /// Each entry's adapter slot ([`NO_SLOT`]: none).
    pub fn slots(&self) -> &[u16] {
        &self.slots
    }

    /// Appends one entry; it joins the last span when it continues it.
    pub fn push(&mut self, e: Entry) {
        self.push_with(e, None)
    }

    /// [`Self::push`] for an entry under the adapter set of `slot` (from
    /// [`Self::add_lora_set`]; `None`: no adapter).
    pub fn push_with(&mut self, e: Entry, slot: Option<u16>) {
        let i = self.tokens.len();
        self.slots.push(slot.unwrap_or(NO_SLOT));
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
        self.add_with(seq, pos0, tokens, logits, None)
    }

    /// [`Self::add`] under the adapter set of `slot` (`None`: no adapter).
    pub fn add_with(
        &mut self,
        seq: SeqId,
        pos0: usize,
        tokens: &[u32],
        logits: Logits,
        slot: Option<u16>,
    ) {
        for (t, &token) in tokens.iter().enumerate() {
            let e = Entry {
                token,
                seq,
                pos: pos0 + t,
                logits: logits.wants(t, tokens.len()),
            };
            self.push_with(e, slot);
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

//! Streaming detokenization: pieces are bytes, and a UTF-8 character may be split across
//! tokens (byte-fallback tokens, byte-level BPE). Only complete characters are emitted.

use alloc::string::String;
use alloc::vec::Vec;

use super::Tokenizer;

pub struct StreamDecoder {
    special: bool,
    pending: Vec<u8>,
}

impl StreamDecoder {
    /// `special`: render control tokens' text (as llama_token_to_piece(special = true)).
    pub fn new(special: bool) -> Self {
        StreamDecoder {
            special,
            pending: Vec::new(),
        }
    }

    /// A decoder with room for `n` pending bytes (the longest piece plus a split character:
    /// then it never allocates).
    pub fn with_capacity(special: bool, n: usize) -> Self {
        StreamDecoder {
            special,
            pending: Vec::with_capacity(n),
        }
    }

    /// Adds a token; returns the text that is now complete (possibly empty).
    pub fn push(&mut self, tok: &Tokenizer, id: u32) -> Option<String> {
        let mut out = String::new();
        self.push_into(tok, id, &mut out);
        Some(out)
    }

    /// Adds a token and appends the text that is now complete to `out` (nothing is
    /// allocated once `out` and the pending bytes have room).
    pub fn push_into(&mut self, tok: &Tokenizer, id: u32, out: &mut String) {
        self.pending
            .extend_from_slice(tok.token_to_piece(id, self.special));
        loop {
            match core::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // the prefix is valid UTF-8 by `valid_up_to`
                    out.push_str(core::str::from_utf8(&self.pending[..valid]).unwrap_or(""));
                    match e.error_len() {
                        // an incomplete character at the end: wait for more bytes
                        None => {
                            self.pending.drain(..valid);
                            break;
                        }
                        // bytes that can never become valid: replace them and go on
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// Forgets any pending bytes (a new conversation).
    pub fn reset(&mut self) {
        self.pending.clear();
    }

    /// Whatever is left (an incomplete character becomes U+FFFD).
    pub fn flush(&mut self) -> String {
        let mut out = String::new();
        self.flush_into(&mut out);
        out
    }

    /// [`Self::flush`] appending to `out`.
    pub fn flush_into(&mut self, out: &mut String) {
        for chunk in self.pending.utf8_chunks() {
            out.push_str(chunk.valid());
            if !chunk.invalid().is_empty() {
                out.push(char::REPLACEMENT_CHARACTER);
            }
        }
        self.pending.clear();
    }
}

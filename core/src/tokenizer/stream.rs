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

    /// Adds a token; returns the text that is now complete (possibly empty).
    pub fn push(&mut self, tok: &Tokenizer, id: u32) -> Option<String> {
        self.pending
            .extend_from_slice(tok.token_to_piece(id, self.special));
        let mut out = String::new();
        loop {
            match core::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // SAFETY-free: the prefix is valid UTF-8 by `valid_up_to`
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
        Some(out)
    }

    /// Whatever is left (an incomplete character becomes U+FFFD).
    pub fn flush(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }
}

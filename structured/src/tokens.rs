//! The tokenizer as llguidance sees it: a token trie of every token's bytes (control
//! tokens marked special, so grammars name them as `<|im_end|>` and text never matches
//! them), the end-of-generation tokens as its EOS set, and core's tokenizer for the
//! canonical tokens of forced text.

use std::sync::Arc;

use superinfer_core::tokenizer::TokenType;
use superinfer_core::tokenizer::Tokenizer;
use toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};

struct Env {
    trie: TokTrie,
    tok: Tokenizer,
}

impl TokenizerEnv for Env {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        match std::str::from_utf8(s) {
            // as text in a prompt is, without special tokens
            Ok(text) => self
                .tok
                .encode(text, false, false)
                .unwrap_or_else(|_| self.trie.greedy_tokenize(s)),
            // a split character: the trie's longest matches
            Err(_) => self.trie.greedy_tokenize(s),
        }
    }

    fn tokenize_bytes_special(&self, s: &[u8]) -> Vec<TokenId> {
        match std::str::from_utf8(s) {
            Ok(text) => self
                .tok
                .encode(text, false, true)
                .unwrap_or_else(|_| self.trie.greedy_tokenize(s)),
            Err(_) => self.trie.greedy_tokenize(s),
        }
    }
}

/// Is this token special for grammars (never produced by text)?
pub fn is_special(tok: &Tokenizer, id: u32) -> bool {
    matches!(
        tok.vocab().token_type(id),
        TokenType::Control | TokenType::Unknown
    )
}

/// The llguidance tokenizer environment of `tok`.
pub fn env(tok: &Tokenizer) -> TokEnv {
    let n = tok.vocab_size();
    let words: Vec<Vec<u8>> = (0..n as u32)
        .map(|id| {
            if is_special(tok, id) {
                let text = tok.vocab().text(id);
                if text.is_empty() {
                    return Vec::new();
                }
                let mut w = Vec::with_capacity(text.len() + 1);
                w.push(TokTrie::SPECIAL_TOKEN_MARKER);
                w.extend_from_slice(text);
                w
            } else {
                tok.token_to_piece(id, false).to_vec()
            }
        })
        .collect();
    let eog = tok.eog_tokens();
    let eos = eog.first().copied().or(tok.eos()).unwrap_or(0);
    let info = TokRxInfo {
        vocab_size: n as u32,
        tok_eos: eos,
        tok_bos: tok.bos(),
        tok_pad: None,
        tok_unk: None,
        tok_end_of_turn: None,
    };
    let mut trie = TokTrie::from(&info, &words);
    if !eog.is_empty() {
        trie = trie.with_eos_tokens(eog);
    }
    Arc::new(Env {
        trie,
        tok: tok.clone(),
    })
}

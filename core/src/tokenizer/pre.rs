//! Pre-tokenizers of byte-level BPE vocabularies by `tokenizer.ggml.pre` name, as llama.cpp's
//! `llm_tokenizer_bpe` and `unicode_regex_split` run them: each name maps to a type
//! (`pre_table.rs`, generated from llama.cpp's sources), each type to a list of regexes applied
//! one after the other (each splits every piece the previous ones left: its matches and the
//! stretches between them become pieces). A regex llama.cpp hand-codes runs through the same
//! hand-written splitter here (`pretokenize.rs`, also gpt-4o's for speed); any other through the
//! general engine (`regex.rs`) with llama.cpp's `std::regex` fallback's input: with a Unicode
//! class (`\p{L}` ...) in the regex, the text has every non-ASCII code point collapsed to one
//! byte per class and the class becomes that byte plus its ASCII members; without, the code
//! points are matched as they are (non-ASCII whitespace as `\v` either way).

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::pre_table::{NAMES, TYPES};
use super::pretokenize::{split_chars, Pattern};
use super::regex::Regex;
use super::unicode::{self, is_number, is_whitespace};

/// The flags llama.cpp sets with a pre-tokenizer name.
pub mod flags {
    /// A word that is a token is emitted whole, merges or not.
    pub const IGNORE_MERGES: u32 = 1;
    /// Detokenizing keeps the spaces before punctuation (llama.cpp's `clean_spaces = false`).
    pub const NO_CLEAN_SPACES: u32 = 2;
    /// BOS is added unless the file says otherwise.
    pub const ADD_BOS: u32 = 4;
    /// Spaces become U+2581 before splitting (SentencePiece-style BPE).
    pub const ESCAPE_WHITESPACE: u32 = 8;
    /// The vocabulary has no BOS token.
    pub const NO_BOS: u32 = 16;
    /// A separator is appended (embedding models; not by `tokenize`).
    pub const ADD_SEP: u32 = 32;
    /// The whitespace tokenizer's normaliser does not lowercase.
    pub const NO_LOWERCASE: u32 = 64;
}

#[derive(Debug, Clone)]
enum Step {
    Hand(Pattern),
    /// `[^\n]+|[\n]+`
    Newlines,
    /// llama.cpp's `unicode_regex_split_custom_afmoe` (`\p{AFMoE_digits}` and tiny_aya's
    /// `\d{1,3}(?=(?:\d{3})*\b)`): runs of digits in groups of three from the right.
    DigitGroups,
    Regex {
        re: Regex,
        collapsed: bool,
    },
    /// llama.cpp's `unicode_regex_split_custom_kimi_k2` (triggered by `\p{Han}+`)
    KimiK2,
}

/// A pre-tokenizer: how a BPE vocabulary splits text into words before merging.
#[derive(Debug, Clone)]
pub struct PreTokenizer {
    name: String,
    steps: Vec<Step>,
    byte_encode: bool,
    flags: u32,
}

const GPT2: &str = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const LLAMA3: [&str; 2] = [
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
];
const QWEN2: &str = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN35: &str = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/// gpt-4o's regex as llama.cpp writes it (run by `std::regex` there; `Pattern::Gpt4o` gives
/// the same pieces, checked against llama.cpp by tests/tests/pretokenize.rs).
const GPT4O: &str = "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/// llama.cpp's `k_ucat_enum`, `k_ucat_cpt` and `k_ucat_map`: a class, the byte its non-ASCII
/// members collapse to and its ASCII members (as regex class text).
const UCAT: &[(&str, u32, &str)] = &[
    ("\\p{N}", 0xD1, "0-9"),
    ("\\p{L}", 0xD2, "A-Za-z"),
    ("\\p{P}", 0xD3, "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}"),
    ("\\p{M}", 0xD4, ""),
    ("\\p{S}", 0xD5, "\\$\\+<->^`\\|\\~"),
    ("\\p{Lu}", 0xD2, "A-Za-z"),
    ("\\p{Ll}", 0xD2, "A-Za-z"),
    ("\\p{Lt}", 0xD2, "A-Za-z"),
    ("\\p{Lm}", 0xD2, "A-Za-z"),
    ("\\p{Lo}", 0xD2, "A-Za-z"),
];

/// The collapsed symbol of a code point (llama.cpp's `text_collapsed`).
fn collapse(c: char) -> u32 {
    if c.is_ascii() {
        return c as u32;
    }
    if is_whitespace(c) {
        return 0x0B;
    }
    match unicode::category(c) {
        unicode::CAT_NUMBER => 0xD1,
        unicode::CAT_LETTER => 0xD2,
        unicode::CAT_PUNCTUATION => 0xD3,
        unicode::CAT_MARK => 0xD4,
        unicode::CAT_SYMBOL => 0xD5,
        _ => 0xD0,
    }
}

/// llama.cpp's rewrite of a regex with Unicode classes for the collapsed text.
fn collapse_regex(re: &str) -> Result<Vec<u32>, String> {
    if !re.is_ascii() {
        return Err("it mixes Unicode classes and non-ASCII characters".into());
    }
    let b = re.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut inside = false;
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'[' && (i == 0 || b[i - 1] != b'\\') {
            out.push('[' as u32);
            inside = true;
        } else if inside && b[i] == b']' && b[i - 1] != b'\\' {
            out.push(']' as u32);
            inside = false;
        } else if let Some(&(pat, byte, ascii)) = UCAT.iter().find(|(pat, ..)| {
            re[i..].starts_with(pat) && re[i + 3..].find('}').is_some_and(|c| c + 3 <= 10)
        }) {
            if !inside {
                out.push('[' as u32);
            }
            out.push(byte);
            out.extend(ascii.bytes().map(u32::from));
            if !inside {
                out.push(']' as u32);
            }
            i += pat.len();
            continue;
        } else {
            out.push(b[i] as u32);
        }
        i += 1;
    }
    Ok(out)
}

fn regex_step(re: &str) -> Result<Step, String> {
    let collapsed = UCAT.iter().any(|(pat, ..)| re.contains(pat));
    let pattern = if collapsed {
        collapse_regex(re)?
    } else {
        re.chars().map(|c| c as u32).collect()
    };
    Ok(Step::Regex {
        re: Regex::new(&pattern)?,
        collapsed,
    })
}

fn step(re: &str) -> Result<Step, String> {
    Ok(match re {
        GPT2 => Step::Hand(Pattern::Gpt2),
        _ if LLAMA3.contains(&re) => Step::Hand(Pattern::Llama3),
        QWEN2 => Step::Hand(Pattern::Qwen2),
        QWEN35 => Step::Hand(Pattern::Qwen35),
        GPT4O => Step::Hand(Pattern::Gpt4o),
        "[^\\n]+|[\\n]+" => Step::Newlines,
        "\\p{Han}+" => Step::KimiK2,
        "\\p{AFMoE_digits}" | "\\d{1,3}(?=(?:\\d{3})*\\b)" => Step::DigitGroups,
        _ => regex_step(re)?,
    })
}

/// The `tokenizer.ggml.pre` names llama.cpp maps, in its order.
pub fn names() -> impl Iterator<Item = &'static str> {
    NAMES.iter().map(|&(n, ..)| n)
}

impl PreTokenizer {
    /// The pre-tokenizer of a `tokenizer.ggml.pre` name (an empty name is llama.cpp's
    /// "default"); an error names it and lists the supported ones.
    pub fn from_pre(pre: &str) -> Result<PreTokenizer, String> {
        let pre = if pre.is_empty() { "default" } else { pre };
        let Some(&(_, ty, flags)) = NAMES.iter().find(|&&(n, ..)| n == pre) else {
            return Err(alloc::format!(
                "unknown pre-tokenizer '{pre}' (tokenizer.ggml.pre); supported: {}",
                supported().join(", ")
            ));
        };
        let Some(&(_, regexes, byte_encode)) = TYPES.iter().find(|&&(t, ..)| t == ty) else {
            return Err(alloc::format!("pre-tokenizer '{pre}' has no rule"));
        };
        let steps = regexes
            .iter()
            .map(|re| step(re))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| {
                alloc::format!(
                    "pre-tokenizer '{pre}' is not supported: {e} (supported: {})",
                    supported().join(", ")
                )
            })?;
        Ok(PreTokenizer {
            name: pre.to_string(),
            steps,
            byte_encode,
            flags,
        })
    }

    /// A pre-tokenizer of the given regexes, every one through the general engine (no
    /// hand-written splitter): for comparing the two.
    pub fn general(regexes: &[&str]) -> Result<PreTokenizer, String> {
        let steps = regexes
            .iter()
            .map(|re| match step(re)? {
                Step::Hand(_) => regex_step(re),
                s => Ok(s),
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(PreTokenizer {
            name: String::new(),
            steps,
            byte_encode: true,
            flags: 0,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Are words spelled with GPT-2's byte→character map before merging (else raw UTF-8)?
    pub fn byte_encode(&self) -> bool {
        self.byte_encode
    }

    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// The hand-written pattern that is this whole pre-tokenizer, if it is one.
    pub fn single_pattern(&self) -> Option<Pattern> {
        match self.steps.as_slice() {
            [Step::Hand(p)] => Some(*p),
            _ => None,
        }
    }

    /// Byte ranges of `text`'s words, in order (none empty).
    pub fn split(&self, text: &str) -> Vec<(usize, usize)> {
        let cs: Vec<char> = text.chars().collect();
        let mut lens = alloc::vec![cs.len()];
        let mut symbols: [Option<Vec<u32>>; 2] = [None, None];
        for step in &self.steps {
            let mut next = Vec::with_capacity(lens.len() * 2);
            let text_symbols = match step {
                Step::Regex { collapsed, .. } => {
                    Some(symbols[*collapsed as usize].get_or_insert_with(|| {
                        cs.iter()
                            .map(|&c| match (*collapsed, c) {
                                (true, c) => collapse(c),
                                (false, c) if !c.is_ascii() && is_whitespace(c) => 0x0B,
                                (false, c) => c as u32,
                            })
                            .collect()
                    }))
                    .map(|v| v.as_slice())
                }
                _ => None,
            };
            let mut at = 0;
            for &len in &lens {
                let piece = &cs[at..at + len];
                match step {
                    Step::Hand(p) => split_chars(piece, *p, &mut next),
                    Step::Newlines => runs(piece, |c| c == '\n', &mut next),
                    Step::DigitGroups => digit_groups(piece, &mut next),
                    Step::KimiK2 => super::kimi::split(piece, &mut next),
                    Step::Regex { re, .. } => {
                        re.split(&text_symbols.unwrap_or(&[])[at..at + len], &mut next)
                    }
                }
                at += len;
            }
            lens = next;
        }
        byte_ranges(text, &lens)
    }
}

/// Every supported name, for error messages.
fn supported() -> Vec<&'static str> {
    names()
        .filter(|n| {
            let ty = NAMES.iter().find(|&&(m, ..)| m == *n).map(|e| e.1);
            TYPES
                .iter()
                .find(|&&(t, ..)| Some(t) == ty)
                .is_some_and(|&(_, res, _)| res.iter().all(|re| step(re).is_ok()))
        })
        .collect()
}

/// Runs of characters alike under `f`.
fn runs(cs: &[char], f: impl Fn(char) -> bool, out: &mut Vec<usize>) {
    let mut i = 0;
    while i < cs.len() {
        let k = f(cs[i]);
        let s = i;
        while i < cs.len() && f(cs[i]) == k {
            i += 1;
        }
        out.push(i - s);
    }
}

fn digit_groups(cs: &[char], out: &mut Vec<usize>) {
    // as llama.cpp: the text before a run of digits is part of the run's first group
    let mut prev = 0;
    let mut i = 0;
    while i < cs.len() {
        if !is_number(cs[i]) {
            i += 1;
            continue;
        }
        let s = i;
        while i < cs.len() && is_number(cs[i]) {
            i += 1;
        }
        let n = i - s;
        let mut at = s;
        if n % 3 > 0 {
            at += n % 3;
            out.push(at - prev);
            prev = at;
        }
        while at < i {
            at += 3;
            out.push(at - prev);
            prev = at;
        }
    }
    if prev < cs.len() {
        out.push(cs.len() - prev);
    }
}

/// Byte ranges of consecutive pieces of `text` given in characters (empty ones dropped).
pub fn byte_ranges(text: &str, lens: &[usize]) -> Vec<(usize, usize)> {
    let mut out = Vec::with_capacity(lens.len());
    let mut chars = text.char_indices().map(|(o, _)| o).chain([text.len()]);
    let mut start = chars.next().unwrap_or(0);
    for &len in lens {
        if len == 0 {
            continue;
        }
        let end = chars.nth(len - 1).unwrap_or(text.len());
        out.push((start, end));
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(pre: &PreTokenizer, t: &str) -> Vec<String> {
        pre.split(t)
            .into_iter()
            .map(|(a, b)| t[a..b].to_string())
            .collect()
    }

    #[test]
    fn every_name_is_supported() {
        let unsupported: Vec<&str> = names()
            .filter(|n| PreTokenizer::from_pre(n).is_err())
            .collect();
        assert!(unsupported.is_empty(), "{unsupported:?}");
        assert_eq!(names().count(), 91);
        let e = PreTokenizer::from_pre("no-such-pre").unwrap_err();
        assert!(
            e.contains("'no-such-pre'") && e.contains("qwen2") && e.contains("falcon"),
            "{e}"
        );
    }

    #[test]
    fn hand_written_splitters_serve_the_names_llama_cpp_hand_codes() {
        let p = |n| PreTokenizer::from_pre(n).unwrap().single_pattern();
        assert_eq!(p("qwen2"), Some(Pattern::Qwen2));
        assert_eq!(p("qwen35"), Some(Pattern::Qwen35));
        assert_eq!(p("llama-bpe"), Some(Pattern::Llama3));
        assert_eq!(p("gpt-2"), Some(Pattern::Gpt2));
        assert_eq!(p("gpt-4o"), Some(Pattern::Gpt4o));
        assert_eq!(p("falcon"), None);
    }

    #[test]
    fn multi_step_rules() {
        // starcoder: every digit alone, then gpt-2's rule on each piece
        let sc = PreTokenizer::from_pre("starcoder").unwrap();
        assert_eq!(words(&sc, "x = 123;"), ["x", " =", " ", "1", "2", "3", ";"]);
        // afmoe's digits: the text before a run of digits joins its first group, as llama.cpp
        let mut out = Vec::new();
        digit_groups(&"ab12345cd".chars().collect::<Vec<_>>(), &mut out);
        assert_eq!(out, [4, 3, 2]);
        // gemma4: runs of newlines and of the rest
        let g = PreTokenizer::from_pre("gemma4").unwrap();
        assert_eq!(words(&g, "a b\n\nc"), ["a b", "\n\n", "c"]);
        assert!(!g.byte_encode() && g.has(flags::ESCAPE_WHITESPACE));
    }

    #[test]
    fn collapsed_regex_is_llama_cpps() {
        let c = collapse_regex("[^\\s\\p{L}]\\p{N}+").unwrap();
        let s: String = c.iter().map(|&u| char::from_u32(u).unwrap()).collect();
        assert_eq!(s, "[^\\s\u{D2}A-Za-z][\u{D1}0-9]+");
        assert!(collapse_regex("\\p{L}é").is_err());
    }
}

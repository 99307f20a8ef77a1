//! Hand-written equivalents of the most used pre-tokenizer regexes of byte-level BPE models (as
//! llama.cpp applies them), over a string's characters: the ones llama.cpp itself hand-codes
//! (`unicode_regex_split_custom_*`: gpt2, llama3, qwen2, qwen35) and gpt-4o, which llama.cpp runs
//! with `std::regex` (the general engine, `regex.rs`, gives the same pieces; this is faster).
//! Each returns the lengths (in characters) of the "words" that BPE then merges independently.
//!
//! qwen2:  (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}
//!         | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//! qwen35: the same with [\p{L}\p{M}]+ for \p{L}+ and [^\s\p{L}\p{M}\p{N}] for [^\s\p{L}\p{N}]
//! llama3: the same as qwen2 with \p{N}{1,3}
//! gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//! gpt4o:  [^\r\n\p{L}\p{N}]?U*L+C?|[^\r\n\p{L}\p{N}]?U+L*C?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*
//!         |\s*[\r\n]+|\s+(?!\S)|\s+
//!         with U = `((?=[\p{L}])([^a-z]))`, L = `((?=[\p{L}])([^A-Z]))` and C the contractions
//!         `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])`: the form llama.cpp gives
//!         o200k's `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+...` and runs with
//!         std::regex over text whose non-ASCII code points are collapsed to one byte per class.
//!         So only ASCII letters have a case (any other letter is both U and L) and marks
//!         (\p{M}) are not letters: `ÉCOLE` splits as `É` `COLE`, a combining accent starts a
//!         new word. tests/tests/pretokenize.rs compares with llama.cpp's own splitter.

use alloc::vec::Vec;

use super::unicode::{is_letter, is_mark, is_number, is_whitespace};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    Gpt2,
    Llama3,
    Qwen2,
    /// qwen2 whose letter runs take combining marks (\p{M}) too.
    Qwen35,
    /// o200k (gpt-oss, GPT-4o): cased words, digits by three, `/` after punctuation.
    Gpt4o,
}

impl Pattern {
    /// The hand-written pattern that is the whole pre-tokenizer of a `tokenizer.ggml.pre`
    /// name, or `None` (the name is unknown, or its rule takes more: see `PreTokenizer`).
    pub fn from_pre(pre: &str) -> Option<Pattern> {
        super::pre::PreTokenizer::from_pre(pre)
            .ok()
            .and_then(|p| p.single_pattern())
    }
}

struct Chars<'a> {
    cs: &'a [char],
}

impl Chars<'_> {
    fn at(&self, i: usize) -> Option<char> {
        self.cs.get(i).copied()
    }
    fn run(&self, mut i: usize, f: impl Fn(char) -> bool) -> usize {
        while self.at(i).is_some_and(&f) {
            i += 1;
        }
        i
    }
}

fn is_newline(c: char) -> bool {
    c == '\r' || c == '\n'
}

fn is_other(c: char) -> bool {
    !is_whitespace(c) && !is_letter(c) && !is_number(c)
}

/// `'s 't 're 've 'm 'll 'd` at `i`; returns the end.
fn contraction(s: &Chars<'_>, i: usize, any_case: bool) -> Option<usize> {
    if s.at(i) != Some('\'') {
        return None;
    }
    let lower = |j: usize| {
        s.at(j)
            .map(|c| if any_case { c.to_ascii_lowercase() } else { c })
    };
    match (lower(i + 1), lower(i + 2)) {
        (Some('r'), Some('e')) | (Some('v'), Some('e')) | (Some('l'), Some('l')) => Some(i + 3),
        (Some('s' | 't' | 'm' | 'd'), _) => Some(i + 2),
        _ => None,
    }
}

/// Whitespace alternatives shared by all patterns: `\s*[\r\n]+` (qwen2/llama3 only),
/// `\s+(?!\S)`, `\s+`.
fn whitespace(s: &Chars<'_>, i: usize, newline_alt: bool) -> Option<usize> {
    let end = s.run(i, is_whitespace);
    if end == i {
        return None;
    }
    if newline_alt {
        // \s*[\r\n]+ : the whitespace up to and including its last newline
        if let Some(last_nl) = (i..end).rev().find(|&j| s.at(j).is_some_and(is_newline)) {
            return Some(last_nl + 1);
        }
    }
    // \s+(?!\S): all of it at the end of text, else all but the last one (if that leaves any)
    if end == s.cs.len() || end - i > 1 {
        return Some(if end == s.cs.len() { end } else { end - 1 });
    }
    Some(end)
}

/// gpt-4o's letter alternatives from `q` (a letter): `U*L+` if it matches, else `U+L*`, then an
/// optional contraction; returns the end. U is a letter other than a-z, L a letter other than
/// A-Z (so a non-ASCII letter is both), matched as the backtracking regex does: U* takes the
/// whole U run; if a-z follows, L+ takes the L run after it; else U* gives back letters until
/// L+ can take one, which only a non-ASCII letter allows (its U run ends the word there); with
/// none, `U+L*` takes the U run (L* is then empty: no letter follows it).
fn cased_word(s: &Chars<'_>, q: usize) -> usize {
    let upper = |c: char| !c.is_ascii_lowercase() && is_letter(c);
    let lower = |c: char| !c.is_ascii_uppercase() && is_letter(c);
    let u = s.run(q, upper);
    let end = if s.at(u).is_some_and(|c| c.is_ascii_lowercase()) {
        s.run(u, lower)
    } else if let Some(j) = (q..u)
        .rev()
        .find(|&j| s.at(j).is_some_and(|c| !c.is_ascii()))
    {
        j + 1
    } else {
        u
    };
    contraction(s, end, true).unwrap_or(end)
}

fn next_word(s: &Chars<'_>, i: usize, p: Pattern) -> usize {
    let c = s.at(i).unwrap_or(' ');
    match p {
        Pattern::Gpt4o => {
            // [^\r\n\p{L}\p{N}]? before the letter alternatives
            if is_letter(c) {
                return cased_word(s, i);
            }
            if !is_newline(c) && !is_number(c) && s.at(i + 1).is_some_and(is_letter) {
                return cased_word(s, i + 1);
            }
            if is_number(c) {
                let mut e = i + 1;
                while e - i < 3 && s.at(e).is_some_and(is_number) {
                    e += 1;
                }
                return e;
            }
            // ' ?[^\s\p{L}\p{N}]+[\r\n/]*'
            let start = if c == ' ' && s.at(i + 1).is_some_and(is_other) {
                i + 1
            } else {
                i
            };
            if s.at(start).is_some_and(is_other) {
                let e = s.run(start, is_other);
                return s.run(e, |c| is_newline(c) || c == '/');
            }
            whitespace(s, i, true).unwrap_or(i + 1)
        }
        Pattern::Qwen2 | Pattern::Llama3 | Pattern::Qwen35 => {
            if let Some(e) = contraction(s, i, true) {
                return e;
            }
            // [^\r\n\p{L}\p{N}]?\p{L}+ (qwen35: [\p{L}\p{M}]+)
            let marks = p == Pattern::Qwen35;
            let letter = |c: char| is_letter(c) || (marks && is_mark(c));
            if letter(c) {
                return s.run(i, letter);
            }
            if !is_newline(c) && !is_number(c) && s.at(i + 1).is_some_and(letter) {
                return s.run(i + 1, letter);
            }
            // \p{N} or \p{N}{1,3}
            if is_number(c) {
                let max = if p == Pattern::Llama3 { 3 } else { 1 };
                let mut e = i + 1;
                while e - i < max && s.at(e).is_some_and(is_number) {
                    e += 1;
                }
                return e;
            }
            // ' ?[^\s\p{L}\p{N}]+[\r\n]*' (qwen35: [^\s\p{L}\p{M}\p{N}])
            let other = |c: char| is_other(c) && !(marks && is_mark(c));
            let start = if c == ' ' && s.at(i + 1).is_some_and(other) {
                i + 1
            } else {
                i
            };
            if s.at(start).is_some_and(other) {
                let e = s.run(start, other);
                return s.run(e, is_newline);
            }
            whitespace(s, i, true).unwrap_or(i + 1)
        }
        Pattern::Gpt2 => {
            if let Some(e) = contraction(s, i, false) {
                return e;
            }
            let start = if c == ' ' { i + 1 } else { i };
            if let Some(n) = s.at(start) {
                for class in [is_letter as fn(char) -> bool, is_number, is_other] {
                    if class(n) {
                        return s.run(start, class);
                    }
                }
            }
            whitespace(s, i, false).unwrap_or(i + 1)
        }
    }
}

/// Splits the characters `cs` (one piece of text) into words; appends their lengths in
/// characters to `out`.
pub fn split_chars(cs: &[char], p: Pattern, out: &mut Vec<usize>) {
    let s = Chars { cs };
    let mut i = 0;
    while i < cs.len() {
        let e = next_word(&s, i, p).max(i + 1);
        out.push(e - i);
        i = e;
    }
}

/// Splits `text` into the byte ranges of its pre-tokenized words.
pub fn split(text: &str, p: Pattern) -> Vec<(usize, usize)> {
    let cs: Vec<char> = text.chars().collect();
    let mut lens = Vec::new();
    split_chars(&cs, p, &mut lens);
    super::pre::byte_ranges(text, &lens)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    fn words(t: &str, p: Pattern) -> Vec<&str> {
        split(t, p).into_iter().map(|(a, b)| &t[a..b]).collect()
    }

    #[test]
    fn qwen2_splits_like_the_regex() {
        assert_eq!(words("Hello world", Pattern::Qwen2), ["Hello", " world"]);
        assert_eq!(
            words("I'm DON'T 12345", Pattern::Qwen2),
            ["I", "'m", " DON", "'T", " ", "1", "2", "3", "4", "5"]
        );
        assert_eq!(
            words("a  b\n\n  c   ", Pattern::Qwen2),
            ["a", " ", " b", "\n\n", " ", " c", "   "]
        );
        assert_eq!(
            words("x = (y);\n", Pattern::Qwen2),
            ["x", " =", " (", "y", ");\n"]
        );
        assert_eq!(
            words("日本語 한국어", Pattern::Qwen2),
            ["日本語", " 한국어"]
        );
        assert_eq!(words("\tb", Pattern::Qwen2), ["\tb"]);
    }

    #[test]
    fn llama3_groups_three_digits() {
        assert_eq!(words("12345", Pattern::Llama3), ["123", "45"]);
    }

    #[test]
    fn gpt2_pattern() {
        assert_eq!(
            words("Hello  world's 42!", Pattern::Gpt2),
            ["Hello", " ", " world", "'s", " 42", "!"]
        );
    }

    #[test]
    fn gpt4o_splits_on_ascii_case_only() {
        assert_eq!(
            words("XMLHttpRequest DON'T ÉCOLE École", Pattern::Gpt4o),
            ["XMLHttp", "Request", " DON'T", " É", "COLE", " École"]
        );
        assert_eq!(
            words("12345 a/b */\n/x", Pattern::Gpt4o),
            ["123", "45", " a", "/b", " */\n/", "x"]
        );
    }

    #[test]
    fn words_cover_the_text_exactly() {
        let t = "  mixed\t\ttext — with “quotes”, émojis 😀👍🏽 and 3.14\r\n\r\n end  ";
        for p in [
            Pattern::Qwen2,
            Pattern::Llama3,
            Pattern::Gpt2,
            Pattern::Gpt4o,
        ] {
            let w = words(t, p);
            assert_eq!(w.concat(), t);
            assert!(w.iter().all(|x| !x.is_empty()));
        }
    }
}

//! Kimi-K2's pre-tokenizer, a port of llama.cpp's `unicode_regex_split_custom_kimi_k2` (its
//! hand-written form of `[\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*
//! [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|...|\p{N}{1,3}
//! | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`), step for step.

use alloc::vec::Vec;

use super::unicode::{is_letter, is_number, is_whitespace, to_lower};

/// llama.cpp's `unicode_cpt_is_han`.
fn is_han(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0x2CEB0..=0x2EBEF | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

/// Splits one piece; appends the words' lengths in characters.
pub fn split(cs: &[char], out: &mut Vec<usize>) {
    let end = cs.len();
    let at = |p: usize| cs.get(p).copied();
    let letter = |p: usize| at(p).is_some_and(is_letter);
    let number = |p: usize| at(p).is_some_and(is_number);
    let space = |p: usize| at(p).is_some_and(is_whitespace);
    let han = |p: usize| at(p).is_some_and(is_han);
    let nl = |p: usize| matches!(at(p), Some('\r' | '\n'));
    let mut prev = 0;
    let mut add = |e: usize, prev: &mut usize| {
        if e > *prev {
            out.push(e - *prev);
        }
        *prev = e;
    };
    let mut pos = 0;
    while pos < end {
        if han(pos) {
            while han(pos) {
                pos += 1;
            }
            add(pos, &mut prev);
            continue;
        }
        let leading = !(nl(pos) || letter(pos) || number(pos));
        let letter_pattern =
            (letter(pos) && !han(pos)) || (leading && letter(pos + 1) && !han(pos + 1));
        if letter_pattern {
            let mut has_leading = false;
            if leading {
                has_leading = true;
                pos += 1;
            }
            let mut has_letters = false;
            while letter(pos) && !han(pos) {
                has_letters = true;
                pos += 1;
            }
            if has_letters || (!has_leading && letter(pos) && !han(pos)) {
                if !has_letters {
                    pos += 1;
                }
                while letter(pos) && !han(pos) {
                    pos += 1;
                }
                if at(pos) == Some('\'') && pos + 1 < end {
                    let n1 = at(pos + 1).map(to_lower);
                    if matches!(n1, Some('s' | 't' | 'm' | 'd')) {
                        pos += 2;
                    } else if pos + 2 < end {
                        let n2 = at(pos + 2).map(to_lower);
                        if matches!(
                            (n1, n2),
                            (Some('r'), Some('e'))
                                | (Some('v'), Some('e'))
                                | (Some('l'), Some('l'))
                        ) {
                            pos += 3;
                        }
                    }
                }
                add(pos, &mut prev);
                continue;
            } else if has_leading {
                pos -= 1;
            }
        }
        if number(pos) {
            let mut ini = pos;
            while number(pos) {
                pos += 1;
                if pos - ini >= 3 {
                    add(pos, &mut prev);
                    ini = pos;
                }
            }
            add(pos, &mut prev);
            continue;
        }
        // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
        let other = |p: usize| p < end && !(space(p) || letter(p) || number(p));
        let q = if at(pos) == Some(' ') { pos + 1 } else { pos };
        if other(q) {
            pos = q;
            while other(pos) {
                pos += 1;
            }
            while nl(pos) {
                pos += 1;
            }
            add(pos, &mut prev);
            continue;
        }
        let mut n = 0;
        let mut last_nl = 0;
        while space(pos + n) {
            if nl(pos + n) {
                last_nl = pos + n + 1;
            }
            n += 1;
        }
        if last_nl > 0 {
            pos = last_nl;
            add(pos, &mut prev);
            continue;
        }
        if n > 1 && pos + n < end {
            pos += n - 1;
            add(pos, &mut prev);
            continue;
        }
        if n > 0 {
            pos += n;
            add(pos, &mut prev);
            continue;
        }
        pos += 1;
        add(pos, &mut prev);
    }
}

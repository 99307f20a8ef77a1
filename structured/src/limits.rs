//! The limits a grammar is compiled and run under: checked on its text before llguidance
//! sees it (size, nesting), and llguidance's own fuel for compiling and for each mask.

use llguidance::api::ParserLimits;
use serde_json::Value;

use crate::grammar::{Grammar, GrammarError};

/// Bytes of a grammar's text (a schema's JSON) at most.
pub const MAX_GRAMMAR_BYTES: usize = 1 << 20;

/// Nesting of a schema's JSON, or of a grammar's parentheses, at most.
pub const MAX_NESTING: usize = 64;

/// Stack of the thread a grammar compiles on (llguidance recurses over deep schemas); wasm
/// compiles on the caller's stack.
#[cfg_attr(target_family = "wasm", allow(dead_code))]
pub const COMPILE_STACK: usize = 256 << 20;

/// llguidance's limits: its defaults bound a mask to a few milliseconds on the largest
/// vocabularies, and the compile of a grammar to about a second.
pub fn parser_limits() -> ParserLimits {
    ParserLimits {
        // 50k/ms: 20 ms of regex construction at most
        initial_lexer_fuel: 1_000_000,
        // 14k/ms: ~15 ms of lexing per mask at most
        step_lexer_fuel: 200_000,
        // 20k/ms: ~2.5 ms of Earley items per mask
        step_max_items: 50_000,
        max_items_in_row: 2_000,
        max_lexer_states: 250_000,
        max_grammar_size: 500_000,
        ..ParserLimits::default()
    }
}

/// Checks the size and nesting of `g` before it is compiled.
pub fn check(g: &Grammar) -> Result<(), GrammarError> {
    match g {
        Grammar::JsonObject => Ok(()),
        Grammar::JsonSchema(v) => {
            let depth = json_depth(v);
            if depth > MAX_NESTING {
                return Err(GrammarError::too_large(format!(
                    "the JSON schema nests {depth} levels deep (at most {MAX_NESTING})"
                )));
            }
            let len = serde_json::to_string(v).map(|s| s.len()).unwrap_or(0);
            check_len(len, "JSON schema")
        }
        Grammar::Regex(s) => {
            check_len(s.len(), "regular expression")?;
            check_nesting(s, false)
        }
        Grammar::Lark(s) | Grammar::Gbnf(s) => {
            check_len(s.len(), "grammar")?;
            check_nesting(s, true)
        }
    }
}

fn check_len(len: usize, what: &str) -> Result<(), GrammarError> {
    if len > MAX_GRAMMAR_BYTES {
        return Err(GrammarError::too_large(format!(
            "the {what} is {len} bytes long (at most {MAX_GRAMMAR_BYTES})"
        )));
    }
    Ok(())
}

/// Depth of nested arrays and objects (without recursion: the value may be deep).
fn json_depth(v: &Value) -> usize {
    let mut max = 0;
    let mut stack = vec![(v, 1usize)];
    while let Some((v, d)) = stack.pop() {
        match v {
            Value::Array(a) => {
                max = max.max(d);
                stack.extend(a.iter().map(|x| (x, d + 1)));
            }
            Value::Object(o) => {
                max = max.max(d);
                stack.extend(o.values().map(|x| (x, d + 1)));
            }
            _ => {}
        }
    }
    max
}

/// Depth of parentheses outside string literals (`"…"`), character classes (`[…]`) and,
/// in a grammar, `/…/` regular expressions (whose own parentheses count too).
fn check_nesting(text: &str, grammar: bool) -> Result<(), GrammarError> {
    let (mut depth, mut max) = (0usize, 0usize);
    let mut chars = text.chars();
    let mut in_str = false;
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '"' if grammar && !in_class => in_str = !in_str,
            '[' if !in_str => in_class = true,
            ']' if !in_str => in_class = false,
            '(' if !in_str && !in_class => {
                depth += 1;
                max = max.max(depth);
            }
            ')' if !in_str && !in_class => depth = depth.saturating_sub(1),
            '\n' if grammar => {
                // a literal or class never spans lines
                in_str = false;
                in_class = false;
            }
            _ => {}
        }
    }
    if max > MAX_NESTING {
        return Err(GrammarError::too_large(format!(
            "the grammar nests parentheses {max} deep (at most {MAX_NESTING})"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting() {
        let deep = format!("{}a{}", "(".repeat(65), ")".repeat(65));
        assert_eq!(
            check(&Grammar::Regex(deep)).unwrap_err().code,
            "grammar_too_large"
        );
        let ok = format!("{}a{}", "(".repeat(64), ")".repeat(64));
        assert!(check(&Grammar::Regex(ok)).is_ok());
        // parentheses in literals and classes do not count
        let lit = format!("start: \"{}\" /[(]+/", "(".repeat(100));
        assert!(check(&Grammar::Lark(lit)).is_ok());
        let mut v = serde_json::json!({"type": "string"});
        for _ in 0..70 {
            v = serde_json::json!({"type": "array", "items": v});
        }
        assert_eq!(
            check(&Grammar::JsonSchema(v)).unwrap_err().code,
            "grammar_too_large"
        );
    }
}

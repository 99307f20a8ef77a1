//! The grammar of a model's tool calls, in llguidance's Lark syntax: each callable tool's
//! name, then its parameters' JSON Schema embedded with `%json {…}`, wrapped in the
//! format's own markers. With `tool_choice: auto` the grammar is lazy: the answer is free
//! until one of the triggers appears, and what follows the trigger must be calls (the
//! grammar starts after the trigger's text, which belongs to the free part); with
//! `required` or a named tool it holds from the first token.
//!
//! Markers that are special tokens of the model (`[TOOL_CALLS]`, Harmony's `<|message|>`)
//! cannot be matched as text: the caller says which are, with their ids
//! (`special("<|message|>") == Some(200008)`), and the grammar names them as tokens
//! (`<[200008]>`).

use serde_json::Value;

use super::detect::ToolFormat;

/// A tool the grammar lets the model call.
#[derive(Debug, Clone, Copy)]
pub struct ToolSchema<'a> {
    pub name: &'a str,
    /// The JSON Schema of its arguments.
    pub parameters: &'a Value,
}

/// When the grammar holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// From a trigger on (`tool_choice: auto`): text before it is free.
    Lazy,
    /// From the start (`required`, or a named tool).
    Forced,
}

/// A format's grammar for some tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallGrammar {
    /// The Lark grammar (llguidance's dialect).
    pub lark: String,
    /// The texts that engage a lazy grammar; empty: the grammar holds from the start.
    pub triggers: Vec<String>,
}

fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// A marker: the token if it is a special one, else its text.
fn marker(text: &str, special: &dyn Fn(&str) -> Option<u32>) -> String {
    match special(text) {
        Some(id) => format!("<[{id}]>"),
        None => quoted(text),
    }
}

/// The rules `fn_i` for each tool (`"\"NAME\", \"KEY\": " %json{SCHEMA}`) and their
/// alternation `fns`.
fn functions(tools: &[ToolSchema], args_key: &str) -> String {
    let mut out = String::new();
    let alts: Vec<String> = (0..tools.len()).map(|i| format!("fn_{i}")).collect();
    out.push_str(&format!("fns: {}\n", alts.join(" | ")));
    for (i, t) in tools.iter().enumerate() {
        let head = format!("{}, \"{args_key}\": ", quoted(t.name));
        out.push_str(&format!(
            "fn_{i}: {} %json {}\n",
            quoted(&head),
            serde_json::to_string(t.parameters).expect("a schema serializes")
        ));
    }
    out
}

/// The grammar of calls to `tools` in `format`; `parallel` lets one answer make several.
/// `tools` must not be empty.
pub fn call_grammar(
    format: ToolFormat,
    tools: &[ToolSchema],
    mode: Mode,
    parallel: bool,
    special: &dyn Fn(&str) -> Option<u32>,
) -> CallGrammar {
    let repeat = |call: &str, sep: &str| {
        if parallel {
            format!("{call} ({sep} {call})*")
        } else {
            call.to_string()
        }
    };
    let lazy = mode == Mode::Lazy;
    let object = format!("{} fns \"}}\"", quoted("{\"name\": "));
    let (start, triggers) = match format {
        ToolFormat::Hermes => {
            let open = marker("<tool_call>", special);
            let close = marker("</tool_call>", special);
            let first = if lazy { "body" } else { "call" };
            (
                format!(
                    "start: {first}{}\ncall: {open} body\nbody: \"\\n\" {object} \"\\n\" {close}\n",
                    if parallel { " (\"\\n\" call)*" } else { "" }
                ),
                vec!["<tool_call>".to_string()],
            )
        }
        ToolFormat::Mistral => {
            let open = marker("[TOOL_CALLS]", special);
            let first = if lazy {
                String::new()
            } else {
                format!("{open} ")
            };
            (
                format!(
                    "start: {first}\"[\" {} \"]\"\ncall: {object}\n",
                    repeat("call", "\", \"")
                ),
                vec!["[TOOL_CALLS]".to_string()],
            )
        }
        ToolFormat::Llama3 => {
            // one call a turn: Llama 3.1's template renders no more
            let start = if lazy {
                "start: \": \" fns \"}\"\n".to_string()
            } else {
                format!("start: {object}\n")
            };
            (start, vec!["{\"name\"".to_string()])
        }
        ToolFormat::Harmony => {
            // to=functions.NAME, then the rest of the header in either order gpt-oss writes
            // it (` <|constrain|>json` or `<|channel|>commentary json`), then the arguments;
            // the model writes its analysis first, so the grammar is lazy either way
            let constrain = marker("<|constrain|>", special);
            let message = marker("<|message|>", special);
            let channel = marker("<|channel|>", special);
            let call = marker("<|call|>", special);
            let mut rules = String::from("start: fns\nfns: ");
            let alts: Vec<String> = (0..tools.len()).map(|i| format!("fn_{i}")).collect();
            rules.push_str(&alts.join(" | "));
            rules.push('\n');
            rules.push_str(&format!(
                "hdr: \" \" {constrain} \"json\" | {channel} \"commentary\" (\" json\" | \" \" {constrain} \"json\")?\n"
            ));
            for (i, t) in tools.iter().enumerate() {
                rules.push_str(&format!(
                    "fn_{i}: {} hdr {message} %json {} {call}\n",
                    quoted(t.name),
                    serde_json::to_string(t.parameters).expect("a schema serializes")
                ));
            }
            return CallGrammar {
                lark: rules,
                triggers: vec!["to=functions.".to_string()],
            };
        }
    };
    let lark = format!("{start}{}", functions(tools, format.args_key()));
    CallGrammar {
        lark,
        triggers: if mode == Mode::Lazy {
            triggers
        } else {
            Vec::new()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hermes_calls_with_each_tool_s_schema() {
        let p = json!({"type": "object", "properties": {"city": {"type": "string"}}});
        let q = json!({"type": "object"});
        let tools = [
            ToolSchema {
                name: "get_weather",
                parameters: &p,
            },
            ToolSchema {
                name: "now",
                parameters: &q,
            },
        ];
        let g = call_grammar(ToolFormat::Hermes, &tools, Mode::Lazy, true, &|_| None);
        assert_eq!(g.triggers, ["<tool_call>"]);
        // lazy: the grammar takes over after the trigger
        let want = r#"start: body ("\n" call)*
call: "<tool_call>" body
body: "\n" "{\"name\": " fns "}" "\n" "</tool_call>"
fns: fn_0 | fn_1
fn_0: "\"get_weather\", \"arguments\": " %json {"type":"object","properties":{"city":{"type":"string"}}}
fn_1: "\"now\", \"arguments\": " %json {"type":"object"}
"#;
        assert_eq!(g.lark, want);
        let g = call_grammar(ToolFormat::Hermes, &tools[..1], Mode::Forced, false, &|t| {
            (t == "<tool_call>").then_some(7)
        });
        assert!(g.triggers.is_empty());
        assert!(
            g.lark.starts_with("start: call\ncall: <[7]> body\n"),
            "{}",
            g.lark
        );
    }

    #[test]
    fn the_other_formats() {
        let p = json!({"type": "object"});
        let tools = [ToolSchema {
            name: "f",
            parameters: &p,
        }];
        let tc = |t: &str| (t == "[TOOL_CALLS]").then_some(5);
        let g = call_grammar(ToolFormat::Mistral, &tools, Mode::Lazy, true, &tc);
        assert_eq!(g.triggers, ["[TOOL_CALLS]"]);
        assert!(
            g.lark.starts_with(r#"start: "[" call (", " call)* "]""#),
            "{}",
            g.lark
        );
        let g = call_grammar(ToolFormat::Mistral, &tools, Mode::Forced, false, &tc);
        assert!(
            g.lark.starts_with(r#"start: <[5]> "[" call "]""#),
            "{}",
            g.lark
        );
        let g = call_grammar(ToolFormat::Llama3, &tools, Mode::Lazy, true, &|_| None);
        assert_eq!(g.triggers, ["{\"name\""]);
        assert!(g.lark.starts_with(r#"start: ": " fns "}""#), "{}", g.lark);
        assert!(g.lark.contains(r#"\"parameters\": "#), "{}", g.lark);
        let g = call_grammar(ToolFormat::Harmony, &tools, Mode::Forced, true, &|_| None);
        assert_eq!(g.triggers, ["to=functions."]);
        assert!(
            g.lark
                .contains(r#"fn_0: "f" hdr "<|message|>" %json {"type":"object"} "<|call|>""#),
            "{}",
            g.lark
        );
        assert!(
            g.lark
                .contains(r#"hdr: " " "<|constrain|>" "json" | "<|channel|>" "commentary""#),
            "{}",
            g.lark
        );
    }
}

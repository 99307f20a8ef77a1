//! A request's constraint, one function for every frontend: its output format
//! (`response_format`, `grammar`, `json_schema`) or its tools (the calls' grammar in the
//! model's own format, lazy from the format's trigger under `tool_choice: auto`), compiled by
//! the model's [`Grammars`] (cached by grammar) into what makes each sequence's constraint. A
//! grammar that cannot be compiled is an [`Error`] with its code (`invalid_schema`,
//! `unsupported_schema_keyword` naming the keyword as `param`, `invalid_grammar`,
//! `grammar_too_large`).

use std::sync::Arc;

use superinfer_core::generate::Constraint;
use superinfer_core::tokenizer::{TokenType, Tokenizer};
use superinfer_structured::{Compiled, Grammar, GrammarError, Grammars, Trigger};
use superinfer_template::tools::{call_grammar, Mode, ToolFormat, ToolSchema};

use crate::{Error, GenParams, OutputFormat, ToolChoice, Tools};

/// Makes a new sequence's constraint.
pub type Factory = Arc<dyn Fn() -> Box<dyn Constraint> + Send + Sync>;

/// What a request's output must follow, and how its answer is read.
#[derive(Default)]
pub struct Plan {
    /// The constraint of the output, if any.
    pub constraint: Option<Factory>,
    /// The format calls are read in (`None`: no tools, or `tool_choice: none`).
    pub tool_format: Option<ToolFormat>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("constraint", &self.constraint.is_some())
            .field("tool_format", &self.tool_format)
            .finish()
    }
}

/// The error of a grammar that does not compile; `param` is the request field it came
/// from, or the schema keyword that cannot be enforced.
pub fn grammar_error(e: GrammarError, param: &str) -> Error {
    let param = e.keyword.clone().unwrap_or_else(|| param.to_string());
    Error::param(&param, e.message).with_code(e.code)
}

/// The plan of a request: tools (chat only: `gen.tools` is `None` for completions) or an
/// output format, not both (a forced tool call and a JSON answer contradict each other).
/// `template_format`: the format the chat template's model writes calls in
/// ([`ToolFormat::of_template`]; `None`: Hermes, the most common one).
pub fn plan(
    grammars: &Grammars,
    template_format: Option<ToolFormat>,
    tok: &Tokenizer,
    gen: &GenParams,
) -> Result<Plan, Error> {
    let tools = gen.tools.as_ref().filter(|t| t.choice != ToolChoice::None);
    match (tools, &gen.format) {
        (Some(_), Some(_)) => Err(Error::param(
            "response_format",
            "'response_format' (or 'grammar', 'json_schema') and 'tools' cannot be combined: \
             the answer is either calls or constrained text",
        )),
        (Some(t), None) => {
            let format = template_format.unwrap_or(ToolFormat::Hermes);
            Ok(Plan {
                constraint: Some(tools_constraint(grammars, format, tok, t)?),
                tool_format: Some(format),
            })
        }
        (None, Some(f)) => {
            let (grammar, param) = match f {
                OutputFormat::JsonObject => (Grammar::JsonObject, "response_format"),
                OutputFormat::JsonSchema { schema, .. } => {
                    (Grammar::JsonSchema(schema.clone()), "response_format")
                }
                OutputFormat::Gbnf(g) => (Grammar::Gbnf(g.clone()), "grammar"),
            };
            let compiled = grammars
                .compile(&grammar)
                .map_err(|e| grammar_error(e, param))?;
            Ok(Plan {
                constraint: Some(Arc::new(move || compiled.constraint())),
                tool_format: None,
            })
        }
        (None, None) => Ok(Plan::default()),
    }
}

/// The id of `text` if it is one control token of the model (then grammars name it as a
/// token: text never produces it).
fn special_token(tok: &Tokenizer, text: &str) -> Option<u32> {
    let id = tok.vocab().find_str(text)?;
    (tok.vocab().token_type(id) == TokenType::Control).then_some(id)
}

fn tools_constraint(
    grammars: &Grammars,
    format: ToolFormat,
    tok: &Tokenizer,
    t: &Tools,
) -> Result<Factory, Error> {
    let schemas: Vec<ToolSchema> = t
        .callable()
        .iter()
        .map(|t| ToolSchema {
            name: &t.name,
            parameters: &t.parameters,
        })
        .collect();
    let mode = match t.choice {
        ToolChoice::Auto => Mode::Lazy,
        _ => Mode::Forced,
    };
    // a named tool is one call of it (OpenAI's meaning)
    let parallel = t.parallel && !matches!(t.choice, ToolChoice::Named(_));
    let g = call_grammar(format, &schemas, mode, parallel, &|s| special_token(tok, s));
    let compiled: Arc<Compiled> = grammars
        .compile(&Grammar::Lark(g.lark))
        .map_err(|e| grammar_error(e, "tools"))?;
    if g.triggers.is_empty() {
        return Ok(Arc::new(move || compiled.constraint()));
    }
    let triggers: Vec<Trigger> = g.triggers.into_iter().map(Trigger::Text).collect();
    // compiled here once, so that a trigger set that cannot compile is this request's error
    compiled
        .try_lazy(triggers.clone())
        .map_err(|e| grammar_error(e, "tools"))?;
    Ok(Arc::new(move || compiled.lazy(triggers.clone())))
}

/// OpenAI's `finish_reason` of an answer that ended for `reason` (`stop`, `length`) and
/// made `calls` tool calls: `tool_calls` when it made any and was not cut short.
pub fn finish_with_calls(reason: &'static str, calls: usize) -> &'static str {
    match reason {
        "stop" if calls > 0 => "tool_calls",
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grammar_error_names_the_keyword_or_the_field() {
        let e = grammar_error(
            GrammarError {
                message: "the JSON schema keyword `foo` is not supported".into(),
                code: "unsupported_schema_keyword",
                keyword: Some("foo".into()),
            },
            "response_format",
        );
        assert_eq!(
            (e.param.as_deref(), e.code),
            (Some("foo"), "unsupported_schema_keyword")
        );
        let e = grammar_error(
            GrammarError {
                message: "invalid grammar".into(),
                code: "invalid_grammar",
                keyword: None,
            },
            "grammar",
        );
        assert_eq!(
            (e.param.as_deref(), e.code),
            (Some("grammar"), "invalid_grammar")
        );
        assert_eq!(finish_with_calls("stop", 1), "tool_calls");
        assert_eq!(finish_with_calls("length", 1), "length");
        assert_eq!(finish_with_calls("stop", 0), "stop");
    }
}

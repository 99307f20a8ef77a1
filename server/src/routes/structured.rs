//! A request's constraint: its output format (`response_format`, `grammar`, `json_schema`)
//! or its tools (the calls' grammar in the model's own format, lazy from the format's
//! trigger under `tool_choice: auto`), compiled by the model's [`Grammars`] (cached by
//! grammar) into what makes each sequence's constraint. A grammar that cannot be compiled
//! is a 400 with its code (`invalid_schema`, `unsupported_schema_keyword` naming the
//! keyword as `param`, `invalid_grammar`, `grammar_too_large`).

use std::sync::Arc;

use superinfer_api::{GenParams, OutputFormat, ToolChoice, Tools};
use superinfer_runtime::core::generate::{Constraint, MaskStats};
use superinfer_runtime::core::tokenizer::{TokenType, Tokenizer};
use superinfer_runtime::scheduler::{Completion, ConstraintFactory, Request};
use superinfer_structured::{Compiled, Grammar, GrammarError, Grammars, Trigger};
use superinfer_template::tools::{call_grammar, Mode, ToolFormat, ToolSchema};

use crate::error::ApiError;

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

/// The error of a grammar that does not compile; `param` is the request field it came
/// from, or the schema keyword that cannot be enforced.
pub fn grammar_error(e: GrammarError, param: &str) -> ApiError {
    let param = e.keyword.clone().unwrap_or_else(|| param.to_string());
    ApiError::invalid(e.message)
        .with_param(&param)
        .with_code(e.code)
}

/// The plan of a request: tools (chat only) or an output format, not both (a forced tool
/// call and a JSON answer contradict each other).
pub fn plan(
    grammars: &Grammars,
    template_format: Option<ToolFormat>,
    tok: &Tokenizer,
    gen: &GenParams,
) -> Result<Plan, ApiError> {
    let tools = gen.tools.as_ref().filter(|t| t.choice != ToolChoice::None);
    match (tools, &gen.format) {
        (Some(_), Some(_)) => Err(ApiError::param(
            "response_format",
            "'response_format' (or 'grammar', 'json_schema') and 'tools' cannot be combined: \
             the answer is either calls or constrained text",
        )),
        (Some(t), None) => {
            // a template that knows no tools: the Hermes form, the most common one
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
) -> Result<Factory, ApiError> {
    let callable = t.callable();
    let schemas: Vec<ToolSchema> = callable
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
    // compiled here once, so that a trigger set that cannot compile is this request's 400
    compiled
        .try_lazy(triggers.clone())
        .map_err(|e| grammar_error(e, "tools"))?;
    Ok(Arc::new(move || compiled.lazy(triggers.clone())))
}

/// `request` with its constraint.
pub fn attach(mut request: Request, constraint: Option<Factory>) -> Request {
    request.constraint = constraint.map(ConstraintFactory::new);
    request
}

/// The cost of a completion's masks, when it had a constraint.
pub fn mask_of(c: &Completion) -> Option<&MaskStats> {
    c.mask.as_ref()
}

//! What a request may constrain its output with, and how a grammar fails.

use std::fmt;
use std::hash::{Hash, Hasher};

use llguidance::api::GrammarWithLexer;
use serde_json::Value;

use crate::gbnf;

/// A constraint on the output's text.
#[derive(Debug, Clone, PartialEq)]
pub enum Grammar {
    /// A JSON value that validates against this JSON Schema (every keyword enforced: one
    /// that cannot be is an error naming it).
    JsonSchema(Value),
    /// Any JSON object (OpenAI's `json_object`).
    JsonObject,
    /// Text matching this regular expression (Rust `regex` syntax), whole.
    Regex(String),
    /// A grammar in llguidance's Lark syntax.
    Lark(String),
    /// A grammar in llama.cpp's GBNF syntax (converted to Lark, see [`crate::gbnf`]).
    Gbnf(String),
}

/// Why a grammar was refused; `code` is stable (an API's error code).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrammarError {
    pub message: String,
    /// `invalid_schema`, `unsupported_schema_keyword`, `invalid_grammar` or
    /// `grammar_too_large`.
    pub code: &'static str,
    /// The schema keyword that cannot be enforced (`unsupported_schema_keyword`).
    pub keyword: Option<String>,
}

impl GrammarError {
    pub(crate) fn new(code: &'static str, message: impl Into<String>) -> GrammarError {
        GrammarError {
            message: message.into(),
            code,
            keyword: None,
        }
    }

    pub(crate) fn too_large(message: impl Into<String>) -> GrammarError {
        GrammarError::new("grammar_too_large", message)
    }

    /// Classifies an llguidance compile error for a grammar of this kind.
    pub(crate) fn from_llguidance(grammar: &Grammar, e: &str) -> GrammarError {
        // llguidance repeats the whole grammar in some messages: keep the first lines
        let message: String = e.lines().take(6).collect::<Vec<_>>().join("\n");
        let message = if message.len() > 2000 {
            let mut end = 2000;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}…", &message[..end])
        } else {
            message
        };
        if let Some(keys) = e.split("Unimplemented keys: ").nth(1) {
            // `Unimplemented keys: ["foo", "bar"]`
            let keyword = keys
                .split('"')
                .nth(1)
                .map(str::to_string)
                .unwrap_or_else(|| keys.trim().to_string());
            return GrammarError {
                message: format!(
                    "the JSON schema keyword `{keyword}` is not supported ({message})"
                ),
                code: "unsupported_schema_keyword",
                keyword: Some(keyword),
            };
        }
        if e.contains("oneOf constraints are not supported") {
            // llguidance turns a oneOf whose branches are verifiably disjoint (a
            // discriminator property with a distinct `const` in each, different types, ...)
            // into an anyOf, which is then exact; what is left could match two branches
            return GrammarError {
                message: "the JSON schema keyword `oneOf` is supported only where its branches \
                          cannot both match (e.g. each has a required property with a distinct \
                          `const`, as Pydantic's discriminated unions do); use `anyOf` if an \
                          answer may match several"
                    .to_string(),
                code: "unsupported_schema_keyword",
                keyword: Some("oneOf".to_string()),
            };
        }
        if let Some(f) = e.split("Unknown format: ").nth(1) {
            let f = f.lines().next().unwrap_or("").trim();
            return GrammarError {
                message: format!("the JSON schema string format `{f}` is not supported"),
                code: "unsupported_schema_keyword",
                keyword: Some("format".to_string()),
            };
        }
        let limit = [
            "too big",
            "Too many items",
            "max is",
            "lexer precomputation failed",
            "fuel",
            "too large",
            "Too many",
            "too deeply nested",
        ];
        if limit.iter().any(|l| e.contains(l)) {
            return GrammarError::too_large(format!(
                "the grammar is too large or complex: {message}"
            ));
        }
        match grammar {
            Grammar::JsonSchema(_) | Grammar::JsonObject => {
                GrammarError::new("invalid_schema", format!("invalid JSON schema: {message}"))
            }
            _ => GrammarError::new("invalid_grammar", format!("invalid grammar: {message}")),
        }
    }
}

impl fmt::Display for GrammarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for GrammarError {}

/// How JSON is written under a schema: one space after `:` and `,` (what models write most
/// often) and no other whitespace, so keys and punctuation are forced.
pub(crate) fn json_options() -> Value {
    serde_json::json!({
        "item_separator": ", ",
        "key_separator": ": ",
        "whitespace_flexible": false,
        "lenient": false,
    })
}

impl Grammar {
    /// A short name of the kind, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Grammar::JsonSchema(_) => "json_schema",
            Grammar::JsonObject => "json_object",
            Grammar::Regex(_) => "regex",
            Grammar::Lark(_) => "lark",
            Grammar::Gbnf(_) => "gbnf",
        }
    }

    /// The cache key: a hash of the kind and the text (a schema's canonical JSON).
    pub(crate) fn key(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.kind().hash(&mut h);
        match self {
            Grammar::JsonSchema(v) => serde_json::to_string(v).unwrap_or_default().hash(&mut h),
            Grammar::JsonObject => {}
            Grammar::Regex(s) | Grammar::Lark(s) | Grammar::Gbnf(s) => s.hash(&mut h),
        }
        h.finish()
    }

    /// The grammar as llguidance takes it, named `name` (GBNF converted to Lark first).
    pub(crate) fn to_llguidance(&self, name: &str) -> Result<GrammarWithLexer, GrammarError> {
        let mut g = match self {
            Grammar::JsonSchema(schema) => {
                if !(schema.is_object() || schema.is_boolean()) {
                    return Err(GrammarError::new(
                        "invalid_schema",
                        "invalid JSON schema: a schema is an object or a boolean",
                    ));
                }
                let mut schema = schema.clone();
                if let Value::Object(m) = &mut schema {
                    // our own formatting options, whatever the schema says
                    m.insert("x-guidance".to_string(), json_options());
                }
                GrammarWithLexer::from_json_schema(schema)
            }
            Grammar::JsonObject => {
                let mut schema = serde_json::json!({"type": "object"});
                schema["x-guidance"] = json_options();
                GrammarWithLexer::from_json_schema(schema)
            }
            Grammar::Regex(rx) => GrammarWithLexer::from_regex(rx),
            Grammar::Lark(text) => GrammarWithLexer::from_lark(text.clone()),
            Grammar::Gbnf(text) => {
                let lark = gbnf::gbnf_to_lark(text).map_err(|e| {
                    GrammarError::new("invalid_grammar", format!("invalid GBNF grammar: {e}"))
                })?;
                GrammarWithLexer::from_lark(lark)
            }
        };
        g.name = Some(name.to_string());
        Ok(g)
    }
}

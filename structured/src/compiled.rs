//! A compiled grammar: a parser in its start state with its first mask computed, cloned
//! for each sequence; and its lazy variants (free text until a trigger).

use llguidance::Instant;
use std::sync::{Arc, Mutex};

use llguidance::api::{GrammarWithLexer, TopLevelGrammar};
use llguidance::{Matcher, ParserFactory};
use superinfer_core::generate::Constraint;

use crate::constraint::{Pipelined, Step};
use crate::grammar::{Grammar, GrammarError};

/// What starts a lazy grammar ([`Compiled::lazy`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// This token (a special token such as Llama's `<|python_tag|>`, or any other: then
    /// its text is the trigger).
    Token(u32),
    /// This text, wherever the output has it (across token boundaries).
    Text(String),
}

/// What the compiler shares with every grammar of a model.
pub(crate) struct Shared {
    pub factory: ParserFactory,
    /// Which tokens are special (control) tokens, and each token's text.
    pub special: Vec<bool>,
    pub texts: Vec<String>,
}

/// A parser in its start state, its first step computed.
pub(crate) struct Prepared {
    matcher: Mutex<Matcher>,
    first: Step,
    compile_us: u32,
}

impl Prepared {
    /// Compiles `top` (on the calling thread) and computes its first step; errors are
    /// llguidance's messages.
    pub fn new(shared: &Shared, top: TopLevelGrammar) -> Result<Prepared, String> {
        let t0 = Instant::now();
        let parser = shared
            .factory
            .create_parser(top)
            .map_err(|e| e.to_string())?;
        let mut matcher = Matcher::new(Ok(parser));
        let first = Step::compute(&mut matcher);
        if let Some(e) = matcher.get_error() {
            return Err(e);
        }
        let compile_us = t0.elapsed().as_micros().min(u32::MAX as u128) as u32;
        Ok(Prepared {
            matcher: Mutex::new(matcher),
            first,
            compile_us,
        })
    }

    fn constraint(&self) -> Box<dyn Constraint> {
        let m = self
            .matcher
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        Box::new(Pipelined::new(m, self.first.clone(), self.compile_us))
    }
}

/// A lazy variant: its triggers, and its compile.
type LazyEntry = (Vec<Trigger>, Arc<Result<Prepared, GrammarError>>);

/// A compiled grammar ([`crate::Grammars::compile`]): makes each sequence's constraint.
pub struct Compiled {
    pub(crate) grammar: Grammar,
    shared: Arc<Shared>,
    body: GrammarWithLexer,
    prepared: Prepared,
    /// Lazy variants made so far, by triggers (a few per grammar at most).
    lazy: Mutex<Vec<LazyEntry>>,
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled")
            .field("kind", &self.grammar.kind())
            .field("compile_us", &self.prepared.compile_us)
            .finish()
    }
}

/// Lazy variants kept per grammar.
const LAZY_KEPT: usize = 8;

impl Compiled {
    pub(crate) fn new(
        grammar: Grammar,
        shared: Arc<Shared>,
        body: GrammarWithLexer,
        prepared: Prepared,
    ) -> Compiled {
        Compiled {
            grammar,
            shared,
            body,
            prepared,
            lazy: Mutex::new(Vec::new()),
        }
    }

    /// The grammar this was compiled from.
    pub fn grammar(&self) -> &Grammar {
        &self.grammar
    }

    /// Microseconds the compile took (with the first mask).
    pub fn compile_us(&self) -> u32 {
        self.prepared.compile_us
    }

    /// Does `text`, whole, follow the grammar (the text alone: no special token)?
    pub fn accepts(&self, text: &str) -> bool {
        let mut m = self
            .prepared
            .matcher
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let toks = self
            .shared
            .factory
            .tok_env()
            .tokenize_bytes(text.as_bytes());
        match m.try_consume_tokens(&toks) {
            Ok(n) if n == toks.len() => {
                !m.is_error() && (m.is_stopped() || m.is_accepting().unwrap_or(false))
            }
            _ => false,
        }
    }

    /// A new sequence's constraint: the whole output follows the grammar.
    pub fn constraint(&self) -> Box<dyn Constraint> {
        self.prepared.constraint()
    }

    /// A new sequence's constraint that leaves the output free until one of `triggers`
    /// appears, then applies the grammar to what follows the trigger (the trigger itself
    /// belongs to the free text), to the end of the output. Without any trigger in the
    /// output, the output is free. A trigger set that cannot compile (see
    /// [`Self::try_lazy`]) gives a constraint that ends the sequence at once.
    pub fn lazy(&self, triggers: Vec<Trigger>) -> Box<dyn Constraint> {
        match self.try_lazy(triggers) {
            Ok(c) => c,
            Err(_) => Box::new(Pipelined::failed()),
        }
    }

    /// [`Self::lazy`], or why its grammar cannot compile (no trigger, a token id out of
    /// the vocabulary, an empty text).
    pub fn try_lazy(&self, triggers: Vec<Trigger>) -> Result<Box<dyn Constraint>, GrammarError> {
        let mut cache = self.lazy.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = cache.iter().position(|(t, _)| *t == triggers) {
            let entry = cache.remove(i);
            let r = entry.1.clone();
            cache.insert(0, entry);
            drop(cache);
            return match &*r {
                Ok(p) => Ok(p.constraint()),
                Err(e) => Err(e.clone()),
            };
        }
        drop(cache);
        let r = Arc::new(self.compile_lazy(&triggers));
        let mut cache = self.lazy.lock().unwrap_or_else(|e| e.into_inner());
        cache.insert(0, (triggers, r.clone()));
        cache.truncate(LAZY_KEPT);
        drop(cache);
        match &*r {
            Ok(p) => Ok(p.constraint()),
            Err(e) => Err(e.clone()),
        }
    }

    fn compile_lazy(&self, triggers: &[Trigger]) -> Result<Prepared, GrammarError> {
        let lark = lazy_lark(&self.shared, triggers)?;
        let top = TopLevelGrammar {
            grammars: vec![GrammarWithLexer::from_lark(lark), self.body.clone()],
            max_tokens: None,
        };
        let shared = self.shared.clone();
        let grammar = self.grammar.clone();
        crate::cache::on_big_stack(move || {
            Prepared::new(&shared, top).map_err(|e| GrammarError::from_llguidance(&grammar, &e))
        })
    }
}

/// The Lark grammar of free text, then a trigger, then the body grammar (`@body`).
fn lazy_lark(shared: &Shared, triggers: &[Trigger]) -> Result<String, GrammarError> {
    let bad = |m: String| GrammarError::new("invalid_grammar", m);
    if triggers.is_empty() {
        return Err(bad("a lazy grammar needs at least one trigger".into()));
    }
    let mut texts = Vec::new();
    let mut tokens = Vec::new();
    for t in triggers {
        match t {
            Trigger::Token(id) => {
                let i = *id as usize;
                if i >= shared.special.len() {
                    return Err(bad(format!("trigger token {id} is not in the vocabulary")));
                }
                if shared.special[i] {
                    tokens.push(*id);
                } else if shared.texts[i].is_empty() {
                    return Err(bad(format!("trigger token {id} has no text")));
                } else {
                    texts.push(shared.texts[i].clone());
                }
            }
            Trigger::Text(s) if s.is_empty() => {
                return Err(bad("a trigger text is empty".into()));
            }
            Trigger::Text(s) => texts.push(s.clone()),
        }
    }
    let mut g = String::from("%llguidance {}\n\n");
    let mut alts = vec!["FREE".to_string()];
    if texts.is_empty() {
        g.push_str("FREE: /(?s:.*)/\n");
    } else {
        let rx = texts
            .iter()
            .map(|t| escape_regex(t))
            .collect::<Vec<_>>()
            .join("|");
        g.push_str(&format!(
            "FREE: /(?s:.*)/ & ~/(?s:.*)(?:{rx})(?s:.*)/\nhead[lazy]: /(?s:.*)(?:{rx})/\n"
        ));
        alts.push("head @body".to_string());
    }
    if !tokens.is_empty() {
        let ids = tokens
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        alts.push(format!("FREE <[{ids}]> @body"));
    }
    g.push_str(&format!("start: {}\n", alts.join(" | ")));
    Ok(g)
}

/// `s` as a literal inside Lark's `/…/`.
fn escape_regex(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for c in s.chars() {
        match c {
            '\\' | '.' | '+' | '*' | '?' | '(' | ')' | '|' | '[' | ']' | '{' | '}' | '^' | '$'
            | '#' | '&' | '-' | '~' | '/' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            _ => out.push(c),
        }
    }
    out
}

pub(crate) fn body_name() -> &'static str {
    "body"
}

//! `--json-schema FILE`, `--grammar-file FILE`, `--regex RX`, `--json` of `run` and `chat`:
//! the grammar the output must follow, read and compiled before the model generates (a
//! bad one is an error naming the problem).

use std::path::Path;
use std::sync::Arc;

use superinfer_runtime::core::generate::MaskStats;
use superinfer_runtime::{Engine, GenerateStats};
use superinfer_structured::{Compiled, Grammar, Grammars};

use crate::args::GrammarArgs;

/// The grammar the flags ask for (at most one of them), read from its file.
pub fn load(a: &GrammarArgs) -> Result<Option<Grammar>, String> {
    let given = [
        a.json_schema.is_some(),
        a.grammar_file.is_some(),
        a.regex.is_some(),
        a.json,
    ];
    if given.iter().filter(|&&g| g).count() > 1 {
        return Err(
            "--json-schema, --grammar-file, --regex and --json exclude each other: give one".into(),
        );
    }
    if let Some(f) = &a.json_schema {
        let text = read(f)?;
        let schema: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", f.display()))?;
        return Ok(Some(Grammar::JsonSchema(schema)));
    }
    if let Some(f) = &a.grammar_file {
        let text = read(f)?;
        return Ok(Some(grammar_of_file(f, text)));
    }
    if let Some(rx) = &a.regex {
        return Ok(Some(Grammar::Regex(rx.clone())));
    }
    Ok(a.json.then_some(Grammar::JsonObject))
}

/// A grammar file by its extension (`.gbnf`, `.lark`), else by its content: GBNF defines
/// rules with `::=`.
pub fn grammar_of_file(f: &Path, text: String) -> Grammar {
    match f.extension().and_then(|e| e.to_str()) {
        Some("gbnf") => Grammar::Gbnf(text),
        Some("lark") => Grammar::Lark(text),
        _ if text.contains("::=") => Grammar::Gbnf(text),
        _ => Grammar::Lark(text),
    }
}

fn read(f: &Path) -> Result<String, String> {
    std::fs::read_to_string(f).map_err(|e| format!("reading {}: {e}", f.display()))
}

/// The flags' grammar compiled for `engine`'s tokenizer (`None`: no grammar).
pub fn compile(a: &GrammarArgs, engine: &Engine) -> Result<Option<Arc<Compiled>>, String> {
    let Some(g) = load(a)? else {
        return Ok(None);
    };
    let grammars = Grammars::new(engine.tokenizer());
    let kind = g.kind();
    grammars
        .compile(&g)
        .map(Some)
        .map_err(|e| format!("the {kind} cannot be used: {e}"))
}

/// One line on what the grammar cost: its masks (median, p99, max, the first) and the
/// tokens it forced.
pub fn describe(m: &MaskStats, stats: &GenerateStats) -> String {
    format!(
        "grammar: {} masks, median {} µs, p99 {} µs, max {} µs, first {} µs, compile {} ms | forced tokens: {} in {} steps",
        m.masks,
        m.median_us,
        m.p99_us,
        m.max_us,
        m.first_mask_us,
        m.compile_us / 1000,
        stats.drafted,
        stats.verify_steps,
    )
}

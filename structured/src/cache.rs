//! `Grammars`: one model's grammar compiler, with its cache of compiled grammars.

use std::sync::{Arc, Mutex};

use llguidance::ParserFactory;
use superinfer_core::tokenizer::Tokenizer;

use crate::compiled::{body_name, Compiled, Prepared, Shared};
use crate::grammar::{Grammar, GrammarError};
use crate::{limits, tokens};

/// Compiled grammars kept (least recently used dropped first).
const CACHE_ENTRIES: usize = 64;

type Entry = (u64, Grammar, Result<Arc<Compiled>, GrammarError>);

/// A model's grammar compiler: its tokenizer's token trie (built once), and the grammars
/// compiled so far, cached by hash so that a repeated schema compiles once. Shared by every
/// request of a server (`Send + Sync`).
pub struct Grammars {
    shared: Result<Arc<Shared>, String>,
    cache: Mutex<Vec<Entry>>,
}

impl std::fmt::Debug for Grammars {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grammars").finish_non_exhaustive()
    }
}

impl Grammars {
    /// The compiler for `tok`'s model (builds its token trie: tens of milliseconds at a
    /// 150k vocabulary).
    pub fn new(tok: &Tokenizer) -> Grammars {
        let env = tokens::env(tok);
        let shared = ParserFactory::new_simple(&env)
            .map(|mut factory| {
                factory.quiet();
                *factory.limits_mut() = limits::parser_limits();
                let n = tok.vocab_size() as u32;
                Arc::new(Shared {
                    factory,
                    special: (0..n).map(|id| tokens::is_special(tok, id)).collect(),
                    texts: (0..n)
                        .map(|id| {
                            String::from_utf8_lossy(tok.token_to_piece(id, false)).into_owned()
                        })
                        .collect(),
                })
            })
            .map_err(|e| e.to_string());
        Grammars {
            shared,
            cache: Mutex::new(Vec::new()),
        }
    }

    /// `g` compiled (or the compile of an equal grammar before, from the cache).
    pub fn compile(&self, g: &Grammar) -> Result<Arc<Compiled>, GrammarError> {
        let key = g.key();
        {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(i) = cache.iter().position(|(k, h, _)| *k == key && h == g) {
                let entry = cache.remove(i);
                let r = entry.2.clone();
                cache.insert(0, entry);
                return r;
            }
        }
        let r = self.compile_uncached(g);
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = cache.iter().position(|(k, h, _)| *k == key && h == g) {
            // compiled meanwhile by another request: keep one
            return cache[i].2.clone();
        }
        cache.insert(0, (key, g.clone(), r.clone()));
        cache.truncate(CACHE_ENTRIES);
        r
    }

    fn compile_uncached(&self, g: &Grammar) -> Result<Arc<Compiled>, GrammarError> {
        let shared = match &self.shared {
            Ok(s) => s.clone(),
            Err(e) => {
                return Err(GrammarError::new(
                    "invalid_grammar",
                    format!("the tokenizer cannot be used for grammars: {e}"),
                ))
            }
        };
        limits::check(g)?;
        let body = g.to_llguidance(body_name())?;
        let g2 = g.clone();
        let prepared = {
            let shared = shared.clone();
            let body = body.clone();
            on_big_stack(move || {
                let top = llguidance::api::TopLevelGrammar::from_grammar(body);
                Prepared::new(&shared, top).map_err(|e| GrammarError::from_llguidance(&g2, &e))
            })?
        };
        Ok(Arc::new(Compiled::new(g.clone(), shared, body, prepared)))
    }
}

/// Runs `f` on a thread with a large stack (deep grammars recurse), or here where threads
/// cannot be made; a panic inside becomes an error.
pub(crate) fn on_big_stack<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, GrammarError> + Send + 'static,
) -> Result<T, GrammarError> {
    let internal = || GrammarError::new("invalid_grammar", "the grammar compiler failed");
    #[cfg(not(target_family = "wasm"))]
    {
        let spawned = std::thread::Builder::new()
            .name("grammar-compile".into())
            .stack_size(limits::COMPILE_STACK)
            .spawn(f);
        match spawned {
            Ok(h) => h.join().unwrap_or_else(|_| Err(internal())),
            Err(_) => Err(internal()),
        }
    }
    #[cfg(target_family = "wasm")]
    {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .unwrap_or_else(|_| Err(internal()))
    }
}

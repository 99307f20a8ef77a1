//! One loaded model and its conversation: the weights borrowed from the model buffer, a
//! [`Context`] of the one forward path, the chat template, and a token-by-token generation
//! the JavaScript side drives (so it can stop between any two tokens, and between chunks of
//! a prompt). A request's output format or tools are planned as the server plans them
//! ([`superinfer_api::plan()`]: compiled by the model's [`Grammars`] into the generation's
//! constraint), and its answer is read as the server reads it (the template's
//! [`ToolParser`]: reasoning, content and tool calls).

use core::mem::ManuallyDrop;

use serde_json::{json, Map, Value};
use superinfer_api::{Endpoint, GenParams, Prompt};
use superinfer_core::generate::{
    Context, ContextOptions, GenerateParams, Generation, Model, NoDrafter, StopReason, Token,
};
use superinfer_core::gguf::{keys, GgufFile};
use superinfer_core::kernels::Kernels;
use superinfer_core::parallel::Parallel;
use superinfer_core::sampler::Sampler;
use superinfer_core::tokenizer::Tokenizer;
use superinfer_structured::Grammars;
use superinfer_template::reasoning::Syntax;
use superinfer_template::tools::{prepare_messages, ToolDelta, ToolFormat, ToolParser};
use superinfer_template::{choose, ChatTemplate};

use crate::buffer::{Layout, ModelBuffer};
use crate::errors::{Failure, Result};

/// How the context is sized (`load`'s `nCtx`, `nBatch`).
pub fn context_options(opts: &Value) -> ContextOptions {
    let n = |k: &str| opts.get(k).and_then(Value::as_u64).unwrap_or(0) as usize;
    ContextOptions {
        n_ctx: n("n_ctx"),
        n_batch: n("n_batch"),
        ..Default::default()
    }
}

pub struct Engine {
    // Dropped by hand, in this order: the context borrows the model, which borrows the bytes.
    ctx: ManuallyDrop<Context<'static>>,
    model: &'static Model<'static>,
    bytes: &'static [u8],
    template: ChatTemplate,
    /// The format the template's model writes tool calls in (`None`: it knows no tools).
    tool_format: Option<ToolFormat>,
    /// The model's grammar compiler and its cache, built by the first request that asks
    /// for a format or tools (its token trie costs time and memory a plain chat never needs).
    grammars: Option<Grammars>,
    info: Value,
    gen: Option<Call>,
}

/// The state of one `complete` / `chat` call: core's generation (the per-token rules), and
/// how much of its prompt is evaluated (the first tokens came from the previous call's
/// cache).
struct Call {
    gen: Generation,
    fed: usize,
    /// Reads the answer into reasoning, content and calls (a completion's text is all
    /// content).
    parser: ToolParser,
}

impl Engine {
    /// Takes over the filled buffer (one file, its byte ranges, or a split model's shards);
    /// its steps run on `par`. On failure the buffer is freed.
    pub fn load(
        buffer: ModelBuffer,
        kernels: Kernels,
        par: &'static dyn Parallel,
        opts: &ContextOptions,
    ) -> Result<Engine> {
        let files = buffer.files();
        let layout = buffer.layout();
        let sizes = buffer.sizes().to_vec();
        let bytes = buffer.leak();
        let built = check_parts(bytes, layout, &sizes)
            .and_then(|()| Self::build(bytes, &files, kernels, par, opts));
        match built {
            Ok(e) => Ok(e),
            Err(e) => {
                // SAFETY: `build` dropped everything that borrowed the bytes.
                unsafe { ModelBuffer::free_leaked(bytes) };
                Err(e)
            }
        }
    }

    /// `files`: the `(offset, length)` of the file, or of each shard, in `bytes`.
    fn build(
        bytes: &'static [u8],
        files: &[(usize, usize)],
        kernels: Kernels,
        par: &'static dyn Parallel,
        opts: &ContextOptions,
    ) -> Result<Engine> {
        let mut shards = Vec::with_capacity(files.len());
        for (i, &(at, len)) in files.iter().enumerate() {
            let part = bytes
                .get(at..at + len)
                .ok_or_else(|| Failure::new("internal", "a part lies outside the model buffer"))?;
            let f = GgufFile::parse(part).map_err(|e| {
                let e = Failure::from(e);
                match files.len() {
                    1 => e,
                    _ => Failure::new(e.code, format!("part {}: {}", i + 1, e.message)),
                }
            })?;
            shards.push(f);
        }
        let file = GgufFile::from_shards(shards)?;
        let meta = |k: &str| file.get_str(k).ok().flatten().map(str::to_string);
        let arch = meta(keys::GENERAL_ARCHITECTURE).unwrap_or_default();
        let name = meta(keys::GENERAL_NAME);
        let file_template = meta(keys::TOKENIZER_CHAT_TEMPLATE);
        let file_size: usize = files.iter().map(|f| f.1).sum();
        let n_shards = file.n_shards();

        let model: &'static Model<'static> = Box::leak(Box::new(Model::from_file(&file, kernels)?));
        drop(file);
        let free_model = || {
            // SAFETY: leaked just above; nothing borrows it when this runs.
            unsafe {
                drop(Box::from_raw(
                    model as *const Model<'static> as *mut Model<'static>,
                ))
            }
        };
        let ctx = match Context::new(model, par, opts) {
            Ok(c) => c,
            Err(e) => {
                free_model();
                return Err(e.into());
            }
        };
        let tok = model.tokenizer();
        let text = |id: Option<u32>| id.map(|t| tok.token_text(t)).unwrap_or_default();
        let chosen = choose(
            None,
            file_template.as_deref(),
            &arch,
            &text(tok.bos()),
            &text(tok.eos()),
        );
        let (template, origin) = match chosen {
            Ok(t) => t,
            Err(e) => {
                drop(ctx);
                free_model();
                return Err(e.into());
            }
        };
        let c = model.config();
        let info = json!({
            "architecture": arch,
            "name": name,
            "file_size": file_size,
            "shards": n_shards,
            "n_ctx": ctx.n_ctx(),
            "n_ctx_train": c.n_ctx_train,
            "n_batch": ctx.n_batch(),
            "n_vocab": c.n_vocab,
            "n_layer": c.n_layer,
            "n_embd": c.n_embd,
            "kv_cache_bytes": ctx.kv_cache_bytes(),
            "isa": model.kernels().isa().name(),
            // this module's own build: the relaxed-simd kernels (core's kernels/wasm32/relaxed.rs)
            "relaxed_simd": cfg!(target_feature = "relaxed-simd"),
            "threads": par.threads(),
            "chat_template": origin.name(),
            "bos": tok.bos(),
            "eos": tok.eos(),
        });
        Ok(Engine {
            ctx: ManuallyDrop::new(ctx),
            model,
            bytes,
            tool_format: ToolFormat::of_template(template.source()),
            template,
            grammars: None,
            info,
            gen: None,
        })
    }

    pub fn info(&self) -> &Value {
        &self.info
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        self.model.tokenizer()
    }

    /// `llama_tokenize(text, add_special, parse_special)`.
    pub fn tokenize(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<u32>> {
        Ok(self.tokenizer().encode(text, add_special, parse_special)?)
    }

    /// The text of `ids` (control tokens' text only when `special`).
    pub fn detokenize(&self, ids: &[u32], special: bool) -> Result<String> {
        self.check_ids(ids)?;
        Ok(self.tokenizer().decode(ids, special))
    }

    fn check_ids(&self, ids: &[u32]) -> Result<()> {
        let n = self.tokenizer().vocab_size();
        match ids.iter().find(|&&t| t as usize >= n) {
            Some(t) => Err(Failure::new(
                "invalid_argument",
                format!("token id {t} is outside the vocabulary of {n} tokens"),
            )),
            None => Ok(()),
        }
    }

    /// The prompt text of a conversation (`messages`: OpenAI's array of `{role, content}`,
    /// checked as the server checks it; `tools`: the request's tools, which the template
    /// renders into its system turn), rendered with the model's chat template, ending with
    /// the assistant's turn opening.
    pub fn render_chat(&self, messages: &Value, tools: Option<&Value>) -> Result<String> {
        let mut body = Map::from_iter([("messages".to_string(), messages.clone())]);
        if let Some(t) = tools.filter(|t| !t.is_null()) {
            body.insert("tools".to_string(), t.clone());
        }
        let tools = superinfer_api::tools(&body)?;
        self.render_messages(&body, tools.as_ref())
    }

    /// The request's conversation rendered as the server renders it: earlier calls'
    /// arguments as the templates expect them, the tools (whatever `tool_choice` says) as
    /// the template's `tools` variable.
    fn render_messages(
        &self,
        body: &Map<String, Value>,
        tools: Option<&superinfer_api::Tools>,
    ) -> Result<String> {
        let messages = prepare_messages(&superinfer_api::messages(body)?);
        let mut vars = Map::new();
        if let Some(t) = tools {
            vars.insert("tools".to_string(), t.raw());
        }
        Ok(self.template.render_with(&messages, true, &vars)?)
    }

    /// Tokens of a prompt text ([`Tokenizer::encode_prompt`], as `superinfer run` and the
    /// server encode it).
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<u32>> {
        Ok(self.tokenizer().encode_prompt(text)?)
    }

    /// Starts a generation. `req`: the fields of OpenAI's requests, parsed as the server
    /// parses them (`superinfer-api`: a wrong type or value is a failure naming the field):
    /// `messages` (a chat), else `prompt` (text or token ids); `max_tokens`, sampling
    /// (`temperature`, `top_k`, `top_p`, `min_p`, `repeat_penalty`, `repeat_last_n`,
    /// `frequency_penalty`, `presence_penalty`, `seed`), `stop` and `ignore_eos` (go on past
    /// end-of-generation tokens, for benchmarks); the output's shape (`response_format`,
    /// `grammar`, `json_schema`) and, for a chat, `tools`, `tool_choice`,
    /// `parallel_tool_calls` and `reasoning_format` (`auto`, `deepseek`: the reasoning apart,
    /// the default; `none`: in the content). A schema or grammar that cannot be enforced
    /// fails with its code (`invalid_schema`, `unsupported_schema_keyword`, ...). The cache
    /// keeps the longest prefix this prompt shares with the previous conversation.
    pub fn begin(&mut self, req: &Value) -> Result<Value> {
        self.gen = None;
        let body = req
            .as_object()
            .ok_or_else(|| Failure::new("invalid_argument", "a request must be a JSON object"))?;
        let chat = body.get("messages").is_some_and(|m| !m.is_null());
        let endpoint = if chat {
            Endpoint::Chat
        } else {
            Endpoint::Completions
        };
        let params = GenParams::parse(body, endpoint)?;
        // the reasoning apart unless the request says `none` (the server's default, `auto`)
        let extract = superinfer_api::reasoning_format(body)?.unwrap_or(true);
        let (prompt, text) = if chat {
            let text = self.render_messages(body, params.tools.as_ref())?;
            (self.encode_prompt(&text)?, text)
        } else {
            let ids = match superinfer_api::prompt(body)? {
                Prompt::Text(text) => self.encode_prompt(&text)?,
                Prompt::Tokens(ids) => {
                    self.check_ids(&ids)?;
                    ids
                }
            };
            (ids, String::new())
        };
        if prompt.is_empty() {
            return Err(Failure::new("invalid_argument", "the prompt is empty"));
        }
        let n_ctx = self.ctx.n_ctx();
        if prompt.len() >= n_ctx {
            return Err(Failure::new(
                "context_length_exceeded",
                format!(
                    "the prompt is {} tokens, and the context holds {n_ctx} (load with a larger \
                     nCtx, up to {}, or shorten the prompt)",
                    prompt.len(),
                    self.model.config().n_ctx_train
                ),
            ));
        }
        let tok = self.model.tokenizer();
        let plan = if params.format.is_some() || params.tools.is_some() {
            let grammars = self.grammars.get_or_insert_with(|| Grammars::new(tok));
            let tool_format = if chat { self.tool_format } else { None };
            superinfer_api::plan(grammars, tool_format, tok, &params)?
        } else {
            superinfer_api::Plan::default()
        };
        // the request's seed, else SamplerConfig's (the package always sends one)
        let sampler = Sampler::new(params.sampling)?;
        let parser = if chat {
            // the calls' ids: from the seed, and differing from one turn to the next
            let ids = params.seed.unwrap_or(0) ^ ((prompt.len() as u64) << 32);
            let syntax = self.template.syntax();
            ToolParser::new(plan.tool_format, syntax, extract, &text, ids)
        } else {
            ToolParser::new(None, Syntax::Plain, false, "", 0)
        };
        let keep = self.ctx.keep_prefix(&prompt);
        let n_prompt = prompt.len();
        let rules = GenerateParams {
            // without a limit, generation ends at the end of the context
            max_tokens: params.max_tokens.unwrap_or(n_ctx),
            ignore_eos: params.ignore_eos,
            stop: params.stop,
            logprobs: None,
        };
        let mut gen = Generation::new(prompt, sampler, &rules, n_ctx, tok);
        if let Some(make) = &plan.constraint {
            gen = gen.with_constraint(make());
        }
        self.gen = Some(Call {
            gen,
            fed: keep,
            parser,
        });
        Ok(json!({ "prompt_tokens": n_prompt, "cached_tokens": keep }))
    }

    /// Evaluates up to `n` more prompt tokens; returns how many are left.
    pub fn prefill(&mut self, n: usize) -> Result<usize> {
        let g = self.gen.as_mut().ok_or_else(no_generation)?;
        let prompt = &g.gen.history()[..g.gen.prompt_len()];
        let end = (g.fed + n.max(1)).min(prompt.len());
        if g.fed < end {
            if let Err(e) = self.ctx.feed(&prompt[g.fed..end]) {
                self.gen = None;
                return Err(e.into());
            }
            g.fed = end;
        }
        Ok(prompt.len() - g.fed)
    }

    /// One step of the generation (core's `Context::step`: the token sampled last is
    /// evaluated, the next sampled). Returns `{id, ids, text, finish, generated}` and what
    /// the step added to the answer (`reasoning`, `content`, `tool_calls`: OpenAI's
    /// `delta.tool_calls` entries): `ids` the tokens emitted (one, or none when the generation ended
    /// without a token of its own: an end-of-generation token; more when the constraint
    /// forced some), `id` the last of them or null, `text` their text, `finish` null while
    /// generation goes on, else `"stop"` (end of generation, a stop string, or the grammar
    /// complete) or `"length"` (`max_tokens` or a full context), `generated` the tokens of
    /// the answer so far (the usage's `completion_tokens`, as the server counts them: an
    /// end-of-generation token is not one). Once `finish` is set, [`Self::end`] gives the
    /// rest of the answer.
    pub fn next_token(&mut self) -> Result<Value> {
        let g = self.gen.as_mut().ok_or_else(no_generation)?;
        if g.gen.stop().is_some() || g.fed < g.gen.prompt_len() {
            return Err(Failure::new(
                "invalid_argument",
                "next_token() needs the prompt evaluated first (prefill until 0 remain)",
            ));
        }
        let (mut ids, mut text) = (Vec::new(), String::new());
        let step = self
            .ctx
            .step(&mut g.gen, None::<&mut NoDrafter>, &mut |t: Token<'_>| {
                if t.id != Token::FLUSH {
                    ids.push(t.id);
                }
                text.push_str(t.text);
                core::ops::ControlFlow::Continue(())
            });
        let finish = match step {
            Ok(stop) => stop.map(finish_reason),
            Err(e) => {
                self.gen = None;
                return Err(e.into());
            }
        };
        let mut out = delta_json(&g.parser.push(&text));
        out["id"] = json!(ids.last());
        out["ids"] = json!(ids);
        out["text"] = json!(text);
        out["finish"] = json!(finish);
        out["generated"] = json!(g.gen.emitted());
        Ok(out)
    }

    /// Ends the answer (after its last step, or when JS stops it early): what the reader
    /// held back (a marker that might have begun), as `{reasoning, content, tool_calls}`,
    /// with the whole answer's calls (`calls`: OpenAI's `message.tool_calls`) and its
    /// `finish_reason` (`tool_calls` when it ended calling tools; null when it did not end
    /// by itself).
    pub fn end(&mut self) -> Result<Value> {
        let g = self.gen.as_mut().ok_or_else(no_generation)?;
        let mut out = delta_json(&g.parser.finish());
        let calls = g.parser.calls();
        out["calls"] = superinfer_api::tool_calls_json(calls);
        out["finish_reason"] = json!(g
            .gen
            .stop()
            .map(|s| superinfer_api::finish_with_calls(finish_reason(s), calls.len())));
        Ok(out)
    }
}

/// What a piece of the answer added: `{reasoning, content, tool_calls}` (the calls' deltas
/// as the server streams them: [`superinfer_api::call_delta_json`]).
fn delta_json(d: &ToolDelta) -> Value {
    let calls: Vec<Value> = d
        .calls
        .iter()
        .map(superinfer_api::call_delta_json)
        .collect();
    json!({ "reasoning": d.reasoning, "content": d.content, "tool_calls": calls })
}

/// OpenAI's `finish_reason` for why a generation stopped.
fn finish_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::Length | StopReason::ContextFull => "length",
        StopReason::EndOfGeneration | StopReason::StopSequence | StopReason::Cancelled => "stop",
    }
}

fn no_generation() -> Failure {
    Failure::new(
        "invalid_argument",
        "no generation in progress (call begin first)",
    )
}

/// Every part was written, and byte ranges are not whole GGUF files (the shards of a split
/// model must come in order, the first first, for the first's header to say they are shards).
fn check_parts(bytes: &[u8], layout: Layout, sizes: &[usize]) -> Result<()> {
    if layout == Layout::Undecided && sizes.len() > 1 {
        return Err(Failure::new(
            "invalid_argument",
            "the model's parts were not all written",
        ));
    }
    if layout != Layout::Ranges {
        return Ok(());
    }
    let mut at = 0;
    for (i, &len) in sizes.iter().enumerate() {
        if i > 0 && len >= 4 && bytes.get(at..at + 4) == Some(&b"GGUF"[..]) {
            return Err(Failure::new(
                "invalid_argument",
                format!(
                    "part {} is a GGUF file of its own, but the first part is not the first \
                     shard of a split model (gguf-split): pass one file's byte ranges, or a split \
                     model's shards in order, the first one first",
                    i + 1
                ),
            ));
        }
        at += len;
    }
    Ok(())
}

impl Drop for Engine {
    fn drop(&mut self) {
        // SAFETY: the context goes first (it borrows the model), then the model (it borrows
        // the bytes), then the bytes; none is used afterwards.
        unsafe {
            ManuallyDrop::drop(&mut self.ctx);
            drop(Box::from_raw(
                self.model as *const Model<'static> as *mut Model<'static>,
            ));
            ModelBuffer::free_leaked(self.bytes);
        }
    }
}
